/* SPDX-License-Identifier: MIT */
/*
 * A merged view stored by reference: its pieces are recorded as they are
 * formatted (router/line.c) and handed to the store as "these bytes of
 * that rank's stream, with this tag at each line start"
 * (router_store_ops.append_ref), so a spool writes the ranks' bytes once.
 * What cannot be a reference (XML, a rank stream whose store failed or
 * evicted them) is stored as it is, from the view's ring.  Bytes a rank
 * has not stored yet (its store held back) are waited for, not copied.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "router/job_i.h"
#include "router/router_i.h"

/* Rank bytes in one record at most: a late read that starts inside a
 * record renders it from its start. */
#define MREC_BODY_MAX (256u << 10)

bool mrec_on(const struct merged *m)
{
	const struct stream *s = &m->s;

	return s->r->store && s->r->store->append_ref && !s->store_failed &&
	       !m->noref;
}

/* @src's merged view (@src a rank stream). */
static const struct merged *view_of(const struct stream *src)
{
	return &src->job->m[src->channel == ROUTER_CH_STDOUT ? CI_OUT : CI_ERR];
}

uint64_t mrec_unfed_from(const struct stream *src)
{
	const struct rank_chan *c = rank_chan_of((struct stream *)src);
	uint64_t from = c->feeding ? c->feed_from : UINT64_MAX;

	if (!mrec_on(view_of(src))) /* a view stored as it is: copies */
		return UINT64_MAX;
	if (c->ls.len && c->ls.off < from)
		from = c->ls.off;
	return from;
}

uint64_t mrec_unstored_from(const struct stream *src)
{
	const struct merged *m = view_of(src);

	if (!mrec_on(m))
		return UINT64_MAX;
	for (size_t i = m->rhead; i < m->nrec; i++)
		if (m->recs[i].src == src)
			return m->recs[i].roff;
	return UINT64_MAX;
}

void mrec_free(struct merged *m)
{
	free(m->recs);
	m->recs = NULL;
	m->rhead = m->nrec = m->rcap = 0;
}

static struct mrec *rec_new(struct merged *m)
{
	if (m->rhead == m->nrec)
		m->rhead = m->nrec = 0;
	if (m->nrec == m->rcap) {
		size_t live = m->nrec - m->rhead;
		size_t nc = m->rcap ? m->rcap * 2 : 8;
		struct mrec *nr;

		if (m->rhead > live) { /* mostly stored: compact instead */
			memmove(m->recs, m->recs + m->rhead,
				live * sizeof(*nr));
			m->rhead = 0;
			m->nrec = live;
		} else {
			nr = realloc(m->recs, nc * sizeof(*nr));
			if (!nr)
				return NULL;
			m->recs = nr;
			m->rcap = nc;
		}
	}
	return &m->recs[m->nrec++];
}

static void set_body(struct mrec *rc, struct stream *src, uint64_t roff,
		     uint64_t rlen, bool nl_end, const char *tag,
		     size_t taglen)
{
	rc->src = src;
	rc->roff = roff;
	rc->rlen = rlen;
	rc->nl_end = nl_end;
	rc->taglen = (uint16_t)taglen;
	memcpy(rc->tag, tag, taglen);
}

/* A new record at the end, or NULL (then everything goes as it is). */
static struct mrec *rec_push(struct merged *m)
{
	struct mrec *rc = rec_new(m);

	if (!rc) { /* stored as they are, from the ring */
		m->noref = true;
		mrec_free(m);
	}
	return rc;
}

static void set_lit(struct mrec *rc, uint64_t moff, size_t len,
		    struct stream *cover, uint64_t cover_end)
{
	rc->moff = moff;
	rc->mlen = rc->plen = (uint32_t)len;
	rc->src = NULL;
	rc->cover = cover;
	rc->cover_end = cover_end;
}

void mrec_add_lit(struct merged *m, uint64_t moff, size_t len,
		  struct stream *cover, uint64_t cover_end)
{
	struct mrec *last = m->nrec > m->rhead ? &m->recs[m->nrec - 1] : NULL;

	if (!mrec_on(m)) {
		mrec_free(m);
		return;
	}
	/* one literal record holds one rank's bytes, so that it can say
	 * which */
	if (last && !last->src && last->cover == cover &&
	    last->moff + last->mlen == moff && last->mlen + len < MREC_BODY_MAX) {
		last->plen += (uint32_t)len;
		last->mlen += len;
		if (cover && cover_end > last->cover_end)
			last->cover_end = cover_end;
		return;
	}
	if ((last = rec_push(m)))
		set_lit(last, moff, len, cover, cover_end);
}

void mrec_add(struct merged *m, uint64_t moff, const char *lit, size_t plen,
	      struct stream *src, uint64_t roff, uint64_t rlen, bool nl_end,
	      const char *tag, size_t taglen)
{
	struct mrec *last = m->nrec > m->rhead ? &m->recs[m->nrec - 1] : NULL;
	struct mrec *rc;

	if (!rlen || taglen > MREC_TAG_MAX) { /* all literal */
		mrec_add_lit(m, moff, plen + rlen, rlen ? src : NULL,
			     roff + rlen);
		return;
	}
	if (!mrec_on(m)) {
		mrec_free(m);
		return;
	}
	if (last && last->moff + last->mlen == moff &&
	    last->mlen + plen + rlen < MREC_BODY_MAX) {
		if (!last->src && !last->cover) { /* after literal bytes */
			last->plen += (uint32_t)plen;
			last->mlen += plen + rlen;
			set_body(last, src, roff, rlen, nl_end, tag, taglen);
			return;
		}
		/* The same rank's next bytes, its tag in front (or none). */
		if (last->src == src && last->roff + last->rlen == roff &&
		    plen == (last->nl_end ? last->taglen : 0) &&
		    (!plen || !memcmp(lit, last->tag, plen))) {
			last->rlen += rlen;
			last->mlen += plen + rlen;
			last->nl_end = nl_end;
			return;
		}
	}
	if (!(rc = rec_push(m)))
		return;
	rc->moff = moff;
	rc->plen = (uint32_t)plen;
	rc->mlen = plen + rlen;
	rc->cover = NULL;
	set_body(rc, src, roff, rlen, nl_end, tag, taglen);
}

