/* SPDX-License-Identifier: MIT */
/* Merged-view line discipline: whole lines, tags only at line starts. */
#include "router/line_i.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "router/router_i.h"

router_rank_t *line_rank(struct line_state *ls, int *ci)
{
	struct rank_chan *c =
	    (struct rank_chan *)((char *)ls - offsetof(struct rank_chan, ls));
	router_rank_t *rank = c->rank;

	if (ci)
		*ci = (int)(c - rank->ch);
	return rank;
}

static const char *chan_name(uint32_t channel)
{
	switch (channel) {
	case ROUTER_CH_STDOUT:
		return "stdout";
	case ROUTER_CH_STDERR:
		return "stderr";
	default:
		return "stddiag";
	}
}

/* "2026-12-01T19:35:16.123456Z" */
static size_t fmt_time(char *out, uint64_t ns)
{
	time_t sec = (time_t)(ns / 1000000000u);
	struct tm tm;
	size_t n;

	gmtime_r(&sec, &tm);
	n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
	n += (size_t)sprintf(out + n, ".%06uZ",
			     (unsigned)((ns % 1000000000u) / 1000u));
	return n;
}

/* XML text: & < > " escaped, other non-printables as &#NNN;. */
static size_t xml_escape(char *out, const uint8_t *p, size_t n)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		uint8_t c = p[i];

		if (c == '&') {
			memcpy(out + o, "&amp;", 5);
			o += 5;
		} else if (c == '<') {
			memcpy(out + o, "&lt;", 4);
			o += 4;
		} else if (c == '>') {
			memcpy(out + o, "&gt;", 4);
			o += 4;
		} else if (c == '"') {
			memcpy(out + o, "&quot;", 6);
			o += 6;
		} else if (c < 0x20 || c == 0x7f) {
			o += (size_t)sprintf(out + o, "&#%03u;", c);
		} else {
			out[o++] = (char)c;
		}
	}
	return o;
}

enum fmt { FMT_PLAIN, FMT_TAG, FMT_RANK, FMT_XML };

static enum fmt pick_fmt(const router_directives_t *d)
{
	if (router_dir_on(d, ROUTER_DIR_XML_OUTPUT))
		return FMT_XML;
	if (router_dir_on(d, ROUTER_DIR_RANK_OUTPUT))
		return FMT_RANK;
	if ((d->set & ROUTER_DIR_TAG_OUTPUT) &&
	    !(d->value & ROUTER_DIR_TAG_OUTPUT))
		return FMT_PLAIN;
	return FMT_TAG;
}

/*
 * Pieces for one merged view are formatted into r->scratch and appended in
 * one go (one append per deliver, not per line); the tag is formatted once
 * and reused while it does not change.
 */
struct out {
	struct merged *m;
	size_t o;      /* bytes formatted in r->scratch */
	uint64_t when; /* time of the last piece (the view's mtime) */
	char tag[384]; /* cached text prefix */
	size_t taglen;
	char tag_sep; /* the cache key: separator and time */
	uint64_t tag_when;
};

static int out_room(router_t *r, struct out *w, size_t n)
{
	return router_scratch(r, w->o + n);
}

static int out_flush(router_t *r, struct out *w)
{
	int rc = 0;

	if (w->o)
		rc = stream_append(&w->m->s, r->scratch, w->o, w->when);
	if (rc < 0)
		mrec_trim(w->m); /* their bytes did not go in */
	w->o = 0;
	return rc;
}

/* The text prefix ("[ns,rank]<stdout>: ", with time), cached in @w. */
static void text_tag(struct out *w, router_rank_t *rank, struct line_state *ls,
		     enum fmt f, bool ts, char sep, uint64_t when)
{
	const char *cn = chan_name(ls->channel);
	const char *s = sep == '+' ? "+ " : ": ";
	size_t o = 0;

	if (w->taglen && w->tag_sep == sep && w->tag_when == when)
		return;
	if (ts) {
		o += fmt_time(w->tag, when);
		w->tag[o++] = ' ';
	}
	if (f == FMT_TAG)
		o += (size_t)snprintf(w->tag + o, sizeof(w->tag) - o,
				      "[%s,%u]<%s>%s", rank->job->nspace,
				      rank->id, cn, s);
	else if (f == FMT_RANK)
		o += (size_t)snprintf(w->tag + o, sizeof(w->tag) - o,
				      "[%u]<%s>%s", rank->id, cn, s);
	w->taglen = o;
	w->tag_sep = sep;
	w->tag_when = when;
}

/* Record the piece at scratch [@o0, @o) for a store that takes pieces by
 * reference: [@o0, @p) literal, then @alen bytes at rank offset @aoff and
 * @blen at @boff. */
