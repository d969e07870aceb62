/* SPDX-License-Identifier: MIT */
/*
 * Resume (part of conn.c's module, see server_i.h; docs/protocol.md,
 * "Resume").  When the socket of a version 4 connection ends while some of
 * its ranks still run, the connection is detached instead of destroyed:
 * its ranks stay running in the router (readers stay parked, stdin writers
 * are held back by an XOFF), their stdin not yet acknowledged is kept, and
 * a timer of -o resume_window seconds makes them lost as before when no
 * forwarder comes back.  A resume HELLO of the same job, range and uid
 * hands its socket to the detached connection (conn_resume_handoff): HELD
 * per rank, WELCOME, the XOFF latches still set, and after each rank's
 * RESUME frame the stdin the forwarder lacks.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "log/clock.h"
#include "net/net_i.h"
#include "net/server_i.h"

unsigned conn_resume_window(const net_server_t *s)
{
	return s->cfg.resume_window_set ? s->cfg.resume_window_s
					: NET_RESUME_WINDOW_S;
}

static bool has_live_ranks(const struct conn *c)
{
	for (uint32_t i = 0; i < c->rank_count; i++)
		if (c->ranks[i].state == CRANK_RUNNING &&
		    !c->ranks[i].exit_queued)
			return true;
	return false;
}

bool conn_resume_wants(const struct conn *c)
{
	/* a hand-over connection with running ranks too (conn_pipe_detach);
	 * without, it drains its pipes (conn_pipe_drain) */
	return c->version >= 4 && !c->closing && c->ranks &&
	       conn_resume_window(c->srv) > 0 && has_live_ranks(c);
}

/* A forwarder on this host that has exited cannot resume: true while
 * its process (same pid, same start time) is alive, or is not ours to
 * watch (TCP, another pid namespace, /proc unreadable at accept). */
static bool peer_may_resume(const struct conn *c)
{
	return !c->is_unix || c->peer_pid <= 0 || !c->peer_start ||
	       net_proc_start(c->peer_pid) == c->peer_start;
}

static void window_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	struct timeval tick = {1, 0};

	if (!c->detached || c->handoff) /* claimed: the resume is due */
		return;
	if (!peer_may_resume(c)) {
		srv_log(c->srv, LOG_WARNING,
			"conn %llu (job %s): its forwarder (pid %d) has "
			"exited, no resume can come; its running ranks are "
			"%s",
			(unsigned long long)c->id, c->nspace, c->peer_pid,
			c->handover ? "read to their pipes' end" : "lost");
		/* a hand-over: we hold the pipes, read them to their end as
		 * without resume (conn_pipe_drain), then the ranks are lost */
		if (c->handover) {
			c->detached = false;
			if (conn_pipe_drain(c))
				return;
		}
	} else if (iofs_mono_ms() + 50 < c->resume_deadline_ms) {
		evtimer_add(c->resume_timer, &tick); /* watch the peer */
		return;
	} else {
		srv_log(c->srv, LOG_WARNING,
			"conn %llu (job %s): no resume within %u s; its "
			"running ranks are lost",
			(unsigned long long)c->id, c->nspace,
			conn_resume_window(c->srv));
	}
	c->dead = true;
	conn_kick(c);
}

static void set_link(struct conn *c, bool up)
{
	for (uint32_t i = 0; i < c->rank_count; i++) {
		struct crank *cr = &c->ranks[i];
		if (cr->state == CRANK_RUNNING)
			router_rank_set_link(cr->rr, up ? ROUTER_LINK_UP
							: ROUTER_LINK_WAITING,
					     c->resumes);
	}
}

