/* SPDX-License-Identifier: MIT */
/* stdin: per-rank FIFOs of push slices, sink XOFF, writers and EOF. */
#include "router/push_i.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "router/router_i.h"

struct push_slice {
	TAILQ_ENTRY(push_slice) link; /* rank->fifo if queued, ->sent if sent */
	struct router_push *push;     /* NULL: an EOF marker, freed alone */
	router_rank_t *rank;
	bool queued;
	bool sent; /* in the sink: router_stdin_written() completes it */
};

struct router_push {
	TAILQ_ENTRY(router_push) link; /* r->pushes until finished */
	struct done done; /* the completion; its fini frees the push */
	router_t *r;
	router_job_t *job;    /* reference held until finished */
	const uint8_t *bytes; /* the caller's until the callback, or @own */
	uint8_t *own;	      /* our copy once canceled mid-broadcast */
	size_t len;
	unsigned flags;
	uint64_t seq;
	uint32_t pending, took;
	uint32_t sent; /* slices a sink holds pending */
	bool any_pipe, any_canceled;
	bool finished; /* every slice done, callback posted */
	bool canceled; /* router_push_cancel(): no callback */
	uint32_t nslices;
	struct push_slice slices[];
};

static void push_fini(struct done *d)
{
	struct router_push *p =
	    (struct router_push *)((char *)d -
				   offsetof(struct router_push, done));

	free(p->own);
	free(p);
}

static void push_finish(struct router_push *p)
{
	router_t *r = p->r;
	int status;

	if (p->any_canceled)
		status = ROUTER_ERR_CANCELED;
	else if (p->took)
		status = ROUTER_SUCCESS;
	else
		status = ROUTER_ERR_PIPE;
	p->finished = true;
	TAILQ_REMOVE(&r->pushes, p, link);
	router_job_unref(p->job);
	p->job = NULL;
	if (p->canceled)
		p->done.cb = NULL;
	router_done_post(r, &p->done, status);
	router_flush_check(r);
}

static void slice_done(struct push_slice *sl, int status)
{
	struct router_push *p = sl->push;

	if (status == 0)
		p->took++;
	else if (status == ROUTER_ERR_CANCELED)
		p->any_canceled = true;
	else
		p->any_pipe = true;
	if (--p->pending == 0)
		push_finish(p);
}

static void forward_eof(router_rank_t *rank)
{
	rank->eof_sent = true;
	if (rank->ops && rank->ops->stdin_eof)
		rank->ops->stdin_eof(rank->ctx, rank);
}

/* The sink took slice @sl with @rc (stdin_write's or stdin_write_job's). */
static void slice_written(struct push_slice *sl, int rc)
{
	router_rank_t *rank = sl->rank;
	struct router_push *p = sl->push;

	if (rc == ROUTER_STDIN_PENDING) {
		sl->sent = true;
		p->sent++;
		rank->stdin_unacked += p->len;
		TAILQ_INSERT_TAIL(&rank->sent, sl, link);
	} else if (rc == 0) {
		rank->stdin_bytes += p->len;
		job_state_mark(rank->job); /* stdin_bytes in `state` */
	}
	if ((rc == 0 || rc == ROUTER_STDIN_PENDING) &&
	    (p->flags & ROUTER_PUSH_COMPLETE))
		forward_eof(rank);
	if (rc != ROUTER_STDIN_PENDING)
		slice_done(sl, rc == 0 ? 0 : ROUTER_ERR_PIPE);
}

/* A running rank restored from the spool whose forwarder has not come
 * back yet: no sink, but one may come (router_rank_adopt_source), so its
 * stdin waits, as behind an XOFF, until then or until the rank is lost. */
static bool sink_away(const router_rank_t *rank)
{
	return !rank->ops && rank->link == ROUTER_LINK_WAITING &&
	       rank->state == ROUTER_STATE_RUNNING;
}

