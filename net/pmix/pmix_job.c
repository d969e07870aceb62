/* SPDX-License-Identifier: MIT */
/*
 * PMIx source, router side: the jobs and ranks learnt from the server, their
 * registration with the router, output deliveries, stdin pushes and exits.
 * Every function here runs on the daemon's loop thread.
 */
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net/pmix/pmix_source_i.h"

static void rank_flow(void *ctx, router_rank_t *rr, uint32_t channel,
		      bool xoff);
static int rank_stdin_write(void *ctx, router_rank_t *rr, const void *bytes,
			    size_t len);
static void rank_stdin_eof(void *ctx, router_rank_t *rr);
static int rank_stdin_write_job(void *ctx, router_rank_t *const *targets,
				size_t n, const void *bytes, size_t len);

static const struct router_source_ops rank_ops = {
    .flow = rank_flow,
    .stdin_write = rank_stdin_write,
    .stdin_eof = rank_stdin_eof,
    .stdin_write_job = rank_stdin_write_job,
};
/* PRRTE answers a push to the wildcard rank but never delivers it (it logs
 * "contact information is unknown"): a job's stdin goes rank by rank. */
static const struct router_source_ops rank_ops_prrte = {
    .flow = rank_flow,
    .stdin_write = rank_stdin_write,
    .stdin_eof = rank_stdin_eof,
};

static void on_grace(evutil_socket_t fd, short what, void *arg);
static void arm_grace(struct ps_job *job, unsigned ms);

struct ps_job *ps_job_find(pmix_source_t *ps, const char *nspace)
{
	for (struct ps_job *job = ps->jobs; job; job = job->next)
		if (strcmp(job->nspace, nspace) == 0)
			return job;
	return NULL;
}

struct ps_job *ps_job_new(pmix_source_t *ps, const char *nspace)
{
	struct ps_job *job;

	job = calloc(1, sizeof(*job));
	if (!job)
		return NULL;
	job->ignored = !router_nspace_valid(nspace, strlen(nspace));
	job->grace_ev = evtimer_new(ps->base, on_grace, job);
	if (!job->grace_ev) {
		free(job);
		return NULL;
	}
	job->ps = ps;
	job->held_tail = &job->held;
	snprintf(job->nspace, sizeof(job->nspace), "%s", nspace);
	job->next = ps->jobs;
	ps->jobs = job;
	return job;
}

void ps_job_free(struct ps_job *job)
{
	if (!job)
		return;
	event_free(job->grace_ev);
	for (size_t i = 0; i < job->nranks; i++) {
		struct ps_rank *rk = job->ranks[i];

		/* pushes PMIx never answered (their messages were reclaimed
		 * by pmix_source_free() and never look at these again) */
		while (rk && rk->pq) {
			struct ps_push *pp = rk->pq;
			rk->pq = pp->next;
			free(pp);
		}
		free(rk);
	}
	free(job->ranks);
	free(job);
}

/* The record of rank @id, created if needed (not registered). */
static struct ps_rank *rank_get(struct ps_job *job, uint32_t id)
{
	struct ps_rank *rk;

	/* PMIx's special ranks (wildcard, undef, local peers, ...) are not
	 * ranks; the table is indexed by rank, so bound it */
	if (id >= PMIX_RANK_VALID || id >= PS_MAX_RANKS) {
		if (!job->warned_rank) {
			job->warned_rank = true;
			ps_log(job->ps, LOG_WARNING,
			       "%s: ignoring rank %u (beyond %u or a special "
			       "PMIx rank)",
			       job->nspace, id, PS_MAX_RANKS);
		}
		return NULL;
	}
	if (id >= job->nranks) {
		size_t n = job->nranks ? job->nranks : 8;
		while (n <= id)
			n *= 2;
		struct ps_rank **a = realloc(job->ranks, n * sizeof(*a));
		if (!a)
			return NULL;
		memset(a + job->nranks, 0, (n - job->nranks) * sizeof(*a));
		job->ranks = a;
		job->nranks = n;
	}
	if (!job->ranks[id]) {
		rk = calloc(1, sizeof(*rk));
		if (!rk)
			return NULL;
		rk->job = job;
		rk->id = id;
		rk->pq_tail = &rk->pq;
		job->ranks[id] = rk;
	}
	return job->ranks[id];
}

