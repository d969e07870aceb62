/* SPDX-License-Identifier: MIT */
/* The router context: deliver entry, cross-thread queue, deferred work,
 * timers, subscribers, flush, shutdown. */
#include "router/router.h"

#include <errno.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include "router/job_i.h"
#include "router/line_i.h"
#include "router/push_i.h"
#include "router/router_i.h"

/* A request from another thread. */
struct xq_item {
	TAILQ_ENTRY(xq_item) link;
	enum { XQ_DELIVER, XQ_DEFER } kind;
	/* XQ_DELIVER */
	router_proc_t src;
	uint32_t channel;
	const void *bytes;
	size_t len;
	router_directives_t dirs;
	bool has_dirs;
	struct done *done; /* non-blocking: the caller's callback */
	bool blocking;	   /* the caller waits on xq_cond for @finished */
	bool finished;
	int status;
	/* XQ_DEFER */
	void (*fn)(void *arg);
	void *arg;
};

struct flush_wait {
	TAILQ_ENTRY(flush_wait) link;
	uint64_t push_seq; /* pushes up to this one */
	uint64_t xq_seq;   /* cross-thread items up to this one */
	struct done *done;
};

static uint64_t default_clock(void *ctx)
{
	struct timespec ts;

	(void)ctx;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t router_now(router_t *r)
{
	return r->clock(r->clock_ctx);
}

void router_logf(router_t *r, int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	iofs_vlogf(r->log, level, "router", fmt, ap);
	va_end(ap);
}

int router_scratch(router_t *r, size_t n)
{
	char *nb;

	if (n <= r->scratch_cap)
		return 0;
	nb = realloc(r->scratch, n);
	if (!nb)
		return -ENOMEM;
	r->scratch = nb;
	r->scratch_cap = n;
	return 0;
}

/* ---- deferred work ------------------------------------------------------ */

static void notify_arm(router_t *r)
{
	if (r->notify_armed || r->freeing)
		return;
	r->notify_armed = true;
	event_active(r->ev_notify, EV_READ, 0);
}

void router_queue_ready(router_t *r, router_reader_t *rd)
{
	if (rd->queued || !rd->ready)
		return;
	rd->queued = true;
	TAILQ_INSERT_TAIL(&r->ready, rd, ready_link);
	notify_arm(r);
}

void router_unqueue_ready(router_t *r, router_reader_t *rd)
{
	if (!rd->queued)
		return;
	TAILQ_REMOVE(&r->ready, rd, ready_link);
	rd->queued = false;
}

struct done *router_done_new(router_op_cb_t cb, void *cbdata)
{
	struct done *d = calloc(1, sizeof(*d));

	if (d) {
		d->cb = cb;
		d->cbdata = cbdata;
	}
	return d;
}

void router_done_post(router_t *r, struct done *d, int status)
{
	d->status = status;
	STAILQ_INSERT_TAIL(&r->done, d, link);
	notify_arm(r);
}

static void run_deferred(router_t *r)
{
	router_reader_t *rd;
	struct done *d;

	for (;;) {
		if ((rd = TAILQ_FIRST(&r->ready))) {
			router_unqueue_ready(r, rd);
			rd->ready(rd->cbdata);
		} else if ((d = STAILQ_FIRST(&r->done))) {
			STAILQ_REMOVE_HEAD(&r->done, link);
			if (d->cb)
				d->cb(d->status, d->cbdata);
			if (d->fini)
				d->fini(d);
			else
				free(d);
		} else {
			break;
		}
	}
}

static void on_notify(evutil_socket_t fd, short what, void *arg)
{
	router_t *r = arg;

	(void)fd;
	(void)what;
	r->notify_armed = false;
	run_deferred(r);
}

/* ---- timers ------------------------------------------------------------- */

void router_timer_arm(router_t *r)
{
	struct line_state *ls = TAILQ_FIRST(&r->pend);
	uint64_t now, due, wait;
	struct timeval tv;

	if (!ls || r->freeing)
		return;
	now = router_now(r);
	due = ls->due;
	wait = due > now ? due - now : 0;
	if (wait > r->buffering_ns)
		wait = r->buffering_ns; /* the clock went back */
	tv.tv_sec = (time_t)(wait / 1000000000u);
	tv.tv_usec = (suseconds_t)((wait % 1000000000u) / 1000u);
	if (!evtimer_pending(r->ev_timer, NULL))
		evtimer_add(r->ev_timer, &tv);
}

void router_run_timers(router_t *r)
{
	struct line_state *ls;
	uint64_t now;

	if (!r)
		return;
	now = router_now(r);
	while ((ls = TAILQ_FIRST(&r->pend)) && ls->due <= now) {
		int ci;
		router_rank_t *rank = line_rank(ls, &ci);
		int rc;

		if (rank->ch[ci].reasons) {
			/* We hold this producer back, so the rest of its line
			 * waits in its pipe because of us: flushing now would
			 * split the line.  Wait another period. */
			TAILQ_REMOVE(&r->pend, ls, pend_link);
			ls->due = now + r->buffering_ns;
			TAILQ_INSERT_TAIL(&r->pend, ls, pend_link);
			continue;
		}
		rc = line_flush(rank, ci, false);

		if (rc < 0)
			router_logf(r, LOG_ERR,
				    "router: partial line of %s "
				    "rank %u lost: %s",
				    rank->job->nspace, rank->id,
				    router_strerror(rc));
	}
	router_timer_arm(r);
	stream_store_retry(r);
}

static void on_store_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	stream_store_retry(arg);
}

