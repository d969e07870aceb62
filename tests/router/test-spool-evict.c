/* SPDX-License-Identifier: MIT */
/* What the caps evict over a real spool, seen from the merged view and
 * from a restart after kill -9: each rank's bytes in the view are bytes
 * the rank still holds, and a rank the caps took whole keeps its length
 * (docs/design.md "Caps and the merged view", "The stage"). */
#include <sys/wait.h>

#include "tests/router/spool_harness.h"

/* The merged view's bytes of rank @r (tags "[@ns,R]<stdout>: ", "+ " where
 * another rank cut the line: the "\n" before it was the view's) into
 * @got; its first line, which a cap may have cut, is skipped. */
static size_t view_rank_bytes(const char *v, size_t n, const char *ns,
			      uint32_t r, char *got)
{
	char tag[64];
	size_t tl = (size_t)snprintf(tag, sizeof(tag), "[%s,%u]<stdout>", ns, r);
	const char *p = memchr(v, '\n', n), *end = v + n;
	size_t g = 0;

	for (p = p ? p + 1 : end; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *e = nl ? nl + 1 : end;

		if ((size_t)(e - p) > tl + 2 && memcmp(p, tag, tl) == 0) {
			if (p[tl] == '+' && g && got[g - 1] == '\n')
				g--;
			memcpy(got + g, p + tl + 2, (size_t)(e - p) - tl - 2);
			g += (size_t)(e - p) - tl - 2;
		}
		p = e;
	}
	return g;
}

/* What @rank's channel @ch of @job holds now, from its oldest byte (a
 * reader that holds nobody back). */
static size_t read_now(router_job_t *job, uint32_t rank, uint32_t ch,
		       char *out, size_t cap)
{
	router_reader_t *rd;
	uint64_t off = 0;
	size_t got;

	assert_int_equal(router_reader_open(job, rank, ch,
					    ROUTER_READER_NONBLOCK, NULL, NULL,
					    &rd),
			 0);
	got = h_drain(rd, &off, out, cap);
	router_reader_close(rd);
	return got;
}

/* A cap never takes a rank's bytes that its merged view has no reference
 * to in the store yet (a piece waiting for its batch, a partial line,
 * bytes being delivered): the view would keep them as they are, and hold
 * bytes of the rank that the rank no longer does.  Between any two
 * deliveries, each rank's bytes in the view are bytes the rank holds.
 * Found by tests/fs/spool-caps.sh kc (256 KiB appends under a 512 KiB
 * job cap, then kill -9: the restored view held them, 4 runs in 10). */
static void job_cap_view_follows_ranks(void **state)
{
	const uint64_t cap = 512 * 1024;
	struct sp *s = sp_caps(0, cap, 0);
	size_t piece = 256 * 1024, n = 16 * piece, vcap = 4 * cap;
	char *in[2], *out = malloc(vcap), *view = malloc(vcap);
	char *mine = malloc(vcap);
	router_job_t *job;

	(void)state;
	assert_true(out && view && mine);
	for (uint32_t r = 0; r < 2; r++) { /* lines that occur once */
		in[r] = malloc(n);
		assert_non_null(in[r]);
		for (size_t at = 0; at < n; at += 64) {
			char line[128];

			assert_int_equal(snprintf(line, sizeof(line),
						  "rank %u line %08zu %42s\n",
						  r, at / 64,
						  "of a job under a job cap"),
					 64);
			memcpy(in[r] + at, line, 64);
		}
	}
	h_reg(s->h, "vf", 0, 2);
	h_reg(s->h, "vf", 1, 2);
	job = router_job_lookup(s->h->r, "vf");
	for (size_t at = 0; at < n; at += piece) {
		for (uint32_t r = 0; r < 2; r++)
			h_put(s->h, "vf", r, ROUTER_CH_STDOUT, in[r] + at,
			      piece, 0, 0, NULL);
		size_t vn = read_now(job, ROUTER_RANK_WILDCARD,
				     ROUTER_CH_STDOUT, view, vcap);
		for (uint32_t r = 0; r < 2; r++) {
			size_t got = read_now(job, r, ROUTER_CH_STDOUT, out,
					      vcap);
			size_t mn = view_rank_bytes(view, vn, "vf", r, mine);

			assert_true(mn <= got);
			if (mn)
				assert_non_null(memmem(out, got, mine, mn));
		}
	}
	router_rank_exit(s->h->rk[0], ROUTER_STATE_EXITED, 0);
	router_rank_exit(s->h->rk[1], ROUTER_STATE_EXITED, 0);
	for (uint32_t r = 0; r < 2; r++) {
		struct router_stats st;
		size_t got = read_all(job, r, ROUTER_CH_STDOUT, out, vcap);
		size_t vn = read_all(job, ROUTER_RANK_WILDCARD,
				     ROUTER_CH_STDOUT, view, vcap);
		size_t mn = view_rank_bytes(view, vn, "vf", r, mine);

		router_rank_stats(s->h->rk[r], &st);
		assert_int_equal(got + st.dropped_bytes, n);
		assert_memory_equal(out, in[r] + st.dropped_bytes, got);
		assert_true(mn > 0 && mn <= got); /* the view ends the rank */
		assert_memory_equal(mine, out + got - mn, mn);
		free(in[r]);
	}
	free(out);
	free(view);
	free(mine);
	sp_free(s);
}

