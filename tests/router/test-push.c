/* SPDX-License-Identifier: MIT */
/* stdin: push, sink XOFF/XON, broadcast, EPIPE, cancel, the FIFO rule. */
#include "harness.h"

#define W ROUTER_RANK_WILDCARD

static router_job_t *three(struct h *h)
{
	for (uint32_t i = 0; i < 3; i++)
		h_reg(h, "in", i, 3);
	return router_job_lookup(h->r, "in");
}

static void push_reaches_sink_in_order(void **state)
{
	struct h *h = h_new(NULL);
	router_job_t *job = three(h);
	int c1[2] = {0}, c2[2] = {0};
	struct router_stats st;

	(void)state;
	assert_int_equal(router_push(job, 1, "abc", 3, 0, h_cb_count, c1, NULL),
			 0);
	assert_int_equal(router_push(job, 1, "def", 3, 0, h_cb_count, c2, NULL),
			 0);
	assert_int_equal(c1[0], 0); /* never inside the call */
	assert_int_equal(h->fr[1].inlen, 6);
	assert_memory_equal(h->fr[1].in, "abcdef", 6);
	h_loop(h);
	assert_int_equal(c1[0], 1);
	assert_int_equal(c1[1], ROUTER_SUCCESS);
	assert_int_equal(c2[0], 1);
	router_rank_stats(h->rk[1], &st);
	assert_int_equal(st.stdin_bytes, 6);
	assert_int_equal(h->fr[0].inlen + h->fr[2].inlen, 0);
	/* Codes. */
	assert_int_equal(router_push(job, 9, "x", 1, 0, h_cb_count, c1, NULL),
			 ROUTER_ERR_NOT_FOUND);
	assert_int_equal(router_push(NULL, 0, "x", 1, 0, h_cb_count, c1, NULL),
			 ROUTER_ERR_NOT_FOUND);
	router_rank_exit(h->rk[2], ROUTER_STATE_EXITED, 0);
	assert_int_equal(router_push(job, 2, "x", 1, 0, h_cb_count, c1, NULL),
			 ROUTER_ERR_PIPE);
	h_loop(h);
	assert_int_equal(c1[0], 1);
	h_free(h);
}

static void sink_xoff_makes_push_wait(void **state)
{
	struct h *h = h_new(NULL);
	router_job_t *job = three(h);
	int c[3][2] = {{0}};
	struct router_stats st;

	(void)state;
	router_stdin_flow(h->rk[0], true);
	router_stdin_flow(h->rk[0], true); /* idempotent */
	for (int i = 0; i < 3; i++)
		assert_int_equal(router_push(job, 0, &"0123456789"[i * 3], 3, 0,
					     h_cb_count, c[i], NULL),
				 0);
	h_loop(h);
	assert_int_equal(h->fr[0].inlen, 0);
	assert_int_equal(c[0][0] + c[1][0] + c[2][0], 0);
	router_stdin_flow(h->rk[0], false);
	assert_int_equal(h->fr[0].inlen, 9);
	assert_memory_equal(h->fr[0].in, "012345678", 9);
	h_loop(h);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(c[i][0], 1);
		assert_int_equal(c[i][1], ROUTER_SUCCESS);
	}
	router_rank_stats(h->rk[0], &st);
	assert_int_equal(st.stdin_xoff, 1);
	assert_int_equal(st.stdin_xon, 1);
	h_free(h);
}

/* A sink that fills up says so from inside its stdin_write. */
static int full_after_one(void *ctx, router_rank_t *rank, const void *b,
			  size_t len)
{
	struct flowrec *f = ctx;

	memcpy(f->in + f->inlen, b, len);
	f->inlen += len;
	router_stdin_flow(rank, true);
	return 0;
}

