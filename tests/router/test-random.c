/* SPDX-License-Identifier: MIT */
/* Random API sequences (a model check): whatever the order of delivers,
 * reads, reader opens/closes, exits, re-registrations, pushes and sink
 * flow, sinks that complete later (ROUTER_STDIN_PENDING), job-wide sinks
 * (stdin_write_job) next to per-rank ones, the flow calls
 * alternate strictly, every XOFF is paired by an XON after shutdown, no
 * stdin is left unacknowledged, and every callback fires exactly once. */
#include "harness.h"

#define NJ  3
#define NR  4
#define NRD 16

struct world {
	struct h *h;
	struct flowrec fr[NJ][NR]; /* the adapter's view, per (job, rank) */
	router_rank_t *rk[NJ][NR];
	int cbs_expected, cbs_fired;
	router_reader_t *rd[NRD];
	uint64_t off[NRD];
	unsigned long rng;
};

static unsigned rnd(struct world *w, unsigned n)
{
	w->rng = w->rng * 6364136223846793005ul + 1442695040888963407ul;
	return (unsigned)((w->rng >> 33) % n);
}

static void count_cb(int status, void *cbdata)
{
	(void)status;
	((struct world *)cbdata)->cbs_fired++;
}

static const char *ns(int j)
{
	static const char *n[NJ] = {"ja", "jb", "jc"};

	return n[j];
}

/* A job-wide sink: pending (or not) for every target like targets[0]. */
static int job_write(void *ctx, router_rank_t *const *targets, size_t n,
		     const void *b, size_t len)
{
	(void)targets;
	(void)n;
	(void)b;
	(void)len;
	return ((struct flowrec *)ctx)->pending ? ROUTER_STDIN_PENDING : 0;
}

static const struct router_source_ops job_ops = {
    .flow = h_flow,
    .stdin_write = h_stdin_write,
    .stdin_eof = h_stdin_eof,
    .stdin_write_job = job_write,
};

static void reg(struct world *w, int j, int r)
{
	router_proc_t p;
	struct router_rank_info info = {.pid = r, .job_size = NR};

	router_proc_set(&p, ns(j), (uint32_t)r);
	w->fr[j][r].pending = rnd(w, 2);
	if (router_rank_register(w->h->r, &p, &info,
				 rnd(w, 3) ? &job_ops : &h_ops, &w->fr[j][r],
				 &w->rk[j][r]) != 0)
		w->rk[j][r] = NULL;
}

static void step(struct world *w)
{
	struct h *h = w->h;
	int j = (int)rnd(w, NJ), r = (int)rnd(w, NR), i = (int)rnd(w, NRD);
	router_job_t *job = router_job_lookup(h->r, ns(j));
	static char data[3000];
	router_rank_t *rk = job ? router_job_rank(job, (uint32_t)r) : NULL;
	bool running = rk && w->rk[j][r] == rk;

	switch (rnd(w, 13)) {
	case 0:
	case 1:
	case 2: { /* deliver, maybe with directives */
		router_proc_t p;
		router_directives_t d = {rnd(w, 128), rnd(w, 128)};
		size_t n = rnd(w, sizeof(data));

		d.set &= ~ROUTER_DIR_COMPLETE;
		router_proc_set(&p, ns(j), (uint32_t)r);
		if (router_deliver(h->r, &p,
				   rnd(w, 2) ? ROUTER_CH_STDOUT
					     : ROUTER_CH_STDERR,
				   data, n, rnd(w, 2) ? &d : NULL, count_cb,
				   w) == ROUTER_SUCCESS)
			w->cbs_expected++;
		break;
	}
	case 3: /* open a reader */
		if (!w->rd[i] && job &&
		    router_reader_open(
			job, rnd(w, 3) ? (uint32_t)r : ROUTER_RANK_WILDCARD,
			rnd(w, 2) ? ROUTER_CH_STDOUT : ROUTER_CH_STDERR,
			rnd(w, 3) ? 0 : ROUTER_READER_NONBLOCK, NULL, NULL,
			&w->rd[i]) == 0)
			w->off[i] = rnd(w, 2) ? 0 : rnd(w, 100000);
		break;
	case 4:
	case 5: /* read */
		if (w->rd[i]) {
			struct iovec iov[2];
			int c;
			size_t n;

			if (router_reader_read(w->rd[i], w->off[i],
					       1 + rnd(w, 20000), iov, &c,
					       &n) == 0)
				w->off[i] += n;
		}
		break;
	case 6: /* close a reader */
		router_reader_close(w->rd[i]);
		w->rd[i] = NULL;
		break;
	case 7: /* rank exits */
		if (running && rnd(w, 3) == 0) {
			router_rank_exit(rk,
					 rnd(w, 2) ? ROUTER_STATE_EXITED
						   : ROUTER_STATE_LOST,
					 (int)rnd(w, 3));
			w->rk[j][r] = NULL;
		}
		break;
	case 8: /* (re-)register: EXISTS, or a replacement of the job */
		if (!running)
			reg(w, j, r);
		break;
	case 9: /* stdin */
		if (job &&
		    router_push(job,
				rnd(w, 2) ? (uint32_t)r : ROUTER_RANK_WILDCARD,
				data, 1 + rnd(w, 100), 0, count_cb, w,
				NULL) == ROUTER_SUCCESS)
			w->cbs_expected++;
		break;
	case 10: /* the sink's flow */
		if (running)
			router_stdin_flow(rk, rnd(w, 2));
		break;
	case 12: /* a pending sink acknowledges its oldest write */
		if (running)
			router_stdin_written(rk, rnd(w, 4) ? 0 : -EPIPE);
		break;
	case 11: /* time passes, the loop runs, maybe a remove */
		h->now += rnd(w, 200) * 1000000ull;
		router_run_timers(h->r);
		h_loop(h);
		if (job && rnd(w, 4) == 0 && router_job_remove(h->r, job) == 0)
			for (int k = 0; k < NR; k++)
				w->rk[j][k] = NULL;
		break;
	}
}