/* Publish @rk in the router with our ops (once). */
static void rank_register(struct ps_rank *rk)
{
	struct ps_job *job = rk->job;
	router_proc_t proc;
	struct router_rank_info info = {
	    .pid = -1,
	    .host = "",
	    .uid = getuid(),
	    .gid = getgid(),
	    .job_size = job->size,
	};
	int rc;

	if (rk->registered || job->ps->lost || job->ps->closing)
		return;
	rk->registered = true;
	if (router_proc_set(&proc, job->nspace, rk->id) != 0)
		return;
	rc = router_rank_register(job->ps->r, &proc, &info,
				  job->ps->prrte ? &rank_ops_prrte : &rank_ops, rk,
				  &rk->rr);
	if (rc == ROUTER_ERR_EXISTS)
		ps_log(job->ps, LOG_WARNING,
		       "%s/%u is already published by another source; its "
		       "PMIx output is still delivered, stdin goes there",
		       job->nspace, rk->id);
	else if (rc != 0)
		ps_log(job->ps, LOG_ERR, "cannot publish %s/%u: %s",
		       job->nspace, rk->id, router_strerror(rc));
	if (rc != 0) {
		rk->rr = NULL;
		return;
	}
	if (job->ended || rk->exit_pending) {
		/* registered after its end was known (JOB_END, or its own
		 * end, before the size answer or its first output let us
		 * publish it): exits once its streams complete, or after the
		 * grace.  The record may have existed (unregistered, held
		 * output) when the end came: arm the grace here too. */
		if (!rk->exit_pending && !rk->have_code)
			rk->code = job->end_code;
		rk->exit_pending = true;
		if (!evtimer_pending(job->grace_ev, NULL))
			arm_grace(job, PS_END_GRACE_MS);
	}
}

void ps_job_set_size(struct ps_job *job, uint32_t size)
{
	if (size == 0)
		return;
	if (size > PS_MAX_RANKS) {
		ps_log(job->ps, LOG_WARNING,
		       "%s: job size %u: following its first %u ranks only",
		       job->nspace, size, PS_MAX_RANKS);
		size = PS_MAX_RANKS;
	}
	job->size = size;
	for (uint32_t r = 0; r < size; r++) {
		struct ps_rank *rk = rank_get(job, r);
		if (rk)
			rank_register(rk);
	}
}

/* Mark @rk exited once its job (or itself) ended and both streams
 * completed; @force skips waiting for the streams. */
static void rank_maybe_exit(struct ps_rank *rk, bool force)
{
	if (!rk->exit_pending || !rk->rr)
		return;
	if (!force && !(rk->out_done && rk->err_done))
		return;
	rk->stdin_xoff = false; /* router_rank_exit releases the latch */
	router_rank_exit(rk->rr, ROUTER_STATE_EXITED, rk->code);
	rk->rr = NULL;
}

static bool job_waiting(struct ps_job *job)
{
	for (size_t i = 0; i < job->nranks; i++)
		if (job->ranks[i] && job->ranks[i]->exit_pending &&
		    job->ranks[i]->rr)
			return true;
	return false;
}

static void arm_grace(struct ps_job *job, unsigned ms)
{
	struct timeval tv = {.tv_sec = ms / 1000,
			     .tv_usec = (ms % 1000) * 1000};
	evtimer_add(job->grace_ev, &tv);
}

static void on_grace(evutil_socket_t fd, short what, void *arg)
{
	struct ps_job *job = arg;

	if (job->vanishing && !job->ended) {
		ps_log(job->ps, LOG_NOTICE,
		       "%s left the server's namespace list without a "
		       "JOB_END event: marking it ended (status unknown, 0)",
		       job->nspace);
		ps_job_end(job, 0);
		return;
	}
	for (size_t i = 0; i < job->nranks; i++)
		if (job->ranks[i])
			rank_maybe_exit(job->ranks[i], true);
}