static void on_state_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	store_state_flush(arg);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	router_run_timers(arg);
}

/* ---- subscribers -------------------------------------------------------- */

void router_subs_emit(router_t *r, const router_proc_t *src, uint32_t channel,
		      const void *bytes, size_t len,
		      const router_directives_t *dirs)
{
	struct router_sub *s, *tmp;
	bool local = router_dir_local_output(dirs);

	r->sub_walk++;
	TAILQ_FOREACH (s, &r->subs, link) {
		if (s->dead || !(s->channels & channel))
			continue;
		if (s->nspace && strcmp(s->nspace, src->nspace) != 0)
			continue;
		if (s->rank != ROUTER_RANK_WILDCARD && s->rank != src->rank)
			continue;
		if ((s->flags & ROUTER_SUB_LOCAL) && !local)
			continue;
		s->cb(s->cbdata, src, channel, bytes, len, dirs);
	}
	if (--r->sub_walk == 0 && r->sub_dead) {
		r->sub_dead = false;
		for (s = TAILQ_FIRST(&r->subs); s; s = tmp) {
			tmp = TAILQ_NEXT(s, link);
			if (s->dead) {
				TAILQ_REMOVE(&r->subs, s, link);
				free(s->nspace);
				free(s);
			}
		}
	}
}

int router_subscribe(router_t *r, const char *nspace, uint32_t rank,
		     uint32_t channels, unsigned flags, router_fragment_fn cb,
		     void *cbdata, router_sub_t **out)
{
	struct router_sub *s;

	if (!r)
		return ROUTER_ERR_INIT;
	if (!cb || !out ||
	    !(channels &
	      (ROUTER_CH_STDOUT | ROUTER_CH_STDERR | ROUTER_CH_STDDIAG)) ||
	    (nspace && !router_nspace_valid(nspace, strlen(nspace))))
		return ROUTER_ERR_BAD_PARAM;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	if (nspace && !(s->nspace = strdup(nspace))) {
		free(s);
		return -ENOMEM;
	}
	s->r = r;
	s->rank = rank;
	s->channels = channels;
	s->flags = flags;
	s->cb = cb;
	s->cbdata = cbdata;
	TAILQ_INSERT_TAIL(&r->subs, s, link);
	*out = s;
	return 0;
}

void router_unsubscribe(router_sub_t *s)
{
	router_t *r;

	if (!s)
		return;
	r = s->r;
	if (r->sub_walk) {
		s->dead = true;
		r->sub_dead = true;
		return;
	}
	TAILQ_REMOVE(&r->subs, s, link);
	free(s->nspace);
	free(s);
}

/* ---- flush -------------------------------------------------------------- */

void router_flush_check(router_t *r)
{
	struct flush_wait *fw, *tmp;
	uint64_t oldest = push_oldest_seq(r);

	for (fw = TAILQ_FIRST(&r->flushes); fw; fw = tmp) {
		tmp = TAILQ_NEXT(fw, link);
		if (oldest <= fw->push_seq || r->xq_out < fw->xq_seq)
			continue;
		TAILQ_REMOVE(&r->flushes, fw, link);
		router_done_post(r, fw->done, ROUTER_SUCCESS);
		free(fw);
	}
}

