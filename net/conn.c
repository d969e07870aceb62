/* SPDX-License-Identifier: MIT */
/*
 * One forwarder connection on the daemon side: its frames come from the
 * framer (framer.c) through the table below; register ranks, deliver DATA
 * in order, ACK, and carry XOFF/XON both ways.  docs/protocol.md is the
 * specification.
 *
 * Ordering.  Deliveries and EXITs enter one FIFO per connection in frame
 * order; an entry leaves the FIFO only once it and everything before it is
 * done, so an EXIT is applied after every byte sent before it has reached
 * the router, and the ACK counters only ever cover a prefix of the stream
 * (the FIFO itself: conn_dq.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <syslog.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "net/framer.h"
#include "net/net_i.h"
#include "net/server_i.h"

static void conn_service(struct conn *c);

/* ------------------------------------------------------------------------ */
/* Output                                                                    */

void conn_kick(struct conn *c)
{
	event_active(c->kick, EV_READ, 0);
}

/*
 * Start/stop reading the socket (our own read event, see read_ev_cb).  The
 * read event never carries a timeout: on a persistent event libevent
 * re-arms it after every wake-up, and event_add(ev, NULL) keeps a timeout
 * already set, so a greeting deadline there would cut off every rank that
 * is silent for that long.  Idle is normal; the greeting deadline is its
 * own one-shot timer (hello_timeout_cb).
 */
void conn_reading(struct conn *c, bool on)
{
	if (!c->rev || on == c->reading)
		return;
	c->reading = on;
	if (on)
		event_add(c->rev, NULL);
	else
		event_del(c->rev);
}

static void send_frame(struct conn *c, const struct proto_frame *f)
{
	int n;

	if (!c->bev || c->closing)
		return;
	n = framer_send(c->bev, f);
	if (n < 0) {
		srv_log(c->srv, LOG_ERR, "conn %llu: cannot encode %s: %s",
			(unsigned long long)c->id, proto_type_name(f->type),
			strerror(-n));
		return;
	}
	struct evbuffer *out = bufferevent_get_output(c->bev);
	srv_log(c->srv, LOG_DEBUG, "conn %llu: sent %s rank %u",
		(unsigned long long)c->id, proto_type_name(f->type), f->rank);
	/* Protect our memory from a forwarder that does not read: hold its
	 * stdin back early, stop reading it if the backlog still grows. */
	size_t len = evbuffer_get_length(out);
	if (len > CONN_STDIN_HIGH && !c->out_full) {
		c->out_full = true;
		for (uint32_t i = 0; i < c->rank_count; i++)
			c->ranks[i].stdin_want |= STDIN_SUSP_OUTBUF;
		conn_kick(c); /* stdin flow is applied outside router ops */
	}
	if (len > CONN_OUT_HIGH && !(c->susp & CONN_SUSP_OUTBUF)) {
		c->susp |= CONN_SUSP_OUTBUF;
		conn_reading(c, false);
		srv_log(c->srv, LOG_INFO,
			"conn %llu: %zu bytes queued toward %s: pausing it",
			(unsigned long long)c->id, len, c->peer);
	}
}

void conn_send(struct conn *c, const struct proto_frame *f)
{
	send_frame(c, f);
}

static void send_ack(struct conn *c)
{
	struct proto_frame f = {.type = PROTO_ACK,
				.ack_bytes = c->acked_bytes,
				.ack_exits = c->exits_done};
	send_frame(c, &f);
}

/* The negative errno that stands for ERROR code @code (net_i.h's rule). */
static int code_errno(uint32_t code)
{
	switch (code) {
	case PROTO_REFUSED_EXISTS:
		return -EEXIST;
	case PROTO_REFUSED_REMOTE:
		return -EPERM;
	case PROTO_REFUSED_AUTH:
		return -EACCES;
	case PROTO_REFUSED_LIMIT:
		return -EUSERS;
	case PROTO_REFUSED_ROUTER:
		return -ENOMEM;
	default:
		return -EPROTO; /* PROTO_ERR_*: the peer broke the protocol */
	}
}

