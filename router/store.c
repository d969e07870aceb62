/* SPDX-License-Identifier: MIT */
/* The router's side of its storage (router_store_ops) that is about jobs:
 * their recorded state, and adopting the storage of an earlier life. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include <event2/event.h>

#include "router/job_i.h"
#include "router/line_i.h"
#include "router/router_i.h"

/* "rank: 4294967294 running -2147483648 STDIN STARTED ENDED PID\n" */
#define STATE_LINE_MAX 128
/* a rank line's host, its space and newline */
#define STATE_HOST_MAX (ROUTER_STATE_HOST_MAX + 2)
#define STATE_DELAY_MS 250 /* a running job's state: one write a period */

void job_state_mark(router_job_t *job)
{
	router_t *r = job->r;

	if (!r->store || job->state_dirty || job->removed || job->complete ||
	    r->shut || r->freeing)
		return;
	job->state_dirty = true;
	TAILQ_INSERT_TAIL(&r->state_dirty, job, state_link);
	if (!evtimer_pending(r->ev_state, NULL)) {
		struct timeval tv = {0, STATE_DELAY_MS * 1000};

		evtimer_add(r->ev_state, &tv);
	}
}

void job_state_unmark(router_job_t *job)
{
	if (!job->state_dirty)
		return;
	TAILQ_REMOVE(&job->r->state_dirty, job, state_link);
	job->state_dirty = false;
}

void store_state_flush(router_t *r)
{
	router_job_t *job;

	while ((job = TAILQ_FIRST(&r->state_dirty))) {
		job_state_unmark(job);
		if (job->removed || job->complete)
			continue; /* gone, or saved when it completed */
		if (!job->store)
			(void)job_store(job); /* opens, then saves */
		else
			job_state_save(job);
	}
}

/* @host as one word of a rank line: "-" for none, or one that is too
 * long or not a plain name (docs/design.md, "Restart"). */
static const char *state_host(const char *host)
{
	size_t n = strlen(host);

	if (!n || n > ROUTER_STATE_HOST_MAX)
		return "-";
	for (size_t i = 0; i < n; i++)
		if (host[i] <= ' ' || host[i] == 0x7f)
			return "-";
	return host;
}

/* uid, gid, private, size, dirs, command, "state:" then every rank:
 * "rank: ID STATE STATUS STDIN_BYTES STARTED ENDED PID HOST" (a running
 * job's running ranks are what a restarted daemon waits for; the rest,
 * wall clock seconds for the times, is for its info: older spools have
 * no size, dirs, nor the fields after STATUS, and restore without). */
