/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the wire codec (net/proto.c): a round trip of every frame
 * type in its direction, and every malformed case the decoder rejects.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "net/proto.h"
#include "router/router.h"

static uint8_t buf[PROTO_FRAME_MAX + 16];
static char err[256];

static struct proto_frame hello_frame(const char *ns, uint32_t base,
				      uint32_t count)
{
	struct proto_frame f = {
	    .type = PROTO_HELLO,
	    .hello = {.version = PROTO_VERSION,
		      .rank_base = base,
		      .rank_count = count,
		      .job_size = 16,
		      .pid = 4242,
		      .uid = 1000,
		      .gid = 100,
		      .dirs_set = ROUTER_DIR_TAG_OUTPUT,
		      .dirs_value = ROUTER_DIR_TAG_OUTPUT,
		      .nspace = ns,
		      .nspace_len = strlen(ns),
		      .host = "node7",
		      .host_len = 5},
	};
	return f;
}

/* A daemon-side peer that has seen HELLO for ranks 4..7. */
static void greeted_daemon(struct proto_peer *p)
{
	struct proto_frame h = hello_frame("job", 4, 4), out;
	size_t used;
	ssize_t n = proto_encode(&h, buf, sizeof(buf));

	proto_peer_init(p, PROTO_ROLE_DAEMON);
	assert_true(n > 0);
	assert_int_equal(
	    proto_decode(p, buf, (size_t)n, &out, &used, err, sizeof(err)),
	    PROTO_OK);
}

static void greeted_forwarder(struct proto_peer *p)
{
	struct proto_frame w = {.type = PROTO_WELCOME,
				.version = PROTO_VERSION,
				.max_payload = PROTO_PAYLOAD_MAX},
			   out;
	size_t used;
	ssize_t n = proto_encode(&w, buf, sizeof(buf));

	proto_peer_init(p, PROTO_ROLE_FORWARDER);
	proto_peer_set_ranks(p, 4, 4);
	assert_int_equal(
	    proto_decode(p, buf, (size_t)n, &out, &used, err, sizeof(err)),
	    PROTO_OK);
}

/* Encode @f, decode it with @p; check every prefix says NEED_MORE. */
static void round_trip(struct proto_peer *p, const struct proto_frame *f,
		       struct proto_frame *out)
{
	ssize_t n = proto_encode(f, buf, sizeof(buf));
	size_t used = 0;

	assert_true(n >= PROTO_HDR_SIZE);
	for (size_t cut = 0; cut < (size_t)n; cut += 1 + cut / 2) {
		struct proto_peer copy = *p;
		assert_int_equal(
		    proto_decode(&copy, buf, cut, out, &used, err, sizeof(err)),
		    PROTO_NEED_MORE);
		assert_true(used > cut);
		assert_true(used <= (size_t)n);
	}
	assert_int_equal(
	    proto_decode(p, buf, (size_t)n, out, &used, err, sizeof(err)),
	    PROTO_OK);
	assert_int_equal(used, (size_t)n);
	assert_int_equal(out->type, f->type);
	/* Encoding again gives the same bytes. */
	uint8_t again[PROTO_HEAD_MAX + 64];
	if (f->type != PROTO_DATA && f->type != PROTO_STDIN) {
		ssize_t m = proto_encode(out, again, sizeof(again));
		assert_int_equal(m, n);
		assert_memory_equal(again, buf, (size_t)n);
	}
}

static void test_hello_round_trip(void **state)
{
	struct proto_peer p;
	struct proto_frame f = hello_frame("my.job-1", 4, 4), out;

	proto_peer_init(&p, PROTO_ROLE_DAEMON);
	round_trip(&p, &f, &out);
	assert_true(p.greeted);
	assert_int_equal(p.rank_base, 4);
	assert_int_equal(p.rank_count, 4);
	assert_int_equal(out.hello.job_size, 16);
	assert_int_equal(out.hello.pid, 4242);
	assert_int_equal(out.hello.uid, 1000);
	assert_int_equal(out.hello.gid, 100);
	assert_int_equal(out.hello.dirs_set, ROUTER_DIR_TAG_OUTPUT);
	assert_int_equal(out.hello.nspace_len, 8);
	assert_memory_equal(out.hello.nspace, "my.job-1", 8);
	assert_memory_equal(out.hello.host, "node7", 5);

	/* Longest names. */
	char ns[256];
	memset(ns, 'n', 255);
	ns[255] = '\0';
	f = hello_frame(ns, 0, 1);
	char host[256];
	memset(host, 'h', 255);
	f.hello.host = host;
	f.hello.host_len = 255;
	proto_peer_init(&p, PROTO_ROLE_DAEMON);
	round_trip(&p, &f, &out);
	assert_int_equal(out.hello.nspace_len, 255);
	assert_int_equal(out.hello.host_len, 255);
	/* Empty host is fine. */
	f.hello.host_len = 0;
	proto_peer_init(&p, PROTO_ROLE_DAEMON);
	round_trip(&p, &f, &out);

	/* Version 3 carries a credential, up to PROTO_CRED_MAX bytes. */
	static char cred[PROTO_CRED_MAX];
	memset(cred, 'c', sizeof(cred));
	f = hello_frame("j", 0, 1);
	f.hello.cred = cred;
	f.hello.cred_len = sizeof(cred);
	proto_peer_init(&p, PROTO_ROLE_DAEMON);
	round_trip(&p, &f, &out);
	assert_int_equal(out.hello.version, PROTO_VERSION);
	assert_int_equal(out.hello.cred_len, PROTO_CRED_MAX);
	assert_memory_equal(out.hello.cred, cred, PROTO_CRED_MAX);
	/* Version 2 (no credential field) is still accepted. */
	f = hello_frame("j", 0, 1);
	f.hello.version = 2;
	proto_peer_init(&p, PROTO_ROLE_DAEMON);
	round_trip(&p, &f, &out);
	assert_int_equal(out.hello.version, 2);
	assert_int_equal(out.hello.cred_len, 0);
	assert_int_equal(proto_encode(&f, buf, sizeof(buf)),
			 PROTO_HDR_SIZE + 40 + 2 + 1 + 5);
}