static void deliver_done(int status, void *cbdata)
{
	ps_msg_free(cbdata);
}

void ps_job_release_held(struct ps_job *job)
{
	struct ps_msg *m = job->held;

	job->held = NULL;
	job->held_tail = &job->held;
	while (m) {
		struct ps_msg *next = m->next;
		m->next = NULL;
		if (job->ps->closing)
			ps_msg_free(m);
		else
			ps_job_iof(job, m);
		m = next;
	}
}

void ps_job_iof(struct ps_job *job, struct ps_msg *m)
{
	struct ps_rank *rk = rank_get(job, m->rank);
	bool complete = router_dir_on(&m->dirs, ROUTER_DIR_COMPLETE);
	uint32_t channel = m->channel; /* @m may be freed below */
	router_proc_t proc;
	int rc;

	if (job->size_pending && !job->ps->closing) {
		/* publish the ranks with the job size first (kept in order) */
		*job->held_tail = m;
		job->held_tail = &m->next;
		return;
	}
	if (!rk || router_proc_set(&proc, job->nspace, m->rank) != 0 ||
	    (m->channel != ROUTER_CH_STDOUT && m->channel != ROUTER_CH_STDERR &&
	     m->channel != ROUTER_CH_STDDIAG)) {
		ps_msg_free(m);
		return;
	}
	rank_register(rk);
	rc = router_deliver(job->ps->r, &proc, channel, m->bytes, m->len,
			    &m->dirs, deliver_done, m);
	if (rc != ROUTER_SUCCESS) {
		ps_log(job->ps, LOG_WARNING, "deliver %s/%u: %s", job->nspace,
		       m->rank, router_strerror(rc));
		ps_msg_free(m);
	}
	if (complete) {
		if (channel == ROUTER_CH_STDOUT)
			rk->out_done = true;
		else if (channel == ROUTER_CH_STDERR)
			rk->err_done = true;
		rank_maybe_exit(rk, false);
	}
}

void ps_job_rank_end(struct ps_job *job, uint32_t rank, int code)
{
	struct ps_rank *rk = rank_get(job, rank);

	if (!rk)
		return;
	rk->have_code = true;
	rk->code = code;
	rk->exit_pending = true;
	rank_maybe_exit(rk, false);
	if (rk->rr && !evtimer_pending(job->grace_ev, NULL))
		arm_grace(job, PS_END_GRACE_MS);
}

void ps_job_end(struct ps_job *job, int code)
{
	if (job->ended)
		return;
	job->ended = true;
	job->end_code = code;
	job->vanishing = false;
	evtimer_del(job->grace_ev);
	for (size_t i = 0; i < job->nranks; i++) {
		struct ps_rank *rk = job->ranks[i];
		if (!rk)
			continue;
		if (!rk->have_code)
			rk->code = code;
		rk->exit_pending = true;
		rank_maybe_exit(rk, false);
	}
	if (job_waiting(job))
		arm_grace(job, PS_END_GRACE_MS);
}

void ps_job_vanished(struct ps_job *job)
{
	if (job->ended || job->vanishing)
		return;
	job->vanishing = true;
	arm_grace(job, PS_VANISH_GRACE_MS);
}

void ps_job_lost(struct ps_job *job)
{
	evtimer_del(job->grace_ev);
	job->vanishing = false;
	for (size_t i = 0; i < job->nranks; i++) {
		struct ps_rank *rk = job->ranks[i];
		if (!rk || !rk->rr)
			continue;
		rk->stdin_xoff = false;
		router_rank_exit(rk->rr, ROUTER_STATE_LOST, 0);
		rk->rr = NULL;
	}
}

/* ------------------------------------------------------------------------ */
/* Output flow control                                                       */

