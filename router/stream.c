/* SPDX-License-Identifier: MIT */
/* Retained ring buffer with absolute offsets, readers, lag latch. */
#include "router/stream_i.h"

#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "router/job_i.h"
#include "router/router_i.h"

#define STORE_READ_MAX (1u << 20) /* largest read served from the store */

void stream_init(struct stream *s, router_t *r, stream_flow_fn on_flow,
		 uint64_t now, router_job_t *job, uint32_t rank,
		 uint32_t channel)
{
	memset(s, 0, sizeof(*s));
	s->r = r;
	s->on_flow = on_flow;
	s->mtime_ns = now;
	s->job = job;
	s->rank = rank;
	s->channel = channel;
	TAILQ_INIT(&s->readers);
}

void stream_destroy(struct stream *s)
{
	stream_store_unwait(s);
	stream_lazy_unlink(s);
	if (s->rank == ROUTER_RANK_WILDCARD)
		mrec_free((struct merged *)s);
	stream_flow_release(s);
	stream_store_uncharge(s);
	s->store_start = s->stored;
	if (s->store) {
		s->r->store->close(s->store, s->job->store_discard);
		s->store = NULL;
	}
	if (s->buf) {
		s->r->mem_used -= s->cap;
		free(s->buf);
		s->buf = NULL;
		s->cap = 0;
	}
}

static size_t ring_idx(const struct stream *s, uint64_t off)
{
	return (s->head + (size_t)(off - s->start)) % s->cap;
}

int stream_ring_iov(const struct stream *s, uint64_t so, size_t len,
		    struct iovec iov[2])
{
	size_t idx = ring_idx(s, so);
	size_t first = s->cap - idx;

	if (first > len)
		first = len;
	iov[0].iov_base = s->buf + idx;
	iov[0].iov_len = first;
	if (len == first)
		return 1;
	iov[1].iov_base = s->buf;
	iov[1].iov_len = len - first;
	return 2;
}

/* Lowest cursor of a blocking reader, UINT64_MAX if there is none. */
static uint64_t blocking_limit(const struct stream *s)
{
	const struct router_reader *rd;
	uint64_t m = UINT64_MAX;

	TAILQ_FOREACH (rd, &s->readers, link) {
		if (!(rd->flags & ROUTER_READER_NONBLOCK) && rd->cursor < m)
			m = rd->cursor;
	}
	return m;
}

/* The ring may forget bytes below this: the store's end while it takes
 * every byte, else the slowest blocking reader's cursor. */
static uint64_t retain_limit(const struct stream *s)
{
	return stream_store_live(s) ? s->stored : blocking_limit(s);
}

static uint64_t stream_lag(const struct stream *s)
{
	uint64_t lim;

	if (!s->nblocking)
		return 0;
	lim = blocking_limit(s);
	return lim < s->end ? s->end - lim : 0;
}

static uint64_t lowest_cursor(const struct stream *s)
{
	const struct router_reader *rd;
	uint64_t m = UINT64_MAX;

	TAILQ_FOREACH (rd, &s->readers, link) {
		if (rd->cursor < m)
			m = rd->cursor;
	}
	return m;
}

/* Count the bytes of [a, b) that some attached reader had not read yet
 * (all of them with no reader attached): "discarded unread". */
static void count_lost(struct stream *s, uint64_t a, uint64_t b)
{
	uint64_t m;

	if (b <= a)
		return;
	m = TAILQ_EMPTY(&s->readers) ? a : lowest_cursor(s);
	if (m < a)
		m = a;
	if (b > m)
		s->dropped += b - m;
}

/* [a, b) leaves the ring: count what the store does not hold either. */
static void count_dropped(struct stream *s, uint64_t a, uint64_t b)
{
	uint64_t ss = s->store_start, st = s->stored;

	if (st <= ss) {
		count_lost(s, a, b);
		return;
	}
	count_lost(s, a, b < ss ? b : ss);
	count_lost(s, a > st ? a : st, b);
}