int router_flush(router_t *r, router_op_cb_t cbfunc, void *cbdata)
{
	struct flush_wait *fw;

	if (!r)
		return ROUTER_ERR_INIT;
	if (!cbfunc)
		return ROUTER_ERR_BAD_PARAM;
	if (r->shut)
		return ROUTER_ERR_NOT_AVAILABLE;
	fw = calloc(1, sizeof(*fw));
	if (!fw)
		return -ENOMEM;
	fw->done = router_done_new(cbfunc, cbdata);
	if (!fw->done) {
		free(fw);
		return -ENOMEM;
	}
	fw->push_seq = r->push_seq;
	pthread_mutex_lock(&r->xq_lock);
	fw->xq_seq = r->xq_in;
	pthread_mutex_unlock(&r->xq_lock);
	TAILQ_INSERT_TAIL(&r->flushes, fw, link);
	router_flush_check(r);
	return ROUTER_SUCCESS;
}

/* ---- the cross-thread queue --------------------------------------------- */

static void xq_finish(router_t *r, struct xq_item *it, int rc)
{
	r->xq_out++;
	if (it->kind == XQ_DEFER) {
		it->fn(it->arg);
		free(it);
	} else if (it->blocking) {
		pthread_mutex_lock(&r->xq_lock);
		it->status = rc == 0 ? ROUTER_OPERATION_SUCCEEDED : rc;
		it->finished = true; /* @it belongs to the caller from here */
		pthread_cond_broadcast(&r->xq_cond);
		pthread_mutex_unlock(&r->xq_lock);
	} else {
		router_done_post(r, it->done, rc == 0 ? ROUTER_SUCCESS : rc);
		free(it);
	}
}

static void xq_run(router_t *r, bool fail)
{
	TAILQ_HEAD(, xq_item) todo = TAILQ_HEAD_INITIALIZER(todo);
	struct xq_item *it;

	pthread_mutex_lock(&r->xq_lock);
	TAILQ_CONCAT(&todo, &r->xq, link);
	pthread_mutex_unlock(&r->xq_lock);
	while ((it = TAILQ_FIRST(&todo))) {
		int rc = 0;

		TAILQ_REMOVE(&todo, it, link);
		if (it->kind == XQ_DELIVER)
			rc = fail
				 ? ROUTER_ERR_NOT_AVAILABLE
				 : job_deliver(r, &it->src, it->channel,
					       it->bytes, it->len,
					       it->has_dirs ? &it->dirs : NULL);
		xq_finish(r, it, rc);
	}
	router_flush_check(r);
}

static void on_xq(evutil_socket_t fd, short what, void *arg)
{
	router_t *r = arg;

	(void)fd;
	(void)what;
	xq_run(r, r->shut);
}

/* Queue @it (under xq_lock): false if the router is shut down. */
static bool xq_push_locked(router_t *r, struct xq_item *it)
{
	if (r->xq_closed)
		return false;
	TAILQ_INSERT_TAIL(&r->xq, it, link);
	r->xq_in++;
	event_active(r->ev_xq, EV_READ, 0);
	return true;
}

int router_defer(router_t *r, void (*fn)(void *arg), void *arg)
{
	struct xq_item *it;
	bool ok;

	if (!r)
		return ROUTER_ERR_INIT;
	if (!fn)
		return ROUTER_ERR_BAD_PARAM;
	it = calloc(1, sizeof(*it));
	if (!it)
		return -ENOMEM;
	it->kind = XQ_DEFER;
	it->fn = fn;
	it->arg = arg;
	pthread_mutex_lock(&r->xq_lock);
	ok = xq_push_locked(r, it);
	pthread_mutex_unlock(&r->xq_lock);
	if (!ok) {
		free(it);
		return ROUTER_ERR_NOT_AVAILABLE;
	}
	return 0;
}

/* ---- deliver ------------------------------------------------------------ */

/* loop_thread may be moved by router_set_loop_thread() on another thread. */
static bool on_loop_thread(router_t *r)
{
	bool on;

	pthread_mutex_lock(&r->xq_lock);
	on = pthread_equal(pthread_self(), r->loop_thread);
	pthread_mutex_unlock(&r->xq_lock);
	return on;
}

static int deliver_check(const router_proc_t *source, uint32_t channel,
			 const void *bytes, size_t len)
{
	if (!source || source->rank > ROUTER_RANK_MAX ||
	    !router_nspace_valid(
		source->nspace, strnlen(source->nspace, ROUTER_NSPACE_MAX + 1)))
		return ROUTER_ERR_BAD_PARAM;
	if (channel != ROUTER_CH_STDOUT && channel != ROUTER_CH_STDERR &&
	    channel != ROUTER_CH_STDDIAG)
		return ROUTER_ERR_BAD_PARAM;
	if (!bytes && len)
		return ROUTER_ERR_BAD_PARAM;
	return 0;
}