static void test_daemon_frames_round_trip(void **state)
{
	struct proto_peer p;
	struct proto_frame out;
	static uint8_t payload[PROTO_PAYLOAD_MAX];

	greeted_daemon(&p);
	struct proto_frame rs = {
	    .type = PROTO_RANK_START, .rank = 5, .pid = 99};
	round_trip(&p, &rs, &out);
	assert_int_equal(out.rank, 5);
	assert_int_equal(out.pid, 99);

	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 7);
	payload[3] = 0;
	size_t sizes[] = {1, 2, 65536, PROTO_PAYLOAD_MAX};
	for (size_t i = 0; i < 4; i++) {
		struct proto_frame d = {.type = PROTO_DATA,
					.rank = 7,
					.channel = ROUTER_CH_STDERR,
					.data = payload,
					.len = sizes[i]};
		round_trip(&p, &d, &out);
		assert_int_equal(out.rank, 7);
		assert_int_equal(out.channel, ROUTER_CH_STDERR);
		assert_int_equal(out.len, sizes[i]);
		assert_memory_equal(out.data, payload, sizes[i]);
	}
	struct proto_frame c = {
	    .type = PROTO_COMPLETE, .rank = 4, .channel = ROUTER_CH_STDOUT};
	round_trip(&p, &c, &out);
	assert_int_equal(out.channel, ROUTER_CH_STDOUT);

	struct proto_frame e = {
	    .type = PROTO_EXIT, .rank = 6, .how = PROTO_EXIT_SIGNAL, .code = 9};
	round_trip(&p, &e, &out);
	assert_int_equal(out.how, PROTO_EXIT_SIGNAL);
	assert_int_equal(out.code, 9);
	e.how = PROTO_EXIT_CODE;
	e.code = 255;
	round_trip(&p, &e, &out);
	assert_int_equal(out.code, 255);

	struct proto_frame x = {
	    .type = PROTO_XOFF, .rank = 4, .channel = ROUTER_CH_STDIN};
	round_trip(&p, &x, &out);
	x.type = PROTO_XON;
	round_trip(&p, &x, &out);
	assert_int_equal(out.type, PROTO_XON);
	assert_int_equal(out.channel, ROUTER_CH_STDIN);

	struct proto_frame sa = {
	    .type = PROTO_STDIN_ACK, .rank = 5, .ack_bytes = 0xfedcba9876ULL};
	round_trip(&p, &sa, &out);
	assert_int_equal(out.rank, 5);
	assert_true(out.ack_bytes == 0xfedcba9876ULL);
}

static void test_forwarder_frames_round_trip(void **state)
{
	struct proto_peer p;
	struct proto_frame out;

	/* ERROR may come first. */
	proto_peer_init(&p, PROTO_ROLE_FORWARDER);
	struct proto_frame er = {.type = PROTO_ERROR,
				 .code = PROTO_REFUSED_EXISTS,
				 .msg = "rank 0 is running",
				 .msg_len = 17};
	round_trip(&p, &er, &out);
	assert_int_equal(out.code, PROTO_REFUSED_EXISTS);
	assert_memory_equal(out.msg, "rank 0 is running", 17);
	er.msg_len = 0;
	round_trip(&p, &er, &out);

	greeted_forwarder(&p);
	assert_true(p.greeted);
	struct proto_frame s = {.type = PROTO_STDIN,
				.rank = 5,
				.data = (const uint8_t *)"a\0b\n",
				.len = 4};
	round_trip(&p, &s, &out);
	assert_int_equal(out.len, 4);
	assert_memory_equal(out.data, "a\0b\n", 4);
	struct proto_frame se = {.type = PROTO_STDIN_EOF, .rank = 7};
	round_trip(&p, &se, &out);
	assert_int_equal(out.rank, 7);
	struct proto_frame x = {
	    .type = PROTO_XOFF, .rank = 6, .channel = ROUTER_CH_STDOUT};
	round_trip(&p, &x, &out);
	x.type = PROTO_XON;
	x.channel = ROUTER_CH_STDERR;
	round_trip(&p, &x, &out);
	struct proto_frame a = {
	    .type = PROTO_ACK, .ack_bytes = 0x123456789abcULL, .ack_exits = 3};
	round_trip(&p, &a, &out);
	assert_true(out.ack_bytes == 0x123456789abcULL);
	assert_int_equal(out.ack_exits, 3);
}

