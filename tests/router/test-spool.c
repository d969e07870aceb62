/* SPDX-License-Identifier: MIT */
/* The router over a real spool (fs/spool.c) in a temporary directory: late
 * readers replay from byte 0 through a small window, back-pressure stays
 * at the window, a failing store falls back to the window rules, a full
 * one holds its producer, and the spool's files are laid out, protected
 * and removed as documented.  The caps: test-spool-caps.c. */
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/vfs.h>

#include "tests/router/spool_harness.h"

/* 200 KB through a 4 KiB window with nobody reading: a late reader of the
 * rank and of the merged view gets every byte, nothing counted dropped. */
static void late_reader_gets_everything(void **state)
{
	struct sp *s = sp_new(NULL, NULL);
	size_t n = 200000;
	char *in = malloc(n), *out = malloc(2 * n);
	router_reader_t *rd, *mrd;
	router_job_t *job;
	struct router_stats st;
	uint64_t off = 0;
	size_t got;

	(void)state;
	fill(in, n, 3);
	for (size_t i = 0; i < n; i++) /* text lines for the merged view */
		in[i] = i % 100 == 99 ? '\n' : 'a' + (char)(in[i] % 26);
	h_reg(s->h, "late", 0, 1);
	for (size_t at = 0; at < n; at += 1000)
		h_put(s->h, "late", 0, ROUTER_CH_STDOUT, in + at, 1000, 0, 0,
		      NULL);
	router_rank_exit(s->h->rk[0], ROUTER_STATE_EXITED, 0);
	job = router_job_lookup(s->h->r, "late");
	router_job_stats(job, &st);
	assert_int_equal(st.dropped_bytes, 0);
	assert_int_equal(st.merged_dropped_bytes, 0);
	assert_int_equal(router_reader_open(job, 0, ROUTER_CH_STDOUT, 0, NULL,
					    NULL, &rd),
			 0);
	got = h_drain(rd, &off, out, 2 * n);
	assert_int_equal(got, n);
	assert_memory_equal(out, in, n);
	assert_true(router_reader_eof(rd, off));
	/* the merged view: every line tagged, bodies in order */
	assert_int_equal(router_reader_open(job, ROUTER_RANK_WILDCARD,
					    ROUTER_CH_STDOUT, 0, NULL, NULL,
					    &mrd),
			 0);
	off = 0;
	got = h_drain(mrd, &off, out, 2 * n);
	assert_int_equal(got, n + (n / 100) * strlen("[late,0]<stdout>: "));
	assert_memory_equal(out, "[late,0]<stdout>: ", 18);
	assert_memory_equal(out + 18, in, 100);
	assert_memory_equal(out + got - 100, in + n - 100, 100);
	/* a re-read from the middle of the history */
	off = 12345;
	got = h_drain(rd, &off, out, 100);
	assert_int_equal(got, 100);
	assert_memory_equal(out, in + 12345, 100);
	router_reader_close(rd);
	router_reader_close(mrd);
	free(in);
	free(out);
	sp_free(s);
}

/* Every read of a running job's history is whole: one that starts in the
 * store and ends in the ring (or past what the merged view has stored
 * yet) returns all it asked for, not what the store alone had; tail,
 * less and dd take a short read for the end of the file.  Found by hand:
 * `tail -n 200000` of a 400,000-line rank printed the wrong lines. */
