/* SPDX-License-Identifier: MIT */
/* Per-rank streams: binary data, readers, replay, retention, discard, skew. */
#include "harness.h"

static void binary_intact(void **state)
{
	struct h *h = h_new(NULL);
	router_reader_t *rd;
	char in[3000], out[4000];
	uint64_t off = 0;
	int cnt[2] = {0};

	(void)state;
	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (char)(i % 7 == 0 ? 0 : i * 31);
	h_reg(h, "bin", 0, 1);
	assert_int_equal(router_reader_open(router_job_lookup(h->r, "bin"), 0,
					    ROUTER_CH_STDOUT, 0, NULL, NULL,
					    &rd),
			 0);
	for (size_t o = 0; o < sizeof(in); o += 700)
		assert_int_equal(
		    h_put(h, "bin", 0, ROUTER_CH_STDOUT, in + o,
			  o + 700 > sizeof(in) ? sizeof(in) - o : 700, 0, 0,
			  cnt),
		    ROUTER_SUCCESS);
	assert_int_equal(cnt[0], 0); /* never inside the call */
	h_loop(h);
	assert_int_equal(cnt[0], 5);
	assert_int_equal(cnt[1], ROUTER_SUCCESS);
	assert_int_equal(h_drain(rd, &off, out, sizeof(out)), sizeof(in));
	assert_memory_equal(in, out, sizeof(in));
	router_reader_close(rd);
	h_free(h);
}

static void readers_independent(void **state)
{
	struct h *h = h_new(NULL);
	router_job_t *job;
	router_reader_t *a, *b;
	char buf[64];
	uint64_t oa = 0, ob = 0;
	int ra = 0, rb = 0;
	struct iovec iov[2];
	int c;
	size_t n;

	(void)state;
	h_reg(h, "j", 0, 1);
	job = router_job_lookup(h->r, "j");
	assert_int_equal(router_reader_open(job, 0, ROUTER_CH_STDOUT, 0,
					    h_ready_count, &ra, &a),
			 0);
	assert_int_equal(router_reader_open(job, 0, ROUTER_CH_STDOUT, 0,
					    h_ready_count, &rb, &b),
			 0);
	assert_int_equal(router_reader_read(a, 0, 10, iov, &c, &n),
			 ROUTER_AGAIN);
	h_puts(h, "j", 0, "hello ");
	h_puts(h, "j", 0, "world\n");
	assert_int_equal(ra, 0); /* deferred, not inside deliver */
	h_loop(h);
	assert_int_equal(ra, 1); /* coalesced */
	assert_int_equal(rb, 1);
	assert_int_equal(router_reader_avail(a, 0), 12);
	assert_int_equal(router_reader_read(a, oa, 5, iov, &c, &n), 0);
	assert_int_equal(n, 5);
	assert_memory_equal(iov[0].iov_base, "hello", 5);
	oa += n;
	assert_int_equal(h_drain(b, &ob, buf, sizeof(buf)), 12);
	assert_int_equal(h_drain(a, &oa, buf, sizeof(buf)), 7);
	assert_memory_equal(buf, " world\n", 7);
	assert_false(router_reader_eof(a, oa));
	router_rank_exit(h->rk[0], ROUTER_STATE_EXITED, 0);
	assert_true(router_reader_eof(a, oa));
	assert_int_equal(router_reader_read(a, oa, 5, iov, &c, &n), 0);
	assert_int_equal(n, 0);
	h_loop(h);
	assert_int_equal(ra, 2);
	router_reader_close(a);
	router_reader_close(b);
	h_free(h);
}