/* Feed the sink while it is not XOFFed. */
static void rank_pump(router_rank_t *rank)
{
	struct push_slice *sl;

	if (rank->pumping)
		return; /* router_stdin_flow() from inside stdin_write */
	rank->pumping = true;
	while (!rank->stdin_held && !sink_away(rank) &&
	       (sl = TAILQ_FIRST(&rank->fifo))) {
		struct router_push *p = sl->push;
		int rc = 0;

		TAILQ_REMOVE(&rank->fifo, sl, link);
		sl->queued = false;
		if (!p) {
			free(sl);
			if (rank->state == ROUTER_STATE_RUNNING)
				forward_eof(rank);
			continue;
		}
		if (p->len) {
			if (rank->ops && rank->ops->stdin_write)
				rc = rank->ops->stdin_write(rank->ctx, rank,
							    p->bytes, p->len);
			else
				rc = -EPIPE;
		}
		/* the sink has the bytes (maybe pending); EOF may follow */
		slice_written(sl, rc);
	}
	rank->pumping = false;
}

/* Take @rank's oldest slice a sink holds pending (NULL if none); the
 * caller finishes it. */
static struct push_slice *sent_take(router_rank_t *rank)
{
	struct push_slice *sl = TAILQ_FIRST(&rank->sent);

	if (!sl)
		return NULL;
	TAILQ_REMOVE(&rank->sent, sl, link);
	sl->sent = false;
	sl->push->sent--;
	rank->stdin_unacked -= sl->push->len;
	return sl;
}

void router_stdin_written(router_rank_t *rank, int status)
{
	struct push_slice *sl;

	if (!rank || rank->state != ROUTER_STATE_RUNNING ||
	    !(sl = sent_take(rank)))
		return;
	if (status == 0) {
		rank->stdin_bytes += sl->push->len;
		job_state_mark(rank->job); /* stdin_bytes in `state` */
	} else
		rank->stdin_discarded += sl->push->len;
	slice_done(sl, status == 0 ? 0 : ROUTER_ERR_PIPE);
}

/*
 * A broadcast whose every target is free (the slice at the head of its
 * FIFO, not held, not inside a write) and shares one ops table offering
 * stdin_write_job goes to the sink in one call.  Returns false if not.
 */
static bool push_whole_job(struct router_push *p)
{
	const struct router_source_ops *ops = p->slices[0].rank->ops;
	router_rank_t *one[8], **targets = one;
	int rc;

	if (!ops || !ops->stdin_write_job || !p->len || p->nslices < 2)
		return false;
	for (uint32_t i = 0; i < p->nslices; i++) {
		router_rank_t *rk = p->slices[i].rank;

		if (rk->ops != ops || rk->stdin_held || rk->pumping ||
		    TAILQ_FIRST(&rk->fifo) != &p->slices[i])
			return false;
	}
	if (p->nslices > 8 &&
	    !(targets = malloc(p->nslices * sizeof(*targets))))
		return false; /* one write per rank then */
	for (uint32_t i = 0; i < p->nslices; i++) {
		struct push_slice *sl = &p->slices[i];

		TAILQ_REMOVE(&sl->rank->fifo, sl, link);
		sl->queued = false;
		targets[i] = sl->rank;
		sl->rank->pumping = true;
	}
	rc = ops->stdin_write_job(p->slices[0].rank->ctx, targets, p->nslices,
				  p->bytes, p->len);
	for (uint32_t i = 0; i < p->nslices; i++)
		targets[i]->pumping = false;
	if (targets != one)
		free(targets);
	/* slice_done() may finish (not free) the push on the last slice */
	for (uint32_t i = 0, n = p->nslices; i < n; i++)
		slice_written(&p->slices[i], rc);
	/* a sink may have XONed from inside the call: drain what queued */
	for (uint32_t i = 0; i < p->nslices; i++)
		rank_pump(p->slices[i].rank);
	return true;
}

static bool rank_takes_stdin(const router_rank_t *rank)
{
	return rank->state == ROUTER_STATE_RUNNING && !rank->eof_sent;
}

