/* SPDX-License-Identifier: MIT */
/*
 * Sending a frame on a socket that a bufferevent owns, without waiting a
 * loop iteration: when nothing is queued ahead of it, the frame is written
 * to the socket at once and only what the socket did not take is queued in
 * the bufferevent's output (which then writes it in order, as usual).
 * Saves one loop iteration and two syscalls per frame on the latency path
 * (docs/performance.md, "write-through").
 */
#ifndef IOFS_NET_WIRE_H
#define IOFS_NET_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct evbuffer;

/*
 * Send @alen bytes at @a followed by @blen bytes at @b (@b may be NULL
 * with @blen 0) on @fd, a non-blocking socket whose queued output is @out.
 * Never blocks and never raises SIGPIPE (MSG_NOSIGNAL): an error simply
 * leaves the bytes queued for the bufferevent, which reports it.  The
 * caller keeps ownership of @a and @b (they are copied when queued).
 */
void wire_send(struct evbuffer *out, int fd, const void *a, size_t alen,
	       const void *b, size_t blen);

/*
 * One readv() of up to @chunk bytes from @fd straight into @in (libevent
 * 2.1's bufferevents read 4 KiB a call; see docs/performance.md).
 * Returns the bytes read (> 0), 0 at EOF, or -1 with errno set; EINTR is
 * retried; EAGAIN also when @in could not reserve room (the caller stops
 * reading for now either way).
 */
ssize_t wire_read(int fd, struct evbuffer *in, size_t chunk);

/*
 * Write what @q holds to @fd, a non-blocking pipe (a rank's stdin), until
 * @q is empty or @fd is full.  0: drained or full (EAGAIN; wait for
 * EV_WRITE), -errno: the reader is gone (-EPIPE) or another write error;
 * the bytes that did not go stay in @q.  EINTR is retried.
 */
int wire_drain(struct evbuffer *q, int fd);

/* Up to this many descriptors ride on one read (SCM_RIGHTS). */
#define WIRE_FDS_MAX 24

/*
 * wire_read() with recvmsg(): descriptors that arrive with the bytes
 * (SCM_RIGHTS on a Unix socket, close-on-exec) are given to @fds, which
 * owns them from then on, before the bytes they came with are decoded.
 */
ssize_t wire_read_fds(int fd, struct evbuffer *in, size_t chunk,
		      void (*fds)(void *ctx, const int *fd, int n), void *ctx);

/* Does @fd name a pipe or FIFO?  Asks the open file only (F_GETPIPE_SZ):
 * never a filesystem, unlike fstat(). */
bool wire_fd_is_pipe(int fd);

/*
 * Close a descriptor a peer sent us.  A pipe at once; anything else on a
 * short-lived detached thread: close() of a file on our own FUSE mount
 * waits for our own FLUSH answer, which the loop could then never give
 * (a local user could freeze the daemon for everyone).  If no thread can
 * be made the descriptor is kept open: a leak, not a hang.
 */
void wire_close_fd(int fd);

/*
 * Send @len bytes with @nfd descriptors attached (SCM_RIGHTS) on the
 * socket @fd, whose queued output @out must be empty; what the socket
 * does not take at once is queued in @out.  0 or -errno (nothing sent).
 */
int wire_send_fds(struct evbuffer *out, int fd, const void *buf, size_t len,
		  const int *fds, int nfd);

#endif /* IOFS_NET_WIRE_H */
