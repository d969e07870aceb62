/* SPDX-License-Identifier: MIT */
/* What a job's and a rank's `info` files show: the counters (router.h,
 * struct router_stats), read from the jobs, ranks and streams, never kept
 * twice; a producer's notes and command line. */
#include "router/job_i.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "router/router_i.h"

static void add_rank(struct router_stats *o, const router_rank_t *rank)
{
	o->stdout_bytes += rank->ch[CI_OUT].s.end;
	o->stderr_bytes += rank->ch[CI_ERR].s.end;
	o->stdin_bytes += rank->stdin_bytes;
	o->stdout_xoff += rank->ch[CI_OUT].xoff;
	o->stdout_xon += rank->ch[CI_OUT].xon;
	o->stderr_xoff += rank->ch[CI_ERR].xoff;
	o->stderr_xon += rank->ch[CI_ERR].xon;
	o->stdin_xoff += rank->stdin_xoff;
	o->stdin_xon += rank->stdin_xon;
	o->dropped_bytes +=
	    rank->ch[CI_OUT].s.dropped + rank->ch[CI_ERR].s.dropped;
	o->spool_bytes += stream_store_held(&rank->ch[CI_OUT].s) +
			  stream_store_held(&rank->ch[CI_ERR].s);
	o->evicted_bytes += rank->ch[CI_OUT].s.store_start +
			    rank->ch[CI_ERR].s.store_start;
	o->stdin_discarded += rank->stdin_discarded;
	o->stdin_unacked += rank->stdin_unacked;
	o->reconnects += rank->reconnects;
	o->replayed += rank->replayed;
	o->ranks_waiting += rank->state == ROUTER_STATE_RUNNING &&
			    rank->link == ROUTER_LINK_WAITING;
}

void router_rank_stats(const router_rank_t *rank, struct router_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->state = rank->state;
	out->pid = rank->pid;
	out->host = rank->host;
	out->exit_status = rank->exit_status;
	out->uid = rank->job->uid;
	out->gid = rank->job->gid;
	out->ranks = 1;
	out->job_size = rank->job->job_size;
	out->link = rank->link;
	out->started = rank->started;
	out->ended = rank->state == ROUTER_STATE_RUNNING ? 0 : rank->ended;
	add_rank(out, rank);
}

void router_job_stats(const router_job_t *job, struct router_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->state = !job->complete  ? ROUTER_STATE_RUNNING
		     : job->any_lost ? ROUTER_STATE_LOST
				     : ROUTER_STATE_EXITED;
	out->pid = -1;
	out->host = "";
	out->exit_status = job->exit_status;
	out->uid = job->uid;
	out->gid = job->gid;
	out->ranks = (uint32_t)job->nranks;
	out->job_size = job->job_size;
	for (size_t i = 0; i < job->nranks; i++) {
		const router_rank_t *rk = job->ranks[i];

		add_rank(out, rk);
		if (rk->started && (!out->started || rk->started < out->started))
			out->started = rk->started;
		if (job->complete && rk->ended > out->ended)
			out->ended = rk->ended;
	}
	for (int ci = 0; ci < CI_N; ci++)
		out->merged_dropped_bytes += job->m[ci].s.dropped;
	out->spool_bytes = job->store_bytes;
	out->owner_refused = job->owner_refused;
}

int router_job_note(router_job_t *job, const char *text)
{
	if (!job || !text || !router_text_valid(text, strlen(text)))
		return ROUTER_ERR_BAD_PARAM;
	for (size_t i = 0; i < job->nnotes; i++)
		if (!strcmp(job->notes[i], text))
			return 0;
	if (job->nnotes == ROUTER_NOTES_MAX)
		return ROUTER_ERR_BAD_PARAM;
	char *copy = strdup(text);
	if (!copy)
		return -ENOMEM;
	job->notes[job->nnotes++] = copy;
	return 0;
}

const char *router_job_note_at(const router_job_t *job, size_t i)
{
	return i < job->nnotes ? job->notes[i] : NULL;
}

int router_job_set_command(router_job_t *job, const char *text)
{
	size_t len = text ? strlen(text) : 0;

	if (!job || !len || len > ROUTER_COMMAND_MAX ||
	    !router_text_valid(text, len))
		return ROUTER_ERR_BAD_PARAM;
	if (job->command)
		return 0; /* the first one said stays */
	job->command = strdup(text);
	if (!job->command)
		return -ENOMEM;
	job_state_mark(job); /* into the spool's `state` */
	return 0;
}

const char *router_job_command(const router_job_t *job)
{
	return job->command ? job->command : "";
}