static int deliver_elsewhere(router_t *r, const router_proc_t *source,
			     uint32_t channel, const void *bytes, size_t len,
			     const router_directives_t *dirs,
			     router_op_cb_t cbfunc, void *cbdata)
{
	struct xq_item local, *it = &local;
	int status;

	if (cbfunc) {
		it = calloc(1, sizeof(*it));
		if (!it)
			return -ENOMEM;
		it->done = router_done_new(cbfunc, cbdata);
		if (!it->done) {
			free(it);
			return -ENOMEM;
		}
	} else {
		memset(it, 0, sizeof(*it));
		it->blocking = true;
	}
	it->kind = XQ_DELIVER;
	it->src = *source;
	it->channel = channel;
	it->bytes = bytes;
	it->len = len;
	if (dirs) {
		it->dirs = *dirs;
		it->has_dirs = true;
	}
	pthread_mutex_lock(&r->xq_lock);
	if (!xq_push_locked(r, it)) {
		pthread_mutex_unlock(&r->xq_lock);
		if (cbfunc) {
			free(it->done);
			free(it);
		}
		return ROUTER_ERR_NOT_AVAILABLE;
	}
	if (cbfunc) {
		pthread_mutex_unlock(&r->xq_lock);
		return ROUTER_SUCCESS;
	}
	r->xq_waiters++;
	while (!it->finished)
		pthread_cond_wait(&r->xq_cond, &r->xq_lock);
	status = it->status;
	if (--r->xq_waiters == 0 && r->xq_closed)
		pthread_cond_broadcast(&r->xq_cond);
	pthread_mutex_unlock(&r->xq_lock);
	return status;
}

int router_deliver(router_t *r, const router_proc_t *source, uint32_t channel,
		   const void *bytes, size_t len,
		   const router_directives_t *dirs, router_op_cb_t cbfunc,
		   void *cbdata)
{
	struct done *d;
	int rc;

	if (!r)
		return ROUTER_ERR_INIT;
	rc = deliver_check(source, channel, bytes, len);
	if (rc)
		return rc;
	if (!on_loop_thread(r))
		return deliver_elsewhere(r, source, channel, bytes, len, dirs,
					 cbfunc, cbdata);
	if (!cbfunc) {
		router_logf(
		    r, LOG_ERR,
		    "router_deliver: blocking form (NULL cbfunc) called "
		    "on the router's loop thread would wait for itself; "
		    "nothing done: pass a callback or call it from "
		    "another thread");
		return ROUTER_WOULD_BLOCK;
	}
	if (r->shut)
		return ROUTER_ERR_NOT_AVAILABLE;
	d = router_done_new(cbfunc, cbdata);
	if (!d)
		return -ENOMEM;
	rc = job_deliver(r, source, channel, bytes, len, dirs);
	if (rc) {
		free(d);
		return rc;
	}
	router_done_post(r, d, ROUTER_SUCCESS);
	return ROUTER_SUCCESS;
}

int router_deliver_pipe(router_t *r, const router_proc_t *source,
			uint32_t channel, int fd, void *buf, size_t cap,
			const router_directives_t *dirs,
			router_op_cb_t cbfunc, void *cbdata, size_t *taken)
{
	struct done *d;
	int rc;

	*taken = 0;
	if (!r)
		return ROUTER_ERR_INIT;
	rc = deliver_check(source, channel, buf, cap);
	if (rc)
		return rc;
	if (!cbfunc || fd < 0 || !cap || !on_loop_thread(r))
		return ROUTER_ERR_BAD_PARAM;
	if (r->shut)
		return ROUTER_ERR_NOT_AVAILABLE;
	d = router_done_new(cbfunc, cbdata);
	if (!d)
		return -ENOMEM;
	rc = job_deliver_pipe(r, source, channel, fd, buf, cap, dirs, taken);
	if (rc) {
		free(d);
		return rc;
	}
	router_done_post(r, d, ROUTER_SUCCESS);
	return ROUTER_SUCCESS;
}

/* ---- life cycle --------------------------------------------------------- */

