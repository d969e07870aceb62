/* SPDX-License-Identifier: MIT */
#include "fs/spool.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fs/safe_dir.h"
#include "fs/spool_flush.h"
#include "fs/spool_i.h"

/* "DIR/NAME: WHAT" */
void spool_log(spool_t *sp, const char *name, const char *what)
{
	iofs_logf(sp->log, LOG_ERR, "spool", "%s/%s: %s", sp->dir, name, what);
}

/* Write @nspace into the job directory's `nspace` file. */
static int job_write_name(struct spool_job *j, const char *nspace)
{
	char why[256] = "";
	size_t len = strlen(nspace);
	int fd = safe_file_open(j->dirfd, "nspace", O_WRONLY, 0600, true,
				geteuid(), getegid(), why, sizeof(why));
	ssize_t w;

	if (fd < 0)
		return fd;
	w = write(fd, nspace, len);
	if (w != (ssize_t)len) {
		int rc = w < 0 ? -errno : -EIO;

		close(fd);
		return rc;
	}
	return close(fd) == 0 ? 0 : -errno;
}

static int spool_job_open(void *ctx, const char *nspace, void **jh)
{
	spool_t *sp = ctx;
	struct spool_job *j = calloc(1, sizeof(*j));
	char why[256] = "";
	int rc = -EEXIST;

	if (!j)
		return -ENOMEM;
	j->sp = sp;
	for (int i = 0; i < SPOOL_NAME_TRIES && rc == -EEXIST; i++) {
		snprintf(j->name, sizeof(j->name), "%" PRIu64, sp->next++);
		rc = mkdirat(sp->dirfd, j->name, 0700) == 0 ? 0 : -errno;
	}
	if (rc < 0)
		goto fail_free;
	j->dirfd = safe_dir_open(sp->dirfd, j->name, geteuid(), getegid(),
				 0700, why, sizeof(why));
	if (j->dirfd < 0) {
		rc = j->dirfd;
		goto fail_rmdir;
	}
	rc = job_write_name(j, nspace);
	if (rc < 0)
		goto fail_close;
	*jh = j;
	return 0;

fail_close:
	unlinkat(j->dirfd, "nspace", 0);
	close(j->dirfd);
fail_rmdir:
	unlinkat(sp->dirfd, j->name, AT_REMOVEDIR);
	if (why[0])
		spool_log(sp, j->name, why);
fail_free:
	free(j);
	return rc;
}

void spool_job_close(void *jh, bool discard)
{
	struct spool_job *j = jh;

	if (discard) {
		unlinkat(j->dirfd, "nspace", 0);
		unlinkat(j->dirfd, "state", 0);
	}
	for (int ci = 0; ci < 2; ci++)
		free(j->rf[ci]);
	close(j->dirfd);
	if (discard && unlinkat(j->sp->dirfd, j->name, AT_REMOVEDIR) != 0)
		spool_log(j->sp, j->name, strerror(errno));
	free(j);
}

int spool_replace(struct spool_job *j, const char *name, const void *buf,
		  size_t len)
{
	char tmp[32], why[256] = "";
	int fd, err;
	ssize_t w;

	snprintf(tmp, sizeof(tmp), "%s.tmp", name);
	fd = safe_file_open(j->dirfd, tmp, O_WRONLY, 0600, true, geteuid(),
			    getegid(), why, sizeof(why));
	w = fd < 0 ? -1 : write(fd, buf, len);
	err = w == (ssize_t)len ? 0 : w < 0 ? errno : ENOSPC;
	if (fd >= 0 && close(fd) != 0 && !err)
		err = errno;
	if (fd < 0 || err || renameat(j->dirfd, tmp, j->dirfd, name) != 0) {
		if (!err)
			err = fd < 0 ? -fd : errno;
		if (fd >= 0)
			unlinkat(j->dirfd, tmp, 0);
		spool_log(j->sp, j->name, why[0] ? why : strerror(err));
		return -err;
	}
	return 0;
}

ssize_t spool_read_file(int dirfd, const char *name, size_t max, char **out)
{
	struct stat st;
	char *buf;
	ssize_t got;
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size > max || !(buf = malloc((size_t)st.st_size + 1))) {
		close(fd);
		return -EINVAL;
	}
	got = pread(fd, buf, (size_t)st.st_size, 0);
	close(fd);
	if (got < 0) {
		free(buf);
		return -EIO;
	}
	buf[got] = '\0';
	*out = buf;
	return got;
}

/* The job's `state` (spool_replace(): whole, old or new, after a crash). */
static void spool_job_state(void *jh, const char *text, size_t len)
{
	(void)spool_replace(jh, "state", text, len);
}