uint64_t stream_store_evictable(const struct stream *s)
{
	uint64_t to = s->stored, lim;

	if (s->rank != ROUTER_RANK_WILDCARD && s->r->store->append_ref) {
		/* A blocking reader of the view behind what it stored reads
		 * (or will, once the ring lets it go) from the store, and so
		 * from this rank's file: keep it all. */
		const struct stream *m =
		    &s->job->m[s->channel == ROUTER_CH_STDOUT ? CI_OUT : CI_ERR]
			 .s;

		if (!m->complete && blocking_limit(m) < m->stored)
			return 0;
		/* nor what the view has not taken yet (tests/fs/spool-caps.sh
		 * kc: a cap took a 256 KiB append before the view had it, and
		 * the view kept it as it is); its waiting pieces are stored
		 * first (stream_store_evict()) */
		lim = mrec_unfed_from(s);
		if (to > lim)
			to = lim;
	}
	if (!s->complete) { /* never what a blocking reader still needs */
		lim = blocking_limit(s);
		if (to > lim)
			to = lim;
	}
	to &= ~(uint64_t)(ROUTER_STORE_ALIGN - 1); /* whole blocks */
	return to > s->store_start ? to - s->store_start : 0;
}

void stream_view_flush(struct merged *mv)
{
	router_t *r = mv->s.r;

	if (r->view_flushing || mv->rhead == mv->nrec || !mrec_on(mv))
		return;
	r->view_flushing = true;
	stream_lazy_unlink(&mv->s);
	stream_store_sync(&mv->s);
	r->view_flushing = false;
}

uint64_t stream_store_evict(struct stream *s, uint64_t to)
{
	uint64_t from, max;

	if (s->rank != ROUTER_RANK_WILDCARD && mrec_unstored_from(s) < to) {
		stream_view_flush(&s->job->m[s->channel == ROUTER_CH_STDOUT
						 ? CI_OUT
						 : CI_ERR]);
		if (to > mrec_unstored_from(s)) /* the flush was held back */
			to = mrec_unstored_from(s);
	}
	from = s->store_start;
	max = from + stream_store_evictable(s);

	if (to > max)
		to = max;
	/* whole blocks: what a restart finds (SEEK_DATA) is exact */
	to &= ~(uint64_t)(ROUTER_STORE_ALIGN - 1);
	if (to <= from)
		return 0;
	/* what the ring does not hold any more is gone */
	count_lost(s, from, to < s->start ? to : s->start);
	s->store_start = to;
	if (s->store && s->r->store->drop)
		s->r->store->drop(s->store, to);
	stream_store_account(s, -(int64_t)(to - from)); /* after: what it freed */
	if (s->rank != ROUTER_RANK_WILDCARD) /* mrec_follow() */
		s->job->m[s->channel == ROUTER_CH_STDOUT ? CI_OUT : CI_ERR]
		    .follow = true;
	return to - from;
}

void stream_store_skip(struct stream *s, uint64_t to)
{
	uint64_t from = s->store_start;

	if (to > s->stored)
		to = s->stored;
	if (to <= from)
		return;
	count_lost(s, from, to < s->start ? to : s->start);
	s->store_start = to;
	stream_store_account(s, -(int64_t)(to - from));
}

/* Forget the bytes before @to (to <= end). */
static void discard_to(struct stream *s, uint64_t to)
{
	if (to <= s->start)
		return;
	count_dropped(s, s->start, to);
	if (s->cap)
		s->head = to == s->end ? 0 : ring_idx(s, to);
	s->start = to;
}

/* Move the retained bytes into a buffer of @newcap bytes (>= retained). */
static int realloc_ring(struct stream *s, size_t newcap)
{
	size_t have = (size_t)(s->end - s->start);
	uint8_t *nb;

	nb = malloc(newcap);
	if (!nb)
		return -ENOMEM;
	if (have) {
		size_t first = s->cap - s->head;

		if (first > have)
			first = have;
		memcpy(nb, s->buf + s->head, first);
		memcpy(nb + first, s->buf, have - first);
	}
	free(s->buf);
	s->r->mem_used = s->r->mem_used - s->cap + newcap;
	s->buf = nb;
	s->cap = newcap;
	s->head = 0;
	return 0;
}

