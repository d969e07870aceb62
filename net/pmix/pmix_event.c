/* SPDX-License-Identifier: MIT */
/*
 * PMIx source events: the registration for job events (JOB_START,
 * LAUNCH_COMPLETE, JOB_END, PROC_TERMINATED) and for loss
 * (LOST_CONNECTION, UNREACH), what they do, and the loss of the server.
 *
 * Threads.  pt_event() and pt_evreg() run on PMIx's progress thread and
 * only copy and post (ps_post); ps_event_register() runs on the loop
 * thread in pmix_source_new(); ps_event_handle() and ps_event_lost() run
 * on the loop thread (ps_dispatch).
 */
#include <event2/event.h>
#include <string.h>

#include "net/pmix/pmix_source_i.h"

static void pt_event(size_t id, pmix_status_t status, const pmix_proc_t *source,
		     pmix_info_t info[], size_t ninfo, pmix_info_t *results,
		     size_t nresults,
		     pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
	pmix_source_t *ps = ps_owner_get();
	struct ps_msg *m = ps ? ps_msg_new(ps, PS_MSG_EVENT) : NULL;
	bool have_term = false;
	int term = 0;

	if (ps)
		ps_unref(ps);
	if (m) {
		m->status = status;
		m->rank = ROUTER_RANK_WILDCARD;
		if (source)
			ps_copy_nspace(m->src_nspace, source->nspace);
		for (size_t i = 0; info && i < ninfo; i++) {
			const pmix_value_t *v = &info[i].value;
			if (strcmp(info[i].key, PMIX_EVENT_AFFECTED_PROC) ==
				0 &&
			    v->type == PMIX_PROC && v->data.proc) {
				ps_copy_nspace(m->nspace, v->data.proc->nspace);
				m->rank = v->data.proc->rank;
			} else if (strcmp(info[i].key, PMIX_EXIT_CODE) == 0 &&
				   v->type == PMIX_INT) {
				m->have_code = true;
				m->code = v->data.integer;
			} else if (strcmp(info[i].key, PMIX_JOB_TERM_STATUS) ==
				       0 &&
				   v->type == PMIX_STATUS) {
				have_term = true;
				term = v->data.status;
			}
		}
		if (!m->have_code && have_term) {
			/* PRRTE puts the job's exit code here (the first
			 * non-zero one, state_dvm.c dvm_notify); a negative
			 * value is a PMIx error status: failure, 1 */
			m->have_code = true;
			m->code = term >= 0 ? term : 1;
		}
		ps_post(m);
	}
	if (cbfunc)
		cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

/* Progress thread (or the loop thread, cbdata NULL, when the
 * registration was refused outright): the registration's answer. */
static void pt_evreg(pmix_status_t status, size_t refid, void *cbdata)
{
	pmix_source_t *ps;

	if (cbdata)
		ps_owner_ready_one();
	if (status == PMIX_SUCCESS || !(ps = ps_owner_get()))
		return;
	ps_log(ps, LOG_WARNING,
	       "cannot register for job events: %s (job ends will "
	       "only be seen when a job leaves the namespace list)",
	       PMIx_Error_string(status));
	ps_unref(ps);
}

bool ps_event_register(pmix_source_t *ps)
{
	static pmix_status_t codes[] = {
	    PMIX_EVENT_JOB_END,	      PMIX_EVENT_PROC_TERMINATED,
	    PMIX_EVENT_JOB_START,     PMIX_LAUNCH_COMPLETE,
	    PMIX_ERR_LOST_CONNECTION, PMIX_ERR_UNREACH,
	};
	pmix_status_t st;

	/* explicitly: a default handler never sees JOB_END in 4.2.2; the
	 * cbdata only tells pt_evreg it answers the registration (it is
	 * never dereferenced) */
	st =
	    PMIx_Register_event_handler(codes, sizeof(codes) / sizeof(codes[0]),
					NULL, 0, pt_event, pt_evreg, ps);
	if (st != PMIX_SUCCESS)
		pt_evreg(st, 0, NULL);
	return st == PMIX_SUCCESS;
}

/* A status that says our connection to the server is gone.  Not
 * PMIX_ERR_UNREACH: PRRTE answers operations and raises events with it
 * about other procs (a prun that exited) while our connection is fine;
 * a real loss is reported by PMIX_ERR_LOST_CONNECTION within ~1 s. */
bool ps_event_is_loss(pmix_status_t st)
{
	return st == PMIX_ERR_LOST_CONNECTION || st == PMIX_ERR_COMM_FAILURE;
}

void ps_event_lost(pmix_source_t *ps, pmix_status_t why)
{
	if (ps->lost)
		return;
	ps->lost = true;
	ps_log(ps, LOG_WARNING,
	       "lost the PMIx server (%s): running ranks are marked lost, "
	       "what was received stays readable",
	       PMIx_Error_string(why));
	event_del(ps->requery_ev);
	for (struct ps_job *job = ps->jobs; job; job = job->next)
		ps_job_lost(job);
}

void ps_event_handle(pmix_source_t *ps, struct ps_msg *m)
{
	struct ps_job *job;

	/* A loss event is checked before it ends everything: PRRTE raises
	 * PMIX_ERR_LOST_CONNECTION (source: the DVM itself) when another
	 * tool, e.g. a prun, goes away.  So ask the server at once: our
	 * query fails if our connection is really gone (ps_discover_answered).
	 */
	if (ps_event_is_loss(m->status) || m->status == PMIX_ERR_UNREACH) {
		ps->query_inflight = false;
		ps_discover_query(ps);
		return;
	}
	job = m->nspace[0] ? ps_discover(ps, m->nspace) : NULL;
	if (m->status == PMIX_EVENT_JOB_END && job) {
		/* PRRTE 3.0.8 gives a tool no per-rank code: no
		 * PROC_TERMINATED, and its process table shows no rank
		 * terminated while the job runs and forgets the job when it
		 * ends (NOT_FOUND), measured (docs/pmix.md) */
		if (ps->prrte && !job->ignored)
			ps_log(ps, LOG_NOTICE,
			       "%s ended (exit code %d): PRRTE reports no "
			       "per-rank codes, every rank shows the job's",
			       job->nspace, m->have_code ? m->code : 0);
		ps_job_end(job, m->have_code ? m->code : 0);
	} else if (m->status == PMIX_EVENT_PROC_TERMINATED && job &&
		   m->rank != PMIX_RANK_WILDCARD) {
		ps_job_rank_end(job, m->rank, m->have_code ? m->code : 0);
	} else if (m->status == PMIX_EVENT_JOB_START ||
		   m->status == PMIX_LAUNCH_COMPLETE) {
		ps_discover_query(ps);
	}
}
