/* SPDX-License-Identifier: MIT */
/*
 * iofs-run: the forwarder's side of the pipe hand-over (docs/protocol.md,
 * "Pipe hand-over"): RANK_START with the rank's three pipe ends attached.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "log/clock.h"
#include "net/run_i.h"
#include "net/wire.h"

/* The socket is full (a busy daemon): wait until it takes more, until
 * @deadline (iofs_mono_ms()); a closed peer is -EPIPE. */
static int wait_writable(int fd, uint64_t deadline)
{
	uint64_t now = iofs_mono_ms();
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	int rc;

	if (now >= deadline)
		return -ETIMEDOUT;
	rc = poll(&p, 1, (int)(deadline - now));
	if (rc == 0)
		return -ETIMEDOUT;
	if (rc < 0)
		return errno == EINTR ? 0 : -errno;
	return p.revents & (POLLHUP | POLLERR) ? -EPIPE : 0;
}

/* Write out what the bufferevent holds (bounded): SCM_RIGHTS must not
 * overtake bytes queued before it.  A socket bufferevent keeps its output
 * frozen at the start (only its own write callback drains it, unfreezing
 * around the write: so do we); a frozen evbuffer_write() fails without a
 * system call, and errno is stale then: before, that spun at 100 % CPU
 * (POLLOUT, EAGAIN, again) once frames such as early ranks' EXITs were
 * queued ahead of a RANK_START. */
static int flush_output(struct run_link *l, uint64_t deadline)
{
	struct evbuffer *out = bufferevent_get_output(l->bev);
	int fd = bufferevent_getfd(l->bev);

	while (evbuffer_get_length(out) > 0) {
		int n, rc;

		errno = 0;
		evbuffer_unfreeze(out, 1);
		n = evbuffer_write(out, fd);
		evbuffer_freeze(out, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			if ((rc = wait_writable(fd, deadline)) < 0)
				return rc;
			continue;
		}
		if (n <= 0)
			return n < 0 && errno ? -errno : -EPIPE;
	}
	return 0;
}

/* RANK_START with the rank's pipes attached (the hand-over). */
bool run_link_send_pipes(struct run_link *l, const struct proto_frame *f,
			 const int fds[3])
{
	uint8_t buf[PROTO_HEAD_MAX];
	uint64_t deadline = iofs_mono_ms() + RUN_CONNECT_TIMEOUT_MS;
	ssize_t n = proto_encode(f, buf, sizeof(buf));
	int rc = n < 0 ? (int)n : flush_output(l, deadline);

	/* a full socket is no broken link: 1024 ranks' RANK_STARTs (one
	 * skb each, with their descriptors) fill it while the daemon is
	 * busy; wait for it as flush_output() does */
	while (rc == 0 &&
	       (rc = wire_send_fds(bufferevent_get_output(l->bev),
				   bufferevent_getfd(l->bev), buf, (size_t)n,
				   fds, 3)) == -EAGAIN)
		rc = wait_writable(bufferevent_getfd(l->bev), deadline);
	if (rc < 0) {
		char why[200];
		snprintf(why, sizeof(why), "handing the pipes over: %s",
			 strerror(-rc));
		run_link_down(l, why);
		return false;
	}
	l->handed++;
	return true;
}
