/* SPDX-License-Identifier: MIT */
/* XOFF/XON latches (PRRTE's XON/XOFF change): pairing under a slow reader, every teardown
 * path, the merged-view wildcard latch, reasons, memory budget. */
#include "harness.h"

#define OUT ROUTER_CH_STDOUT

static router_job_t *job_of(struct h *h, const char *ns)
{
	return router_job_lookup(h->r, ns);
}

static router_reader_t *open_rd(struct h *h, const char *ns, uint32_t rank,
				unsigned flags)
{
	router_reader_t *rd;

	assert_int_equal(router_reader_open(job_of(h, ns), rank, OUT, flags,
					    NULL, NULL, &rd),
			 0);
	return rd;
}

static void fill(struct h *h, const char *ns, uint32_t rank, size_t n)
{
	char *b = malloc(n);

	memset(b, 'a' + (int)rank, n);
	b[n - 1] = '\n';
	h_put(h, ns, rank, OUT, b, n, 0, 0, NULL);
	free(b);
}

/* Bytes a new reader can still get: the retained window. */
static size_t retained(struct h *h, const char *ns, uint32_t rank)
{
	router_reader_t *rd = open_rd(h, ns, rank, ROUTER_READER_NONBLOCK);
	static char buf[1 << 21];
	uint64_t off = 0;
	size_t n = h_drain(rd, &off, buf, sizeof(buf));

	router_reader_close(rd);
	return n;
}

static void slow_reader_pairs_exactly(void **state)
{
	struct router_config cfg = {.window = 4096, .low_water = 1024};
	struct h *h = h_new(&cfg);
	const size_t total = 1 << 20;
	unsigned char *in = malloc(total), *out = malloc(total);
	router_reader_t *rd;
	struct router_stats st;
	size_t sent = 0, got = 0, maxlag = 0;
	uint64_t off = 0;

	(void)state;
	for (size_t i = 0; i < total; i++)
		in[i] = (unsigned char)(i * 2654435761u >> 13);
	h_reg(h, "slow", 0, 1);
	rd = open_rd(h, "slow", 0, 0);
	for (int step = 0; got < total; step++) {
		/* The producer honours XOFF; 512 B per step when allowed. */
		if (!h->fr[0].held[OUT] && sent < total) {
			size_t n = total - sent < 512 ? total - sent : 512;

			h_put(h, "slow", 0, OUT, in + sent, n, 0, 0, NULL);
			sent += n;
		}
		if (sent - got > maxlag)
			maxlag = sent - got;
		/* The reader takes 256 B every third step. */
		if (step % 3 == 0) {
			struct iovec iov[2];
			int c;
			size_t n;

			if (router_reader_read(rd, off, 256, iov, &c, &n) ==
			    0) {
				for (int i = 0; i < c; i++) {
					memcpy(out + got, iov[i].iov_base,
					       iov[i].iov_len);
					got += iov[i].iov_len;
				}
				off += n;
			}
		}
		h_loop(h);
	}
	assert_memory_equal(in, out, total);
	router_rank_stats(h->rk[0], &st);
	/* The reader read everything: nothing was discarded unread. */
	assert_int_equal(st.dropped_bytes, 0);
	assert_true(retained(h, "slow", 0) >= 4096);
	assert_true(st.stdout_xoff >= 100); /* it really engaged */
	assert_int_equal(st.stdout_xoff, st.stdout_xon);
	assert_int_equal(st.stdout_xoff, h->fr[0].xoff[OUT]);
	assert_int_equal(st.stdout_xon, h->fr[0].xon[OUT]);
	assert_int_equal(h->fr[0].bad, 0);
	assert_true(maxlag <= 4096 + 512); /* window + one in-flight chunk */
	router_job_stats(job_of(h, "slow"), &st);
	assert_int_equal(st.stdout_xoff, h->fr[0].xoff[OUT]);
	router_reader_close(rd);
	free(in);
	free(out);
	h_free(h);
}

enum path { P_CLOSE, P_COMPLETE, P_EXIT, P_LOST, P_SHUTDOWN, P_DRAIN };