static void reads_span_store_and_ring(void **state)
{
	struct sp *s = sp_new(NULL, NULL);
	size_t n = 200000, want, whole;
	char *in = malloc(n), *all = malloc(2 * n), *out = malloc(4000);
	router_reader_t *rd;
	router_job_t *job;
	uint64_t off;

	(void)state;
	fill(in, n, 7);
	for (size_t i = 0; i < n; i++)
		in[i] = i % 100 == 99 ? '\n' : 'a' + (char)(in[i] % 26);
	h_reg(s->h, "span", 0, 1);
	for (size_t at = 0; at < n; at += 1000)
		h_put(s->h, "span", 0, ROUTER_CH_STDOUT, in + at, 1000, 0, 0,
		      NULL);
	h_put(s->h, "span", 0, ROUTER_CH_STDOUT, "partial", 7, 0, 0, NULL);
	job = router_job_lookup(s->h->r, "span");
	for (int view = 0; view < 2; view++) {
		uint32_t rank = view ? ROUTER_RANK_WILDCARD : 0;

		assert_int_equal(router_reader_open(job, rank, ROUTER_CH_STDOUT,
						    ROUTER_READER_NONBLOCK,
						    NULL, NULL, &rd),
				 0);
		off = 0;
		whole = h_drain(rd, &off, all, 2 * n);
		assert_true(whole >= (view ? n : n + 7));
		for (off = 0; off < whole; off += 997) {
			struct iovec iov[2];
			int cnt;
			size_t got = 0, k;

			want = whole - off < 3000 ? whole - off : 3000;
			assert_int_equal(router_reader_read(rd, off, 3000, iov,
							    &cnt, &k),
					 ROUTER_SUCCESS);
			assert_int_equal(k, want);
			for (int i = 0; i < cnt; i++) {
				memcpy(out + got, iov[i].iov_base,
				       iov[i].iov_len);
				got += iov[i].iov_len;
			}
			assert_int_equal(got, want);
			assert_memory_equal(out, all + off, want);
		}
		router_reader_close(rd);
	}
	assert_memory_equal(all, "[span,0]<stdout>: ", 18);
	router_rank_exit(s->h->rk[0], ROUTER_STATE_EXITED, 0);
	free(in);
	free(all);
	free(out);
	sp_free(s);
}

/* A blocking reader that does not read still holds its producer at the
 * window; one that opens late is held to the live end from where the
 * window began (history before that is replay, holds nobody). */
static void backpressure_stays_exact(void **state)
{
	struct sp *s = sp_new(NULL, NULL);
	char buf[1000], *out = malloc(100000);
	router_reader_t *rd;
	router_job_t *job;
	struct router_stats st;
	uint64_t off = 0;

	(void)state;
	fill(buf, sizeof(buf), 5);
	h_reg(s->h, "bp", 0, 1);
	job = router_job_lookup(s->h->r, "bp");
	for (int i = 0; i < 50; i++) /* history: 50 KB, nobody reading */
		h_put(s->h, "bp", 0, ROUTER_CH_STDOUT, buf, sizeof(buf), 0, 0,
		      NULL);
	assert_int_equal(router_reader_open(job, 0, ROUTER_CH_STDOUT, 0, NULL,
					    NULL, &rd),
			 0);
	/* it starts where the window begins: lagging by the window */
	assert_int_equal(s->h->fr[0].xoff[ROUTER_CH_STDOUT], 0);
	h_put(s->h, "bp", 0, ROUTER_CH_STDOUT, buf, 1, 0, 0, NULL);
	assert_int_equal(s->h->fr[0].xoff[ROUTER_CH_STDOUT], 1); /* held */
	/* Reading the history does not release it ... */
	assert_int_equal(h_drain(rd, &off, out, 40000), 40000);
	assert_true(s->h->fr[0].held[ROUTER_CH_STDOUT]);
	/* ... reaching the live end does. */
	h_drain(rd, &off, out, 100000);
	assert_int_equal(off, 50001);
	assert_false(s->h->fr[0].held[ROUTER_CH_STDOUT]);
	router_rank_stats(s->h->rk[0], &st);
	assert_int_equal(st.stdout_xoff, st.stdout_xon);
	assert_int_equal(st.dropped_bytes, 0);
	router_reader_close(rd);
	free(out);
	sp_free(s);
}

/* A store that fails: logged, the stream falls back to the window; what
 * the store took stays readable, the gap is skipped (skew), counted. */
