/* SPDX-License-Identifier: MIT */
/*
 * stdin files: MNT/<nspace>/<rank>/stdin (one rank) and MNT/<nspace>/stdin
 * (broadcast).  A write is copied and pushed to the router; the FUSE write
 * is answered from the push callback, so while the rank's sink is XOFFed
 * the writer simply waits.  An open file becomes a writer in the router's
 * FIFO sense (when a rank's last writer closes, the rank reads EOF) at its
 * first write, or at open when opened with O_TRUNC (the shell's ">", so
 * ": > stdin" sends EOF); an open that never writes -- touch, truncate, a
 * refused utimensat or ftruncate -- changes nothing for the rank.
 */
#include "fs/fs_i.h"
#include "log/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void parked_free(struct fs_parked *p)
{
	struct fs_stdin *w = p->owner;

	if (p->uid_charged)
		uidmap_add(&w->fs->stdin_uids, p->uid, 0, -(int64_t)p->len);
	free(p->bytes);
	free(p);
}

/* max_stdin_uid: may @uid park @size more bytes?  Refusals are counted and
 * logged (at most once a second, with the number not logged). */
static bool stdin_uid_allows(struct fs *fs, uint32_t uid, size_t size)
{
	uint64_t held = uidmap_value(&fs->stdin_uids, uid, 0);
	uint64_t now_s;

	if (uid == 0 || !fs->stdin_uid_max || held + size <= fs->stdin_uid_max)
		return true;
	fs->stdin_refusals++;
	fs->stdin_unlogged++;
	now_s = iofs_mono_s();
	if (now_s != fs->stdin_logged_s) {
		iofs_logf(fs->log, LOG_WARNING, "fs",
			  "uid %u refused: limit max_stdin_uid=%llu "
			  "reached (%llu bytes held for blocked writers); %llu "
			  "such refusals in all, %llu since the last report",
			  uid, (unsigned long long)fs->stdin_uid_max,
			  (unsigned long long)held,
			  (unsigned long long)fs->stdin_refusals,
			  (unsigned long long)fs->stdin_unlogged);
		fs->stdin_unlogged = 0;
		fs->stdin_logged_s = now_s;
	}
	return false;
}

static void stdin_notify_poll(struct fs_stdin *w)
{
	if (TAILQ_EMPTY(&w->parked))
		fs_poll_wake(&w->ph);
}

/* Withdraw a pending push and answer its write with what was consumed. */
static void stdin_cancel(struct fs_stdin *w, struct fs_parked *p,
			 int err_if_none)
{
	size_t done = router_push_cancel(p->push);

	TAILQ_REMOVE(&w->parked, p, link);
	fs_unpark(p);
	if (done)
		fuse_reply_write(p->req, done);
	else
		fuse_reply_err(p->req, err_if_none);
	parked_free(p);
}

static void stdin_pushed(int status, void *cbdata)
{
	struct fs_parked *p = cbdata;
	struct fs_stdin *w = p->owner;

	TAILQ_REMOVE(&w->parked, p, link);
	fs_unpark(p);
	if (status == ROUTER_SUCCESS)
		fuse_reply_write(p->req, p->len);
	else
		fuse_reply_err(p->req, fs_errno(status, true));
	parked_free(p);
	stdin_notify_poll(w);
}

/* Count @w as a writer of its rank(s) from now on (once per handle). */
static void stdin_become_writer(struct fs_stdin *w)
{
	if (w->tried)
		return;
	w->tried = true;
	/* An exited rank can still be opened; its writes fail with EPIPE. */
	w->attached = router_stdin_attach(w->job, w->rank) == 0;
}

static bool stdin_exists(router_job_t *job, uint32_t rank)
{
	if (router_job_removed(job))
		return false;
	return rank == ROUTER_RANK_WILDCARD || router_job_rank(job, rank);
}

