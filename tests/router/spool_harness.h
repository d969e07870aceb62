/* SPDX-License-Identifier: MIT */
/* Shared by the spool tests (test-spool.c, test-spool-caps.c): a router
 * over a real spool in a temporary directory, and a fake store that fails
 * or fills up on demand. */
#ifndef IOFS_TESTS_ROUTER_SPOOL_HARNESS_H
#define IOFS_TESTS_ROUTER_SPOOL_HARNESS_H

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/spool.h"
#include "tests/router/harness.h"

#define WIN 4096

struct sp {
	char dir[64];
	spool_t *sp;
	struct h *h;
};

static inline struct sp *sp_new(const struct router_store_ops *ops, void *ctx)
{
	struct sp *s = calloc(1, sizeof(*s));
	struct router_config cfg = {.window = WIN, .low_water = WIN / 4};
	char err[256];

	assert_non_null(s);
	snprintf(s->dir, sizeof(s->dir), "/tmp/iofs-spool.XXXXXX");
	assert_non_null(mkdtemp(s->dir));
	if (!ops) {
		assert_int_equal(spool_new(NULL, s->dir, err, sizeof(err),
					   &s->sp),
				 0);
		ops = spool_store_ops();
		ctx = s->sp;
	}
	cfg.store = ops;
	cfg.store_ctx = ctx;
	s->h = h_new(&cfg);
	return s;
}

static inline int count_entries(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* Remove @path and what is in it (two levels: DIR/<n>/files). */
static inline void rm_tree(const char *path, int depth)
{
	DIR *d = opendir(path);
	struct dirent *e;
	char sub[512];

	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if ((size_t)snprintf(sub, sizeof(sub), "%s/%s", path,
				     e->d_name) >= sizeof(sub))
			continue;
		if (unlink(sub) != 0 && depth > 0)
			rm_tree(sub, depth - 1);
	}
	if (d)
		closedir(d);
	rmdir(path);
}

/* @kept: job directories left for a restart (jobs still in the tree). */
static inline void sp_free_kept(struct sp *s, int kept)
{
	h_free(s->h);
	spool_free(s->sp);
	assert_int_equal(count_entries(s->dir), kept);
	rm_tree(s->dir, 1);
	free(s);
}

static inline void sp_free(struct sp *s)
{
	h_free(s->h);
	spool_free(s->sp);
	rm_tree(s->dir, 1);
	free(s);
}

static inline void fill(char *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (char)((i * 131 + seed) % 251);
}

/* A fake store: one buffer; appends beyond fail_after fail with err. */
struct fake {
	char data[65536];
	size_t len;
	size_t fail_after; /* appends beyond this many bytes fail */
	int err;	   /* with this -errno */
	int jobs, files;
	bool merged_too; /* the merged views are stored too */
	int drops;	 /* drop() calls: each frees the space (fail_after) */
};

static inline int fk_job_open(void *ctx, const char *ns, void **jh)
{
	(void)ns;
	((struct fake *)ctx)->jobs++;
	*jh = ctx;
	return 0;
}
static inline void fk_job_close(void *jh, bool discard)
{
	(void)discard;
	((struct fake *)jh)->jobs--;
}
static inline int fk_open(void *jh, uint32_t rank, uint32_t ch, void **h)
{
	struct fake *f = jh;

	if ((rank == ROUTER_RANK_WILDCARD && !f->merged_too) ||
	    ch != ROUTER_CH_STDOUT)
		return -EROFS;
	f->files++;
	*h = f;
	return 0;
}
static inline ssize_t fk_append(void *h, const struct iovec *iov, int cnt)
{
	struct fake *f = h;
	size_t n = 0;

	if (f->len >= f->fail_after)
		return f->err;
	for (int i = 0; i < cnt && f->len + n < f->fail_after; i++) {
		size_t k = iov[i].iov_len;

		if (k > f->fail_after - f->len - n) /* a short write */
			k = f->fail_after - f->len - n;
		memcpy(f->data + f->len + n, iov[i].iov_base, k);
		n += k;
	}
	f->len += n;
	return (ssize_t)n;
}
/* splice_in of the fake: read() consumes exactly what it copies, as
 * splice() moves exactly what it stores. */