static void xoff_from_inside_stdin_write(void **state)
{
	struct h *h = h_new(NULL);
	static const struct router_source_ops ops = {.stdin_write =
							 full_after_one};
	router_proc_t p;
	router_rank_t *rk;
	router_job_t *job;
	int c[3][2] = {{0}};

	(void)state;
	router_proc_set(&p, "sync", 0);
	assert_int_equal(
	    router_rank_register(h->r, &p, NULL, &ops, &h->fr[0], &rk), 0);
	job = router_job_lookup(h->r, "sync");
	for (int i = 0; i < 3; i++)
		assert_int_equal(router_push(job, 0, &"abc"[i], 1, 0,
					     h_cb_count, c[i], NULL),
				 0);
	assert_int_equal(h->fr[0].inlen, 1); /* the rest waits */
	router_stdin_flow(rk, false);
	assert_int_equal(h->fr[0].inlen, 2);
	router_stdin_flow(rk, false);
	assert_int_equal(h->fr[0].inlen, 3);
	assert_memory_equal(h->fr[0].in, "abc", 3);
	h_loop(h);
	for (int i = 0; i < 3; i++)
		assert_int_equal(c[i][0], 1);
	h_free(h);
}

static void broadcast_waits_for_slowest(void **state)
{
	struct h *h = h_new(NULL);
	router_job_t *job = three(h);
	int c[2] = {0};
	struct router_stats st;

	(void)state;
	router_stdin_flow(h->rk[1], true);
	assert_int_equal(router_push(job, W, "bc\n", 3, 0, h_cb_count, c, NULL),
			 0);
	h_loop(h);
	assert_int_equal(h->fr[0].inlen, 3);
	assert_int_equal(h->fr[2].inlen, 3);
	assert_int_equal(h->fr[1].inlen, 0);
	assert_int_equal(c[0], 0);
	router_stdin_flow(h->rk[1], false);
	h_loop(h);
	assert_int_equal(h->fr[1].inlen, 3);
	assert_int_equal(c[0], 1);
	assert_int_equal(c[1], ROUTER_SUCCESS);
	router_job_stats(job, &st);
	assert_int_equal(st.stdin_bytes, 9);
	h_free(h);
}

static void exit_fails_queued_push_and_releases(void **state)
{
	struct h *h = h_new(NULL);
	router_job_t *job = three(h);
	int c[2] = {0};
	struct router_stats st;

	(void)state;
	router_stdin_flow(h->rk[0], true);
	assert_int_equal(router_push(job, 0, "lost", 4, 0, h_cb_count, c, NULL),
			 0);
	router_rank_exit(h->rk[0], ROUTER_STATE_EXITED, 0);
	assert_int_equal(c[0], 0);
	h_loop(h);
	assert_int_equal(c[0], 1);
	assert_int_equal(c[1], ROUTER_ERR_PIPE);
	router_rank_stats(h->rk[0], &st);
	assert_int_equal(st.stdin_discarded, 4);
	assert_int_equal(st.stdin_xoff, 1);
	assert_int_equal(st.stdin_xon, 1); /* released at exit, counted */
	assert_int_equal(h->fr[0].inlen, 0);
	/* A sink write error fails the push with PIPE. */
	h->fr[1].write_rc = -EPIPE;
	assert_int_equal(router_push(job, 1, "x", 1, 0, h_cb_count, c, NULL),
			 0);
	h_loop(h);
	assert_int_equal(c[0], 2);
	assert_int_equal(c[1], ROUTER_ERR_PIPE);
	/* Broadcast: every live target exited -> PIPE at once. */
	router_rank_exit(h->rk[1], ROUTER_STATE_EXITED, 0);
	router_rank_exit(h->rk[2], ROUTER_STATE_EXITED, 0);
	assert_int_equal(router_push(job, W, "x", 1, 0, h_cb_count, c, NULL),
			 ROUTER_ERR_PIPE);
	h_free(h);
}

