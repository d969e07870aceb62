/* SPDX-License-Identifier: MIT */
/*
 * iofs-run: the connection to the daemon.  Connected and greeted
 * synchronously (bounded, run_greet.c), then a bufferevent on the main loop.  Every DATA frame is kept
 * until the daemon's cumulative ACK covers it, so when the link fails it
 * is sent again after a resume (run_resume.c, protocol 4), or written on
 * our own stdout/stderr when we give up: nothing is lost.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "net/framer.h"
#include "net/net_i.h"
#include "net/run_i.h"

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

/* A fresh framer for a new connection (run_greet.c).  Returns 0 or -ENOMEM. */
int run_link_framer_reset(struct run_link *l)
{
	framer_release(&l->fr);
	return framer_init(&l->fr, PROTO_ROLE_FORWARDER, &link_framer_ops, l);
}

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
