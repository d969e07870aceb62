/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the fs inode table (stable numbers, never reused, growth,
 * garbage collection of removed jobs) and of the info renderer, over a
 * real router.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/event.h>

#include "fs/fs_i.h"

struct ctx {
	struct event_base *base;
	router_t *r;
	struct fs_itable it;
};

static router_job_t *make_job(struct ctx *c, const char *ns, uint32_t ranks,
			      bool exit_them)
{
	for (uint32_t i = 0; i < ranks; i++) {
		router_proc_t p;
		struct router_rank_info info = {.pid = 100 + i,
						.host = "h",
						.uid = 1000,
						.gid = 100,
						.job_size = ranks};
		router_rank_t *rk;

		assert_int_equal(router_proc_set(&p, ns, i), 0);
		assert_int_equal(
		    router_rank_register(c->r, &p, &info, NULL, NULL, &rk), 0);
		if (exit_them)
			router_rank_exit(rk, ROUTER_STATE_EXITED, 0);
	}
	return router_job_lookup(c->r, ns);
}

static int setup(void **state)
{
	struct ctx *c = calloc(1, sizeof(*c));

	assert_non_null(c);
	c->base = event_base_new();
	assert_non_null(c->base);
	assert_int_equal(router_new(c->base, NULL, &c->r), 0);
	fs_itable_init(&c->it);
	*state = c;
	return 0;
}

static int teardown(void **state)
{
	struct ctx *c = *state;

	fs_itable_release(&c->it);
	router_free(c->r);
	event_base_free(c->base);
	free(c);
	return 0;
}

static void test_stable_numbers(void **state)
{
	struct ctx *c = *state;
	router_job_t *job = make_job(c, "a", 2, false);
	struct fs_inode *d, *o0, *o1, *again;

	d = fs_inode_ensure(&c->it, FS_K_JOB, job, ROUTER_RANK_WILDCARD);
	o0 = fs_inode_ensure(&c->it, FS_K_STDOUT, job, 0);
	o1 = fs_inode_ensure(&c->it, FS_K_STDOUT, job, 1);
	assert_non_null(d);
	assert_true(d->ino > FUSE_ROOT_ID);
	assert_true(o0->ino != o1->ino && o0->ino != d->ino);
	again = fs_inode_ensure(&c->it, FS_K_STDOUT, job, 0);
	assert_ptr_equal(again, o0);
	assert_ptr_equal(fs_inode_get(&c->it, o1->ino), o1);
	assert_null(fs_inode_get(&c->it, 999999));
	/* same rank, other kind: another inode */
	assert_true(fs_inode_ensure(&c->it, FS_K_STDERR, job, 0)->ino !=
		    o0->ino);
}

static void test_growth(void **state)
{
	struct ctx *c = *state;
	router_job_t *job = make_job(c, "g", 1, false);
	uint64_t inos[1000];

	for (uint32_t i = 0; i < 1000; i++)
		inos[i] = fs_inode_ensure(&c->it, FS_K_RANK, job, i)->ino;
	for (uint32_t i = 0; i < 1000; i++) {
		struct fs_inode *in = fs_inode_get(&c->it, inos[i]);

		assert_non_null(in);
		assert_int_equal(in->rank, i);
		assert_ptr_equal(fs_inode_ensure(&c->it, FS_K_RANK, job, i),
				 in);
	}
	assert_int_equal(c->it.count, 1000);
}

static void test_gc_removed_jobs(void **state)
{
	struct ctx *c = *state;
	router_job_t *live = make_job(c, "live", 1, false);
	router_job_t *done = make_job(c, "done", 1, true);
	struct fs_inode *l, *d, *held;
	uint64_t dino, hino;

	l = fs_inode_ensure(&c->it, FS_K_JOB, live, ROUTER_RANK_WILDCARD);
	d = fs_inode_ensure(&c->it, FS_K_JOB, done, ROUTER_RANK_WILDCARD);
	held = fs_inode_ensure(&c->it, FS_K_STDOUT, done, 0);
	held->nlookup = 1; /* the kernel still holds it */
	dino = d->ino;
	hino = held->ino;
	assert_int_equal(router_job_remove(c->r, live), ROUTER_ERR_BUSY);
	assert_int_equal(router_job_remove(c->r, done), 0);
	fs_itable_gc(&c->it);
	assert_ptr_equal(fs_inode_get(&c->it, l->ino), l);
	assert_null(fs_inode_get(&c->it, dino));
	/* a looked-up entry keeps its job alive and readable */
	held = fs_inode_get(&c->it, hino);
	assert_non_null(held);
	assert_true(router_job_removed(held->job));
	assert_string_equal(router_job_nspace(held->job), "done");
	/* a re-run under the same name gets new numbers */
	{
		router_job_t *again = make_job(c, "done", 1, false);
		struct fs_inode *n = fs_inode_ensure(&c->it, FS_K_JOB, again,
						     ROUTER_RANK_WILDCARD);

		assert_true(n->ino > hino);
	}
	fs_inode_free(&c->it, held);
	assert_null(fs_inode_get(&c->it, hino));
}

static void test_info_render(void **state)
{
	struct ctx *c = *state;
	router_job_t *job = make_job(c, "inf", 3, true);
	char *text;
	size_t len;

	assert_int_equal(fs_info_render(job, 1, &text, &len), 0);
	assert_int_equal(strlen(text), len);
	assert_non_null(strstr(text, "nspace: inf\nrank: 1\nstate: exited\n"));
	assert_non_null(strstr(text, "pid: 101\nhost: h\n"));
	assert_non_null(strstr(text, "uid: 1000\ngid: 100\n"));
	static const char *const keys[] = {
	    "stdout_bytes: 0\n", "stderr_bytes: 0\n", "stdin_bytes: 0\n",
	    "stdout_xoff: 0\n",	 "stdout_xon: 0\n",   "stderr_xoff: 0\n",
	    "stderr_xon: 0\n",	 "stdin_xoff: 0\n",   "stdin_xon: 0\n",
	    "dropped_bytes: 0\n"};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		assert_non_null(strstr(text, keys[i]));
	free(text);
	assert_int_equal(fs_info_render(job, ROUTER_RANK_WILDCARD, &text, &len),
			 0);
	assert_non_null(strstr(text, "ranks: 3\njob_size: 3\n"));
	assert_non_null(strstr(text, "pid: -1\n"));
	free(text);
	assert_int_equal(fs_info_render(job, 7, &text, &len), -ENOENT);
	assert_null(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_stable_numbers, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_growth, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_gc_removed_jobs, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_info_render, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
