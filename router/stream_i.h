/* SPDX-License-Identifier: MIT */
/*
 * A stream: a retained window of a byte stream with absolute offsets, any
 * number of readers with their own cursors, and the lag latch that turns a
 * slow blocking reader into XOFF for whoever feeds the stream.
 *
 * The buffer is a ring allocated lazily on the first byte; it starts at
 * STREAM_MIN_CAP bytes and doubles.  The oldest bytes beyond the window are
 * discarded on append, but never below the cursor of a blocking reader, so
 * the buffer can exceed the window by what arrived while XOFF was in flight.
 *
 * With storage (router_config.store, the spool) every byte is also appended
 * to the stream's store as it arrives (write-through), from offset 0: the
 * ring then keeps only the window (never bytes not yet stored), and a reader
 * asking for an offset older than the ring is served from the store.  A
 * store that fails is given up (logged once); the window rules apply from
 * there on, and what it holds stays readable.  A store that is full
 * (ENOSPC, EDQUOT) is not given up: the stream holds its producer(s) back
 * (SUSPEND_SPOOL) and keeps the unstored bytes in the ring until a retry
 * (every STORE_RETRY_NS, router_run_timers()) gets them all in.
 */
#ifndef IOFS_ROUTER_STREAM_I_H
#define IOFS_ROUTER_STREAM_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/uio.h>

#include "router/router.h"

#define STREAM_MIN_CAP 512

/* Suspend reasons of a (rank, channel) latch (bitmask). */
enum {
	SUSPEND_LAG = 1u << 0,	  /* the rank's own stream lags */
	SUSPEND_MERGED = 1u << 1, /* the job's merged view lags */
	SUSPEND_MEM = 1u << 2,	  /* the memory budget is exhausted */
	SUSPEND_SPOOL = 1u << 3,  /* the store is full (ENOSPC, EDQUOT) */
};

/* A merged view is stored in batches of this many bytes (or what
 * arrived within STORE_RETRY_NS, or at its end): its bytes come in small
 * tagged pieces (a partial line every 4 KiB), and a write each cost the
 * daemon more than the copy.  A rank's own bytes are stored at once
 * (before the producer is acknowledged). */
#define STORE_BATCH (64u << 10)

/* Retry interval of a full store, ns. */
#define STORE_RETRY_NS 100000000u

struct stream;
typedef void (*stream_flow_fn)(struct stream *s, unsigned reason, bool on);

struct router_reader {
	TAILQ_ENTRY(router_reader) link;       /* s->readers */
	TAILQ_ENTRY(router_reader) ready_link; /* r->ready while queued */
	struct stream *s;
	router_job_t *job; /* the reference this reader holds */
	uint64_t cursor;   /* stream offset after the last byte returned; with
			    * a store, the furthest such offset, and at least
			    * where the window began when it opened (history
			    * before that is replay: it holds nobody) */
	uint64_t skew;	   /* stream offset = file offset + skew, for a
			    * read at @next; any other offset is absolute */
	uint64_t next;	   /* file offset after the last read's bytes */
	unsigned flags;
	uint64_t last;	   /* file offset of the last read */
	bool hole;    /* this run of reads (hole_at()) reads discarded bytes
		       * as zeros, instead of skewing past them */
	bool started; /* it has read */
	bool top;     /* its first read was at 0 */
	bool queued; /* on r->ready */
	uint8_t *sbuf; /* bytes read from the store, valid until the next read */
	size_t scap;
	void (*ready)(void *cbdata);
	void *cbdata;
};

struct stream {
	router_t *r;
	uint8_t *buf; /* ring of @cap bytes, NULL until the first byte */
	size_t cap;
	size_t head;	/* index in @buf of the byte at offset @start */
	uint64_t start; /* oldest retained byte */
	uint64_t end;	/* one past the newest byte == bytes produced */
	uint64_t mtime_ns;
	uint64_t dropped; /* discarded before an attached reader read them */
	TAILQ_HEAD(, router_reader) readers;
	uint32_t nblocking; /* readers without ROUTER_READER_NONBLOCK */
	bool complete;
	unsigned held; /* SUSPEND_LAG / SUSPEND_MEM asserted by this stream */
	stream_flow_fn on_flow; /* owner's latch (rank or job) */
	/* Storage (r->store): */
	router_job_t *job; /* whose stream, to open the store */
	uint32_t rank;	   /* or ROUTER_RANK_WILDCARD (merged view) */
	uint32_t channel;  /* ROUTER_CH_STDOUT or ROUTER_CH_STDERR */
	void *store;	   /* NULL until the first byte, or without storage */
	uint64_t stored;   /* bytes appended to the store: [0, stored) */
	uint64_t store_start; /* a cap evicted [0, store_start) from it */
	uint64_t spliced;  /* stored by stream_splice(), not appended yet */
	uint64_t charged;  /* what it counts in job->store_bytes and
			    * r->store_used: its held bytes, or for a view
			    * stored by reference its disk_bytes() */
	bool store_failed; /* given up: no more appends to it */
	bool store_full;   /* on r->store_wait: retried by the timer */
	bool store_warned; /* "holding its producer back" logged */
	bool store_lazy;   /* on r->store_lazy: a batch waits (merged view) */
	TAILQ_ENTRY(stream) lazy_link;
	TAILQ_ENTRY(stream) store_link;
};

