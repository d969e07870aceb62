/* SPDX-License-Identifier: MIT */
/* Merged-view line discipline: whole lines, tags only at line starts. */
#include "router/line.h"

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
 * Put one piece of @rank's channel @ci into the merged view: @a then @b
 * (either may be empty); @nl says the piece ends its line.
 */
static int emit(router_rank_t *rank, int ci, const uint8_t *a, size_t alen,
		const uint8_t *b, size_t blen, bool nl, uint64_t when)
{
	router_job_t *job = rank->job;
	router_t *r = job->r;
	struct merged *m = &job->m[ci];
	struct line_state *ls = &rank->ch[ci].ls;
	enum fmt f = pick_fmt(&ls->dirs);
	bool ts = router_dir_on(&ls->dirs, ROUTER_DIR_TIMESTAMP);
	const char *cn = chan_name(ls->channel);
	size_t o = 0;
	char *out;
	int rc;

	if (m->open && (m->open != ls || f == FMT_XML)) {
		/* Another rank's line is open (or an XML element must start
		 * at a line start): end it; its continuation will be marked. */
		rc = stream_append(&m->s, "\n", 1, when);
		if (rc < 0)
			return rc;
		m->open = NULL;
	}
	rc = router_scratch(r, 2 * ROUTER_NSPACE_MAX + 6 * ROUTER_NSPACE_MAX +
				   6 * (alen + blen) + 128);
	if (rc < 0)
		return rc;
	out = r->scratch;
	if (f == FMT_XML) {
		o += (size_t)sprintf(out, "<%s nspace=\"", cn);
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
		if (m->open != ls) {
			const char *sep = ls->midline ? "+ " : ": ";

			if (ts) {
				o += fmt_time(out + o, when);
				out[o++] = ' ';
			}
			if (f == FMT_TAG)
				o += (size_t)sprintf(out + o, "[%s,%u]<%s>%s",
						     job->nspace, rank->id, cn,
						     sep);
			else if (f == FMT_RANK)
				o += (size_t)sprintf(out + o, "[%u]<%s>%s",
						     rank->id, cn, sep);
		}
		if (alen)
			memcpy(out + o, a, alen);
		o += alen;
		if (blen)
			memcpy(out + o, b, blen);
		o += blen;
		m->open = nl ? NULL : ls;
		ls->midline = !nl;
	}
	return stream_append(&m->s, out, o, when);
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
		    uint64_t now)
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
		ls->since = now;
		if (!ls->queued) {
			TAILQ_INSERT_TAIL(&r->pend, ls, pend_link);
			ls->queued = true;
			router_timer_arm(r);
		}
	}
	ls->len = (uint32_t)need;
	return 0;
}

int line_feed(router_rank_t *rank, int ci, uint32_t channel, const void *p,
	      size_t n, const router_directives_t *eff, uint64_t now)
{
	router_t *r = rank->job->r;
	struct line_state *ls = &rank->ch[ci].ls;
	const uint8_t *s = p;
	bool raw = router_dir_on(eff, ROUTER_DIR_OUTPUT_RAW);
	int rc;

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
	while (n) {
		const uint8_t *nl = memchr(s, '\n', n);
		size_t k;

		if (nl) {
			k = (size_t)(nl - s) + 1;
			rc = emit(rank, ci, (const uint8_t *)ls->buf, ls->len,
				  s, k, true, ls->len ? ls->since : now);
			if (rc < 0)
				return rc;
			pend_clear(r, ls);
			s += k;
			n -= k;
			continue;
		}
		if (raw || (size_t)ls->len + n >= r->buffering_size) {
			rc = emit(rank, ci, (const uint8_t *)ls->buf, ls->len,
				  s, n, false, ls->len ? ls->since : now);
			if (rc < 0)
				return rc;
			pend_clear(r, ls);
			return 0;
		}
		return pend_add(r, ls, s, n, now);
	}
	return 0;
}

int line_flush(router_rank_t *rank, int ci, bool final)
{
	router_t *r = rank->job->r;
	struct line_state *ls = &rank->ch[ci].ls;
	struct merged *m = &rank->job->m[ci];
	int rc = 0;

	if (ls->len) {
		rc = emit(rank, ci, (const uint8_t *)ls->buf, ls->len, NULL, 0,
			  false, ls->since);
		pend_clear(r, ls);
	}
	if (final) {
		if (m->open == ls) {
			int rc2 = stream_append(&m->s, "\n", 1, router_now(r));

			if (rc2 < 0 && rc == 0)
				rc = rc2;
			m->open = NULL;
		}
		ls->midline = false;
	}
	return rc;
}
