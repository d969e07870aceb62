/* SPDX-License-Identifier: MIT */
/*
 * iofs-run: the connection to the daemon.  Connect and greet synchronously
 * (bounded), then a bufferevent on the main loop.  Every DATA frame is kept
 * until the daemon's cumulative ACK covers it, so when the link fails it
 * is sent again after a resume (run_resume.c, protocol 4), or written on
 * our own stdout/stderr when we give up: nothing is lost.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "log/clock.h"
#include "net/auth.h"
#include "net/framer.h"
#include "net/net_i.h"
#include "net/run_i.h"

/* Does our umask deny the group reading what we create (its 040 bit, as
 * in 077)?  Then the job's files under the mount are ours only
 * (PROTO_HELLO_F_PRIVATE), as the files we would have written ourselves. */
static bool run_private(void)
{
	mode_t m = umask(0);

	umask(m);
	return (m & S_IRGRP) != 0;
}

static int wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - (int64_t)iofs_mono_ms();
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
static int peer_trusted(struct run_link *l, int fd, char *why, size_t whylen)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) != 0) {
		snprintf(why, whylen,
			 "refusing %s: cannot learn who listens there (%s)",
			 l->o->addr, strerror(errno));
		return -EPERM;
	}
	if (uc.uid == 0 || uc.uid == getuid())
		return 0;
	snprintf(why, whylen,
		 "refusing %s: the process listening there (pid %d) runs as "
		 "uid %u, neither root nor you (uid %u): not an iofs daemon "
		 "you can trust, nothing sent",
		 l->o->addr, (int)uc.pid, (unsigned)uc.uid, (unsigned)getuid());
	return -EPERM;
}

static int connect_to(struct run_link *l, char *why, size_t whylen, int64_t dl)
{
	struct net_addr a;
	char err[256];
	int rc = net_addr_parse(l->o->addr, &a, err, sizeof(err));

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
				 l->o->addr, strerror(-rc));
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
	    (rc = peer_trusted(l, fd, why, whylen)) < 0) {
		close(fd);
		return rc;
	}
	net_tcp_tune(fd);
	return fd;

fail_close:
	rc = -errno;
	close(fd);
	snprintf(why, whylen, "cannot connect to %s: %s", l->o->addr,
		 strerror(-rc));
	return rc;