void fs_stdin_open(struct fs *fs, fuse_req_t req, struct fs_inode *in,
		   struct fuse_file_info *fi)
{
	struct fs_stdin *w;

	if ((fi->flags & O_ACCMODE) == O_RDONLY) {
		fs_info_open_empty(fs, req, fi);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_WRONLY) {
		fuse_reply_err(req, EACCES);
		return;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	w->base.kind = FS_K_STDIN;
	w->fs = fs;
	w->rank = in->rank;
	TAILQ_INIT(&w->parked);
	if (!stdin_exists(in->job, in->rank)) {
		free(w);
		fuse_reply_err(req, ENOENT);
		return;
	}
	w->job = router_job_ref(in->job);
	if (fi->flags & O_TRUNC)
		stdin_become_writer(w);
	TAILQ_INSERT_TAIL(&fs->stdins, w, link);
	fi->direct_io = 1;
	fi->fh = (uintptr_t)w;
	if (fs_reply_open(&fs->rq, req, fi) != 0)
		fs_stdin_release(w);
}

/* A parked write interrupted: what was consumed, or EINTR. */
static void stdin_interrupted(struct fs_parked *p)
{
	struct fs_stdin *w = p->owner;

	stdin_cancel(w, p, EINTR);
	stdin_notify_poll(w);
}

void fs_stdin_write(struct fs_stdin *w, fuse_req_t req, const char *buf,
		    size_t size)
{
	struct fs_parked *p;
	int rc;

	if (!w->fs->shutdown)
		stdin_become_writer(w);
	if (!w->attached || w->fs->shutdown) {
		fuse_reply_err(req, EPIPE);
		return;
	}
	if (size == 0) {
		fuse_reply_write(req, 0);
		return;
	}
	uint32_t uid = (uint32_t)fuse_req_ctx(req)->uid;
	if (!stdin_uid_allows(w->fs, uid, size)) {
		fuse_reply_err(req, ENOBUFS);
		return;
	}
	p = calloc(1, sizeof(*p));
	if (!p || !(p->bytes = malloc(size))) {
		free(p);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	memcpy(p->bytes, buf, size);
	p->len = size;
	p->req = req;
	p->type = FS_P_WRITE;
	p->owner = w;
	p->uid = uid;
	p->uid_charged =
	    uidmap_add(&w->fs->stdin_uids, uid, 0, (int64_t)size) == 0;
	rc = router_push(w->job, w->rank, p->bytes, size, 0, stdin_pushed, p,
			 &p->push);
	if (rc != ROUTER_SUCCESS) {
		parked_free(p);
		fuse_reply_err(req, fs_errno(rc, true));
		return;
	}
	TAILQ_INSERT_TAIL(&w->parked, p, link);
	fs_park(&w->fs->rq, p, stdin_interrupted);
}

void fs_stdin_poll(struct fs_stdin *w, fuse_req_t req,
		   struct fuse_pollhandle *ph)
{
	unsigned revents = 0;

	if ((w->tried && !w->attached) || w->fs->shutdown)
		revents = POLLERR;
	else if (TAILQ_EMPTY(&w->parked))
		revents = POLLOUT | POLLWRNORM;
	fs_poll_reply(req, &w->ph, ph, revents);
}

void fs_stdin_release(struct fs_stdin *w)
{
	struct fs_parked *p;

	while ((p = TAILQ_FIRST(&w->parked)))
		stdin_cancel(w, p, EIO);
	if (w->attached)
		router_stdin_detach(w->job, w->rank);
	w->attached = false;
	router_job_unref(w->job);
	fs_poll_drop(&w->ph);
	TAILQ_REMOVE(&w->fs->stdins, w, link);
	free(w);
}

void fs_stdin_shutdown(struct fs_stdin *w)
{
	struct fs_parked *p;

	while ((p = TAILQ_FIRST(&w->parked)))
		stdin_cancel(w, p, EPIPE);
	fs_poll_wake(&w->ph);
}
