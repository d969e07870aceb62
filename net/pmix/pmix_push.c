/* SPDX-License-Identifier: MIT */
/*
 * PMIx source, stdin: PMIx_IOF_push (always non-blocking) of what the
 * router's stdin_write / stdin_write_job / stdin_eof ops hand a rank or a
 * job, chunked for PRRTE; each rank's push queue, answered to the router
 * in push order; the server's stdin XOFF (a libpmix with
 * PMIX_ERR_IOF_XOFF).
 *
 * Threads.  pt_pushed() runs on PMIx's progress thread and only posts
 * (ps_post); everything else runs on the daemon's loop thread.
 */
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/pmix/pmix_source_i.h"

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
int ps_push_write(void *ctx, router_rank_t *rr, const void *bytes, size_t len)
{
	struct ps_rank *rk = ctx;

	return push_to(rk->job, rk->id, &rk, 1, bytes, len, false);
}

/* A write to the job's stdin with every target free: one push to
 * PMIX_RANK_WILDCARD, acknowledged (and answered) once for all. */
int ps_push_write_job(void *ctx, router_rank_t *const *targets, size_t n,
		      const void *bytes, size_t len)
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

void ps_push_eof(void *ctx, router_rank_t *rr)
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
	m->cbo.size =
	    m->bo.size - m->off < m->chunk ? m->bo.size - m->off : m->chunk;
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