int conn_fail(struct conn *c, uint32_t code, const char *fmt, ...)
{
	char msg[PROTO_MSG_MAX];
	va_list ap;

	if (c->closing || !c->bev)
		return code_errno(code);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	srv_log(c->srv, c->quiet_fail ? LOG_DEBUG : LOG_WARNING,
		"conn %llu (%s%s%s): closing: %s", (unsigned long long)c->id,
		c->peer, c->nspace[0] ? " job " : "", c->nspace, msg);
	struct proto_frame f = {.type = PROTO_ERROR,
				.code = code,
				.msg = msg,
				.msg_len = strlen(msg)};
	send_frame(c, &f);
	c->closing = true;
	conn_reading(c, false);
	/* Free once the ERROR is flushed (write callback at 0 bytes), or
	 * after CONN_CLOSE_TIMEOUT_S if the peer does not take it. */
	struct timeval tv = {CONN_CLOSE_TIMEOUT_S, 0};
	bufferevent_set_timeouts(c->bev, NULL, &tv);
	bufferevent_setwatermark(c->bev, EV_WRITE, 0, 0);
	if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
		c->dead = true;
	conn_kick(c);
	return code_errno(code);
}

/* ------------------------------------------------------------------------ */
/* Router source ops (ctx = struct crank)                                    */

static void op_flow(void *ctx, router_rank_t *rank, uint32_t channel, bool xoff)
{
	struct crank *cr = ctx;
	struct conn *c = cr->c;
	struct proto_frame f = {.type = xoff ? PROTO_XOFF : PROTO_XON,
				.rank = cr->rank,
				.channel = channel};

	if (xoff) {
		c->xoff_sent++;
		cr->out_latch |= channel;
	} else {
		c->xon_sent++;
		cr->out_latch &= ~channel;
	}
	if (cr->pp) /* hand-over: the latch stops our own pipe reads */
		conn_pipe_update(c);
	send_frame(c, &f); /* detached: re-sent as latch state on resume */
}

static int op_stdin_write(void *ctx, router_rank_t *rank, const void *bytes,
			  size_t len)
{
	struct crank *cr = ctx;
	struct conn *c = cr->c;
	const uint8_t *p = bytes;

	if ((!c->bev && !c->detached) || c->closing ||
	    cr->state != CRANK_RUNNING)
		return -EPIPE;
	if (cr->pp) /* hand-over: straight into the rank's pipe */
		return conn_pipe_stdin(cr, p, len);
	/* Kept until STDIN_ACKed (version 4): a reconnect re-sends them. */
	if (c->version >= 4 && conn_resume_keep(cr, p, len) < 0)
		return -ENOMEM;
	while (len > 0) {
		size_t n = len > PROTO_PAYLOAD_MAX ? PROTO_PAYLOAD_MAX : len;
		struct proto_frame f = {
		    .type = PROTO_STDIN, .rank = cr->rank, .data = p, .len = n};
		if (!cr->await_resume) /* else sent after its RESUME */
			send_frame(c, &f);
		cr->stdin_sent += n;
		p += n;
		len -= n;
	}
	if (cr->stdin_sent - cr->stdin_acked > CONN_STDIN_CREDIT &&
	    !(cr->stdin_want & STDIN_SUSP_CREDIT)) {
		cr->stdin_want |= STDIN_SUSP_CREDIT;
		conn_kick(c); /* stdin flow is applied outside router ops */
	}
	return 0;
}

static void op_stdin_eof(void *ctx, router_rank_t *rank)
{
	struct crank *cr = ctx;
	struct proto_frame f = {.type = PROTO_STDIN_EOF, .rank = cr->rank};

	cr->stdin_eof_sent = true;
	if (cr->pp) /* and the forwarder closes its copy (STDIN_EOF) */
		conn_pipe_stdin_eof(cr);
	if (!cr->await_resume)
		send_frame(cr->c, &f);
}

const struct router_source_ops conn_source_ops = {
    .flow = op_flow,
    .stdin_write = op_stdin_write,
    .stdin_eof = op_stdin_eof,
};

/* ------------------------------------------------------------------------ */
/* Frame handlers                                                            */

