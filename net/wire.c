/* SPDX-License-Identifier: MIT */
#include "net/wire.h"

#include <errno.h>
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
	do
		n = readv(fd, iov, nv);
	while (n < 0 && errno == EINTR);
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
