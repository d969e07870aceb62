/* SPDX-License-Identifier: MIT */
/* Jobs and ranks: registry, lifecycle, latches, the deliver work. */
#include "router/job_i.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include "router/line_i.h"
#include "router/push_i.h"
#include "router/router_i.h"

static const uint32_t ci_channel[CI_N] = {ROUTER_CH_STDOUT, ROUTER_CH_STDERR};

int job_channel_index(uint32_t channel, int *ci)
{
	switch (channel) {
	case ROUTER_CH_STDOUT:
		*ci = CI_OUT;
		return 0;
	case ROUTER_CH_STDERR:
	case ROUTER_CH_STDDIAG:
		*ci = CI_ERR;
		return 0;
	default:
		return ROUTER_ERR_BAD_PARAM;
	}
}

/* ---- latches ------------------------------------------------------------ */

/* Set or clear @reason on the (rank, ci) latch; calls ops->flow and counts
 * only on 0 -> nonzero and nonzero -> 0. */
static void rank_latch(router_rank_t *rank, int ci, unsigned reason, bool on)
{
	struct rank_chan *c = &rank->ch[ci];
	uint8_t old = c->reasons;

	if (on) {
		if (rank->state != ROUTER_STATE_RUNNING || c->s.complete)
			return;
		c->reasons |= (uint8_t)reason;
	} else {
		c->reasons &= (uint8_t)~reason;
	}
	if (!old == !c->reasons)
		return;
	if (c->reasons) {
		c->xoff++;
	} else {
		c->xon++;
		line_resume(rank, ci);
	}
	if (rank->ops && rank->ops->flow)
		rank->ops->flow(rank->ctx, rank, ci_channel[ci],
				c->reasons != 0);
}

/* Idempotent: clear every reason of the (rank, ci) latch. */
static void rank_latch_release(router_rank_t *rank, int ci)
{
	rank_latch(rank, ci, 0xff, false);
}

static void rank_stream_flow(struct stream *s, unsigned reason, bool on)
{
	struct rank_chan *c = rank_chan_of(s);

	rank_latch(c->rank, (int)(c - c->rank->ch), reason, on);
}

/* The merged view lags: the wildcard latch over every rank of the job. */
static void merged_stream_flow(struct stream *s, unsigned reason, bool on)
{
	struct merged *m =
	    (struct merged *)((char *)s - offsetof(struct merged, s));
	router_job_t *job = m->job;
	int ci = (int)(m - job->m);

	(void)reason;
	(void)on;
	for (size_t i = 0; i < job->nranks; i++)
		rank_latch(job->ranks[i], ci, SUSPEND_MERGED, s->held != 0);
}

/* ---- jobs --------------------------------------------------------------- */

static router_job_t *job_new(router_t *r, const char *nspace,
			     const struct router_rank_info *info)
{
	router_job_t *job = calloc(1, sizeof(*job));
	uint64_t now = router_now(r);
	bool renamed =
	    info && info->requested && strcmp(info->requested, nspace) != 0;

	if (!job)
		return NULL;
	job->nspace = strdup(nspace);
	if (renamed)
		job->requested = strdup(info->requested);
	if (!job->nspace || (renamed && !job->requested))
		goto fail_free;
	if (info) { /* the owner is fixed here, for the job's life */
		job->uid = info->uid;
		job->gid = info->gid;
		job->private_job = info->private_job;
		job->owner_set = true;
	}
	job->r = r;
	job->refs = 1; /* the registry's */
	if (strmap_put(&r->job_index, job->nspace, job) < 0)
		goto fail_free;
	for (int ci = 0; ci < CI_N; ci++) {
		stream_init(&job->m[ci].s, r, merged_stream_flow, now, job,
			    ROUTER_RANK_WILDCARD,
			    ci == CI_OUT ? ROUTER_CH_STDOUT : ROUTER_CH_STDERR);
		job->m[ci].job = job;
	}
	TAILQ_INSERT_TAIL(&r->jobs, job, link);
	TAILQ_INSERT_TAIL(&r->all_jobs, job, all_link);
	return job;

fail_free:
	free(job->requested);
	free(job->nspace);
	free(job);
	return NULL;
}

