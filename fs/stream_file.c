/* SPDX-License-Identifier: MIT */
/*
 * stdout/stderr files: one router reader per open file.  Opens are answered
 * at once.  Reads below the produced size are answered at once from the
 * router's buffer.  A read at the live end is parked until the reader's
 * ready callback (new bytes or completion) -- unless the handle is in file
 * mode: a handle that asked the kernel for its end (lseek SEEK_END, so a
 * GETATTR carrying this file handle) reads 0 there (O_NONBLOCK or not), like
 * a growing log file, because the programs that ask (tail, SEEK_DATA/
 * SEEK_HOLE users) treat it as one.  docs/filesystem.md has the measured
 * tool behaviour behind the rule.
 */
#include "fs/fs_i.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>

static void stream_free(struct fs_stream *s)
{
	struct fs_parked *p;

	while ((p = TAILQ_FIRST(&s->parked))) {
		TAILQ_REMOVE(&s->parked, p, link);
		fs_unpark(p);
		fuse_reply_err(p->req, EIO);
		free(p);
	}
	router_reader_close(s->rd);
	fs_poll_drop(&s->ph);
	TAILQ_REMOVE(&s->fs->streams, s, link);
	free(s);
}

/* Readable at the position after the last answered read (for poll). */
static bool stream_readable(struct fs_stream *s)
{
	return router_reader_avail(s->rd, s->pos) > 0 ||
	       router_reader_eof(s->rd, s->pos);
}

/* Answer @req from the router; false at the live end (nothing sent). */
static bool stream_try(struct fs_stream *s, fuse_req_t req, size_t size,
		       off_t off)
{
	struct iovec iov[2];
	int cnt = 0;
	size_t n = 0;
	int rc = router_reader_read(s->rd, (uint64_t)off, size, iov, &cnt, &n);

	if (rc == ROUTER_AGAIN && !s->fs->shutdown && !s->file_mode)
		return false;
	if (s->cut && (rc == ROUTER_AGAIN || (rc == ROUTER_SUCCESS && !n))) {
		/* the daemon stops before the stream ended: not its end (a
		 * reader must not take a cut-off stream for a whole one) */
		fuse_reply_err(req, ENOTCONN);
	} else if (rc == ROUTER_AGAIN) {
		/* a file-mode handle at the live end: EOF */
		fuse_reply_buf(req, NULL, 0);
	} else if (rc != ROUTER_SUCCESS) {
		fuse_reply_err(req, fs_errno(rc, false));
	} else if (n == 0) {
		fuse_reply_buf(req, NULL, 0);
	} else {
		s->pos = (uint64_t)off + n;
		fuse_reply_iov(req, iov, cnt);
	}
	return true;
}

static void stream_ready(void *cbdata)
{
	struct fs_stream *s = cbdata;
	struct fs_parked *p, *next;

	for (p = TAILQ_FIRST(&s->parked); p; p = next) {
		next = TAILQ_NEXT(p, link);
		if (!stream_try(s, p->req, p->size, p->off))
			continue;
		TAILQ_REMOVE(&s->parked, p, link);
		fs_unpark(p);
		free(p);
	}
	if (stream_readable(s))
		fs_poll_wake(&s->ph);
}

void fs_stream_open(struct fs *fs, fuse_req_t req, struct fs_inode *in,
		    struct fuse_file_info *fi)
{
	struct fs_stream *s;
	uint32_t owner, gid;
	unsigned flags = 0;
	int rc;

	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EACCES);
		return;
	}
	/* Only the owner's readers hold the job's producers back: a reader
	 * of its group (or root) that stops reading must not freeze someone
	 * else's job.  Theirs wait at the live end all the same, and a lag
	 * is read from the spool later (docs/security.md). */
	router_job_owner(in->job, &owner, &gid);
	if (fuse_req_ctx(req)->uid != owner)
		flags |= ROUTER_READER_NONBLOCK;
	s = calloc(1, sizeof(*s));
	if (!s) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	s->base.kind = in->kind;
	s->fs = fs;
	TAILQ_INIT(&s->parked);
	rc = router_reader_open(in->job, in->rank, fs_kind_channel(in->kind),
				flags, stream_ready, s, &s->rd);
	if (rc != ROUTER_SUCCESS) {
		free(s);
		fuse_reply_err(req, fs_errno(rc, false));
		return;
	}
	TAILQ_INSERT_TAIL(&fs->streams, s, link);
	fi->direct_io = 1;
	fi->keep_cache = 0;
	fi->fh = (uintptr_t)s;
	if (fs_reply_open(&fs->rq, req, fi) != 0)
		stream_free(s);
}

/* A parked read interrupted (Ctrl-C, SIGSTOP): EINTR. */
static void stream_interrupted(struct fs_parked *p)
{
	struct fs_stream *s = p->owner;

	TAILQ_REMOVE(&s->parked, p, link);
	fuse_reply_err(p->req, EINTR);
	free(p);
}

void fs_stream_read(struct fs_stream *s, fuse_req_t req, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fs_parked *p;

	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (size == 0) { /* the router rejects it: 0 bytes means EOF there */
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (stream_try(s, req, size, off))
		return;
	if (fi->flags & O_NONBLOCK) {
		fuse_reply_err(req, EAGAIN);
		return;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	p->req = req;
	p->type = FS_P_READ;
	p->owner = s;
	p->off = off;
	p->size = size;
	TAILQ_INSERT_TAIL(&s->parked, p, link);
	fs_park(&s->fs->rq, p, stream_interrupted);
}

void fs_stream_poll(struct fs_stream *s, fuse_req_t req,
		    struct fuse_pollhandle *ph)
{
	bool ready = stream_readable(s) || s->fs->shutdown;

	fs_poll_reply(req, &s->ph, ph, ready ? POLLIN | POLLRDNORM : 0);
}

void fs_stream_release(struct fs_stream *s)
{
	stream_free(s);
}

void fs_stream_file_mode(struct fs_stream *s)
{
	s->file_mode = true;
	/* A read parked before (another thread of the program) ends now,
	 * as it would have had the question come first. */
	stream_ready(s);
}

void fs_stream_shutdown(struct fs_stream *s)
{
	struct fs_parked *p;

	/* before the router completes every stream (daemon_stop) */
	s->cut = !router_reader_complete(s->rd);
	while ((p = TAILQ_FIRST(&s->parked))) {
		TAILQ_REMOVE(&s->parked, p, link);
		fs_unpark(p);
		/* parked: at the live end of a stream that has not ended */
		fuse_reply_err(p->req, ENOTCONN);
		free(p);
	}
	fs_poll_wake(&s->ph);
}