static void failing_store_falls_back(void **state)
{
	struct fake fk = {.fail_after = 3000, .err = -EIO};
	struct sp *s = sp_new(&fk_ops, &fk);
	char buf[1000], *out = malloc(20000);
	router_reader_t *rd;
	router_job_t *job;
	struct router_stats st;
	uint64_t off = 0;
	size_t got;

	(void)state;
	h_reg(s->h, "fk", 0, 1);
	job = router_job_lookup(s->h->r, "fk");
	for (int i = 0; i < 12; i++) { /* 12000 bytes, 3000 stored */
		memset(buf, 'a' + i, sizeof(buf));
		buf[sizeof(buf) - 1] = '\n';
		h_put(s->h, "fk", 0, ROUTER_CH_STDOUT, buf, sizeof(buf), 0, 0,
		      NULL);
		if (i == 0) /* the merged view's batch: it fails first */
			router_run_timers(s->h->r);
	}
	assert_int_equal(s->h->nlog, 2); /* once per stream */
	assert_non_null(strstr(s->h->log, "fk/0/stdout: spool write"));
	assert_int_equal(fk.len, 3000);
	router_rank_stats(s->h->rk[0], &st);
	assert_int_equal(st.dropped_bytes, 12000 - 3000 - WIN);
	assert_int_equal(router_reader_open(job, 0, ROUTER_CH_STDOUT, 0, NULL,
					    NULL, &rd),
			 0);
	got = h_drain(rd, &off, out, 20000);
	assert_int_equal(got, 3000 + WIN);
	assert_int_equal(out[0], 'a');
	assert_int_equal(out[2998], 'c');
	assert_int_equal(out[3000], 'a' + (12000 - WIN) / 1000);
	assert_int_equal(out[got - 2], 'l');
	router_reader_close(rd);
	router_rank_exit(s->h->rk[0], ROUTER_STATE_EXITED, 0);
	h_free(s->h);
	assert_int_equal(fk.jobs, 0);
	assert_int_equal(fk.files, 0);
	rm_tree(s->dir, 1);
	free(s);
	free(out);
}

/* A full store (ENOSPC) holds the producer back instead of losing bytes,
 * and lets it go when a retry gets everything in. */
static void full_store_holds_then_resumes(void **state)
{
	struct fake fk = {.fail_after = 2500, .err = -ENOSPC};
	struct sp *s = sp_new(&fk_ops, &fk);
	char buf[1000], *out = malloc(20000), want[20000];
	router_reader_t *rd;
	router_job_t *job;
	struct router_stats st;
	uint64_t off = 0;

	(void)state;
	h_reg(s->h, "full", 0, 1);
	job = router_job_lookup(s->h->r, "full");
	for (int i = 0; i < 12; i++) { /* the producer goes on in flight */
		memset(buf, 'a' + i, sizeof(buf));
		buf[sizeof(buf) - 1] = '\n'; /* the merged view fails first */
		memcpy(want + i * 1000, buf, 1000);
		h_put(s->h, "full", 0, ROUTER_CH_STDOUT, buf, sizeof(buf), 0, 0,
		      NULL);
		assert_int_equal(s->h->fr[0].xoff[ROUTER_CH_STDOUT], i >= 2);
	}
	assert_true(s->h->fr[0].held[ROUTER_CH_STDOUT]);
	assert_int_equal(fk.len, 2500);
	assert_non_null(strstr(s->h->log, "holding its producer back"));
	router_run_timers(s->h->r); /* still full: still held */
	assert_true(s->h->fr[0].held[ROUTER_CH_STDOUT]);
	fk.fail_after = sizeof(fk.data); /* space returns */
	router_run_timers(s->h->r);
	assert_false(s->h->fr[0].held[ROUTER_CH_STDOUT]);
	assert_non_null(strstr(s->h->log, "resumed at byte 12000"));
	assert_int_equal(fk.len, 12000);
	assert_memory_equal(fk.data, want, 12000);
	router_rank_stats(s->h->rk[0], &st);
	assert_int_equal(st.dropped_bytes, 0);
	assert_int_equal(st.stdout_xoff, 1);
	assert_int_equal(st.stdout_xon, 1);
	assert_int_equal(router_reader_open(job, 0, ROUTER_CH_STDOUT, 0, NULL,
					    NULL, &rd),
			 0);
	assert_int_equal(h_drain(rd, &off, out, 20000), 12000);
	assert_memory_equal(out, want, 12000);
	router_reader_close(rd);
	/* full again at exit: the latch goes with the rank, counted */
	fk.fail_after = fk.len;
	h_put(s->h, "full", 0, ROUTER_CH_STDOUT, buf, sizeof(buf), 0, 0, NULL);
	assert_true(s->h->fr[0].held[ROUTER_CH_STDOUT]);
	router_rank_exit(s->h->rk[0], ROUTER_STATE_EXITED, 0);
	router_rank_stats(s->h->rk[0], &st);
	assert_int_equal(st.stdout_xoff, st.stdout_xon);
	fk.fail_after = sizeof(fk.data);
	router_run_timers(s->h->r); /* stored after the exit */
	assert_int_equal(fk.len, 13000);
	h_free(s->h);
	assert_int_equal(fk.files, 0);
	rm_tree(s->dir, 1);
	free(s);
	free(out);
}