/* The DATA frame taken out of the input (conn_in_take), if nobody kept it. */
static void release_frame_entry(struct conn *c)
{
	free(c->frame_entry);
	c->frame_entry = NULL;
}

static struct crank *running_rank(struct conn *c, const struct proto_frame *f)
{
	struct crank *cr = &c->ranks[f->rank - c->rank_base];

	if (cr->state == CRANK_RUNNING && !cr->exit_queued)
		return cr;
	conn_fail(c, PROTO_ERR_ORDER, "%s for rank %u which is %s",
		  proto_type_name(f->type), f->rank,
		  cr->state == CRANK_RESERVED ? "not started (no RANK_START)"
					      : "already exited");
	return NULL;
}

static int on_hello(void *ctx, const struct proto_frame *f)
{
	struct conn *c = ctx;
	const struct proto_hello *h = &f->hello;

	memcpy(c->nspace, h->nspace, h->nspace_len);
	c->nspace[h->nspace_len] = '\0';
	memcpy(c->host, h->host, h->host_len);
	c->host[h->host_len] = '\0';
	c->job_size = h->job_size;
	c->dirs.set =
	    h->dirs_set & ROUTER_DIR_KNOWN_MASK & ~ROUTER_DIR_COMPLETE;
	c->dirs.value = h->dirs_value & c->dirs.set;
	c->version = h->version;
	c->pid = h->pid;
	if (!c->cred_ok) { /* TCP: unauthenticated hints (auth=none) */
		c->uid = h->uid;
		c->gid = h->gid;
	}
	memcpy(c->requested, c->nspace, h->nspace_len + 1);
	c->hello_flags = h->flags;
	/* MUNGE (TCP), limits, the range check, WELCOME: conn_admit.c */
	return conn_admit(c, h->rank_base, h->rank_count, h->cred, h->cred_len);
}

static int on_rank_start(void *ctx, const struct proto_frame *f)
{
	struct conn *c = ctx;
	struct crank *cr = &c->ranks[f->rank - c->rank_base];
	router_proc_t proc;

	if (cr->state == CRANK_RUNNING && c->handover &&
	    (c->hello_flags & PROTO_HELLO_F_RESUME)) {
		/* a resumed hand-over: its pipes again; we read on where the
		 * lost link stopped (HELD said where) */
		int rc = conn_pipe_restart(cr);
		if (rc < 0)
			return rc;
		router_rank_set_link(cr->rr, ROUTER_LINK_HANDOVER, c->resumes);
		cr->stdin_want &= ~STDIN_SUSP_DETACHED; /* taken back */
		conn_kick(c);
		return 0;
	}
	if (cr->state != CRANK_RESERVED) {
		return conn_fail(c, PROTO_ERR_ORDER,
				 "second RANK_START for rank %u", f->rank);
	}
	struct router_rank_info info = {.pid = f->pid,
					.host = c->host,
					.uid = c->uid,
					.gid = c->gid,
					.private_job = (c->hello_flags &
							PROTO_HELLO_F_PRIVATE) != 0,
					.job_size = c->job_size,
					.dirs = c->dirs,
					.requested = c->requested};
	router_proc_set(&proc, c->nspace, cr->rank);
	int rc = router_rank_register(c->srv->router, &proc, &info, &conn_source_ops,
				      cr, &cr->rr);
	if (rc != ROUTER_SUCCESS) {
		return conn_fail(c,
			  rc == ROUTER_ERR_EXISTS ? PROTO_REFUSED_EXISTS
						  : PROTO_REFUSED_ROUTER,
				 "cannot register rank %u of job '%s': %s",
				 cr->rank, c->nspace, router_strerror(rc));
	}
	cr->state = CRANK_RUNNING;
	if (c->handover && (rc = conn_pipe_start(cr)) < 0)
		return rc;
	router_rank_set_link(cr->rr,
			     cr->pp ? ROUTER_LINK_HANDOVER : ROUTER_LINK_UP,
			     c->resumes);
	router_rank_count_replayed(cr->rr, cr->replay_pending);
	cr->replay_pending = 0;
	if (c->command) /* the job keeps the first one said */
		(void)router_job_set_command(router_rank_job(cr->rr),
					     c->command);
	/* Output already backed up toward this forwarder: start XOFFed. */
	if (c->out_full)
		cr->stdin_want |= STDIN_SUSP_OUTBUF;
	conn_kick(c);
	return 0;
}