/* A running rank that the user cap took whole while its stage's last
 * buffer was not written to its file yet, then a kill -9 (a child that
 * _exit()s): the restarted rank keeps its length, every byte counted as
 * evicted.  The restart wrote nothing of a buffer below the evicted mark,
 * and the file (so the restored stream) stayed that buffer short. */
static void killed_staged_rank_evicted_whole(void **state)
{
	const uint64_t cap = 1u << 20;
	struct router_config cfg = {.store_max_user = cap};
	struct sp *s = sp_cfg(cfg);
	size_t n = (6u << 20) - (64u << 10), piece = 64u << 10;
	char *in = malloc(n), path[128], err[256];
	struct router_stats st;
	spool_t *sp2;
	struct h *h2;
	int status;
	pid_t pid;

	(void)state;
	assert_non_null(in);
	for (size_t i = 0; i < n; i++) /* 64-byte lines: no partial one */
		in[i] = i % 64 == 63 ? '\n' : (char)('a' + i % 26);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct router_rank_info info = {.pid = 1, .host = "h",
						.uid = 1, .gid = 1,
						.job_size = 1};
		router_reader_t *rd;
		router_rank_t *rk, *pin;
		router_proc_t p;

		router_proc_set(&p, "big", 0);
		if (router_rank_register(s->h->r, &p, &info, NULL, NULL,
					 &rk) != 0)
			_exit(2);
		for (size_t at = 0; at < n; at += piece)
			h_put(s->h, "big", 0, ROUTER_CH_STDOUT, in + at, piece,
			      0, 0, NULL);
		/* the same user's job, all of it kept by its reader */
		pinned_job_of(s, "pin", 1, in, cap, &rd, &pin);
		router_rank_stats(rk, &st);
		snprintf(path, sizeof(path), "%s/0/0.stdout.stage", s->dir);
		_exit(st.spool_bytes == 0 && access(path, F_OK) == 0 ? 0 : 3);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0); /* 3: the case not made */
	h_free(s->h); /* this process never had the jobs */
	spool_free(s->sp);
	assert_int_equal(spool_new(NULL, s->dir, err, sizeof(err), &sp2), 0);
	cfg.window = WIN;
	cfg.store = spool_store_ops();
	cfg.store_ctx = sp2;
	h2 = h_new(&cfg);
	assert_int_equal(spool_restore(sp2, h2->r, false), 2);
	router_job_stats(router_job_lookup(h2->r, "big"), &st);
	assert_int_equal(st.stdout_bytes, n);
	assert_int_equal(st.dropped_bytes, n);
	h_free(h2);
	spool_free(sp2);
	rm_tree(s->dir, 1);
	free(s);
	free(in);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(job_cap_view_follows_ranks),
	    cmocka_unit_test(killed_staged_rank_evicted_whole),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