/* Version 4: HELD (before WELCOME too) and RESUME; bad fields refused. */
static void test_resume_frames(void **state)
{
	struct proto_peer p;
	struct proto_frame out;

	proto_peer_init(&p, PROTO_ROLE_FORWARDER);
	proto_peer_set_ranks(&p, 4, 4);
	struct proto_frame h = {.type = PROTO_HELD,
				.rank = 5,
				.held_state = PROTO_HELD_RUNNING,
				.held = {1ull << 40, 7, 0}};
	round_trip(&p, &h, &out); /* before WELCOME: allowed */
	assert_false(p.greeted);
	assert_int_equal(out.held_state, PROTO_HELD_RUNNING);
	assert_true(out.held[0] == 1ull << 40 && out.held[1] == 7);
	h.held_state = 3;
	ssize_t n = proto_encode(&h, buf, sizeof(buf));
	size_t used;
	assert_int_equal(proto_decode(&p, buf, (size_t)n, &out, &used, err,
				      sizeof(err)),
			 PROTO_ERR_FIELD);
	greeted_daemon(&p);
	struct proto_frame r = {.type = PROTO_RESUME,
				.rank = 4,
				.stdin_rx = 100,
				.ack_bytes = 60,
				.stdin_eof = 1,
				.replay_bytes = 1ull << 33};
	round_trip(&p, &r, &out);
	assert_true(out.stdin_rx == 100 && out.ack_bytes == 60);
	assert_true(out.replay_bytes == 1ull << 33);
	assert_int_equal(out.stdin_eof, 1);
	r.ack_bytes = 101; /* let go more than received */
	n = proto_encode(&r, buf, sizeof(buf));
	assert_int_equal(proto_decode(&p, buf, (size_t)n, &out, &used, err,
				      sizeof(err)),
			 PROTO_ERR_FIELD);
	/* HELD is not for the daemon, RESUME not for the forwarder. */
	h.held_state = 0;
	n = proto_encode(&h, buf, sizeof(buf));
	assert_int_equal(proto_decode(&p, buf, (size_t)n, &out, &used, err,
				      sizeof(err)),
			 PROTO_ERR_DIRECTION);
}

static void test_head_plus_data(void **state)
{
	uint8_t a[128], b[128];
	struct proto_frame d = {.type = PROTO_DATA,
				.rank = 1,
				.channel = ROUTER_CH_STDOUT,
				.data = (const uint8_t *)"hello",
				.len = 5};
	ssize_t n = proto_encode(&d, a, sizeof(a));
	ssize_t h = proto_encode_head(&d, b, sizeof(b));

	assert_int_equal(n, h + 5);
	memcpy(b + h, "hello", 5);
	assert_memory_equal(a, b, (size_t)n);
	/* The layout is the documented one. */
	static const uint8_t want[] = {11,  0,	 0,   0,   PROTO_DATA,
				       1,   0,	 0,   0,   ROUTER_CH_STDOUT,
				       'h', 'e', 'l', 'l', 'o'};
	assert_int_equal(n, sizeof(want));
	assert_memory_equal(a, want, sizeof(want));
}

static void test_encode_rejects(void **state)
{
	uint8_t small[8];
	struct proto_frame d = {.type = PROTO_DATA,
				.rank = 1,
				.channel = ROUTER_CH_STDOUT,
				.data = buf,
				.len = 0};

	assert_int_equal(proto_encode(&d, buf, sizeof(buf)), -EINVAL);
	d.len = PROTO_PAYLOAD_MAX + 1;
	assert_int_equal(proto_encode(&d, buf, sizeof(buf)), -EINVAL);
	d.len = 10;
	assert_int_equal(proto_encode(&d, small, sizeof(small)), -ENOSPC);
	struct proto_frame u = {.type = (enum proto_type)77};
	assert_int_equal(proto_encode(&u, buf, sizeof(buf)), -EINVAL);
	struct proto_frame h = hello_frame("x", 0, 1);
	h.hello.host_len = 256;
	assert_int_equal(proto_encode(&h, buf, sizeof(buf)), -EINVAL);
	struct proto_frame e = {.type = PROTO_ERROR,
				.msg = (char *)buf,
				.msg_len = PROTO_MSG_MAX + 1};
	assert_int_equal(proto_encode(&e, buf, sizeof(buf)), -EINVAL);
}