/* Small first (a rank that writes one line costs little), then doubling. */
static size_t cap_for(size_t need)
{
	size_t c = STREAM_MIN_CAP;

	while (c < need)
		c *= 2;
	return c;
}

static void notify_readers(struct stream *s)
{
	struct router_reader *rd;

	TAILQ_FOREACH (rd, &s->readers, link)
		router_queue_ready(s->r, rd);
}

void stream_latch(struct stream *s, unsigned reason, bool on)
{
	if (on == !!(s->held & reason))
		return;
	if (on)
		s->held |= reason;
	else
		s->held &= ~reason;
	s->on_flow(s, reason, on);
}

int stream_append(struct stream *s, const void *p, size_t n, uint64_t now)
{
	router_t *r = s->r;
	const uint8_t *src = p;
	uint64_t limit, target, new_end, spliced = s->spliced;
	size_t need;
	bool over = false;

	s->spliced = 0; /* in the store whatever happens here */
	if (n == 0)
		return 0;
	limit = retain_limit(s);
	new_end = s->end + n;
	target = new_end > r->window ? new_end - r->window : 0;
	if (target > limit)
		target = limit;
	if (target > s->end) {
		/* No blocking reader: part of the new bytes is already
		 * beyond the window. */
		uint64_t skip = target - s->end;

		discard_to(s, s->end);
		count_dropped(s, s->end, target);
		s->start = s->end = target;
		s->head = 0;
		src += skip;
		n -= (size_t)skip;
	} else {
		discard_to(s, target);
	}
	need = (size_t)(s->end - s->start) + n;
	if (r->mem_used > r->budget && s->cap > STREAM_MIN_CAP &&
	    need * 2 <= s->cap && realloc_ring(s, cap_for(need)) < 0)
		return -ENOMEM;
	if (need > s->cap) {
		size_t newcap = cap_for(need);

		if (r->mem_used - s->cap + newcap > r->budget) {
			/* Over budget: keep only what blocking readers need. */
			discard_to(s, limit < s->end ? limit : s->end);
			need = (size_t)(s->end - s->start) + n;
			newcap = cap_for(need);
			over = need > s->cap &&
			       r->mem_used - s->cap + newcap > r->budget;
		}
		if (need > s->cap && realloc_ring(s, newcap) < 0)
			return -ENOMEM;
	}
	if (n) {
		size_t at = (size_t)(s->end - s->start);
		size_t idx = (s->head + at) % s->cap;
		size_t first = s->cap - idx;

		if (first > n)
			first = n;
		memcpy(s->buf + idx, src, first);
		memcpy(s->buf, src + first, n - first);
		s->end += n;
	}
	if (spliced) { /* stream_splice() stored these already */
		s->stored += spliced;
		stream_store_account(s, (int64_t)spliced);
		store_caps(s);
	}
	if (s->rank == ROUTER_RANK_WILDCARD && stream_store_live(s) && !s->store_full &&
	    s->end - s->stored < STORE_BATCH) {
		if (!s->store_lazy) { /* the timer stores it, or the next */
			TAILQ_INSERT_TAIL(&r->store_lazy, s, lazy_link);
			s->store_lazy = true;
		}
		stream_store_timer_arm(r);
	} else {
		stream_lazy_unlink(s);
		stream_store_sync(s);
	}
	s->mtime_ns = now;
	notify_readers(s);
	if (stream_lag(s) > r->window)
		stream_latch(s, SUSPEND_LAG, true);
	if (over && s->nblocking)
		stream_latch(s, SUSPEND_MEM, true);
	return 0;
}

void stream_complete(struct stream *s)
{
	if (s->complete)
		return;
	s->complete = true;
	stream_lazy_unlink(s);
	stream_store_sync(s); /* a batch still waiting */
	if (s->store && stream_store_live(s) && s->r->store->complete &&
	    s->rank != ROUTER_RANK_WILDCARD)
		s->r->store->complete(s->store);
	notify_readers(s);
	stream_flow_release(s);
}

