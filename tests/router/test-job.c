/* SPDX-License-Identifier: MIT */
/* Jobs and ranks: lifecycle, replace-on-reuse, remove, stats, iteration,
 * names, memory per idle rank. */
#include <malloc.h>
#include <time.h>

#include "harness.h"

#if defined(__SANITIZE_ADDRESS__)
/* From the sanitizer runtime (its header is not always installed). */
size_t __sanitizer_get_current_allocated_bytes(void);
static size_t heap_used(void)
{
	return __sanitizer_get_current_allocated_bytes();
}
#else
static size_t heap_used(void)
{
	return mallinfo2().uordblks;
}
#endif

static void names(void **state)
{
	router_proc_t p;
	char long_ns[300];

	(void)state;
	assert_true(router_nspace_valid("job.1", 5));
	assert_false(router_nspace_valid("", 0));
	assert_false(router_nspace_valid(".", 1));
	assert_false(router_nspace_valid("..", 2));
	assert_true(router_nspace_valid("...", 3));
	assert_false(router_nspace_valid("a/b", 3));
	assert_false(router_nspace_valid("a\0b", 3));
	/* control bytes would break info's "key: value" lines and the
	 * merged views' tags; spaces, UTF-8 and punctuation are fine */
	assert_false(router_nspace_valid("a\nb", 3));
	assert_false(router_nspace_valid("a\rb", 3));
	assert_false(router_nspace_valid("\tab", 3));
	assert_false(router_nspace_valid("a\x7f", 2));
	assert_false(router_nspace_valid("\x1b[1m", 4));
	assert_true(router_nspace_valid("my job", 6));
	assert_true(router_nspace_valid("j\303\266b", 4));
	assert_true(router_nspace_valid("q\"<&]", 5));
	assert_int_equal(router_proc_set(&p, "a\nb", 0), ROUTER_ERR_BAD_PARAM);
	memset(long_ns, 'x', sizeof(long_ns));
	assert_true(router_nspace_valid(long_ns, 255));
	assert_false(router_nspace_valid(long_ns, 256));
	long_ns[299] = 0;
	assert_int_equal(router_proc_set(&p, long_ns, 0), ROUTER_ERR_BAD_PARAM);
	assert_int_equal(router_proc_set(&p, "ok", 5), 0);
	assert_string_equal(p.nspace, "ok");
	assert_int_equal(p.rank, 5);
	for (int c = -20; c <= 12; c++)
		assert_non_null(router_strerror(c));
	assert_string_equal(router_strerror(-ENOMEM),
			    "Cannot allocate memory");
	assert_string_equal(router_strerror(99), "unknown router status");
	assert_string_equal(router_state_name(ROUTER_STATE_LOST), "lost");
	{
		router_directives_t d = {ROUTER_DIR_XML_OUTPUT |
					     ROUTER_DIR_LOCAL_OUTPUT,
					 ROUTER_DIR_XML_OUTPUT};

		assert_true(router_dir_on(&d, ROUTER_DIR_XML_OUTPUT));
		assert_false(router_dir_on(&d, ROUTER_DIR_OUTPUT_RAW));
		assert_false(router_dir_local_output(&d));
		assert_true(router_dir_local_output(NULL));
		assert_false(router_dir_on(NULL, ROUTER_DIR_COMPLETE));
	}
}