/* Decode raw bytes with a copy of @p; return the code. */
static int decode_raw(const struct proto_peer *p, const uint8_t *b, size_t n)
{
	struct proto_peer copy = *p;
	struct proto_frame f;
	size_t used;

	err[0] = '\0';
	int rc = proto_decode(&copy, b, n, &f, &used, err, sizeof(err));
	if (rc >= PROTO_ERR_TYPE)
		assert_true(err[0] != '\0'); /* a reason for the log */
	return rc;
}

static size_t raw(uint8_t *b, uint32_t len, uint8_t type, const void *body,
		  size_t blen)
{
	b[0] = (uint8_t)len;
	b[1] = (uint8_t)(len >> 8);
	b[2] = (uint8_t)(len >> 16);
	b[3] = (uint8_t)(len >> 24);
	b[4] = type;
	if (blen)
		memcpy(b + 5, body, blen);
	return 5 + blen;
}

static void test_bad_header(void **state)
{
	struct proto_peer d;
	uint8_t b[64];
	uint8_t body[16] = {0};

	greeted_daemon(&d);
	/* Unknown types. */
	assert_int_equal(decode_raw(&d, b, raw(b, 1, 0, NULL, 0)),
			 PROTO_ERR_TYPE);
	assert_int_equal(
	    decode_raw(&d, b, raw(b, 1, PROTO_TYPE_MAX + 1, NULL, 0)),
	    PROTO_ERR_TYPE);
	assert_int_equal(decode_raw(&d, b, raw(b, 1, 255, NULL, 0)),
			 PROTO_ERR_TYPE);
	/* Length 0. */
	assert_int_equal(decode_raw(&d, b, raw(b, 0, PROTO_DATA, NULL, 0)),
			 PROTO_ERR_LENGTH);
	/* Oversized: detected from the length field alone. */
	raw(b, PROTO_FRAME_MAX + 1, PROTO_DATA, NULL, 0);
	assert_int_equal(decode_raw(&d, b, 4), PROTO_ERR_OVERSIZE);
	assert_int_equal(decode_raw(&d, b, 5), PROTO_ERR_OVERSIZE);
	raw(b, UINT32_MAX, PROTO_DATA, NULL, 0);
	assert_int_equal(decode_raw(&d, b, 5), PROTO_ERR_OVERSIZE);
	/* Exactly the limit is not oversized (DATA is then too long). */
	raw(b, PROTO_FRAME_MAX, PROTO_DATA, body, 5);
	assert_int_equal(decode_raw(&d, b, 10), PROTO_ERR_LENGTH);
	/* Fixed-size frames with a wrong length: short and long. */
	assert_int_equal(decode_raw(&d, b, raw(b, 5, PROTO_COMPLETE, body, 4)),
			 PROTO_ERR_LENGTH);
	assert_int_equal(decode_raw(&d, b, raw(b, 7, PROTO_COMPLETE, body, 6)),
			 PROTO_ERR_LENGTH);
	assert_int_equal(decode_raw(&d, b, raw(b, 11, PROTO_EXIT, body, 10)),
			 PROTO_ERR_LENGTH);
	/* DATA with no bytes. */
	assert_int_equal(decode_raw(&d, b, raw(b, 6, PROTO_DATA, body, 5)),
			 PROTO_ERR_LENGTH);
	/* Nothing yet: need a header. */
	struct proto_frame f;
	size_t used = 0;
	struct proto_peer copy = d;
	assert_int_equal(proto_decode(&copy, b, 0, &f, &used, NULL, 0),
			 PROTO_NEED_MORE);
	assert_int_equal(used, PROTO_HDR_SIZE);
}

