/* SPDX-License-Identifier: MIT */
/*
 * The one framer of both ends of the wire protocol: the daemon's
 * connections (conn.c) and the forwarder's link (run_link.c).  It reads the
 * socket in bursts into its input buffer, cuts the buffer into frames with
 * proto_decode() (pull up the header, then the whole frame), and hands each
 * frame to its owner's handler, looked up by type in the owner's table.  It
 * also encodes and sends frames (framer_send).
 *
 * A handler answers 0 to go on, or a negative errno to stop at once (the
 * rule in net_i.h): the connection failed or was closed, and the framer, its
 * buffer included, may be gone (the forwarder releases it inside
 * run_link_down()), so the framer touches nothing after that.  Between frames
 * the owner's more() says whether to go on (reading paused, closing).
 *
 * Not thread-safe; one loop thread.  docs/protocol.md is the format.
 */
#ifndef IOFS_NET_FRAMER_H
#define IOFS_NET_FRAMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/proto.h"

struct bufferevent;
struct evbuffer;

/* framer_read(): the peer closed the connection (an expected outcome). */
#define FRAMER_CLOSED 1

typedef int (*framer_fn)(void *ctx, const struct proto_frame *f);

struct framer_ops {
	/* By frame type: the types this end receives.  A decoded frame with
	 * no handler is a direction error (the decoder's direction check
	 * keeps them out already). */
	framer_fn handlers[PROTO_TYPE_MAX + 1];
	/* Before each frame: false = stop for now (NULL: always go on). */
	bool (*more)(void *ctx);
	/* The stream is broken: @code a PROTO_ERR_* (decode error, or
	 * PROTO_ERR_DIRECTION for a frame without handler), @detail one
	 * line.  Nothing more is decoded; the owner closes. */
	void (*fail)(void *ctx, int code, const char *detail);
	/* Optional, before dispatch (a debug trace). */
	void (*trace)(void *ctx, const struct proto_frame *f);
	/* Optional: room for a whole DATA frame of @len bytes, which is then
	 * moved out of the input buffer into it (one copy, no pull-up) and
	 * decoded there, so f->data points into the owner's memory.  The
	 * owner keeps or frees it in its DATA handler (and, for a frame that
	 * does not decode, in fail()).  NULL: out of memory, the hook has
	 * failed the connection; the framer stops. */
	uint8_t *(*take)(void *ctx, size_t len);
	/* Optional: the socket is read with recvmsg() and descriptors that
	 * arrive with the bytes (SCM_RIGHTS) are given here, in order,
	 * before those bytes are decoded; the owner owns them.  NULL:
	 * plain reads (descriptors sent anyway are closed by the kernel). */
	void (*fds)(void *ctx, const int *fd, int n);
};

struct framer {
	const struct framer_ops *ops;
	void *ctx;
	struct proto_peer dec; /* decoder state (greeted, rank range) */
	struct evbuffer *in;   /* bytes read, not yet decoded (owned) */
	uint64_t frames_in;    /* frames dispatched */
};

/* Set up @fr for @role; @ops and @ctx must outlive it.  0 or -ENOMEM. */
int framer_init(struct framer *fr, enum proto_role role,
		const struct framer_ops *ops, void *ctx);
/* Free the input buffer.  Idempotent; a zeroed framer is fine. */
void framer_release(struct framer *fr);

/*
 * Read from @fd in readv()s of @chunk bytes until the socket has no more,
 * a read comes back short, @burst bytes were read, or the buffer would
 * pass @max_buffered (libevent 2.1's bufferevents read 4 KiB a call, one
 * call per loop iteration; docs/performance.md).  Returns 0 (decode now),
 * FRAMER_CLOSED (end of file), or -errno (socket error).
 */
int framer_read(struct framer *fr, int fd, size_t chunk, size_t burst,
		size_t max_buffered);

/* Decode and dispatch every whole frame buffered, while more() allows. */
void framer_process(struct framer *fr);

/*
 * Encode @f and send it on the socket of @bev, written through at once
 * when nothing is queued ahead (wire_send).  The payload of DATA and STDIN
 * (f->data) is appended without an intermediate copy.  ERROR always stays
 * queued: an end that closes after it frees the connection from its write
 * callback once the output drained, so there must be something to drain.
 * Returns 0 or -EINVAL / -ENOSPC (from proto_encode_head()).
 */
int framer_send(struct bufferevent *bev, const struct proto_frame *f);

#endif /* IOFS_NET_FRAMER_H */