/* router_deliver_pipe() of rank 0's stdout from the pipe @fd into @buf:
 * its status, *@taken bytes. */
static int pipe_put(struct sp *s, int fd, char *buf, size_t cap,
		    size_t *taken, int *cnt)
{
	router_proc_t p;

	assert_int_equal(router_proc_set(&p, "pd", 0), 0);
	return router_deliver_pipe(s->h->r, &p, ROUTER_CH_STDOUT, fd, buf, cap,
				   NULL, h_cb_count, cnt, taken);
}

/* The pipe hand-over's exact read (router_deliver_pipe) over the real
 * spool: 300 KB through a pipe, 64 KiB at a time; each byte leaves the
 * pipe as the rank file gets it, the ring and a late reader (rank and
 * merged view) get the same bytes, the pipe's end is ROUTER_ERR_PIPE and
 * an empty pipe ROUTER_AGAIN, each with nothing done. */
static void pipe_deliver_is_exact(void **state)
{
	struct sp *s = sp_new(NULL, NULL);
	size_t n = 300000, sent = 0, got = 0, taken;
	char *in = malloc(n), *out = malloc(2 * n), buf[65536];
	int fd[2], cnt[2] = {0, 0}, calls = 0;
	router_reader_t *rd;
	router_job_t *job;
	uint64_t off = 0;
	char path[128];
	struct stat sb;

	(void)state;
	fill(in, n, 5);
	for (size_t i = 0; i < n; i++) /* text lines for the merged view */
		in[i] = i % 100 == 99 ? '\n' : 'a' + (char)(in[i] % 26);
	assert_int_equal(pipe2(fd, O_NONBLOCK), 0);
	h_reg(s->h, "pd", 0, 1);
	assert_int_equal(pipe_put(s, fd[0], buf, sizeof(buf), &taken, cnt),
			 ROUTER_AGAIN);
	assert_int_equal(taken, 0);
	while (got < n) {
		ssize_t w = sent < n ? write(fd[1], in + sent, n - sent) : 0;

		if (w > 0)
			sent += (size_t)w;
		int rc = pipe_put(s, fd[0], buf, sizeof(buf), &taken, cnt);
		assert_int_equal(rc, ROUTER_SUCCESS);
		assert_true(taken > 0);
		assert_memory_equal(buf, in + got, taken);
		got += taken;
		calls++;
		/* what is left in the pipe is exactly what was not taken */
		int q = -1;
		assert_int_equal(ioctl(fd[0], FIONREAD, &q), 0);
		assert_int_equal((size_t)q, sent - got);
		h_loop(s->h); /* the callbacks: @buf may be reused */
	}
	assert_int_equal(cnt[0], calls);
	assert_int_equal(pipe_put(s, fd[0], buf, sizeof(buf), &taken, cnt),
			 ROUTER_AGAIN);
	close(fd[1]);
	assert_int_equal(pipe_put(s, fd[0], buf, sizeof(buf), &taken, cnt),
			 ROUTER_ERR_PIPE);
	close(fd[0]);
	router_rank_exit(s->h->rk[0], ROUTER_STATE_EXITED, 0);
	snprintf(path, sizeof(path), "%s/0/0.stdout", s->dir);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_size, n);
	job = router_job_lookup(s->h->r, "pd");
	assert_int_equal(router_reader_open(job, 0, ROUTER_CH_STDOUT, 0, NULL,
					    NULL, &rd),
			 0);
	assert_int_equal(h_drain(rd, &off, out, 2 * n), n);
	assert_memory_equal(out, in, n);
	router_reader_close(rd);
	assert_int_equal(router_reader_open(job, ROUTER_RANK_WILDCARD,
					    ROUTER_CH_STDOUT, 0, NULL, NULL,
					    &rd),
			 0);
	off = 0;
	assert_int_equal(h_drain(rd, &off, out, 2 * n),
			 n + (n / 100) * strlen("[pd,0]<stdout>: "));
	router_reader_close(rd);
	free(in);
	free(out);
	sp_free(s);
}

/* A full store takes what fits, then says ROUTER_STORE_FULL with the rest
 * left in the pipe; read and delivered the usual way, they wait in the
 * stream for the disk (held back, logged once, no XOFF/XON per retry),
 * the retry stores them when space returns and the next call splices
 * again: nothing lost or doubled.  A store without splice_in is
 * ROUTER_ERR_NOT_SUPPORTED with the pipe untouched. */