/* Close @f's descriptor and take it off the LRU (idempotent). */
static void file_unlist(struct spool_file *f)
{
	spool_t *sp = f->j->sp;

	if (!f->listed)
		return;
	TAILQ_REMOVE(&sp->lru, f, lru);
	f->listed = false;
	sp->nopen--;
}

/* @f just used (its descriptor open): first on the LRU; close the least
 * recently used beyond the bound. */
static void file_used(struct spool_file *f)
{
	spool_t *sp = f->j->sp;
	struct spool_file *old;

	if (f->listed) {
		TAILQ_REMOVE(&sp->lru, f, lru);
	} else {
		f->listed = true;
		sp->nopen++;
	}
	TAILQ_INSERT_HEAD(&sp->lru, f, lru);
	if (!sp->max_open) {
		struct rlimit rl;

		sp->max_open = getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
				       rl.rlim_cur != RLIM_INFINITY
				   ? (size_t)rl.rlim_cur / 4
				   : 4096;
		if (sp->max_open < SPOOL_MIN_OPEN)
			sp->max_open = SPOOL_MIN_OPEN;
	}
	while (sp->nopen > sp->max_open && (old = TAILQ_LAST(&sp->lru, spool_lru)) &&
	       old != f) {
		file_unlist(old);
		close(old->fd); /* the flusher works on its own dups */
		old->fd = -1;
		old->spliced = false; /* reopened with O_APPEND, at 0 */
	}
}

static int file_reopen(struct spool_file *f, bool truncate)
{
	struct spool_job *j = f->j;
	char why[256] = "";

	f->fd = safe_file_open(j->dirfd, f->name, O_RDWR, 0600, truncate,
			       geteuid(), getegid(), why, sizeof(why));
	if (f->fd < 0) {
		if (why[0])
			spool_log(j->sp, j->name, why);
		return f->fd;
	}
	file_used(f);
	return f->fd;
}

int spool_file_fd(struct spool_file *f)
{
	if (f->fd >= 0) {
		if (f->listed)
			file_used(f);
		return f->fd;
	}
	return file_reopen(f, false);
}

void spool_file_pin(struct spool_file *f)
{
	file_unlist(f);
}

int spool_file_open(struct spool_job *j, const char *name, bool truncate,
		    struct spool_file **out)
{
	struct spool_file *f = calloc(1, sizeof(*f));
	int rc;

	if (!f)
		return -ENOMEM;
	f->j = j;
	f->rank = SPOOL_NO_RANK;
	snprintf(f->name, sizeof(f->name), "%s", name);
	rc = file_reopen(f, truncate);
	if (rc < 0) {
		free(f);
		return rc;
	}
	*out = f;
	return 0;
}

/* Index of @rank in the job's sorted rank files of @ci (or where it
 * would go). */