void stream_flow_release(struct stream *s)
{
	stream_latch(s, SUSPEND_LAG, false);
	stream_latch(s, SUSPEND_MEM, false);
	stream_latch(s, SUSPEND_SPOOL, false);
}

void stream_flow_check(struct stream *s)
{
	router_t *r = s->r;
	uint64_t lag = stream_lag(s);

	if (s->complete) {
		stream_flow_release(s);
		return;
	}
	if ((s->held & SUSPEND_LAG) && lag <= r->low_water)
		stream_latch(s, SUSPEND_LAG, false);
	if (s->held & SUSPEND_MEM) {
		uint64_t lim = retain_limit(s);

		/* Under memory pressure retention yields: keep only what the
		 * blocking readers still need.  (No realloc here: a read's
		 * iov points into the buffer; append shrinks it.) */
		discard_to(s, lim < s->end ? lim : s->end);
		if (lag <= r->low_water || r->mem_used <= r->budget)
			stream_latch(s, SUSPEND_MEM, false);
	}
}

int stream_reader_attach(struct stream *s, router_job_t *job, unsigned flags,
			 void (*ready)(void *), void *cbdata,
			 router_reader_t **out)
{
	struct router_reader *rd;

	rd = calloc(1, sizeof(*rd));
	if (!rd)
		return -ENOMEM;
	rd->s = s;
	rd->job = job;
	rd->flags = flags;
	rd->cursor = s->start;
	rd->ready = ready;
	rd->cbdata = cbdata;
	TAILQ_INSERT_TAIL(&s->readers, rd, link);
	if (!(flags & ROUTER_READER_NONBLOCK)) {
		s->nblocking++;
		uidmap_add(&s->r->uid_jobs, s->job->uid, UID_READERS, 1);
	}
	/* Existing bytes or EOF: let the reader know. */
	if (s->end > s->start || s->stored || s->complete)
		router_queue_ready(s->r, rd);
	stream_flow_check(s);
	if (stream_lag(s) > s->r->window && !s->complete)
		stream_latch(s, SUSPEND_LAG, true);
	*out = rd;
	return 0;
}

/* Readable at stream offset @so: in the ring, or in the store. */
static bool stream_has(const struct stream *s, uint64_t so)
{
	return so >= s->start || (so >= s->store_start && so < s->stored);
}

/* The first readable offset after the unreadable @so. */
static uint64_t next_readable(const struct stream *s, uint64_t so)
{
	if (so < s->store_start && s->store_start < s->stored &&
	    s->store_start < s->start)
		return s->store_start;
	return s->start;
}

/* The skew of a read at file offset @off: the reader's when it reads on
 * from where its last read ended (cat, grep: each later offset keeps the
 * difference a discarded start made), none at any other offset (a seek:
 * less's G, dd skip=, tail's SEEK_END, tac, a re-read from 0): offsets are
 * absolute again there, so the bytes at the end of the file are where
 * st_size says they are. */
static uint64_t skew_at(const router_reader_t *rd, uint64_t off)
{
	return off == rd->next ? rd->skew : 0;
}

/* Whether a read of @size bytes at @off reads discarded bytes as zeros (a
 * punched hole) rather than moving to the oldest retained byte.  A read
 * that goes on keeps its run's way.  A seek reads zeros, so that a reader
 * that seeks (tac and tail -n, reading blocks from the end back; less
 * scrolling up; dd skip=) gets each retained byte once, where st_size puts
 * it; except a seek to 0 by a reader whose first read was at 0 (cat, grep,
 * less: its first page, and again on g after G), which skews as its first
 * read did, so a late reader from the top sees no zeros; unless that seek
 * is a step back (the read ends where the last one began: less scrolling
 * up to the top).  @size 0: a poll, not a read. */
static bool hole_at(const router_reader_t *rd, uint64_t off, size_t size)
{
	if (off == rd->next)
		return rd->hole;
	if (off != 0 || !rd->top)
		return true;
	return size && size == rd->last;
}

/* Map a file offset to a stream offset, moving the skew when a reader
 * that skews asks for discarded bytes; a reader that reads zeros there
 * stays on the discarded byte (read_hole()). */