static void pipe_deliver_full_and_unsupported(void **state)
{
	struct fake fk = {.fail_after = 2500, .err = -ENOSPC};
	static struct router_store_ops pipe_ops;
	struct sp *s;
	char buf[8192], in[6000];
	int fd[2], cnt[2] = {0, 0};
	size_t taken;

	(void)state;
	pipe_ops = fk_ops; /* the fake with a splice_in */
	pipe_ops.splice_in = fk_splice_in;
	s = sp_new(&pipe_ops, &fk);
	fill(in, sizeof(in), 9);
	assert_int_equal(pipe2(fd, O_NONBLOCK), 0);
	assert_int_equal(write(fd[1], in, sizeof(in)), sizeof(in));
	h_reg(s->h, "pd", 0, 1);
	assert_int_equal(pipe_put(s, fd[0], buf, sizeof(buf), &taken, cnt),
			 ROUTER_SUCCESS);
	assert_int_equal(taken, 2500); /* what fits */
	assert_int_equal(pipe_put(s, fd[0], buf, sizeof(buf), &taken, cnt),
			 ROUTER_STORE_FULL);
	assert_int_equal(taken, 0);
	assert_false(s->h->fr[0].held[ROUTER_CH_STDOUT]);
	/* the caller reads 1000 of them and delivers them the usual way */
	assert_int_equal(read(fd[0], buf, 1000), 1000);
	assert_int_equal(h_put(s->h, "pd", 0, ROUTER_CH_STDOUT, buf, 1000, 0, 0,
			       cnt),
			 ROUTER_SUCCESS);
	assert_true(s->h->fr[0].held[ROUTER_CH_STDOUT]);
	assert_non_null(strstr(s->h->log, "holding its producer back"));
	router_run_timers(s->h->r); /* the merged view's lazy store logs once */
	int nlog = s->h->nlog;
	for (int i = 0; i < 5; i++) /* still full: held, one XOFF, no line */
		router_run_timers(s->h->r);
	assert_true(s->h->fr[0].held[ROUTER_CH_STDOUT]);
	assert_int_equal(s->h->fr[0].xoff[ROUTER_CH_STDOUT], 1);
	assert_int_equal(s->h->nlog, nlog);
	fk.fail_after = sizeof(fk.data); /* space returns */
	router_run_timers(s->h->r);
	assert_false(s->h->fr[0].held[ROUTER_CH_STDOUT]);
	assert_int_equal(fk.len, 3500);
	assert_int_equal(pipe_put(s, fd[0], buf, sizeof(buf), &taken, cnt),
			 ROUTER_SUCCESS); /* spliced again */
	assert_int_equal(taken, 2500);
	assert_int_equal(fk.len, sizeof(in));
	assert_memory_equal(fk.data, in, sizeof(in));
	h_loop(s->h);
	assert_int_equal(cnt[0], 3); /* one callback per delivery */
	router_rank_exit(s->h->rk[0], ROUTER_STATE_EXITED, 0);
	h_free(s->h);
	rm_tree(s->dir, 1);
	free(s);

	/* no splice_in: the pipe is the caller's to read */
	struct fake fk2 = {.fail_after = sizeof(fk2.data), .err = -ENOSPC};
	s = sp_new(&fk_ops, &fk2);
	h_reg(s->h, "pd", 0, 1);
	assert_int_equal(write(fd[1], in, 100), 100);
	assert_int_equal(pipe_put(s, fd[0], buf, sizeof(buf), &taken, cnt),
			 ROUTER_ERR_NOT_SUPPORTED);
	assert_int_equal(read(fd[0], buf, sizeof(buf)), 100);
	h_free(s->h);
	rm_tree(s->dir, 1);
	free(s);
	close(fd[0]);
	close(fd[1]);
}

/* Two streams full at once (the rank's and the merged view): a retry
 * tries each once and returns (it used to chase the re-queued streams
 * forever), the hold is logged once per stream, not per retry. */