static void rank_free(router_t *r, router_rank_t *rank)
{
	for (int ci = 0; ci < CI_N; ci++) {
		line_reset(r, &rank->ch[ci].ls);
		stream_destroy(&rank->ch[ci].s);
	}
	free(rank->host);
	free(rank);
}

static void job_free(router_job_t *job)
{
	router_t *r = job->r;

	for (size_t i = 0; i < job->nranks; i++)
		rank_free(r, job->ranks[i]);
	for (int ci = 0; ci < CI_N; ci++)
		stream_destroy(&job->m[ci].s);
	if (job->store)
		r->store->job_close(job->store, job->store_discard);
	store_job_forget(job);
	job_state_unmark(job);
	TAILQ_REMOVE(&r->all_jobs, job, all_link);
	free(job->ranks);
	for (size_t i = 0; i < job->nnotes; i++)
		free(job->notes[i]);
	free(job->command);
	free(job->requested);
	free(job->nspace);
	free(job);
}

void *job_store(router_job_t *job)
{
	router_t *r = job->r;
	int rc;

	if (job->store || job->store_failed || !r->store)
		return job->store;
	rc = r->store->job_open(r->store_ctx, job->nspace, &job->store);
	if (rc < 0) {
		job->store = NULL;
		job->store_failed = true;
		router_logf(r, LOG_ERR,
			    "job %s: spool: %s: only the last window of its "
			    "streams is kept",
			    job->nspace, strerror(-rc));
	}
	job_state_save(job);
	return job->store;
}

router_job_t *router_job_ref(router_job_t *job)
{
	if (job)
		job->refs++;
	return job;
}

void router_job_unref(router_job_t *job)
{
	if (!job)
		return;
	if (--job->refs == 0)
		job_free(job);
}

static void job_unlink(router_job_t *job)
{
	if (job->removed)
		return;
	for (size_t i = 0; i < job->nranks; i++)
		for (int ci = 0; ci < CI_N; ci++)
			rank_latch_release(job->ranks[i], ci);
	for (int ci = 0; ci < CI_N; ci++)
		stream_flow_release(&job->m[ci].s);
	TAILQ_REMOVE(&job->r->jobs, job, link);
	job->store_discard = !job->r->freeing; /* removed or replaced */
	if (strmap_get(&job->r->job_index, job->nspace) == job)
		strmap_del(&job->r->job_index, job->nspace);
	if (job->owner_counted)
		uidmap_add(&job->r->uid_jobs, job->uid, UID_JOBS, -1);
	job->removed = true;
	router_job_unref(job);
}

void job_destroy(router_job_t *job)
{
	router_reader_t *rd;

	job->refs++; /* keep it while its readers go */
	for (int ci = 0; ci < CI_N; ci++) {
		while ((rd = TAILQ_FIRST(&job->m[ci].s.readers)))
			router_reader_close(rd);
		for (size_t i = 0; i < job->nranks; i++) {
			struct stream *s = &job->ranks[i]->ch[ci].s;

			while ((rd = TAILQ_FIRST(&s->readers)))
				router_reader_close(rd);
		}
	}
	job_unlink(job);
	job_free(job);
}

router_job_t *router_job_lookup(router_t *r, const char *nspace)
{
	if (!r || !nspace)
		return NULL;
	return strmap_get(&r->job_index, nspace); /* O(1) */
}

router_job_t *router_job_first(router_t *r)
{
	return r ? TAILQ_FIRST(&r->jobs) : NULL;
}

router_job_t *router_job_next(router_job_t *job)
{
	return job && !job->removed ? TAILQ_NEXT(job, link) : NULL;
}

const char *router_job_nspace(const router_job_t *job)
{
	return job->nspace;
}

bool router_job_removed(const router_job_t *job)
{
	return job->removed;
}

size_t router_window(const router_t *r)
{
	return r->window;
}

size_t router_job_rank_count(const router_job_t *job)
{
	return job->nranks;
}

router_rank_t *router_job_rank_at(const router_job_t *job, size_t i)
{
	return i < job->nranks ? job->ranks[i] : NULL;
}