static size_t rank_pos(struct spool_job *j, int ci, uint32_t rank)
{
	size_t lo = 0, hi = j->nrf[ci];

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (j->rf[ci][mid]->rank < rank)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct spool_file *spool_rank_find(struct spool_job *j, int ci,
				   uint32_t rank)
{
	size_t at = rank_pos(j, ci, rank);

	return at < j->nrf[ci] && j->rf[ci][at]->rank == rank ? j->rf[ci][at]
							      : NULL;
}

int spool_rank_file(struct spool_job *j, uint32_t rank, int ci,
		    struct spool_file *f)
{
	size_t at = rank_pos(j, ci, rank);

	if (at < j->nrf[ci] && j->rf[ci][at]->rank == rank)
		return -EEXIST;
	if (j->nrf[ci] == j->crf[ci]) {
		size_t nc = j->crf[ci] ? j->crf[ci] * 2 : 8;
		struct spool_file **nr = realloc(j->rf[ci], nc * sizeof(*nr));

		if (!nr)
			return -ENOMEM;
		j->rf[ci] = nr;
		j->crf[ci] = nc;
	}
	memmove(j->rf[ci] + at + 1, j->rf[ci] + at,
		(j->nrf[ci] - at) * sizeof(*j->rf[ci]));
	j->rf[ci][at] = f;
	j->nrf[ci]++;
	f->rank = rank;
	f->ci = ci;
	return 0;
}

static void rank_file_forget(struct spool_file *f)
{
	struct spool_job *j = f->j;
	size_t at;

	if (f->rank == SPOOL_NO_RANK)
		return;
	at = rank_pos(j, f->ci, f->rank);
	if (at < j->nrf[f->ci] && j->rf[f->ci][at] == f) {
		j->nrf[f->ci]--;
		memmove(j->rf[f->ci] + at, j->rf[f->ci] + at + 1,
			(j->nrf[f->ci] - at) * sizeof(*j->rf[f->ci]));
	}
}

static int spool_open(void *jh, uint32_t rank, uint32_t channel, void **h)
{
	const char *ch = channel == ROUTER_CH_STDOUT ? "stdout" : "stderr";
	int ci = channel == ROUTER_CH_STDOUT ? 0 : 1, rc;
	struct spool_file *f;
	char name[24];

	if (rank == ROUTER_RANK_WILDCARD)
		return spool_mview_open(jh, ci, true, (struct spool_file **)h);
	snprintf(name, sizeof(name), "%" PRIu32 ".%s", rank, ch);
	rc = spool_file_open(jh, name, true, &f);
	if (rc == 0 && (rc = spool_rank_file(jh, rank, ci, f)) < 0)
		spool_close(f, true);
	if (rc == 0)
		*h = f;
	return rc;
}

/* @w more bytes appended to the rank file @f: hand what lies
 * SPOOL_FLUSH_LAG behind its end to the flusher, a chunk at a time
 * (fs/spool_flush.h). */
static void drop_behind(struct spool_file *f, int fd, size_t w)
{
	spool_flusher_t *fl = f->j->sp->fl;

	f->end += w; /* also what spool_stage_want() goes by */
	if (!fl)
		return;
	while (f->end >= f->flushed + SPOOL_FLUSH_CHUNK + SPOOL_FLUSH_LAG) {
		spool_flusher_queue(fl, fd, f->flushed, SPOOL_FLUSH_CHUNK);
		f->flushed += SPOOL_FLUSH_CHUNK;
	}
}

void spool_file_adopted(struct spool_file *f, uint64_t size)
{
	f->end = size;
	f->flushed = size & ~(uint64_t)(SPOOL_FLUSH_CHUNK - 1);
}

/* Whether @f's bytes go through its stage (given one now if it wants
 * one; fs/spool_stage.h). */
static bool stage(struct spool_file *f)
{
	spool_t *sp = f->j->sp;

	if (!f->st && spool_stage_want(sp->sg, f)) {
		int rc = spool_stage_open(sp->sg, f);

		if (rc < 0 && rc != -EBUSY && !sp->stage_warned) {
			sp->stage_warned = true;
			spool_log(sp, f->j->name,
				  rc == -EINVAL
				      ? "no O_DIRECT here: the rank files are "
					"written through the page cache"
				      : strerror(-rc));
		}
	}
	return f->st != NULL;
}

static void spool_drop(void *h, uint64_t to);

/* A staged file's punch waits for the direct writes under way (a write
 * completing into a hole would fill it again): catch up as they end. */
static ssize_t punch_behind(struct spool_file *f, ssize_t w)
{
	if (w > 0 && f->evicted > f->punched + ROUTER_STORE_ALIGN)
		spool_drop(f, f->evicted);
	return w;
}

static ssize_t spool_append(void *h, const struct iovec *iov, int iovcnt)
{
	struct spool_file *f = h;
	ssize_t w;
	int fd;

	if (f->mv)
		return spool_mview_append(f, iov, iovcnt);
	if (stage(f))
		return punch_behind(f, spool_stage_append(f, iov, iovcnt));
	fd = spool_file_fd(f);
	if (fd < 0)
		return fd;
	do
		w = writev(fd, iov, iovcnt);
	while (w < 0 && errno == EINTR);
	if (w < 0)
		return -errno;
	drop_behind(f, fd, (size_t)w);
	return w;
}

int pwritev_full(int fd, struct iovec *iov, int cnt, uint64_t off)
{
	while (cnt) {
		ssize_t w = pwritev(fd, iov, cnt, (off_t)off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		off += (uint64_t)w;
		while (cnt && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			cnt--;
		}
		if (cnt) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

int pwrite_full(int fd, const void *buf, size_t n, uint64_t off)
{
	struct iovec v = {.iov_base = (void *)buf, .iov_len = n};

	return pwritev_full(fd, &v, 1, off);
}

int pread_full(int fd, void *buf, size_t n, uint64_t off)
{
	while (n) {
		ssize_t got = pread(fd, buf, n, (off_t)off);

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return got < 0 ? -errno : -EIO;
		buf = (char *)buf + got;
		n -= (size_t)got;
		off += (uint64_t)got;
	}
	return 0;
}

/* Move up to @n bytes from the pipe @fd to the end of the rank file and
 * read them back into @buf (the page cache has them): what splice() moved
 * left the pipe, nothing else did. */
static ssize_t spool_splice_in(void *h, int fd, void *buf, size_t n,
			       const void **bytes)
{
	struct spool_file *f = h;
	off_t at;
	ssize_t w;
	int ffd, rc;

	if (f->mv)
		return -ENOTSUP;
	if (stage(f))
		return punch_behind(f, spool_stage_splice(f, fd, n, bytes));
	ffd = spool_file_fd(f);
	if (ffd < 0)
		return ffd;
	if (!f->spliced) { /* splice() refuses O_APPEND: the position, at the end */
		int fl = fcntl(ffd, F_GETFL);

		if (fl < 0 || lseek(ffd, 0, SEEK_END) < 0 ||
		    fcntl(ffd, F_SETFL, fl & ~O_APPEND) != 0)
			return -ENOTSUP;
		f->spliced = true;
	}
	at = lseek(ffd, 0, SEEK_CUR);
	if (at < 0)
		return -errno;
	do
		w = splice(fd, NULL, ffd, NULL, n, SPLICE_F_NONBLOCK);
	while (w < 0 && errno == EINTR);
	if (w <= 0)
		return w == 0 ? 0 : -errno;
	drop_behind(f, ffd, (size_t)w);
	rc = pread_full(ffd, buf, (size_t)w, (uint64_t)at);
	*bytes = buf;
	return rc < 0 ? rc : w;
}

static ssize_t spool_read_at(void *h, uint64_t off, void *buf, size_t n)
{
	struct spool_file *f = h;
	ssize_t got;
	int fd;

	if (f->mv)
		return spool_mview_read(f, off, buf, n);
	if (f->st) {
		int rc;

		if (off >= f->end)
			return 0;
		if (n > f->end - off)
			n = (size_t)(f->end - off);
		rc = spool_stage_pread(f, buf, n, off);

		return rc < 0 ? rc : (ssize_t)n;
	}
	fd = spool_file_fd(f);
	if (fd < 0)
		return fd;
	do
		got = pread(fd, buf, n, (off_t)off);
	while (got < 0 && errno == EINTR);
	return got < 0 ? -errno : got;
}

/* A cap evicted [0, @to): punch whole blocks out of the file (its size,
 * so every offset, stays).  A filesystem that cannot is logged once. */
static void spool_drop(void *h, uint64_t to)
{
	struct spool_file *f = h;
	spool_t *sp = f->j->sp;

	if (f->mv) {
		spool_mview_drop(f, to);
		return;
	}
	if (to > f->evicted) /* what the merged views may no longer show */
		f->evicted = to;
	spool_stage_evicted(f, f->evicted);
	if (to > spool_stage_durable(f)) /* a direct write may be under way */
		to = spool_stage_durable(f);
	to &= ~(uint64_t)(ROUTER_STORE_ALIGN - 1);
	if (to <= f->punched || sp->no_punch)
		return;
	if (spool_file_fd(f) < 0 ||
	    fallocate(f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      (off_t)f->punched, (off_t)(to - f->punched)) != 0) {
		if (errno == EOPNOTSUPP || errno == ENOSYS)
			sp->no_punch = true;
		spool_log(sp, f->j->name,
			  errno == EOPNOTSUPP || errno == ENOSYS
			      ? "cannot punch holes here: bytes the caps "
				"evict are not read again but keep their disk "
				"space"
			      : strerror(errno));
		return;
	}
	f->punched = to;
}

/* An adopted file: where its data begins (what caps punched out before
 * is a hole), its size if it is all hole. */
static uint64_t spool_held_from(void *h)
{
	struct spool_file *f = h;
	off_t at;

	if (f->mv)
		return spool_mview_held_from(f);
	if (spool_file_fd(f) < 0)
		return f->evicted;
	at = lseek(f->fd, 0, SEEK_DATA);
	if (at < 0)
		at = errno == ENXIO ? lseek(f->fd, 0, SEEK_END) : 0;
	if (at < 0)
		at = 0;
	f->punched = (uint64_t)at & ~(uint64_t)(ROUTER_STORE_ALIGN - 1);
	if ((uint64_t)at > f->evicted)
		f->evicted = (uint64_t)at;
	return (uint64_t)at;
}

static ssize_t spool_append_ref(void *h, const struct router_store_ref *ref)
{
	return spool_mview_append_ref(h, ref);
}

static uint64_t spool_disk_bytes(void *h)
{
	struct spool_file *f = h;
	struct stat st;

	if (f->mv)
		return spool_mview_disk(f);
	/* an earlier life's view, a plain file: its blocks */
	return spool_file_fd(f) >= 0 && fstat(f->fd, &st) == 0
		       ? (uint64_t)st.st_blocks * 512
		       : 0;
}

/* @f's stage goes (its last bytes written unless @discard; no-op without
 * one), and the caps' punch catches up with what its writes held up. */
static void stage_end(struct spool_file *f, bool discard)
{
	spool_stage_close(f, discard);
	if (!discard && !f->mv && f->evicted > f->punched)
		spool_drop(f, f->evicted);
}

void spool_close(void *h, bool discard)
{
	struct spool_file *f = h;

	rank_file_forget(f);
	stage_end(f, discard);
	spool_mview_close(f, discard);
	file_unlist(f);
	if (f->fd >= 0)
		close(f->fd);
	if (discard)
		unlinkat(f->j->dirfd, f->name, 0);
	free(f);
}

/* A rank stream ended: its stage goes (its last bytes written through the
 * page cache), so a finished job's rank files are whole on disk and take
 * no stage's 4 MiB; appends after it (a full disk's retry) are plain. */
static void spool_complete(void *h)
{
	struct spool_file *f = h;

	if (f->mv)
		return;
	f->no_stage = true;
	if (f->st)
		stage_end(f, false);
}

static const struct router_store_ops spool_ops = {
	.job_open = spool_job_open,
	.job_close = spool_job_close,
	.open = spool_open,
	.append = spool_append,
	.read_at = spool_read_at,
	.close = spool_close,
	.job_state = spool_job_state,
	.drop = spool_drop,
	.held_from = spool_held_from,
	.append_ref = spool_append_ref,
	.splice_in = spool_splice_in,
	.disk_bytes = spool_disk_bytes,
	.complete = spool_complete,
};

const struct router_store_ops *spool_store_ops(void)
{
	return &spool_ops;
}

int spool_new(iofs_log_t *log, const char *dir, char *err, size_t errlen,
	      spool_t **out)
{
	spool_t *sp = calloc(1, sizeof(*sp));
	int rc;

	*out = NULL;
	if (!sp || !(sp->dir = strdup(dir))) {
		free(sp);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	sp->log = log;
	sp->dirfd = -1;
	TAILQ_INIT(&sp->lru);
	rc = spool_flusher_new(&sp->fl);
	if (rc < 0) /* then the pages stay cached */
		iofs_logf(log, LOG_WARNING, "spool",
			  "no drop-behind thread: %s", strerror(-rc));
	rc = spool_stager_new(log, &sp->sg);
	if (rc < 0 && rc != -ENOSYS) /* then through the page cache */
		iofs_logf(log, LOG_WARNING, "spool",
			  "no io_uring (%s): rank files are written through "
			  "the page cache", strerror(-rc));
	/* The spool is the daemon's for as long as it runs, and a restart
	 * trusts what it finds there: every directory on the way must be
	 * safe too (--output-dir, the user's own choice, checks its top). */
	char why[512];
	rc = (int)safe_dir_check_path(sp->dir, why, sizeof(why));
	if (rc) {
		snprintf(err, errlen, "spool %s: %s", sp->dir, why);
		rc = -rc;
		goto out_free;
	}
	sp->dirfd = safe_dir_top(sp->dir, 0700, "spool", err, errlen);
	if (sp->dirfd < 0) {
		rc = sp->dirfd;
		goto out_free;
	}
	/* One daemon per spool: another would restore, number and delete
	 * under this one's feet.  The lock goes with the descriptor. */
	if (flock(sp->dirfd, LOCK_EX | LOCK_NB) != 0) {
		rc = -errno;
		snprintf(err, errlen, "spool %s: %s", sp->dir,
			 rc == -EWOULDBLOCK ? "in use by another iofs daemon"
					    : strerror(-rc));
		goto out_free;
	}
	*out = sp;
	return 0;

out_free:
	spool_free(sp);
	return rc;
}

void spool_keep_cache(spool_t *sp)
{
	spool_flusher_free(sp->fl);
	sp->fl = NULL;
	spool_stager_free(sp->sg); /* the stage bypasses the cache */
	sp->sg = NULL;
}

void spool_no_stage(spool_t *sp)
{
	spool_stager_free(sp->sg);
	sp->sg = NULL;
}

void spool_free(spool_t *sp)
{
	if (!sp)
		return;
	spool_flusher_free(sp->fl);
	spool_stager_free(sp->sg);
	if (sp->dirfd >= 0)
		close(sp->dirfd);
	free(sp->dir);
	free(sp);
}