static void two_full_streams_retry(void **state)
{
	struct fake fk = {.fail_after = 0, .err = -ENOSPC, .merged_too = true};
	struct sp *s = sp_new(&fk_ops, &fk);
	struct router_stats st;

	(void)state;
	h_reg(s->h, "two", 0, 1);
	h_puts(s->h, "two", 0, "line one\n");
	assert_true(s->h->fr[0].held[ROUTER_CH_STDOUT]);
	assert_int_equal(s->h->nlog, 1); /* the merged view waits: a batch */
	router_run_timers(s->h->r);
	assert_int_equal(s->h->nlog, 2); /* rank and merged view */
	for (int i = 0; i < 3; i++)
		router_run_timers(s->h->r); /* returns; still held */
	assert_true(s->h->fr[0].held[ROUTER_CH_STDOUT]);
	assert_int_equal(s->h->nlog, 2);
	fk.fail_after = sizeof(fk.data);
	router_run_timers(s->h->r);
	assert_false(s->h->fr[0].held[ROUTER_CH_STDOUT]);
	assert_int_equal(s->h->nlog, 4); /* both resumed */
	router_rank_exit(s->h->rk[0], ROUTER_STATE_EXITED, 0);
	router_rank_stats(s->h->rk[0], &st);
	assert_int_equal(st.stdout_xoff, 1);
	assert_int_equal(st.stdout_xon, 1);
	h_free(s->h);
	assert_int_equal(fk.files, 0);
	rm_tree(s->dir, 1);
	free(s);
}

/* DIR/<n>/{nspace,<rank>.stdout,stdout}, 0700/0600; numbers skip what is
 * there; a job's files go when it is removed and its reader closed; an
 * unsafe top directory is refused. */