/* Index of the first rank >= @id. */
static size_t rank_search(const router_job_t *job, uint32_t id)
{
	size_t lo = 0, hi = job->nranks;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (job->ranks[mid]->id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

router_rank_t *router_job_rank(const router_job_t *job, uint32_t rank)
{
	size_t i;

	if (!job)
		return NULL;
	i = rank_search(job, rank);
	return i < job->nranks && job->ranks[i]->id == rank ? job->ranks[i]
							    : NULL;
}

router_job_t *router_rank_job(const router_rank_t *rank)
{
	return rank->job;
}

uint32_t router_rank_id(const router_rank_t *rank)
{
	return rank->id;
}

static void job_check_complete(router_job_t *job);

int router_job_remove(router_t *r, router_job_t *job)
{
	if (!r || !job || job->r != r)
		return ROUTER_ERR_BAD_PARAM;
	if (job->removed)
		return ROUTER_ERR_NOT_FOUND;
	if (job->running)
		return ROUTER_ERR_BUSY;
	/* Every known rank ended but the announced size was never reached
	 * (a rank that never started): the owner gives up on the rest. */
	if (!job->complete) {
		job->job_size = (uint32_t)job->nranks;
		job_check_complete(job);
	}
	job_unlink(job);
	return ROUTER_SUCCESS;
}

/* ---- ranks -------------------------------------------------------------- */

static void job_check_complete(router_job_t *job)
{
	if (job->complete || job->running || job->nranks < job->job_size)
		return;
	job->complete = true;
	for (int ci = 0; ci < CI_N; ci++) {
		for (size_t i = 0; i < job->nranks; i++)
			(void)line_flush(job->ranks[i], ci, true);
		job->m[ci].open = NULL;
		stream_complete(&job->m[ci].s);
	}
	job_state_save(job);
	store_job_done(job);
}

static router_rank_t *rank_new(router_job_t *job, uint32_t id,
			       const struct router_rank_info *info,
			       const struct router_source_ops *ops, void *ctx)
{
	router_t *r = job->r;
	router_rank_t *rank;
	size_t at;

	if (job->nranks == job->rcap) {
		size_t nc = job->rcap ? job->rcap * 2 : 4;
		router_rank_t **nr = realloc(job->ranks, nc * sizeof(*nr));

		if (!nr)
			return NULL;
		job->ranks = nr;
		job->rcap = nc;
	}
	rank = calloc(1, sizeof(*rank));
	if (!rank)
		return NULL;
	rank->host = strdup(info && info->host ? info->host : "");
	if (!rank->host) {
		free(rank);
		return NULL;
	}
	rank->job = job;
	rank->id = id;
	rank->state = ROUTER_STATE_RUNNING;
	rank->started = (int64_t)time(NULL);
	rank->pid = info ? info->pid : -1;
	rank->ops = ops;
	rank->ctx = ctx;
	TAILQ_INIT(&rank->fifo);
	TAILQ_INIT(&rank->sent);
	for (int ci = 0; ci < CI_N; ci++) {
		stream_init(&rank->ch[ci].s, r, rank_stream_flow,
			    router_now(r), job, id,
			    ci == CI_OUT ? ROUTER_CH_STDOUT : ROUTER_CH_STDERR);
		rank->ch[ci].rank = rank;
	}
	at = rank_search(job, id);
	memmove(job->ranks + at + 1, job->ranks + at,
		(job->nranks - at) * sizeof(*job->ranks));
	job->ranks[at] = rank;
	job->nranks++;
	job->running++;
	if (info) {
		if (job->nranks == 1) {
			job->uid = info->uid;
			job->gid = info->gid;
			job->private_job = info->private_job;
			/* a failure only makes the per-uid count low */
			job->owner_counted =
			    uidmap_add(&r->uid_jobs, job->uid, UID_JOBS, 1) == 0;
		}
		if (info->job_size > job->job_size)
			job->job_size = info->job_size;
		if (!job->dirs.set && info->dirs.set)
			job->dirs = info->dirs;
	}
	push_rank_new(rank);
	for (int ci = 0; ci < CI_N; ci++)
		if (job->m[ci].s.held)
			rank_latch(rank, ci, SUSPEND_MERGED, true);
	return rank;
}

int job_rank_get(router_t *r, const router_proc_t *proc,
		 const struct router_rank_info *info,
		 const struct router_source_ops *ops, void *ctx,
		 bool must_be_new, router_rank_t **out)
{
	router_job_t *job = router_job_lookup(r, proc->nspace);
	router_rank_t *rank;

	if (job && info && job->owner_set && info->uid != job->uid) {
		router_job_owner_refused(job, info->uid,
					 job->complete ? "replace" : "join");
		return ROUTER_ERR_OWNER;
	}
	if (job && job->complete) {
		rank = router_job_rank(job, proc->rank);
		if (rank && !must_be_new) {
			/* Late output of a finished rank: dropped, counted. */
			*out = rank;
			return 0;
		}
		/* A new run under a finished job's name: replace it. */
		job_unlink(job);
		job = NULL;
	}
	if (!job) {
		job = job_new(r, proc->nspace, info);
		if (!job)
			return -ENOMEM;
	}
	rank = router_job_rank(job, proc->rank);
	if (rank) {
		if (must_be_new)
			return ROUTER_ERR_EXISTS;
		*out = rank;
		return 0;
	}
	rank = rank_new(job, proc->rank, info, ops, ctx);
	if (!rank) {
		if (job->nranks == 0)
			job_unlink(job);
		return -ENOMEM;
	}
	job_state_mark(job);
	*out = rank;
	return 0;
}

int router_rank_register(router_t *r, const router_proc_t *proc,
			 const struct router_rank_info *info,
			 const struct router_source_ops *ops, void *ctx,
			 router_rank_t **out)
{
	if (!r)
		return ROUTER_ERR_INIT;
	if (!proc || !out || proc->rank > ROUTER_RANK_MAX ||
	    !router_nspace_valid(
		proc->nspace, strnlen(proc->nspace, ROUTER_NSPACE_MAX + 1)) ||
	    (info && info->host &&
	     !router_text_valid(info->host, strlen(info->host))))
		return ROUTER_ERR_BAD_PARAM;
	if (r->shut)
		return ROUTER_ERR_NOT_AVAILABLE;
	return job_rank_get(r, proc, info, ops, ctx, true, out);
}

/* The rank's channel ends: last partial line, EOF, latch released. */
static void rank_chan_complete(router_rank_t *rank, int ci)
{
	struct rank_chan *c = &rank->ch[ci];
	router_directives_t d = {ROUTER_DIR_COMPLETE, ROUTER_DIR_COMPLETE};
	router_proc_t src;

	if (c->s.complete)
		return;
	(void)line_flush(rank, ci, true);
	stream_complete(&c->s);
	rank_latch_release(rank, ci);
	memcpy(src.nspace, rank->job->nspace, strlen(rank->job->nspace) + 1);
	src.rank = rank->id;
	router_subs_emit(rank->job->r, &src, ci_channel[ci], NULL, 0, &d);
}

void router_rank_exit(router_rank_t *rank, enum router_state state,
		      int exit_status)
{
	router_job_t *job;

	if (!rank || rank->state != ROUTER_STATE_RUNNING)
		return;
	job = rank->job;
	for (int ci = 0; ci < CI_N; ci++) {
		rank_chan_complete(rank, ci);
		rank_latch_release(rank, ci);
	}
	push_rank_exit(rank, ROUTER_ERR_PIPE);
	rank->state = state == ROUTER_STATE_LOST ? ROUTER_STATE_LOST
						 : ROUTER_STATE_EXITED;
	rank->exit_status = exit_status;
	if (!rank->ended) /* else a restart's record (restore_history) */
		rank->ended = (int64_t)time(NULL);
	rank->ops = NULL;
	rank->ctx = NULL;
	job->running--;
	if (rank->state == ROUTER_STATE_LOST)
		job->any_lost = true;
	if (exit_status && !job->exit_status)
		job->exit_status = exit_status;
	job_check_complete(job);
	job_state_mark(job); /* unless complete: saved then */
}

void router_rank_set_link(router_rank_t *rank, enum router_link link,
			  uint64_t reconnects)
{
	if (!rank)
		return;
	rank->link = link;
	rank->reconnects = reconnects;
}

int router_rank_adopt_source(router_rank_t *rank,
			     const struct router_source_ops *ops, void *ctx)
{
	if (!rank || rank->state != ROUTER_STATE_RUNNING || rank->ops)
		return ROUTER_ERR_EXISTS;
	rank->ops = ops;
	rank->ctx = ctx;
	/* stdin queued while it was away waits for the source's XON */
	rank->stdin_held = true;
	rank->stdin_xoff++;
	return ROUTER_SUCCESS;
}

void router_rank_count_replayed(router_rank_t *rank, uint64_t bytes)
{
	if (rank)
		rank->replayed += bytes;
}

void router_rank_restore_history(router_rank_t *rank, uint64_t stdin_bytes,
				 int64_t started, int64_t ended)
{
	if (!rank)
		return;
	if (stdin_bytes > rank->stdin_bytes)
		rank->stdin_bytes = stdin_bytes;
	if (started > 0)
		rank->started = started;
	if (ended > 0)
		rank->ended = ended;
}

bool router_rank_has_source(const router_rank_t *rank)
{
	return rank && rank->ops;
}

void job_shutdown(router_job_t *job)
{
	job->complete = true;
	for (size_t i = 0; i < job->nranks; i++) {
		router_rank_t *rank = job->ranks[i];

		for (int ci = 0; ci < CI_N; ci++) {
			rank_chan_complete(rank, ci);
			rank_latch_release(rank, ci);
		}
		push_rank_exit(rank, ROUTER_ERR_CANCELED);
	}
	for (int ci = 0; ci < CI_N; ci++) {
		job->m[ci].open = NULL;
		stream_complete(&job->m[ci].s);
	}
}

/* ---- deliver ------------------------------------------------------------ */

/* @len bytes of @rank's channel @ci (index of @channel) into its stream,
 * the subscribers and the merged views. */
static int deliver_to(router_t *r, const router_proc_t *source,
		      uint32_t channel, router_rank_t *rank, int ci,
		      const void *bytes, size_t len,
		      const router_directives_t *d)
{
	router_directives_t eff;
	struct rank_chan *c;
	uint64_t now = router_now(r);
	int rc;

	eff = rank->job->dirs;
	eff.value &= eff.set;
	if (d) {
		uint32_t set = d->set & ROUTER_DIR_KNOWN_MASK;

		eff.value = (eff.value & ~set) | (d->value & set);
		eff.set |= set;
	}
	c = &rank->ch[ci];
	if (c->s.complete) {
		/* After EOF (or exit): nobody can see these bytes. */
		c->s.dropped += len;
		return 0;
	}
	if (len) {
		c->feeding = true; /* a cap in the append keeps these */
		c->feed_from = c->s.end;
		rc = stream_append(&c->s, bytes, len, now);
		if (rc < 0) {
			c->feeding = c->caps_due = false;
			return rc;
		}
		router_subs_emit(r, source, channel, bytes, len, &eff);
		rc = line_feed(rank, ci, channel, bytes, len, c->s.end - len,
			       &eff, now);
		c->feeding = false;
		if (c->caps_due) { /* now that the view refers to them */
			c->caps_due = false;
			store_caps(&c->s);
		}
		if (rc < 0)
			router_logf(r, LOG_ERR,
				    "router: merged view of %s lost bytes: %s",
				    rank->job->nspace, router_strerror(rc));
	}
	if (router_dir_on(d, ROUTER_DIR_COMPLETE))
		rank_chan_complete(rank, ci);
	return 0;
}

int job_deliver(router_t *r, const router_proc_t *source, uint32_t channel,
		const void *bytes, size_t len, const router_directives_t *d)
{
	router_rank_t *rank;
	int ci, rc;

	(void)job_channel_index(channel, &ci);
	rc = job_rank_get(r, source, NULL, NULL, NULL, false, &rank);
	if (rc)
		return rc;
	return deliver_to(r, source, channel, rank, ci, bytes, len, d);
}

int job_deliver_pipe(router_t *r, const router_proc_t *source,
		     uint32_t channel, int fd, void *buf, size_t cap,
		     const router_directives_t *d, size_t *taken)
{
	router_rank_t *rank;
	const void *bytes = buf;
	ssize_t w;
	int ci, rc;

	*taken = 0;
	(void)job_channel_index(channel, &ci);
	rc = job_rank_get(r, source, NULL, NULL, NULL, false, &rank);
	if (rc)
		return rc;
	if (router_dir_on(d, ROUTER_DIR_COMPLETE))
		return ROUTER_ERR_BAD_PARAM; /* bytes only: EOF is a deliver */
	/* a read beyond the window would overshoot a blocking reader's XOFF
	 * by the difference (tests/fs/mount.sh win; docs/design.md "Busy
	 * pipes grow") */
	if (cap > r->window)
		cap = r->window;
	w = stream_splice(&rank->ch[ci].s, fd, buf, cap, &bytes);
	if (w == -EAGAIN)
		return ROUTER_AGAIN;
	if (w == -EPIPE)
		return ROUTER_ERR_PIPE;
	if (w == -ENOSPC)
		return ROUTER_STORE_FULL;
	if (w <= 0)
		return ROUTER_ERR_NOT_SUPPORTED;
	*taken = (size_t)w;
	return deliver_to(r, source, channel, rank, ci, bytes, (size_t)w, d);
}

/* ---- readers, attributes (stats: router/stats.c) ------------------------ */

static struct stream *pick_stream(router_job_t *job, uint32_t rank,
				  uint32_t channel, int *rc)
{
	router_rank_t *rk;
	int ci;

	*rc = job_channel_index(channel, &ci);
	if (*rc)
		return NULL;
	if (rank == ROUTER_RANK_WILDCARD)
		return &job->m[ci].s;
	rk = router_job_rank(job, rank);
	if (!rk) {
		*rc = ROUTER_ERR_NOT_FOUND;
		return NULL;
	}
	return &rk->ch[ci].s;
}

int router_reader_open(router_job_t *job, uint32_t rank, uint32_t channel,
		       unsigned flags, void (*ready)(void *cbdata),
		       void *cbdata, router_reader_t **out)
{
	struct stream *s;
	int rc;

	if (!job || !out ||
	    (channel != ROUTER_CH_STDOUT && channel != ROUTER_CH_STDERR))
		return ROUTER_ERR_BAD_PARAM;
	s = pick_stream(job, rank, channel, &rc);
	if (!s)
		return rc;
	router_job_ref(job);
	rc = stream_reader_attach(s, job, flags, ready, cbdata, out);
	if (rc)
		router_job_unref(job);
	return rc;
}

int router_stream_attr(router_job_t *job, uint32_t rank, uint32_t channel,
		       struct router_stream_attr *out)
{
	struct stream *s;
	int rc;

	if (!job || !out)
		return ROUTER_ERR_BAD_PARAM;
	s = pick_stream(job, rank, channel, &rc);
	if (!s)
		return rc;
	out->size = s->end;
	out->mtime_ns = s->mtime_ns;
	out->complete = s->complete;
	return 0;
}

size_t router_uid_jobs(router_t *r, uint32_t uid)
{
	return r ? (size_t)uidmap_value(&r->uid_jobs, uid, UID_JOBS) : 0;
}

bool router_job_complete(const router_job_t *job)
{
	return job->complete;
}

/* Some reader of @s has not read everything (or @s is still live). */
static bool stream_unread(const struct stream *s)
{
	const router_reader_t *rd;

	TAILQ_FOREACH (rd, &s->readers, link)
		if (!s->complete || rd->cursor < s->end)
			return true;
	return false;
}

bool router_job_in_use(const router_job_t *job)
{
	if (job->writers)
		return true;
	for (int ci = 0; ci < CI_N; ci++)
		if (stream_unread(&job->m[ci].s))
			return true;
	for (size_t i = 0; i < job->nranks; i++) {
		const router_rank_t *rank = job->ranks[i];

		if (rank->writers || stream_unread(&rank->ch[CI_OUT].s) ||
		    stream_unread(&rank->ch[CI_ERR].s))
			return true;
	}
	return false;
}

uint32_t router_job_size(const router_job_t *job)
{
	return job->job_size;
}

const char *router_job_requested(const router_job_t *job)
{
	return job->requested ? job->requested : job->nspace;
}

void router_job_owner_refused(router_job_t *job, uint32_t uid, const char *what)
{
	job->owner_refused++;
	router_logf(job->r, LOG_WARNING,
		    "router: uid %u may not %s job '%s' of uid %u (refused "
		    "%llu times)",
		    uid, what, job->nspace, job->uid,
		    (unsigned long long)job->owner_refused);
}

void router_job_owner(const router_job_t *job, uint32_t *uid, uint32_t *gid)
{
	*uid = job->uid;
	*gid = job->gid;
}

bool router_job_private(const router_job_t *job)
{
	return job->private_job;
}