static void emit_record(struct out *w, router_rank_t *rank, int ci,
			size_t o0, size_t p, size_t o, uint64_t aoff,
			size_t alen, uint64_t boff, size_t blen, bool nl,
			enum fmt f, bool ts, uint64_t when)
{
	struct merged *m = w->m;
	struct line_state *ls = &rank->ch[ci].ls;
	struct stream *src = &rank->ch[ci].s;
	const char *lit = rank->job->r->scratch + o0;
	uint64_t moff = m->s.end + o0;

	if (alen && blen && aoff + alen != boff) {
		/* not one range of the rank: as it is, and a restart cannot
		 * tell what of the rank the view holds (NULL) */
		mrec_add_lit(m, moff, o - o0, NULL, 0);
		return;
	}
	if (f == FMT_XML) { /* escaped: as it is, holding the rank's bytes */
		mrec_add_lit(m, moff, o - o0, alen + blen ? src : NULL,
			     blen ? boff + blen : aoff + alen);
		return;
	}
	if (f != FMT_PLAIN) /* the tag of the lines that follow */
		text_tag(w, rank, ls, f, ts, ':', when);
	mrec_add(m, moff, lit, p - o0, src, alen ? aoff : boff, alen + blen,
		 nl, w->tag, f == FMT_PLAIN ? 0 : w->taglen);
}

/*
 * Put one piece of @rank's channel @ci into @w: @a then @b (either may be
 * empty; at rank stream offsets @aoff, @boff); @nl says the piece ends
 * its line.
 */
static int emit(struct out *w, router_rank_t *rank, int ci, const uint8_t *a,
		size_t alen, uint64_t aoff, const uint8_t *b, size_t blen,
		uint64_t boff, bool nl, uint64_t when)
{
	router_job_t *job = rank->job;
	router_t *r = job->r;
	struct merged *m = w->m;
	struct line_state *ls = &rank->ch[ci].ls;
	enum fmt f = pick_fmt(&ls->dirs);
	bool ts = router_dir_on(&ls->dirs, ROUTER_DIR_TIMESTAMP);
	const char *cn = chan_name(ls->channel);
	char *out;
	size_t o, o0, p;
	int rc;

	rc = out_room(r, w, 8 * ROUTER_NSPACE_MAX + 6 * (alen + blen) + 128);
	if (rc < 0)
		return rc;
	out = r->scratch;
	o = o0 = p = w->o;
	w->when = when;
	if (m->open && (m->open != ls || f == FMT_XML)) {
		/* Another rank's line is open (or an XML element must start
		 * at a line start): end it; its continuation will be marked. */
		out[o++] = '\n';
		m->open = NULL;
	}
	if (f == FMT_XML) {
		o += (size_t)sprintf(out + o, "<%s nspace=\"", cn);
		o += xml_escape(out + o, (const uint8_t *)job->nspace,
				strlen(job->nspace));
		o += (size_t)sprintf(out + o, "\" rank=\"%u\"", rank->id);
		if (ts) {
			memcpy(out + o, " time=\"", 7);
			o += 7;
			o += fmt_time(out + o, when);
			out[o++] = '"';
		}
		if (ls->midline)
			o += (size_t)sprintf(out + o, " cont=\"1\"");
		out[o++] = '>';
		o += xml_escape(out + o, a, alen);
		o += xml_escape(out + o, b, blen);
		o += (size_t)sprintf(out + o, "</%s>\n", cn);
		ls->midline = !nl;
	} else {
		if (m->open != ls && f != FMT_PLAIN) {
			text_tag(w, rank, ls, f, ts, ls->midline ? '+' : ':',
				 when);
			memcpy(out + o, w->tag, w->taglen);
			o += w->taglen;
		}
		p = o;
		if (alen)
			memcpy(out + o, a, alen);
		o += alen;
		if (blen)
			memcpy(out + o, b, blen);
		o += blen;
		m->open = nl ? NULL : ls;
		ls->midline = !nl;
	}
	if (f == FMT_XML)
		p = o;
	if (mrec_on(m))
		emit_record(w, rank, ci, o0, p, o, aoff, alen, boff, blen, nl,
			    f, ts, when);
	w->o = o;
	return 0;
}

/* The directives that change the format (present bits and values). */
static uint64_t fmt_bits(const router_directives_t *d)
{
	const uint32_t mask = ROUTER_DIR_TAG_OUTPUT | ROUTER_DIR_RANK_OUTPUT |
			      ROUTER_DIR_XML_OUTPUT | ROUTER_DIR_TIMESTAMP;

	return ((uint64_t)(d->set & mask) << 32) | (d->value & d->set & mask);
}

static void pend_clear(router_t *r, struct line_state *ls)
{
	ls->len = 0;
	if (ls->queued) {
		TAILQ_REMOVE(&r->pend, ls, pend_link);
		ls->queued = false;
	}
	if (ls->cap > 1024) {
		free(ls->buf);
		ls->buf = NULL;
		ls->cap = 0;
	}
}

