/* SPDX-License-Identifier: MIT */
/*
 * PMIx source, router side: the jobs and ranks learnt from the server, their
 * registration with the router, output deliveries and exits (their stdin
 * pushes are pmix_push.c's).
 * Every function here runs on the daemon's loop thread.
 */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/pmix/pmix_source_i.h"

static void rank_flow(void *ctx, router_rank_t *rr, uint32_t channel,
		      bool xoff);

static const struct router_source_ops rank_ops = {
    .flow = rank_flow,
    .stdin_write = ps_push_write,
    .stdin_eof = ps_push_eof,
    .stdin_write_job = ps_push_write_job,
};
/* PRRTE answers a push to the wildcard rank but never delivers it (it logs
 * "contact information is unknown"): a job's stdin goes rank by rank. */
static const struct router_source_ops rank_ops_prrte = {
    .flow = rank_flow,
    .stdin_write = ps_push_write,
    .stdin_eof = ps_push_eof,
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
	free(job->command);
	free(job);
}

void ps_job_command(struct ps_job *job)
{
	for (size_t i = 0; job->command && i < job->nranks; i++)
		if (job->ranks[i] && job->ranks[i]->rr) {
			router_job_set_command(
			    router_rank_job(job->ranks[i]->rr), job->command);
			return;
		}
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
	ps_job_command(job); /* the first rank published: the job's now */
	if (job->ps->prrte) { /* what PRRTE keeps from a tool (docs/pmix.md) */
		router_job_t *rj = router_rank_job(rk->rr);

		router_job_note(rj, "PRRTE reports no per-rank exit codes: "
				    "every rank shows the job's");
		router_job_note(rj, "PRRTE delivers stdin only to the ranks "
				    "in prun --stdin's set (rank 0 by "
				    "default); writes to others are dropped, "
				    "and prun's own end of input (</dev/null) "
				    "ends theirs");
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