static void lifecycle_and_stats(void **state)
{
	struct h *h = h_new(NULL);
	router_job_t *job;
	router_proc_t p;
	router_rank_t *dup;
	struct router_stats st;

	(void)state;
	h_reg(h, "life", 5, 3);
	h_reg(h, "life", 1, 3);
	job = router_job_lookup(h->r, "life");
	assert_string_equal(router_job_nspace(job), "life");
	router_proc_set(&p, "life", 5);
	assert_int_equal(router_rank_register(h->r, &p, NULL, NULL, NULL, &dup),
			 ROUTER_ERR_EXISTS);
	assert_int_equal(router_rank_register(NULL, &p, NULL, NULL, NULL, &dup),
			 ROUTER_ERR_INIT);
	p.rank = ROUTER_RANK_WILDCARD;
	assert_int_equal(router_rank_register(h->r, &p, NULL, NULL, NULL, &dup),
			 ROUTER_ERR_BAD_PARAM);
	/* Sparse ranks, ascending. */
	h_reg(h, "life", 3, 3);
	assert_int_equal(router_job_rank_count(job), 3);
	assert_int_equal(router_rank_id(router_job_rank_at(job, 0)), 1);
	assert_int_equal(router_rank_id(router_job_rank_at(job, 1)), 3);
	assert_int_equal(router_rank_id(router_job_rank_at(job, 2)), 5);
	assert_null(router_job_rank_at(job, 3));
	assert_null(router_job_rank(job, 4));
	assert_ptr_equal(router_rank_job(h->rk[5]), job);
	h_puts(h, "life", 1, "0123456789");
	router_rank_stats(h->rk[1], &st);
	assert_int_equal(st.state, ROUTER_STATE_RUNNING);
	assert_int_equal(st.pid, 101);
	assert_string_equal(st.host, "node1");
	assert_int_equal(st.uid, 1);
	assert_int_equal(st.gid, 2);
	uint32_t ouid = 0, ogid = 0;
	router_job_owner(job, &ouid, &ogid); /* O(1) form, for getattr */
	assert_int_equal(ouid, 1);
	assert_int_equal(ogid, 2);
	assert_int_equal(st.stdout_bytes, 10);
	assert_int_equal(st.job_size, 3);
	assert_int_equal(router_job_remove(h->r, job), ROUTER_ERR_BUSY);
	router_rank_exit(h->rk[1], ROUTER_STATE_EXITED, 0);
	router_rank_exit(h->rk[3], ROUTER_STATE_EXITED, 128 + 9);
	router_job_stats(job, &st);
	assert_int_equal(st.state, ROUTER_STATE_RUNNING);
	assert_int_equal(st.ranks, 3);
	assert_int_equal(st.pid, -1);
	router_rank_exit(h->rk[5], ROUTER_STATE_EXITED, 3);
	router_rank_exit(h->rk[5], ROUTER_STATE_LOST, 7); /* idempotent */
	router_job_stats(job, &st);
	assert_int_equal(st.state, ROUTER_STATE_EXITED);
	assert_int_equal(st.exit_status, 128 + 9); /* the first non-zero */
	router_rank_stats(h->rk[5], &st);
	assert_int_equal(st.state, ROUTER_STATE_EXITED);
	assert_int_equal(st.exit_status, 3);
	/* Completed jobs stay readable until removed. */
	{
		router_reader_t *rd;
		char buf[32];
		uint64_t off = 0;

		assert_int_equal(router_reader_open(job, 1, ROUTER_CH_STDOUT, 0,
						    NULL, NULL, &rd),
				 0);
		assert_int_equal(router_job_remove(h->r, job), 0);
		assert_true(router_job_removed(job));
		assert_null(router_job_lookup(h->r, "life"));
		assert_int_equal(router_job_remove(h->r, job),
				 ROUTER_ERR_NOT_FOUND);
		assert_int_equal(h_drain(rd, &off, buf, sizeof(buf)), 10);
		router_reader_close(rd);
	}
	h_free(h);
}

/* Wall clock times: a rank's start and end, the job's first start and,
 * once complete, its last end; a restart's history replaces them (and
 * raises stdin_bytes, never lowers it). */
