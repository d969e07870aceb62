/* SPDX-License-Identifier: MIT */
/*
 * A stream's write-through store (the spool): opened on first use, every
 * appended byte written before the producer is acknowledged (a merged
 * view's in batches, STORE_BATCH), what it holds counted per stream, job,
 * owner and in all, and a store that cannot take the bytes yet (a full
 * disk, the owner's cap, a view ahead of its ranks) retried on the timer
 * with its producers held back.  The ring keeps what is not stored.
 */
#include "router/stream_i.h"

#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>

#include "router/job_i.h"
#include "router/router_i.h"

void stream_store_unwait(struct stream *s)
{
	if (s->store_full) {
		TAILQ_REMOVE(&s->r->store_wait, s, store_link);
		s->store_full = false;
	}
}

bool stream_store_by_ref(const struct stream *s)
{
	return s->rank == ROUTER_RANK_WILDCARD && s->r->store->disk_bytes &&
	       s->r->store->append_ref;
}

/* What the store holds changed by @delta bytes (for a view stored by
 * reference: whatever its files take now). */
void stream_store_account(struct stream *s, int64_t delta)
{
	if (stream_store_by_ref(s))
		delta = s->store ? (int64_t)(s->r->store->disk_bytes(s->store) -
					     s->charged)
				 : 0;
	s->charged += (uint64_t)delta;
	s->job->store_bytes += (uint64_t)delta;
	s->r->store_used += (uint64_t)delta;
	/* a failure (no memory for a new owner) only makes the owner's sum
	 * low: the per-owner cap then acts later */
	uidmap_add(&s->r->uid_jobs, s->job->uid, UID_STORE, delta);
}

/* The store is gone: nothing counted for it any more. */
void stream_store_uncharge(struct stream *s)
{
	s->job->store_bytes -= s->charged;
	s->r->store_used -= s->charged;
	uidmap_add(&s->r->uid_jobs, s->job->uid, UID_STORE,
		   -(int64_t)s->charged);
	s->charged = 0;
}

uint64_t stream_store_held(const struct stream *s)
{
	return s->stored > s->store_start ? s->stored - s->store_start : 0;
}

void stream_lazy_unlink(struct stream *s)
{
	if (s->store_lazy) {
		TAILQ_REMOVE(&s->r->store_lazy, s, lazy_link);
		s->store_lazy = false;
	}
}

/* The store takes every byte from here on (the ring keeps what it has
 * not taken yet). */
bool stream_store_live(const struct stream *s)
{
	return s->r->store && !s->store_failed;
}

/* "nspace/rank/stdout" ("merged" for the views) */
static void stream_name(const struct stream *s, char *buf, size_t len)
{
	char rank[16] = "merged";

	if (s->rank != ROUTER_RANK_WILDCARD)
		snprintf(rank, sizeof(rank), "%" PRIu32, s->rank);
	snprintf(buf, len, "%s/%s/%s", router_job_nspace(s->job), rank,
		 s->channel == ROUTER_CH_STDOUT ? "stdout" : "stderr");
}

static void store_give_up(struct stream *s, int err, const char *what)
{
	char name[ROUTER_NSPACE_MAX + 32];

	s->store_failed = true;
	stream_name(s, name, sizeof(name));
	router_logf(s->r, LOG_ERR,
		    "%s: spool %s: %s: from byte %" PRIu64
		    " on only the last window of it is kept",
		    name, what, strerror(err), s->stored);
}

void stream_store_timer_arm(router_t *r)
{
	struct timeval tv = {0, STORE_RETRY_NS / 1000};

	if (!r->shut && !evtimer_pending(r->ev_store, NULL))
		evtimer_add(r->ev_store, &tv);
}

/* The store cannot take the bytes yet: retry on the timer.  @err
 * (ENOSPC, EDQUOT; 0: the owner's cap, store_user_full()) holds the
 * producer(s) back, logged once; EAGAIN (a view whose ranks' bytes are
 * not stored yet, mrec_write()) only waits: its ranks are held already,
 * and each one that stores kicks it (view_kick()). */
static void store_wait(struct stream *s, int err)
{
	char name[ROUTER_NSPACE_MAX + 32];

	if (!s->store_full) {
		s->store_full = true;
		TAILQ_INSERT_TAIL(&s->r->store_wait, s, store_link);
	}
	stream_store_timer_arm(s->r);
	if (err == EAGAIN)
		return;
	if (!s->store_warned) { /* once until it resumes */
		char note[160];

		/* the log is the daemon's: the job's users learn it here */
		if (err)
			snprintf(note, sizeof(note),
				 "output was held back: the spool: %s",
				 strerror(err));
		else
			snprintf(note, sizeof(note),
				 "output was held back at its owner's per-user "
				 "spool cap (spool_max_user): readers of the "
				 "owner's jobs kept that much unread");
		router_job_note(s->job, note);
		stream_name(s, name, sizeof(name));
		router_logf(s->r, LOG_WARNING,
			    "%s: spool write: %s: holding its producer back "
			    "at byte %" PRIu64 ", retrying",
			    name,
			    err ? strerror(err)
				: "its owner's jobs hold the per-user cap "
				  "(spool_max_user) and their readers keep it",
			    s->stored);
		s->store_warned = true;
	}
	if (!s->complete)
		stream_latch(s, SUSPEND_SPOOL, true);
}

/* @s (off r->store_wait) took its bytes: let its producers go. */
static void store_resumed(struct stream *s)
{
	char name[ROUTER_NSPACE_MAX + 32];

	if (s->store_warned && !s->store_failed) {
		stream_name(s, name, sizeof(name));
		router_logf(s->r, LOG_NOTICE,
			    "%s: spool write resumed at byte %" PRIu64, name,
			    s->stored);
	}
	s->store_warned = false;
	stream_latch(s, SUSPEND_SPOOL, false);
}

