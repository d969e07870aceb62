/* SPDX-License-Identifier: MIT */
/* The stage: rank files written with O_DIRECT through io_uring, exact
 * after a kill -9 (fs/spool_stage.h). */
#include "fs/spool_stage.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "fs/spool_i.h"
#include "iofs_config.h"

#define STAGE_HDR 4096u /* page 0; buffer i at STAGE_HDR + i * STRIDE + skew */
#define STAGE_STRIDE (SPOOL_STAGE_SLOT + 4096u)
#define STAGE_BYTES (STAGE_HDR + (size_t)SPOOL_STAGE_SLOTS * STAGE_STRIDE)
#define STAGE_MAGIC "IOFSSTG3"
#define STAGE_SUFFIX ".stage"
#define STAGE_BOUNCES 8 /* direct writes in flight at most, per daemon */

/* Page 0 of a stage file (mapped).  A buffer's len is stored after its
 * bytes and zeroed when its direct write completed: a restart writes back
 * the buffers with a length. */
struct stage_hdr {
	char magic[8];
	uint64_t evicted; /* a restart writes nothing below it */
	struct {
		uint64_t off, len;
	} slot[SPOOL_STAGE_SLOTS];
	/* A pipe read under way (the hand-over): @n bytes into buffer @slot
	 * at @at, whose first byte was peeked as @d0; the stage's byte there
	 * holds ~@d0 until the read lands.  Valid while @valid. */
	struct {
		uint64_t at, n;
		uint32_t slot;
		uint8_t d0, valid;
	} intent;
	/* where in its stride buffer i's first byte is: chosen so that pipe
	 * reads land on the pipe pages' alignment */
	uint32_t skew[SPOOL_STAGE_SLOTS];
};

static void stage_name(const struct spool_file *f, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s", f->name, STAGE_SUFFIX);
}

#if IOFS_HAVE_URING
#include <liburing.h>

/* One staged rank file; lives from spool_stage_open() to
 * spool_stage_close(), loop thread only. */
struct spool_stage {
	spool_stager_t *sg;
	struct spool_file *f;
	int dfd; /* the rank file, O_DIRECT */
	char *map; /* the stage file, mapped: header, then the buffers */
	struct stage_hdr *hdr;
	char *buf; /* map + STAGE_HDR: SPOOL_STAGE_SLOTS strides */
	int bidx[SPOOL_STAGE_SLOTS]; /* its write's bounce buffer, -1 none */
	uint32_t skew[SPOOL_STAGE_SLOTS];
	uint32_t w; /* stream offset % 4096 where the pipe's pages start */
	bool w_known;
	uint64_t off[SPOOL_STAGE_SLOTS]; /* buffer i holds [off, off + fill) */
	size_t fill[SPOOL_STAGE_SLOTS];
	bool busy[SPOOL_STAGE_SLOTS]; /* its write is in flight */
	int err[SPOOL_STAGE_SLOTS];   /* its write failed so: not on disk */
	int cur, inflight;
	uint64_t used_ns; /* last append */
	TAILQ_ENTRY(spool_stage) link; /* sg->stages, most recent first */
};