void conn_resume_detach(struct conn *c)
{
	struct timeval tv = {conn_resume_window(c->srv), 0};

	if (!c->resume_timer)
		c->resume_timer = evtimer_new(c->srv->base, window_cb, c);
	if (!c->resume_timer) { /* no memory: lost, as before */
		c->dead = true;
		return;
	}
	if (c->rev) {
		event_free(c->rev);
		c->rev = NULL;
	}
	c->reading = false;
	if (c->bev) {
		bufferevent_free(c->bev);
		c->bev = NULL;
	}
	framer_release(&c->fr);
	conn_pipe_detach(c);
	c->detached = true;
	c->out_full = false;
	c->susp &= ~CONN_SUSP_OUTBUF;
	for (uint32_t i = 0; i < c->rank_count; i++) {
		struct crank *cr = &c->ranks[i];
		cr->stdin_want &= ~STDIN_SUSP_OUTBUF;
		cr->stdin_want |= STDIN_SUSP_DETACHED;
	}
	set_link(c, false);
	/* A local forwarder is watched every second (one that exited makes
	 * its ranks lost at once, not after the window); others get one
	 * timer at the window's end. */
	c->resume_deadline_ms = iofs_mono_ms() + (uint64_t)tv.tv_sec * 1000u;
	if (c->is_unix && c->peer_pid > 0 && c->peer_start && tv.tv_sec > 1)
		tv.tv_sec = 1;
	evtimer_add(c->resume_timer, &tv);
	conn_kick(c); /* stdin flow */
}

/*
 * The detached connection of @c's job with exactly @c's range, or NULL.
 * A connection of that range that still looks alive is detached now: its
 * forwarder reconnecting proves it gave it up (a dead TCP peer is noticed
 * only by keepalive, 10-15 s later).  Its owner is checked by the caller.
 */
static struct conn *find_detached(struct conn *c, uint32_t base,
				  uint32_t count)
{
	for (struct conn *o = strmap_get(&c->srv->conns_by_ns, c->nspace); o;
	     o = o->ns_next) {
		if (o == c || o->dead || o->handoff || o->rank_base != base ||
		    o->rank_count != count || !o->ranks)
			continue;
		if (!o->detached && o->uid == c->uid && conn_resume_wants(o)) {
			srv_log(c->srv, LOG_WARNING,
				"conn %llu (%s job %s): superseded by a resume "
				"from conn %llu",
				(unsigned long long)o->id, o->peer, o->nspace,
				(unsigned long long)c->id);
			o->detach_pending = false;
			conn_resume_detach(o);
		}
		if (o->detached)
			return o;
		if (o->uid != c->uid)
			return o; /* refused by the caller */
	}
	return NULL;
}

static int refuse(struct conn *c, uint32_t owner, const char *what)
{
	srv_log(c->srv, LOG_WARNING,
		"conn %llu (%s): resume of job '%s' by uid %u refused: %s "
		"uid %u",
		(unsigned long long)c->id, c->peer, c->nspace, c->uid, what,
		owner);
	return conn_fail(c, PROTO_REFUSED_RESUME,
			 "resume of job '%s' refused: it belongs to another "
			 "user",
			 c->nspace);
}

/* The job ended while nobody came back: tell the forwarder what the
 * daemon holds of each rank, so that it prints exactly the rest. */
static int expired(struct conn *c, router_job_t *job, uint32_t base,
		   uint32_t count)
{
	for (uint32_t i = 0; i < count; i++) {
		router_rank_t *rr = router_job_rank(job, base + i);
		struct router_stats st = {0};
		struct proto_frame f = {.type = PROTO_HELD, .rank = base + i};
		if (rr) {
			router_rank_stats(rr, &st);
			f.held_state = PROTO_HELD_EXITED;
			f.held[0] = st.stdout_bytes;
			f.held[1] = st.stderr_bytes; /* stddiag included */
		}
		conn_send(c, &f);
	}
	/* Say so in the job's info (note: ...): its output goes on
	 * elsewhere from here. */
	char note[160];
	snprintf(note, sizeof(note),
		 "ranks %u..%u came back after the resume window: the rest of "
		 "their output went to their iofs-run's terminal",
		 base, base + count - 1);
	router_job_note(job, note);
	return conn_fail(c, PROTO_REFUSED_RESUME,
			 "resume of job '%s' refused: its ranks were already "
			 "declared lost (the resume window is over)",
			 c->nspace);
}