int router_new(struct event_base *base, const struct router_config *cfg,
	       router_t **out)
{
	struct router_config def = {0};
	router_t *r;

	if (!base || !out)
		return ROUTER_ERR_BAD_PARAM;
	if (!cfg)
		cfg = &def;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->base = base;
	r->window = cfg->window ? cfg->window : 1u << 20;
	r->low_water = cfg->low_water ? cfg->low_water : r->window / 2;
	if (r->low_water > r->window)
		r->low_water = r->window;
	r->budget = cfg->budget ? cfg->budget : (size_t)1 << 30;
	r->buffering_ns =
	    (uint64_t)(cfg->buffering_ms ? cfg->buffering_ms : 100) * 1000000u;
	r->buffering_size = cfg->buffering_size ? cfg->buffering_size : 4096;
	r->clock = cfg->clock ? cfg->clock : default_clock;
	r->clock_ctx = cfg->clock_ctx;
	r->log = cfg->log;
	r->store = cfg->store;
	r->store_ctx = cfg->store_ctx;
	r->max_stream = cfg->store_max_stream;
	r->max_job = cfg->store_max_job;
	r->max_total = cfg->store_max;
	r->max_user = cfg->store_max_user;
	r->user_exempt = cfg->store_user_exempt;
	TAILQ_INIT(&r->store_done);
	TAILQ_INIT(&r->state_dirty);
	r->loop_thread = pthread_self();
	TAILQ_INIT(&r->jobs);
	TAILQ_INIT(&r->all_jobs);
	TAILQ_INIT(&r->subs);
	STAILQ_INIT(&r->done);
	TAILQ_INIT(&r->ready);
	TAILQ_INIT(&r->pend);
	TAILQ_INIT(&r->xq);
	TAILQ_INIT(&r->pushes);
	TAILQ_INIT(&r->flushes);
	pthread_mutex_init(&r->xq_lock, NULL);
	pthread_cond_init(&r->xq_cond, NULL);
	r->ev_notify = event_new(base, -1, 0, on_notify, r);
	r->ev_timer = evtimer_new(base, on_timer, r);
	r->ev_store = evtimer_new(base, on_store_timer, r);
	TAILQ_INIT(&r->store_wait);
	TAILQ_INIT(&r->store_lazy);
	r->ev_state = evtimer_new(base, on_state_timer, r);
	r->ev_xq = event_new(base, -1, 0, on_xq, r);
	if (!r->ev_notify || !r->ev_timer || !r->ev_xq || !r->ev_store ||
	    !r->ev_state) {
		router_free(r);
		return -ENOMEM;
	}
	*out = r;
	return 0;
}

void router_set_loop_thread(router_t *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->xq_lock);
	r->loop_thread = pthread_self();
	pthread_mutex_unlock(&r->xq_lock);
}

void router_shutdown(router_t *r)
{
	router_job_t *job;

	if (!r || r->shut)
		return;
	/* the running jobs' state as it is, before they are cut short */
	store_state_flush(r);
	r->shut = true;
	pthread_mutex_lock(&r->xq_lock);
	r->xq_closed = true;
	pthread_mutex_unlock(&r->xq_lock);
	xq_run(r, true);
	TAILQ_FOREACH (job, &r->all_jobs, all_link)
		job_shutdown(job);
	router_flush_check(r);
	if (r->ev_timer)
		evtimer_del(r->ev_timer);
	if (r->ev_store)
		evtimer_del(r->ev_store);
	if (r->ev_state)
		evtimer_del(r->ev_state);
}

void router_free(router_t *r)
{
	struct router_sub *s;
	router_job_t *job;

	if (!r)
		return;
	if (r->ev_notify && r->ev_timer && r->ev_xq) {
		router_shutdown(r);
		run_deferred(r); /* every outstanding callback, exactly once */
	}
	r->freeing = true;
	while ((job = TAILQ_FIRST(&r->all_jobs)))
		job_destroy(job);
	while ((s = TAILQ_FIRST(&r->subs))) {
		TAILQ_REMOVE(&r->subs, s, link);
		free(s->nspace);
		free(s);
	}
	pthread_mutex_lock(&r->xq_lock);
	r->xq_closed = true;
	while (r->xq_waiters)
		pthread_cond_wait(&r->xq_cond, &r->xq_lock);
	pthread_mutex_unlock(&r->xq_lock);
	if (r->ev_notify)
		event_free(r->ev_notify);
	if (r->ev_timer)
		event_free(r->ev_timer);
	if (r->ev_store)
		event_free(r->ev_store);
	if (r->ev_state)
		event_free(r->ev_state);
	if (r->ev_xq)
		event_free(r->ev_xq);
	pthread_cond_destroy(&r->xq_cond);
	pthread_mutex_destroy(&r->xq_lock);
	strmap_release(&r->job_index);
	uidmap_release(&r->uid_jobs);
	free(r->scratch);
	free(r);
}