static void late_reader_replay_and_skew(void **state)
{
	struct router_config cfg = {.window = 8192};
	struct h *h = h_new(&cfg);
	router_job_t *job;
	router_reader_t *rd, *nb;
	struct router_stats st;
	char line[100], buf[20000];
	uint64_t off = 0, noff = 0;
	size_t got;

	(void)state;
	h_reg(h, "late", 0, 1);
	job = router_job_lookup(h->r, "late");
	/* A NONBLOCK reader that never reads. */
	assert_int_equal(router_reader_open(job, 0, ROUTER_CH_STDOUT,
					    ROUTER_READER_NONBLOCK, NULL, NULL,
					    &nb),
			 0);
	/* 20000 bytes of numbered 10-byte records into an 8 KiB window. */
	for (int i = 0; i < 2000; i++) {
		snprintf(line, sizeof(line), "%09d\n", i);
		h_puts(h, "late", 0, line);
	}
	router_rank_stats(h->rk[0], &st);
	assert_int_equal(st.stdout_bytes, 20000);
	assert_int_equal(st.dropped_bytes, 20000 - 8192);
	assert_int_equal(st.stdout_xoff, 0); /* no blocking reader */
	router_job_stats(job, &st);
	assert_int_equal(st.dropped_bytes, 20000 - 8192); /* sum of ranks */
	assert_true(st.merged_dropped_bytes > 0); /* the unread merged view */
	/* A late reader starts at the oldest retained byte. */
	assert_int_equal(
	    router_reader_open(job, 0, ROUTER_CH_STDOUT, 0, NULL, NULL, &rd),
	    0);
	got = h_drain(rd, &off, buf, sizeof(buf));
	assert_int_equal(got, 8192);
	assert_memory_equal(buf + 8192 - 10, "000001999\n", 10);
	assert_memory_equal(buf + 2, "000001181\n", 10); /* from 11808 */
	/* Its file offsets keep the skew: 8192 more is the live end. */
	assert_int_equal(off, 8192);
	assert_int_equal(router_reader_avail(rd, off), 0);
	h_puts(h, "late", 0, "000002000\n");
	got = h_drain(rd, &off, buf, sizeof(buf));
	assert_int_equal(got, 10);
	assert_memory_equal(buf, "000002000\n", 10);
	/* The NONBLOCK reader asked for offset 0: moved to the oldest byte,
	 * later offsets consistent, no repeats. */
	got = h_drain(nb, &noff, buf, 100);
	assert_int_equal(got, 100);
	assert_memory_equal(buf, "1\n000001182\n", 12); /* from 11818 */
	got = h_drain(nb, &noff, buf, sizeof(buf));
	assert_int_equal(got, 8192 - 100 + 0); /* window kept 8192 */
	assert_memory_equal(buf + got - 10, "000002000\n", 10);
	router_reader_close(rd);
	router_reader_close(nb);
	h_free(h);
}

/* Job @ns: one rank printing 2000 numbered lines (20000 bytes, copied to
 * @want if not NULL), exited. */
static void numbered_job(struct h *h, const char *ns, char *want)
{
	char line[16];

	h_reg(h, ns, 0, 1);
	for (int i = 0; i < 2000; i++) {
		snprintf(line, sizeof(line), "%09d\n", i);
		if (want)
			memcpy(want + i * 10, line, 10);
		h_puts(h, ns, 0, line);
	}
	router_rank_exit(h->rk[0], ROUTER_STATE_EXITED, 0);
}

/* A new reader of rank 0's stdout of job @ns. */
static router_reader_t *open_rank0(struct h *h, const char *ns)
{
	router_reader_t *rd = NULL;

	assert_int_equal(router_reader_open(router_job_lookup(h->r, ns), 0,
					    ROUTER_CH_STDOUT, 0, NULL, NULL,
					    &rd),
			 0);
	return rd;
}

/* A reader the skew moved past a discarded start and that then seeks
 * (less's G after it read the first page, dd skip=, Python's seek) reads
 * the bytes at the absolute offset it asked for: the end of the file is
 * where st_size says.  Before, the skew stayed and a read near st_size
 * went past the end: `less +G` of such a file showed an empty screen
 * (seen by hand on a merged view a job cap had cut).  Reading on from
 * where a read ended keeps the skew, and a seek back into the discarded
 * start is moved again, to the same bytes. */
static void seek_after_skew_is_absolute(void **state)
{
	struct router_config cfg = {.window = 8192};
	struct h *h = h_new(&cfg);
	router_reader_t *rd;
	char buf[20000];
	uint64_t off = 0;
	struct iovec iov[2];
	size_t n, got;
	int cnt;

	(void)state;
	numbered_job(h, "sk", NULL); /* the last 8192 bytes kept */
	rd = open_rank0(h, "sk");
	/* the first page, from 0: moved to the oldest kept byte (11808) */
	assert_int_equal(router_reader_read(rd, 0, 100, iov, &cnt, &n), 0);
	assert_int_equal(n, 100);
	assert_memory_equal((char *)iov[0].iov_base + 2, "000001181\n", 10);
	/* on from there: the skew holds (file 100 is stream 11908) */
	assert_int_equal(router_reader_read(rd, 100, 10, iov, &cnt, &n), 0);
	assert_memory_equal(iov[0].iov_base, "0\n00000119", 10);
	/* a seek to the last line: stream offset 19990, exactly */
	assert_int_equal(router_reader_read(rd, 19990, 100, iov, &cnt, &n), 0);
	assert_int_equal(n, 10);
	assert_memory_equal(iov[0].iov_base, "000001999\n", 10);
	assert_true(router_reader_eof(rd, 20000));
	assert_int_equal(router_reader_avail(rd, 19000), 1000);
	/* back to 0 (less's g, a re-read from the top): the same first page */
	off = 0;
	got = h_drain(rd, &off, buf, sizeof(buf));
	assert_int_equal(got, 8192);
	assert_memory_equal(buf + 2, "000001181\n", 10);
	assert_memory_equal(buf + got - 10, "000001999\n", 10);
	router_reader_close(rd);
	h_free(h);
}