static void test_bad_hello(void **state)
{
	struct proto_peer p;
	struct proto_frame h;
	ssize_t n;

	proto_peer_init(&p, PROTO_ROLE_DAEMON);
	const char *bad_ns[] = {".", "..", "a/b", "/"};
	for (size_t i = 0; i < 4; i++) {
		h = hello_frame(bad_ns[i], 0, 1);
		n = proto_encode(&h, buf, sizeof(buf));
		assert_int_equal(decode_raw(&p, buf, (size_t)n),
				 PROTO_ERR_NSPACE);
	}
	h = hello_frame("", 0, 1);
	n = proto_encode(&h, buf, sizeof(buf));
	assert_int_equal(decode_raw(&p, buf, (size_t)n), PROTO_ERR_NSPACE);
	h = hello_frame("abc", 0, 1);
	h.hello.nspace = "a\0c";
	n = proto_encode(&h, buf, sizeof(buf));
	assert_int_equal(decode_raw(&p, buf, (size_t)n), PROTO_ERR_NSPACE);

	h = hello_frame("ok", 0, 1);
	n = proto_encode(&h, buf, sizeof(buf));
	buf[5] ^= 0xff; /* magic */
	assert_int_equal(decode_raw(&p, buf, (size_t)n), PROTO_ERR_MAGIC);
	h.hello.version = PROTO_VERSION + 1;
	n = proto_encode(&h, buf, sizeof(buf));
	assert_int_equal(decode_raw(&p, buf, (size_t)n), PROTO_ERR_VERSION);
	h.hello.version = PROTO_VERSION_MIN - 1; /* 1 had no STDIN_ACK */
	n = proto_encode(&h, buf, sizeof(buf));
	assert_int_equal(decode_raw(&p, buf, (size_t)n), PROTO_ERR_VERSION);
	/* a credential with NUL, or longer than PROTO_CRED_MAX */
	h = hello_frame("ok", 0, 1);
	h.hello.cred = "MUNGE:\0:";
	h.hello.cred_len = 8;
	n = proto_encode(&h, buf, sizeof(buf));
	assert_int_equal(decode_raw(&p, buf, (size_t)n), PROTO_ERR_FIELD);
	h.hello.cred_len = PROTO_CRED_MAX + 1;
	assert_int_equal(proto_encode(&h, buf, sizeof(buf)), -EINVAL);
	h.hello.version = 2; /* version 2 has no credential field */
	h.hello.cred_len = 1;
	assert_int_equal(proto_encode(&h, buf, sizeof(buf)), -EINVAL);
	h = hello_frame("ok", 0, 0);
	n = proto_encode(&h, buf, sizeof(buf));
	assert_int_equal(decode_raw(&p, buf, (size_t)n), PROTO_ERR_FIELD);
	h = hello_frame("ok", 0, PROTO_RANKS_MAX + 1);
	n = proto_encode(&h, buf, sizeof(buf));
	assert_int_equal(decode_raw(&p, buf, (size_t)n), PROTO_ERR_FIELD);
	h = hello_frame("ok", ROUTER_RANK_MAX, 2);
	n = proto_encode(&h, buf, sizeof(buf));
	assert_int_equal(decode_raw(&p, buf, (size_t)n), PROTO_ERR_RANK);
	h = hello_frame("ok", ROUTER_RANK_WILDCARD, 1);
	n = proto_encode(&h, buf, sizeof(buf));
	assert_int_equal(decode_raw(&p, buf, (size_t)n), PROTO_ERR_RANK);
	h = hello_frame("ok", ROUTER_RANK_MAX, 1); /* the last valid rank */
	n = proto_encode(&h, buf, sizeof(buf));
	assert_int_equal(decode_raw(&p, buf, (size_t)n), PROTO_OK);
	h = hello_frame("ok", 0, 1);
	h.hello.host = "a\0b";
	h.hello.host_len = 3;
	n = proto_encode(&h, buf, sizeof(buf));
	assert_int_equal(decode_raw(&p, buf, (size_t)n), PROTO_ERR_FIELD);

	/* Lengths that do not match the strings. */
	h = hello_frame("ok", 0, 1);
	n = proto_encode(&h, buf, sizeof(buf));
	buf[0]++; /* one trailing byte claimed */
	buf[n] = 0;
	assert_int_equal(decode_raw(&p, buf, (size_t)n + 1), PROTO_ERR_LENGTH);
	n = proto_encode(&h, buf, sizeof(buf));
	buf[5 + 40] = 200; /* nspace length past the end */
	assert_int_equal(decode_raw(&p, buf, (size_t)n), PROTO_ERR_LENGTH);
	n = proto_encode(&h, buf, sizeof(buf));
	buf[0] = 1 + 40; /* no room for the nspace length */
	assert_int_equal(decode_raw(&p, buf, 5 + 40), PROTO_ERR_LENGTH);
	buf[0] = 1 + 39; /* shorter than the fixed part */
	assert_int_equal(decode_raw(&p, buf, 5 + 39), PROTO_ERR_LENGTH);
}

