/* SPDX-License-Identifier: MIT */
/* The fs request layer: parking, counted replies, errno mapping, poll
 * handles (see req.h). */
#include "fs/req.h"

#include <errno.h>
#include <event2/event.h>

static void fs_interrupt_cb(fuse_req_t req, void *data)
{
	struct fs_parked *p = data;

	(void)req;
	/* libfuse may hold the request's lock here: only note it. */
	if (p->interrupted)
		return;
	p->interrupted = true;
	TAILQ_INSERT_TAIL(&p->rq->interrupted, p, ilink);
	event_active(p->rq->intr_ev, EV_TIMEOUT, 1);
}

static void fs_intr_ev_cb(evutil_socket_t fd, short what, void *arg)
{
	struct fs_rq *rq = arg;
	struct fs_parked *p;

	(void)fd;
	(void)what;
	while ((p = TAILQ_FIRST(&rq->interrupted))) {
		TAILQ_REMOVE(&rq->interrupted, p, ilink);
		p->interrupted = false;
		p->on_interrupt(p);
	}
}

int fs_rq_init(struct fs_rq *rq, struct event_base *base)
{
	TAILQ_INIT(&rq->interrupted);
	rq->nopen = 0;
	rq->intr_ev = event_new(base, -1, 0, fs_intr_ev_cb, rq);
	return rq->intr_ev ? 0 : -ENOMEM;
}

void fs_rq_release(struct fs_rq *rq)
{
	if (rq->intr_ev)
		event_free(rq->intr_ev);
	rq->intr_ev = NULL;
}

void fs_park(struct fs_rq *rq, struct fs_parked *p, fs_interrupted_fn *fn)
{
	p->rq = rq;
	p->on_interrupt = fn;
	p->interrupted = false;
	fuse_req_interrupt_func(p->req, fs_interrupt_cb, p);
}

void fs_unpark(struct fs_parked *p)
{
	if (p->interrupted) {
		TAILQ_REMOVE(&p->rq->interrupted, p, ilink);
		p->interrupted = false;
	}
}

int fs_reply_open(struct fs_rq *rq, fuse_req_t req,
		  const struct fuse_file_info *fi)
{
	int rc = fuse_reply_open(req, fi);

	if (rc == 0)
		rq->nopen++;
	return rc;
}

void fs_reply_release(struct fs_rq *rq, fuse_req_t req)
{
	rq->nopen--;
	fuse_reply_err(req, 0);
}

int fs_errno(int rc, bool writing)
{
	if (rc < 0)
		return -rc; /* ROUTER_ERR_NOMEM is -ENOMEM */
	switch (rc) {
	case ROUTER_ERR_NOT_FOUND:
		return writing ? EPIPE : ENOENT;
	case ROUTER_ERR_PIPE:
	case ROUTER_ERR_NOT_AVAILABLE:
	case ROUTER_ERR_CANCELED:
		return writing ? EPIPE : EIO;
	case ROUTER_ERR_BAD_PARAM:
		return writing ? EIO : EINVAL;
	case ROUTER_ERR_BUSY:
		return EBUSY;
	default:
		return EIO;
	}
}

void fs_poll_reply(fuse_req_t req, struct fuse_pollhandle **slot,
		   struct fuse_pollhandle *ph, unsigned revents)
{
	if (ph) {
		fs_poll_drop(slot);
		if (revents)
			fuse_pollhandle_destroy(ph);
		else
			*slot = ph;
	}
	fuse_reply_poll(req, revents);
}

void fs_poll_wake(struct fuse_pollhandle **slot)
{
	if (*slot) {
		fuse_lowlevel_notify_poll(*slot);
		fuse_pollhandle_destroy(*slot);
		*slot = NULL;
	}
}

void fs_poll_drop(struct fuse_pollhandle **slot)
{
	if (*slot) {
		fuse_pollhandle_destroy(*slot);
		*slot = NULL;
	}
}