static void cancel(void **state)
{
	struct h *h = h_new(NULL);
	router_job_t *job = three(h);
	int c[2] = {0}, cb[2] = {0};
	router_push_t *p;

	(void)state;
	/* Nobody took it: 0, nothing ever sent, no callback. */
	router_stdin_flow(h->rk[0], true);
	assert_int_equal(router_push(job, 0, "no", 2, 0, h_cb_count, c, &p), 0);
	assert_int_equal(router_push_cancel(p), 0);
	router_stdin_flow(h->rk[0], false);
	h_loop(h);
	assert_int_equal(h->fr[0].inlen, 0);
	assert_int_equal(c[0], 0);
	/* A broadcast some target took: len, the rest still receive it. */
	router_stdin_flow(h->rk[2], true);
	assert_int_equal(router_push(job, W, "yes", 3, 0, h_cb_count, cb, &p),
			 0);
	assert_int_equal(router_push_cancel(p), 3);
	router_stdin_flow(h->rk[2], false);
	h_loop(h);
	assert_int_equal(h->fr[0].inlen, 3);
	assert_int_equal(h->fr[1].inlen, 3);
	assert_int_equal(h->fr[2].inlen, 3);
	assert_int_equal(cb[0], 0);
	/* Done but callback not yet run: cancel suppresses it. */
	assert_int_equal(router_push(job, 1, "z", 1, 0, h_cb_count, cb, &p), 0);
	assert_int_equal(router_push_cancel(p), 1);
	h_loop(h);
	assert_int_equal(cb[0], 0);
	h_free(h);
}

static void fifo_eof_rule(void **state)
{
	struct h *h = h_new(NULL);
	router_job_t *job = three(h);
	int c[2] = {0};

	(void)state;
	assert_int_equal(router_stdin_attach(job, 0), 0);
	assert_int_equal(router_stdin_attach(job, W), 0);
	assert_int_equal(router_stdin_attach(job, 7), ROUTER_ERR_NOT_FOUND);
	router_stdin_detach(job, 0);
	assert_int_equal(h->fr[0].eof, 0); /* the job's writer remains */
	/* EOF waits behind a pending push. */
	router_stdin_flow(h->rk[0], true);
	assert_int_equal(router_push(job, 0, "tail", 4, 0, h_cb_count, c, NULL),
			 0);
	router_stdin_detach(job, W);
	assert_int_equal(h->fr[0].eof, 0);
	assert_int_equal(h->fr[1].eof, 1); /* had the job's writer */
	assert_int_equal(h->fr[2].eof, 1);
	router_stdin_flow(h->rk[0], false);
	assert_int_equal(h->fr[0].inlen, 4);
	assert_int_equal(h->fr[0].eof, 1);
	router_stdin_detach(job, W); /* unbalanced: ignored */
	assert_int_equal(h->fr[0].eof + h->fr[1].eof + h->fr[2].eof, 3);
	/* After EOF: no more pushes, no new writers. */
	assert_int_equal(router_push(job, 0, "x", 1, 0, h_cb_count, c, NULL),
			 ROUTER_ERR_PIPE);
	assert_int_equal(router_stdin_attach(job, 0), ROUTER_ERR_PIPE);
	h_loop(h);
	assert_int_equal(c[0], 1);
	h_free(h);
}

static void push_complete_is_eof(void **state)
{
	struct h *h = h_new(NULL);
	router_job_t *job = three(h);
	int c[2] = {0};

	(void)state;
	assert_int_equal(router_push(job, 0, "end", 3, ROUTER_PUSH_COMPLETE,
				     h_cb_count, c, NULL),
			 0);
	assert_int_equal(h->fr[0].inlen, 3);
	assert_int_equal(h->fr[0].eof, 1);
	assert_int_equal(router_push(job, W, NULL, 0, ROUTER_PUSH_COMPLETE,
				     h_cb_count, c, NULL),
			 0);
	assert_int_equal(h->fr[0].eof, 1); /* already had it */
	assert_int_equal(h->fr[1].eof, 1);
	assert_int_equal(h->fr[2].eof, 1);
	h_loop(h);
	assert_int_equal(c[0], 2);
	assert_int_equal(c[1], ROUTER_SUCCESS);
	h_free(h);
}