static void test_order_and_direction(void **state)
{
	struct proto_peer d, fw;
	uint8_t b[64];
	uint8_t body[16] = {0};
	ssize_t n;

	/* A frame before HELLO. */
	proto_peer_init(&d, PROTO_ROLE_DAEMON);
	body[4] = ROUTER_CH_STDOUT;
	assert_int_equal(decode_raw(&d, b, raw(b, 7, PROTO_DATA, body, 6)),
			 PROTO_ERR_ORDER);
	/* Detected from the header alone (no need to wait for the body). */
	assert_int_equal(decode_raw(&d, b, 5), PROTO_ERR_ORDER);
	/* A second HELLO. */
	greeted_daemon(&d);
	struct proto_frame h = hello_frame("job", 0, 1);
	n = proto_encode(&h, buf, sizeof(buf));
	assert_int_equal(decode_raw(&d, buf, (size_t)n), PROTO_ERR_ORDER);
	/* Frames in the wrong direction. */
	struct proto_frame w = {
	    .type = PROTO_WELCOME, .version = PROTO_VERSION, .max_payload = 1};
	n = proto_encode(&w, buf, sizeof(buf));
	assert_int_equal(decode_raw(&d, buf, (size_t)n), PROTO_ERR_DIRECTION);
	struct proto_frame a = {.type = PROTO_ACK};
	n = proto_encode(&a, buf, sizeof(buf));
	assert_int_equal(decode_raw(&d, buf, (size_t)n), PROTO_ERR_DIRECTION);
	struct proto_frame s = {
	    .type = PROTO_STDIN, .rank = 4, .data = body, .len = 1};
	n = proto_encode(&s, buf, sizeof(buf));
	assert_int_equal(decode_raw(&d, buf, (size_t)n), PROTO_ERR_DIRECTION);

	/* Forwarder: frames before WELCOME, second WELCOME, wrong way. */
	proto_peer_init(&fw, PROTO_ROLE_FORWARDER);
	proto_peer_set_ranks(&fw, 4, 4);
	n = proto_encode(&a, buf, sizeof(buf));
	assert_int_equal(decode_raw(&fw, buf, (size_t)n), PROTO_ERR_ORDER);
	greeted_forwarder(&fw);
	n = proto_encode(&w, buf, sizeof(buf));
	assert_int_equal(decode_raw(&fw, buf, (size_t)n), PROTO_ERR_ORDER);
	n = proto_encode(&h, buf, sizeof(buf));
	assert_int_equal(decode_raw(&fw, buf, (size_t)n), PROTO_ERR_DIRECTION);
	struct proto_frame dd = {.type = PROTO_DATA,
				 .rank = 4,
				 .channel = ROUTER_CH_STDOUT,
				 .data = body,
				 .len = 1};
	n = proto_encode(&dd, buf, sizeof(buf));
	assert_int_equal(decode_raw(&fw, buf, (size_t)n), PROTO_ERR_DIRECTION);
	struct proto_frame sack = {
	    .type = PROTO_STDIN_ACK, .rank = 4, .ack_bytes = 1};
	n = proto_encode(&sack, buf, sizeof(buf));
	assert_int_equal(decode_raw(&fw, buf, (size_t)n), PROTO_ERR_DIRECTION);
	/* WELCOME with a bad version or no payload room. */
	proto_peer_init(&fw, PROTO_ROLE_FORWARDER);
	w.version = 9;
	n = proto_encode(&w, buf, sizeof(buf));
	assert_int_equal(decode_raw(&fw, buf, (size_t)n), PROTO_ERR_VERSION);
	w.version = PROTO_VERSION;
	w.max_payload = 0;
	n = proto_encode(&w, buf, sizeof(buf));
	assert_int_equal(decode_raw(&fw, buf, (size_t)n), PROTO_ERR_FIELD);
}