static int on_data(void *ctx, const struct proto_frame *f)
{
	struct conn *c = ctx;
	if (!running_rank(c, f)) {
		release_frame_entry(c);
		return -EPROTO;
	}
	return conn_deliver(c, f->rank - c->rank_base, f->channel, f->data,
			    f->len, false);
}

static int on_complete(void *ctx, const struct proto_frame *f)
{
	struct conn *c = ctx;
	if (!running_rank(c, f))
		return -EPROTO;
	return conn_deliver(c, f->rank - c->rank_base, f->channel, NULL, 0,
			    true);
}

static int on_exit_frame(void *ctx, const struct proto_frame *f)
{
	struct conn *c = ctx;
	struct crank *cr = running_rank(c, f);

	if (!cr)
		return -EPROTO;
	int status =
	    f->how == PROTO_EXIT_SIGNAL ? 128 + (int)f->code : (int)f->code;
	cr->exit_queued = true;
	if (conn_pipe_hold_exit(cr, status)) /* after its pipes' last byte */
		return 0;
	return conn_dq_exit(c, f->rank - c->rank_base, status);
}

static int on_flow(void *ctx, const struct proto_frame *f)
{
	struct conn *c = ctx;
	struct crank *cr = &c->ranks[f->rank - c->rank_base];

	/* Late XON/XOFF for an exited rank: harmless, ignore. */
	if (cr->state != CRANK_RUNNING)
		return 0;
	if (f->type == PROTO_XOFF)
		cr->stdin_want |= STDIN_SUSP_PEER;
	else
		cr->stdin_want &= ~STDIN_SUSP_PEER;
	conn_kick(c);
	return 0;
}

/* The forwarder let stdin bytes go (written to the rank's pipe, or dropped
 * because the rank closed its stdin): return the credit. */
static int on_stdin_ack(void *ctx, const struct proto_frame *f)
{
	struct conn *c = ctx;
	struct crank *cr = &c->ranks[f->rank - c->rank_base];

	if (f->ack_bytes < cr->stdin_acked || f->ack_bytes > cr->stdin_sent) {
		return conn_fail(
		    c, PROTO_ERR_FIELD,
		    "STDIN_ACK rank %u: %llu bytes, sent %llu, acked %llu",
		    f->rank, (unsigned long long)f->ack_bytes,
		    (unsigned long long)cr->stdin_sent,
		    (unsigned long long)cr->stdin_acked);
	}
	conn_resume_acked(cr, f->ack_bytes); /* before stdin_acked moves */
	cr->stdin_acked = f->ack_bytes;
	if ((cr->stdin_want & STDIN_SUSP_CREDIT) &&
	    cr->stdin_sent - cr->stdin_acked <= CONN_STDIN_CREDIT / 2) {
		cr->stdin_want &= ~STDIN_SUSP_CREDIT;
		conn_kick(c);
	}
	return 0;
}

static int on_resume(void *ctx, const struct proto_frame *f)
{
	return conn_resume_frame(ctx, f);
}

static int on_command(void *ctx, const struct proto_frame *f)
{
	return conn_admit_command(ctx, f);
}

/* ------------------------------------------------------------------------ */
/* Input: the framer's hooks                                                 */

static bool conn_in_more(void *ctx)
{
	struct conn *c = ctx;

	return !c->susp && !c->closing && !c->dead && !c->handoff;
}

static void conn_in_fail(void *ctx, int code, const char *detail)
{
	struct conn *c = ctx;

	release_frame_entry(c); /* a DATA frame taken that did not decode */
	conn_fail(c, (uint32_t)code, "%s: %s", proto_strerror(code), detail);
}

static void conn_in_trace(void *ctx, const struct proto_frame *f)
{
	struct conn *c = ctx;

	srv_log(c->srv, LOG_DEBUG, "conn %llu: %s rank %u len %zu",
		(unsigned long long)c->id, proto_type_name(f->type), f->rank,
		f->len);
}