static void shutdown_cancels_pending_push(void **state)
{
	struct h *h = h_new(NULL);
	router_job_t *job = three(h);
	int c[2] = {0};
	struct router_stats st;

	(void)state;
	router_stdin_flow(h->rk[0], true);
	assert_int_equal(router_push(job, 0, "x", 1, 0, h_cb_count, c, NULL),
			 0);
	router_shutdown(h->r);
	h_loop(h);
	assert_int_equal(c[0], 1);
	assert_int_equal(c[1], ROUTER_ERR_CANCELED);
	router_rank_stats(h->rk[0], &st);
	assert_int_equal(st.stdin_xon, 1);
	assert_int_equal(st.stdin_discarded, 1);
	assert_int_equal(router_push(job, 1, "x", 1, 0, h_cb_count, c, NULL),
			 ROUTER_ERR_NOT_AVAILABLE);
	h_free(h);
	assert_int_equal(c[0], 1); /* exactly once */
}

/* A sink that answers ROUTER_STDIN_PENDING: each push completes only from
 * its router_stdin_written(), in order; later writes do not wait. */
static void pending_write_completes_later(void **state)
{
	struct h *h = h_new(NULL);
	router_job_t *job = three(h);
	int c[3][2] = {{0}};
	struct router_stats st;

	(void)state;
	h->fr[0].pending = true;
	for (int i = 0; i < 3; i++)
		assert_int_equal(router_push(job, 0, &"aabbcc"[i * 2], 2, 0,
					     h_cb_count, c[i], NULL),
				 0);
	assert_int_equal(h->fr[0].inlen, 6); /* pipelined into the sink */
	assert_memory_equal(h->fr[0].in, "aabbcc", 6);
	h_loop(h);
	assert_int_equal(c[0][0] + c[1][0] + c[2][0], 0);
	router_rank_stats(h->rk[0], &st);
	assert_int_equal(st.stdin_bytes, 0); /* nothing acknowledged yet */
	assert_int_equal(st.stdin_unacked, 6);
	router_stdin_written(h->rk[0], 0);
	h_loop(h);
	assert_int_equal(c[0][0], 1);
	assert_int_equal(c[0][1], ROUTER_SUCCESS);
	assert_int_equal(c[1][0] + c[2][0], 0);
	router_stdin_written(h->rk[0], -EPIPE); /* the second one failed */
	router_stdin_written(h->rk[0], 0);
	router_stdin_written(h->rk[0], 0); /* none pending: ignored */
	h_loop(h);
	assert_int_equal(c[1][0], 1);
	assert_int_equal(c[1][1], ROUTER_ERR_PIPE);
	assert_int_equal(c[2][0], 1);
	assert_int_equal(c[2][1], ROUTER_SUCCESS);
	router_rank_stats(h->rk[0], &st);
	assert_int_equal(st.stdin_bytes, 4);
	assert_int_equal(st.stdin_discarded, 2);
	assert_int_equal(st.stdin_unacked, 0);
	/* EOF follows the bytes into the sink at once. */
	assert_int_equal(router_push(job, 0, "zz", 2, ROUTER_PUSH_COMPLETE,
				     h_cb_count, c[0], NULL),
			 0);
	assert_int_equal(h->fr[0].eof, 1);
	h_loop(h);
	assert_int_equal(c[0][0], 1);
	router_stdin_written(h->rk[0], 0);
	h_loop(h);
	assert_int_equal(c[0][0], 2);
	h_free(h);
}

/* A broadcast completes when every pending sink said written; a flush
 * waits for them too. */
static void pending_broadcast_and_flush(void **state)
{
	struct h *h = h_new(NULL);
	router_job_t *job = three(h);
	int c[2] = {0}, f[2] = {0};

	(void)state;
	h->fr[0].pending = true;
	h->fr[2].pending = true;
	assert_int_equal(router_push(job, W, "all", 3, 0, h_cb_count, c, NULL),
			 0);
	assert_int_equal(router_flush(h->r, h_cb_count, f), 0);
	assert_int_equal(h->fr[0].inlen + h->fr[1].inlen + h->fr[2].inlen, 9);
	router_stdin_written(h->rk[2], 0);
	h_loop(h);
	assert_int_equal(c[0] + f[0], 0);
	router_stdin_written(h->rk[0], 0);
	h_loop(h);
	assert_int_equal(c[0], 1);
	assert_int_equal(c[1], ROUTER_SUCCESS);
	assert_int_equal(f[0], 1);
	h_free(h);
}

