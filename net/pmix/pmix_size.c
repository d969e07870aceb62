/* SPDX-License-Identifier: MIT */
/*
 * PMIx source job sizes: the PMIx_Get_nb(PMIX_JOB_SIZE) queue, one get in
 * flight at a time (the libpmix 5 reason is below), and its answers.
 *
 * Threads.  pt_size() runs on PMIx's progress thread and only copies and
 * posts (ps_post); everything else runs on the loop thread.
 */
#include <stdio.h>

#include "net/pmix/pmix_source_i.h"

static void pt_size(pmix_status_t status, pmix_value_t *kv, void *cbdata)
{
	struct ps_msg *m = cbdata;

	if (!ps_op_claim(m))
		return;
	m->status = status;
	if (status == PMIX_SUCCESS && kv && kv->type == PMIX_UINT32)
		m->rank = kv->data.uint32;
	else if (status == PMIX_SUCCESS)
		m->status = PMIX_ERR_BAD_PARAM;
	/* pitfall (measured with LeakSanitizer): 4.2.2 hands the value over
	 * to the callback; it is ours to release */
	if (kv)
		PMIX_VALUE_RELEASE(kv);
	ps_post(m);
}

/* One PMIx_Get_nb at a time: libpmix 5.0.7 answers every pending get of
 * the same proc from one reply and frees the request that reply belongs
 * to while still walking the list with it (heap-use-after-free in
 * PMIx_Check_nspace, openpmix v5.0.7 src/client/pmix_client_get.c
 * _getnb_cbfunc; docs/pmix.md).  With a single get in flight that walk
 * ends at the freed request.  Jobs wait (size_pending, !size_asked) in
 * discovery order; size_next() asks for the next. */
void ps_size_request(struct ps_job *job)
{
	pmix_source_t *ps = job->ps;
	struct ps_msg *m;
	int timeout = 5;
	pmix_status_t st;

	job->size_pending = true; /* pull after the answer (or the wait) */
	if (ps->size_inflight || ps->lost || ps->closing)
		return; /* asked by size_next() */
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

void ps_size_settled(struct ps_job *job)
{
	job->size_pending = false;
	ps_pull_start(job);
	ps_job_release_held(job);
}

/* The size get in flight was answered: ask for the next waiting job's. */
static void size_next(pmix_source_t *ps)
{
	ps->size_inflight = false;
	for (struct ps_job *job = ps->jobs; job && !ps->size_inflight;
	     job = job->next)
		if (job->size_pending && !job->size_asked && !job->ignored) {
			ps_size_request(job);
			if (!job->size_pending) /* refused: pull without it */
				ps_size_settled(job);
		}
}

void ps_size_answered(pmix_source_t *ps, struct ps_msg *m)
{
	struct ps_job *job = ps_job_find(ps, m->nspace);

	if (job && m->status == PMIX_SUCCESS)
		ps_job_set_size(job, m->rank);
	if (job)
		ps_size_settled(job);
	size_next(ps);
}