void stream_init(struct stream *s, router_t *r, stream_flow_fn on_flow,
		 uint64_t now, router_job_t *job, uint32_t rank,
		 uint32_t channel);
/* Releases held latches (idempotent), detaches nothing: readers must be
 * gone.  Frees the buffer, closes the store. */
void stream_destroy(struct stream *s);

/* Append; discards per the retention rule, notifies readers, may assert
 * the lag latch.  0 or -ENOMEM (nothing appended). */
int stream_append(struct stream *s, const void *p, size_t n, uint64_t now);
/* Store up to @n bytes straight from the pipe @fd (the store's splice_in,
 * which points @bytes at them, in @buf or its own memory) before they are appended: stream_append()
 * of exactly them must follow, and counts them stored.  The bytes moved
 * (> 0); -ENOSPC: the store is full (nothing moved: the caller delivers
 * the bytes the usual way, which holds them for the disk); -EAGAIN: the
 * pipe is empty; -EPIPE: at its end; -ENOTSUP: this stream cannot. */
ssize_t stream_splice(struct stream *s, int fd, void *buf, size_t n,
		      const void **bytes);
/* EOF: notifies readers, releases held latches.  Idempotent. */
void stream_complete(struct stream *s);
/* Re-evaluate the latches (after a cursor moved or a reader left). */
void stream_flow_check(struct stream *s);
/* Release every latch this stream holds (idempotent). */
void stream_flow_release(struct stream *s);

/* Adopt store @h holding @size bytes as the history of an empty stream:
 * 0 or ROUTER_ERR_EXISTS. */
int stream_adopt(struct stream *s, void *h, uint64_t size);
/* A cap: forget the store's bytes below @to (clamped: never a byte a
 * blocking reader of a running stream still needs, never past what was
 * appended); counted in dropped when no longer in the ring either.
 * Returns the bytes evicted. */
uint64_t stream_store_evict(struct stream *s, uint64_t to);
/* What @s's store holds and could evict now (above a blocking reader's
 * need). */
uint64_t stream_store_held(const struct stream *s);
uint64_t stream_store_evictable(const struct stream *s);
/* A merged view stored by reference (store ops append_ref and
 * disk_bytes): it counts its files' bytes, not its size, and a job's or
 * the spool's cap does not pick it: it follows its ranks' evictions
 * (mrec_follow()); its own per-stream cap still cuts it, and the
 * per-owner cap as a last resort (user_cap()). */
bool stream_store_by_ref(const struct stream *s);
/* The view's store no longer holds [store_start, @to) (a merged view
 * stored by reference whose ranks evicted): counted as dropped where the
 * ring does not hold them either. */
void stream_store_skip(struct stream *s, uint64_t to);
/* The ring's bytes [@so, @so + @len) (retained) as 1 or 2 iovecs. */
int stream_ring_iov(const struct stream *s, uint64_t so, size_t len,
		    struct iovec iov[2]);
/* Store the waiting batches, retry every full store (router_run_timers()
 * and the store timer). */
void stream_store_retry(router_t *r);

/* Within the stream (router/stream.c and its store, stream_store.c). */
/* Set or clear @reason of @s's latch; the flow callback on a change. */
void stream_latch(struct stream *s, unsigned reason, bool on);
/* The store takes every byte from here on (it has not failed). */
bool stream_store_live(const struct stream *s);
/* Write [stored, end) from the ring to the store (opened on first use);
 * what cannot go yet waits on the timer (r->store_wait). */
void stream_store_sync(struct stream *s);
/* What the store holds changed by @delta bytes: the stream's, job's,
 * owner's and total counts. */
void stream_store_account(struct stream *s, int64_t delta);
/* The store is gone: nothing counted for it any more. */
void stream_store_uncharge(struct stream *s);
/* Off r->store_wait / r->store_lazy (idempotent). */
void stream_store_unwait(struct stream *s);
void stream_lazy_unlink(struct stream *s);
/* A cap is about to evict rank bytes: merged view @mv first stores its
 * pieces waiting for a batch (STORE_BATCH bytes or the timer), so that it
 * holds references to them, which follow the eviction (mrec_follow()),
 * not copies of bytes its ranks no longer hold.  Caps are not applied
 * meanwhile (the caller is applying one), and flushes do not nest. */
struct merged;
void stream_view_flush(struct merged *mv);
/* The store timer, armed (a batch or a full store waits). */
void stream_store_timer_arm(router_t *r);

int stream_reader_attach(struct stream *s, router_job_t *job, unsigned flags,
			 void (*ready)(void *), void *cbdata,
			 router_reader_t **out);

#endif