/* Rank exit fails the unacknowledged writes (counted as discarded); a late
 * router_stdin_written() is ignored.  Cancel of a pending push: consumed. */
static void pending_exit_and_cancel(void **state)
{
	struct h *h = h_new(NULL);
	router_job_t *job = three(h);
	int c[2] = {0}, k[2] = {0};
	router_push_t *p;
	struct router_stats st;

	(void)state;
	h->fr[0].pending = true;
	h->fr[1].pending = true;
	assert_int_equal(router_push(job, 0, "gone", 4, 0, h_cb_count, c, NULL),
			 0);
	router_rank_exit(h->rk[0], ROUTER_STATE_EXITED, 0);
	router_stdin_written(h->rk[0], 0);
	h_loop(h);
	assert_int_equal(c[0], 1);
	assert_int_equal(c[1], ROUTER_ERR_PIPE);
	router_rank_stats(h->rk[0], &st);
	assert_int_equal(st.stdin_discarded, 4);
	assert_int_equal(st.stdin_bytes, 0);
	assert_int_equal(st.stdin_unacked, 0);
	assert_int_equal(router_push(job, 1, "kept", 4, 0, h_cb_count, k, &p),
			 0);
	assert_int_equal(router_push_cancel(p), 4); /* the sink has it */
	router_stdin_written(h->rk[1], 0);
	h_loop(h);
	assert_int_equal(k[0], 0);
	router_rank_stats(h->rk[1], &st);
	assert_int_equal(st.stdin_bytes, 4);
	h_free(h);
}

/* A broadcast canceled after one target took it goes on to the others from
 * the router's copy: the caller frees (and here scribbles) its bytes. */
static void cancel_mid_broadcast_keeps_a_copy(void **state)
{
	struct h *h = h_new(NULL);
	router_job_t *job = three(h);
	int c[2] = {0};
	router_push_t *p;
	char *b = malloc(5);

	(void)state;
	assert_non_null(b);
	memcpy(b, "hello", 5);
	router_stdin_flow(h->rk[1], true);
	assert_int_equal(router_push(job, W, b, 5, 0, h_cb_count, c, &p), 0);
	assert_int_equal(router_push_cancel(p), 5);
	memset(b, 'X', 5);
	free(b);
	router_stdin_flow(h->rk[1], false);
	h_loop(h);
	assert_int_equal(h->fr[1].inlen, 5);
	assert_memory_equal(h->fr[1].in, "hello", 5);
	assert_int_equal(c[0], 0);
	h_free(h);
}

/* A job-wide sink (stdin_write_job): a broadcast to free targets is one
 * call; any held, queued-behind or foreign target falls back to one write
 * per rank, keeping each rank's order. */
static struct {
	struct h *h;
	int calls;
	size_t n;
	int rc;
} js;

static int rec_job(void *ctx, router_rank_t *const *targets, size_t n,
		   const void *b, size_t len)
{
	(void)ctx;
	js.calls++;
	js.n = n;
	for (size_t i = 0; i < n; i++) {
		struct flowrec *f = &js.h->fr[router_rank_id(targets[i]) & 7];

		memcpy(f->in + f->inlen, b, len);
		f->inlen += len;
	}
	return js.rc;
}

static const struct router_source_ops job_ops = {
    .stdin_write = h_stdin_write,
    .stdin_eof = h_stdin_eof,
    .stdin_write_job = rec_job,
};

static router_job_t *three_job_sink(struct h *h, int foreign)
{
	router_proc_t p;

	memset(&js, 0, sizeof(js));
	js.h = h;
	for (uint32_t i = 0; i < 3; i++) {
		router_proc_set(&p, "js", i);
		assert_int_equal(
		    router_rank_register(h->r, &p, NULL,
					 (int)i == foreign ? &h_ops : &job_ops,
					 &h->fr[i], &h->rk[i]),
		    0);
	}
	return router_job_lookup(h->r, "js");
}

