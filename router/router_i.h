/* SPDX-License-Identifier: MIT */
/* Private: the router context and the helpers every module uses. */
#ifndef IOFS_ROUTER_I_H
#define IOFS_ROUTER_I_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "router/router.h"
#include "router/stream_i.h"
#include "router/strmap.h"

struct event;
struct line_state;
struct xq_item;
struct flush_wait;

/* A callback to fire later from the loop (allocated before the operation
 * is accepted, so posting it cannot fail). */
struct done {
	STAILQ_ENTRY(done) link;
	router_op_cb_t cb; /* NULL: suppressed (canceled) */
	void *cbdata;
	int status;
	void (*fini)(struct done *d); /* after @cb; NULL = free(d) */
};

struct router_sub {
	TAILQ_ENTRY(router_sub) link;
	router_t *r;
	char *nspace; /* NULL = every job */
	uint32_t rank;
	uint32_t channels;
	unsigned flags;
	bool dead; /* unsubscribed while the list was being walked */
	router_fragment_fn cb;
	void *cbdata;
};

/* The counters of router.uid_jobs. */
enum { UID_JOBS = 0, UID_STORE = 1, UID_READERS = 2 };

struct router {
	struct event_base *base;
	size_t window, low_water, budget, buffering_size;
	uint64_t buffering_ns;
	router_clock_fn clock;
	void *clock_ctx;
	iofs_log_t *log;       /* borrowed */
	const struct router_store_ops *store; /* NULL = none */
	void *store_ctx;
	pthread_t loop_thread; /* under xq_lock */
	bool shut;	       /* router_shutdown() ran (loop-thread view) */
	bool freeing;	       /* inside router_free() */

	TAILQ_HEAD(, router_job) jobs;	   /* the registry */
	struct strmap job_index;	   /* nspace -> job of @jobs */
	/* uid -> [UID_JOBS] jobs of @jobs it owns, [UID_STORE] the bytes its
	 * jobs' stores hold, [UID_READERS] the blocking readers of its jobs'
	 * streams (a failed count only makes them low: the cap holds less) */
	struct strmap uid_jobs;
	TAILQ_HEAD(, router_job) all_jobs; /* every job not yet freed */
	TAILQ_HEAD(, router_sub) subs;
	int sub_walk;  /* depth of walks over @subs */
	bool sub_dead; /* some sub is dead: sweep after the walk */

	/* Deferred work, run by ev_notify on the loop. */
	struct event *ev_notify;
	bool notify_armed;
	STAILQ_HEAD(, done) done;
	TAILQ_HEAD(, router_reader) ready;

	/* Partial lines waiting for their buffering delay, oldest first. */
	TAILQ_HEAD(, line_state) pend;
	struct event *ev_timer;

	/* Cross-thread queue (deliver from other threads, router_defer). */
	pthread_mutex_t xq_lock;
	pthread_cond_t xq_cond;
	TAILQ_HEAD(, xq_item) xq;
	struct event *ev_xq;
	bool xq_closed;	     /* under xq_lock: shut down */
	unsigned xq_waiters; /* threads blocked in router_deliver() */
	uint64_t xq_in;	     /* items queued (under xq_lock) */
	uint64_t xq_out;     /* items processed (loop thread) */

	/* stdin pushes in acceptance order, and flushes waiting on them. */
	TAILQ_HEAD(, router_push) pushes;
	uint64_t push_seq;
	TAILQ_HEAD(, flush_wait) flushes;

	/* Streams whose store is full, retried by ev_store. */
	TAILQ_HEAD(, stream) store_wait;
	/* Merged views with a batch not stored yet (STORE_BATCH), stored
	 * by ev_store too. */
	TAILQ_HEAD(, stream) store_lazy;
	/* stream_view_flush() under way: store_caps() waits for the cap
	 * being applied (its caller's), no flush nests */
	bool view_flushing;
	struct event *ev_store;
	/* Caps (router_config.store_max*; 0 = none) and what the store holds
	 * (the sum of every stream's [store_start, stored)). */
	uint64_t max_stream, max_job, max_total;
	uint64_t store_used;
	/* The per-owner cap (router_config.store_max_user; 0 = none) and the
	 * owner it spares; each owner's bytes are uid_jobs[UID_STORE]. */
	uint64_t max_user;
	uint32_t user_exempt;
	/* The last "held at the per-owner cap" verdict (store_user_full()):
	 * @full_uid's bytes were @full_bytes in store retry pass @full_pass
	 * (@store_pass, counted by stream_store_retry()).  The same owner
	 * with the same bytes in the same pass gets it again without the
	 * walk over its jobs' streams: a held job of 4096 ranks has 8192
	 * streams retried each pass, and a walk each made that quadratic.
	 * @full_bytes 0: no verdict yet (an owner held has bytes). */
	uint64_t store_pass, full_pass, full_bytes;
	uint32_t full_uid;
	/* Complete jobs whose store holds bytes, in completion order: the
	 * total cap evicts from the first. */
	TAILQ_HEAD(, router_job) store_done;
	/* Running jobs whose recorded state is behind (a rank came or went):
	 * written by ev_state (STATE_DELAY_MS after the first), so that a
	 * job's ranks coming or going one by one cost one write a period. */
	TAILQ_HEAD(, router_job) state_dirty;
	struct event *ev_state;
	bool store_over_logged; /* the total cap could not be met: logged */

	size_t mem_used; /* sum of every stream buffer's capacity */
	char *scratch;	 /* formatting buffer for the merged views */
	size_t scratch_cap;
};

uint64_t router_now(router_t *r);
void router_logf(router_t *r, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Queue @rd's ready callback (coalesced). */
void router_queue_ready(router_t *r, router_reader_t *rd);
void router_unqueue_ready(router_t *r, router_reader_t *rd);
struct done *router_done_new(router_op_cb_t cb, void *cbdata);
void router_done_post(router_t *r, struct done *d, int status);
/* Re-check pending flushes (a push finished or the queue moved). */
void router_flush_check(router_t *r);
/* Arm the partial-line timer if needed. */
void router_timer_arm(router_t *r);
/* Walk the subscribers for one fragment. */
void router_subs_emit(router_t *r, const router_proc_t *src, uint32_t channel,
		      const void *bytes, size_t len,
		      const router_directives_t *dirs);
/* Grow r->scratch to at least @n bytes: 0 or -ENOMEM. */
int router_scratch(router_t *r, size_t n);

#endif