int router_push(router_job_t *job, uint32_t rank, const void *bytes, size_t len,
		unsigned flags, router_op_cb_t cbfunc, void *cbdata,
		router_push_t **handle)
{
	router_t *r;
	router_rank_t *one = NULL;
	struct router_push *p;
	uint32_t n = 0;

	if (handle)
		*handle = NULL;
	if (!job)
		return ROUTER_ERR_NOT_FOUND;
	r = job->r;
	if (r->shut)
		return ROUTER_ERR_NOT_AVAILABLE;
	if (job->removed)
		return ROUTER_ERR_NOT_FOUND;
	if (!bytes && len)
		return ROUTER_ERR_BAD_PARAM;
	if (rank == ROUTER_RANK_WILDCARD) {
		for (size_t i = 0; i < job->nranks; i++)
			n += rank_takes_stdin(job->ranks[i]);
	} else {
		one = router_job_rank(job, rank);
		if (!one)
			return ROUTER_ERR_NOT_FOUND;
		n = rank_takes_stdin(one);
	}
	if (n == 0)
		return ROUTER_ERR_PIPE;
	p = calloc(1, sizeof(*p) + n * sizeof(p->slices[0]));
	if (!p)
		return -ENOMEM;
	p->r = r;
	p->job = router_job_ref(job);
	p->bytes = bytes;
	p->len = len;
	p->flags = flags;
	p->done.cb = cbfunc;
	p->done.cbdata = cbdata;
	p->done.fini = push_fini;
	p->seq = ++r->push_seq;
	p->nslices = n;
	p->pending = n;
	TAILQ_INSERT_TAIL(&r->pushes, p, link);
	n = 0;
	for (size_t i = 0; i < job->nranks; i++) {
		router_rank_t *rk = job->ranks[i];
		struct push_slice *sl;

		if ((one && rk != one) || !rank_takes_stdin(rk))
			continue;
		sl = &p->slices[n++];
		sl->push = p;
		sl->rank = rk;
		sl->queued = true;
		TAILQ_INSERT_TAIL(&rk->fifo, sl, link);
		if (flags & ROUTER_PUSH_COMPLETE)
			rk->eof_sent = true;
	}
	if (handle)
		*handle = p;
	/* Write now where the sinks are open; the callback stays deferred. */
	if (rank == ROUTER_RANK_WILDCARD && push_whole_job(p))
		return ROUTER_SUCCESS;
	for (uint32_t i = 0; i < p->nslices && !p->finished; i++) {
		router_rank_t *rk = p->slices[i].rank;

		if (TAILQ_FIRST(&rk->fifo) == &p->slices[i])
			rank_pump(rk);
	}
	return ROUTER_SUCCESS;
}

/* Take @p's slices that no sink has seen off their FIFOs; they fail as
 * canceled (and count as discarded when another target took the push:
 * only for want of memory to keep a copy). */
static void drop_queued(struct router_push *p)
{
	for (uint32_t i = 0; i < p->nslices && !p->finished; i++) {
		struct push_slice *sl = &p->slices[i];

		if (!sl->queued)
			continue;
		TAILQ_REMOVE(&sl->rank->fifo, sl, link);
		sl->queued = false;
		if (p->flags & ROUTER_PUSH_COMPLETE)
			sl->rank->eof_sent = false;
		if (p->took || p->sent) {
			sl->rank->stdin_discarded += p->len;
			router_logf(p->r, LOG_ERR,
				    "router: no memory to keep a canceled "
				    "broadcast for %s rank %u: %zu bytes "
				    "dropped",
				    sl->rank->job->nspace, sl->rank->id,
				    p->len);
		}
		slice_done(sl, ROUTER_ERR_CANCELED);
	}
}

size_t router_push_cancel(router_push_t *p)
{
	if (!p)
		return 0;
	if (p->finished) {
		p->done.cb = NULL;
		return p->took ? p->len : 0;
	}
	if (p->took || p->sent) {
		/* A sink has the bytes (a broadcast is never half-delivered):
		 * the rest goes on, on our copy, as the caller may free its. */
		bool queued = false;

		p->canceled = true;
		for (uint32_t i = 0; i < p->nslices; i++)
			queued |= p->slices[i].queued;
		if (queued && !p->own && p->len) {
			p->own = malloc(p->len);
			if (p->own) {
				memcpy(p->own, p->bytes, p->len);
				p->bytes = p->own;
			} else {
				drop_queued(p);
			}
		}
		return p->len;
	}
	p->canceled = true;
	drop_queued(p);
	return 0;
}

