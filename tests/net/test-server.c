/* SPDX-License-Identifier: MIT */
/*
 * The daemon's listeners against a real router, no FUSE: a blocking test
 * client speaks the protocol over a Unix socket while the test drives the
 * loop.  Checks ACK accounting, EXIT ordering, refusals, malformed input
 * closing only its connection, LOST on drop, XOFF/XON toward the
 * forwarder, STDIN/STDIN_EOF, and XOFF(stdin) reaching the router.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>
#include <event2/thread.h>

#include "net/proto.h"
#include "net/server.h"
#include "router/router.h"

struct ctx {
	struct event_base *base;
	router_t *r;
	net_server_t *s;
	iofs_log_t *lg;
	char path[108];
	char addr[128];
};

static int setup(void **state)
{
	struct ctx *c = calloc(1, sizeof(*c));
	assert_int_equal(iofs_log_new("test-server", &c->lg), 0);
	if (!getenv("TEST_VERBOSE")) /* quiet: errors only */
		iofs_log_set_level(c->lg, LOG_ERR);
	/* resume_window=0: a dropped connection loses its ranks at once (the
	 * resume is tested end to end, tests/net/resume-*.sh) */
	struct net_server_config cfg = {
	    .log = c->lg, .resume_window_set = true, .resume_window_s = 0};
	struct router_config rcfg = {.window = 64 * 1024, .log = c->lg};

	evthread_use_pthreads();
	c->base = event_base_new();
	assert_int_equal(router_new(c->base, &rcfg, &c->r), 0);
	assert_int_equal(net_server_new(c->base, c->r, &cfg, &c->s), 0);
	snprintf(c->path, sizeof(c->path), "/tmp/iofs-test-server.%d.sock",
		 (int)getpid());
	snprintf(c->addr, sizeof(c->addr), "unix:%s", c->path);
	char err[256];
	assert_int_equal(net_server_listen(c->s, c->addr, err, sizeof(err)), 0);
	/* A second daemon on the same path is refused with a clear message. */
	net_server_t *s2;
	assert_int_equal(net_server_new(c->base, c->r, &cfg, &s2), 0);
	assert_int_equal(net_server_listen(s2, c->addr, err, sizeof(err)),
			 -EADDRINUSE);
	assert_non_null(strstr(err, "address in use"));
	net_server_free(s2);
	*state = c;
	return 0;
}

static int teardown(void **state)
{
	struct ctx *c = *state;
	net_server_free(c->s);
	router_free(c->r);
	event_base_free(c->base);
	assert_int_equal(access(c->path, F_OK), -1); /* socket unlinked */
	iofs_log_free(c->lg);
	free(c);
	return 0;
}

static void spin(struct ctx *c, int times)
{
	for (int i = 0; i < times; i++)
		event_base_loop(c->base, EVLOOP_NONBLOCK);
}

static int client(struct ctx *c)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	strcpy(sun.sun_path, c->path);
	assert_int_equal(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	spin(c, 3);
	return fd;
}