static uint64_t reader_pos(router_reader_t *rd, uint64_t off, size_t size)
{
	struct stream *s = rd->s;
	uint64_t so;

	if (!rd->started) { /* its first read: at 0, or a seek */
		rd->started = true;
		rd->top = off == 0;
	}
	rd->hole = hole_at(rd, off, size);
	rd->skew = skew_at(rd, off);
	so = off + rd->skew;

	if (!rd->hole && !stream_has(s, so)) {
		uint64_t to = next_readable(s, so);

		rd->skew += to - so;
		so = to;
	}
	return so;
}

/* Where @rd's read at @off would start, without moving anything (at a
 * discarded byte for a read that gets zeros there). */
static uint64_t reader_peek(const router_reader_t *rd, uint64_t off)
{
	uint64_t so = off + skew_at(rd, off);

	if (stream_has(rd->s, so) || hole_at(rd, off, 0))
		return so;
	return next_readable(rd->s, so);
}

/* The reader has read up to @to: move its cursor (with a store, only
 * forward: a re-read of history holds nobody). */
static void reader_moved(router_reader_t *rd, uint64_t to)
{
	if (!rd->s->r->store || to > rd->cursor)
		rd->cursor = to;
	stream_flow_check(rd->s);
}

/* Make @rd's sbuf hold at least @len bytes (what it holds is kept). */
static int sbuf_reserve(router_reader_t *rd, size_t len)
{
	uint8_t *nb;

	if (len <= rd->scap)
		return 0;
	nb = realloc(rd->sbuf, len);
	if (!nb)
		return -ENOMEM;
	rd->sbuf = nb;
	rd->scap = len;
	return 0;
}

/* A read below the ring's start: from the store, and on from the ring
 * where the store's part ends, into one reply (a short read in the middle
 * of a file reads as its end to tail, less, dd).  The store holds [..,
 * stored) and the ring [start, end); with start <= stored the two join,
 * else (a store given up) the read stops at stored: what follows is a
 * gap the reader's skew accounts for. */
static int read_stored(router_reader_t *rd, uint64_t so, size_t size,
		       struct iovec iov[2], int *iovcnt, size_t *n)
{
	struct stream *s = rd->s;
	uint64_t top = s->start <= s->stored ? s->end : s->stored;
	size_t len = size < STORE_READ_MAX ? size : STORE_READ_MAX;
	size_t want, got = 0;
	ssize_t k;

	if (so >= top)
		return -EIO;
	if (len > top - so)
		len = (size_t)(top - so);
	if (sbuf_reserve(rd, len) < 0)
		return -ENOMEM;
	want = so < s->stored && s->stored - so < len ? (size_t)(s->stored - so)
						       : len;
	while (got < want) {
		k = s->r->store->read_at(s->store, so + got, rd->sbuf + got,
					 want - got);
		if (k <= 0) {
			if (got)
				break;
			return k < 0 ? (int)k : -EIO;
		}
		got += (size_t)k;
	}
	if (got == want && got < len) { /* on from the ring */
		struct iovec r[2];
		int cnt = stream_ring_iov(s, so + got, len - got, r);

		for (int i = 0; i < cnt; i++) {
			memcpy(rd->sbuf + got, r[i].iov_base, r[i].iov_len);
			got += r[i].iov_len;
		}
	}
	iov[0].iov_base = rd->sbuf;
	iov[0].iov_len = got;
	*iovcnt = 1;
	*n = got;
	reader_moved(rd, so + (uint64_t)got);
	return ROUTER_SUCCESS;
}

/* A read at stream offset @so, which the stream holds or which is at or
 * past its end. */
static int read_held(router_reader_t *rd, uint64_t so, size_t size,
		     struct iovec iov[2], int *iovcnt, size_t *n)
{
	struct stream *s = rd->s;
	size_t len;

