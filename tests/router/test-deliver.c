/* SPDX-License-Identifier: MIT */
/* router_deliver(): both forms, return codes, cbfunc exactly once,
 * router_defer(), subscribers, flush. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "harness.h"

struct thr {
	struct h *h;
	int rc[64];
	int n;
	atomic_int done;
	bool blocking;
	int cnt[2];
};

static void *deliver_thread(void *arg)
{
	struct thr *t = arg;
	router_proc_t p;
	char msg[32];

	router_proc_set(&p, "thr", 3);
	for (int i = 0; i < t->n; i++) {
		snprintf(msg, sizeof(msg), "line %02d\n", i);
		t->rc[i] = router_deliver(t->h->r, &p, ROUTER_CH_STDOUT, msg,
					  strlen(msg), NULL, NULL, NULL);
	}
	atomic_store(&t->done, 1);
	return NULL;
}

static void blocking_from_other_thread(void **state)
{
	struct h *h = h_new(NULL);
	struct thr t = {.h = h, .n = 20};
	pthread_t th;
	router_reader_t *rd;
	router_job_t *job;
	char buf[1024];
	uint64_t off = 0;

	(void)state;
	assert_int_equal(pthread_create(&th, NULL, deliver_thread, &t), 0);
	while (!atomic_load(&t.done))
		event_base_loop(h->base, EVLOOP_ONCE);
	pthread_join(th, NULL);
	for (int i = 0; i < t.n; i++)
		assert_int_equal(t.rc[i], ROUTER_OPERATION_SUCCEEDED);
	/* Registered on the fly, every byte there, in order. */
	job = router_job_lookup(h->r, "thr");
	assert_non_null(job);
	assert_non_null(router_job_rank(job, 3));
	assert_int_equal(
	    router_reader_open(job, 3, ROUTER_CH_STDOUT, 0, NULL, NULL, &rd),
	    0);
	assert_int_equal(h_drain(rd, &off, buf, sizeof(buf)), 20 * 8);
	assert_memory_equal(buf, "line 00\nline 01\n", 16);
	assert_memory_equal(buf + 19 * 8, "line 19\n", 8);
	router_reader_close(rd);
	h_free(h);
}

static pthread_t loop_tid;
static atomic_int nb_cbs, nb_wrong_thread;

static void nb_cb(int status, void *cbdata)
{
	(void)cbdata;
	if (!pthread_equal(pthread_self(), loop_tid) || status != 0)
		atomic_fetch_add(&nb_wrong_thread, 1);
	atomic_fetch_add(&nb_cbs, 1);
}

static const char nb_msg[] = "from a thread\n";

static void *nb_thread(void *arg)
{
	struct thr *t = arg;
	router_proc_t p;

	router_proc_set(&p, "nb", 0);
	for (int i = 0; i < t->n; i++)
		t->rc[i] = router_deliver(t->h->r, &p, ROUTER_CH_STDOUT, nb_msg,
					  strlen(nb_msg), NULL, nb_cb, NULL);
	atomic_store(&t->done, 1);
	return NULL;
}

static void nonblocking_from_other_thread(void **state)
{
	struct h *h = h_new(NULL);
	struct thr t = {.h = h, .n = 30};
	pthread_t th;
	struct router_stats st;

	(void)state;
	loop_tid = pthread_self();
	atomic_store(&nb_cbs, 0);
	assert_int_equal(pthread_create(&th, NULL, nb_thread, &t), 0);
	while (atomic_load(&nb_cbs) < t.n)
		event_base_loop(h->base, EVLOOP_ONCE);
	pthread_join(th, NULL);
	for (int i = 0; i < t.n; i++)
		assert_int_equal(t.rc[i], ROUTER_SUCCESS);
	assert_int_equal(atomic_load(&nb_wrong_thread), 0);
	router_job_stats(router_job_lookup(h->r, "nb"), &st);
	assert_int_equal(st.stdout_bytes, t.n * strlen(nb_msg));
	h_free(h);
}

struct until_na {
	struct h *h;
	atomic_int ok, na, other;
};

