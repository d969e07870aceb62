/* SPDX-License-Identifier: MIT */
/*
 * PMIx source, loop thread: namespace discovery (PMIX_QUERY_NAMESPACES,
 * asked on a timer and on job events), the IOF pulls (one for all
 * namespaces at attach, else one per job) and the job-size gets, one at a
 * time.  Their PMIx callbacks (pt_query, pt_pulled, pt_size) are in
 * pmix_source.c with the other progress-thread callbacks.
 */
#include <stdio.h>
#include <string.h>

#include <event2/event.h>

#include "net/pmix/pmix_source_i.h"

/* PMIx_IOF_pull of stdout|stderr of @proc (cbdata @m, on ps->pending). */
static pmix_status_t pull(struct ps_msg *m)
{
	pmix_status_t st;

/* GCC 12 false positive: it sizes &m->proc as its first member (the
 * 256-byte nspace) after PMIX_LOAD_PROCID */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overread"
#endif
	st = PMIx_IOF_pull(&m->proc, 1, NULL, 0,
			   PMIX_FWD_STDOUT_CHANNEL | PMIX_FWD_STDERR_CHANNEL,
			   pt_iof, pt_pulled, m);
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
	return st;
}

/*
 * Be early: one pull for every namespace, registered at attach time, so
 * the server forwards a job's output from its first byte.  PMIx matches a
 * pull's proc against an output's source with PMIX_CHECK_PROCID, where an
 * empty (invalid) nspace matches any nspace and PMIX_RANK_WILDCARD any
 * rank (openpmix src/common/pmix_iof.c, bfrop_base_tma.h).  A pull made
 * when iofs first sees a job comes after the output its ranks printed in
 * their first ~0.3 s, which PRRTE's server does not replay (docs/pmix.md).
 * If the server refuses it, each job is pulled on its own (ps_pull_start).
 */
void ps_pull_all_start(pmix_source_t *ps)
{
	struct ps_msg *m = ps_op_new(ps, PS_MSG_PULLED);
	pmix_status_t st;

	ps->pull_all = PS_PULL_ALL_REFUSED;
	if (!m)
		return;
	m->nspace[0] = '\0'; /* marks the all-namespaces pull */
	PMIX_LOAD_PROCID(&m->proc, "", PMIX_RANK_WILDCARD);
	st = pull(m);
	if (st != PMIX_SUCCESS) {
		ps_log(ps, LOG_WARNING,
		       "pull of all namespaces refused (%s): pulling each job "
		       "when it is seen; its first output may be missed",
		       PMIx_Error_string(st));
		ps_op_abort(m);
		return;
	}
	ps->pull_all = PS_PULL_ALL_PENDING;
}

void ps_pull_all_done(pmix_source_t *ps, struct ps_msg *m)
{
	if (m->status == PMIX_SUCCESS) {
		ps->pull_all = PS_PULL_ALL_OK;
		return;
	}
	ps->pull_all = PS_PULL_ALL_REFUSED;
	ps_log(ps, LOG_WARNING,
	       "pull of all namespaces refused (%s): pulling each job when "
	       "it is seen; its first output may be missed",
	       PMIx_Error_string(m->status));
	if (ps_is_loss(m->status)) {
		ps_source_lost(ps, m->status);
		return;
	}
	for (struct ps_job *job = ps->jobs; job; job = job->next)
		if (!job->ignored)
			ps_pull_start(job);
}

void ps_pull_start(struct ps_job *job)
{
	pmix_source_t *ps = job->ps;
	struct ps_msg *m;
	pmix_status_t st;

	if (job->pulling || job->size_pending || ps->lost)
		return;
	if (ps->pull_all == PS_PULL_ALL_PENDING)
		return; /* started when the answer says it is needed */
	if (ps->pull_all == PS_PULL_ALL_OK) {
		job->pulling = true; /* covered by the all-namespaces pull */
		return;
	}
	m = ps_op_new(ps, PS_MSG_PULLED);
	if (!m)
		return;
	snprintf(m->nspace, sizeof(m->nspace), "%s", job->nspace);
	PMIX_LOAD_PROCID(&m->proc, job->nspace, PMIX_RANK_WILDCARD);
	st = pull(m);
	if (st != PMIX_SUCCESS) {
		ps_log(ps, LOG_WARNING,
		       "PMIx_IOF_pull %s: %s (retried at the next query)",
		       job->nspace, PMIx_Error_string(st));
		ps_op_abort(m);
		return;
	}
	job->pulling = true;
}

/* One PMIx_Get_nb at a time: libpmix 5.0.7 answers every pending get of
 * the same proc from one reply and frees the request that reply belongs
 * to while still walking the list with it (heap-use-after-free in
 * PMIx_Check_nspace, openpmix v5.0.7 src/client/pmix_client_get.c
 * _getnb_cbfunc; docs/pmix.md).  With a single get in flight that walk
 * ends at the freed request.  Jobs wait (size_pending, !size_asked) in
 * discovery order; ps_size_next() asks for the next. */
