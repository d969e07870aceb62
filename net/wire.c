/* SPDX-License-Identifier: MIT */
#include "net/wire.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <event2/buffer.h>

void wire_send(struct evbuffer *out, int fd, const void *a, size_t alen,
	       const void *b, size_t blen)
{
	size_t sent = 0;

	if (fd >= 0 && evbuffer_get_length(out) == 0) {
		struct iovec iov[2] = {{(void *)a, alen}, {(void *)b, blen}};
		struct msghdr mh = {.msg_iov = iov, .msg_iovlen = blen ? 2 : 1};
		ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w > 0)
			sent = (size_t)w;
	}
	if (sent < alen) {
		evbuffer_add(out, (const char *)a + sent, alen - sent);
		if (blen)
			evbuffer_add(out, b, blen);
	} else if (sent < alen + blen) {
		evbuffer_add(out, (const char *)b + (sent - alen),
			     alen + blen - sent);
	}
}

ssize_t wire_read(int fd, struct evbuffer *in, size_t chunk)
{
	return wire_read_fds(fd, in, chunk, NULL, NULL);
}

bool wire_fd_is_pipe(int fd)
{
	return fcntl(fd, F_GETPIPE_SZ) > 0;
}

static void *close_thread(void *arg)
{
	close((int)(intptr_t)arg);
	return NULL;
}

void wire_close_fd(int fd)
{
	pthread_attr_t a;
	pthread_t t;

	if (fd < 0)
		return;
	if (wire_fd_is_pipe(fd)) {
		close(fd);
		return;
	}
	if (pthread_attr_init(&a) != 0)
		return;
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_create(&t, &a, close_thread, (void *)(intptr_t)fd);
	pthread_attr_destroy(&a);
}

/* The descriptors of @mh's control data: to @fds, else closed. */
static void take_fds(struct msghdr *mh,
		     void (*fds)(void *ctx, const int *fd, int n), void *ctx)
{
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm;
	     cm = CMSG_NXTHDR(mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		int n = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		int got[WIRE_FDS_MAX];
		if (n > WIRE_FDS_MAX)
			n = WIRE_FDS_MAX;
		memcpy(got, CMSG_DATA(cm), (size_t)n * sizeof(int));
		if (fds)
			fds(ctx, got, n);
		else
			for (int i = 0; i < n; i++)
				wire_close_fd(got[i]);
	}
}

int wire_send_fds(struct evbuffer *out, int fd, const void *buf, size_t len,
		  const int *fds, int nfd)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(WIRE_FDS_MAX * sizeof(int))];
	} u;
	struct iovec iov = {(void *)buf, len};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = u.b,
			    .msg_controllen = CMSG_SPACE((size_t)nfd * sizeof(int))};
	ssize_t w;

	if (nfd <= 0 || nfd > WIRE_FDS_MAX || evbuffer_get_length(out))
		return -EINVAL;
	memset(u.b, 0, sizeof(u.b));
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN((size_t)nfd * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, (size_t)nfd * sizeof(int));
	do
		w = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (w < 0 && errno == EINTR);
	if (w <= 0)
		return w < 0 ? -errno : -EIO;
	if ((size_t)w < len)
		evbuffer_add(out, (const char *)buf + w, len - (size_t)w);
	return 0;
}

ssize_t wire_read_fds(int fd, struct evbuffer *in, size_t chunk,
		      void (*fds)(void *ctx, const int *fd, int n), void *ctx)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(WIRE_FDS_MAX * sizeof(int))];
	} u;
	struct evbuffer_iovec v[2];
	struct iovec iov[2];
	int nv = evbuffer_reserve_space(in, (ev_ssize_t)chunk, v, 2);
	ssize_t n;

	if (nv < 0) {
		errno = EAGAIN;
		return -1;
	}
	for (int i = 0; i < nv; i++) {
		iov[i].iov_base = v[i].iov_base;
		iov[i].iov_len = v[i].iov_len;
	}
	struct msghdr mh = {.msg_iov = iov,
			    .msg_iovlen = (size_t)nv,
			    .msg_control = fds ? u.b : NULL,
			    .msg_controllen = fds ? sizeof(u.b) : 0};
	do
		n = fds ? recvmsg(fd, &mh, MSG_CMSG_CLOEXEC) : readv(fd, iov, nv);
	while (n < 0 && errno == EINTR);
	if (fds && n >= 0)
		take_fds(&mh, fds, ctx);
	if (n <= 0) {
		evbuffer_commit_space(in, v, 0);
		return n;
	}
	size_t left = (size_t)n;
	for (int i = 0; i < nv; i++) {
		size_t take = left < v[i].iov_len ? left : v[i].iov_len;
		v[i].iov_len = take;
		left -= take;
	}
	evbuffer_commit_space(in, v, nv);
	return n;
}

int wire_drain(struct evbuffer *q, int fd)
{
	while (evbuffer_get_length(q) > 0) {
		int n = evbuffer_write(q, fd);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
	}
	return 0;
}