/*
 * The router asks us to stop reading @channel of @rr.  A PMIx tool has no
 * way to suspend a server's forwarding (libpmix 4.2.2 has no IOF flow
 * control at all; later ones only let the host server suspend its own
 * reads), so output keeps arriving: the router retains it beyond the
 * window and counts it.  We count the calls and say so once per job.
 */
static void rank_flow(void *ctx, router_rank_t *rr, uint32_t channel, bool xoff)
{
	struct ps_rank *rk = ctx;

	if (xoff)
		rk->out_xoff++;
	else
		rk->out_xon++;
	if (xoff && !rk->job->warned_flow) {
		rk->job->warned_flow = true;
		ps_log(rk->job->ps, LOG_WARNING,
		       "%s: a reader is more than a window behind; PMIx gives "
		       "a tool no output flow control, so the bytes are "
		       "retained beyond the window (and counted)",
		       rk->job->nspace);
	}
}

/* ------------------------------------------------------------------------ */
/* stdin: PMIx_IOF_push, always non-blocking                                 */

/* PMIx progress thread: the push is done, PMIx no longer needs the bytes. */
static void pt_pushed(pmix_status_t status, void *cbdata)
{
	struct ps_msg *m = cbdata;

	if (!ps_op_claim(m))
		return; /* reclaimed by pmix_source_free() already */
	if (!m->chunk) {
		free(m->bo.bytes); /* the copy is freed in the callback */
		m->bo.bytes = NULL;
		m->bo.size = 0;
	} /* chunked: the rest is still to go (freed with @m) */
	m->status = status;
	ps_post(m);
}

/* "*" for the wildcard rank, else the number, in @buf. */
static const char *rank_str(pmix_rank_t rank, char buf[16])
{
	if (rank == PMIX_RANK_WILDCARD)
		return "*";
	snprintf(buf, 16, "%u", rank);
	return buf;
}

/* Start one PMIx_IOF_push of a copy of @bytes (or of EOF) to rank @target
 * of @job (PMIX_RANK_WILDCARD: the job), on behalf of @rks[0..n-1], which
 * each get a record on their push queue.  Returns ROUTER_STDIN_PENDING
 * (ps_push_done() completes it), 0 (PMIx completed it at once: no
 * callback), or -errno. */
static int push_to(struct ps_job *job, pmix_rank_t target,
		   struct ps_rank *const *rks, size_t n, const void *bytes,
		   size_t len, bool eof)
{
	pmix_source_t *ps = job->ps;
	struct ps_msg *m;
	bool t = true;
	pmix_status_t st = PMIX_ERR_NOMEM;
	size_t i = 0;

	if (ps->lost || ps->closing)
		return -EPIPE;
	m = ps_op_new(ps, PS_MSG_PUSHED);
	if (!m)
		return -ENOMEM;
	m->pushes = n == 1 ? &m->one : calloc(n, sizeof(*m->pushes));
	if (!m->pushes)
		goto out_abort_op;
	for (i = 0; i < n; i++) {
		m->pushes[i] = calloc(1, sizeof(*m->pushes[i]));
		if (!m->pushes[i])
			goto out_free_records;
		m->pushes[i]->rk = rks[i];
		m->pushes[i]->write = !eof;
	}
	m->npushes = n;
	m->len = len;
	PMIX_LOAD_PROCID(&m->proc, job->nspace, target);
	if (len) {
		m->bo.bytes = malloc(len);
		if (!m->bo.bytes)
			goto out_free_records;
		memcpy(m->bo.bytes, bytes, len);
		m->bo.size = len;
	}
	if (eof) {
		PMIX_INFO_CREATE(m->info, 1);
		if (!m->info)
			goto out_free_records;
		m->ninfo = 1;
		PMIx_Info_load(&m->info[0], PMIX_IOF_COMPLETE, &t, PMIX_BOOL);
	}
	/* pitfall: never the blocking form (NULL cbfunc): it hangs in 4.2.2 */
/* GCC 12 false positive: it sizes &m->proc as its first member (the
 * 256-byte nspace) after PMIX_LOAD_PROCID */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overread"
#endif
	if (ps->push_max && len > ps->push_max) {
		/* PRRTE: at most PRTE_IOF_BASE_MSG_MAX per push, one chunk
		 * after the other (ps_push_next) */
		m->chunk = ps->push_max;
		m->cbo.bytes = m->bo.bytes;
		m->cbo.size = m->chunk;
	}
	st = PMIx_IOF_push(&m->proc, 1, m->chunk ? &m->cbo : &m->bo, m->info,
			   m->ninfo, pt_pushed, m);
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
	if (st != PMIX_SUCCESS) {
		char rb[16];

		if (st != PMIX_OPERATION_SUCCEEDED)
			ps_log(job->ps, LOG_WARNING,
			       "PMIx_IOF_push to %s/%s: %s", job->nspace,
			       rank_str(target, rb), PMIx_Error_string(st));
		i = n;
		goto out_free_records;
	}
	/* the callback is handled on this (the loop) thread, after us */
	for (i = 0; i < n; i++) {
		struct ps_rank *rk = rks[i];

		*rk->pq_tail = m->pushes[i];
		rk->pq_tail = &m->pushes[i]->next;
	}
	return ROUTER_STDIN_PENDING;

out_free_records:
	while (i-- > 0)
		free(m->pushes[i]);
out_abort_op:
	ps_op_abort(m); /* frees m->pushes */
	if (st == PMIX_OPERATION_SUCCEEDED)
		return 0;
	return st == PMIX_ERR_NOMEM ? -ENOMEM : -EPIPE;
}

