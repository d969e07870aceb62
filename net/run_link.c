/* SPDX-License-Identifier: MIT */
/*
 * iofs-run: the connection to the daemon.  Connect and greet synchronously
 * (bounded), then a bufferevent on the main loop.  Every DATA frame is kept
 * until the daemon's cumulative ACK covers it, so when the link fails the
 * unacknowledged output is replayed on our own stdout/stderr: nothing is
 * lost (a byte whose ACK was lost in flight may show twice).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "net/auth.h"
#include "net/framer.h"
#include "net/net_i.h"
#include "net/run_i.h"

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p = {.fd = fd, .events = events};
		int n = poll(&p, 1, (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

/*
 * Before anything is sent on a Unix socket: is the daemon at its other end
 * root or ourselves?  Anyone can put a socket at a path in /tmp; a fake
 * daemon would read our output and feed our stdin.  0 or -EPERM with the
 * reason in @why.
 */
static int peer_trusted(struct run *r, int fd, char *why, size_t whylen)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) != 0) {
		snprintf(why, whylen,
			 "refusing %s: cannot learn who listens there (%s)",
			 r->addr, strerror(errno));
		return -EPERM;
	}
	if (uc.uid == 0 || uc.uid == getuid())
		return 0;
	snprintf(why, whylen,
		 "refusing %s: the process listening there (pid %d) runs as "
		 "uid %u, neither root nor you (uid %u): not an iofs daemon "
		 "you can trust, nothing sent",
		 r->addr, (int)uc.pid, (unsigned)uc.uid, (unsigned)getuid());
	return -EPERM;
}

