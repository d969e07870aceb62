/* SPDX-License-Identifier: MIT */
/*
 * The fs request layer: what every file module needs to answer a FUSE
 * request, in one place and knowing nothing of the files themselves.
 *
 * - Parking: a request that cannot be answered now (a read at the live end,
 *   a stdin write behind an XOFF) is parked with its owner's interrupt
 *   handler; an interrupt is noted inside libfuse's callback and handed to
 *   that handler from a deferred loop event (libfuse may hold the request's
 *   lock in the callback).
 * - Replies that keep count: fs_reply_open() / fs_reply_release() keep the
 *   number of open handles (fs_open_count()).
 * - The one router-code-to-errno mapping (fs_errno()).
 * - Poll handles: keep, wake, drop.
 *
 * Loop thread only, like the rest of fs/.
 */
#ifndef IOFS_FS_REQ_H
#define IOFS_FS_REQ_H

#define FUSE_USE_VERSION 34
#include <fuse_lowlevel.h>

#include <stdbool.h>
#include <stddef.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "router/router.h"

struct event;
struct event_base;
struct fs_parked;

/* Answer the interrupted request @p (EINTR or what it consumed) and free
 * it; @p is no longer on the interrupted list. */
typedef void fs_interrupted_fn(struct fs_parked *p);

enum fs_park_type {
	FS_P_READ,  /* read at the live end */
	FS_P_WRITE, /* stdin write waiting for the router */
};

/* A request not answered yet, owned by a file handle. */
struct fs_parked {
	struct fs_rq *rq;
	fuse_req_t req;
	enum fs_park_type type;
	void *owner; /* struct fs_stream / struct fs_stdin */
	fs_interrupted_fn *on_interrupt;
	bool interrupted; /* on rq->interrupted, waiting for the deferred
			     answer */
	TAILQ_ENTRY(fs_parked) link;  /* in the owner's list */
	TAILQ_ENTRY(fs_parked) ilink; /* in rq->interrupted */
	/* FS_P_READ */
	off_t off;
	size_t size;
	/* FS_P_WRITE */
	router_push_t *push; /* valid until the push callback */
	void *bytes;	     /* owned copy of the write */
	size_t len;
	uint32_t uid; /* the writer, charged @len in fs->stdin_uids */
	bool uid_charged;
};
TAILQ_HEAD(fs_parked_list, fs_parked);

struct fs_rq {
	struct event *intr_ev; /* deferred answers to interrupts */
	struct fs_parked_list interrupted;
	size_t nopen; /* handles opened and not yet released */
};

/* 0, or -ENOMEM.  fs_rq_release() is idempotent. */
int fs_rq_init(struct fs_rq *rq, struct event_base *base);
void fs_rq_release(struct fs_rq *rq);

/* Park @p (its req set) and register @fn for its interrupt. */
void fs_park(struct fs_rq *rq, struct fs_parked *p, fs_interrupted_fn *fn);
/* Before answering a parked request: drop it from the interrupted list if
 * an interrupt is pending for it. */
void fs_unpark(struct fs_parked *p);

/* fuse_reply_open() that counts the handle; its result. */
int fs_reply_open(struct fs_rq *rq, fuse_req_t req,
		  const struct fuse_file_info *fi);
/* Answer RELEASE/RELEASEDIR (the handle is freed by the caller). */
void fs_reply_release(struct fs_rq *rq, fuse_req_t req);

/*
 * The errno for a router result @rc (not ROUTER_SUCCESS/ROUTER_AGAIN):
 * -errno passes through; a missing job or rank is ENOENT, except to a
 * writer (@writing), for whom a reader that is gone (exited, removed,
 * shut down, canceled) is EPIPE, as on a pipe; anything unexpected is EIO.
 */
int fs_errno(int rc, bool writing);

/* Keep @ph in *@slot (replacing one kept before) unless @revents is
 * already non-zero, then answer POLL with @revents. */
void fs_poll_reply(fuse_req_t req, struct fuse_pollhandle **slot,
		   struct fuse_pollhandle *ph, unsigned revents);
/* Wake the poller kept in *@slot, if any, and forget it. */
void fs_poll_wake(struct fuse_pollhandle **slot);
/* Forget the poller kept in *@slot without waking it. */
void fs_poll_drop(struct fuse_pollhandle **slot);

#endif /* IOFS_FS_REQ_H */