void mrec_trim(struct merged *m)
{
	while (m->nrec > m->rhead && m->recs[m->nrec - 1].moff >= m->s.end)
		m->nrec--;
}

/* The record's bytes from @at on are stored as they are: a reference
 * that becomes literal still holds its rank's bytes up to its end (but
 * says nothing of a rank whose store failed: no file to complete from). */
static void rec_literal_from(struct mrec *rc, uint64_t at)
{
	if (rc->src) {
		rc->cover = rc->src->store_failed ? NULL : rc->src;
		rc->cover_end = rc->roff + rc->rlen;
	}
	rc->mlen = rc->moff + rc->mlen - at;
	rc->moff = at;
	rc->plen = (uint32_t)rc->mlen;
	rc->src = NULL;
}

/* The rank's bytes are not in its store yet but will be: its store is
 * live, and holds them back (a full disk, its owner's cap) with the rank
 * held.  The view waits for them rather than store them a second time as
 * literal bytes, which no eviction of the rank's file would reach. */
static bool ref_pending(const struct mrec *rc)
{
	const struct stream *src = rc->src;

	return src && !src->store_failed && src->store_start <= rc->roff &&
	       src->stored < rc->roff + rc->rlen;
}

/* The rank's bytes are in its store, as the view says. */
static bool ref_ok(const struct mrec *rc)
{
	const struct stream *src = rc->src;

	return src && src->store && !src->store_failed &&
	       src->stored >= rc->roff + rc->rlen &&
	       src->store_start <= rc->roff;
}

/* Store @ref, the record at rhead: all of it (the record done), or -errno. */
static ssize_t put_ref(struct merged *m, const struct router_store_ref *ref)
{
	ssize_t w = m->s.r->store->append_ref(m->s.store, ref);

	if (w == (ssize_t)ref->size)
		m->rhead++;
	else if (w >= 0)
		w = -EIO; /* all or nothing */
	return w;
}

/* Literal record @rc (from s.stored on) with the rank bytes it holds
 * (append_ref without a reference): all of it, or -errno. */
static ssize_t write_covered(struct merged *m, struct mrec *rc)
{
	struct stream *s = &m->s;
	struct iovec iov[2];
	struct router_store_ref ref = {
	    .lit = iov,
	    .rank = rc->cover->rank,
	    .off = rc->cover_end,
	    .size = rc->moff + rc->mlen - s->stored,
	};

	ref.nlit = stream_ring_iov(s, s->stored, (size_t)ref.size, iov);
	return put_ref(m, &ref);
}

ssize_t mrec_write(struct merged *m)
{
	struct stream *s = &m->s;
	const struct router_store_ops *ops = s->r->store;
	struct mrec *rc = NULL;
	struct iovec iov[2];
	uint64_t lim = s->end;
	ssize_t w;

	while (m->rhead < m->nrec) {
		rc = &m->recs[m->rhead];
		if (rc->moff + rc->mlen > s->stored)
			break;
		m->rhead++; /* stored already (cannot happen) */
		rc = NULL;
	}
	if (rc && rc->moff < s->stored)
		rec_literal_from(rc, s->stored);
	if (rc && rc->moff > s->stored) {
		lim = rc->moff; /* bytes without a record */
		rc = NULL;
	} else if (rc) {
		if (mrec_on(m) && ref_pending(rc))
			return -EAGAIN; /* store_sync() waits */
		if (ref_ok(rc) && mrec_on(m)) {
			struct router_store_ref ref = {
			    .lit = iov,
			    .src = rc->src->store,
			    .rank = rc->src->rank,
			    .off = rc->roff,
			    .len = rc->rlen,
			    .tag = rc->tag,
			    .taglen = rc->taglen,
			    .size = rc->mlen,
			};

			ref.nlit = rc->plen ? stream_ring_iov(s, rc->moff,
							      rc->plen, iov)
					    : 0;
			w = put_ref(m, &ref);
			if (w != -EOPNOTSUPP)
				return w;
			m->noref = true; /* an earlier life's file */
		}
		rec_literal_from(rc, s->stored);
		lim = rc->moff + rc->mlen;
		if (rc->cover && mrec_on(m)) {
			w = write_covered(m, rc);
			if (w != -EOPNOTSUPP)
				return w;
			m->noref = true;
		}
	}
	w = ops->append(s->store, iov,
			stream_ring_iov(s, s->stored,
					(size_t)(lim - s->stored), iov));
	if (w > 0 && rc) {
		if (s->stored + (uint64_t)w >= rc->moff + rc->mlen)
			m->rhead++;
		else
			rec_literal_from(rc, s->stored + (uint64_t)w);
	}
	return w;
}

void mrec_follow(router_job_t *job)
{
	const struct router_store_ops *ops = job->r->store;

	for (int ci = 0; ci < CI_N; ci++) {
		struct merged *m = &job->m[ci];

		if (!m->follow)
			continue;
		m->follow = false;
		if (m->s.store && ops->held_from)
			stream_store_skip(&m->s, ops->held_from(m->s.store));
	}
}
