/* SPDX-License-Identifier: MIT */
/*
 * stdin files: MNT/<nspace>/<rank>/stdin (one rank) and MNT/<nspace>/stdin
 * (broadcast).  A write is copied and pushed to the router; the FUSE write
 * is answered from the push callback, so while the rank's sink is XOFFed
 * the writer simply waits.  An open file is a writer in the router's FIFO
 * sense: when a rank's last writer closes, the rank reads EOF.
 */
#include "fs/fs_i.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

static int push_errno(int rc)
{
	switch (rc) {
	case ROUTER_ERR_PIPE:
	case ROUTER_ERR_NOT_FOUND:
	case ROUTER_ERR_NOT_AVAILABLE:
	case ROUTER_ERR_CANCELED:
		return EPIPE;
	default:
		return rc < 0 ? -rc : EIO;
	}
}

static void parked_free(struct fs_parked *p)
{
	free(p->bytes);
	free(p);
}

static void stdin_notify_poll(struct fs_stdin *w)
{
	if (w->ph && TAILQ_EMPTY(&w->parked)) {
		fuse_lowlevel_notify_poll(w->ph);
		fuse_pollhandle_destroy(w->ph);
		w->ph = NULL;
	}
}

/* Withdraw a pending push and answer its write with what was consumed. */
static void stdin_cancel(struct fs_stdin *w, struct fs_parked *p,
			 int err_if_none)
{
	size_t done = router_push_cancel(p->push);

	TAILQ_REMOVE(&w->parked, p, link);
	fs_unpark(w->fs, p);
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
	fs_unpark(w->fs, p);
	if (status == ROUTER_SUCCESS)
		fuse_reply_write(p->req, p->len);
	else
		fuse_reply_err(p->req, push_errno(status));
	parked_free(p);
	stdin_notify_poll(w);
}

void fs_stdin_open(struct fs *fs, fuse_req_t req, struct fs_inode *in,
		   struct fuse_file_info *fi)
{
	struct fs_stdin *w;
	int rc;

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
	rc = router_stdin_attach(in->job, in->rank);
	if (rc == ROUTER_ERR_NOT_FOUND) {
		free(w);
		fuse_reply_err(req, ENOENT);
		return;
	}
	/* An exited rank can still be opened; its writes fail with EPIPE. */
	w->attached = rc == 0;
	w->job = router_job_ref(in->job);
	TAILQ_INSERT_TAIL(&fs->stdins, w, link);
	fi->direct_io = 1;
	fi->fh = (uintptr_t)w;
	if (fs_reply_open(fs, req, fi) != 0)
		fs_stdin_release(w);
}

void fs_stdin_write(struct fs_stdin *w, fuse_req_t req, const char *buf,
		    size_t size)
{
	struct fs_parked *p;
	int rc;

	if (!w->attached || w->fs->shutdown) {
		fuse_reply_err(req, EPIPE);
		return;
	}
	if (size == 0) {
		fuse_reply_write(req, 0);
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
	rc = router_push(w->job, w->rank, p->bytes, size, 0, stdin_pushed, p,
			 &p->push);
	if (rc != ROUTER_SUCCESS) {
		parked_free(p);
		fuse_reply_err(req, push_errno(rc));
		return;
	}
	TAILQ_INSERT_TAIL(&w->parked, p, link);
	fs_park(w->fs, p);
}

void fs_stdin_poll(struct fs_stdin *w, fuse_req_t req,
		   struct fuse_pollhandle *ph)
{
	unsigned revents = 0;

	if (!w->attached || w->fs->shutdown)
		revents = POLLERR;
	else if (TAILQ_EMPTY(&w->parked))
		revents = POLLOUT | POLLWRNORM;
	if (ph) {
		if (w->ph)
			fuse_pollhandle_destroy(w->ph);
		w->ph = NULL;
		if (revents)
			fuse_pollhandle_destroy(ph);
		else
			w->ph = ph;
	}
	fuse_reply_poll(req, revents);
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
	if (w->ph)
		fuse_pollhandle_destroy(w->ph);
	TAILQ_REMOVE(&w->fs->stdins, w, link);
	free(w);
}

void fs_stdin_interrupted(struct fs_parked *p)
{
	struct fs_stdin *w = p->owner;

	stdin_cancel(w, p, EINTR);
	stdin_notify_poll(w);
}

void fs_stdin_shutdown(struct fs_stdin *w)
{
	struct fs_parked *p;

	while ((p = TAILQ_FIRST(&w->parked)))
		stdin_cancel(w, p, EPIPE);
	if (w->ph) {
		fuse_lowlevel_notify_poll(w->ph);
		fuse_pollhandle_destroy(w->ph);
		w->ph = NULL;
	}
}