static void teardown_path(enum path path)
{
	struct router_config cfg = {.window = 4096, .low_water = 1024};
	struct h *h = h_new(&cfg);
	router_reader_t *rd;
	struct router_stats st;
	char buf[16384];
	uint64_t off = 0;

	h_reg(h, "td", 0, 1);
	rd = open_rd(h, "td", 0, 0);
	fill(h, "td", 0, 5000);
	assert_int_equal(h->fr[0].xoff[OUT], 1);
	fill(h, "td", 0, 5000); /* in flight: no second assert */
	assert_int_equal(h->fr[0].xoff[OUT], 1);
	assert_int_equal(h->fr[0].xon[OUT], 0);
	switch (path) {
	case P_CLOSE:
		router_reader_close(rd);
		rd = NULL;
		break;
	case P_COMPLETE:
		h_put(h, "td", 0, OUT, NULL, 0, ROUTER_DIR_COMPLETE,
		      ROUTER_DIR_COMPLETE, NULL);
		break;
	case P_EXIT:
		router_rank_exit(h->rk[0], ROUTER_STATE_EXITED, 0);
		break;
	case P_LOST:
		router_rank_exit(h->rk[0], ROUTER_STATE_LOST, 0);
		break;
	case P_SHUTDOWN:
		router_shutdown(h->r);
		break;
	case P_DRAIN:
		assert_int_equal(h_drain(rd, &off, buf, 8000), 8000);
		assert_int_equal(h->fr[0].xon[OUT], 0); /* lag 2000 > 1024 */
		assert_int_equal(h_drain(rd, &off, buf, 1000), 1000);
		break;
	}
	assert_int_equal(h->fr[0].xon[OUT], 1);
	assert_false(h->fr[0].held[OUT]);
	router_rank_stats(h->rk[0], &st);
	assert_int_equal(st.stdout_xoff, 1);
	assert_int_equal(st.stdout_xon, 1);
	assert_int_equal(st.dropped_bytes, 0);
	/* Every later path is idempotent: no extra XON, ever. */
	if (path != P_SHUTDOWN) {
		router_rank_exit(h->rk[0], ROUTER_STATE_EXITED, 0);
		if (rd) {
			/* The bytes are still there for the reader. */
			uint64_t left = 10000 - off;

			assert_int_equal(h_drain(rd, &off, buf, sizeof(buf)),
					 left);
			router_reader_close(rd);
			rd = NULL;
		}
		assert_int_equal(router_job_remove(h->r, job_of(h, "td")), 0);
	}
	router_reader_close(rd);
	router_free(h->r);
	h->r = NULL;
	assert_int_equal(h->fr[0].xoff[OUT], 1);
	assert_int_equal(h->fr[0].xon[OUT], 1);
	assert_int_equal(h->fr[0].bad, 0);
	event_base_free(h->base);
	iofs_log_free(h->lg);
	free(h);
}

static void release_on_reader_close(void **s)
{
	(void)s;
	teardown_path(P_CLOSE);
}
static void release_on_complete(void **s)
{
	(void)s;
	teardown_path(P_COMPLETE);
}
static void release_on_exit(void **s)
{
	(void)s;
	teardown_path(P_EXIT);
}
static void release_on_lost(void **s)
{
	(void)s;
	teardown_path(P_LOST);
}
static void release_on_shutdown(void **s)
{
	(void)s;
	teardown_path(P_SHUTDOWN);
}
static void release_on_drain_low_water(void **s)
{
	(void)s;
	teardown_path(P_DRAIN);
}

/* Job removed/replaced while a reader keeps the old job: no latch left
 * behind, the reader still reads the old bytes. */
static void release_on_replace(void **state)
{
	struct router_config cfg = {.window = 4096, .low_water = 1024};
	struct h *h = h_new(&cfg);
	router_reader_t *rd;
	router_job_t *old;
	char buf[16384];
	uint64_t off = 0;

	(void)state;
	h_reg(h, "rp", 0, 1);
	old = job_of(h, "rp");
	rd = open_rd(h, "rp", 0, 0);
	fill(h, "rp", 0, 6000);
	assert_int_equal(h->fr[0].xoff[OUT], 1);
	router_rank_exit(h->rk[0], ROUTER_STATE_EXITED, 0);
	assert_int_equal(h->fr[0].xon[OUT], 1);
	/* Same name again: the complete job is replaced. */
	memset(&h->fr[0], 0, sizeof(h->fr[0]));
	h_reg(h, "rp", 0, 1);
	assert_ptr_not_equal(job_of(h, "rp"), old);
	assert_true(router_job_removed(old));
	assert_int_equal(h_drain(rd, &off, buf, sizeof(buf)), 6000);
	assert_true(router_reader_eof(rd, off));
	router_reader_close(rd); /* frees the old job */
	assert_int_equal(h->fr[0].xoff[OUT], 0);
	assert_int_equal(h->fr[0].xon[OUT], 0);
	h_free(h);
}

static void merged_view_latch_is_wildcard(void **state)
{
	struct router_config cfg = {.window = 4096, .low_water = 1024};
	struct h *h = h_new(&cfg);
	router_reader_t *rd;
	struct router_stats st;
	char buf[65536];
	uint64_t off = 0;

	(void)state;
	h_reg(h, "mv", 0, 3);
	h_reg(h, "mv", 1, 3);
	assert_int_equal(router_reader_open(job_of(h, "mv"),
					    ROUTER_RANK_WILDCARD, OUT, 0, NULL,
					    NULL, &rd),
			 0);
	fill(h, "mv", 0, 5000); /* rank 0 alone floods the merged view */
	assert_int_equal(h->fr[0].xoff[OUT], 1);
	assert_int_equal(h->fr[1].xoff[OUT], 1); /* every rank of the job */
	/* A rank joining while the view lags starts suspended. */
	h_reg(h, "mv", 2, 3);
	assert_int_equal(h->fr[2].xoff[OUT], 1);
	/* Rank 1 exits: its latch released and counted. */
	router_rank_exit(h->rk[1], ROUTER_STATE_EXITED, 0);
	assert_int_equal(h->fr[1].xon[OUT], 1);
	/* Draining the view releases the others. */
	h_drain(rd, &off, buf, sizeof(buf));
	assert_int_equal(h->fr[0].xon[OUT], 1);
	assert_int_equal(h->fr[2].xon[OUT], 1);
	assert_int_equal(h->fr[1].xon[OUT], 1);
	router_job_stats(job_of(h, "mv"), &st);
	assert_int_equal(st.stdout_xoff, 3);
	assert_int_equal(st.stdout_xon, 3);
	assert_int_equal(h->fr[0].bad + h->fr[1].bad + h->fr[2].bad, 0);
	router_reader_close(rd);
	h_free(h);
}