static void *until_na_thread(void *arg)
{
	struct until_na *u = arg;
	router_proc_t p;

	router_proc_set(&p, "na", 0);
	for (;;) {
		int rc = router_deliver(u->h->r, &p, ROUTER_CH_STDOUT, "z", 1,
					NULL, NULL, NULL);

		if (rc == ROUTER_OPERATION_SUCCEEDED) {
			atomic_fetch_add(&u->ok, 1);
		} else {
			if (rc == ROUTER_ERR_NOT_AVAILABLE)
				atomic_fetch_add(&u->na, 1);
			else
				atomic_fetch_add(&u->other, 1);
			break;
		}
	}
	return NULL;
}

/* A blocked caller is answered NOT_AVAILABLE by shutdown, never hangs. */
static void blocking_caller_at_shutdown(void **state)
{
	struct h *h = h_new(NULL);
	struct until_na u = {.h = h};
	pthread_t th;

	(void)state;
	assert_int_equal(pthread_create(&th, NULL, until_na_thread, &u), 0);
	while (atomic_load(&u.ok) < 3)
		event_base_loop(h->base, EVLOOP_ONCE);
	router_shutdown(h->r);
	pthread_join(th, NULL);
	assert_int_equal(atomic_load(&u.na), 1);
	assert_int_equal(atomic_load(&u.other), 0);
	h_free(h);
}

struct moved {
	struct h *h;
	atomic_int ready, stop, rc_on_loop;
};

/* Thread B declares itself the loop thread and runs the loop. */
static void *loop_thread_b(void *arg)
{
	struct moved *m = arg;
	router_proc_t p;

	router_set_loop_thread(m->h->r);
	router_proc_set(&p, "mv", 0);
	atomic_store(&m->rc_on_loop,
		     router_deliver(m->h->r, &p, ROUTER_CH_STDOUT, "x", 1, NULL,
				    NULL, NULL));
	atomic_store(&m->ready, 1);
	while (!atomic_load(&m->stop))
		event_base_loop(m->h->base, EVLOOP_ONCE);
	return NULL;
}

static void stop_loop(void *arg)
{
	atomic_store(&((struct moved *)arg)->stop, 1);
}

static void set_loop_thread(void **state)
{
	struct h *h = h_new(NULL);
	struct moved m = {.h = h};
	router_proc_t p;
	pthread_t th;

	(void)state;
	assert_int_equal(pthread_create(&th, NULL, loop_thread_b, &m), 0);
	while (!atomic_load(&m.ready))
		sched_yield();
	assert_int_equal(atomic_load(&m.rc_on_loop), ROUTER_WOULD_BLOCK);
	/* This thread is now "another thread": the blocking form works. */
	router_proc_set(&p, "mv", 0);
	assert_int_equal(router_deliver(h->r, &p, ROUTER_CH_STDOUT, "y\n", 2,
					NULL, NULL, NULL),
			 ROUTER_OPERATION_SUCCEEDED);
	assert_int_equal(router_defer(h->r, stop_loop, &m), 0);
	pthread_join(th, NULL);
	router_set_loop_thread(h->r);
	assert_non_null(router_job_lookup(h->r, "mv"));
	h_free(h);
}

static void would_block_on_loop_thread(void **state)
{
	struct h *h = h_new(NULL);
	router_proc_t p;

	(void)state;
	router_proc_set(&p, "wb", 0);
	assert_int_equal(router_deliver(h->r, &p, ROUTER_CH_STDOUT, "x", 1,
					NULL, NULL, NULL),
			 ROUTER_WOULD_BLOCK);
	assert_int_equal(h->nlog, 1);
	assert_non_null(strstr(h->log, "router_deliver"));
	/* Nothing done. */
	assert_null(router_job_lookup(h->r, "wb"));
	h_free(h);
}