void job_state_save(router_job_t *job)
{
	router_t *r = job->r;
	size_t cap = 6 * STATE_LINE_MAX + ROUTER_COMMAND_MAX +
		     job->nranks * (STATE_LINE_MAX + STATE_HOST_MAX);
	char *text;
	int len;

	job_state_unmark(job);
	if (!job->store || !r->store->job_state)
		return;
	text = malloc(cap);
	if (!text) {
		router_logf(r, LOG_ERR, "job %s: spool: state not recorded: %s",
			    job->nspace, strerror(ENOMEM));
		return;
	}
	len = snprintf(text, cap, "uid: %" PRIu32 "\ngid: %" PRIu32
			     "\nprivate: %d\nsize: %" PRIu32 "\ndirs: %" PRIu32
			     " %" PRIu32 "\ncommand: %s\nstate: %s\n",
		       job->uid, job->gid, job->private_job ? 1 : 0,
		       job->job_size, job->dirs.set,
		       job->dirs.value & job->dirs.set,
		       router_job_command(job),
		       !job->complete	? "running"
		       : job->any_lost	? "lost"
					: "exited");
	for (size_t i = 0; i < job->nranks; i++) {
		router_rank_t *rk = job->ranks[i];

		len += snprintf(text + len, cap - (size_t)len,
				"rank: %" PRIu32 " %s %d %" PRIu64 " %" PRId64
				" %" PRId64 " %" PRId64 " %s\n",
				rk->id, router_state_name(rk->state),
				rk->exit_status, rk->stdin_bytes, rk->started,
				rk->state == ROUTER_STATE_RUNNING ? 0
								  : rk->ended,
				rk->pid, state_host(rk->host));
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

/* @job's stream of @rank (or its merged view) on @channel; NULL if none. */
static struct stream *restored_stream(router_job_t *job, uint32_t rank,
				      uint32_t channel)
{
	int ci = channel == ROUTER_CH_STDOUT ? CI_OUT : CI_ERR;
	router_rank_t *rk;

	if (rank == ROUTER_RANK_WILDCARD)
		return &job->m[ci].s;
	rk = router_job_rank(job, rank);
	return rk ? &rk->ch[ci].s : NULL;
}

int router_stream_adopt(router_job_t *job, uint32_t rank, uint32_t channel,
			void *h, uint64_t size)
{
	struct stream *s;

	if (!job || !h || (channel != ROUTER_CH_STDOUT &&
			   channel != ROUTER_CH_STDERR))
		return ROUTER_ERR_BAD_PARAM;
	if (!job->r->store)
		return ROUTER_ERR_NOT_AVAILABLE;
	if (!job->store)
		return ROUTER_ERR_BAD_PARAM; /* router_job_adopt_store() first */
	s = restored_stream(job, rank, channel);
	return s ? stream_adopt(s, h, size) : ROUTER_ERR_NOT_FOUND;
}

int router_stream_restore_mtime(router_job_t *job, uint32_t rank,
				uint32_t channel, uint64_t mtime_ns)
{
	struct stream *s;

	if (!job || !mtime_ns ||
	    (channel != ROUTER_CH_STDOUT && channel != ROUTER_CH_STDERR))
		return ROUTER_ERR_BAD_PARAM;
	s = restored_stream(job, rank, channel);
	if (!s)
		return ROUTER_ERR_NOT_FOUND;
	s->mtime_ns = mtime_ns;
	return ROUTER_SUCCESS;
}

/* @rank of @job and the index of @channel (stdout or stderr) for a
 * restart's view calls; 0 or ROUTER_ERR_*. */
static int restored_rank(router_job_t *job, uint32_t rank, uint32_t channel,
			 router_rank_t **rk, int *ci)
{
	if (!job || (channel != ROUTER_CH_STDOUT &&
		     channel != ROUTER_CH_STDERR) ||
	    rank == ROUTER_RANK_WILDCARD)
		return ROUTER_ERR_BAD_PARAM;
	*rk = router_job_rank(job, rank);
	*ci = channel == ROUTER_CH_STDOUT ? CI_OUT : CI_ERR;
	return *rk ? 0 : ROUTER_ERR_NOT_FOUND;
}

int router_stream_view_line(router_job_t *job, uint32_t rank,
			    uint32_t channel, bool midline, bool open)
{
	struct line_state *ls;
	router_rank_t *rk;
	int ci, rc = restored_rank(job, rank, channel, &rk, &ci);

	if (rc)
		return rc;
	ls = &rk->ch[ci].ls;
	ls->midline = midline;
	ls->channel = channel;
	if (open)
		job->m[ci].open = ls;
	else if (job->m[ci].open == ls)
		job->m[ci].open = NULL;
	return 0;
}

int router_stream_refeed(router_job_t *job, uint32_t rank, uint32_t channel,
			 uint64_t at, const void *p, size_t n)
{
	router_directives_t eff;
	router_rank_t *rk;
	int ci, rc = restored_rank(job, rank, channel, &rk, &ci);

	if (rc)
		return rc;
	if (rk->ch[ci].s.complete || at + n > rk->ch[ci].s.end)
		return ROUTER_ERR_BAD_PARAM;
	eff = job->dirs;
	eff.value &= eff.set;
	return line_feed(rk, ci, channel, p, n, at, &eff, router_now(job->r));
}

/* ---- retention caps ------------------------------------------------------ */

/* Evicting stops this far under a cap (an eighth of it, whole blocks), so
 * a stream at its cap is not cut on every write. */
static uint64_t cap_slack(uint64_t cap)
{
	uint64_t step = (cap / 8) & ~(uint64_t)(ROUTER_STORE_ALIGN - 1);

	return step < ROUTER_STORE_ALIGN ? ROUTER_STORE_ALIGN : step;
}

/* Evict about @want bytes of @s's oldest (whole blocks: rounded down).
 * Returns the bytes evicted. */
static uint64_t evict_some(struct stream *s, uint64_t want)
{
	return stream_store_evict(s, s->store_start + want);
}

/* The job's stream holding the most evictable bytes, NULL if none.  A
 * merged view stored by reference counts what its own files take (its
 * index and literal bytes, at most what it may evict): small for one of
 * tagged lines, which follows its ranks (mrec_follow()), a second copy
 * of its ranks' bytes for one stored as it is (XML, a rank whose store
 * failed), which no rank eviction reaches and no cap would otherwise
 * bound (a 1 MB job of `iofs-run --xml` kept 1.8 MB under a 128 KiB job
 * cap). */
static struct stream *job_largest(router_job_t *job)
{
	struct stream *best = NULL, *s;
	uint64_t most = 0, e;

	for (size_t i = 0; i < job->nranks + 1; i++) {
		for (int ci = 0; ci < CI_N; ci++) {
			s = i < job->nranks ? &job->ranks[i]->ch[ci].s
					    : &job->m[ci].s;
			e = stream_store_evictable(s);
			if (stream_store_by_ref(s) && e > s->charged)
				e = s->charged;
			if (e > most) {
				most = e;
				best = s;
			}
		}
	}
	return best;
}

/* Evict @want bytes from @job, its largest streams first.  Returns what
 * it evicted (less when blocking readers need the rest). */
static uint64_t job_evict(router_job_t *job, uint64_t want)
{
	uint64_t done = 0, got;
	struct stream *s;

	while (done < want && (s = job_largest(job))) {
		got = evict_some(s, want - done);
		if (!got)
			break;
		done += got;
	}
	mrec_follow(job);
	return done;
}

/* What each owner's jobs hold in the store (total_cap()). */
struct owner_sum {
	uint32_t uid;
	uint64_t bytes;
};

/* @uid's entry among the @n of @sums, NULL if none. */
static struct owner_sum *owner_of(struct owner_sum *sums, size_t n,
				  uint32_t uid)
{
	for (size_t i = 0; i < n; i++)
		if (sums[i].uid == uid)
			return &sums[i];
	return NULL;
}

/* @sums (at most @cap, *n used): the owners of every job with stored
 * bytes.  false for want of room: then no fair share, oldest first. */
static bool owner_sums(router_t *r, struct owner_sum *sums, size_t cap,
		       size_t *n)
{
	router_job_t *job;
	struct owner_sum *o;

	*n = 0;
	TAILQ_FOREACH (job, &r->all_jobs, all_link) {
		if (!job->store_bytes)
			continue;
		if (!(o = owner_of(sums, *n, job->uid))) {
			if (*n == cap)
				return false;
			o = &sums[(*n)++];
			*o = (struct owner_sum){job->uid, 0};
		}
		o->bytes += job->store_bytes;
	}
	return true;
}

/* The complete job the total cap (or a full disk) takes first, other
 * than @skip: the oldest one of the owner whose jobs hold the most (so
 * one user's flood evicts that user's own history before anyone else's),
 * or, without @sums, simply the oldest.  NULL: none. */
static router_job_t *total_victim(router_t *r, struct owner_sum *sums,
				  size_t n, const router_job_t *skip,
				  struct owner_sum **owner)
{
	router_job_t *job, *best = NULL;
	struct owner_sum *o;

	*owner = NULL;
	TAILQ_FOREACH (job, &r->store_done, done_link) {
		if (job == skip)
			continue;
		if (!n)
			return job;
		o = owner_of(sums, n, job->uid);
		if (o && (!*owner || o->bytes > (*owner)->bytes)) {
			*owner = o;
			best = job;
		}
	}
	return best;
}

#define OWNERS_MAX 256 /* owners summed for the fair share */

/* The total cap: complete jobs lose everything first (the oldest of the
 * owner holding the most), then the job being written loses its oldest
 * bytes, largest streams first. */
static void total_cap(router_t *r, router_job_t *writing)
{
	uint64_t goal = r->max_total - cap_slack(r->max_total);
	struct owner_sum sums[OWNERS_MAX], *owner;
	size_t n;
	router_job_t *job;

	/* summed only when a complete job may go: a cap the blocking
	 * readers keep exceeded comes here on every append */
	if (TAILQ_EMPTY(&r->store_done) ||
	    !owner_sums(r, sums, OWNERS_MAX, &n))
		n = 0;
	while (r->store_used > goal &&
	       (job = total_victim(r, sums, n, NULL, &owner))) {
		uint64_t got = job_evict(job, job->store_bytes);

		if (owner)
			owner->bytes -= got < owner->bytes ? got : owner->bytes;
		store_job_forget(job); /* done with it */
	}
	if (r->store_used > goal)
		job_evict(writing, r->store_used - goal);
	if (r->store_used > r->max_total && !r->store_over_logged) {
		r->store_over_logged = true;
		router_logf(r, LOG_WARNING,
			    "spool: over its cap (%" PRIu64 " > %" PRIu64
			    " bytes): blocking readers still need the rest",
			    r->store_used, r->max_total);
	} else if (r->store_used <= r->max_total) {
		r->store_over_logged = false;
	}
}

/* What @uid's jobs hold in the store. */
static uint64_t user_bytes(router_t *r, uint32_t uid)
{
	return uidmap_value(&r->uid_jobs, uid, UID_STORE);
}

/* The per-owner cap: @writing's owner's complete jobs lose everything
 * first, oldest first, then @writing its oldest bytes, largest streams
 * first (the total cap's order within one owner's jobs), then the
 * owner's other running jobs theirs.  Never what a running job's blocking
 * reader still needs: what those keep is what holds the owner back
 * (store_user_full()). */
static void user_cap(router_t *r, router_job_t *writing)
{
	uint64_t goal = r->max_user - cap_slack(r->max_user), held;
	uint32_t uid = writing->uid;
	router_job_t *job, *next;

	for (job = TAILQ_FIRST(&r->store_done);
	     job && user_bytes(r, uid) > goal; job = next) {
		next = TAILQ_NEXT(job, done_link);
		if (job->uid != uid || job == writing)
			continue;
		job_evict(job, job->store_bytes);
		store_job_forget(job); /* done with it, as total_cap() */
	}
	held = user_bytes(r, uid);
	if (held > goal)
		job_evict(writing, held - goal);
	TAILQ_FOREACH (job, &r->all_jobs, all_link) {
		held = user_bytes(r, uid);
		if (held <= goal)
			break;
		if (job->uid == uid && job != writing && job->store_bytes)
			job_evict(job, held - goal);
	}
}

bool store_user_full(router_job_t *job)
{
	router_t *r = job->r;

	if (!r->max_user || job->uid == r->user_exempt ||
	    user_bytes(r, job->uid) < r->max_user)
		return false;
	if (r->full_uid == job->uid &&
	    r->full_pass == r->store_pass &&
	    r->full_bytes == user_bytes(r, job->uid))
		return true; /* nothing changed since it was held */
	user_cap(r, job);
	if (user_bytes(r, job->uid) < r->max_user)
		return false;
	if (uidmap_value(&r->uid_jobs, job->uid, UID_READERS)) {
		r->full_uid = job->uid;
		r->full_pass = r->store_pass;
		r->full_bytes = user_bytes(r, job->uid);
		return true;
	}
	if (!job->user_over_logged) {
		job->user_over_logged = true;
		router_logf(r, LOG_WARNING,
			    "%s: uid %" PRIu32 " is over the per-user spool cap "
			    "(spool_max_user: %" PRIu64 " > %" PRIu64
			    " bytes) with no reader keeping any: what is left "
			    "cannot be evicted, not holding it back",
			    job->nspace, job->uid, user_bytes(r, job->uid),
			    r->max_user);
	}
	return false;
}

void store_caps(struct stream *s)
{
	router_t *r = s->r;
	router_job_t *job = s->job;
	uint64_t held = stream_store_held(s);

	if (r->view_flushing) /* the caller is applying a cap */
		return;
	if (s->rank != ROUTER_RANK_WILDCARD && rank_chan_of(s)->feeding) {
		rank_chan_of(s)->caps_due = true; /* after line_feed() */
		return;
	}

	if (r->max_stream && held > r->max_stream)
		evict_some(s, held - r->max_stream + cap_slack(r->max_stream));
	if (r->max_job && job->store_bytes > r->max_job)
		job_evict(job, job->store_bytes - r->max_job +
				   cap_slack(r->max_job));
	if (r->max_user && job->uid != r->user_exempt &&
	    user_bytes(r, job->uid) > r->max_user)
		user_cap(r, job);
	if (r->max_total && r->store_used > r->max_total)
		total_cap(r, job);
	mrec_follow(job);
}

bool store_make_room(router_t *r, router_job_t *writing)
{
	struct owner_sum sums[OWNERS_MAX], *owner;
	router_job_t *job;
	uint64_t got;
	size_t n;

	/* the same order as the total cap's */
	if (TAILQ_EMPTY(&r->store_done) ||
	    !owner_sums(r, sums, OWNERS_MAX, &n))
		n = 0;
	while ((job = total_victim(r, sums, n, writing, &owner))) {
		got = job_evict(job, job->store_bytes);
		if (owner)
			owner->bytes -= got < owner->bytes ? got : owner->bytes;
		store_job_forget(job);
		if (got) {
			router_logf(r, LOG_NOTICE,
				    "spool full: job %s gave up %" PRIu64
				    " bytes of its history to make room",
				    job->nspace, got);
			return true;
		}
	}
	return false;
}

void store_job_done(router_job_t *job)
{
	router_t *r = job->r;

	if (job->on_done || !r->store)
		return;
	TAILQ_INSERT_TAIL(&r->store_done, job, done_link);
	job->on_done = true;
	if (r->max_total && r->store_used > r->max_total)
		total_cap(r, job);
}

void store_job_forget(router_job_t *job)
{
	if (!job->on_done)
		return;
	TAILQ_REMOVE(&job->r->store_done, job, done_link);
	job->on_done = false;
}
