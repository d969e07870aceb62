/* SPDX-License-Identifier: MIT */
#include "net/wire.h"

#include <sys/socket.h>
#include <sys/uio.h>

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