static void spool_layout(void **state)
{
	struct sp *s = sp_new(NULL, NULL);
	char path[256], err[256], name[64];
	router_reader_t *rd;
	router_job_t *job;
	spool_t *bad;
	struct stat st;
	int fd;
	ssize_t n;

	(void)state;
	snprintf(path, sizeof(path), "%s/0", s->dir);
	assert_int_equal(mkdir(path, 0700), 0); /* left by a previous life */
	h_reg(s->h, "lay", 0, 1);
	h_puts(s->h, "lay", 0, "hello\n");
	snprintf(path, sizeof(path), "%s/1/nspace", s->dir);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	n = read(fd, name, sizeof(name));
	close(fd);
	assert_int_equal(n, 3);
	assert_memory_equal(name, "lay", 3);
	snprintf(path, sizeof(path), "%s/1", s->dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	snprintf(path, sizeof(path), "%s/1/0.stdout", s->dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(st.st_size, 6);
	/* the merged view: an index into 0.stdout, and its tag */
	snprintf(path, sizeof(path), "%s/1/stdout.idx", s->dir);
	assert_int_equal(stat(path, &st), -1); /* a batch: not yet */
	router_run_timers(s->h->r); /* ... or within STORE_RETRY_NS */
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 64 + 64);
	snprintf(path, sizeof(path), "%s/1/stdout.lit", s->dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, strlen("[lay,0]<stdout>: "));
	snprintf(path, sizeof(path), "%s/1/stdout", s->dir);
	assert_int_equal(stat(path, &st), -1); /* no second copy */
	snprintf(path, sizeof(path), "%s/1/0.stderr", s->dir);
	assert_int_equal(stat(path, &st), -1); /* no byte, no file */
	job = router_job_lookup(s->h->r, "lay");
	assert_int_equal(router_reader_open(job, 0, ROUTER_CH_STDOUT, 0, NULL,
					    NULL, &rd),
			 0);
	router_rank_exit(s->h->rk[0], ROUTER_STATE_EXITED, 0);
	assert_int_equal(router_job_remove(s->h->r, job), 0);
	snprintf(path, sizeof(path), "%s/1", s->dir);
	assert_int_equal(stat(path, &st), 0); /* the reader keeps it */
	router_reader_close(rd);
	assert_int_equal(stat(path, &st), -1);
	snprintf(path, sizeof(path), "%s/0", s->dir);
	rmdir(path);
	/* unsafe tops */
	assert_int_equal(chmod(s->dir, 0777), 0);
	assert_true(spool_new(NULL, s->dir, err, sizeof(err), &bad) < 0);
	assert_non_null(strstr(err, "writable by other users"));
	assert_int_equal(chmod(s->dir, 0700), 0);
	sp_free_kept(s, 0); /* the removed job's files went with it */
}

/* Restart: a second router on the same spool gets the jobs back, as they
 * ended, every byte; a job still running then comes back lost; removing a
 * restored job deletes its files; a later run of a name replaces it. */
static void restart_restores_jobs(void **state)
{
	struct sp *s = sp_new(NULL, NULL);
	char dir[64], buf[4000], out[20000], err[256];
	struct router_config cfg = {.window = WIN};
	router_reader_t *rd;
	router_job_t *job;
	struct router_stats st;
	uint64_t off = 0;
	struct h *h2;
	spool_t *sp2;

	(void)state;
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = i % 50 == 49 ? '\n' : (char)('a' + i % 26);
	h_reg(s->h, "done", 0, 2);
	h_reg(s->h, "done", 1, 2);
	for (int i = 0; i < 3; i++) /* 12000 bytes: beyond the window */
		h_put(s->h, "done", 0, ROUTER_CH_STDOUT, buf, sizeof(buf), 0,
		      0, NULL);
	h_put(s->h, "done", 1, ROUTER_CH_STDERR, "oops\n", 5, 0, 0, NULL);
	router_rank_exit(s->h->rk[0], ROUTER_STATE_EXITED, 0);
	router_rank_exit(s->h->rk[1], ROUTER_STATE_EXITED, 3);
	h_reg(s->h, "run", 0, 1);
	h_puts(s->h, "run", 0, "half");
	h_put(s->h, "run", 0, ROUTER_CH_STDOUT, buf, 100, 0, 0, NULL);
	snprintf(dir, sizeof(dir), "%s", s->dir);
	h_free(s->h); /* the daemon stops: files kept */
	spool_free(s->sp);
	assert_int_equal(count_entries(dir), 2);

	assert_int_equal(spool_new(NULL, dir, err, sizeof(err), &sp2), 0);
	cfg.store = spool_store_ops();
	cfg.store_ctx = sp2;
	h2 = h_new(&cfg);
	assert_int_equal(spool_restore(sp2, h2->r, false), 2);
	job = router_job_lookup(h2->r, "done");
	assert_non_null(job);
	assert_true(router_job_complete(job));
	router_job_stats(job, &st);
	assert_int_equal(st.state, ROUTER_STATE_EXITED);
	assert_int_equal(st.exit_status, 3);
	assert_int_equal(st.stdout_bytes, 12000);
	assert_int_equal(st.stderr_bytes, 5);
	assert_int_equal(st.uid, 1);
	assert_int_equal(st.gid, 2);
	assert_int_equal(router_reader_open(job, 0, ROUTER_CH_STDOUT, 0, NULL,
					    NULL, &rd),
			 0);
	assert_int_equal(h_drain(rd, &off, out, sizeof(out)), 12000);
	assert_memory_equal(out, buf, sizeof(buf));
	assert_memory_equal(out + 8000, buf, sizeof(buf));
	assert_true(router_reader_eof(rd, off));
	router_reader_close(rd);
	assert_int_equal(router_reader_open(job, ROUTER_RANK_WILDCARD,
					    ROUTER_CH_STDERR, 0, NULL, NULL,
					    &rd),
			 0);
	off = 0;
	assert_int_equal(h_drain(rd, &off, out, sizeof(out)),
			 strlen("[done,1]<stderr>: oops\n"));
	assert_memory_equal(out, "[done,1]<stderr>: oops\n", 23);
	router_reader_close(rd);
	/* the running one: lost, its bytes (the partial line flushed at
	 * the stop) there */
	job = router_job_lookup(h2->r, "run");
	assert_non_null(job);
	router_job_stats(job, &st);
	assert_int_equal(st.state, ROUTER_STATE_LOST);
	assert_int_equal(st.stdout_bytes, 104);
	/* a new run under the name replaces it: its files go */
	h_reg(h2, "run", 0, 1);
	assert_int_equal(count_entries(dir), 1);
	/* removing the restored job deletes its files */
	job = router_job_lookup(h2->r, "done");
	assert_int_equal(router_job_remove(h2->r, job), 0);
	assert_int_equal(count_entries(dir), 0);
	router_rank_exit(h2->rk[0], ROUTER_STATE_EXITED, 0);
	h_free(h2);
	spool_free(sp2);
	rm_tree(dir, 1);
	free(s);
}

/* Pages of the count [@off, @off + @len) of @path in the page cache. */
static size_t resident(const char *path, size_t off, size_t len)
{
	int fd = open(path, O_RDONLY);
	unsigned char vec[8192];
	size_t n = 0, pages = len / 4096;
	void *m;

	assert_true(fd >= 0 && pages <= sizeof(vec));
	m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, (off_t)off);
	assert_true(m != MAP_FAILED);
	assert_int_equal(mincore(m, len, vec), 0);
	for (size_t i = 0; i < pages; i++)
		n += vec[i] & 1;
	munmap(m, len);
	close(fd);
	return n;
}