static int connect_to(struct run *r, char *why, size_t whylen, int64_t dl)
{
	struct net_addr a;
	char err[256];
	int rc = net_addr_parse(r->addr, &a, err, sizeof(err));

	if (rc < 0) {
		snprintf(why, whylen, "%s", err);
		return rc;
	}
	int fd =
	    socket(a.family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		goto fail_errno;
	if (connect(fd, (struct sockaddr *)&a.ss, a.len) != 0) {
		if (errno != EINPROGRESS)
			goto fail_close;
		rc = wait_fd(fd, POLLOUT, dl);
		if (rc < 0) {
			close(fd);
			snprintf(why, whylen, "cannot connect to %s: %s",
				 r->addr, strerror(-rc));
			return rc;
		}
		int soerr = 0;
		socklen_t sl = sizeof(soerr);
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
		if (soerr) {
			errno = soerr;
			goto fail_close;
		}
	}
	if (a.family == AF_UNIX &&
	    (rc = peer_trusted(r, fd, why, whylen)) < 0) {
		close(fd);
		return rc;
	}
	net_tcp_tune(fd);
	return fd;

fail_close:
	rc = -errno;
	close(fd);
	snprintf(why, whylen, "cannot connect to %s: %s", r->addr,
		 strerror(-rc));
	return rc;
fail_errno:
	rc = -errno;
	snprintf(why, whylen, "cannot connect to %s: %s", r->addr,
		 strerror(-rc));
	return rc;
}

static int write_all(int fd, const uint8_t *b, size_t n, int64_t dl)
{
	while (n > 0) {
		ssize_t w = write(fd, b, n);
		if (w > 0) {
			b += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			int rc = wait_fd(fd, POLLOUT, dl);
			if (rc < 0)
				return rc;
			continue;
		}
		return -errno;
	}
	return 0;
}

/* Read one whole frame (bounded) into @buf. */
static int read_frame(struct run *r, int fd, uint8_t *buf, size_t cap,
		      struct proto_frame *f, char *why, size_t whylen,
		      int64_t dl)
{
	size_t have = 0;
	char err[256];

	for (;;) {
		size_t need = 0;
		int rc = proto_decode(&r->fr.dec, buf, have, f, &need, err,
				      sizeof(err));
		if (rc == PROTO_OK)
			return (int)need;
		if (rc != PROTO_NEED_MORE) {
			snprintf(why, whylen, "bad reply from %s: %s: %s",
				 r->addr, proto_strerror(rc), err);
			return -EPROTO;
		}
		if (need > cap) {
			snprintf(why, whylen, "reply from %s too large",
				 r->addr);
			return -EPROTO;
		}
		ssize_t n = read(fd, buf + have, need - have);
		if (n > 0) {
			have += (size_t)n;
			continue;
		}
		if (n == 0) {
			snprintf(why, whylen, "%s closed the connection",
				 r->addr);
			return -ECONNRESET;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN) {
			snprintf(why, whylen, "reading from %s: %s", r->addr,
				 strerror(errno));
			return -errno;
		}
		rc = wait_fd(fd, POLLIN, dl);
		if (rc < 0) {
			snprintf(why, whylen, "no answer from %s: %s", r->addr,
				 strerror(-rc));
			return rc;
		}
	}
}

static const struct framer_ops link_framer_ops; /* the frame handlers */

/* The daemon gave the job another name than the one asked for (a name
 * collision: iofs-run(1), JOB NAMES): say so, and use it from now on. */
static void take_name(struct run *r, const struct proto_frame *welcome)
{
	if (!welcome->name_len ||
	    (welcome->name_len == strlen(r->nspace) &&
	     !memcmp(welcome->name, r->nspace, welcome->name_len)))
		return;
	run_log(r, LOG_WARNING,
		"job name '%s' is taken (another job, or one still open); "
		"this run is '%.*s'",
		r->nspace, (int)welcome->name_len, welcome->name);
	memcpy(r->nspace, welcome->name, welcome->name_len);
	r->nspace[welcome->name_len] = '\0';
}

int link_open(struct run *r)
{
	int64_t dl = now_ms() + RUN_CONNECT_TIMEOUT_MS;
	char why[PROTO_MSG_MAX + 128];
	char host[PROTO_HOST_MAX + 1] = "";
	uint8_t buf[PROTO_HEAD_MAX + PROTO_MSG_MAX + 64];

	r->link_fd = -1;
	if (framer_init(&r->fr, PROTO_ROLE_FORWARDER, &link_framer_ops, r) <
	    0) {
		snprintf(why, sizeof(why), "out of memory");
		goto fallback;
	}
	proto_peer_set_ranks(&r->fr.dec, r->rank_base, r->count);
	int fd = connect_to(r, why, sizeof(why), dl);
	if (fd < 0)
		goto fallback;
	gethostname(host, sizeof(host) - 1);
	/* TCP: prove who we are with MUNGE (protocol 3); a Unix socket's
	 * SO_PEERCRED does that already (protocol 2, any daemon). */
	bool tcp = strncmp(r->addr, "tcp:", 4) == 0;
	char *cred = NULL, mwhy[256] = "";
	if (tcp && auth_encode(auth_socket(r->munge_socket), r->nspace,
			       r->rank_base, r->count, &cred, mwhy,
			       sizeof(mwhy)) < 0)
		cred = NULL; /* a daemon with -o auth=none does without */
	struct proto_frame f = {
	    .type = PROTO_HELLO,
	    .hello = {.version = tcp ? PROTO_VERSION : 2,
		      .flags = PROTO_HELLO_F_NAME,
		      .cred = cred,
		      .cred_len = cred ? strlen(cred) : 0,
		      .rank_base = r->rank_base,
		      .rank_count = r->count,
		      .job_size = r->size,
		      .pid = (uint32_t)getpid(),
		      .uid = (uint32_t)getuid(),
		      .gid = (uint32_t)getgid(),
		      .dirs_set = r->dirs.set,
		      .dirs_value = r->dirs.value,
		      .nspace = r->nspace,
		      .nspace_len = strlen(r->nspace),
		      .host = host,
		      .host_len = strlen(host)},
	};
	ssize_t n = proto_encode(&f, buf, sizeof(buf));
	free(cred);
	int rc = n < 0 ? (int)n : write_all(fd, buf, (size_t)n, dl);
	if (rc < 0) {
		snprintf(why, sizeof(why), "sending HELLO to %s: %s", r->addr,
			 strerror(-rc));
		goto fallback_close;
	}
	struct proto_frame reply;
	rc = read_frame(r, fd, buf, sizeof(buf), &reply, why, sizeof(why), dl);
	if (rc < 0)
		goto fallback_close;
	if (reply.type == PROTO_ERROR) {
		snprintf(why, sizeof(why), "%s refused the job: %.*s%s%s%s",
			 r->addr, (int)reply.msg_len, reply.msg,
			 mwhy[0] ? " (no credential sent: " : "", mwhy,
			 mwhy[0] ? ")" : "");
		goto fallback_close;
	}
	take_name(r, &reply);
	r->link_fd = fd;
	r->linked = true;
	run_log(r, LOG_INFO, "connected to %s: job '%s' ranks %u..%u", r->addr,
		r->nspace, r->rank_base, r->rank_base + r->count - 1);
	return 0;

fallback_close:
	close(fd);
fallback:
	link_down(r, why);
	return -1;
}

/* ------------------------------------------------------------------------ */
/* On the loop                                                               */

static void send_frame(struct run *r, const struct proto_frame *f)
{
	if (r->bev)
		framer_send(r->bev, f);
}

static void credit_update(struct run *r)
{
	bool over = r->uq_bytes > RUN_CREDIT_HIGH;
	bool under = r->uq_bytes <= RUN_CREDIT_LOW;

	for (uint32_t i = 0; i < r->count; i++) {
		struct run_chan *cs[2] = {&r->kids[i].out, &r->kids[i].err};
		for (int k = 0; k < 2; k++) {
			unsigned old = cs[k]->susp;
			if (over)
				cs[k]->susp |= RUN_SUSP_CREDIT;
			else if (under || !r->linked)
				cs[k]->susp &= ~RUN_SUSP_CREDIT;
			if (old != cs[k]->susp)
				chan_update(cs[k]);
		}
	}
}

void link_send_rank_start(struct run *r, struct child *ch)
{
	struct proto_frame f = {.type = PROTO_RANK_START,
				.rank = ch->rank,
				.pid = (uint32_t)ch->pid};
	send_frame(r, &f);
}

void link_send_data(struct run *r, struct child *ch, uint32_t channel,
		    const uint8_t *buf, size_t len)
{
	if (!r->linked) {
		local_write(channel, buf, len);
		return;
	}
	struct unacked *u = malloc(sizeof(*u) + len);
	if (!u) {
		local_write(channel, buf, len);
		return;
	}
	u->next = NULL;
	u->rank = ch->rank;
	u->channel = channel;
	u->len = len;
	memcpy(u->bytes, buf, len);
	if (r->uq_tail)
		r->uq_tail->next = u;
	else
		r->uq_head = u;
	r->uq_tail = u;
	r->uq_bytes += len;
	struct proto_frame f = {.type = PROTO_DATA,
				.rank = ch->rank,
				.channel = channel,
				.data = u->bytes,
				.len = len};
	send_frame(r, &f);
	r->sent_bytes += len;
	if (r->uq_bytes > RUN_CREDIT_HIGH)
		credit_update(r);
}

void link_send_complete(struct run *r, struct child *ch, uint32_t channel)
{
	struct proto_frame f = {
	    .type = PROTO_COMPLETE, .rank = ch->rank, .channel = channel};
	send_frame(r, &f);
}

void link_send_flow(struct run *r, struct child *ch, bool xoff)
{
	struct proto_frame f = {.type = xoff ? PROTO_XOFF : PROTO_XON,
				.rank = ch->rank,
				.channel = ROUTER_CH_STDIN};
	send_frame(r, &f);
}

void link_send_stdin_ack(struct run *r, struct child *ch, uint64_t done)
{
	struct proto_frame f = {
	    .type = PROTO_STDIN_ACK, .rank = ch->rank, .ack_bytes = done};
	send_frame(r, &f);
}

void link_send_exit(struct run *r, struct child *ch)
{
	struct proto_frame f = {.type = PROTO_EXIT, .rank = ch->rank};

	if (WIFSIGNALED(ch->wstatus)) {
		f.how = PROTO_EXIT_SIGNAL;
		f.code = (uint32_t)WTERMSIG(ch->wstatus);
	} else {
		f.how = PROTO_EXIT_CODE;
		f.code = (uint32_t)WEXITSTATUS(ch->wstatus);
	}
	if (!r->bev)
		return;
	send_frame(r, &f);
	r->exits_sent++;
}

/*
 * Frame handlers (the framer's table below).  Each answers link_alive():
 * -1 once link_down() ran, which released the framer.
 */
static int link_alive(const struct run *r)
{
	return r->bev ? 0 : -1;
}

static int on_ack(void *ctx, const struct proto_frame *f)
{
	struct run *r = ctx;

	if (f->ack_bytes > r->sent_bytes || f->ack_exits > r->exits_sent) {
		link_down(r, "daemon acknowledged more than was sent");
		return -1;
	}
	uint64_t drop = f->ack_bytes - r->acked_bytes;
	while (drop > 0 && r->uq_head) {
		struct unacked *u = r->uq_head;
		if (u->len > drop) { /* ACKs cover whole frames; be safe */
			memmove(u->bytes, u->bytes + drop, u->len - drop);
			u->len -= drop;
			r->uq_bytes -= drop;
			break;
		}
		drop -= u->len;
		r->uq_bytes -= u->len;
		r->uq_head = u->next;
		if (!r->uq_head)
			r->uq_tail = NULL;
		free(u);
	}
	r->acked_bytes = f->ack_bytes;
	r->acked_exits = f->ack_exits;
	credit_update(r);
	run_check_finish(r);
	return link_alive(r);
}

static int on_flow(void *ctx, const struct proto_frame *f)
{
	struct run *r = ctx;
	struct child *ch = &r->kids[f->rank - r->rank_base];
	struct run_chan *c =
	    f->channel == ROUTER_CH_STDERR ? &ch->err : &ch->out;

	if (f->type == PROTO_XOFF) {
		r->xoff_rx++;
		c->susp |= RUN_SUSP_XOFF;
	} else {
		r->xon_rx++;
		c->susp &= ~RUN_SUSP_XOFF;
	}
	chan_update(c);
	return link_alive(r);
}

static int on_stdin(void *ctx, const struct proto_frame *f)
{
	struct run *r = ctx;

	child_stdin_push(&r->kids[f->rank - r->rank_base], f->data, f->len);
	return link_alive(r);
}

static int on_stdin_eof(void *ctx, const struct proto_frame *f)
{
	struct run *r = ctx;

	child_stdin_eof(&r->kids[f->rank - r->rank_base]);
	return link_alive(r);
}

static int on_error(void *ctx, const struct proto_frame *f)
{
	struct run *r = ctx;
	char why[PROTO_MSG_MAX + 32];

	snprintf(why, sizeof(why), "daemon closed the job: %.*s",
		 (int)f->msg_len, f->msg);
	link_down(r, why);
	return -1;
}

static void link_trace(void *ctx, const struct proto_frame *f)
{
	run_log(ctx, LOG_DEBUG, "received %s rank %u len %zu",
		proto_type_name(f->type), f->rank, f->len);
}

static bool link_more(void *ctx)
{
	return ((struct run *)ctx)->bev != NULL;
}

static void link_fail(void *ctx, int code, const char *detail)
{
	char why[400];

	snprintf(why, sizeof(why), "protocol error from daemon: %s: %s",
		 proto_strerror(code), detail);
	link_down(ctx, why);
}

/* The frames a forwarder receives (WELCOME is read by link_open()). */
static const struct framer_ops link_framer_ops = {
    .handlers =
	{
	    [PROTO_ACK] = on_ack,
	    [PROTO_XOFF] = on_flow,
	    [PROTO_XON] = on_flow,
	    [PROTO_STDIN] = on_stdin,
	    [PROTO_STDIN_EOF] = on_stdin_eof,
	    [PROTO_ERROR] = on_error,
	},
    .more = link_more,
    .fail = link_fail,
    .trace = link_trace,
};

static void link_drop_reason(struct run *r, int err, char *why, size_t len)
{
	char reason[200];

	net_drop_reason(err, reason, sizeof(reason));
	snprintf(why, len, "%s: %s", r->addr, reason);
}

/* Our own socket reads (framer_read: bursts, not libevent's 4 KiB). */
static void read_ev_cb(evutil_socket_t fd, short what, void *arg)
{
	struct run *r = arg;
	int rc =
	    framer_read(&r->fr, fd, RUN_SOCK_CHUNK, RUN_SOCK_BURST, SIZE_MAX);

	framer_process(&r->fr); /* also the frames that came before an EOF */
	if (rc != 0 && r->bev) {
		char why[400];
		link_drop_reason(r, rc == FRAMER_CLOSED ? 0 : -rc, why,
				 sizeof(why));
		link_down(r, why);
	}
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct run *r = arg;
	char why[400];

	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
		return;
	link_drop_reason(r, what & BEV_EVENT_ERROR ? EVUTIL_SOCKET_ERROR() : 0,
			 why, sizeof(why));
	link_down(r, why);
}

int link_start(struct run *r)
{
	if (!r->linked)
		return 0;
	r->bev =
	    bufferevent_socket_new(r->base, r->link_fd, BEV_OPT_CLOSE_ON_FREE);
	if (!r->bev) {
		close(r->link_fd);
		r->link_fd = -1;
		link_down(r, "out of memory");
		return -1;
	}
	r->rev =
	    event_new(r->base, r->link_fd, EV_READ | EV_PERSIST, read_ev_cb, r);
	r->link_fd = -1;
	if (!r->rev) {
		link_down(r, "out of memory");
		return -1;
	}
	/* WELCOME was consumed by link_open(); the decoder knows. */
	bufferevent_setcb(r->bev, NULL, NULL, event_cb, r);
	bufferevent_set_max_single_write(r->bev, 1 << 20);
	bufferevent_enable(r->bev, EV_WRITE);
	event_add(r->rev, NULL);
	return 0;
}

void link_close(struct run *r)
{
	if (r->rev) {
		event_free(r->rev); /* before the bufferevent closes the fd */
		r->rev = NULL;
	}
	framer_release(&r->fr);
	if (r->bev) {
		bufferevent_free(r->bev);
		r->bev = NULL;
	}
	if (r->link_fd >= 0) {
		close(r->link_fd);
		r->link_fd = -1;
	}
	while (r->uq_head) {
		struct unacked *u = r->uq_head;
		r->uq_head = u->next;
		free(u);
	}
	r->uq_tail = NULL;
	r->uq_bytes = 0;
}

void link_down(struct run *r, const char *why)
{
	bool was = r->linked;

	r->linked = false;
	if (!r->warned) {
		r->warned = true;
		run_log(r, LOG_WARNING, "%s; %s", why,
			r->strict ? "giving up (--strict)"
				  : "output continues on this terminal");
	}
	if (r->strict && !r->failed_strict) {
		r->failed_strict = true;
		for (uint32_t i = 0; r->kids && i < r->count; i++)
			if (r->kids[i].pid > 0 && !r->kids[i].reaped)
				kill(r->kids[i].pid, SIGTERM);
	}
	/* Replay what the daemon has not acknowledged. */
	uint64_t replayed = 0;
	for (struct unacked *u = r->uq_head; u; u = u->next) {
		local_write(u->channel, u->bytes, u->len);
		replayed += u->len;
	}
	if (replayed)
		run_log(r, LOG_INFO, "replayed %llu unacknowledged bytes",
			(unsigned long long)replayed);
	link_close(r);
	if (!was || !r->kids)
		return;
	/* Nobody will XON us or send stdin any more. */
	for (uint32_t i = 0; i < r->count; i++) {
		struct child *ch = &r->kids[i];
		ch->out.susp = 0;
		ch->err.susp = 0;
		chan_update(&ch->out);
		chan_update(&ch->err);
		child_stdin_eof(ch);
	}
	run_check_finish(r);
}