static void job_sink_takes_a_broadcast_whole(void **state)
{
	struct h *h = h_new(NULL);
	router_job_t *job = three_job_sink(h, -1);
	int c[2] = {0}, d[2] = {0};
	struct router_stats st;

	(void)state;
	assert_int_equal(router_push(job, W, "all", 3, 0, h_cb_count, c, NULL),
			 0);
	assert_int_equal(js.calls, 1);
	assert_int_equal(js.n, 3);
	for (int i = 0; i < 3; i++)
		assert_memory_equal(h->fr[i].in, "all", 3);
	h_loop(h);
	assert_int_equal(c[0], 1);
	assert_int_equal(c[1], ROUTER_SUCCESS);
	router_job_stats(job, &st);
	assert_int_equal(st.stdin_bytes, 9);
	/* A rank with a write queued before the broadcast: per rank, in
	 * order. */
	router_stdin_flow(h->rk[0], true);
	assert_int_equal(router_push(job, 0, "r0", 2, 0, h_cb_count, d, NULL),
			 0);
	assert_int_equal(router_push(job, W, "bc", 2, 0, h_cb_count, c, NULL),
			 0);
	assert_int_equal(js.calls, 1);
	assert_memory_equal(h->fr[1].in, "allbc", 5);
	router_stdin_flow(h->rk[0], false);
	assert_memory_equal(h->fr[0].in, "allr0bc", 7);
	h_loop(h);
	assert_int_equal(c[0] + d[0], 3);
	/* Pending: the push completes when every target acknowledged. */
	js.rc = ROUTER_STDIN_PENDING;
	assert_int_equal(router_push(job, W, "p", 1, 0, h_cb_count, c, NULL),
			 0);
	assert_int_equal(js.calls, 2);
	router_job_stats(job, &st);
	assert_int_equal(st.stdin_unacked, 3);
	router_stdin_written(h->rk[0], 0);
	router_stdin_written(h->rk[2], 0);
	h_loop(h);
	assert_int_equal(c[0], 2);
	router_stdin_written(h->rk[1], 0);
	h_loop(h);
	assert_int_equal(c[0], 3);
	assert_int_equal(c[1], ROUTER_SUCCESS);
	/* A sink error fails every target. */
	js.rc = -EPIPE;
	assert_int_equal(router_push(job, W, "e", 1, 0, h_cb_count, c, NULL),
			 0);
	h_loop(h);
	assert_int_equal(c[0], 4);
	assert_int_equal(c[1], ROUTER_ERR_PIPE);
	router_job_stats(job, &st);
	assert_int_equal(st.stdin_unacked, 0);
	assert_int_equal(st.stdin_bytes, 9 + 2 + 6 + 3);
	h_free(h);
}

