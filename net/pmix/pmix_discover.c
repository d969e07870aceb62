/* SPDX-License-Identifier: MIT */
/*
 * PMIx source discovery: the namespaces the server runs, from
 * PMIX_QUERY_NAMESPACES (at attach, every PS_REQUERY_MS and on job
 * events) and from any message naming a namespace; a job record per
 * namespace, jobs that vanish from the list without a JOB_END.
 *
 * Threads.  pt_query() runs on PMIx's progress thread and only copies and
 * posts (ps_post); everything else runs on the loop thread.
 */
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

#include "net/pmix/pmix_source_i.h"

static void pt_query(pmix_status_t status, pmix_info_t *info, size_t ninfo,
		     void *cbdata, pmix_release_cbfunc_t release_fn,
		     void *release_cbdata)
{
	struct ps_msg *m = cbdata;
	bool mine = ps_op_claim(m);

	if (mine) {
		m->status = status;
		for (size_t i = 0; info && i < ninfo; i++)
			if (strcmp(info[i].key, PMIX_QUERY_NAMESPACES) == 0 &&
			    info[i].value.type == PMIX_STRING &&
			    info[i].value.data.string)
				m->bytes = strdup(info[i].value.data.string);
	}
	if (release_fn)
		release_fn(release_cbdata);
	if (mine)
		ps_post(m);
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

void ps_discover_query(pmix_source_t *ps)
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
		if (ps_event_is_loss(st) ||
		    st == PMIX_ERR_UNREACH) /* not connected */
			ps_event_lost(ps, st);
		return;
	}
	ps->query_inflight = true;
}

void ps_discover_answered(pmix_source_t *ps, struct ps_msg *m)
{
	struct ps_job *job;
	char *save, *tok;

	ps->query_inflight = false;
	/* PRRTE answers UNREACH for a while after another tool (a prun)
	 * left, our connection being fine: only answers that stay UNREACH
	 * for PS_UNREACH_QUERIES queries in a row mean the server is gone */
	if (ps_event_is_loss(m->status) ||
	    (m->status == PMIX_ERR_UNREACH &&
	     ++ps->unreach_answers >= PS_UNREACH_QUERIES)) {
		ps_event_lost(ps, m->status);
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
			ps_size_settled(job);
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

void ps_discover_tick(evutil_socket_t fd, short what, void *arg)
{
	pmix_source_t *ps = arg;

	/* a query PMIx never answers must not stop discovery: ask again (a
	 * late answer is still handled, it only re-lists the namespaces) */
	if (ps->query_inflight && ++ps->query_ticks > PS_QUERY_STUCK_TICKS) {
		ps_log(ps, LOG_NOTICE,
		       "namespace query unanswered for %u ms: asking again",
		       PS_QUERY_STUCK_TICKS * PS_REQUERY_MS);
		ps->query_inflight = false;
	}
	if (!ps->query_inflight)
		ps->query_ticks = 0;
	ps_discover_query(ps);
}