void ps_size_request(struct ps_job *job)
{
	pmix_source_t *ps = job->ps;
	struct ps_msg *m;
	int timeout = 5;
	pmix_status_t st;

	job->size_pending = true; /* pull after the answer (or the wait) */
	if (ps->size_inflight || ps->lost || ps->closing)
		return; /* asked by ps_size_next() */
	m = ps_op_new(ps, PS_MSG_SIZE);
	if (!m) {
		job->size_pending = false;
		return;
	}
	snprintf(m->nspace, sizeof(m->nspace), "%s", job->nspace);
	PMIX_LOAD_PROCID(&m->proc, job->nspace, PMIX_RANK_WILDCARD);
	PMIX_INFO_CREATE(m->info, 1);
	if (m->info) {
		m->ninfo = 1;
		PMIx_Info_load(&m->info[0], PMIX_TIMEOUT, &timeout, PMIX_INT);
	}
	st =
	    PMIx_Get_nb(&m->proc, PMIX_JOB_SIZE, m->info, m->ninfo, pt_size, m);
	if (st != PMIX_SUCCESS) {
		ps_op_abort(m); /* ranks then appear with their first output */
		job->size_pending = false;
		return;
	}
	job->size_asked = true;
	ps->size_inflight = true;
}

/* The size get in flight was answered: ask for the next waiting job's. */
void ps_size_next(pmix_source_t *ps)
{
	ps->size_inflight = false;
	for (struct ps_job *job = ps->jobs; job && !ps->size_inflight;
	     job = job->next)
		if (job->size_pending && !job->size_asked && !job->ignored) {
			ps_size_request(job);
			if (!job->size_pending) { /* refused: pull without it */
				ps_pull_start(job);
				ps_job_release_held(job);
			}
		}
}

/* A namespace the server runs: the job record, pulling its output. */
struct ps_job *ps_discover(pmix_source_t *ps, const char *nspace)
{
	struct ps_job *job;

	if (!nspace[0] || strcmp(nspace, ps->me.nspace) == 0)
		return NULL;
	job = ps_job_find(ps, nspace);
	if (job)
		return job->ignored ? NULL : job;
	job = ps_job_new(ps, nspace);
	if (!job) {
		ps_log(ps, LOG_ERR,
		       "namespace '%s' not followed: out of memory", nspace);
		return NULL;
	}
	if (job->ignored) { /* remembered, so this is said once */
		ps_log(ps, LOG_WARNING,
		       "ignoring namespace '%s': not a valid directory name",
		       nspace);
		return NULL;
	}
	if (ps->prrte)
		ps_log(ps, LOG_INFO,
		       "%s: with PRRTE, stdin reaches only the ranks in prun "
		       "--stdin's set (rank 0 by default); PRRTE drops writes "
		       "to the others and a tool cannot learn the set",
		       nspace);
	/* the size first: every rank is then published (with the job size)
	 * before its output, which the server keeps until we pull */
	ps_size_request(job);
	ps_pull_start(job);
	return job;
}

void ps_query_now(pmix_source_t *ps)
{
	struct ps_msg *m;
	pmix_status_t st;

	if (ps->lost || ps->closing || ps->query_inflight)
		return;
	m = ps_op_new(ps, PS_MSG_QUERY);
	if (!m)
		return;
	PMIX_QUERY_CREATE(m->queries, 1);
	if (!m->queries) {
		ps_op_abort(m);
		return;
	}
	PMIX_ARGV_APPEND(st, m->queries[0].keys, PMIX_QUERY_NAMESPACES);
	st = PMIx_Query_info_nb(m->queries, 1, pt_query, m);
	if (st != PMIX_SUCCESS) {
		ps_op_abort(m);
		if (ps_is_loss(st) || st == PMIX_ERR_UNREACH) /* not connected */
			ps_source_lost(ps, st);
		return;
	}
	ps->query_inflight = true;
}

void ps_query_done(pmix_source_t *ps, struct ps_msg *m)
{
	struct ps_job *job;
	char *save, *tok;

	ps->query_inflight = false;
	/* PRRTE answers UNREACH for a while after another tool (a prun)
	 * left, our connection being fine: only answers that stay UNREACH
	 * for PS_UNREACH_QUERIES queries in a row mean the server is gone */
	if (ps_is_loss(m->status) ||
	    (m->status == PMIX_ERR_UNREACH &&
	     ++ps->unreach_answers >= PS_UNREACH_QUERIES)) {
		ps_source_lost(ps, m->status);
		return;
	}
	if (m->status != PMIX_ERR_UNREACH)
		ps->unreach_answers = 0;
	if (m->status != PMIX_SUCCESS && m->status != PMIX_ERR_NOT_FOUND)
		return; /* transient: the next query tries again */
	for (job = ps->jobs; job; job = job->next)
		job->listed = false;
	for (tok = m->bytes ? strtok_r(m->bytes, ",", &save) : NULL; tok;
	     tok = strtok_r(NULL, ",", &save)) {
		job = ps_discover(ps, tok);
		if (job)
			job->listed = true;
	}
	for (job = ps->jobs; job; job = job->next) {
		if (job->ignored)
			continue;
		if (job->size_pending &&
		    ++job->size_wait > PS_SIZE_WAIT_QUERIES) {
			ps_log(ps, LOG_NOTICE,
			       "%s: no PMIX_JOB_SIZE answer: pulling anyway",
			       job->nspace);
			job->size_pending = false;
			ps_pull_start(job);
			ps_job_release_held(job);
		}
		if (job->ended)
			continue;
		if (!job->listed) {
			ps_job_vanished(job);
		} else {
			if (job->vanishing) {
				job->vanishing = false;
				evtimer_del(job->grace_ev);
			}
			ps_pull_start(job); /* a failed pull is retried */
		}
	}
}
