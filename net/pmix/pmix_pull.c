/* SPDX-License-Identifier: MIT */
/*
 * PMIx source output: PMIx_IOF_pull (for all namespaces at attach, or per
 * job when the server refuses that), the pull answers, and the output
 * fragments PMIx delivers (handed to the job, pmix_job.c).
 *
 * Threads.  pt_iof() and pt_pulled() run on PMIx's progress thread and
 * only copy and post (ps_post); everything else runs on the loop thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/pmix/pmix_source_i.h"

static void dir_from_info(router_directives_t *d, const pmix_info_t *info)
{
	static const struct {
		const char *key;
		uint32_t bit;
	} map[] = {
	    {PMIX_IOF_COMPLETE, ROUTER_DIR_COMPLETE},
	    {PMIX_IOF_TAG_OUTPUT, ROUTER_DIR_TAG_OUTPUT},
	    {PMIX_IOF_RANK_OUTPUT, ROUTER_DIR_RANK_OUTPUT},
	    {PMIX_IOF_XML_OUTPUT, ROUTER_DIR_XML_OUTPUT},
	    {PMIX_IOF_TIMESTAMP_OUTPUT, ROUTER_DIR_TIMESTAMP},
	    {PMIX_IOF_OUTPUT_RAW, ROUTER_DIR_OUTPUT_RAW},
	    /* PMIX_IOF_LOCAL_OUTPUT is the host's business
	     * (PMIx_server_IOF_deliver(3)): it carries no meaning for a tool,
	     * so it is not mapped */
	};

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		if (strcmp(info->key, map[i].key) != 0)
			continue;
		d->set |= map[i].bit;
		if (info->value.type != PMIX_BOOL || info->value.data.flag)
			d->value |= map[i].bit;
	}
}

static void pt_iof(size_t iofhdlr, pmix_iof_channel_t channel,
		   pmix_proc_t *source, pmix_byte_object_t *payload,
		   pmix_info_t info[], size_t ninfo)
{
	pmix_source_t *ps = ps_owner_get();
	struct ps_msg *m;

	if (!ps)
		return;
	m = ps_msg_new(ps, PS_MSG_IOF);
	ps_unref(ps); /* ps_msg_new took its own */
	if (!m)
		return;
	ps_copy_nspace(m->nspace, source->nspace);
	m->rank = source->rank;
	m->channel = channel;
	for (size_t i = 0; info && i < ninfo; i++)
		dir_from_info(&m->dirs, &info[i]);
	/* the payload is only valid during this callback: copy it out */
	if (payload && payload->size > 0) {
		m->bytes = malloc(payload->size);
		if (!m->bytes) {
			ps_log(ps, LOG_ERR,
			       "out of memory: %zu bytes of %s/%u dropped",
			       payload->size, m->nspace, m->rank);
			ps_msg_free(m);
			return;
		}
		memcpy(m->bytes, payload->bytes, payload->size);
		m->len = payload->size;
	} else {
		/* a zero-length delivery completes the stream */
		m->dirs.set |= ROUTER_DIR_COMPLETE;
		m->dirs.value |= ROUTER_DIR_COMPLETE;
	}
	ps_post(m);
}

static void pt_pulled(pmix_status_t status, size_t refid, void *cbdata)
{
	struct ps_msg *m = cbdata;

	if (!m->nspace[0])
		ps_owner_ready_one(); /* the all-namespaces pull */
	if (!ps_op_claim(m))
		return;
	m->status = status;
	m->len = refid;
	ps_post(m);
}

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

static void pulled_all(pmix_source_t *ps, struct ps_msg *m)
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
	if (ps_event_is_loss(m->status)) {
		ps_event_lost(ps, m->status);
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

bool ps_pull_deliver(pmix_source_t *ps, struct ps_msg *m)
{
	struct ps_job *job = ps_discover(ps, m->nspace);

	if (!job)
		return false;
	ps_job_iof(job, m); /* takes m */
	return true;
}

void ps_pull_answered(pmix_source_t *ps, struct ps_msg *m)
{
	struct ps_job *job;

	if (!m->nspace[0]) {
		pulled_all(ps, m);
		return;
	}
	job = ps_job_find(ps, m->nspace);
	if (job && m->status == PMIX_SUCCESS) {
		job->pulled = true;
		job->iof_id = m->len;
	} else if (job) {
		ps_log(ps, LOG_WARNING, "PMIx_IOF_pull %s refused: %s",
		       m->nspace, PMIx_Error_string(m->status));
		job->pulling = false;
		if (ps_event_is_loss(m->status))
			ps_event_lost(ps, m->status);
	}
}