void line_reset(router_t *r, struct line_state *ls)
{
	pend_clear(r, ls);
	free(ls->buf);
	ls->buf = NULL;
	ls->cap = 0;
}

static int pend_add(router_t *r, struct line_state *ls, const void *p, size_t n,
		    uint64_t off, uint64_t now)
{
	size_t need = (size_t)ls->len + n;

	if (need > ls->cap) {
		size_t c = ls->cap ? ls->cap : 128;
		char *nb;

		while (c < need)
			c *= 2;
		nb = realloc(ls->buf, c);
		if (!nb)
			return -ENOMEM;
		ls->buf = nb;
		ls->cap = (uint32_t)c;
	}
	memcpy(ls->buf + ls->len, p, n);
	if (ls->len == 0) {
		ls->off = off;
		ls->since = now;
		ls->due = now + r->buffering_ns;
		if (!ls->queued) {
			TAILQ_INSERT_TAIL(&r->pend, ls, pend_link);
			ls->queued = true;
			router_timer_arm(r);
		}
	}
	ls->len = (uint32_t)need;
	return 0;
}

void line_resume(router_rank_t *rank, int ci)
{
	router_t *r = rank->job->r;
	struct line_state *ls = &rank->ch[ci].ls;

	if (!ls->queued)
		return;
	TAILQ_REMOVE(&r->pend, ls, pend_link);
	ls->due = router_now(r) + r->buffering_ns;
	TAILQ_INSERT_TAIL(&r->pend, ls, pend_link);
	router_timer_arm(r);
}

int line_feed(router_rank_t *rank, int ci, uint32_t channel, const void *p,
	      size_t n, uint64_t at, const router_directives_t *eff,
	      uint64_t now)
{
	router_t *r = rank->job->r;
	struct line_state *ls = &rank->ch[ci].ls;
	const uint8_t *s = p;
	bool raw = router_dir_on(eff, ROUTER_DIR_OUTPUT_RAW);
	struct out w = {0};
	int rc = 0, rc2;

	if ((ls->len || rank->job->m[ci].open == ls) &&
	    ls->channel != channel) {
		/* The tag's channel changes (stderr <-> stddiag): emit what was
		 * pending and end that line. */
		rc = line_flush(rank, ci, true);
		if (rc < 0)
			return rc;
	} else if (ls->len && fmt_bits(&ls->dirs) != fmt_bits(eff)) {
		/* The format changes: emit what was pending in the old one. */
		rc = line_flush(rank, ci, false);
		if (rc < 0)
			return rc;
	}
	ls->dirs = *eff;
	ls->channel = channel;
	w.m = &rank->job->m[ci];
	while (n) {
		const uint8_t *nl = memchr(s, '\n', n);
		uint64_t here = at + (uint64_t)(s - (const uint8_t *)p);
		size_t k;

		if (nl) {
			k = (size_t)(nl - s) + 1;
			rc = emit(&w, rank, ci, (const uint8_t *)ls->buf,
				  ls->len, ls->off, s, k, here, true,
				  ls->len ? ls->since : now);
			if (rc < 0)
				goto out_flush;
			if (ls->len)
				pend_clear(r, ls);
			s += k;
			n -= k;
			continue;
		}
		if (raw || (size_t)ls->len + n >= r->buffering_size) {
			rc = emit(&w, rank, ci, (const uint8_t *)ls->buf,
				  ls->len, ls->off, s, n, here, false,
				  ls->len ? ls->since : now);
			if (rc < 0)
				goto out_flush;
			pend_clear(r, ls);
			break;
		}
		rc = pend_add(r, ls, s, n, here, now);
		break;
	}
out_flush:
	rc2 = out_flush(r, &w);
	return rc < 0 ? rc : rc2;
}

int line_flush(router_rank_t *rank, int ci, bool final)
{
	router_t *r = rank->job->r;
	struct line_state *ls = &rank->ch[ci].ls;
	struct out w = {.m = &rank->job->m[ci], .when = router_now(r)};
	int rc = 0, rc2;

	if (ls->len) {
		rc = emit(&w, rank, ci, (const uint8_t *)ls->buf, ls->len,
			  ls->off, NULL, 0, 0, false, ls->since);
		pend_clear(r, ls);
	}
	if (final) {
		if (w.m->open == ls && rc == 0) {
			rc = out_room(r, &w, 1);
			if (rc == 0) {
				r->scratch[w.o++] = '\n';
				if (mrec_on(w.m))
					mrec_add_lit(w.m, w.m->s.end + w.o - 1,
						     1, NULL, 0);
			}
		}
		if (w.m->open == ls)
			w.m->open = NULL;
		ls->midline = false;
	}
	rc2 = out_flush(r, &w);
	return rc < 0 ? rc : rc2;
}