struct spool_stager {
	iofs_log_t *log; /* borrowed */
	int peek[2]; /* a scratch pipe: the first byte of a rank pipe, teed */
	struct io_uring ring;
	/* Aligned copies of the buffers being written (a buffer's bytes sit
	 * at its pipe alignment, not the disk's): STAGE_BOUNCES of
	 * SPOOL_STAGE_SLOT, registered with the ring when the memlock limit
	 * allows (no page pinning per write); bit b of bfree: b is free. */
	char *bounce;
	uint32_t bfree;
	bool fixed;
	TAILQ_HEAD(spool_stage_list, spool_stage) stages;
	unsigned n;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static char *slot_data(struct spool_stage *st, int i)
{
	return st->buf + (size_t)i * STAGE_STRIDE + st->skew[i];
}

int spool_stager_new(iofs_log_t *log, spool_stager_t **out)
{
	spool_stager_t *sg = calloc(1, sizeof(*sg));
	int rc;

	*out = NULL;
	if (!sg)
		return -ENOMEM;
	if (pipe2(sg->peek, O_CLOEXEC | O_NONBLOCK) != 0) {
		rc = -errno;
		free(sg);
		return rc;
	}
	rc = io_uring_queue_init(2 * STAGE_BOUNCES, &sg->ring, 0);
	if (rc < 0)
		goto fail_pipe;
	if (posix_memalign((void **)&sg->bounce, 4096,
			   (size_t)STAGE_BOUNCES * SPOOL_STAGE_SLOT) != 0) {
		rc = -ENOMEM;
		goto fail_ring;
	}
	sg->bfree = (1u << STAGE_BOUNCES) - 1;
	{
		struct iovec iov[STAGE_BOUNCES];

		for (int b = 0; b < STAGE_BOUNCES; b++) {
			iov[b].iov_base = sg->bounce + (size_t)b * SPOOL_STAGE_SLOT;
			iov[b].iov_len = SPOOL_STAGE_SLOT;
		}
		/* refused over RLIMIT_MEMLOCK: plain writes then */
		sg->fixed = io_uring_register_buffers(&sg->ring, iov,
						      STAGE_BOUNCES) == 0;
	}
	sg->log = log;
	TAILQ_INIT(&sg->stages);
	*out = sg;
	return 0;

fail_ring:
	io_uring_queue_exit(&sg->ring);
fail_pipe:
	close(sg->peek[0]);
	close(sg->peek[1]);
	free(sg);
	return rc;
}

void spool_stager_free(spool_stager_t *sg)
{
	if (!sg)
		return;
	io_uring_queue_exit(&sg->ring);
	free(sg->bounce);
	close(sg->peek[0]);
	close(sg->peek[1]);
	free(sg);
}

/* A buffer's write completed: a restart need not write it back. */
static void written(struct spool_stage *st, int i)
{
	__atomic_store_n(&st->hdr->slot[i].len, 0, __ATOMIC_RELEASE);
}

/* Take the completions there are; with @wait, at least one. */
static void reap(spool_stager_t *sg, bool wait)
{
	struct io_uring_cqe *cqe;

	for (;;) {
		int rc = wait ? io_uring_wait_cqe(&sg->ring, &cqe)
			      : io_uring_peek_cqe(&sg->ring, &cqe);
		if (rc == -EINTR)
			continue;
		if (rc < 0)
			return;
		uintptr_t ud = (uintptr_t)io_uring_cqe_get_data(cqe);
		struct spool_stage *st =
		    (struct spool_stage *)(ud & ~(uintptr_t)15);
		int i = (int)(ud & 15), res = cqe->res;

		io_uring_cqe_seen(&sg->ring, cqe);
		sg->bfree |= 1u << st->bidx[i];
		st->bidx[i] = -1;
		st->busy[i] = false;
		st->inflight--;
		if (res == (int)SPOOL_STAGE_SLOT) {
			st->err[i] = 0;
			written(st, i);
		} else {
			/* short: the disk filled up during it; again, whole */
			st->err[i] = res < 0 ? -res : ENOSPC;
		}
		wait = false;
	}
}

static int submit(struct spool_stage *st, int i)
{
	spool_stager_t *sg = st->sg;
	struct io_uring_sqe *sqe;
	char *copy;
	int b, rc;

	while (!sg->bfree) /* every bounce buffer is being written */
		reap(sg, true);
	b = __builtin_ctz(sg->bfree);
	sqe = io_uring_get_sqe(&sg->ring);
	if (!sqe) /* never: twice as many entries as bounce buffers */
		return -EBUSY;
	copy = sg->bounce + (size_t)b * SPOOL_STAGE_SLOT;
	memcpy(copy, slot_data(st, i), SPOOL_STAGE_SLOT);
	if (sg->fixed)
		io_uring_prep_write_fixed(sqe, st->dfd, copy, SPOOL_STAGE_SLOT,
					  st->off[i], b);
	else
		io_uring_prep_write(sqe, st->dfd, copy, SPOOL_STAGE_SLOT,
				    st->off[i]);
	io_uring_sqe_set_data(sqe, (void *)((uintptr_t)st | (uintptr_t)i));
	rc = io_uring_submit(&sg->ring);
	if (rc < 0)
		return rc;
	sg->bfree &= ~(1u << b);
	st->bidx[i] = b;
	st->busy[i] = true;
	st->err[i] = 0;
	st->inflight++;
	return 0;
}

/* Buffer @i ready for new bytes: its write waited for, a failed one tried
 * again (and waited for).  0, or the write's -errno. */
static int slot_free(struct spool_stage *st, int i)
{
	while (st->busy[i])
		reap(st->sg, true);
	if (st->err[i]) {
		int rc = submit(st, i);

		if (rc < 0)
			return rc;
		while (st->busy[i])
			reap(st->sg, true);
	}
	return st->err[i] ? -st->err[i] : 0;
}

bool spool_stage_want(spool_stager_t *sg, struct spool_file *f)
{
	return sg && !f->st && !f->no_stage && !f->mv &&
	       f->rank != SPOOL_NO_RANK && f->end >= SPOOL_STAGE_AFTER;
}

/* Make room for one more stage: close the least recently used one if it
 * has been idle for SPOOL_STAGE_IDLE_NS. */
static int stage_room(spool_stager_t *sg)
{
	struct spool_stage *old;

	if (sg->n < SPOOL_STAGE_MAX)
		return 0;
	old = TAILQ_LAST(&sg->stages, spool_stage_list);
	if (!old || now_ns() - old->used_ns < SPOOL_STAGE_IDLE_NS)
		return -EBUSY;
	spool_stage_close(old->f, false);
	return 0;
}

/* The stage file, mapped; buffer 0 starts with the head of the block the
 * rank file ends in. */
static int stage_make(struct spool_stage *st, int fd, uint64_t size)
{
	struct spool_file *f = st->f;
	char name[sizeof(f->name) + sizeof(STAGE_SUFFIX)];
	int sfd, rc = 0;

	stage_name(f, name, sizeof(name));
	sfd = openat(f->j->dirfd, name,
		     O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (sfd < 0)
		return -errno;
	/* blocks now: a full disk is an error here, never a SIGBUS later */
	if (fallocate(sfd, 0, 0, (off_t)STAGE_BYTES) != 0)
		rc = -errno;
	else if ((st->map = mmap(NULL, STAGE_BYTES, PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_POPULATE, sfd, 0)) == MAP_FAILED)
		rc = -errno;
	close(sfd);
	if (rc == 0) {
		st->hdr = (struct stage_hdr *)st->map;
		st->buf = st->map + STAGE_HDR;
		st->hdr->evicted = f->evicted;
		st->off[0] = size & ~(uint64_t)(ROUTER_STORE_ALIGN - 1);
		st->fill[0] = (size_t)(size - st->off[0]);
		if (st->fill[0])
			rc = pread_full(fd, slot_data(st, 0), st->fill[0],
					st->off[0]);
		st->hdr->slot[0].off = st->off[0];
		st->hdr->slot[0].len = st->fill[0];
		memcpy(st->hdr->magic, STAGE_MAGIC, sizeof(st->hdr->magic));
		if (rc < 0)
			munmap(st->map, STAGE_BYTES);
	}
	if (rc < 0)
		unlinkat(f->j->dirfd, name, 0);
	return rc;
}

int spool_stage_open(spool_stager_t *sg, struct spool_file *f)
{
	struct spool_stage *st;
	struct stat sb;
	int fd, rc;

	if ((rc = stage_room(sg)) < 0)
		return rc;
	fd = spool_file_fd(f);
	if (fd < 0)
		return fd;
	if (fstat(fd, &sb) != 0)
		return -errno;
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->f = f;
	for (int i = 0; i < SPOOL_STAGE_SLOTS; i++)
		st->bidx[i] = -1;
	st->dfd = openat(f->j->dirfd, f->name,
			 O_WRONLY | O_DIRECT | O_NOFOLLOW | O_CLOEXEC);
	if (st->dfd < 0) {
		rc = -errno;
		if (rc == -EINVAL) /* no O_DIRECT here: never */
			f->no_stage = true;
		goto fail_free;
	}
	rc = stage_make(st, fd, (uint64_t)sb.st_size);
	if (rc < 0)
		goto fail_close;
	if (f->j->sp->fl && st->off[0] > f->flushed) /* the buffered head */
		spool_flusher_queue(f->j->sp->fl, fd, f->flushed,
				    st->off[0] - f->flushed);
	st->sg = sg;
	st->used_ns = now_ns();
	TAILQ_INSERT_HEAD(&sg->stages, st, link);
	sg->n++;
	f->st = st;
	f->end = (uint64_t)sb.st_size;
	return 0;

fail_close:
	close(st->dfd);
fail_free:
	free(st);
	return rc;
}

/* Room for @n more bytes in the current buffer (the next one when it is
 * full): how many fit, or -errno (a failed write of the next buffer). */
static ssize_t slot_room(struct spool_stage *st, size_t n)
{
	int c = st->cur;

	if (st->fill[c] == SPOOL_STAGE_SLOT) {
		int next = (c + 1) % SPOOL_STAGE_SLOTS, rc = slot_free(st, next);

		if (rc < 0)
			return rc;
		st->off[next] = st->off[c] + SPOOL_STAGE_SLOT;
		st->fill[next] = 0;
		st->skew[next] = st->w_known ? (4096u - st->w) % 4096u : 0;
		st->hdr->skew[next] = st->skew[next];
		st->hdr->slot[next].off = st->off[next];
		st->cur = c = next;
	}
	return (ssize_t)(n < SPOOL_STAGE_SLOT - st->fill[c]
				 ? n
				 : SPOOL_STAGE_SLOT - st->fill[c]);
}

/* @n bytes went into the stage and the current buffer: count them, and
 * write the buffer when full. */
static void took(struct spool_stage *st, size_t n)
{
	int c = st->cur, rc;

	st->fill[c] += n;
	/* after the bytes: what a restart writes back */
	__atomic_store_n(&st->hdr->slot[c].len, st->fill[c], __ATOMIC_RELEASE);
	st->f->end += n;
	st->used_ns = now_ns();
	if (TAILQ_FIRST(&st->sg->stages) != st) {
		TAILQ_REMOVE(&st->sg->stages, st, link);
		TAILQ_INSERT_HEAD(&st->sg->stages, st, link);
	}
	if (st->fill[c] == SPOOL_STAGE_SLOT && (rc = submit(st, c)) < 0)
		st->err[c] = -rc; /* tried again when the buffer is needed */
}

ssize_t spool_stage_append(struct spool_file *f, const struct iovec *iov,
			   int iovcnt)
{
	struct spool_stage *st = f->st;
	size_t total = 0, done = 0;
	ssize_t room;

	reap(st->sg, false);
	for (int i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;
	room = slot_room(st, total);
	if (room <= 0)
		return room;
	for (int i = 0; i < iovcnt && done < (size_t)room; i++) {
		size_t m = iov[i].iov_len < (size_t)room - done
				   ? iov[i].iov_len
				   : (size_t)room - done;

		memcpy(slot_data(st, st->cur) + st->fill[st->cur] + done,
		       iov[i].iov_base, m);
		done += m;
	}
	took(st, done);
	return (ssize_t)done;
}

/* The hand-over: read the pipe straight into the stage, exactly as many
 * bytes as it holds, with the read's intent recorded first, so that a
 * restart can tell whether it happened (spool_stage_apply()). */
ssize_t spool_stage_splice(struct spool_file *f, int fd, size_t n,
			   const void **bytes)
{
	struct spool_stage *st = f->st;
	spool_stager_t *sg = st->sg;
	ssize_t room, r;
	uint8_t d0;
	int avail;
	char *at;

	reap(sg, false);
	do
		r = tee(fd, sg->peek[1], 1, SPLICE_F_NONBLOCK);
	while (r < 0 && errno == EINTR);
	if (r <= 0)
		return r == 0 ? 0 : -errno; /* the end, or empty (-EAGAIN) */
	if (read(sg->peek[0], &d0, 1) != 1)
		return -EIO;
	if (ioctl(fd, FIONREAD, &avail) != 0 || avail < 1)
		return -EIO;
	room = slot_room(st, (size_t)avail < n ? (size_t)avail : n);
	if (room <= 0)
		return room;
	at = slot_data(st, st->cur) + st->fill[st->cur];
	*at = (char)~d0;
	st->hdr->intent.slot = (uint32_t)st->cur;
	st->hdr->intent.at = st->fill[st->cur];
	st->hdr->intent.n = (uint64_t)room;
	st->hdr->intent.d0 = d0;
	__atomic_store_n(&st->hdr->intent.valid, 1, __ATOMIC_RELEASE);
	do
		r = read(fd, at, (size_t)room);
	while (r < 0 && errno == EINTR);
	if (r > 0)
		took(st, (size_t)r); /* publishes the buffer's new length */
	if (r == avail) { /* the pipe is empty: its next page starts here */
		st->w = (uint32_t)(f->end % 4096);
		st->w_known = true;
	}
	__atomic_store_n(&st->hdr->intent.valid, 0, __ATOMIC_RELEASE);
	if (r <= 0)
		return r == 0 ? -EIO : -errno;
	*bytes = at;
	return r;
}

/* Buffer @i holds bytes that may not be in the rank file yet. */
static bool pending(const struct spool_stage *st, int i)
{
	return st->fill[i] && (st->busy[i] || st->err[i] ||
			       (i == st->cur && st->fill[i] < SPOOL_STAGE_SLOT));
}

/* Bytes of buffers that may not be in the rank file are read from the
 * buffers (writes complete in any order: the stage may have a hole where
 * a later buffer's write completed first), the rest from the rank file. */
int spool_stage_pread(struct spool_file *f, void *buf, size_t n,
		      uint64_t off)
{
	struct spool_stage *st = f->st;
	char *out = buf;

	if (!st)
		return spool_file_fd(f) < 0 ? -EBADF
					    : pread_full(f->fd, buf, n, off);
	while (n) {
		size_t lim = n;
		int i, rc;

		for (i = 0; i < SPOOL_STAGE_SLOTS; i++) {
			if (!pending(st, i))
				continue;
			if (off >= st->off[i] && off < st->off[i] + st->fill[i])
				break;
			if (st->off[i] > off && st->off[i] - off < lim)
				lim = (size_t)(st->off[i] - off);
		}
		if (i < SPOOL_STAGE_SLOTS) {
			lim = (size_t)(st->off[i] + st->fill[i] - off);
			if (lim > n)
				lim = n;
			memcpy(out, slot_data(st, i) + (off - st->off[i]), lim);
		} else if (spool_file_fd(f) < 0) {
			return -EBADF;
		} else if ((rc = pread_full(f->fd, out, lim, off)) < 0) {
			return rc;
		}
		out += lim;
		off += lim;
		n -= lim;
	}
	return 0;
}

/* The first rank byte that may not be in the rank file yet. */
static uint64_t durable(const struct spool_stage *st)
{
	uint64_t d = st->off[st->cur] + st->fill[st->cur];

	for (int i = 0; i < SPOOL_STAGE_SLOTS; i++)
		if (pending(st, i) && st->off[i] < d)
			d = st->off[i];
	return d;
}

uint64_t spool_stage_durable(struct spool_file *f)
{
	return f->st ? durable(f->st) : UINT64_MAX;
}

void spool_stage_evicted(struct spool_file *f, uint64_t to)
{
	struct spool_stage *st = f->st;

	if (st && to > st->hdr->evicted)
		st->hdr->evicted = to;
}

/* The buffers with bytes not in the rank file yet (a failed direct write,
 * the last partial buffer), written through the page cache: 0 or -errno. */
static int write_pending(struct spool_stage *st)
{
	struct spool_file *f = st->f;
	int fd = openat(f->j->dirfd, f->name,
			O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
	int rc = 0;

	if (fd < 0)
		return -errno;
	for (int i = 0; i < SPOOL_STAGE_SLOTS && rc == 0; i++)
		if (pending(st, i)) /* none is in flight any more */
			rc = pwrite_full(fd, slot_data(st, i), st->fill[i],
					 st->off[i]);
	close(fd);
	return rc;
}

void spool_stage_close(struct spool_file *f, bool discard)
{
	struct spool_stage *st = f->st;
	char name[sizeof(f->name) + sizeof(STAGE_SUFFIX)];
	int rc;

	if (!st)
		return;
	while (st->inflight)
		reap(st->sg, true);
	stage_name(f, name, sizeof(name));
	rc = discard ? 0 : write_pending(st);
	if (rc < 0) /* the stage keeps them for the next daemon */
		spool_log(f->j->sp, f->j->name, strerror(-rc));
	else
		unlinkat(f->j->dirfd, name, 0);
	munmap(st->map, STAGE_BYTES);
	close(st->dfd);
	TAILQ_REMOVE(&st->sg->stages, st, link);
	st->sg->n--;
	free(st);
	f->st = NULL;
	f->spliced = false; /* a splice seeks to the end again */
}

#else /* !IOFS_HAVE_URING: nothing is staged */

int spool_stager_new(iofs_log_t *log, spool_stager_t **out)
{
	(void)log;
	*out = NULL;
	return -ENOSYS;
}
void spool_stager_free(spool_stager_t *sg) { (void)sg; }
bool spool_stage_want(spool_stager_t *sg, struct spool_file *f)
{
	(void)sg;
	(void)f;
	return false;
}
int spool_stage_open(spool_stager_t *sg, struct spool_file *f)
{
	(void)sg;
	(void)f;
	return -ENOSYS;
}
ssize_t spool_stage_append(struct spool_file *f, const struct iovec *iov,
			   int iovcnt)
{
	(void)f;
	(void)iov;
	(void)iovcnt;
	return -ENOSYS;
}
ssize_t spool_stage_splice(struct spool_file *f, int fd, size_t n,
			   const void **bytes)
{
	(void)f;
	(void)fd;
	(void)bytes;
	(void)n;
	return -ENOSYS;
}
int spool_stage_pread(struct spool_file *f, void *buf, size_t n, uint64_t off)
{
	return spool_file_fd(f) < 0 ? -EBADF : pread_full(f->fd, buf, n, off);
}
uint64_t spool_stage_durable(struct spool_file *f)
{
	(void)f;
	return UINT64_MAX;
}
void spool_stage_evicted(struct spool_file *f, uint64_t to)
{
	(void)f;
	(void)to;
}
void spool_stage_close(struct spool_file *f, bool discard)
{
	(void)f;
	(void)discard;
}

#endif /* IOFS_HAVE_URING */

/* Needs no io_uring: a spool written by a build with it is read by any. */
int spool_stage_apply(int dirfd, const char *name)
{
	char sname[64];
	struct stage_hdr hdr;
	struct stat sb;
	uint64_t end = 0; /* the stream's length the stage knows of */
	char *buf = NULL;
	int sfd, fd = -1, rc = 0;

	snprintf(sname, sizeof(sname), "%s%s", name, STAGE_SUFFIX);
	sfd = openat(dirfd, sname, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (pread_full(sfd, &hdr, sizeof(hdr), 0) < 0 ||
	    memcmp(hdr.magic, STAGE_MAGIC, sizeof(hdr.magic)) != 0)
		goto done; /* never written past its making: nothing staged */
	buf = malloc(SPOOL_STAGE_SLOT);
	fd = openat(dirfd, name, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
	if (!buf || fd < 0) {
		rc = !buf ? -ENOMEM : -errno;
		goto done;
	}
	for (int i = 0; i < SPOOL_STAGE_SLOTS; i++)
		if (hdr.skew[i] >= 4096)
			hdr.skew[i] = 0; /* not ours: read nothing past the stride */
	if (hdr.intent.valid && hdr.intent.slot < SPOOL_STAGE_SLOTS &&
	    hdr.intent.at + hdr.intent.n <= SPOOL_STAGE_SLOT) {
		/* a pipe read under way: it happened if its first byte is there */
		uint8_t b;
		uint32_t i = hdr.intent.slot;

		if (pread_full(sfd, &b, 1,
			       STAGE_HDR + (uint64_t)i * STAGE_STRIDE +
				   hdr.skew[i] + hdr.intent.at) == 0 &&
		    b == hdr.intent.d0 &&
		    hdr.slot[i].len < hdr.intent.at + hdr.intent.n)
			hdr.slot[i].len = hdr.intent.at + hdr.intent.n;
	}
	for (int i = 0; i < SPOOL_STAGE_SLOTS && rc == 0; i++) {
		uint64_t off = hdr.slot[i].off, len = hdr.slot[i].len, skip = 0;

		if (!len)
			continue;
		if (len > SPOOL_STAGE_SLOT) {
			rc = -EINVAL;
			break;
		}
		if (off + len > end)
			end = off + len;
		if (off + len <= hdr.evicted)
			continue; /* evicted: its length only (below) */
		if (off < hdr.evicted)
			skip = hdr.evicted - off;
		rc = pread_full(sfd, buf, (size_t)len,
				STAGE_HDR + (uint64_t)i * STAGE_STRIDE + hdr.skew[i]);
		if (rc == 0)
			rc = pwrite_full(fd, buf + skip, (size_t)(len - skip),
					 off + skip);
	}
	/* a buffer the caps took whole still counts in the stream's length:
	 * the file reaches its end, a hole */
	if (rc == 0 && fstat(fd, &sb) == 0 && (uint64_t)sb.st_size < end &&
	    ftruncate(fd, (off_t)end) != 0)
		rc = -errno;
	/* what the caps evicted, which the daemon could not punch yet (a
	 * direct write was under way): whole blocks, as spool_drop() does */
	if (rc == 0 && hdr.evicted >= ROUTER_STORE_ALIGN &&
	    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
		      (off_t)(hdr.evicted & ~(uint64_t)(ROUTER_STORE_ALIGN - 1))) != 0 &&
	    errno != EOPNOTSUPP && errno != ENOSYS)
		rc = -errno;
done:
	if (fd >= 0)
		close(fd);
	close(sfd);
	free(buf);
	if (rc == 0)
		unlinkat(dirfd, sname, 0);
	return rc;
}