/* Own lag and merged lag on one latch: one XOFF, one XON. */
static void reasons_share_one_latch(void **state)
{
	struct router_config cfg = {.window = 4096, .low_water = 1024};
	struct h *h = h_new(&cfg);
	router_reader_t *own, *mv;
	char buf[65536];
	uint64_t oo = 0, om = 0;

	(void)state;
	h_reg(h, "rs", 0, 1);
	own = open_rd(h, "rs", 0, 0);
	mv = open_rd(h, "rs", ROUTER_RANK_WILDCARD, 0);
	fill(h, "rs", 0, 5000);
	assert_int_equal(h->fr[0].xoff[OUT], 1);
	h_drain(own, &oo, buf, sizeof(buf));
	assert_int_equal(h->fr[0].xon[OUT], 0); /* merged still lags */
	h_drain(mv, &om, buf, sizeof(buf));
	assert_int_equal(h->fr[0].xon[OUT], 1);
	fill(h, "rs", 0, 5000);
	assert_int_equal(h->fr[0].xoff[OUT], 2);
	router_reader_close(mv);
	assert_int_equal(h->fr[0].xon[OUT], 1);
	router_reader_close(own);
	assert_int_equal(h->fr[0].xon[OUT], 2);
	assert_int_equal(h->fr[0].bad, 0);
	h_free(h);
}

static void nonblock_reader_never_holds(void **state)
{
	struct router_config cfg = {.window = 4096};
	struct h *h = h_new(&cfg);
	router_reader_t *rd;
	struct router_stats st;
	char buf[8192];
	uint64_t off = 0;

	(void)state;
	h_reg(h, "nbk", 0, 1);
	rd = open_rd(h, "nbk", 0, ROUTER_READER_NONBLOCK);
	for (int i = 0; i < 10; i++)
		fill(h, "nbk", 0, 1000);
	assert_int_equal(h->fr[0].xoff[OUT], 0);
	router_rank_stats(h->rk[0], &st);
	assert_int_equal(st.dropped_bytes, 10000 - 4096);
	assert_int_equal(h_drain(rd, &off, buf, sizeof(buf)), 4096);
	router_reader_close(rd);
	h_free(h);
}

static void memory_budget_suspends(void **state)
{
	struct router_config cfg = {.budget = 65536};
	struct h *h = h_new(&cfg);
	router_reader_t *rd;
	struct router_stats st;
	char *big = malloc(200000), *out = malloc(200000);
	uint64_t off = 0;

	(void)state;
	for (int i = 0; i < 200000; i++)
		big[i] = (char)(i % 251);
	h_reg(h, "mem", 0, 1);
	rd = open_rd(h, "mem", 0, 0);
	for (int i = 0; i < 50; i++)
		h_put(h, "mem", 0, OUT, big + i * 4000, 4000, 0, 0, NULL);
	/* The window (1 MiB) is not reached, the budget is. */
	assert_int_equal(h->fr[0].xoff[OUT], 1);
	assert_int_equal(h_drain(rd, &off, out, 200000), 200000);
	assert_memory_equal(big, out, 200000);
	assert_int_equal(h->fr[0].xon[OUT], 1);
	router_rank_stats(h->rk[0], &st);
	assert_int_equal(st.dropped_bytes, 0);
	/* Over budget, retention yields: the read bytes are gone. */
	assert_int_equal(retained(h, "mem", 0), 0);
	assert_int_equal(st.stdout_xoff, 1);
	assert_int_equal(st.stdout_xon, 1);
	router_reader_close(rd);
	free(big);
	free(out);
	h_free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(slow_reader_pairs_exactly),
	    cmocka_unit_test(release_on_reader_close),
	    cmocka_unit_test(release_on_complete),
	    cmocka_unit_test(release_on_exit),
	    cmocka_unit_test(release_on_lost),
	    cmocka_unit_test(release_on_shutdown),
	    cmocka_unit_test(release_on_drain_low_water),
	    cmocka_unit_test(release_on_replace),
	    cmocka_unit_test(merged_view_latch_is_wildcard),
	    cmocka_unit_test(reasons_share_one_latch),
	    cmocka_unit_test(nonblock_reader_never_holds),
	    cmocka_unit_test(memory_budget_suspends),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
