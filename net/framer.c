/* SPDX-License-Identifier: MIT */
/*
 * The one framer of both ends: burst reads, the pull-up/decode loop and
 * dispatch through the owner's table, and sending (framer.h).
 */
#include "net/framer.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "net/wire.h"

int framer_init(struct framer *fr, enum proto_role role,
		const struct framer_ops *ops, void *ctx)
{
	memset(fr, 0, sizeof(*fr));
	fr->ops = ops;
	fr->ctx = ctx;
	proto_peer_init(&fr->dec, role);
	fr->in = evbuffer_new();
	return fr->in ? 0 : -ENOMEM;
}

void framer_release(struct framer *fr)
{
	if (fr->in) {
		evbuffer_free(fr->in);
		fr->in = NULL;
	}
}

int framer_read(struct framer *fr, int fd, size_t chunk, size_t burst,
		size_t max_buffered)
{
	size_t got = 0;

	while (got < burst &&
	       evbuffer_get_length(fr->in) + chunk <= max_buffered) {
		ssize_t n = wire_read_fds(fd, fr->in, chunk, fr->ops->fds, fr->ctx);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n == 0)
			return FRAMER_CLOSED;
		if (n < 0)
			return -errno;
		got += (size_t)n;
		if ((size_t)n < chunk)
			break;
	}
	return 0;
}

/*
 * Decode the frame at the head of the input: the header first (it may
 * already be refused: bad type, direction, order, size), then the whole
 * frame, pulled up into one piece or moved out into the owner's memory
 * (take).  PROTO_OK with *taken set if it left the buffer already;
 * PROTO_NEED_MORE; an error (reported by fail()); or -ENOMEM after a take
 * that failed (reported by the owner).
 */
static int decode_head(struct framer *fr, struct proto_frame *f,
		       size_t *consumed, bool *taken, char *err, size_t errlen)
{
	size_t avail = evbuffer_get_length(fr->in);
	size_t need = avail < PROTO_HDR_SIZE ? avail : PROTO_HDR_SIZE;
	const uint8_t *p = evbuffer_pullup(fr->in, (ssize_t)need);
	int rc = proto_decode(&fr->dec, p, need, f, consumed, err, errlen);

	*taken = false;
	if (rc == PROTO_NEED_MORE && *consumed > need && *consumed <= avail) {
		need = *consumed;
		if (fr->ops->take && p[PROTO_LEN_SIZE] == PROTO_DATA) {
			uint8_t *buf = fr->ops->take(fr->ctx, need);
			if (!buf)
				return -ENOMEM;
			evbuffer_remove(fr->in, buf, need);
			*taken = true;
			p = buf;
		} else {
			p = evbuffer_pullup(fr->in, (ssize_t)need);
		}
		rc = proto_decode(&fr->dec, p, need, f, consumed, err, errlen);
	}
	return rc;
}

void framer_process(struct framer *fr)
{
	char err[256];

	while (!fr->ops->more || fr->ops->more(fr->ctx)) {
		struct proto_frame f;
		size_t consumed = 0;
		bool taken;
		int rc;

		if (evbuffer_get_length(fr->in) == 0)
			return;
		rc = decode_head(fr, &f, &consumed, &taken, err, sizeof(err));
		if (rc == PROTO_NEED_MORE || rc == -ENOMEM)
			return;
		if (rc != PROTO_OK) {
			fr->ops->fail(fr->ctx, rc, err);
			return;
		}
		fr->frames_in++;
		if (fr->ops->trace)
			fr->ops->trace(fr->ctx, &f);
		framer_fn fn = fr->ops->handlers[f.type];
		if (!fn) {
			snprintf(err, sizeof(err), "no handler for %s",
				 proto_type_name(f.type));
			fr->ops->fail(fr->ctx, PROTO_ERR_DIRECTION, err);
			return;
		}
		if (fn(fr->ctx, &f) < 0)
			return; /* closed: the framer may be gone */
		if (!taken)
			evbuffer_drain(fr->in, consumed);
	}
}

int framer_send(struct bufferevent *bev, const struct proto_frame *f)
{
	uint8_t head[PROTO_HEAD_MAX];
	ssize_t n = proto_encode_head(f, head, sizeof(head));
	bool body = f->type == PROTO_DATA || f->type == PROTO_STDIN;

	if (n < 0)
		return (int)n;
	wire_send(bufferevent_get_output(bev),
		  f->type == PROTO_ERROR ? -1 : bufferevent_getfd(bev), head,
		  (size_t)n, body ? f->data : NULL, body ? f->len : 0);
	return 0;
}