static void return_codes(void **state)
{
	struct h *h = h_new(NULL);
	router_proc_t p;
	int cnt[2] = {0};

	(void)state;
	router_proc_set(&p, "rc", 0);
	assert_int_equal(router_deliver(NULL, &p, ROUTER_CH_STDOUT, "x", 1,
					NULL, h_cb_count, cnt),
			 ROUTER_ERR_INIT);
	assert_int_equal(router_deliver(h->r, NULL, ROUTER_CH_STDOUT, "x", 1,
					NULL, h_cb_count, cnt),
			 ROUTER_ERR_BAD_PARAM);
	assert_int_equal(router_deliver(h->r, &p, ROUTER_CH_STDIN, "x", 1, NULL,
					h_cb_count, cnt),
			 ROUTER_ERR_BAD_PARAM);
	assert_int_equal(router_deliver(h->r, &p,
					ROUTER_CH_STDOUT | ROUTER_CH_STDERR,
					"x", 1, NULL, h_cb_count, cnt),
			 ROUTER_ERR_BAD_PARAM);
	assert_int_equal(router_deliver(h->r, &p, ROUTER_CH_STDOUT, NULL, 1,
					NULL, h_cb_count, cnt),
			 ROUTER_ERR_BAD_PARAM);
	p.rank = ROUTER_RANK_WILDCARD;
	assert_int_equal(router_deliver(h->r, &p, ROUTER_CH_STDOUT, "x", 1,
					NULL, h_cb_count, cnt),
			 ROUTER_ERR_BAD_PARAM);
	p.rank = 0;
	strcpy(p.nspace, "..");
	assert_int_equal(router_deliver(h->r, &p, ROUTER_CH_STDOUT, "x", 1,
					NULL, h_cb_count, cnt),
			 ROUTER_ERR_BAD_PARAM);
	/* Bad input changed nothing. */
	assert_null(router_job_first(h->r));
	h_loop(h);
	assert_int_equal(cnt[0], 0);
	/* Zero length with COMPLETE is just EOF. */
	assert_int_equal(h_put(h, "rc", 0, ROUTER_CH_STDERR, NULL, 0,
			       ROUTER_DIR_COMPLETE, ROUTER_DIR_COMPLETE, cnt),
			 ROUTER_SUCCESS);
	h_loop(h);
	assert_int_equal(cnt[0], 1);
	{
		struct router_stream_attr a;

		assert_int_equal(
		    router_stream_attr(router_job_lookup(h->r, "rc"), 0,
				       ROUTER_CH_STDERR, &a),
		    0);
		assert_true(a.complete);
		assert_int_equal(a.size, 0);
	}
	/* After shutdown: NOT_AVAILABLE, no callback. */
	router_shutdown(h->r);
	assert_int_equal(h_put(h, "rc", 0, ROUTER_CH_STDOUT, "x", 1, 0, 0, cnt),
			 ROUTER_ERR_NOT_AVAILABLE);
	assert_int_equal(router_defer(h->r, (void (*)(void *))free, NULL),
			 ROUTER_ERR_NOT_AVAILABLE);
	h_loop(h);
	assert_int_equal(cnt[0], 1);
	h_free(h);
}

static void count_defer(void *arg)
{
	(*(int *)arg)++;
}

/* Callbacks pending at shutdown/free fire exactly once. */
static void cb_once_on_teardown(void **state)
{
	struct h *h = h_new(NULL);
	int cnt[2] = {0}, deferred = 0;

	(void)state;
	for (int i = 0; i < 10; i++)
		assert_int_equal(h_puts(h, "td", 0, "x\n"), 0);
	{
		/* cnt-counting variant */
		for (int i = 0; i < 5; i++)
			assert_int_equal(h_put(h, "td", 1, ROUTER_CH_STDOUT,
					       "y", 1, 0, 0, cnt),
					 0);
	}
	assert_int_equal(router_defer(h->r, count_defer, &deferred), 0);
	assert_int_equal(cnt[0], 0);
	/* No loop iteration at all: router_free() must still answer. */
	router_free(h->r);
	h->r = NULL;
	assert_int_equal(cnt[0], 5);
	assert_int_equal(cnt[1], ROUTER_SUCCESS);
	assert_int_equal(deferred, 1);
	event_base_free(h->base);
	iofs_log_free(h->lg);
	free(h);
}

struct frag_log {
	int n, complete, bytes;
	char last[64];
};

static void on_frag(void *cbdata, const router_proc_t *src, uint32_t channel,
		    const void *bytes, size_t len,
		    const router_directives_t *dirs)
{
	struct frag_log *f = cbdata;

	(void)src;
	(void)channel;
	f->n++;
	f->bytes += (int)len;
	if (len == 0 && router_dir_on(dirs, ROUTER_DIR_COMPLETE))
		f->complete++;
	if (len && len < sizeof(f->last)) {
		memcpy(f->last, bytes, len);
		f->last[len] = 0;
	}
}

