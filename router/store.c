/* SPDX-License-Identifier: MIT */
/* The router's side of its storage (router_store_ops) that is about jobs:
 * their recorded state, and adopting the storage of an earlier life. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "router/job_i.h"
#include "router/router_i.h"

#define STATE_LINE_MAX 64 /* "rank: 4294967294 running -2147483648\n" */

void job_state_save(router_job_t *job)
{
	router_t *r = job->r;
	size_t cap = 4 * STATE_LINE_MAX + job->nranks * STATE_LINE_MAX;
	char *text;
	int len;

	if (!job->store || !r->store->job_state)
		return;
	text = malloc(cap);
	if (!text) {
		router_logf(r, LOG_ERR, "job %s: spool: state not recorded: %s",
			    job->nspace, strerror(ENOMEM));
		return;
	}
	len = snprintf(text, cap, "uid: %" PRIu32 "\ngid: %" PRIu32
			     "\nstate: %s\n",
		       job->uid, job->gid,
		       !job->complete	? "running"
		       : job->any_lost	? "lost"
					: "exited");
	for (size_t i = 0; job->complete && i < job->nranks; i++) {
		router_rank_t *rk = job->ranks[i];

		len += snprintf(text + len, cap - (size_t)len,
				"rank: %" PRIu32 " %s %d\n", rk->id,
				router_state_name(rk->state), rk->exit_status);
	}
	r->store->job_state(job->store, text, (size_t)len);
	free(text);
}

int router_job_adopt_store(router_job_t *job, void *jh)
{
	if (!job || !jh)
		return ROUTER_ERR_BAD_PARAM;
	if (!job->r->store)
		return ROUTER_ERR_NOT_AVAILABLE;
	if (job->store || job->store_failed)
		return ROUTER_ERR_EXISTS;
	job->store = jh;
	return ROUTER_SUCCESS;
}

int router_stream_adopt(router_job_t *job, uint32_t rank, uint32_t channel,
			void *h, uint64_t size)
{
	struct stream *s;
	router_rank_t *rk;

	if (!job || !h || (channel != ROUTER_CH_STDOUT &&
			   channel != ROUTER_CH_STDERR))
		return ROUTER_ERR_BAD_PARAM;
	if (!job->r->store)
		return ROUTER_ERR_NOT_AVAILABLE;
	if (!job->store)
		return ROUTER_ERR_BAD_PARAM; /* router_job_adopt_store() first */
	if (rank == ROUTER_RANK_WILDCARD) {
		s = &job->m[channel == ROUTER_CH_STDOUT ? CI_OUT : CI_ERR].s;
	} else {
		rk = router_job_rank(job, rank);
		if (!rk)
			return ROUTER_ERR_NOT_FOUND;
		s = &rk->ch[channel == ROUTER_CH_STDOUT ? CI_OUT : CI_ERR].s;
	}
	return stream_adopt(s, h, size);
}