static void random_sequences(void **state)
{
	(void)state;
	for (unsigned long seed = 1; seed <= 40; seed++) {
		struct router_config cfg = {.window = 2048 + (seed % 8) * 1024,
					    .budget = 1 << 20};
		struct world *w = calloc(1, sizeof(*w));
		uint64_t rk_xoff = 0, rk_xon = 0;
		int fr_xoff = 0, fr_xon = 0, bad = 0;

		w->rng = seed * 0x9e3779b97f4a7c15ul;
		w->h = h_new(&cfg);
		for (int j = 0; j < NJ; j++)
			for (int r = 0; r < NR; r++)
				reg(w, j, r);
		for (int s = 0; s < 1500; s++)
			step(w);
		/* Counters of the ranks still registered match the adapter
		 * (replaced jobs took theirs with them). */
		router_shutdown(w->h->r);
		h_loop(w->h);
		for (int j = 0; j < NJ; j++) {
			router_job_t *job = router_job_lookup(w->h->r, ns(j));

			for (size_t k = 0;
			     job && k < router_job_rank_count(job); k++) {
				struct router_stats st;

				router_rank_stats(router_job_rank_at(job, k),
						  &st);
				rk_xoff += st.stdout_xoff + st.stderr_xoff +
					   st.stdin_xoff;
				rk_xon += st.stdout_xon + st.stderr_xon +
					  st.stdin_xon;
				assert_int_equal(st.stdin_unacked, 0);
			}
		}
		assert_int_equal(rk_xoff, rk_xon);
		for (int i = 0; i < NRD; i++)
			router_reader_close(w->rd[i]);
		router_free(w->h->r);
		w->h->r = NULL;
		for (int j = 0; j < NJ; j++)
			for (int r = 0; r < NR; r++)
				for (int ch = 0; ch < 16; ch++) {
					fr_xoff += w->fr[j][r].xoff[ch];
					fr_xon += w->fr[j][r].xon[ch];
					bad += w->fr[j][r].bad;
					assert_false(w->fr[j][r].held[ch]);
				}
		assert_int_equal(bad, 0);
		assert_int_equal(fr_xoff, fr_xon);
		assert_int_equal(w->cbs_fired, w->cbs_expected);
		if (seed % 10 == 0)
			print_message(
			    "seed %lu: %d XOFF/XON pairs, %d callbacks\n", seed,
			    fr_xoff, w->cbs_fired);
		event_base_free(w->h->base);
		iofs_log_free(w->h->lg);
		free(w->h);
		free(w);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(random_sequences),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