/* tac, tail -n N: blocks read from the end back to 0, each at a seek's
 * offset.  Every kept byte comes once, where st_size puts it; what was
 * discarded reads as zeros (before, each block in the discarded part
 * returned the kept bytes again: tac printed 384,323 lines of 65,811). */
static void backward_reader_sees_hole(void **state)
{
	struct router_config cfg = {.window = 8192};
	struct h *h = h_new(&cfg);
	router_reader_t *rd;
	char want[20000], buf[20000];
	struct iovec iov[2];
	size_t n, zeros = 0;
	int cnt;

	(void)state;
	numbered_job(h, "bk", want);
	rd = open_rank0(h, "bk");
	for (uint64_t pos = 20000; pos > 0;) { /* tac's order: 3000-byte blocks */
		uint64_t at = pos > 3000 ? pos - 3000 : 0;
		size_t len = (size_t)(pos - at);

		assert_int_equal(router_reader_read(rd, at, len, iov, &cnt, &n), 0);
		assert_int_equal(n, len);
		for (int i = 0, k = 0; i < cnt; k += (int)iov[i].iov_len, i++)
			memcpy(buf + at + k, iov[i].iov_base, iov[i].iov_len);
		pos = at;
	}
	while (zeros < sizeof(buf) && buf[zeros] == 0)
		zeros++;
	assert_int_equal(zeros, 20000 - 8192);
	assert_memory_equal(buf + zeros, want + zeros, 8192);
	/* a seek into the hole and on: zeros to its end, then the kept bytes */
	assert_int_equal(router_reader_read(rd, 11000, 1000, iov, &cnt, &n), 0);
	assert_int_equal(n, 1000);
	assert_int_equal(((char *)iov[0].iov_base)[807], 0);
	assert_memory_equal((char *)iov[0].iov_base + 808, want + 11808, 192);
	assert_int_equal(router_reader_avail(rd, 12000), 8000);
	assert_int_equal(router_reader_read(rd, 12000, 100, iov, &cnt, &n), 0);
	assert_memory_equal(iov[0].iov_base, want + 12000, 100);
	/* a step back from there (less scrolling up): zeros again */
	assert_int_equal(router_reader_read(rd, 11700, 300, iov, &cnt, &n), 0);
	assert_int_equal(n, 300);
	assert_int_equal(((char *)iov[0].iov_base)[0], 0);
	assert_int_equal(((char *)iov[0].iov_base)[107], 0);
	assert_memory_equal((char *)iov[0].iov_base + 108, want + 11808, 192);
	/* its first read was not at 0: a seek to 0 reads zeros too (tail -f,
	 * then a seek back: one file, holes and all) */
	assert_int_equal(router_reader_read(rd, 0, 100, iov, &cnt, &n), 0);
	assert_int_equal(n, 100);
	assert_int_equal(((char *)iov[0].iov_base)[0], 0);
	assert_int_equal(((char *)iov[0].iov_base)[99], 0);
	router_reader_close(rd);
	/* a reader whose first read is at 0 (less): a seek back to 0 that is
	 * no step back (less's g after G) skews as the first read did */
	rd = open_rank0(h, "bk");
	for (int i = 0; i < 2; i++) {
		assert_int_equal(router_reader_read(rd, 0, 100, iov, &cnt, &n), 0);
		assert_memory_equal(iov[0].iov_base, want + 11808, 100);
		assert_int_equal(router_reader_read(rd, 19900, 100, iov, &cnt, &n), 0);
		assert_memory_equal(iov[0].iov_base, want + 19900, 100);
	}
	assert_int_equal(router_reader_read(rd, 0, 100, iov, &cnt, &n), 0);
	assert_int_equal(router_reader_read(rd, 0, 100, iov, &cnt, &n), 0);
	assert_memory_equal(iov[0].iov_base, want + 11808, 100);
	assert_int_equal(router_reader_read(rd, 100, 100, iov, &cnt, &n), 0);
	assert_memory_equal(iov[0].iov_base, want + 11908, 100);
	/* a seek elsewhere into the hole (dd skip=, seek(5000)): zeros; and
	 * a step back from there to 0 (less scrolling up to the top) too */
	assert_int_equal(router_reader_read(rd, 5000, 100, iov, &cnt, &n), 0);
	assert_int_equal(n, 100);
	assert_int_equal(((char *)iov[0].iov_base)[99], 0);
	assert_int_equal(router_reader_read(rd, 0, 5000, iov, &cnt, &n), 0);
	assert_int_equal(n, 5000);
	assert_int_equal(((char *)iov[0].iov_base)[0], 0);
	assert_int_equal(((char *)iov[0].iov_base)[4999], 0);
	router_reader_close(rd);
	h_free(h);
}