/* A whole DATA frame moves out of the input buffer into the delivery entry
 * itself (one copy, no pull-up): on_data() hands it to conn_deliver(). */
static uint8_t *conn_in_take(void *ctx, size_t len)
{
	struct conn *c = ctx;

	c->frame_entry = malloc(sizeof(*c->frame_entry) + len);
	if (!c->frame_entry) {
		conn_fail(c, PROTO_REFUSED_ROUTER, "out of memory");
		return NULL;
	}
	memset(c->frame_entry, 0, sizeof(*c->frame_entry));
	return c->frame_entry->bytes;
}

/* The frames a daemon receives. */
static const struct framer_ops conn_framer_ops = {
    .handlers =
	{
	    [PROTO_HELLO] = on_hello,
	    [PROTO_RANK_START] = on_rank_start,
	    [PROTO_DATA] = on_data,
	    [PROTO_COMPLETE] = on_complete,
	    [PROTO_EXIT] = on_exit_frame,
	    [PROTO_XOFF] = on_flow,
	    [PROTO_XON] = on_flow,
	    [PROTO_STDIN_ACK] = on_stdin_ack,
	    [PROTO_RESUME] = on_resume,
	    [PROTO_COMMAND] = on_command,
	},
    .more = conn_in_more,
    .fail = conn_in_fail,
    .trace = conn_in_trace,
    .take = conn_in_take,
    .fds = conn_pipe_fds,
};

static void conn_lost_log(struct conn *c, const char *what)
{
	bool lost = false;

	if (c->detach_pending || c->detached)
		return;
	/* a hand-over with running ranks waits for a resume too; one whose
	 * ranks all ended drains its pipes to their end */
	if (!conn_resume_wants(c) && conn_pipe_drain(c))
		return;
	if (conn_resume_wants(c)) { /* its ranks wait for a resume */
		srv_log(c->srv, LOG_WARNING,
			"conn %llu (%s job %s): %s; its running ranks wait %u s "
			"for their forwarder to resume",
			(unsigned long long)c->id, c->peer, c->nspace, what,
			conn_resume_window(c->srv));
		c->detach_pending = true;
		conn_reading(c, false);
		conn_kick(c);
		return;
	}
	for (uint32_t i = 0; i < c->rank_count; i++)
		if (c->ranks[i].state == CRANK_RUNNING &&
		    !c->ranks[i].exit_queued)
			lost = true;
	srv_log(c->srv, lost ? LOG_WARNING : LOG_INFO,
		"conn %llu (%s%s%s): %s%s", (unsigned long long)c->id, c->peer,
		c->nspace[0] ? " job " : "", c->nspace, what,
		lost ? "; its running ranks are lost" : "");
	c->dead = true;
	conn_reading(c, false);
	conn_kick(c);
}

/*
 * Socket reads.  libevent 2.1's bufferevents read at most 4 KiB per call
 * (EVBUFFER_MAX_READ), one call per loop iteration; we read into our own
 * evbuffer in CONN_READ_CHUNK pieces instead, until EAGAIN, a short read,
 * CONN_READ_BURST bytes, or CONN_IN_MAX buffered.  The bufferevent only
 * writes.
 */
static void read_ev_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	int rc = framer_read(&c->fr, fd, CONN_READ_CHUNK, CONN_READ_BURST,
			     CONN_IN_MAX);

	if (rc != 0) {
		char why[200];
		net_drop_reason(rc == FRAMER_CLOSED ? net_eof_error(fd) : -rc,
				why, sizeof(why));
		conn_lost_log(c, why);
		return;
	}
	framer_process(&c->fr);
}

/* Accepted CONN_HELLO_TIMEOUT_S ago and still no complete HELLO. */
static void hello_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	if (c->fr.dec.greeted || c->closing || c->dead)
		return;
	srv_log(c->srv, LOG_WARNING,
		"conn %llu (%s): no HELLO in time (%d s after connecting): "
		"dropped",
		(unsigned long long)c->id, c->peer, CONN_HELLO_TIMEOUT_S);
	c->dead = true;
	conn_reading(c, false);
	conn_kick(c);
}