	if (so >= s->end) {
		reader_moved(rd, s->end);
		return s->complete ? ROUTER_SUCCESS : ROUTER_AGAIN;
	}
	if (so < s->start)
		return read_stored(rd, so, size, iov, iovcnt, n);
	len = (size_t)(s->end - so);
	if (len > size)
		len = size;
	*iovcnt = stream_ring_iov(s, so, len, iov);
	*n = len;
	reader_moved(rd, so + len);
	return ROUTER_SUCCESS;
}

/* A read at a seek's offset into discarded bytes: they read as zeros, as
 * a punched hole does (tac, tail -n, less scrolling up get the kept bytes
 * where st_size puts them and no kept byte twice), followed by what is
 * held from the hole's end, into one reply (a short read in the middle of
 * a file reads as an error or its end to tac and tail). */
static int read_hole(router_reader_t *rd, uint64_t so, size_t size,
		     struct iovec iov[2], int *iovcnt, size_t *n)
{
	uint64_t to = next_readable(rd->s, so);
	size_t zeros = to - so < size ? (size_t)(to - so) : size;
	size_t more = 0;
	int cnt = 0;
	struct iovec r[2];
	bool in_sbuf;

	if (zeros > STORE_READ_MAX)
		zeros = STORE_READ_MAX;
	if (zeros == to - so && zeros < size) { /* then the held bytes, if any */
		int rc = read_held(rd, to, size - zeros, r, &cnt, &more);

		if (rc < 0)
			return rc;
	}
	in_sbuf = cnt == 1 && r[0].iov_base == rd->sbuf; /* read_stored() */
	if (sbuf_reserve(rd, zeros + more) < 0)
		return -ENOMEM;
	if (in_sbuf) {
		memmove(rd->sbuf + zeros, rd->sbuf, more);
	} else {
		size_t at = zeros;

		for (int i = 0; i < cnt; i++) {
			memcpy(rd->sbuf + at, r[i].iov_base, r[i].iov_len);
			at += r[i].iov_len;
		}
	}
	memset(rd->sbuf, 0, zeros);
	iov[0].iov_base = rd->sbuf;
	iov[0].iov_len = zeros + more;
	*iovcnt = 1;
	*n = zeros + more;
	return ROUTER_SUCCESS;
}

static int reader_read(router_reader_t *rd, uint64_t off, size_t size,
		       struct iovec iov[2], int *iovcnt, size_t *n)
{
	uint64_t so = reader_pos(rd, off, size);

	if (!stream_has(rd->s, so) && so < rd->s->end)
		return read_hole(rd, so, size, iov, iovcnt, n);
	return read_held(rd, so, size, iov, iovcnt, n);
}

int router_reader_read(router_reader_t *rd, uint64_t off, size_t size,
		       struct iovec iov[2], int *iovcnt, size_t *n)
{
	int rc;

	*n = 0;
	*iovcnt = 0;
	if (!rd || size == 0)
		return ROUTER_ERR_BAD_PARAM; /* n == 0 would read as EOF */
	rc = reader_read(rd, off, size, iov, iovcnt, n);
	rd->next = off + *n; /* where a read that goes on comes next */
	rd->last = off;	     /* where a step back ends */
	return rc;
}

uint64_t router_reader_avail(router_reader_t *rd, uint64_t off)
{
	uint64_t so;

	if (!rd)
		return 0;
	so = reader_peek(rd, off);
	return so < rd->s->end ? rd->s->end - so : 0;
}

bool router_reader_complete(const router_reader_t *rd)
{
	return rd && rd->s->complete;
}

bool router_reader_eof(router_reader_t *rd, uint64_t off)
{
	if (!rd || !rd->s->complete)
		return false;
	return reader_peek(rd, off) >= rd->s->end;
}

void router_reader_close(router_reader_t *rd)
{
	struct stream *s;

	if (!rd)
		return;
	s = rd->s;
	TAILQ_REMOVE(&s->readers, rd, link);
	if (!(rd->flags & ROUTER_READER_NONBLOCK)) {
		s->nblocking--;
		uidmap_add(&s->r->uid_jobs, s->job->uid, UID_READERS, -1);
	}
	router_unqueue_ready(s->r, rd);
	stream_flow_check(s);
	router_job_unref(rd->job);
	free(rd->sbuf);
	free(rd);
}