static void test_bad_fields(void **state)
{
	struct proto_peer d, fw;
	ssize_t n;

	greeted_daemon(&d); /* ranks 4..7 */
	uint32_t bad_ranks[] = {0, 3, 8, UINT32_MAX};
	for (size_t i = 0; i < 4; i++) {
		struct proto_frame f = {.type = PROTO_DATA,
					.rank = bad_ranks[i],
					.channel = ROUTER_CH_STDOUT,
					.data = (const uint8_t *)"x",
					.len = 1};
		n = proto_encode(&f, buf, sizeof(buf));
		assert_int_equal(decode_raw(&d, buf, (size_t)n),
				 PROTO_ERR_RANK);
		f.type = PROTO_EXIT;
		n = proto_encode(&f, buf, sizeof(buf));
		assert_int_equal(decode_raw(&d, buf, (size_t)n),
				 PROTO_ERR_RANK);
		f.type = PROTO_RANK_START;
		n = proto_encode(&f, buf, sizeof(buf));
		assert_int_equal(decode_raw(&d, buf, (size_t)n),
				 PROTO_ERR_RANK);
	}
	/* Channels: 0, two bits, stdin for output, output for daemon XOFF. */
	uint32_t bad_ch[] = {0, 3, 0x10, ROUTER_CH_STDIN, 0xff};
	for (size_t i = 0; i < 5; i++) {
		struct proto_frame f = {.type = PROTO_DATA,
					.rank = 4,
					.channel = bad_ch[i],
					.data = (const uint8_t *)"x",
					.len = 1};
		n = proto_encode(&f, buf, sizeof(buf));
		assert_int_equal(decode_raw(&d, buf, (size_t)n),
				 PROTO_ERR_CHANNEL);
		f.type = PROTO_COMPLETE;
		n = proto_encode(&f, buf, sizeof(buf));
		assert_int_equal(decode_raw(&d, buf, (size_t)n),
				 PROTO_ERR_CHANNEL);
	}
	struct proto_frame x = {
	    .type = PROTO_XOFF, .rank = 4, .channel = ROUTER_CH_STDOUT};
	n = proto_encode(&x, buf, sizeof(buf));
	assert_int_equal(decode_raw(&d, buf, (size_t)n), PROTO_ERR_CHANNEL);
	greeted_forwarder(&fw);
	x.channel = ROUTER_CH_STDIN;
	n = proto_encode(&x, buf, sizeof(buf));
	assert_int_equal(decode_raw(&fw, buf, (size_t)n), PROTO_ERR_CHANNEL);
	x.channel = ROUTER_CH_STDOUT;
	x.rank = 9;
	n = proto_encode(&x, buf, sizeof(buf));
	assert_int_equal(decode_raw(&fw, buf, (size_t)n), PROTO_ERR_RANK);

	/* EXIT: bad how, code > 255, signal 0 or > 127. */
	struct proto_frame e = {.type = PROTO_EXIT, .rank = 4};
	struct {
		uint8_t how;
		uint32_t code;
	} bad_exit[] = {{2, 0},
			{PROTO_EXIT_CODE, 256},
			{PROTO_EXIT_SIGNAL, 0},
			{PROTO_EXIT_SIGNAL, 128}};
	for (size_t i = 0; i < 4; i++) {
		e.how = bad_exit[i].how;
		e.code = bad_exit[i].code;
		n = proto_encode(&e, buf, sizeof(buf));
		assert_int_equal(decode_raw(&d, buf, (size_t)n),
				 PROTO_ERR_FIELD);
	}
	/* ERROR text too long. */
	uint8_t b[PROTO_MSG_MAX + 64];
	memset(b, 'e', sizeof(b));
	struct proto_peer f0;
	proto_peer_init(&f0, PROTO_ROLE_FORWARDER);
	raw(b, 1 + 4 + PROTO_MSG_MAX + 1, PROTO_ERROR, b + 5, 0);
	assert_int_equal(decode_raw(&f0, b, 5 + 4 + PROTO_MSG_MAX + 1),
			 PROTO_ERR_LENGTH);
}

/* COMMAND (F->D): the ranks' command line, 1..PROTO_COMMAND_MAX bytes of
 * text with no control character (it becomes an info line); a forwarder
 * never takes one. */
static void test_command(void **state)
{
	struct proto_peer d, fw;
	struct proto_frame out;
	char text[PROTO_COMMAND_MAX + 2];
	struct proto_frame c = {.type = PROTO_COMMAND,
				.flags = PROTO_COMMAND_F_CUT,
				.msg = "sh -c 'echo hi'",
				.msg_len = 15};
	ssize_t n;

	(void)state;
	greeted_daemon(&d);
	round_trip(&d, &c, &out);
	assert_int_equal(out.flags, PROTO_COMMAND_F_CUT);
	assert_int_equal(out.msg_len, 15);
	assert_memory_equal(out.msg, "sh -c 'echo hi'", 15);
	memset(text, 'a', sizeof(text));
	c.msg = text;
	c.msg_len = PROTO_COMMAND_MAX;
	round_trip(&d, &c, &out);
	assert_int_equal(out.msg_len, PROTO_COMMAND_MAX);
	/* encode refuses nothing and too much */
	c.msg_len = 0;
	assert_true(proto_encode(&c, buf, sizeof(buf)) < 0);
	c.msg_len = PROTO_COMMAND_MAX + 1;
	assert_true(proto_encode(&c, buf, sizeof(buf)) < 0);
	/* the decoder too, and a control character in it */
	uint8_t b[PROTO_COMMAND_MAX + 64];
	memset(b, 'c', sizeof(b));
	raw(b, 1 + 2 + PROTO_COMMAND_MAX + 1, PROTO_COMMAND, NULL, 0);
	memset(b + 5, 0, 2);
	assert_int_equal(decode_raw(&d, b, 5 + 2 + PROTO_COMMAND_MAX + 1),
			 PROTO_ERR_LENGTH);
	raw(b, 1 + 2, PROTO_COMMAND, NULL, 0);
	assert_int_equal(decode_raw(&d, b, 5 + 2), PROTO_ERR_LENGTH);
	c.msg = "a\nstate: exited";
	c.msg_len = strlen(c.msg);
	n = proto_encode(&c, buf, sizeof(buf));
	assert_int_equal(decode_raw(&d, buf, (size_t)n), PROTO_ERR_FIELD);
	c.msg = "a\x1b[2J";
	c.msg_len = strlen(c.msg);
	n = proto_encode(&c, buf, sizeof(buf));
	assert_int_equal(decode_raw(&d, buf, (size_t)n), PROTO_ERR_FIELD);
	/* before HELLO; to a forwarder */
	c.msg = "x";
	c.msg_len = 1;
	n = proto_encode(&c, buf, sizeof(buf));
	proto_peer_init(&d, PROTO_ROLE_DAEMON);
	assert_int_equal(decode_raw(&d, buf, (size_t)n), PROTO_ERR_ORDER);
	greeted_forwarder(&fw); /* uses buf */
	n = proto_encode(&c, buf, sizeof(buf));
	assert_int_equal(decode_raw(&fw, buf, (size_t)n), PROTO_ERR_DIRECTION);
	assert_string_equal(proto_type_name(PROTO_COMMAND), "COMMAND");
}