int conn_resume_admit(struct conn *c, uint32_t base, uint32_t count)
{
	struct conn *d = find_detached(c, base, count);

	if (d) {
		if (d->uid != c->uid)
			return refuse(c, d->uid, "the job belongs to");
		c->handoff = d;
		d->handoff = c; /* claimed: no second resume */
		conn_kick(c);
		return 1;
	}
	router_job_t *job = router_job_lookup(c->srv->router, c->nspace);
	if (!job) { /* a daemon restarted without a spool: a new job */
		c->resume_fresh = true;
		c->resumes = 1;
		return 0;
	}
	uint32_t owner, gid;
	router_job_owner(job, &owner, &gid);
	if (owner != c->uid)
		return refuse(c, owner, "the job belongs to");
	bool any = false, running = false;
	for (uint32_t i = 0; i < count; i++) {
		router_rank_t *rr = router_job_rank(job, base + i);
		struct router_stats st;
		if (!rr)
			continue;
		any = true;
		router_rank_stats(rr, &st);
		if (st.state == ROUTER_STATE_RUNNING)
			running = true;
	}
	if (!any) {
		c->resume_fresh = true;
		c->resumes = 1;
		return 0;
	}
	if (!running)
		return expired(c, job, base, count);
	/* Restored from the spool, waiting: taken back (conn_resume_take)
	 * unless a producer has them. */
	for (uint32_t i = 0; i < count; i++) {
		router_rank_t *rr = router_job_rank(job, base + i);
		struct router_stats st;
		if (!rr)
			continue;
		router_rank_stats(rr, &st);
		/* only ranks restored waiting (not PMIx ranks, which have no
		 * source ops either) */
		if (st.state == ROUTER_STATE_RUNNING &&
		    (router_rank_has_source(rr) ||
		     st.link != ROUTER_LINK_WAITING))
			return conn_fail(c, PROTO_REFUSED_EXISTS,
					 "resume of job '%s': rank %u is "
					 "connected elsewhere",
					 c->nspace, base + i);
	}
	return 2;
}

void conn_resume_take(struct conn *c, router_job_t *job)
{
	c->resumes = 1;
	for (uint32_t i = 0; i < c->rank_count; i++) {
		struct crank *cr = &c->ranks[i];
		router_rank_t *rr = router_job_rank(job, cr->rank);
		struct router_stats st;
		if (!rr)
			continue; /* RESERVED: the forwarder starts it again */
		router_rank_stats(rr, &st);
		cr->held[0] = st.stdout_bytes;
		cr->held[1] = st.stderr_bytes;
		cr->state = CRANK_DONE;
		if (st.state == ROUTER_STATE_RUNNING &&
		    router_rank_adopt_source(rr, &conn_source_ops, cr) ==
			ROUTER_SUCCESS) {
			cr->state = CRANK_RUNNING;
			cr->rr = rr;
			router_rank_set_link(rr, ROUTER_LINK_UP, c->resumes);
			/* its stdin is XOFFed by the adoption: XON once the
			 * forwarder's RESUME (or, handed over, its pipes) is
			 * here; nothing may precede the WELCOME */
			cr->stdin_want |= STDIN_SUSP_DETACHED;
			cr->stdin_xoff = true;
		}
	}
	srv_log(c->srv, LOG_INFO,
		"conn %llu (%s): job '%s' ranks %u..%u taken back from the "
		"spool",
		(unsigned long long)c->id, c->peer, c->nspace, c->rank_base,
		c->rank_base + c->rank_count - 1);
}

static void restored_cb(evutil_socket_t fd, short what, void *arg)
{
	net_server_t *s = arg;
	uint64_t n = 0;

	for (router_job_t *j = router_job_first(s->router); j;
	     j = router_job_next(j)) {
		for (size_t i = 0; i < router_job_rank_count(j); i++) {
			router_rank_t *rr = router_job_rank_at(j, i);
			struct router_stats st;
			router_rank_stats(rr, &st);
			if (st.state != ROUTER_STATE_RUNNING ||
			    router_rank_has_source(rr) ||
			    st.link != ROUTER_LINK_WAITING)
				continue;
			router_rank_exit(rr, ROUTER_STATE_LOST, -1);
			n++;
		}
	}
	if (n)
		srv_log(s, LOG_WARNING,
			"%llu ranks restored from the spool were not resumed "
			"within %u s: lost",
			(unsigned long long)n, conn_resume_window(s));
}