static void send_f(struct ctx *c, int fd, const struct proto_frame *f)
{
	static uint8_t buf[PROTO_FRAME_MAX + 8];
	ssize_t n = proto_encode(f, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(write(fd, buf, (size_t)n), n);
	spin(c, 5);
}

static void send_hello(struct ctx *c, int fd, const char *ns, uint32_t base,
		       uint32_t count)
{
	struct proto_frame f = {
	    .type = PROTO_HELLO,
	    .hello = {.version = PROTO_VERSION,
		      .rank_base = base,
		      .rank_count = count,
		      .job_size = count,
		      .pid = 1,
		      .nspace = ns,
		      .nspace_len = strlen(ns),
		      .host = "h",
		      .host_len = 1},
	};
	send_f(c, fd, &f);
}

/* Receive one frame (driving the loop meanwhile); -1 on EOF. */
static int recv_f(struct ctx *c, int fd, struct proto_peer *p,
		  struct proto_frame *f, uint8_t *buf, size_t cap)
{
	size_t have = 0;
	for (int tries = 0; tries < 2000; tries++) {
		size_t need = 0;
		char err[256];
		int rc = proto_decode(p, buf, have, f, &need, err, sizeof(err));
		if (rc == PROTO_OK)
			return 0;
		assert_int_equal(rc, PROTO_NEED_MORE);
		assert_true(need <= cap);
		spin(c, 2);
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		if (poll(&pf, 1, 1) <= 0)
			continue;
		ssize_t n = read(fd, buf + have, need - have);
		if (n == 0)
			return -1;
		assert_true(n > 0);
		have += (size_t)n;
	}
	fail_msg("no frame from the daemon");
	return -1;
}

static struct proto_peer fwd_peer(uint32_t base, uint32_t count)
{
	struct proto_peer p;
	proto_peer_init(&p, PROTO_ROLE_FORWARDER);
	proto_peer_set_ranks(&p, base, count);
	return p;
}

static void expect(struct ctx *c, int fd, struct proto_peer *p,
		   enum proto_type type, struct proto_frame *out)
{
	static uint8_t buf[PROTO_FRAME_MAX + 8];
	assert_int_equal(recv_f(c, fd, p, out, buf, sizeof(buf)), 0);
	if (out->type != type)
		fail_msg("expected %s, got %s", proto_type_name(type),
			 proto_type_name(out->type));
}

/* Like expect(), skipping ACKs (they may come at any time). */
static void expect_skip_acks(struct ctx *c, int fd, struct proto_peer *p,
			     enum proto_type type, struct proto_frame *out)
{
	static uint8_t buf[PROTO_FRAME_MAX + 8];
	do
		assert_int_equal(recv_f(c, fd, p, out, buf, sizeof(buf)), 0);
	while (out->type == PROTO_ACK && type != PROTO_ACK);
	if (out->type != type)
		fail_msg("expected %s, got %s", proto_type_name(type),
			 proto_type_name(out->type));
}

static void expect_closed(struct ctx *c, int fd, struct proto_peer *p)
{
	static uint8_t buf[4096];
	struct proto_frame f;
	assert_int_equal(recv_f(c, fd, p, &f, buf, sizeof(buf)), -1);
}

static enum router_state state_of(struct ctx *c, const char *ns, uint32_t rank,
				  struct router_stats *st)
{
	router_job_t *job = router_job_lookup(c->r, ns);
	assert_non_null(job);
	router_rank_t *rr = router_job_rank(job, rank);
	assert_non_null(rr);
	router_rank_stats(rr, st);
	return st->state;
}

static void start_rank(struct ctx *c, int fd, uint32_t rank)
{
	struct proto_frame f = {
	    .type = PROTO_RANK_START, .rank = rank, .pid = 100 + rank};
	send_f(c, fd, &f);
}

/* A connection to @path. */
static int client_at(struct ctx *c, const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	strcpy(sun.sun_path, path);
	assert_int_equal(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	spin(c, 3);
	return fd;
}

static void send_hello4(struct ctx *c, int fd, const char *ns, bool resume)
{
	struct proto_frame f = {
	    .type = PROTO_HELLO,
	    .hello = {.version = 4,
		      .flags = PROTO_HELLO_F_NAME |
			       (resume ? PROTO_HELLO_F_RESUME : 0),
		      .rank_base = 0,
		      .rank_count = 1,
		      .job_size = 1,
		      .pid = 1,
		      .nspace = ns,
		      .nspace_len = strlen(ns),
		      .host = "h",
		      .host_len = 1},
	};
	send_f(c, fd, &f);
}

static void send_data(struct ctx *c, int fd, const char *text)
{
	struct proto_frame d = {.type = PROTO_DATA,
				.rank = 0,
				.channel = ROUTER_CH_STDOUT,
				.data = (const uint8_t *)text,
				.len = strlen(text)};
	send_f(c, fd, &d);
}

/*
 * Version 4 (docs/protocol.md, "Resume"): a broken connection's rank
 * waits (link reconnecting, still running); a resume HELLO gets HELD (the
 * bytes taken) before WELCOME, its ACK counts from 0, and the stream goes
 * on; once the rank ended, a resume gets HELD (exited) and ERROR 37; a
 * RESUME frame without a resume HELLO is an error.
 */
/* A version-4 forwarder of job @ns, rank 0 started and @text sent and
 * acknowledged; its socket (peer state in @p). */
static int resumable_rank(struct ctx *c, const char *path, const char *ns,
			  struct proto_peer *p, const char *text)
{
	struct proto_frame f;
	int fd = client_at(c, path);

	*p = fwd_peer(0, 1);
	send_hello4(c, fd, ns, false);
	expect(c, fd, p, PROTO_WELCOME, &f);
	start_rank(c, fd, 0);
	send_data(c, fd, text);
	expect(c, fd, p, PROTO_ACK, &f);
	assert_true(f.ack_bytes == strlen(text));
	return fd;
}

static void test_resume(void **state)
{
	struct ctx *c = *state;
	struct net_server_config cfg = {
	    .log = c->lg, .resume_window_set = true, .resume_window_s = 60};
	char path[108], addr[120], err[256];
	net_server_t *s;
	struct proto_frame f;
	struct router_stats st;

	snprintf(path, sizeof(path), "/tmp/iofs-test-server-r.%d.sock",
		 (int)getpid());
	snprintf(addr, sizeof(addr), "unix:%s", path);
	assert_int_equal(net_server_new(c->base, c->r, &cfg, &s), 0);
	assert_int_equal(net_server_listen(s, addr, err, sizeof(err)), 0);

	struct proto_peer pa;
	int a = resumable_rank(c, path, "rj", &pa, "abc");
	close(a);
	spin(c, 10);
	assert_int_equal(state_of(c, "rj", 0, &st), ROUTER_STATE_RUNNING);
	assert_int_equal(st.link, ROUTER_LINK_WAITING);

	int b = client_at(c, path);
	struct proto_peer pb = fwd_peer(0, 1);
	send_hello4(c, b, "rj", true);
	expect(c, b, &pb, PROTO_HELD, &f);
	assert_int_equal(f.held_state, PROTO_HELD_RUNNING);
	assert_true(f.held[0] == 3 && f.held[1] == 0);
	expect(c, b, &pb, PROTO_WELCOME, &f);
	struct proto_frame r = {.type = PROTO_RESUME, .rank = 0};
	send_f(c, b, &r);
	send_data(c, b, "de");
	expect(c, b, &pb, PROTO_ACK, &f);
	assert_true(f.ack_bytes == 2); /* this connection's bytes only */
	assert_int_equal(state_of(c, "rj", 0, &st), ROUTER_STATE_RUNNING);
	assert_true(st.stdout_bytes == 5 && st.reconnects == 1);
	assert_int_equal(st.link, ROUTER_LINK_UP);
	struct proto_frame x = {.type = PROTO_EXIT, .rank = 0};
	send_f(c, b, &x);
	expect(c, b, &pb, PROTO_ACK, &f);
	assert_int_equal(f.ack_exits, 1);
	close(b);
	spin(c, 10);
	assert_int_equal(state_of(c, "rj", 0, &st), ROUTER_STATE_EXITED);

	/* The job ended: a resume learns what is held, then ERROR 37. */
	int d = client_at(c, path);
	struct proto_peer pd = fwd_peer(0, 1);
	send_hello4(c, d, "rj", true);
	expect(c, d, &pd, PROTO_HELD, &f);
	assert_int_equal(f.held_state, PROTO_HELD_EXITED);
	assert_true(f.held[0] == 5);
	expect(c, d, &pd, PROTO_ERROR, &f);
	assert_int_equal(f.code, PROTO_REFUSED_RESUME);
	close(d);

	/* A resume while the old connection still looks alive (its
	 * forwarder found its socket full and reconnected): the old one is
	 * superseded, detached and kicked in the same turn as the resuming
	 * one; only the resuming one moves the socket (the detached one did
	 * it too and crashed the daemon on its NULL bufferevent). */
	struct proto_peer pg;
	int g = resumable_rank(c, path, "rs", &pg, "xyz");
	int h = client_at(c, path);
	struct proto_peer ph = fwd_peer(0, 1);
	send_hello4(c, h, "rs", true); /* g not closed */
	expect(c, h, &ph, PROTO_HELD, &f);
	assert_int_equal(f.held_state, PROTO_HELD_RUNNING);
	assert_true(f.held[0] == 3);
	expect(c, h, &ph, PROTO_WELCOME, &f);
	send_f(c, h, &r);
	send_data(c, h, "w");
	expect(c, h, &ph, PROTO_ACK, &f);
	assert_int_equal(state_of(c, "rs", 0, &st), ROUTER_STATE_RUNNING);
	assert_true(st.stdout_bytes == 4 && st.reconnects == 1);
	close(g);
	close(h);
	spin(c, 10);

	/* RESUME on a connection that did not ask to resume. */
	int e = client_at(c, path);
	struct proto_peer pe = fwd_peer(0, 1);
	send_hello4(c, e, "rj2", false);
	expect(c, e, &pe, PROTO_WELCOME, &f);
	send_f(c, e, &r);
	expect(c, e, &pe, PROTO_ERROR, &f);
	assert_int_equal(f.code, PROTO_ERR_ORDER);
	close(e);
	spin(c, 10);
	net_server_free(s);
	assert_int_equal(access(path, F_OK), -1);
}

static void test_job_life(void **state)
{
	struct ctx *c = *state;
	struct proto_peer p = fwd_peer(0, 2);
	struct proto_frame f;
	int fd = client(c);

	send_hello(c, fd, "life", 0, 2);
	expect(c, fd, &p, PROTO_WELCOME, &f);
	start_rank(c, fd, 0);
	start_rank(c, fd, 1);
	struct router_stats st;
	assert_int_equal(state_of(c, "life", 1, &st), ROUTER_STATE_RUNNING);
	assert_int_equal(st.pid, 101);

	uint64_t sent = 0;
	for (uint32_t i = 0; i < 3; i++) {
		struct proto_frame d = {.type = PROTO_DATA,
					.rank = i & 1,
					.channel = ROUTER_CH_STDOUT,
					.data = (const uint8_t *)"abc\n",
					.len = 4};
		send_f(c, fd, &d);
		sent += 4;
	}
	uint64_t acked = 0;
	while (acked < sent) {
		expect(c, fd, &p, PROTO_ACK, &f);
		assert_true(f.ack_bytes > acked && f.ack_bytes <= sent);
		acked = f.ack_bytes;
	}
	struct proto_frame d = {.type = PROTO_DATA,
				.rank = 1,
				.channel = ROUTER_CH_STDERR,
				.data = (const uint8_t *)"no newline",
				.len = 10};
	send_f(c, fd, &d);
	struct proto_frame cm = {
	    .type = PROTO_COMPLETE, .rank = 1, .channel = ROUTER_CH_STDERR};
	send_f(c, fd, &cm);
	struct proto_frame ex = {
	    .type = PROTO_EXIT, .rank = 1, .how = PROTO_EXIT_SIGNAL, .code = 9};
	send_f(c, fd, &ex);
	do
		expect(c, fd, &p, PROTO_ACK, &f);
	while (f.ack_exits < 1);
	assert_true(f.ack_bytes == sent + 10);
	assert_int_equal(state_of(c, "life", 1, &st), ROUTER_STATE_EXITED);
	assert_int_equal(st.exit_status, 128 + 9);
	assert_true(st.stderr_bytes == 10);
	assert_true(st.stdout_bytes == 4);
	/* DATA after EXIT: closed with a reason; rank 0 then lost. */
	send_f(c, fd, &d);
	expect(c, fd, &p, PROTO_ERROR, &f);
	assert_int_equal(f.code, PROTO_ERR_ORDER);
	expect_closed(c, fd, &p);
	close(fd);
	spin(c, 5);
	assert_int_equal(state_of(c, "life", 0, &st), ROUTER_STATE_LOST);
	assert_int_equal(state_of(c, "life", 1, &st), ROUTER_STATE_EXITED);
}

static void test_refusals(void **state)
{
	struct ctx *c = *state;
	struct proto_peer p1 = fwd_peer(0, 4), p2 = fwd_peer(2, 1);
	struct proto_frame f;
	int a = client(c);

	send_hello(c, a, "dup", 0, 4);
	expect(c, a, &p1, PROTO_WELCOME, &f);
	/* Rank 2 is reserved by a (no RANK_START yet): b's run gets a
	 * distinct name, "dup" is left alone (docs/filesystem.md). */
	int b = client(c);
	send_hello(c, b, "dup", 2, 1);
	expect(c, b, &p2, PROTO_WELCOME, &f);
	start_rank(c, b, 2);
	spin(c, 5);
	router_job_t *renamed = router_job_lookup(c->r, "dup~1");
	assert_non_null(renamed);
	assert_string_equal(router_job_requested(renamed), "dup");
	assert_non_null(router_job_rank(renamed, 2));
	assert_null(router_job_lookup(c->r, "dup")); /* a: no RANK_START */
	close(b);
	/* Garbage on a third connection closes only that one. */
	int g = client(c);
	assert_int_equal(write(g, "\x05\0\0\0\x63junk", 9), 9);
	spin(c, 5);
	struct proto_peer pg = fwd_peer(0, 1);
	expect(c, g, &pg, PROTO_ERROR, &f);
	assert_int_equal(f.code, PROTO_ERR_TYPE);
	expect_closed(c, g, &pg);
	close(g);
	/* a still works. */
	start_rank(c, a, 3);
	struct proto_frame d = {.type = PROTO_DATA,
				.rank = 3,
				.channel = ROUTER_CH_STDOUT,
				.data = (const uint8_t *)"x",
				.len = 1};
	send_f(c, a, &d);
	expect(c, a, &p1, PROTO_ACK, &f);
	assert_true(f.ack_bytes == 1);
	close(a);
	spin(c, 5);
	struct router_stats st;
	assert_int_equal(state_of(c, "dup", 3, &st), ROUTER_STATE_LOST);
	/* A completed job's name may be reused (the new run replaces it). */
	for (int round = 0; round < 2; round++) {
		int n = client(c);
		struct proto_peer pn = fwd_peer(0, 1);
		send_hello(c, n, "again", 0, 1);
		expect(c, n, &pn, PROTO_WELCOME, &f);
		start_rank(c, n, 0);
		assert_int_equal(state_of(c, "again", 0, &st),
				 ROUTER_STATE_RUNNING);
		struct proto_frame ex = {.type = PROTO_EXIT,
					 .rank = 0,
					 .how = PROTO_EXIT_CODE,
					 .code = (uint32_t)round};
		send_f(c, n, &ex);
		expect(c, n, &pn, PROTO_ACK, &f);
		assert_int_equal(f.ack_exits, 1);
		close(n);
		spin(c, 5);
		assert_int_equal(state_of(c, "again", 0, &st),
				 ROUTER_STATE_EXITED);
		assert_int_equal(st.exit_status, round);
	}
}

static void ready_cb(void *arg)
{
	(void)arg;
}

static void push_cb(int status, void *arg)
{
	*(int *)arg = status;
}

static void test_flow_and_stdin(void **state)
{
	struct ctx *c = *state;
	struct proto_peer p = fwd_peer(0, 1);
	struct proto_frame f;
	int fd = client(c);

	send_hello(c, fd, "flow", 0, 1);
	expect(c, fd, &p, PROTO_WELCOME, &f);
	start_rank(c, fd, 0);
	router_job_t *job = router_job_lookup(c->r, "flow");
	router_reader_t *rd;
	assert_int_equal(router_reader_open(job, 0, ROUTER_CH_STDOUT, 0,
					    ready_cb, NULL, &rd),
			 0);
	/* More than the 64 KiB window, unread: XOFF(stdout) comes back. */
	static uint8_t chunk[32768];
	memset(chunk, 'z', sizeof(chunk));
	for (int i = 0; i < 4; i++) {
		struct proto_frame d = {.type = PROTO_DATA,
					.rank = 0,
					.channel = ROUTER_CH_STDOUT,
					.data = chunk,
					.len = sizeof(chunk)};
		send_f(c, fd, &d);
	}
	expect_skip_acks(c, fd, &p, PROTO_XOFF, &f);
	assert_int_equal(f.channel, ROUTER_CH_STDOUT);
	/* Reading releases it: XON. */
	uint64_t off = 0;
	for (int i = 0; i < 100; i++) {
		struct iovec iov[2];
		int cnt;
		size_t n;
		if (router_reader_read(rd, off, 1 << 20, iov, &cnt, &n) != 0 ||
		    n == 0)
			break;
		off += n;
	}
	assert_true(off == 4 * sizeof(chunk));
	expect_skip_acks(c, fd, &p, PROTO_XON, &f);
	assert_int_equal(f.channel, ROUTER_CH_STDOUT);
	router_reader_close(rd);

	/* stdin: a push arrives as STDIN, detaching the writer as EOF. */
	int st = -1;
	assert_int_equal(router_stdin_attach(job, 0), 0);
	assert_int_equal(router_push(job, 0, "in\n", 3, 0, push_cb, &st, NULL),
			 0);
	expect_skip_acks(c, fd, &p, PROTO_STDIN, &f);
	assert_int_equal(f.len, 3);
	assert_memory_equal(f.data, "in\n", 3);
	spin(c, 5);
	assert_int_equal(st, 0);
	router_stdin_detach(job, 0);
	spin(c, 5);
	expect_skip_acks(c, fd, &p, PROTO_STDIN_EOF, &f);
	/* XOFF(stdin) from the forwarder reaches the router, XON too. */
	struct proto_frame x = {
	    .type = PROTO_XOFF, .rank = 0, .channel = ROUTER_CH_STDIN};
	send_f(c, fd, &x);
	x.type = PROTO_XON;
	send_f(c, fd, &x);
	struct router_stats rs;
	state_of(c, "flow", 0, &rs);
	assert_true(rs.stdin_xoff == 1);
	assert_true(rs.stdin_xon == 1);
	close(fd);
	spin(c, 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_resume, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_job_life, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_flow_and_stdin, setup,
					    teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
