/* SPDX-License-Identifier: MIT */
/* Shared test harness: a router on a pthread-locked base, a fake clock, a
 * log capture, a recording source adapter.  Header-only (static inline). */
#ifndef IOFS_TESTS_ROUTER_HARNESS_H
#define IOFS_TESTS_ROUTER_HARNESS_H

#include <errno.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "router/router.h"

struct flowrec {
	int xoff[16], xon[16]; /* indexed by channel bit */
	bool held[16];
	int bad;	  /* non-alternating calls */
	char in[1 << 16]; /* stdin received */
	size_t inlen;
	int eof;
	int write_rc;
	bool pending; /* stdin_write answers ROUTER_STDIN_PENDING */
};

struct h {
	struct event_base *base;
	router_t *r;
	uint64_t now;
	iofs_log_t *lg; /* its sink: h_log */
	char log[4096];
	int nlog;
	struct flowrec fr[8]; /* per rank 0..7 */
	router_rank_t *rk[8];
};

static inline uint64_t h_clock(void *ctx)
{
	return ((struct h *)ctx)->now;
}

static inline void h_log(void *ctx, int level, const char *msg)
{
	struct h *h = ctx;

	(void)level;
	snprintf(h->log, sizeof(h->log), "%s", msg);
	h->nlog++;
}

static inline void h_flow(void *ctx, router_rank_t *rank, uint32_t ch,
			  bool xoff)
{
	struct flowrec *f = ctx;

	(void)rank;
	if (f->held[ch] == xoff)
		f->bad++;
	f->held[ch] = xoff;
	if (xoff)
		f->xoff[ch]++;
	else
		f->xon[ch]++;
}

static inline int h_stdin_write(void *ctx, router_rank_t *rank, const void *b,
				size_t len)
{
	struct flowrec *f = ctx;

	(void)rank;
	if (f->write_rc)
		return f->write_rc;
	if (f->inlen + len <= sizeof(f->in))
		memcpy(f->in + f->inlen, b, len);
	f->inlen += len;
	return f->pending ? ROUTER_STDIN_PENDING : 0;
}

static inline void h_stdin_eof(void *ctx, router_rank_t *rank)
{
	(void)rank;
	((struct flowrec *)ctx)->eof++;
}

static const struct router_source_ops h_ops = {
    .flow = h_flow,
    .stdin_write = h_stdin_write,
    .stdin_eof = h_stdin_eof,
};

static inline struct h *h_new(const struct router_config *cfg_in)
{
	struct h *h = calloc(1, sizeof(*h));
	struct router_config cfg = {0};

	assert_non_null(h);
	if (cfg_in)
		cfg = *cfg_in;
	cfg.clock = h_clock;
	cfg.clock_ctx = h;
	assert_int_equal(iofs_log_new("test", &h->lg), 0);
	iofs_log_set_level(h->lg, LOG_DEBUG);
	iofs_log_set_sink(h->lg, h_log, h);
	cfg.log = h->lg;
	h->now = 1000000000ull * 1764600000ull;
	evthread_use_pthreads();
	h->base = event_base_new();
	assert_non_null(h->base);
	assert_int_equal(router_new(h->base, &cfg, &h->r), 0);
	return h;
}

static inline void h_free(struct h *h)
{
	router_free(h->r);
	event_base_free(h->base);
	iofs_log_free(h->lg);
	free(h);
}

static inline void h_loop(struct h *h)
{
	for (int i = 0; i < 8; i++)
		event_base_loop(h->base, EVLOOP_NONBLOCK);
}

/* Register rank @rank of @ns with the recording adapter (ranks 0..7). */
static inline router_rank_t *h_reg(struct h *h, const char *ns, uint32_t rank,
				   uint32_t job_size)
{
	router_proc_t p;
	struct router_rank_info info = {.pid = 100 + rank,
					.host = "node1",
					.uid = 1,
					.gid = 2,
					.job_size = job_size};
	router_rank_t *rk;

	assert_int_equal(router_proc_set(&p, ns, rank), 0);
	assert_int_equal(router_rank_register(h->r, &p, &info, &h_ops,
					      &h->fr[rank & 7], &rk),
			 0);
	h->rk[rank & 7] = rk;
	return rk;
}

static inline void h_cb_count(int status, void *cbdata)
{
	int *c = cbdata;

	c[0]++;
	c[1] = status;
}

/* Non-blocking deliver on the loop thread, completion counted in @cnt. */
static inline int h_put(struct h *h, const char *ns, uint32_t rank, uint32_t ch,
			const void *b, size_t len, uint32_t dirs_set,
			uint32_t dirs_val, int *cnt)
{
	router_proc_t p;
	router_directives_t d = {dirs_set, dirs_val};
	static int dummy[2];

	assert_int_equal(router_proc_set(&p, ns, rank), 0);
	return router_deliver(h->r, &p, ch, b, len, dirs_set ? &d : NULL,
			      h_cb_count, cnt ? cnt : dummy);
}

static inline int h_puts(struct h *h, const char *ns, uint32_t rank,
			 const char *s)
{
	return h_put(h, ns, rank, ROUTER_CH_STDOUT, s, strlen(s), 0, 0, NULL);
}

/* Read everything available at the reader's offset *off into @buf. */
static inline size_t h_drain(router_reader_t *rd, uint64_t *off, char *buf,
			     size_t cap)
{
	size_t got = 0;

	for (;;) {
		struct iovec iov[2];
		int cnt;
		size_t n;
		int rc = router_reader_read(rd, *off, cap - got, iov, &cnt, &n);

		if (rc != ROUTER_SUCCESS || n == 0 || got == cap)
			break;
		for (int i = 0; i < cnt; i++) {
			memcpy(buf + got, iov[i].iov_base, iov[i].iov_len);
			got += iov[i].iov_len;
		}
		*off += n;
	}
	return got;
}

static inline void h_ready_count(void *cbdata)
{
	(*(int *)cbdata)++;
}

#endif