/* The FUSE write behind this is answered from its own push's callback:
 * ps_push_done() -> router_stdin_written() -> the router push completes. */
static int rank_stdin_write(void *ctx, router_rank_t *rr, const void *bytes,
			    size_t len)
{
	struct ps_rank *rk = ctx;

	return push_to(rk->job, rk->id, &rk, 1, bytes, len, false);
}

/* A write to the job's stdin with every target free: one push to
 * PMIX_RANK_WILDCARD, acknowledged (and answered) once for all. */
static int rank_stdin_write_job(void *ctx, router_rank_t *const *targets,
				size_t n, const void *bytes, size_t len)
{
	struct ps_job *job = ((struct ps_rank *)ctx)->job;
	struct ps_rank **rks = calloc(n, sizeof(*rks));
	int rc;

	if (!rks)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		uint32_t id = router_rank_id(targets[i]);

		if (id >= job->nranks || !job->ranks[id] ||
		    job->ranks[id]->rr != targets[i]) {
			ps_log(job->ps, LOG_ERR,
			       "%s: stdin target rank %u is not ours",
			       job->nspace, id);
			free(rks);
			return -EPIPE;
		}
		rks[i] = job->ranks[id];
	}
	rc = push_to(job, PMIX_RANK_WILDCARD, rks, n, bytes, len, false);
	free(rks);
	return rc;
}

static void rank_stdin_eof(void *ctx, router_rank_t *rr)
{
	struct ps_rank *rk = ctx;

	push_to(rk->job, rk->id, &rk, 1, NULL, 0, true);
}

static bool push_ok(int status)
{
	return status == PMIX_SUCCESS || status == PMIX_OPERATION_SUCCEEDED;
}

/* Raise / release @rk's stdin latch: held while the server asked for a
 * pause.  Never called from inside a router op (a deferred message or a
 * timer). */
static void rank_flow_eval(struct ps_rank *rk)
{
	if (!rk || !rk->rr || rk->server_xoff == rk->stdin_xoff)
		return;
	rk->stdin_xoff = rk->server_xoff;
	router_stdin_flow(rk->rr, rk->stdin_xoff);
}