/* WELCOME may carry the job's assigned name (PROTO_WELCOME_F_NAME); a
 * plain WELCOME stays 8 bytes for forwarders that predate it. */
static void test_welcome_name(void **state)
{
	struct proto_frame w = {.type = PROTO_WELCOME,
				.version = PROTO_VERSION,
				.max_payload = PROTO_PAYLOAD_MAX},
			   out;
	struct proto_peer fw;

	(void)state;
	assert_int_equal(proto_encode(&w, buf, sizeof(buf)),
			 PROTO_HDR_SIZE + 8);
	w.flags = PROTO_WELCOME_F_NAME;
	w.name = "job~1";
	w.name_len = 5;
	proto_peer_init(&fw, PROTO_ROLE_FORWARDER);
	round_trip(&fw, &w, &out);
	assert_int_equal(out.flags, PROTO_WELCOME_F_NAME);
	assert_int_equal(out.name_len, 5);
	assert_memory_equal(out.name, "job~1", 5);
	/* flag without a name, a name without the flag, a bad name */
	w.name_len = 0;
	assert_int_equal(proto_encode(&w, buf, sizeof(buf)), -EINVAL);
	w.flags = 0;
	w.name_len = 5;
	assert_int_equal(proto_encode(&w, buf, sizeof(buf)), -EINVAL);
	w.flags = PROTO_WELCOME_F_NAME;
	w.name = "a/b~1";
	ssize_t n = proto_encode(&w, buf, sizeof(buf));
	proto_peer_init(&fw, PROTO_ROLE_FORWARDER);
	assert_int_equal(decode_raw(&fw, buf, (size_t)n), PROTO_ERR_NSPACE);
}

static void test_names(void **state)
{
	for (int c = 0; c <= PROTO_ERR_FIELD + 5; c++)
		assert_non_null(proto_strerror(c));
	assert_non_null(proto_strerror(-1));
	assert_string_equal(proto_type_name(PROTO_DATA), "DATA");
	assert_string_equal(proto_type_name(0), "UNKNOWN");
	assert_string_equal(proto_type_name(99), "UNKNOWN");
	assert_string_equal(proto_channel_name(ROUTER_CH_STDERR), "stderr");
	assert_string_equal(proto_channel_name(77), "?");
}

/* Two frames back to back decode one after the other. */
static void test_stream_of_frames(void **state)
{
	struct proto_peer p;
	struct proto_frame f, out;
	size_t used, off = 0;
	uint8_t b[256];

	proto_peer_init(&p, PROTO_ROLE_DAEMON);
	f = hello_frame("s", 0, 2);
	off += (size_t)proto_encode(&f, b + off, sizeof(b) - off);
	struct proto_frame d = {.type = PROTO_DATA,
				.rank = 1,
				.channel = ROUTER_CH_STDOUT,
				.data = (const uint8_t *)"xy",
				.len = 2};
	off += (size_t)proto_encode(&d, b + off, sizeof(b) - off);
	size_t pos = 0;
	assert_int_equal(
	    proto_decode(&p, b, off, &out, &used, err, sizeof(err)), PROTO_OK);
	pos += used;
	assert_int_equal(
	    proto_decode(&p, b + pos, off - pos, &out, &used, err, sizeof(err)),
	    PROTO_OK);
	pos += used;
	assert_int_equal(pos, off);
	assert_int_equal(out.type, PROTO_DATA);
	assert_memory_equal(out.data, "xy", 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hello_round_trip),
	    cmocka_unit_test(test_daemon_frames_round_trip),
	    cmocka_unit_test(test_forwarder_frames_round_trip),
	    cmocka_unit_test(test_resume_frames),
	    cmocka_unit_test(test_head_plus_data),
	    cmocka_unit_test(test_encode_rejects),
	    cmocka_unit_test(test_bad_header),
	    cmocka_unit_test(test_bad_hello),
	    cmocka_unit_test(test_order_and_direction),
	    cmocka_unit_test(test_bad_fields),
	    cmocka_unit_test(test_welcome_name),
	    cmocka_unit_test(test_command),
	    cmocka_unit_test(test_names),
	    cmocka_unit_test(test_stream_of_frames),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
