/* SPDX-License-Identifier: MIT */
/*
 * PMIx source job sizes and command lines: the PMIx_Get_nb queue
 * (PMIX_JOB_SIZE, then PMIX_APP_ARGV of the job's first app), one get in
 * flight at a time (the libpmix 5 reason is below), and its answers.
 *
 * Threads.  pt_size() and pt_argv() run on PMIx's progress thread and only
 * copy and post (ps_post); everything else runs on the loop thread.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static void pt_argv(pmix_status_t status, pmix_value_t *kv, void *cbdata)
{
	struct ps_msg *m = cbdata;

	if (!ps_op_claim(m))
		return;
	m->status = status;
	if (status == PMIX_SUCCESS && kv && kv->type == PMIX_STRING &&
	    kv->data.string) {
		m->bytes = strdup(kv->data.string);
		if (!m->bytes)
			m->status = PMIX_ERR_NOMEM;
	} else if (status == PMIX_SUCCESS) {
		m->status = PMIX_ERR_BAD_PARAM;
	}
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
	job->argv_pending = true; /* asked after the size */
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

/* @job's command line: PMIX_APP_ARGV, an app-level key (the server
 * registered it in the job's PMIX_APP_INFO_ARRAY, as PRRTE does), so the
 * get names app 0.  The answer only informs: a failure shows none. */
static void argv_request(struct ps_job *job)
{
	pmix_source_t *ps = job->ps;
	struct ps_msg *m;
	uint32_t app = 0;
	int timeout = 5;
	bool yes = true;
	pmix_status_t st;

	job->argv_asked = true;
	m = ps_op_new(ps, PS_MSG_ARGV);
	if (!m)
		return;
	snprintf(m->nspace, sizeof(m->nspace), "%s", job->nspace);
	PMIX_LOAD_PROCID(&m->proc, job->nspace, PMIX_RANK_WILDCARD);
	PMIX_INFO_CREATE(m->info, 3);
	if (m->info) {
		m->ninfo = 3;
		PMIx_Info_load(&m->info[0], PMIX_APP_INFO, &yes, PMIX_BOOL);
		PMIx_Info_load(&m->info[1], PMIX_APPNUM, &app, PMIX_UINT32);
		PMIx_Info_load(&m->info[2], PMIX_TIMEOUT, &timeout, PMIX_INT);
	}
	st = PMIx_Get_nb(&m->proc, PMIX_APP_ARGV, m->info, m->ninfo, pt_argv,
			 m);
	if (st != PMIX_SUCCESS) {
		/* e.g. the job ended and the server forgot it first */
		ps_log(ps, LOG_INFO, "%s: no command line (PMIX_APP_ARGV: %s)",
		       job->nspace, PMIx_Error_string(st));
		ps_op_abort(m);
		return;
	}
	ps->size_inflight = true;
}

/* The get in flight was answered: ask for the next waiting job's size,
 * or else the next command line. */
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
	for (struct ps_job *job = ps->jobs; job && !ps->size_inflight;
	     job = job->next)
		if (job->argv_pending && !job->argv_asked &&
		    !job->size_pending && !job->ignored && !ps->lost &&
		    !ps->closing)
			argv_request(job);
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

/* @text as one line info shows: control bytes as '?', at most
 * PS_COMMAND_MAX bytes, cut at a space (ROUTER_COMMAND_CUT marks it).
 * NULL on ENOMEM or when nothing is left. */
static char *command_line(const char *text)
{
	size_t len = strlen(text), max = PS_COMMAND_MAX;
	bool cut = len > max;
	char *out;

	if (cut) {
		len = max;
		while (len > 0 && text[len] != ' ')
			len--;
		if (!len)
			len = max;
	}
	while (len > 0 && text[len - 1] == ' ')
		len--;
	if (!len || !(out = malloc(len + sizeof(ROUTER_COMMAND_CUT))))
		return NULL;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)text[i];
		out[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	strcpy(out + len, cut ? ROUTER_COMMAND_CUT : ""); /* as iofs-run's */
	return out;
}

void ps_argv_answered(pmix_source_t *ps, struct ps_msg *m)
{
	struct ps_job *job = ps_job_find(ps, m->nspace);

	if (job && m->status == PMIX_SUCCESS && m->bytes && !job->command) {
		job->command = command_line(m->bytes);
		ps_job_command(job);
	} else if (job && m->status != PMIX_SUCCESS) {
		ps_log(ps, LOG_INFO, "%s: no command line (PMIX_APP_ARGV: %s)",
		       job->nspace, PMIx_Error_string(m->status));
	}
	size_next(ps);
}