fail_errno:
	rc = -errno;
	snprintf(why, whylen, "cannot connect to %s: %s", l->o->addr,
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
static int read_frame(struct run_link *l, int fd, uint8_t *buf, size_t cap,
		      struct proto_frame *f, char *why, size_t whylen,
		      int64_t dl)
{
	size_t have = 0;
	char err[256];

	for (;;) {
		size_t need = 0;
		int rc = proto_decode(&l->fr.dec, buf, have, f, &need, err,
				      sizeof(err));
		if (rc == PROTO_OK)
			return (int)need;
		if (rc != PROTO_NEED_MORE) {
			snprintf(why, whylen, "bad reply from %s: %s: %s",
				 l->o->addr, proto_strerror(rc), err);
			return -EPROTO;
		}
		if (need > cap) {
			snprintf(why, whylen, "reply from %s too large",
				 l->o->addr);
			return -EPROTO;
		}
		ssize_t n = read(fd, buf + have, need - have);
		if (n > 0) {
			have += (size_t)n;
			continue;
		}
		if (n == 0) {
			snprintf(why, whylen, "%s closed the connection",
				 l->o->addr);
			return -ECONNRESET;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN) {
			snprintf(why, whylen, "reading from %s: %s", l->o->addr,
				 strerror(errno));
			return -errno;
		}
		rc = wait_fd(fd, POLLIN, dl);
		if (rc < 0) {
			snprintf(why, whylen, "no answer from %s: %s",
				 l->o->addr, strerror(-rc));
			return rc;
		}
	}
}

static const struct framer_ops link_framer_ops; /* the frame handlers */

/* The daemon gave the job another name than the one asked for (a name
 * collision: iofs-run(1), JOB NAMES): say so, and use it from now on. */
static void take_name(struct run_link *l, const struct proto_frame *welcome)
{
	if (!welcome->name_len ||
	    (welcome->name_len == strlen(l->o->nspace) &&
	     !memcmp(welcome->name, l->o->nspace, welcome->name_len)))
		return;
	/* always said: the user looks for the job under the other name (a
	 * squatter may have taken the launcher's, docs/security.md) */
	run_log(l->log, LOG_WARNING,
		l->o->nspace_given
		    ? "job name '%s' is taken (another job, or one still "
		      "open); this run is '%.*s'"
		    : "job name '%s' is taken (another job, or an earlier "
		      "run of this launch); this run is '%.*s'",
		l->o->nspace, (int)welcome->name_len, welcome->name);
	memcpy(l->o->nspace, welcome->name, welcome->name_len);
	l->o->nspace[welcome->name_len] = '\0';
}

/* One HELD frame of a resume answer: remember it for the replay. */
static int take_held(struct run_link *l, const struct proto_frame *f)
{
	struct rlrank *rs = &l->rs[f->rank - l->o->rank_base];

	rs->got_held = true;
	rs->held_state = f->held_state;
	memcpy(rs->held, f->held, sizeof(rs->held));
	return 0;
}

/* COMMAND: the ranks' command line, for the daemon's info files. */
static int send_command(struct run_link *l, int fd, int64_t dl)
{
	uint8_t buf[PROTO_HDR_SIZE + 2 + PROTO_COMMAND_MAX];
	ssize_t n = run_command_frame(l->o->argv, buf, sizeof(buf));

	return n <= 0 ? (int)n : write_all(fd, buf, (size_t)n, dl);
}

/* The daemon's answer to HELLO into @reply (its strings in @buf): WELCOME
 * or ERROR, after the HELD frames of a resume (take_held()).  0, or a
 * negative errno with @why said. */
static int await_reply(struct run_link *l, int fd, bool resume, uint8_t *buf,
		       size_t buflen, struct proto_frame *reply, char *why,
		       size_t whylen, int64_t dl)
{
	int rc;

	for (uint32_t i = 0; l->rs && i < l->o->count; i++)
		l->rs[i].got_held = false;
	for (;;) {
		rc = read_frame(l, fd, buf, buflen, reply, why, whylen, dl);
		if (rc < 0)
			return rc;
		if (reply->type != PROTO_HELD)
			return 0;
		if (!resume || !l->rs) {
			snprintf(why, whylen, "%s sent HELD unasked",
				 l->o->addr);
			return -EPROTO;
		}
		take_held(l, reply);
	}
}

int run_link_greet(struct run_link *l, bool resume, int64_t dl, uint32_t *code,
		   char *why, size_t whylen)
{
	char host[PROTO_HOST_MAX + 1] = "";
	uint8_t buf[PROTO_HEAD_MAX + PROTO_MSG_MAX + 64];

	*code = 0;
	framer_release(&l->fr);
	if (framer_init(&l->fr, PROTO_ROLE_FORWARDER, &link_framer_ops, l) <
	    0) {
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	proto_peer_set_ranks(&l->fr.dec, l->o->rank_base, l->o->count);
	int fd = connect_to(l, why, whylen, dl);
	if (fd < 0)
		return fd;
	gethostname(host, sizeof(host) - 1);
	/* TCP: prove who we are with MUNGE (protocol 3 and 4); a Unix
	 * socket's SO_PEERCRED does that already (protocol 2, any daemon,
	 * when we do not resume). */
	bool tcp = strncmp(l->o->addr, "tcp:", 4) == 0;
	/* Same host: offer the pipes themselves; on a resume only when the
	 * lost link had them (run_resume.c passes them again). */
	bool offer = !tcp && l->o->handover && (!resume || l->handover);
	char *cred = NULL, mwhy[256] = "";
	if (tcp && auth_encode(auth_socket(l->o->munge_socket), l->o->nspace,
			       l->o->rank_base, l->o->count, &cred, mwhy,
			       sizeof(mwhy)) < 0)
		cred = NULL; /* a daemon with -o auth=none does without */
	uint16_t version = l->version ? l->version
			   : l->o->reconnect_s ? PROTO_VERSION
			   : tcp	       ? 3
					       : 2;
	struct proto_frame f = {
	    .type = PROTO_HELLO,
	    .hello = {.version = version,
		      .flags = PROTO_HELLO_F_NAME |
			       (resume ? PROTO_HELLO_F_RESUME : 0) |
			       (offer ? PROTO_HELLO_F_HANDOVER : 0) |
			       (run_private() ? PROTO_HELLO_F_PRIVATE : 0) |
			       (l->o->nspace_given ? 0 : PROTO_HELLO_F_KEEP),
		      .cred = version >= 3 ? cred : NULL,
		      .cred_len = cred && version >= 3 ? strlen(cred) : 0,
		      .rank_base = l->o->rank_base,
		      .rank_count = l->o->count,
		      .job_size = l->o->size,
		      .pid = (uint32_t)getpid(),
		      .uid = (uint32_t)getuid(),
		      .gid = (uint32_t)getgid(),
		      .dirs_set = l->o->dirs.set,
		      .dirs_value = l->o->dirs.value,
		      .nspace = l->o->nspace,
		      .nspace_len = strlen(l->o->nspace),
		      .host = host,
		      .host_len = strlen(host)},
	};
	ssize_t n = proto_encode(&f, buf, sizeof(buf));
	free(cred);
	int rc = n < 0 ? (int)n : write_all(fd, buf, (size_t)n, dl);
	if (rc < 0) {
		snprintf(why, whylen, "sending HELLO to %s: %s", l->o->addr,
			 strerror(-rc));
		goto out_close;
	}
	struct proto_frame reply;
	rc = await_reply(l, fd, resume, buf, sizeof(buf), &reply, why, whylen,
			 dl);
	if (rc < 0)
		goto out_close;
	if (reply.type == PROTO_ERROR) {
		*code = reply.code;
		snprintf(why, whylen, "%s refused the job: %.*s%s%s%s",
			 l->o->addr, (int)reply.msg_len, reply.msg,
			 mwhy[0] ? " (no credential sent: " : "", mwhy,
			 mwhy[0] ? ")" : "");
		rc = -EREMOTEIO;
		goto out_close;
	}
	l->version = version;
	l->handover = offer && (reply.flags & PROTO_WELCOME_F_HANDOVER);
	take_name(l, &reply);
	if ((reply.flags & PROTO_WELCOME_F_COMMAND) &&
	    (rc = send_command(l, fd, dl)) < 0) {
		snprintf(why, whylen, "sending COMMAND to %s: %s", l->o->addr,
			 strerror(-rc));
		goto out_close;
	}
	return fd;

out_close:
	close(fd);
	return rc;
}

int run_link_open(struct run_link *l)
{
	int64_t dl = (int64_t)iofs_mono_ms() + RUN_CONNECT_TIMEOUT_MS;
	char why[PROTO_MSG_MAX + 128];
	uint32_t code;

	l->fd = -1;
	l->rs = calloc(l->o->count, sizeof(*l->rs));
	if (!l->rs) {
		snprintf(why, sizeof(why), "out of memory");
		goto fallback;
	}
	int fd = run_link_greet(l, false, dl, &code, why, sizeof(why));
	if (fd == -EREMOTEIO && code == PROTO_ERR_VERSION &&
	    l->o->reconnect_s) {
		/* A daemon older than protocol 4: no resume with it. */
		run_log(l->log, LOG_INFO, "%s; speaking the older protocol",
			why);
		l->o->reconnect_s = 0;
		fd = run_link_greet(l, false, dl, &code, why, sizeof(why));
	}
	if (fd < 0)
		goto fallback;
	l->fd = fd;
	l->linked = true;
	run_log(l->log, LOG_INFO, "connected to %s: job '%s' ranks %u..%u",
		l->o->addr, l->o->nspace, l->o->rank_base,
		l->o->rank_base + l->o->count - 1);
	if (l->handover)
		run_log(l->log, LOG_INFO,
			"the daemon takes the ranks' pipes (hand-over)");
	return 0;

fallback:
	run_link_fallback(l, why);
	return -ENOTCONN;
}

/* ------------------------------------------------------------------------ */
/* On the loop                                                               */

static void send_frame(struct run_link *l, const struct proto_frame *f)
{
	if (l->bev)
		framer_send(l->bev, f);
}

void run_link_send(struct run_link *l, const struct proto_frame *f)
{
	send_frame(l, f);
}

static void credit_update(struct run_link *l)
{
	if (!l->linked)
		return;
	if (l->uq_bytes > RUN_CREDIT_HIGH)
		run_kids_suspend_all(l->kids, RUN_SUSP_CREDIT, true);
	else if (l->uq_bytes <= RUN_CREDIT_LOW || !l->linked)
		run_kids_suspend_all(l->kids, RUN_SUSP_CREDIT, false);
}

/* The children's calls (struct run_kids_ops, @ctx: the link). */
/* Reconnecting counts: a rank started while the link is down gets pipes,
 * its output is kept for the resume (or, handed over, its pipes). */
static bool kops_linked(void *ctx)
{
	const struct run_link *l = ctx;

	return l->linked || l->reconnecting;
}

static struct rlrank *rl(struct run_link *l, uint32_t rank)
{
	return &l->rs[rank - l->o->rank_base];
}

static bool kops_rank_start(void *ctx, uint32_t rank, pid_t pid,
			    const int fds[3])
{
	struct run_link *l = ctx;
	struct proto_frame f = {
	    .type = PROTO_RANK_START, .rank = rank, .pid = (uint32_t)pid};

	if (l->rs)
		rl(l, rank)->pid = pid;
	if (l->handover && (l->bev || l->reconnecting)) {
		if (l->bev) /* a failure takes the link down: resume or not */
			(void)run_link_send_pipes(l, &f, fds);
		/* The daemon's pipes: it reads them, or, while we reconnect,
		 * will after the resume (run_resume_replay() passes them,
		 * for a rank started meanwhile too); a fallback hands them
		 * back to us (run_kids_unlinked()). */
		return l->bev || l->reconnecting;
	}
	send_frame(l, &f);
	return false;
}

static void kops_data(void *ctx, uint32_t rank, uint32_t channel,
		      const uint8_t *buf, size_t len)
{
	struct run_link *l = ctx;

	if (!l->linked && !l->reconnecting) {
		run_local_write(channel, buf, len);
		return;
	}
	struct unacked *u = malloc(sizeof(*u) + len);
	if (!u) { /* only while linked: the resume queue is bounded */
		run_log(l->log, LOG_ERR, "out of memory: link given up");
		run_link_fallback(l, "out of memory");
		run_local_write(channel, buf, len);
		return;
	}
	int ci = proto_channel_index(channel);
	u->next = NULL;
	u->rank = rank;
	u->channel = channel;
	u->off = rl(l, rank)->produced[ci];
	rl(l, rank)->produced[ci] += len;
	u->len = len;
	memcpy(u->bytes, buf, len);
	if (l->uq_tail)
		l->uq_tail->next = u;
	else
		l->uq_head = u;
	l->uq_tail = u;
	l->uq_bytes += len;
	if (l->reconnecting) { /* kept for the resume */
		run_resume_queue_full(l);
		return;
	}
	struct proto_frame f = {.type = PROTO_DATA,
				.rank = rank,
				.channel = channel,
				.data = u->bytes,
				.len = len};
	send_frame(l, &f);
	l->sent_bytes += len;
	if (l->uq_bytes > RUN_CREDIT_HIGH)
		credit_update(l);
}

static void kops_complete(void *ctx, uint32_t rank, uint32_t channel)
{
	struct run_link *l = ctx;
	struct proto_frame f = {
	    .type = PROTO_COMPLETE, .rank = rank, .channel = channel};

	if (l->rs)
		rl(l, rank)->completed |= channel; /* again after a resume */
	send_frame(l, &f);
}

static void kops_stdin_flow(void *ctx, uint32_t rank, bool xoff)
{
	struct run_link *l = ctx;
	struct proto_frame f = {.type = xoff ? PROTO_XOFF : PROTO_XON,
				.rank = rank,
				.channel = ROUTER_CH_STDIN};

	if (l->rs)
		rl(l, rank)->stdin_xoff = xoff; /* re-sent after a resume */
	send_frame(l, &f);
}

static void kops_stdin_ack(void *ctx, uint32_t rank, uint64_t done)
{
	struct run_link *l = ctx;
	struct proto_frame f = {
	    .type = PROTO_STDIN_ACK, .rank = rank, .ack_bytes = done};

	if (l->rs)
		rl(l, rank)->stdin_done = done; /* told in RESUME */
	send_frame(l, &f);
}

void run_link_send_exit(struct run_link *l, uint32_t rank, int wstatus)
{
	struct proto_frame f = {.type = PROTO_EXIT, .rank = rank};

	if (!l->bev)
		return;
	if (WIFSIGNALED(wstatus)) {
		f.how = PROTO_EXIT_SIGNAL;
		f.code = (uint32_t)WTERMSIG(wstatus);
	} else {
		f.how = PROTO_EXIT_CODE;
		f.code = (uint32_t)WEXITSTATUS(wstatus);
	}
	send_frame(l, &f);
	l->exits_sent++;
}

static void kops_exit(void *ctx, uint32_t rank, int wstatus)
{
	struct run_link *l = ctx;

	if (l->rs) {
		rl(l, rank)->exited = true;
		rl(l, rank)->wstatus = wstatus;
	}
	run_link_send_exit(l, rank, wstatus);
	l->settled(l->settled_ctx);
}

const struct run_kids_ops run_link_kids_ops = {
    .linked = kops_linked,
    .rank_start = kops_rank_start,
    .data = kops_data,
    .complete = kops_complete,
    .stdin_flow = kops_stdin_flow,
    .stdin_ack = kops_stdin_ack,
    .exit = kops_exit,
};

/*
 * Frame handlers (the framer's table below).  Each answers link_alive():
 * -ECONNRESET once run_link_down() ran, which released the framer.
 */
static int link_alive(const struct run_link *l)
{
	return l->bev ? 0 : -ECONNRESET;
}

static int on_ack(void *ctx, const struct proto_frame *f)
{
	struct run_link *l = ctx;

	if (f->ack_bytes > l->sent_bytes || f->ack_exits > l->exits_sent) {
		run_link_down(l, "daemon acknowledged more than was sent");
		return -EPROTO;
	}
	uint64_t drop = f->ack_bytes - l->acked_bytes;
	while (drop > 0 && l->uq_head) {
		struct unacked *u = l->uq_head;
		if (u->len > drop) { /* ACKs cover whole frames; be safe */
			memmove(u->bytes, u->bytes + drop, u->len - drop);
			u->len -= drop;
			u->off += drop;
			l->uq_bytes -= drop;
			break;
		}
		drop -= u->len;
		l->uq_bytes -= u->len;
		l->uq_head = u->next;
		if (!l->uq_head)
			l->uq_tail = NULL;
		free(u);
	}
	l->acked_bytes = f->ack_bytes;
	l->acked_exits = f->ack_exits;
	credit_update(l);
	l->settled(l->settled_ctx);
	return link_alive(l);
}

static int on_flow(void *ctx, const struct proto_frame *f)
{
	struct run_link *l = ctx;
	bool xoff = f->type == PROTO_XOFF;

	if (xoff)
		l->xoff_rx++;
	else
		l->xon_rx++;
	run_kids_suspend(l->kids, f->rank, f->channel, RUN_SUSP_XOFF, xoff);
	return link_alive(l);
}

static int on_stdin(void *ctx, const struct proto_frame *f)
{
	struct run_link *l = ctx;

	rl(l, f->rank)->stdin_rx += f->len;
	run_kids_stdin_push(l->kids, f->rank, f->data, f->len);
	return link_alive(l);
}

static int on_stdin_eof(void *ctx, const struct proto_frame *f)
{
	struct run_link *l = ctx;

	rl(l, f->rank)->stdin_eof_rx = true;
	run_kids_stdin_eof(l->kids, f->rank);
	return link_alive(l);
}

static int on_error(void *ctx, const struct proto_frame *f)
{
	struct run_link *l = ctx;
	char why[PROTO_MSG_MAX + 32];

	snprintf(why, sizeof(why), "daemon closed the job: %.*s",
		 (int)f->msg_len, f->msg);
	run_link_fallback(l, why); /* an ERROR is final: no resume */
	return -ECONNRESET;
}

static void link_trace(void *ctx, const struct proto_frame *f)
{
	struct run_link *l = ctx;

	run_log(l->log, LOG_DEBUG, "received %s rank %u len %zu",
		proto_type_name(f->type), f->rank, f->len);
}

static bool link_more(void *ctx)
{
	return ((struct run_link *)ctx)->bev != NULL;
}

static void link_fail(void *ctx, int code, const char *detail)
{
	char why[400];

	snprintf(why, sizeof(why), "protocol error from daemon: %s: %s",
		 proto_strerror(code), detail);
	run_link_down(ctx, why);
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

static void link_drop_reason(struct run_link *l, int err, char *why, size_t len)
{
	char reason[200];

	net_drop_reason(err, reason, sizeof(reason));
	snprintf(why, len, "%s: %s", l->o->addr, reason);
}

/* Our own socket reads (framer_read: bursts, not libevent's 4 KiB). */
static void read_ev_cb(evutil_socket_t fd, short what, void *arg)
{
	struct run_link *l = arg;
	int rc =
	    framer_read(&l->fr, fd, RUN_SOCK_CHUNK, RUN_SOCK_BURST, SIZE_MAX);

	framer_process(&l->fr); /* also the frames that came before an EOF */
	if (rc != 0 && l->bev) {
		char why[400];
		link_drop_reason(l, rc == FRAMER_CLOSED ? net_eof_error(fd) : -rc,
				 why, sizeof(why));
		run_link_down(l, why);
	}
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct run_link *l = arg;
	char why[400];

	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
		return;
	link_drop_reason(l,
			 what & BEV_EVENT_ERROR
			     ? net_write_error(bufferevent_getfd(bev),
					       EVUTIL_SOCKET_ERROR())
			     : 0,
			 why, sizeof(why));
	run_link_down(l, why);
}

int run_link_start(struct run_link *l)
{
	if (!l->linked)
		return 0;
	l->bev = bufferevent_socket_new(l->base, l->fd, BEV_OPT_CLOSE_ON_FREE);
	if (!l->bev) {
		close(l->fd);
		l->fd = -1;
		run_link_down(l, "out of memory");
		return -ENOMEM;
	}
	l->rev = event_new(l->base, l->fd, EV_READ | EV_PERSIST, read_ev_cb, l);
	l->fd = -1;
	if (!l->rev) {
		run_link_down(l, "out of memory");
		return -ENOMEM;
	}
	/* WELCOME was consumed by link_open(); the decoder knows. */
	bufferevent_setcb(l->bev, NULL, NULL, event_cb, l);
	bufferevent_set_max_single_write(l->bev, 1 << 20);
	bufferevent_enable(l->bev, EV_WRITE);
	event_add(l->rev, NULL);
	return 0;
}

void run_link_close(struct run_link *l)
{
	l->linked = false;
	if (l->rev) {
		event_free(l->rev); /* before the bufferevent closes the fd */
		l->rev = NULL;
	}
	framer_release(&l->fr);
	if (l->bev) {
		bufferevent_free(l->bev);
		l->bev = NULL;
	}
	if (l->fd >= 0) {
		close(l->fd);
		l->fd = -1;
	}
}

bool run_link_reconnecting(const struct run_link *l)
{
	return l->reconnecting;
}

void run_link_release(struct run_link *l)
{
	run_link_close(l);
	run_resume_release(l);
	while (l->uq_head) {
		struct unacked *u = l->uq_head;
		l->uq_head = u->next;
		free(u);
	}
	l->uq_tail = NULL;
	l->uq_bytes = 0;
}

void run_link_init(struct run_link *l, struct event_base *base,
		   struct run_opts *o, iofs_log_t *log, struct run_kids *kids,
		   void (*settled)(void *ctx), void *settled_ctx)
{
	*l = (struct run_link){.base = base,
			       .o = o,
			       .log = log,
			       .kids = kids,
			       .settled = settled,
			       .settled_ctx = settled_ctx,
			       .fd = -1};
}

bool run_link_up(const struct run_link *l)
{
	return l->linked;
}

bool run_link_settled(const struct run_link *l)
{
	return l->acked_exits == l->exits_sent &&
	       l->acked_bytes == l->sent_bytes;
}
