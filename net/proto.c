/* SPDX-License-Identifier: MIT */
/*
 * Wire protocol codec: see proto.h and docs/protocol.md.
 */
#include "net/proto.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "router/router.h"

/* Who may receive a frame type. */
enum {
	TO_DAEMON = 1u << PROTO_ROLE_DAEMON,
	TO_FORWARDER = 1u << PROTO_ROLE_FORWARDER,
};

/* Channels valid for a frame, by receiving role. */
#define CH_OUTPUT (ROUTER_CH_STDOUT | ROUTER_CH_STDERR | ROUTER_CH_STDDIAG)

#define HELLO_FIXED 40u /* fixed part of the HELLO body */

/*
 * Frame layouts.  @fixed is the size of the fixed body (after the type);
 * @tail_min/@tail_max bound the trailing byte string (0/0: none).  HELLO is
 * checked by its decoder (two length-prefixed strings).
 */
struct proto_desc {
	const char *name;
	unsigned to; /* TO_* mask */
	uint32_t fixed;
	uint32_t tail_min;
	uint32_t tail_max;
	bool ranked; /* first field is a rank checked against HELLO */
};

static const struct proto_desc descs[PROTO_TYPE_MAX + 1] = {
    [PROTO_HELLO] = {.name = "HELLO", .to = TO_DAEMON, .fixed = HELLO_FIXED},
    [PROTO_WELCOME] = {.name = "WELCOME",
		       .to = TO_FORWARDER,
		       .fixed = 8,
		       .tail_max = ROUTER_NSPACE_MAX},
    [PROTO_ERROR] = {.name = "ERROR",
		     .to = TO_FORWARDER,
		     .fixed = 4,
		     .tail_max = PROTO_MSG_MAX},
    [PROTO_RANK_START] = {.name = "RANK_START",
			  .to = TO_DAEMON,
			  .fixed = 8,
			  .ranked = true},
    [PROTO_DATA] = {.name = "DATA",
		    .to = TO_DAEMON,
		    .fixed = 5,
		    .tail_min = 1,
		    .tail_max = PROTO_PAYLOAD_MAX,
		    .ranked = true},
    [PROTO_COMPLETE] = {.name = "COMPLETE",
			.to = TO_DAEMON,
			.fixed = 5,
			.ranked = true},
    [PROTO_EXIT] = {.name = "EXIT",
		    .to = TO_DAEMON,
		    .fixed = 9,
		    .ranked = true},
    [PROTO_STDIN] = {.name = "STDIN",
		     .to = TO_FORWARDER,
		     .fixed = 4,
		     .tail_min = 1,
		     .tail_max = PROTO_PAYLOAD_MAX,
		     .ranked = true},
    [PROTO_STDIN_EOF] = {.name = "STDIN_EOF",
			 .to = TO_FORWARDER,
			 .fixed = 4,
			 .ranked = true},
    [PROTO_XOFF] = {.name = "XOFF",
		    .to = TO_DAEMON | TO_FORWARDER,
		    .fixed = 5,
		    .ranked = true},
    [PROTO_XON] = {.name = "XON",
		   .to = TO_DAEMON | TO_FORWARDER,
		   .fixed = 5,
		   .ranked = true},
    [PROTO_ACK] = {.name = "ACK", .to = TO_FORWARDER, .fixed = 12},
    [PROTO_STDIN_ACK] = {.name = "STDIN_ACK",
			 .to = TO_DAEMON,
			 .fixed = 12,
			 .ranked = true},
    [PROTO_HELD] = {.name = "HELD",
		    .to = TO_FORWARDER,
		    .fixed = 5 + 8 * PROTO_HELD_CHANNELS,
		    .ranked = true},
    [PROTO_RESUME] = {.name = "RESUME",
		      .to = TO_DAEMON,
		      .fixed = 29,
		      .ranked = true},
    [PROTO_COMMAND] = {.name = "COMMAND",
		       .to = TO_DAEMON,
		       .fixed = 2,
		       .tail_min = 1,
		       .tail_max = PROTO_COMMAND_MAX},
};

int proto_channel_index(uint32_t channel)
{
	switch (channel) {
	case ROUTER_CH_STDOUT:
		return 0;
	case ROUTER_CH_STDERR:
		return 1;
	case ROUTER_CH_STDDIAG:
		return 2;
	}
	return -1;
}

static const struct proto_desc *desc_of(unsigned type)
{
	if (type == 0 || type > PROTO_TYPE_MAX || !descs[type].name)
		return NULL;
	return &descs[type];
}