static void write_cb(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;

	/* Write callbacks may be spurious (deferred, or from before the
	 * watermark changed): look at the buffer itself. */
	if (c->closing) {
		if (evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
			c->dead = true;
			conn_kick(c);
		}
		return;
	}
	if ((c->out_full || (c->susp & CONN_SUSP_OUTBUF)) &&
	    evbuffer_get_length(bufferevent_get_output(bev)) <= CONN_OUT_LOW) {
		c->susp &= ~CONN_SUSP_OUTBUF;
		c->out_full = false;
		for (uint32_t i = 0; i < c->rank_count; i++)
			c->ranks[i].stdin_want &= ~STDIN_SUSP_OUTBUF;
		conn_kick(c);
	}
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;

	if (what & BEV_EVENT_TIMEOUT) {
		srv_log(c->srv, LOG_WARNING,
			"conn %llu (%s): peer does not take its ERROR: dropped",
			(unsigned long long)c->id, c->peer);
		c->dead = true;
		conn_kick(c);
		return;
	}
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		char why[200];
		net_drop_reason(what & BEV_EVENT_ERROR
				    ? net_write_error(bufferevent_getfd(bev),
						      EVUTIL_SOCKET_ERROR())
				    : 0,
				why, sizeof(why));
		conn_lost_log(c, why);
	}
}

/*
 * A resume: @d (detached) takes over @n's socket, its bufferevent and the
 * bytes its framer has not decoded yet; @n is left without a socket, to be
 * freed.  0 or -ENOMEM (@d stays detached, @n keeps its socket).
 */
int conn_attach_socket(struct conn *d, struct conn *n)
{
	int fd = bufferevent_getfd(n->bev);
	struct event *rev =
	    event_new(d->srv->base, fd, EV_READ | EV_PERSIST, read_ev_cb, d);

	if (!rev)
		return -ENOMEM;
	framer_release(&d->fr);
	if (framer_init(&d->fr, PROTO_ROLE_DAEMON, &conn_framer_ops, d) < 0) {
		event_free(rev);
		return -ENOMEM;
	}
	d->fr.dec = n->fr.dec;
	evbuffer_add_buffer(d->fr.in, n->fr.in);
	conn_reading(n, false);
	d->rev = rev;
	d->reading = false;
	d->bev = n->bev;
	n->bev = NULL;
	bufferevent_setcb(d->bev, NULL, write_cb, event_cb, d);
	bufferevent_setwatermark(d->bev, EV_WRITE, CONN_OUT_LOW, 0);
	return 0;
}

/* Deferred service: apply stdin flow, resume reading, free when dead. */
static void conn_service(struct conn *c)
{
	if (c->detach_pending) {
		c->detach_pending = false;
		conn_resume_detach(c);
	}
	if (c->dead) {
		conn_destroy(c);
		return;
	}
	if (c->draining && c->bev) { /* the forwarder is gone: no socket */
		event_free(c->rev);
		c->rev = NULL;
		bufferevent_free(c->bev);
		c->bev = NULL;
	}
	/* The resuming connection moves its socket; the detached one it
	 * claimed (handoff set too) is kicked as well when the resume
	 * superseded it just now, and carries on as detached meanwhile. */
	if (c->handoff && !c->detached) {
		conn_resume_handoff(c);
		return;
	}
	if (c->ack_pending) {
		c->ack_pending = false;
		send_ack(c);
	}
	for (uint32_t i = 0; i < c->rank_count; i++) {
		struct crank *cr = &c->ranks[i];
		bool want = cr->stdin_want != 0;
		if (cr->state != CRANK_RUNNING || want == cr->stdin_xoff)
			continue;
		cr->stdin_xoff = want;
		router_stdin_flow(cr->rr, want);
	}
	conn_pipe_update(c);
	if (!c->susp && !c->closing && c->bev && !c->detached) {
		conn_reading(c, true);
		framer_process(&c->fr);
	}
}

static void kick_cb(evutil_socket_t fd, short what, void *arg)
{
	conn_service(arg);
}

/* ------------------------------------------------------------------------ */
/* Lifecycle                                                                 */