/* Whether job 0's rank 0 stdout has a stage (fs/spool_stage.h). */
static bool staged(const char *dir)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/0/0.stdout.stage", dir);
	return access(path, F_OK) == 0;
}

/* Drop-behind (fs/spool_flush.h): 24 MiB through a rank leave its first
 * 16 MiB written back and out of the page cache, its newest 8 MiB cached,
 * and every byte readable, exact; with spool_keep_cache() all of it stays
 * cached.  Where the rank file gets a stage (fs/spool_stage.h: past 4 MiB,
 * where io_uring and O_DIRECT work) none of it stays cached: its first
 * 4 MiB are dropped behind when the stage starts, the rest never enters
 * the page cache (but for a last partial buffer, which the stage's end
 * writes through it), and the stage goes when the rank's stream ends. */
static void drop_behind_case(bool keep)
{
	struct sp *s = sp_new(NULL, NULL);
	size_t chunk = 64 << 10, n = 24u << 20;
	char *in = malloc(chunk), *out = malloc(chunk), path[128];
	router_reader_t *rd;
	uint64_t off = 0;
	struct statfs fs;
	bool was_staged;

	assert_non_null(in);
	assert_non_null(out);
	if (keep)
		spool_keep_cache(s->sp);
	h_reg(s->h, "db", 0, 1);
	for (size_t at = 0; at < n; at += chunk) {
		fill(in, chunk, (unsigned)(at / chunk));
		h_put(s->h, "db", 0, ROUTER_CH_STDOUT, in, chunk, 0, 0, NULL);
	}
	was_staged = staged(s->dir);
	router_rank_exit(s->h->rk[0], ROUTER_STATE_EXITED, 0);
	assert_false(staged(s->dir)); /* the stream ended: the stage with it */
	snprintf(path, sizeof(path), "%s/0/0.stdout", s->dir);
	assert_int_equal(statfs(path, &fs), 0);
	if (keep) { /* dirty pages are never reclaimed at once */
		assert_int_equal(resident(path, 0, 16u << 20), 4096);
	} else if (was_staged) {
		for (int i = 0; i < 1000 && resident(path, 0, 23u << 20); i++)
			usleep(10000);
		assert_int_equal(resident(path, 0, 23u << 20), 0);
	} else if (fs.f_type != TMPFS_MAGIC) { /* tmpfs keeps its pages */
		for (int i = 0; i < 1000 && resident(path, 0, 16u << 20); i++)
			usleep(10000);
		assert_int_equal(resident(path, 0, 16u << 20), 0);
		assert_true(resident(path, 16u << 20, 8u << 20) > 0);
	}
	assert_int_equal(router_reader_open(router_job_lookup(s->h->r, "db"), 0,
					    ROUTER_CH_STDOUT, 0, NULL, NULL,
					    &rd),
			 0);
	for (size_t at = 0; at < n; at += chunk) {
		fill(in, chunk, (unsigned)(at / chunk));
		assert_int_equal(h_drain(rd, &off, out, chunk), chunk);
		assert_memory_equal(out, in, chunk);
	}
	router_reader_close(rd);
	free(in);
	free(out);
	sp_free(s);
}

static void drop_behind_keeps_bytes(void **state)
{
	(void)state;
	drop_behind_case(false);
}

static void keep_cache_keeps_pages(void **state)
{
	(void)state;
	drop_behind_case(true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(late_reader_gets_everything),
	    cmocka_unit_test(reads_span_store_and_ring),
	    cmocka_unit_test(backpressure_stays_exact),
	    cmocka_unit_test(failing_store_falls_back),
	    cmocka_unit_test(full_store_holds_then_resumes),
	    cmocka_unit_test(pipe_deliver_is_exact),
	    cmocka_unit_test(pipe_deliver_full_and_unsupported),
	    cmocka_unit_test(two_full_streams_retry),
	    cmocka_unit_test(spool_layout),
	    cmocka_unit_test(restart_restores_jobs),
	    cmocka_unit_test(drop_behind_keeps_bytes),
	    cmocka_unit_test(keep_cache_keeps_pages),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