const char *proto_type_name(unsigned type)
{
	const struct proto_desc *d = desc_of(type);
	return d ? d->name : "UNKNOWN";
}

const char *proto_channel_name(uint32_t channel)
{
	switch (channel) {
	case ROUTER_CH_STDIN:
		return "stdin";
	case ROUTER_CH_STDOUT:
		return "stdout";
	case ROUTER_CH_STDERR:
		return "stderr";
	case ROUTER_CH_STDDIAG:
		return "stddiag";
	}
	return "?";
}

const char *proto_strerror(int code)
{
	static const char *const names[] = {
	    [PROTO_OK] = "ok",
	    [PROTO_NEED_MORE] = "incomplete frame",
	    [PROTO_ERR_TYPE] = "unknown frame type",
	    [PROTO_ERR_LENGTH] = "bad frame length",
	    [PROTO_ERR_OVERSIZE] = "frame too large",
	    [PROTO_ERR_MAGIC] = "bad magic (not an iofs forwarder?)",
	    [PROTO_ERR_VERSION] = "unsupported protocol version",
	    [PROTO_ERR_NSPACE] = "invalid namespace",
	    [PROTO_ERR_ORDER] = "frame out of order",
	    [PROTO_ERR_RANK] = "rank outside the HELLO range",
	    [PROTO_ERR_CHANNEL] = "invalid channel",
	    [PROTO_ERR_DIRECTION] = "frame not valid in this direction",
	    [PROTO_ERR_FIELD] = "field out of range",
	};
	if (code < 0 || (size_t)code >= sizeof(names) / sizeof(names[0]))
		return "unknown protocol error";
	return names[code];
}

void proto_peer_init(struct proto_peer *p, enum proto_role role)
{
	memset(p, 0, sizeof(*p));
	p->role = role;
}

void proto_peer_set_ranks(struct proto_peer *p, uint32_t base, uint32_t count)
{
	p->rank_base = base;
	p->rank_count = count;
}

/* ------------------------------------------------------------------------ */
/* Little-endian helpers                                                     */

static uint16_t get16(const uint8_t *b)
{
	return (uint16_t)(b[0] | (b[1] << 8));
}

static uint32_t get32(const uint8_t *b)
{
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
	       (uint32_t)b[3] << 24;
}

static uint64_t get64(const uint8_t *b)
{
	return (uint64_t)get32(b) | (uint64_t)get32(b + 4) << 32;
}

static uint8_t *put8(uint8_t *b, uint8_t v)
{
	*b = v;
	return b + 1;
}

static uint8_t *put16(uint8_t *b, uint16_t v)
{
	b[0] = (uint8_t)v;
	b[1] = (uint8_t)(v >> 8);
	return b + 2;
}

static uint8_t *put32(uint8_t *b, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	return b + 4;
}

static uint8_t *put64(uint8_t *b, uint64_t v)
{
	put32(b, (uint32_t)v);
	return put32(b + 4, (uint32_t)(v >> 32));
}

/* ------------------------------------------------------------------------ */
/* Decoder                                                                   */