static void times_and_history(void **state)
{
	struct h *h = h_new(NULL);
	router_job_t *job;
	struct router_stats st;
	int64_t t0 = (int64_t)time(NULL);

	(void)state;
	h_reg(h, "t", 0, 2);
	h_reg(h, "t", 1, 2);
	job = router_job_lookup(h->r, "t");
	router_rank_stats(h->rk[0], &st);
	assert_true(st.started >= t0 && st.started <= (int64_t)time(NULL));
	assert_int_equal(st.ended, 0);
	router_rank_restore_history(h->rk[0], 0, 1000, 2000);
	router_rank_stats(h->rk[0], &st);
	assert_int_equal(st.started, 1000);
	assert_int_equal(st.ended, 0); /* still running: no end */
	router_rank_exit(h->rk[0], ROUTER_STATE_EXITED, 0);
	router_rank_restore_history(h->rk[0], 7, 0, 3000);
	router_rank_stats(h->rk[0], &st);
	assert_int_equal(st.started, 1000); /* 0: kept */
	assert_int_equal(st.ended, 3000);
	assert_int_equal(st.stdin_bytes, 7);
	router_rank_restore_history(h->rk[0], 5, 0, 0);
	router_rank_stats(h->rk[0], &st);
	assert_int_equal(st.stdin_bytes, 7); /* never falls */
	router_job_stats(job, &st);
	assert_int_equal(st.started, 1000); /* the first rank's */
	assert_int_equal(st.ended, 0);	     /* rank 1 runs */
	router_rank_exit(h->rk[1], ROUTER_STATE_EXITED, 0);
	router_job_stats(job, &st);
	assert_true(st.ended >= t0 && st.ended <= (int64_t)time(NULL));
	router_rank_restore_history(h->rk[1], 0, 0, 2500);
	router_job_stats(job, &st);
	assert_int_equal(st.ended, 3000); /* the last rank's */
	router_rank_restore_history(NULL, 1, 1, 1); /* NULL-safe */
	h_free(h);
}

/* A job's owner is fixed at creation: another uid neither joins it nor
 * replaces it once ended (root included); each try is counted and logged.
 * A reader that has not read everything makes an ended job "in use". */
/* A producer's notes: kept once each, bounded, no control bytes. */
static void job_notes(void **state)
{
	struct h *h = h_new(NULL);
	router_job_t *job;
	char text[32];

	(void)state;
	h_reg(h, "nt", 0, 1);
	job = router_job_lookup(h->r, "nt");
	assert_null(router_job_note_at(job, 0));
	assert_int_equal(router_job_note(job, "no per-rank exit codes"), 0);
	assert_int_equal(router_job_note(job, "no per-rank exit codes"), 0);
	assert_int_equal(router_job_note(job, "bad\nexit_status: 0"),
			 ROUTER_ERR_BAD_PARAM);
	assert_string_equal(router_job_note_at(job, 0),
			    "no per-rank exit codes");
	assert_null(router_job_note_at(job, 1));
	for (int i = 1; i < ROUTER_NOTES_MAX; i++) {
		snprintf(text, sizeof(text), "note %d", i);
		assert_int_equal(router_job_note(job, text), 0);
	}
	assert_int_equal(router_job_note(job, "one too many"),
			 ROUTER_ERR_BAD_PARAM);
	assert_string_equal(router_job_note_at(job, ROUTER_NOTES_MAX - 1),
			    "note 7");
	h_free(h);
}