static void subscribers(void **state)
{
	struct h *h = h_new(NULL);
	struct frag_log all = {0}, local = {0}, r1 = {0}, other = {0};
	router_sub_t *sa, *sl, *s1, *so;

	(void)state;
	assert_int_equal(router_subscribe(h->r, NULL, ROUTER_RANK_WILDCARD,
					  ROUTER_CH_STDOUT | ROUTER_CH_STDERR,
					  0, on_frag, &all, &sa),
			 0);
	assert_int_equal(router_subscribe(h->r, "sub", ROUTER_RANK_WILDCARD,
					  ROUTER_CH_STDOUT, ROUTER_SUB_LOCAL,
					  on_frag, &local, &sl),
			 0);
	assert_int_equal(router_subscribe(h->r, "sub", 1, ROUTER_CH_STDOUT, 0,
					  on_frag, &r1, &s1),
			 0);
	assert_int_equal(router_subscribe(h->r, "zzz", ROUTER_RANK_WILDCARD,
					  ROUTER_CH_STDOUT, 0, on_frag, &other,
					  &so),
			 0);
	assert_int_equal(router_subscribe(h->r, "a/b", 0, ROUTER_CH_STDOUT, 0,
					  on_frag, &other, &so),
			 ROUTER_ERR_BAD_PARAM);
	h_puts(h, "sub", 0, "abc");
	assert_int_equal(all.n, 1); /* synchronously inside deliver */
	h_put(h, "sub", 1, ROUTER_CH_STDOUT, "def", 3, ROUTER_DIR_LOCAL_OUTPUT,
	      0, NULL);
	h_put(h, "sub", 1, ROUTER_CH_STDERR, "ghi", 3, 0, 0, NULL);
	h_put(h, "sub", 1, ROUTER_CH_STDOUT, "jk", 2, ROUTER_DIR_LOCAL_OUTPUT,
	      ROUTER_DIR_LOCAL_OUTPUT, NULL);
	assert_int_equal(all.n, 4);
	assert_int_equal(local.n, 2); /* LOCAL_OUTPUT=false skipped */
	assert_string_equal(local.last, "jk");
	assert_int_equal(r1.n, 2);
	assert_int_equal(other.n, 0);
	router_unsubscribe(sl);
	router_rank_exit(router_job_rank(router_job_lookup(h->r, "sub"), 1),
			 ROUTER_STATE_EXITED, 0);
	assert_int_equal(all.complete, 2);
	assert_int_equal(r1.complete, 1);
	assert_int_equal(local.complete, 0);
	router_unsubscribe(sa);
	router_unsubscribe(s1);
	router_unsubscribe(NULL);
	h_free(h); /* frees "zzz" sub */
}

static void flush_waits_for_pushes(void **state)
{
	struct h *h = h_new(NULL);
	router_job_t *job;
	int pc[2] = {0}, fc[2] = {0};

	(void)state;
	h_reg(h, "fl", 0, 1);
	job = router_job_lookup(h->r, "fl");
	router_stdin_flow(h->rk[0], true);
	assert_int_equal(router_push(job, 0, "in", 2, 0, h_cb_count, pc, NULL),
			 0);
	assert_int_equal(router_flush(h->r, h_cb_count, fc), 0);
	h_loop(h);
	assert_int_equal(pc[0], 0);
	assert_int_equal(fc[0], 0);
	router_stdin_flow(h->rk[0], false);
	assert_int_equal(fc[0], 0); /* never inside the call */
	h_loop(h);
	assert_int_equal(pc[0], 1);
	assert_int_equal(fc[0], 1);
	assert_int_equal(fc[1], 0);
	/* Nothing pending: completes on the next loop pass. */
	assert_int_equal(router_flush(h->r, h_cb_count, fc), 0);
	assert_int_equal(fc[0], 1);
	h_loop(h);
	assert_int_equal(fc[0], 2);
	assert_int_equal(router_flush(NULL, h_cb_count, fc), ROUTER_ERR_INIT);
	h_free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(blocking_from_other_thread),
	    cmocka_unit_test(nonblocking_from_other_thread),
	    cmocka_unit_test(blocking_caller_at_shutdown),
	    cmocka_unit_test(set_loop_thread),
	    cmocka_unit_test(would_block_on_loop_thread),
	    cmocka_unit_test(return_codes),
	    cmocka_unit_test(cb_once_on_teardown),
	    cmocka_unit_test(subscribers),
	    cmocka_unit_test(flush_waits_for_pushes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