static inline ssize_t fk_splice_in(void *h, int fd, void *buf, size_t n,
				   const void **bytes)
{
	struct fake *f = h;
	ssize_t r;

	if (f->len >= f->fail_after)
		return f->err;
	if (n > f->fail_after - f->len)
		n = f->fail_after - f->len;
	r = read(fd, f->data + f->len, n);
	if (r < 0)
		return -errno;
	memcpy(buf, f->data + f->len, (size_t)r);
	*bytes = buf;
	f->len += (size_t)r;
	return r;
}
static inline ssize_t fk_read_at(void *h, uint64_t off, void *buf, size_t n)
{
	struct fake *f = h;

	if (n > f->len - off)
		n = f->len - (size_t)off;
	memcpy(buf, f->data + off, n);
	return (ssize_t)n;
}
static inline void fk_close(void *h, bool discard)
{
	(void)discard;
	((struct fake *)h)->files--;
}
static inline void fk_drop(void *h, uint64_t to)
{
	struct fake *f = h;

	(void)to;
	f->drops++;
	f->fail_after = sizeof(f->data); /* the space comes back */
}
static const struct router_store_ops fk_drop_ops __attribute__((unused)) = {
    .job_open = fk_job_open,
    .job_close = fk_job_close,
    .open = fk_open,
    .append = fk_append,
    .read_at = fk_read_at,
    .close = fk_close,
    .drop = fk_drop,
};
static const struct router_store_ops fk_ops __attribute__((unused)) = {
    .job_open = fk_job_open,
    .job_close = fk_job_close,
    .open = fk_open,
    .append = fk_append,
    .read_at = fk_read_at,
    .close = fk_close,
};

/* A router over a new real spool with @cfg (its window, low water and
 * store set here). */
static inline struct sp *sp_cfg(struct router_config cfg)
{
	struct sp *s = calloc(1, sizeof(*s));
	char err[256];

	cfg.window = WIN;
	cfg.low_water = WIN / 4;
	assert_non_null(s);
	snprintf(s->dir, sizeof(s->dir), "/tmp/iofs-spool.XXXXXX");
	assert_non_null(mkdtemp(s->dir));
	assert_int_equal(spool_new(NULL, s->dir, err, sizeof(err), &s->sp), 0);
	cfg.store = spool_store_ops();
	cfg.store_ctx = s->sp;
	s->h = h_new(&cfg);
	return s;
}

/* A router over a real spool with caps. */
static inline struct sp *sp_caps(uint64_t stream, uint64_t job, uint64_t total)
{
	return sp_cfg((struct router_config){.store_max_stream = stream,
					     .store_max_job = job,
					     .store_max = total});
}

/* A running job of @n bytes of @in by user @uid, with a blocking reader
 * (*rd) opened at 0 before its first byte and never read: it keeps all
 * of the job's bytes from any cap.  Its rank: *rk. */
static inline void pinned_job_of(struct sp *s, const char *ns, uint32_t uid,
			  const char *in, size_t n, router_reader_t **rd,
			  router_rank_t **rk)
{
	router_proc_t p;
	struct router_rank_info info = {.pid = 1, .host = "h", .uid = uid,
					.gid = uid, .job_size = 1};

	assert_int_equal(router_proc_set(&p, ns, 0), 0);
	assert_int_equal(router_rank_register(s->h->r, &p, &info, NULL, NULL,
					      rk),
			 0);
	assert_int_equal(router_reader_open(router_job_lookup(s->h->r, ns), 0,
					    ROUTER_CH_STDOUT, 0, NULL, NULL,
					    rd),
			 0);
	for (size_t at = 0; at < n; at += 1000)
		h_put(s->h, ns, 0, ROUTER_CH_STDOUT, in + at, 1000, 0, 0, NULL);
}

/* Read all of a stream from offset 0; returns the bytes got. */
static inline size_t read_all(router_job_t *job, uint32_t rank, uint32_t ch,
		       char *out, size_t cap)
{
	router_reader_t *rd;
	uint64_t off = 0;
	size_t got;

	assert_int_equal(router_reader_open(job, rank, ch, 0, NULL, NULL, &rd),
			 0);
	got = h_drain(rd, &off, out, cap);
	assert_true(router_reader_eof(rd, off));
	router_reader_close(rd);
	return got;
}

/* Allocated bytes of DIR/<n>/@name (the first job directory found). */
static inline long long file_blocks(const char *dir, const char *job,
			     const char *name, long long *size)
{
	char path[256];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s/%s", dir, job, name);
	if (stat(path, &st) != 0)
		return -1;
	*size = st.st_size;
	return (long long)st.st_blocks * 512;
}


#endif