static void owner_is_fixed(void **state)
{
	struct h *h = h_new(NULL);
	struct router_rank_info other = {.pid = 1, .uid = 0, .gid = 0};
	struct router_rank_info bad = {.pid = 1, .host = "h\nuid: 0", .uid = 1};
	router_reader_t *rd;
	struct router_stats st;
	router_rank_t *rk;
	router_proc_t p;
	router_job_t *job;
	uint64_t off = 0;
	char buf[16];

	(void)state;
	h_reg(h, "own", 0, 2); /* uid 1 */
	job = router_job_lookup(h->r, "own");
	assert_int_equal(router_proc_set(&p, "own", 1), 0);
	assert_int_equal(
	    router_rank_register(h->r, &p, &other, &h_ops, &h->fr[1], &rk),
	    ROUTER_ERR_OWNER);
	assert_non_null(
	    strstr(h->log, "uid 0 may not join job 'own' of uid 1"));
	assert_int_equal(
	    router_rank_register(h->r, &p, &bad, &h_ops, &h->fr[1], &rk),
	    ROUTER_ERR_BAD_PARAM); /* control byte in the host */
	h_reg(h, "own", 1, 2);	   /* the owner may */
	h_puts(h, "own", 0, "x\n");
	router_rank_exit(h->rk[0], ROUTER_STATE_EXITED, 0);
	router_rank_exit(h->rk[1], ROUTER_STATE_EXITED, 0);
	assert_true(router_job_complete(job));
	/* ended: still not another uid's to replace */
	assert_int_equal(
	    router_rank_register(h->r, &p, &other, &h_ops, &h->fr[1], &rk),
	    ROUTER_ERR_OWNER);
	assert_ptr_equal(router_job_lookup(h->r, "own"), job);
	router_job_stats(job, &st);
	assert_int_equal(st.owner_refused, 2);
	assert_int_equal(st.uid, 1);
	/* in use while a reader has bytes left, not once it read them all */
	assert_false(router_job_in_use(job));
	assert_int_equal(
	    router_reader_open(job, 0, ROUTER_CH_STDOUT, 0, NULL, NULL, &rd),
	    0);
	assert_true(router_job_in_use(job));
	assert_int_equal(h_drain(rd, &off, buf, sizeof(buf)), 2);
	assert_false(router_job_in_use(job));
	router_reader_close(rd);
	h_free(h);
}

static void job_size_holds_completion(void **state)
{
	struct h *h = h_new(NULL);
	router_job_t *job;
	struct router_stats st;

	(void)state;
	h_reg(h, "js", 0, 2);
	job = router_job_lookup(h->r, "js");
	router_rank_exit(h->rk[0], ROUTER_STATE_LOST, 0);
	router_job_stats(job, &st);
	assert_int_equal(st.state, ROUTER_STATE_RUNNING); /* 1 of 2 known */
	h_reg(h, "js", 1, 2);
	assert_ptr_equal(router_job_lookup(h->r, "js"), job); /* not replaced */
	router_rank_exit(h->rk[1], ROUTER_STATE_EXITED, 0);
	router_job_stats(job, &st);
	assert_int_equal(st.state, ROUTER_STATE_LOST);
	/* Late output of a finished rank: dropped and counted, the job is
	 * not replaced. */
	h_puts(h, "js", 1, "late\n");
	assert_ptr_equal(router_job_lookup(h->r, "js"), job);
	router_job_stats(job, &st);
	assert_int_equal(st.dropped_bytes, 5);
	assert_int_equal(st.stdout_bytes, 0);
	/* An unknown rank delivering into the finished job: a new run.  The
	 * old job may be freed and its address reused (glibc 2.41 does), so
	 * the new run is told by its own counters, not by its address. */
	h_puts(h, "js", 7, "new\n");
	job = router_job_lookup(h->r, "js");
	assert_non_null(job);
	router_job_stats(job, &st);
	assert_int_equal(st.dropped_bytes, 0);
	assert_int_equal(st.stdout_bytes, 4);
	h_free(h);
}

/* A job whose ranks have all ended but never reached its announced size
 * (a rank that never started) can still be removed: rmdir completes it
 * (merged readers get EOF), and a late rank starts a new run. */