struct conn *conn_new(net_server_t *s, int fd, const struct sockaddr *sa,
		      int salen, bool is_unix)
{
	struct conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->srv = s;
	c->id = ++s->next_id;
	c->is_unix = is_unix;
	if (is_unix) {
		struct ucred uc;
		socklen_t len = sizeof(uc);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) == 0) {
			c->cred_ok = true;
			c->uid = uc.uid;
			c->gid = uc.gid;
			c->peer_pid = uc.pid;
			c->peer_start = net_proc_start(uc.pid);
			snprintf(c->peer, sizeof(c->peer), "unix pid %d uid %u",
				 (int)uc.pid, uc.uid);
		} else {
			snprintf(c->peer, sizeof(c->peer), "unix");
		}
	} else {
		char who[80];
		net_sockaddr_text(sa, who, sizeof(who));
		snprintf(c->peer, sizeof(c->peer), "tcp %s", who);
	}
	c->kick = event_new(s->base, -1, 0, kick_cb, c);
	c->rev = event_new(s->base, fd, EV_READ | EV_PERSIST, read_ev_cb, c);
	c->hello_timer = evtimer_new(s->base, hello_timeout_cb, c);
	int frc = framer_init(&c->fr, PROTO_ROLE_DAEMON, &conn_framer_ops, c);
	c->bev = bufferevent_socket_new(
	    s->base, fd, BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (!c->kick || !c->rev || !c->hello_timer || frc < 0 || !c->bev) {
		if (c->bev)
			bufferevent_free(c->bev); /* closes fd */
		else
			close(fd);
		if (c->kick)
			event_free(c->kick);
		if (c->rev)
			event_free(c->rev);
		if (c->hello_timer)
			event_free(c->hello_timer);
		framer_release(&c->fr);
		free(c);
		srv_log(s, LOG_ERR, "out of memory accepting a connection");
		return NULL;
	}
	evutil_make_socket_nonblocking(fd);
	net_tcp_tune(fd);
	bufferevent_setcb(c->bev, NULL, write_cb, event_cb, c);
	bufferevent_setwatermark(c->bev, EV_WRITE, CONN_OUT_LOW, 0);
	bufferevent_set_max_single_write(c->bev, CONN_WRITE_MAX);
	bufferevent_enable(c->bev, EV_WRITE);
	struct timeval hello_tv = {CONN_HELLO_TIMEOUT_S, 0};
	evtimer_add(c->hello_timer, &hello_tv);
	conn_reading(c, true);
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	srv_log(s, LOG_DEBUG, "conn %llu: accepted %s",
		(unsigned long long)c->id, c->peer);
	if (c->cred_ok)
		conn_admit_owner(c); /* max_conns_uid: ERROR and close */
	return c;
}

void conn_destroy(struct conn *c)
{
	net_server_t *s = c->srv;

	c->closing = true;
	if (c->rev) {
		event_free(c->rev); /* before the bufferevent closes the fd */
		c->rev = NULL;
	}
	if (c->bev) {
		bufferevent_free(c->bev);
		c->bev = NULL;
	}
	if (c->hello_timer) {
		event_free(c->hello_timer);
		c->hello_timer = NULL;
	}
	framer_release(&c->fr);
	release_frame_entry(c);
	if (c->handoff && c->handoff->handoff == c)
		c->handoff->handoff = NULL; /* a resume that did not happen */
	conn_dq_release(c);
	conn_pipe_release(c); /* held EXITs applied */
	for (uint32_t i = 0; i < c->rank_count; i++) {
		conn_rank_finish(&c->ranks[i], ROUTER_STATE_LOST, -1);
		conn_resume_release(&c->ranks[i]);
	}
	if (c->resume_timer) {
		event_free(c->resume_timer);
		c->resume_timer = NULL;
	}
	if (c->xoff_sent || c->xon_sent)
		srv_log(
		    s, LOG_DEBUG, "conn %llu: XOFF sent %llu, XON sent %llu",
		    (unsigned long long)c->id, (unsigned long long)c->xoff_sent,
		    (unsigned long long)c->xon_sent);
	conn_admit_release(c);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	event_free(c->kick);
	free(c->ranks);
	free(c->command);
	free(c);
}