/* The stream's store, opened on first use: false if it cannot be. */
static bool store_open(struct stream *s)
{
	void *jh;
	int rc;

	if (s->store)
		return true;
	jh = job_store(s->job);
	rc = jh && s->stored == 0 && s->start == 0
		 ? s->r->store->open(jh, s->rank, s->channel, &s->store)
		 : -EIO;
	if (rc < 0) {
		s->store = NULL;
		if (jh)
			store_give_up(s, -rc, "open");
		else
			s->store_failed = true; /* logged by the job */
		return false;
	}
	return true;
}

/* Rank stream @s stored bytes: its view, if it waits for them
 * (EAGAIN), stores what it can now. */
static void view_kick(struct stream *s)
{
	struct stream *m =
	    &s->job->m[s->channel == ROUTER_CH_STDOUT ? CI_OUT : CI_ERR].s;

	if (!m->store_full || m->store_warned)
		return; /* not waiting, or held for the disk: the timer's */
	stream_store_unwait(m);
	stream_store_sync(m); /* back on the list if it still waits */
	if (!m->store_full)
		store_resumed(m);
}

/* Write [stored, end) from the ring to the store (opened on first use). */
void stream_store_sync(struct stream *s)
{
	const struct router_store_ops *ops = s->r->store;
	bool took = false;

	if (!stream_store_live(s) || s->stored >= s->end || !store_open(s))
		return;
	/* a view's own bytes are its index (what its ranks' files hold):
	 * it waits for its ranks, not for the cap */
	if (s->rank != ROUTER_RANK_WILDCARD && store_user_full(s->job)) {
		store_wait(s, 0);
		return;
	}
	while (s->stored < s->end) {
		struct iovec iov[2];
		ssize_t w;

		if (s->rank == ROUTER_RANK_WILDCARD && ops->append_ref)
			w = mrec_write((struct merged *)s);
		else
			w = ops->append(s->store, iov,
					stream_ring_iov(s, s->stored,
							(size_t)(s->end -
								 s->stored),
							iov));

		if (w == -ENOSPC || w == -EDQUOT) {
			if (store_make_room(s->r, s->job))
				continue; /* an old job's space: again */
			store_wait(s, (int)-w);
			break;
		}
		if (w == -EAGAIN) { /* a view, ahead of its ranks' files */
			store_wait(s, EAGAIN);
			break;
		}
		if (w <= 0) {
			store_give_up(s, w < 0 ? (int)-w : EIO, "write");
			return;
		}
		s->stored += (uint64_t)w;
		stream_store_account(s, w);
		took = true;
	}
	if (took)
		store_caps(s);
	if (took && s->rank != ROUTER_RANK_WILDCARD)
		view_kick(s);
}

int stream_adopt(struct stream *s, void *h, uint64_t size)
{
	if (s->end || s->store || s->buf)
		return ROUTER_ERR_EXISTS;
	s->store = h;
	s->stored = s->start = s->end = size;
	if (s->r->store->held_from)
		s->store_start = s->r->store->held_from(h);
	if (s->store_start > size)
		s->store_start = size;
	s->dropped = s->store_start; /* an earlier life's caps */
	stream_store_account(s, (int64_t)(size - s->store_start));
	return 0;
}

ssize_t stream_splice(struct stream *s, int fd, void *buf, size_t n,
		      const void **bytes)
{
	const struct router_store_ops *ops = s->r->store;
	ssize_t w;

	if (!stream_store_live(s) || !ops->splice_in ||
	    s->rank == ROUTER_RANK_WILDCARD || s->complete)
		return -ENOTSUP;
	stream_store_sync(s); /* nothing may wait ahead of these bytes */
	if (s->store_full || store_user_full(s->job))
		return -ENOSPC; /* the usual deliver holds them (store_sync) */
	if (!stream_store_live(s) || s->stored < s->end || !store_open(s))
		return -ENOTSUP;
	for (;;) {
		w = ops->splice_in(s->store, fd, buf, n, bytes);
		if (w == -ENOSPC || w == -EDQUOT) {
			if (store_make_room(s->r, s->job))
				continue; /* an old job's space: again */
			/* the usual deliver holds them for the disk: its append
			 * fails the same way and waits (store_wait: latched,
			 * logged once, retried from the ring) */
			return -ENOSPC;
		}
		if (w == -ENOTSUP || w == -EINVAL)
			return -ENOTSUP; /* not from a pipe: append as usual */
		if (w == -EAGAIN)
			return -EAGAIN;
		if (w == 0)
			return -EPIPE;
		if (w < 0) {
			store_give_up(s, (int)-w, "write");
			return -ENOTSUP; /* the caller reads the pipe itself */
		}
		s->spliced = (uint64_t)w; /* counted by the append that follows */
		return w;
	}
}

void stream_store_retry(router_t *r)
{
	struct stream *s;
	uint64_t n = 0, todo = 0;

	r->store_pass++; /* readers may have read: verdicts are stale */
	while ((s = TAILQ_FIRST(&r->store_lazy))) {
		stream_lazy_unlink(s);
		stream_store_sync(s);
	}

	/* Each waiting stream once: one still full goes back at the tail
	 * (walking the list as it is re-appended to would never end). */
	TAILQ_FOREACH (s, &r->store_wait, store_link)
		todo++;
	while (n++ < todo && (s = TAILQ_FIRST(&r->store_wait))) {
		stream_store_unwait(s);
		stream_store_sync(s); /* back on the list if still full */
		if (!s->store_full)
			store_resumed(s);
	}
}