static void remove_incomplete_job(void **state)
{
	struct h *h = h_new(NULL);
	router_job_t *job;
	router_reader_t *rd;
	struct router_stats st;
	struct iovec iov[2];
	int cnt;
	size_t n;
	char buf[64];
	uint64_t off = 0;

	(void)state;
	h_reg(h, "inc", 0, 3);
	job = router_job_lookup(h->r, "inc");
	assert_int_equal(router_reader_open(job, ROUTER_RANK_WILDCARD,
					    ROUTER_CH_STDOUT, 0, NULL, NULL,
					    &rd),
			 0);
	h_puts(h, "inc", 0, "x\n");
	assert_int_equal(router_job_remove(h->r, job), ROUTER_ERR_BUSY);
	router_rank_exit(h->rk[0], ROUTER_STATE_EXITED, 0);
	router_job_stats(job, &st);
	assert_int_equal(st.state, ROUTER_STATE_RUNNING); /* 1 of 3 known */
	assert_int_equal(router_job_remove(h->r, job), 0);
	assert_true(router_job_removed(job));
	assert_null(router_job_lookup(h->r, "inc"));
	router_job_stats(job, &st);
	assert_int_equal(st.state, ROUTER_STATE_EXITED);
	assert_true(h_drain(rd, &off, buf, sizeof(buf)) > 0);
	assert_int_equal(
	    router_reader_read(rd, off, sizeof(buf), iov, &cnt, &n),
	    ROUTER_SUCCESS);
	assert_int_equal(n, 0); /* EOF, not "try again" */
	router_reader_close(rd); /* frees the old job: its address may be
				  * reused (glibc 2.41 does), so compare contents */
	h_reg(h, "inc", 1, 3);
	assert_null(router_job_rank(router_job_lookup(h->r, "inc"), 0));
	h_free(h);
}

/* The registry is indexed by name: with thousands of jobs (the leftovers
 * of a busy login node) a lookup costs the same as with one, and the index
 * follows removal and replace-on-reuse. */