static void job_sink_falls_back_per_rank(void **state)
{
	struct h *h = h_new(NULL);
	router_job_t *job = three_job_sink(h, 2); /* rank 2: other ops */
	int c[2] = {0};

	(void)state;
	assert_int_equal(router_push(job, W, "x", 1, 0, h_cb_count, c, NULL),
			 0);
	assert_int_equal(js.calls, 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(h->fr[i].inlen, 1);
	h_free(h);
	h = h_new(NULL);
	job = three_job_sink(h, -1);
	router_stdin_flow(h->rk[1], true); /* a held target */
	assert_int_equal(router_push(job, W, "y", 1, 0, h_cb_count, c, NULL),
			 0);
	assert_int_equal(js.calls, 0);
	assert_int_equal(h->fr[0].inlen + h->fr[1].inlen + h->fr[2].inlen, 2);
	router_stdin_flow(h->rk[1], false);
	assert_int_equal(h->fr[1].inlen, 1);
	/* one running target left: a plain write */
	router_rank_exit(h->rk[0], ROUTER_STATE_EXITED, 0);
	router_rank_exit(h->rk[1], ROUTER_STATE_EXITED, 0);
	assert_int_equal(router_push(job, W, "z", 1, 0, h_cb_count, c, NULL),
			 0);
	assert_int_equal(js.calls, 0);
	assert_int_equal(h->fr[2].inlen, 2);
	h_loop(h);
	assert_int_equal(c[0], 3);
	h_free(h);
}

/* A rank restored from the spool waits for its forwarder (no ops, link
 * WAITING): stdin pushed meanwhile waits, an EOF too; the adopting source
 * gets it, in order, at its XON; a rank lost meanwhile fails it. */
static void waiting_rank_keeps_stdin_for_its_source(void **state)
{
	struct h *h = h_new(NULL);
	router_proc_t p;
	struct router_rank_info info = {.pid = 7, .host = "n", .job_size = 2};
	router_rank_t *rk[2];
	router_job_t *job;
	int c1[2] = {0}, c2[2] = {0}, c3[2] = {0};
	struct router_stats st;

	(void)state;
	for (uint32_t i = 0; i < 2; i++) {
		assert_int_equal(router_proc_set(&p, "wt", i), 0);
		assert_int_equal(router_rank_register(h->r, &p, &info, NULL,
						      NULL, &rk[i]),
				 0);
		router_rank_set_link(rk[i], ROUTER_LINK_WAITING, 0);
	}
	job = router_job_lookup(h->r, "wt");
	assert_int_equal(router_stdin_attach(job, 0), 0);
	assert_int_equal(router_push(job, 0, "abc", 3, 0, h_cb_count, c1, NULL),
			 0);
	assert_int_equal(router_push(job, 0, "de", 2, 0, h_cb_count, c2, NULL),
			 0);
	router_stdin_detach(job, 0); /* the writer closes: EOF queued too */
	assert_int_equal(router_push(job, 1, "x", 1, 0, h_cb_count, c3, NULL),
			 0);
	h_loop(h);
	assert_int_equal(c1[0] + c2[0] + c3[0], 0); /* held, not failed */
	assert_int_equal(router_rank_adopt_source(rk[0], &h_ops, &h->fr[0]),
			 ROUTER_SUCCESS);
	router_rank_set_link(rk[0], ROUTER_LINK_UP, 1);
	h_loop(h);
	assert_int_equal(h->fr[0].inlen, 0); /* not before its XON */
	assert_int_equal(c1[0], 0);
	router_stdin_flow(rk[0], false);
	assert_int_equal(h->fr[0].inlen, 5);
	assert_memory_equal(h->fr[0].in, "abcde", 5);
	assert_int_equal(h->fr[0].eof, 1);
	h_loop(h);
	assert_int_equal(c1[0], 1);
	assert_int_equal(c1[1], ROUTER_SUCCESS);
	assert_int_equal(c2[1], ROUTER_SUCCESS);
	router_rank_stats(rk[0], &st);
	assert_true(st.stdin_bytes == 5 && st.stdin_xoff == 1 &&
		    st.stdin_xon == 1);
	/* rank 1 is never resumed: lost, its stdin fails and is counted */
	router_rank_exit(rk[1], ROUTER_STATE_LOST, -1);
	h_loop(h);
	assert_int_equal(c3[0], 1);
	assert_int_equal(c3[1], ROUTER_ERR_PIPE);
	router_rank_stats(rk[1], &st);
	assert_true(st.stdin_discarded == 1);
	h_free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(push_reaches_sink_in_order),
	    cmocka_unit_test(sink_xoff_makes_push_wait),
	    cmocka_unit_test(xoff_from_inside_stdin_write),
	    cmocka_unit_test(broadcast_waits_for_slowest),
	    cmocka_unit_test(exit_fails_queued_push_and_releases),
	    cmocka_unit_test(cancel),
	    cmocka_unit_test(fifo_eof_rule),
	    cmocka_unit_test(push_complete_is_eof),
	    cmocka_unit_test(shutdown_cancels_pending_push),
	    cmocka_unit_test(pending_write_completes_later),
	    cmocka_unit_test(pending_broadcast_and_flush),
	    cmocka_unit_test(pending_exit_and_cancel),
	    cmocka_unit_test(cancel_mid_broadcast_keeps_a_copy),
	    cmocka_unit_test(job_sink_takes_a_broadcast_whole),
	    cmocka_unit_test(job_sink_falls_back_per_rank),
	    cmocka_unit_test(waiting_rank_keeps_stdin_for_its_source),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