static void nothing_dropped_for_blocking_reader(void **state)
{
	struct router_config cfg = {.window = 4096, .low_water = 1024};
	struct h *h = h_new(&cfg);
	router_reader_t *rd;
	router_job_t *job;
	struct router_stats st;
	char *big = malloc(100000), *out = malloc(100000);
	uint64_t off = 0;

	(void)state;
	for (int i = 0; i < 100000; i++)
		big[i] = (char)(i * 13 + 7);
	h_reg(h, "nd", 0, 1);
	job = router_job_lookup(h->r, "nd");
	assert_int_equal(
	    router_reader_open(job, 0, ROUTER_CH_STDOUT, 0, NULL, NULL, &rd),
	    0);
	/* The producer ignores XOFF (in flight): everything is retained. */
	h_put(h, "nd", 0, ROUTER_CH_STDOUT, big, 100000, 0, 0, NULL);
	assert_int_equal(h->fr[0].xoff[ROUTER_CH_STDOUT], 1);
	assert_int_equal(h_drain(rd, &off, out, 100000), 100000);
	assert_memory_equal(big, out, 100000);
	router_rank_stats(h->rk[0], &st);
	assert_int_equal(st.dropped_bytes, 0);
	assert_int_equal(st.stdout_xoff, 1);
	assert_int_equal(st.stdout_xon, 1);
	router_reader_close(rd);
	free(big);
	free(out);
	h_free(h);
}

static void many_readers(void **state)
{
	struct h *h = h_new(NULL);
	enum { NRD = 32, TOTAL = 20000 };
	router_reader_t *rd[NRD];
	uint64_t off[NRD] = {0};
	char *in = malloc(TOTAL), *out[NRD];
	router_job_t *job;
	size_t sent = 0, got[NRD] = {0};

	(void)state;
	for (int i = 0; i < TOTAL; i++)
		in[i] = (char)(i * 7 + i / 256);
	h_reg(h, "many", 0, 1);
	job = router_job_lookup(h->r, "many");
	for (int i = 0; i < NRD; i++) {
		out[i] = malloc(TOTAL);
		assert_int_equal(
		    router_reader_open(job, 0, ROUTER_CH_STDOUT,
				       i % 2 ? ROUTER_READER_NONBLOCK : 0, NULL,
				       NULL, &rd[i]),
		    0);
	}
	/* Each reader takes a different size per round. */
	for (;;) {
		if (sent < TOTAL) {
			h_put(h, "many", 0, ROUTER_CH_STDOUT, in + sent, 1000,
			      0, 0, NULL);
			sent += 1000;
		}
		for (int i = 0; i < NRD; i++) {
			struct iovec iov[2];
			int c;
			size_t n;

			if (router_reader_read(rd[i], off[i], 37 + i * 50, iov,
					       &c, &n) != ROUTER_SUCCESS)
				continue;
			for (int k = 0; k < c; k++) {
				memcpy(out[i] + got[i], iov[k].iov_base,
				       iov[k].iov_len);
				got[i] += iov[k].iov_len;
			}
			off[i] += n;
		}
		if (sent == TOTAL) {
			bool all = true;

			for (int i = 0; i < NRD; i++)
				all = all && got[i] == TOTAL;
			if (all)
				break;
		}
	}
	for (int i = 0; i < NRD; i++) {
		assert_int_equal(got[i], TOTAL);
		assert_memory_equal(in, out[i], TOTAL);
		router_reader_close(rd[i]);
		free(out[i]);
	}
	{
		struct iovec iov[2];
		int c;
		size_t n;
		router_reader_t *x;

		assert_int_equal(router_reader_open(job, 0, ROUTER_CH_STDOUT, 0,
						    NULL, NULL, &x),
				 0);
		assert_int_equal(router_reader_read(x, 0, 0, iov, &c, &n),
				 ROUTER_ERR_BAD_PARAM);
		router_reader_close(x);
	}
	free(in);
	h_free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(binary_intact),
	    cmocka_unit_test(readers_independent),
	    cmocka_unit_test(late_reader_replay_and_skew),
	    cmocka_unit_test(seek_after_skew_is_absolute),
	    cmocka_unit_test(backward_reader_sees_hole),
	    cmocka_unit_test(nothing_dropped_for_blocking_reader),
	    cmocka_unit_test(many_readers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