static void index_many_jobs(void **state)
{
	struct h *h = h_new(NULL);
	enum { NJOBS = 5000 };
	char ns[32];
	struct timespec t0, t1;

	(void)state;
	for (int i = 0; i < NJOBS; i++) {
		snprintf(ns, sizeof(ns), "left.%d", i);
		router_rank_exit(h_reg(h, ns, 0, 1), ROUTER_STATE_EXITED, 0);
	}
	/* every other job removed, every sixth replaced by a new run */
	for (int i = 0; i < NJOBS; i += 2) {
		snprintf(ns, sizeof(ns), "left.%d", i);
		assert_int_equal(
		    router_job_remove(h->r, router_job_lookup(h->r, ns)), 0);
	}
	for (int i = 1; i < NJOBS; i += 6) {
		snprintf(ns, sizeof(ns), "left.%d", i);
		router_job_t *old = router_job_lookup(h->r, ns);
		struct router_stats st;
		assert_non_null(old);
		h_reg(h, ns, 0, 1); /* replaces the complete job */
		/* a new run, told by its state: the old one is freed and
		 * glibc 2.41 may give the new one its address */
		router_job_stats(router_job_lookup(h->r, ns), &st);
		assert_int_equal(st.state, ROUTER_STATE_RUNNING);
	}
	size_t listed = 0;
	for (router_job_t *j = router_job_first(h->r); j;
	     j = router_job_next(j)) {
		assert_ptr_equal(router_job_lookup(h->r, router_job_nspace(j)),
				 j);
		listed++;
	}
	assert_int_equal(listed, NJOBS / 2);
	/* every job is uid 1's (h_reg): counted per uid, removals and
	 * replacements included */
	assert_int_equal(router_uid_jobs(h->r, 1), NJOBS / 2);
	assert_int_equal(router_uid_jobs(h->r, 2), 0);
	/* 100,000 lookups (hits and misses) among 2,500 jobs: a linear walk
	 * took ~1 s here, the index a few ms. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int k = 0; k < 100000; k++) {
		int i = k % NJOBS;
		snprintf(ns, sizeof(ns), "left.%d", i);
		router_job_t *j = router_job_lookup(h->r, ns);
		assert_true((j != NULL) == (i % 2 == 1));
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) +
		      (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	print_message("100000 lookups among %zu jobs: %.3f s\n", listed, secs);
	assert_true(secs < 0.5);
	h_free(h);
}

static void iteration_and_refs(void **state)
{
	struct h *h = h_new(NULL);
	router_job_t *a, *b, *kept;
	int n = 0;

	(void)state;
	h_reg(h, "a", 0, 1);
	h_reg(h, "b", 0, 1);
	for (router_job_t *j = router_job_first(h->r); j;
	     j = router_job_next(j))
		n++;
	assert_int_equal(n, 2);
	a = router_job_lookup(h->r, "a");
	b = router_job_lookup(h->r, "b");
	assert_ptr_not_equal(a, b);
	kept = router_job_ref(b);
	router_rank_exit(router_job_rank(b, 0), ROUTER_STATE_EXITED, 0);
	assert_int_equal(router_job_remove(h->r, b), 0);
	assert_string_equal(router_job_nspace(kept), "b");
	assert_ptr_equal(router_job_first(h->r), a);
	assert_null(router_job_next(a));
	router_job_unref(kept);
	router_job_unref(NULL);
	h_free(h);
}

static void attrs(void **state)
{
	struct h *h = h_new(NULL);
	router_job_t *job;
	struct router_stream_attr a;
	uint64_t t0 = 0;

	(void)state;
	h_reg(h, "at", 0, 1);
	job = router_job_lookup(h->r, "at");
	t0 = h->now;
	h->now += 5000;
	h_puts(h, "at", 0, "x\n");
	assert_int_equal(router_stream_attr(job, 0, ROUTER_CH_STDOUT, &a), 0);
	assert_int_equal(a.size, 2);
	assert_int_equal(a.mtime_ns, t0 + 5000);
	assert_false(a.complete);
	assert_int_equal(
	    router_stream_attr(job, ROUTER_RANK_WILDCARD, ROUTER_CH_STDOUT, &a),
	    0);
	assert_int_equal(a.size, strlen("[at,0]<stdout>: x\n"));
	assert_int_equal(router_stream_attr(job, 3, ROUTER_CH_STDOUT, &a),
			 ROUTER_ERR_NOT_FOUND);
	assert_int_equal(router_stream_attr(job, 0, ROUTER_CH_STDIN, &a),
			 ROUTER_ERR_BAD_PARAM);
	{
		router_reader_t *rd;

		assert_int_equal(router_reader_open(job, 0, ROUTER_CH_STDDIAG,
						    0, NULL, NULL, &rd),
				 ROUTER_ERR_BAD_PARAM);
		assert_int_equal(router_reader_open(job, 9, ROUTER_CH_STDOUT, 0,
						    NULL, NULL, &rd),
				 ROUTER_ERR_NOT_FOUND);
	}
	h_free(h);
}

/* Target: <= 16 KiB per idle rank, everything included. */
static void memory_per_idle_rank(void **state)
{
	struct h *h = h_new(NULL);
	const int n = 4096;
	size_t before, idle, written;
	router_proc_t p;

	(void)state;
	h_reg(h, "warm", 0, 1); /* first-use allocations out of the way */
	h_puts(h, "warm", 0, "x\n");
	before = heap_used();
	for (int i = 0; i < n; i++) {
		router_rank_t *rk;
		struct router_rank_info info = {.pid = i, .host = "node17"};

		router_proc_set(&p, "big", (uint32_t)i * 3);
		assert_int_equal(
		    router_rank_register(h->r, &p, &info, NULL, NULL, &rk), 0);
	}
	idle = (heap_used() - before) / (size_t)n;
	/* Now every rank writes one short line to stdout. */
	for (int i = 0; i < n; i++) {
		char line[32];

		snprintf(line, sizeof(line), "hello from %d\n", i);
		h_puts(h, "big", (uint32_t)i * 3, line);
	}
	written = (heap_used() - before) / (size_t)n;
	print_message("per idle rank: %zu B, after one line: %zu B\n", idle,
		      written);
	assert_true(idle <= 16384);
	assert_true(written <= 16384);
	h_free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(names),
	    cmocka_unit_test(lifecycle_and_stats),
	    cmocka_unit_test(times_and_history),
	    cmocka_unit_test(owner_is_fixed),
	    cmocka_unit_test(job_notes),
	    cmocka_unit_test(job_size_holds_completion),
	    cmocka_unit_test(remove_incomplete_job),
	    cmocka_unit_test(iteration_and_refs),
	    cmocka_unit_test(index_many_jobs),
	    cmocka_unit_test(attrs),
	    cmocka_unit_test(memory_per_idle_rank),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