void push_rank_exit(router_rank_t *rank, int status)
{
	struct push_slice *sl;

	while ((sl = TAILQ_FIRST(&rank->fifo))) {
		TAILQ_REMOVE(&rank->fifo, sl, link);
		sl->queued = false;
		if (!sl->push) {
			free(sl);
			continue;
		}
		rank->stdin_discarded += sl->push->len;
		slice_done(sl, status);
	}
	/* written but never acknowledged: their fate is unknown */
	while ((sl = sent_take(rank))) {
		rank->stdin_discarded += sl->push->len;
		slice_done(sl, status);
	}
	if (rank->stdin_held) {
		rank->stdin_held = false;
		rank->stdin_xon++;
	}
}

void push_rank_new(router_rank_t *rank)
{
	rank->had_writer = rank->job->writers > 0;
}

void router_stdin_flow(router_rank_t *rank, bool xoff)
{
	if (!rank || rank->state != ROUTER_STATE_RUNNING)
		return;
	if (xoff == rank->stdin_held)
		return;
	rank->stdin_held = xoff;
	if (xoff) {
		rank->stdin_xoff++;
	} else {
		rank->stdin_xon++;
		rank_pump(rank);
	}
}

/* The FIFO rule: EOF once a rank that had a writer has none left. */
static void check_eof(router_rank_t *rank)
{
	struct push_slice *sl;

	if (!rank_takes_stdin(rank) || !rank->had_writer || rank->writers ||
	    rank->job->writers)
		return;
	rank->eof_sent = true;
	if (TAILQ_EMPTY(&rank->fifo) && !rank->stdin_held && !sink_away(rank)) {
		forward_eof(rank);
		return;
	}
	sl = calloc(1, sizeof(*sl));
	if (!sl) {
		router_logf(
		    rank->job->r, LOG_ERR,
		    "router: no memory to queue stdin EOF of %s rank %u: "
		    "sent at once",
		    rank->job->nspace, rank->id);
		forward_eof(rank);
		return;
	}
	sl->rank = rank;
	sl->queued = true;
	TAILQ_INSERT_TAIL(&rank->fifo, sl, link);
}

int router_stdin_attach(router_job_t *job, uint32_t rank)
{
	router_rank_t *rk;

	if (!job || job->removed)
		return ROUTER_ERR_NOT_FOUND;
	if (rank == ROUTER_RANK_WILDCARD) {
		uint32_t n = 0;

		for (size_t i = 0; i < job->nranks; i++)
			n += rank_takes_stdin(job->ranks[i]);
		if (n == 0)
			return ROUTER_ERR_PIPE;
		job->writers++;
		for (size_t i = 0; i < job->nranks; i++)
			job->ranks[i]->had_writer = true;
		return 0;
	}
	rk = router_job_rank(job, rank);
	if (!rk)
		return ROUTER_ERR_NOT_FOUND;
	if (!rank_takes_stdin(rk))
		return ROUTER_ERR_PIPE;
	rk->writers++;
	rk->had_writer = true;
	return 0;
}

void router_stdin_detach(router_job_t *job, uint32_t rank)
{
	router_rank_t *rk;

	if (!job)
		return;
	if (rank == ROUTER_RANK_WILDCARD) {
		if (!job->writers)
			return;
		job->writers--;
		for (size_t i = 0; i < job->nranks; i++)
			check_eof(job->ranks[i]);
		return;
	}
	rk = router_job_rank(job, rank);
	if (!rk || !rk->writers)
		return;
	rk->writers--;
	check_eof(rk);
}

uint64_t push_oldest_seq(router_t *r)
{
	struct router_push *p = TAILQ_FIRST(&r->pushes);

	return p ? p->seq : UINT64_MAX;
}