int conn_resume_arm_restored(net_server_t *s)
{
	struct timeval tv = {conn_resume_window(s), 0};

	if (!tv.tv_sec)
		return 0;
	s->restored_timer = evtimer_new(s->base, restored_cb, s);
	if (!s->restored_timer)
		return -ENOMEM;
	evtimer_add(s->restored_timer, &tv);
	return 0;
}

/* One HELD frame per rank: what this daemon holds of it. */
void conn_resume_held(struct conn *c)
{
	for (uint32_t i = 0; i < c->rank_count; i++) {
		const struct crank *cr = &c->ranks[i];
		struct proto_frame f = {.type = PROTO_HELD, .rank = cr->rank};
		f.held_state = cr->state == CRANK_RESERVED ? PROTO_HELD_RESERVED
			       : cr->state == CRANK_RUNNING && !cr->exit_queued
				   ? PROTO_HELD_RUNNING
				   : PROTO_HELD_EXITED;
		memcpy(f.held, cr->held, sizeof(f.held));
		conn_send(c, &f);
	}
}

/* @n (a new connection with a resume HELLO) gives its socket to the
 * detached connection it found; @n is freed. */
void conn_resume_handoff(struct conn *n)
{
	struct conn *d = n->handoff;

	n->handoff = NULL;
	d->handoff = NULL;
	if (conn_attach_socket(d, n) < 0) {
		conn_fail(n, PROTO_REFUSED_ROUTER, "out of memory");
		return;
	}
	n->dead = true;
	conn_kick(n);
	snprintf(d->peer, sizeof(d->peer), "%s", n->peer);
	d->pid = n->pid;
	d->version = n->version;
	d->hello_flags = n->hello_flags;
	d->is_unix = n->is_unix;
	d->detached = false;
	d->resumes++;
	evtimer_del(d->resume_timer);
	/* A new connection: its ACK counts from 0; what is still in the
	 * FIFO came before (the forwarder learns it from HELD). */
	d->acked_bytes = 0;
	d->exits_done = 0;
	for (struct dq_entry *e = d->dq_head; e; e = e->next)
		e->old = true;
	srv_log(d->srv, LOG_INFO,
		"conn %llu (%s): job '%s' ranks %u..%u resumed (resume %llu, "
		"by conn %llu)",
		(unsigned long long)d->id, d->peer, d->nspace, d->rank_base,
		d->rank_base + d->rank_count - 1,
		(unsigned long long)d->resumes, (unsigned long long)n->id);
	conn_resume_held(d);
	struct proto_frame w = {.type = PROTO_WELCOME,
				.version = d->version,
				.max_payload = PROTO_PAYLOAD_MAX};
	/* the hand-over again: RANK_START brings each rank's pipes */
	d->handover = d->handover && conn_pipe_offered(n); /* counted on d */
	if (d->handover)
		w.flags |= PROTO_WELCOME_F_HANDOVER;
	if (d->hello_flags & PROTO_HELLO_F_NAME) {
		w.flags |= PROTO_WELCOME_F_NAME;
		w.name = d->nspace;
		w.name_len = strlen(d->nspace);
	}
	conn_send(d, &w);
	for (uint32_t i = 0; i < d->rank_count; i++) {
		struct crank *cr = &d->ranks[i];
		if (cr->state != CRANK_RUNNING)
			continue;
		/* the latches still set: the forwarder cleared its own */
		for (uint32_t ch = ROUTER_CH_STDOUT; ch <= ROUTER_CH_STDDIAG;
		     ch <<= 1) {
			if (!(cr->out_latch & ch))
				continue;
			struct proto_frame x = {.type = PROTO_XOFF,
						.rank = cr->rank,
						.channel = ch};
			d->xoff_sent++;
			conn_send(d, &x);
		}
		cr->await_resume = true;
	}
	set_link(d, true);
	conn_kick(d);
}