/* Report @rk's completed pushes to the router, oldest first. */
static void rank_push_drain(struct ps_rank *rk)
{
	while (rk->pq && rk->pq->done) {
		struct ps_push *pp = rk->pq;

		rk->pq = pp->next;
		if (!rk->pq)
			rk->pq_tail = &rk->pq;
		/* an exited rank's router side failed its writes already */
		if (pp->write && rk->rr)
			router_stdin_written(rk->rr,
					     push_ok(pp->status) ? 0 : -EPIPE);
		free(pp);
	}
	rank_flow_eval(rk);
}

/* Loop thread (a deferred message, never inside a router op): a push's
 * callback came.  Tell the router of the completed writes in push order. */
/* A chunk of a chunked push went through: start the next one.  true: it
 * is on its way (@m stays with PMIx); false: nothing left, or it failed
 * to start (m->status then says so). */
static bool ps_push_next(pmix_source_t *ps, struct ps_msg *m)
{
	pmix_status_t st;

	m->off += m->cbo.size;
	if (m->off >= m->bo.size)
		return false;
	if (ps->lost || ps->closing) {
		m->status = PMIX_ERR_LOST_CONNECTION;
		return false;
	}
	m->cbo.bytes = m->bo.bytes + m->off;
	m->cbo.size = m->bo.size - m->off < m->chunk ? m->bo.size - m->off
						      : m->chunk;
	ps_op_rearm(m);
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overread"
#endif
	st = PMIx_IOF_push(&m->proc, 1, &m->cbo, NULL, 0, pt_pushed, m);
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
	if (st == PMIX_SUCCESS)
		return true;
	ps_op_claim(m); /* no callback will come */
	m->status = st == PMIX_OPERATION_SUCCEEDED ? PMIX_SUCCESS : st;
	return st == PMIX_OPERATION_SUCCEEDED ? ps_push_next(ps, m) : false;
}

bool ps_push_done(pmix_source_t *ps, struct ps_msg *m)
{
	int status;
	bool xoff = false;
	char rb[16];

	if (m->chunk && push_ok(m->status) && ps_push_next(ps, m))
		return true; /* called again for the next chunk */
	status = m->status;

#if IOFS_PMIX_HAVE_IOF_XOFF
	if (status == PMIX_ERR_IOF_XOFF) {
		/* the server has the bytes and asks us to pause: hold these
		 * ranks' stdin a while (released by ps_flow_server_xon) */
		struct timeval tv = {.tv_sec = 0,
				     .tv_usec = PS_SERVER_XOFF_MS * 1000};
		status = PMIX_SUCCESS;
		xoff = true;
		if (!evtimer_pending(ps->xoff_ev, NULL))
			evtimer_add(ps->xoff_ev, &tv);
	}
#endif
	/* an EOF push completing with IOF_COMPLETE did what it was for
	 * (PMIx 5 / PRRTE answer it so): success, not an error */
	if (status == PMIX_ERR_IOF_COMPLETE && m->npushes &&
	    !m->pushes[0]->write)
		status = PMIX_SUCCESS;
	if (!push_ok(status))
		ps_log(ps, LOG_WARNING,
		       "stdin push to %s/%s completed with %s (%zu bytes)",
		       m->proc.nspace, rank_str(m->proc.rank, rb),
		       PMIx_Error_string(status), m->len);
	for (size_t i = 0; i < m->npushes; i++) {
		m->pushes[i]->done = true;
		m->pushes[i]->status = status;
		if (xoff)
			m->pushes[i]->rk->server_xoff = true;
	}
	/* each target is on its own queue once; a drain frees only its own */
	for (size_t i = 0; i < m->npushes; i++)
		rank_push_drain(m->pushes[i]->rk);
	m->npushes = 0;
	return false;
}

/* The server-XOFF hold expired: release every such latch (a server still
 * behind answers the next push with XOFF again: oscillation, no loss). */
void ps_flow_server_xon(pmix_source_t *ps)
{
	for (struct ps_job *job = ps->jobs; job; job = job->next)
		for (size_t i = 0; i < job->nranks; i++)
			if (job->ranks[i]) {
				job->ranks[i]->server_xoff = false;
				rank_flow_eval(job->ranks[i]);
			}
}