__attribute__((format(printf, 4, 5))) static int
fail(int code, char *err, size_t errlen, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

static int decode_hello(const uint8_t *b, uint32_t blen, struct proto_frame *f,
			char *err, size_t errlen)
{
	struct proto_hello *h = &f->hello;
	uint32_t magic = get32(b);

	if (magic != PROTO_MAGIC)
		return fail(PROTO_ERR_MAGIC, err, errlen,
			    "HELLO: magic 0x%08x, expected 0x%08x", magic,
			    PROTO_MAGIC);
	h->version = get16(b + 4);
	if (h->version < PROTO_VERSION_MIN || h->version > PROTO_VERSION)
		return fail(PROTO_ERR_VERSION, err, errlen,
			    "HELLO: protocol version %u, this daemon speaks "
			    "%u..%u",
			    h->version, PROTO_VERSION_MIN, PROTO_VERSION);
	h->flags = get16(b + 6);
	h->rank_base = get32(b + 8);
	h->rank_count = get32(b + 12);
	h->job_size = get32(b + 16);
	h->pid = get32(b + 20);
	h->uid = get32(b + 24);
	h->gid = get32(b + 28);
	h->dirs_set = get32(b + 32);
	h->dirs_value = get32(b + 36);

	uint32_t off = HELLO_FIXED;
	if (blen < off + 1)
		return fail(PROTO_ERR_LENGTH, err, errlen,
			    "HELLO: no namespace length");
	h->nspace_len = b[off++];
	if (blen < off + h->nspace_len + 1)
		return fail(PROTO_ERR_LENGTH, err, errlen,
			    "HELLO: namespace/host past the frame end");
	h->nspace = (const char *)b + off;
	off += (uint32_t)h->nspace_len;
	h->host_len = b[off++];
	h->host = (const char *)b + off;
	off += (uint32_t)h->host_len;
	if (h->version >= 3) { /* u16 credential length, credential */
		if (blen < off + 2)
			return fail(PROTO_ERR_LENGTH, err, errlen,
				    "HELLO: no credential length");
		h->cred_len = get16(b + off);
		off += 2;
		h->cred = (const char *)b + off;
		off += (uint32_t)h->cred_len;
	}
	if (blen != off)
		return fail(PROTO_ERR_LENGTH, err, errlen,
			    "HELLO: body is %u bytes, layout says %u", blen,
			    off);
	if (h->cred_len > PROTO_CRED_MAX ||
	    (h->cred_len && memchr(h->cred, '\0', h->cred_len)))
		return fail(PROTO_ERR_FIELD, err, errlen,
			    "HELLO: credential of %zu bytes (at most %u, no "
			    "NUL)",
			    h->cred_len, PROTO_CRED_MAX);
	if (!router_nspace_valid(h->nspace, h->nspace_len))
		return fail(PROTO_ERR_NSPACE, err, errlen,
			    "HELLO: invalid namespace (%zu bytes)",
			    h->nspace_len);
	if (!router_text_valid(h->host, h->host_len))
		return fail(PROTO_ERR_FIELD, err, errlen,
			    "HELLO: control character in the host name (%zu "
			    "bytes): refused",
			    h->host_len);
	if (h->rank_count == 0 || h->rank_count > PROTO_RANKS_MAX)
		return fail(PROTO_ERR_FIELD, err, errlen,
			    "HELLO: rank count %u not in 1..%u", h->rank_count,
			    PROTO_RANKS_MAX);
	if (h->rank_base > ROUTER_RANK_MAX ||
	    h->rank_count - 1 > ROUTER_RANK_MAX - h->rank_base)
		return fail(PROTO_ERR_RANK, err, errlen,
			    "HELLO: ranks %u+%u overflow", h->rank_base,
			    h->rank_count);
	return PROTO_OK;
}

static bool channel_ok(enum proto_role role, unsigned type, uint32_t ch)
{
	if (type == PROTO_DATA || type == PROTO_COMPLETE)
		return ch == ROUTER_CH_STDOUT || ch == ROUTER_CH_STDERR ||
		       ch == ROUTER_CH_STDDIAG;
	/* XON/XOFF: the daemon throttles output, the forwarder stdin. */
	if (role == PROTO_ROLE_DAEMON)
		return ch == ROUTER_CH_STDIN;
	return ch == ROUTER_CH_STDOUT || ch == ROUTER_CH_STDERR ||
	       ch == ROUTER_CH_STDDIAG;
}

/* WELCOME's fields (@b) and assigned name (@tail, @tlen bytes). */
static int decode_welcome(const uint8_t *b, const uint8_t *tail,
			  uint32_t tlen, struct proto_frame *f, char *err,
			  size_t errlen)
{
	f->version = get16(b);
	f->flags = get16(b + 2);
	f->max_payload = get32(b + 4);
	if (f->version < PROTO_VERSION_MIN || f->version > PROTO_VERSION)
		return fail(PROTO_ERR_VERSION, err, errlen,
			    "WELCOME: version %u", f->version);
	if (f->max_payload == 0)
		return fail(PROTO_ERR_FIELD, err, errlen,
			    "WELCOME: max payload 0");
	if (!(f->flags & PROTO_WELCOME_F_NAME) != !tlen ||
	    (tlen && !router_nspace_valid((const char *)tail, tlen)))
		return fail(PROTO_ERR_NSPACE, err, errlen,
			    "WELCOME: assigned name of %u bytes, flags 0x%x",
			    tlen, f->flags);
	f->name = (const char *)tail;
	f->name_len = tlen;
	return PROTO_OK;
}

/* RESUME's fields after its rank (@b). */
static int decode_resume(const uint8_t *b, struct proto_frame *f, char *err,
			 size_t errlen)
{
	f->stdin_rx = get64(b + 4);
	f->ack_bytes = get64(b + 12);
	f->stdin_eof = b[20];
	f->replay_bytes = get64(b + 21);
	if (f->ack_bytes > f->stdin_rx || f->stdin_eof > 1)
		return fail(PROTO_ERR_FIELD, err, errlen,
			    "RESUME: stdin let go %llu > received %llu, or "
			    "eof %u",
			    (unsigned long long)f->ack_bytes,
			    (unsigned long long)f->stdin_rx, f->stdin_eof);
	return PROTO_OK;
}

static int decode_body(struct proto_peer *p, const struct proto_desc *d,
		       unsigned type, const uint8_t *b, uint32_t blen,
		       struct proto_frame *f, char *err, size_t errlen)
{
	const uint8_t *tail = b + d->fixed;
	uint32_t tlen = blen - d->fixed;

	if (d->ranked) {
		f->rank = get32(b);
		if (f->rank < p->rank_base ||
		    f->rank - p->rank_base >= p->rank_count)
			return fail(PROTO_ERR_RANK, err, errlen,
				    "%s: rank %u outside %u..%u", d->name,
				    f->rank, p->rank_base,
				    p->rank_base + p->rank_count - 1);
	}
	switch (type) {
	case PROTO_HELLO:
		return decode_hello(b, blen, f, err, errlen);
	case PROTO_WELCOME:
		return decode_welcome(b, tail, tlen, f, err, errlen);
	case PROTO_ERROR:
		f->code = get32(b);
		f->msg = (const char *)tail;
		f->msg_len = tlen;
		return PROTO_OK;
	case PROTO_RANK_START:
		f->pid = get32(b + 4);
		return PROTO_OK;
	case PROTO_DATA:
	case PROTO_COMPLETE:
	case PROTO_XOFF:
	case PROTO_XON:
		f->channel = b[4];
		if (!channel_ok(p->role, type, f->channel))
			return fail(PROTO_ERR_CHANNEL, err, errlen,
				    "%s: channel 0x%x", d->name, f->channel);
		f->data = tail;
		f->len = tlen;
		return PROTO_OK;
	case PROTO_EXIT:
		f->how = b[4];
		f->code = get32(b + 5);
		if (f->how == PROTO_EXIT_CODE && f->code <= 255)
			return PROTO_OK;
		if (f->how == PROTO_EXIT_SIGNAL && f->code >= 1 &&
		    f->code <= 127)
			return PROTO_OK;
		return fail(PROTO_ERR_FIELD, err, errlen,
			    "EXIT: how %u code %u", f->how, f->code);
	case PROTO_STDIN:
	case PROTO_STDIN_EOF:
		f->data = tail;
		f->len = tlen;
		return PROTO_OK;
	case PROTO_ACK:
		f->ack_bytes = get64(b);
		f->ack_exits = get32(b + 8);
		return PROTO_OK;
	case PROTO_STDIN_ACK:
		f->ack_bytes = get64(b + 4);
		return PROTO_OK;
	case PROTO_HELD:
		f->held_state = b[4];
		for (int i = 0; i < PROTO_HELD_CHANNELS; i++)
			f->held[i] = get64(b + 5 + 8 * i);
		if (f->held_state > PROTO_HELD_EXITED)
			return fail(PROTO_ERR_FIELD, err, errlen,
				    "HELD: state %u", f->held_state);
		return PROTO_OK;
	case PROTO_RESUME:
		return decode_resume(b, f, err, errlen);
	case PROTO_COMMAND:
		f->flags = get16(b);
		f->msg = (const char *)tail;
		f->msg_len = tlen;
		/* it becomes an info line: no byte may forge another */
		if (!router_text_valid(f->msg, f->msg_len))
			return fail(PROTO_ERR_FIELD, err, errlen,
				    "COMMAND: control character in the "
				    "command line (%u bytes): refused",
				    tlen);
		return PROTO_OK;
	}
	return fail(PROTO_ERR_TYPE, err, errlen, "type %u", type);
}

int proto_decode(struct proto_peer *p, const uint8_t *buf, size_t avail,
		 struct proto_frame *f, size_t *consumed, char *err,
		 size_t errlen)
{
	if (avail < PROTO_HDR_SIZE) {
		/* An oversized length is visible before the type byte. */
		if (avail >= PROTO_LEN_SIZE && get32(buf) > PROTO_FRAME_MAX)
			return fail(PROTO_ERR_OVERSIZE, err, errlen,
				    "length %u > %u", get32(buf),
				    PROTO_FRAME_MAX);
		*consumed = PROTO_HDR_SIZE;
		return PROTO_NEED_MORE;
	}
	uint32_t len = get32(buf);
	unsigned type = buf[PROTO_LEN_SIZE];
	if (len > PROTO_FRAME_MAX)
		return fail(PROTO_ERR_OVERSIZE, err, errlen, "length %u > %u",
			    len, PROTO_FRAME_MAX);
	if (len == 0)
		return fail(PROTO_ERR_LENGTH, err, errlen, "length 0");
	const struct proto_desc *d = desc_of(type);
	if (!d)
		return fail(PROTO_ERR_TYPE, err, errlen, "frame type %u", type);
	if (!(d->to & (1u << p->role)))
		return fail(PROTO_ERR_DIRECTION, err, errlen,
			    "%s sent to the %s", d->name,
			    p->role == PROTO_ROLE_DAEMON ? "daemon"
							 : "forwarder");
	uint32_t blen = len - 1;
	if (blen < d->fixed ||
	    (type != PROTO_HELLO &&
	     (blen - d->fixed < d->tail_min || blen - d->fixed > d->tail_max)))
		return fail(PROTO_ERR_LENGTH, err, errlen,
			    "%s: body of %u bytes", d->name, blen);
	/* Ordering: HELLO first (daemon), WELCOME/ERROR first (forwarder). */
	if (p->role == PROTO_ROLE_DAEMON) {
		if (!p->greeted && type != PROTO_HELLO)
			return fail(PROTO_ERR_ORDER, err, errlen,
				    "%s before HELLO", d->name);
		if (p->greeted && type == PROTO_HELLO)
			return fail(PROTO_ERR_ORDER, err, errlen,
				    "second HELLO");
	} else {
		if (!p->greeted && type != PROTO_WELCOME &&
		    type != PROTO_ERROR && type != PROTO_HELD)
			return fail(PROTO_ERR_ORDER, err, errlen,
				    "%s before WELCOME", d->name);
		if (p->greeted && type == PROTO_WELCOME)
			return fail(PROTO_ERR_ORDER, err, errlen,
				    "second WELCOME");
	}
	if (avail < PROTO_LEN_SIZE + (size_t)len) {
		*consumed = PROTO_LEN_SIZE + (size_t)len;
		return PROTO_NEED_MORE;
	}
	memset(f, 0, sizeof(*f));
	f->type = (enum proto_type)type;
	int rc =
	    decode_body(p, d, type, buf + PROTO_HDR_SIZE, blen, f, err, errlen);
	if (rc != PROTO_OK)
		return rc;
	if (type == PROTO_HELLO) {
		p->greeted = true;
		proto_peer_set_ranks(p, f->hello.rank_base,
				     f->hello.rank_count);
	} else if (type == PROTO_WELCOME) {
		p->greeted = true;
	}
	*consumed = PROTO_LEN_SIZE + (size_t)len;
	return PROTO_OK;
}

/* ------------------------------------------------------------------------ */
/* Encoder                                                                   */

/* Body size of @f without its trailing bytes (data/strings), or 0 on an
 * invalid frame; *tail = size of the trailing part. */
static uint32_t layout(const struct proto_frame *f, uint32_t *tail)
{
	const struct proto_desc *d = desc_of(f->type);
	if (!d)
		return 0;
	*tail = 0;
	switch (f->type) {
	case PROTO_HELLO:
		if (f->hello.nspace_len > ROUTER_NSPACE_MAX ||
		    f->hello.host_len > PROTO_HOST_MAX ||
		    f->hello.cred_len > PROTO_CRED_MAX ||
		    (f->hello.version < 3 && f->hello.cred_len))
			return 0;
		return HELLO_FIXED + 2 + (uint32_t)f->hello.nspace_len +
		       (uint32_t)f->hello.host_len +
		       (f->hello.version >= 3
			    ? 2 + (uint32_t)f->hello.cred_len
			    : 0);
	case PROTO_WELCOME:
		if (f->name_len > ROUTER_NSPACE_MAX ||
		    !(f->flags & PROTO_WELCOME_F_NAME) != !f->name_len)
			return 0;
		return d->fixed + (uint32_t)f->name_len;
	case PROTO_ERROR:
		if (f->msg_len > PROTO_MSG_MAX)
			return 0;
		*tail = (uint32_t)f->msg_len;
		return d->fixed;
	case PROTO_COMMAND:
		if (f->msg_len == 0 || f->msg_len > PROTO_COMMAND_MAX)
			return 0;
		*tail = (uint32_t)f->msg_len;
		return d->fixed;
	case PROTO_DATA:
	case PROTO_STDIN:
		if (f->len == 0 || f->len > PROTO_PAYLOAD_MAX)
			return 0;
		*tail = (uint32_t)f->len;
		return d->fixed;
	default:
		return d->fixed;
	}
}

/* HELLO's body at @b (room checked by the caller); returns its end. */
static uint8_t *put_hello(uint8_t *b, const struct proto_hello *h)
{
	b = put32(b, PROTO_MAGIC);
	b = put16(b, h->version);
	b = put16(b, h->flags);
	b = put32(b, h->rank_base);
	b = put32(b, h->rank_count);
	b = put32(b, h->job_size);
	b = put32(b, h->pid);
	b = put32(b, h->uid);
	b = put32(b, h->gid);
	b = put32(b, h->dirs_set);
	b = put32(b, h->dirs_value);
	b = put8(b, (uint8_t)h->nspace_len);
	if (h->nspace_len)
		memcpy(b, h->nspace, h->nspace_len);
	b += h->nspace_len;
	b = put8(b, (uint8_t)h->host_len);
	if (h->host_len)
		memcpy(b, h->host, h->host_len);
	b += h->host_len;
	if (h->version >= 3) {
		b = put16(b, (uint16_t)h->cred_len);
		if (h->cred_len)
			memcpy(b, h->cred, h->cred_len);
		b += h->cred_len;
	}
	return b;
}

static ssize_t encode(const struct proto_frame *f, uint8_t *buf, size_t cap,
		      bool with_data)
{
	uint32_t tail;
	uint32_t fixed = layout(f, &tail);
	if (fixed == 0)
		return -EINVAL;
	bool data_tail = f->type == PROTO_DATA || f->type == PROTO_STDIN;
	size_t out =
	    PROTO_HDR_SIZE + fixed + (data_tail && !with_data ? 0 : tail);
	if (cap < out)
		return -ENOSPC;

	uint8_t *b = put32(buf, 1 + fixed + tail);
	b = put8(b, (uint8_t)f->type);
	switch (f->type) {
	case PROTO_HELLO:
		b = put_hello(b, &f->hello);
		break;
	case PROTO_WELCOME:
		b = put16(b, f->version);
		b = put16(b, f->flags);
		b = put32(b, f->max_payload);
		if (f->name_len)
			memcpy(b, f->name, f->name_len);
		b += f->name_len;
		break;
	case PROTO_ERROR:
		b = put32(b, f->code);
		if (f->msg_len)
			memcpy(b, f->msg, f->msg_len);
		b += f->msg_len;
		break;
	case PROTO_RANK_START:
		b = put32(b, f->rank);
		b = put32(b, f->pid);
		break;
	case PROTO_DATA:
	case PROTO_COMPLETE:
	case PROTO_XOFF:
	case PROTO_XON:
		b = put32(b, f->rank);
		b = put8(b, (uint8_t)f->channel);
		break;
	case PROTO_EXIT:
		b = put32(b, f->rank);
		b = put8(b, f->how);
		b = put32(b, f->code);
		break;
	case PROTO_STDIN:
	case PROTO_STDIN_EOF:
		b = put32(b, f->rank);
		break;
	case PROTO_ACK:
		b = put64(b, f->ack_bytes);
		b = put32(b, f->ack_exits);
		break;
	case PROTO_STDIN_ACK:
		b = put32(b, f->rank);
		b = put64(b, f->ack_bytes);
		break;
	case PROTO_HELD:
		b = put32(b, f->rank);
		b = put8(b, f->held_state);
		for (int i = 0; i < PROTO_HELD_CHANNELS; i++)
			b = put64(b, f->held[i]);
		break;
	case PROTO_COMMAND:
		b = put16(b, f->flags);
		memcpy(b, f->msg, f->msg_len);
		b += f->msg_len;
		break;
	case PROTO_RESUME:
		b = put32(b, f->rank);
		b = put64(b, f->stdin_rx);
		b = put64(b, f->ack_bytes);
		b = put8(b, f->stdin_eof);
		b = put64(b, f->replay_bytes);
		break;
	}
	if (data_tail && with_data) {
		memcpy(b, f->data, f->len);
		b += f->len;
	}
	return b - buf;
}

ssize_t proto_encode(const struct proto_frame *f, uint8_t *buf, size_t cap)
{
	return encode(f, buf, cap, true);
}

ssize_t proto_encode_head(const struct proto_frame *f, uint8_t *buf, size_t cap)
{
	return encode(f, buf, cap, false);
}