static int send_kept(struct conn *c, struct crank *cr, uint64_t from)
{
	size_t have = cr->stdin_keep ? evbuffer_get_length(cr->stdin_keep) : 0;
	size_t skip = (size_t)(from - cr->stdin_acked);
	uint8_t *p = have ? evbuffer_pullup(cr->stdin_keep, -1) : NULL;

	if (have && !p)
		return conn_fail(c, PROTO_REFUSED_ROUTER, "out of memory");
	for (size_t off = skip; off < have;) {
		size_t n = have - off;
		if (n > PROTO_PAYLOAD_MAX)
			n = PROTO_PAYLOAD_MAX;
		struct proto_frame f = {.type = PROTO_STDIN,
					.rank = cr->rank,
					.data = p + off,
					.len = n};
		conn_send(c, &f);
		off += n;
	}
	if (have > skip)
		srv_log(c->srv, LOG_INFO,
			"conn %llu: rank %u: %zu stdin bytes sent again",
			(unsigned long long)c->id, cr->rank, have - skip);
	if (cr->stdin_eof_sent) {
		struct proto_frame f = {.type = PROTO_STDIN_EOF,
					.rank = cr->rank};
		conn_send(c, &f);
	}
	return 0;
}

int conn_resume_frame(struct conn *c, const struct proto_frame *f)
{
	struct crank *cr = &c->ranks[f->rank - c->rank_base];

	if (c->version < 4 || !(c->hello_flags & PROTO_HELLO_F_RESUME))
		return conn_fail(c, PROTO_ERR_ORDER,
				 "RESUME without a resume HELLO (version %u)",
				 c->version);
	/* the forwarder's word, for info: what it sends again */
	if (cr->state == CRANK_RUNNING)
		router_rank_count_replayed(cr->rr, f->replay_bytes);
	else
		cr->replay_pending += f->replay_bytes; /* after RANK_START */
	if (!cr->await_resume) {
		if (cr->state == CRANK_DONE)
			return 0; /* ended: its stdin is over */
		/* A job this daemon recreated or took back from the spool:
		 * the forwarder's counts are where its stdin starts here. */
		if (cr->stdin_sent || cr->stdin_acked)
			return conn_fail(c, PROTO_ERR_ORDER,
					 "RESUME for rank %u: not resumed",
					 f->rank);
		cr->stdin_sent = f->stdin_rx;
		cr->stdin_acked = f->ack_bytes;
		/* its info's stdin_bytes: what the rank took in all its life */
		router_rank_restore_history(cr->rr, f->ack_bytes, 0, 0);
		if (!c->handover) { /* handed over: at RANK_START */
			cr->stdin_want &= ~STDIN_SUSP_DETACHED;
			conn_kick(c);
		}
		return 0;
	}
	if (f->ack_bytes < cr->stdin_acked || f->stdin_rx > cr->stdin_sent)
		return conn_fail(c, PROTO_ERR_FIELD,
				 "RESUME rank %u: stdin %llu/%llu, daemon "
				 "sent %llu acked %llu",
				 f->rank, (unsigned long long)f->stdin_rx,
				 (unsigned long long)f->ack_bytes,
				 (unsigned long long)cr->stdin_sent,
				 (unsigned long long)cr->stdin_acked);
	cr->await_resume = false;
	conn_resume_acked(cr, f->ack_bytes);
	cr->stdin_acked = f->ack_bytes;
	if (f->stdin_eof)
		cr->stdin_eof_sent = false; /* it has it */
	int rc = send_kept(c, cr, f->stdin_rx);
	cr->stdin_want &= ~STDIN_SUSP_DETACHED;
	conn_kick(c);
	return rc;
}

int conn_resume_keep(struct crank *cr, const uint8_t *p, size_t len)
{
	if (!cr->stdin_keep && !(cr->stdin_keep = evbuffer_new()))
		return -ENOMEM;
	return evbuffer_add(cr->stdin_keep, p, len) == 0 ? 0 : -ENOMEM;
}

void conn_resume_acked(struct crank *cr, uint64_t acked)
{
	if (cr->stdin_keep && acked > cr->stdin_acked)
		evbuffer_drain(cr->stdin_keep, (size_t)(acked - cr->stdin_acked));
}

void conn_resume_release(struct crank *cr)
{
	if (cr->stdin_keep) {
		evbuffer_free(cr->stdin_keep);
		cr->stdin_keep = NULL;
	}
}
