/* SPDX-License-Identifier: MIT */
/*
 * The pipe hand-over (part of conn.c's module, see server_i.h;
 * docs/protocol.md, "Pipe hand-over").  A forwarder on this host passes
 * each rank's stdin write end and stdout/stderr read ends with its
 * RANK_START (SCM_RIGHTS); from then on the daemon reads the output pipes
 * on its own loop and delivers into the router exactly as DATA would (the
 * same FIFO, so an EXIT still comes after the last byte), stops reading a
 * pipe while its XOFF latch (or the connection's memory bound) holds, and
 * writes the rank's stdin into its pipe (a full pipe XOFFs the stdin, as
 * the forwarder's queue did).  The forwarder stays the ranks' parent and
 * reports their EXIT; an EXIT waits here until the rank's pipes reached
 * end of file.  When the forwarder's socket ends, the connection is
 * detached for a resume if ranks run (the pipes still read; the resumed
 * forwarder passes them again: conn_pipe_restart), else the pipes are
 * read to their end before the connection goes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "net/net_i.h"
#include "net/wire.h"
#include "net/server_i.h"

#define PIPE_GROWN	(256u << 10) /* a busy output pipe's size */
#define PIPE_GROWN_MAX	64	     /* pipes grown at a time (16 MiB) */
#define PIPE_READ_CHUNK PIPE_GROWN   /* one read() at most */
#define PIPE_READ_BURST 16	     /* reads per wake-up at most */
#define PIPE_STDIN_HIGH (64u << 10)  /* queued stdin: XOFF it */
#define PIPE_STDIN_LOW	(16u << 10)  /* ... XON */

struct conn_pipe {
	struct crank *cr;
	uint32_t channel; /* ROUTER_CH_STDOUT / STDERR */
	int fd;		  /* read end, -1 at end of file */
	int size;	  /* the pipe's capacity; 0: unknown, no growing */
	bool grown;	  /* counted in srv->pipes_grown: pipe_shrink() */
	struct event *ev;
	bool armed;
	bool plain; /* its stream takes no bytes from a pipe: read() it */
};

struct crank_pipes {
	struct conn_pipe out, err;
	int in_fd; /* stdin write end, -1 once closed */
	struct event *in_ev;
	struct evbuffer *in_q; /* stdin not yet in the pipe */
	bool in_eof;	       /* close once in_q is written */
	bool exit_held;
	int exit_status;
};

bool conn_pipe_offered(const struct conn *c)
{
	return c->is_unix && c->cred_ok &&
	       (c->hello_flags & PROTO_HELLO_F_HANDOVER);
}

bool conn_pipe_offer(struct conn *c)
{
	c->handover = conn_pipe_offered(c) && conn_admit_pipes(c);
	return c->handover;
}

/* Close @n descriptors a peer sent (wire_close_fd: not all are pipes). */
static void close_sent(const int *fds, int n)
{
	for (int i = 0; i < n; i++)
		wire_close_fd(fds[i]);
}

void conn_pipe_fds(void *ctx, const int *fds, int n)
{
	struct conn *c = ctx;

	if (!c->handover || c->closing) {
		close_sent(fds, n);
		if (!c->closing)
			conn_fail(c, PROTO_ERR_FIELD,
				  "descriptors without a hand-over");
		return;
	}
	/* Only pipes are ever queued, so every later close() is safe and
	 * nothing else is read or written (wire_close_fd says why). */
	for (int i = 0; i < n; i++) {
		if (wire_fd_is_pipe(fds[i]))
			continue;
		close_sent(fds, n);
		conn_fail(c, PROTO_ERR_FIELD,
			  "a descriptor it passed is not a pipe");
		return;
	}
	/* Three per RANK_START, consumed as it is decoded: more than its
	 * ranks' pipes queued is a flood of our descriptors. */
	if (c->fdq_len + (size_t)n > 3 * (size_t)c->rank_count) {
		close_sent(fds, n);
		conn_fail(c, PROTO_ERR_FIELD,
			  "more descriptors than the pipes of its %u ranks",
			  c->rank_count);
		return;
	}
	if (c->fdq && c->fdq_head + c->fdq_len + (size_t)n > c->fdq_cap) {
		memmove(c->fdq, c->fdq + c->fdq_head,
			c->fdq_len * sizeof(*c->fdq));
		c->fdq_head = 0;
	}
	if (c->fdq_len + (size_t)n > c->fdq_cap) {
		size_t cap = 2 * (c->fdq_len + (size_t)n);
		int *q = realloc(c->fdq, cap * sizeof(*q));
		if (!q) {
			close_sent(fds, n);
			conn_fail(c, PROTO_REFUSED_ROUTER, "out of memory");
			return;
		}
		c->fdq = q;
		c->fdq_cap = cap;
	}
	memcpy(c->fdq + c->fdq_head + c->fdq_len, fds, (size_t)n * sizeof(int));
	c->fdq_len += (size_t)n;
}

static int fdq_pop(struct conn *c)
{
	if (!c->fdq_len)
		return -1;
	c->fdq_len--;
	return c->fdq[c->fdq_head++];
}

static bool pipes_open(const struct crank_pipes *pp)
{
	return pp->out.fd >= 0 || pp->err.fd >= 0;
}

/* Every output pipe of @c at end of file? */
static bool conn_pipes_done(const struct conn *c)
{
	for (uint32_t i = 0; i < c->rank_count; i++)
		if (c->ranks[i].pp && pipes_open(c->ranks[i].pp))
			return false;
	return true;
}

static void pipe_arm(struct conn_pipe *p, bool want)
{
	want = want && p->fd >= 0;
	if (want == p->armed)
		return;
	p->armed = want;
	if (want)
		event_add(p->ev, NULL);
	else
		event_del(p->ev);
}

static bool conn_may_read(const struct conn *c)
{
	/* the memory bounds, not the socket's own output (CONN_SUSP_OUTBUF) */
	return !c->closing && !c->dead && !(c->susp & ~CONN_SUSP_OUTBUF);
}

static void rank_update(struct crank *cr)
{
	struct crank_pipes *pp = cr->pp;
	bool ok = conn_may_read(cr->c) && cr->state == CRANK_RUNNING;

	pipe_arm(&pp->out, ok && !(cr->out_latch & ROUTER_CH_STDOUT));
	pipe_arm(&pp->err, ok && !(cr->out_latch & ROUTER_CH_STDERR));
}

void conn_pipe_update(struct conn *c)
{
	if (!c->handover)
		return;
	for (uint32_t i = 0; i < c->rank_count; i++)
		if (c->ranks[i].pp)
			rank_update(&c->ranks[i]);
}

/* One pipe at end of file (or broken): COMPLETE, then a held EXIT. */
/* A read that emptied a full pipe: its producer outruns one pipe of
 * bytes per wake-up, so give it PIPE_GROWN (fewer reads, wake-ups and
 * context switches), while fewer than PIPE_GROWN_MAX pipes are grown.
 * The pages count against the ranks' owner's pipe-user-pages-soft (64
 * MiB by default); the bound keeps them well under it.  A refusal (the
 * owner over its limit, pipe-max-size) leaves the pipe as it is. */
static void pipe_grow(struct conn_pipe *p)
{
	net_server_t *s = p->cr->c->srv;
	int size;

	if (p->grown || s->pipes_grown >= PIPE_GROWN_MAX)
		return;
	size = fcntl(p->fd, F_SETPIPE_SZ, (int)PIPE_GROWN);
	p->size = 0; /* asked once */
	if (size < (int)PIPE_GROWN)
		return;
	p->size = size;
	p->grown = true;
	s->pipes_grown++;
}

/* Release pipe_grow()'s count.  Idempotent. */
static void pipe_shrink(struct conn_pipe *p)
{
	if (!p->grown)
		return;
	p->grown = false;
	p->cr->c->srv->pipes_grown--;
}

static void pipe_eof(struct conn_pipe *p)
{
	struct crank *cr = p->cr;
	struct conn *c = cr->c;
	uint32_t idx = (uint32_t)(cr - c->ranks);

	pipe_arm(p, false);
	pipe_shrink(p);
	close(p->fd);
	p->fd = -1;
	if (conn_deliver_piped(c, idx, p->channel, NULL, 0, true) < 0)
		return;
	if (pipes_open(cr->pp))
		return;
	if (cr->pp->exit_held) {
		cr->pp->exit_held = false;
		if (conn_dq_exit(c, idx, cr->pp->exit_status) < 0)
			return;
	}
	if (c->draining && conn_pipes_done(c)) {
		bool lost = false;
		for (uint32_t i = 0; i < c->rank_count; i++)
			lost |= c->ranks[i].state == CRANK_RUNNING &&
				!c->ranks[i].exit_queued;
		srv_log(c->srv, lost ? LOG_WARNING : LOG_INFO,
			"conn %llu (job %s): its ranks' pipes are drained%s",
			(unsigned long long)c->id, c->nspace,
			lost ? "; its running ranks are lost" : "");
		c->dead = true;
		conn_kick(c);
	}
}

/* One read at most: a grown pipe's size, and no more than the window (a
 * blocking reader's XOFF would be overshot by the difference). */
static size_t pipe_chunk(const struct conn *c)
{
	size_t w = router_window(c->srv->router);

	return w < PIPE_READ_CHUNK ? w : PIPE_READ_CHUNK;
}

/* One read of @p into @e (owned from here): the store takes the bytes out
 * of the pipe (exact after a kill -9), else read() as they are (its
 * stream has no store to splice into, or the disk is full: then they
 * wait in the stream for it, as on the socket path).  Returns the bytes
 * delivered, 0 when the pipe is empty, -EPIPE at its end, -1 when the
 * connection failed. */
static ssize_t pipe_read_one(struct conn *c, struct conn_pipe *p,
			     uint32_t idx, struct dq_entry *e)
{
	ssize_t n;

	if (!p->plain) {
		net_server_t *s = c->srv;
		size_t taken = 0;
		int rc;

		if (!s->pipe_buf && !(s->pipe_buf = malloc(PIPE_READ_CHUNK))) {
			free(e);
			conn_fail(c, PROTO_REFUSED_ROUTER, "out of memory");
			return -1;
		}
		rc = conn_deliver_spliced(c, idx, p->channel, e, s->pipe_buf,
					  pipe_chunk(c), p->fd, &taken);

		if (rc == ROUTER_SUCCESS)
			return (ssize_t)taken; /* e delivered */
		if (rc < 0)
			return -1;
		if (rc == ROUTER_AGAIN || rc == ROUTER_ERR_PIPE) {
			free(e);
			return rc == ROUTER_AGAIN ? 0 : -EPIPE;
		}
		if (rc == ROUTER_ERR_NOT_SUPPORTED)
			p->plain = true; /* no store to splice into, ever */
	}
	if (!(e = realloc(e, sizeof(*e) + PIPE_READ_CHUNK)))
		return -1;
	n = read(p->fd, e->bytes, pipe_chunk(c));
	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		free(e);
		return 0;
	}
	if (n <= 0) {
		free(e);
		return -EPIPE;
	}
	struct dq_entry *shrunk = realloc(e, sizeof(*e) + (size_t)n);
	if (shrunk)
		e = shrunk;
	return conn_deliver_piped(c, idx, p->channel, e, (size_t)n, false) < 0
		       ? -1
		       : n;
}

static void pipe_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn_pipe *p = arg;
	struct crank *cr = p->cr;
	struct conn *c = cr->c;
	uint32_t idx = (uint32_t)(cr - c->ranks);

	for (int i = 0; i < PIPE_READ_BURST && p->armed; i++) {
		/* read straight into the delivery entry: no copy */
		struct dq_entry *e = malloc(sizeof(*e));
		ssize_t n;

		if (!e) {
			conn_fail(c, PROTO_REFUSED_ROUTER, "out of memory");
			return;
		}
		memset(e, 0, sizeof(*e));
		n = pipe_read_one(c, p, idx, e);
		if (n == -EPIPE)
			pipe_eof(p);
		if (n <= 0)
			return;
		rank_update(cr); /* the FIFO may have passed its bound */
		if (p->size && !p->grown && n >= p->size &&
		    pipe_chunk(c) > (size_t)p->size) /* else reads stay small */
			pipe_grow(p);
		if ((size_t)n < pipe_chunk(c))
			return;
	}
}

static void stdin_close(struct crank *cr)
{
	struct crank_pipes *pp = cr->pp;

	size_t left = evbuffer_get_length(pp->in_q);

	if (pp->in_fd < 0)
		return;
	event_del(pp->in_ev);
	close(pp->in_fd);
	pp->in_fd = -1;
	if (left) { /* as the forwarder says it on the socket path */
		evbuffer_drain(pp->in_q, left);
		srv_log(cr->c->srv, LOG_INFO,
			"conn %llu (job %s): rank %u: discarded %zu bytes of "
			"stdin it did not read",
			(unsigned long long)cr->c->id, cr->c->nspace, cr->rank,
			left);
	}
	if (cr->stdin_want & STDIN_SUSP_PIPE) {
		cr->stdin_want &= ~STDIN_SUSP_PIPE;
		conn_kick(cr->c);
	}
}

/* The queue moved: XOFF the rank's stdin above the high mark, XON at the
 * low one (applied by conn_service(), outside router ops). */
static void stdin_flow(struct crank *cr)
{
	size_t q = evbuffer_get_length(cr->pp->in_q);
	bool xoff = cr->stdin_want & STDIN_SUSP_PIPE;

	if (!xoff && q > PIPE_STDIN_HIGH)
		cr->stdin_want |= STDIN_SUSP_PIPE;
	else if (xoff && q <= PIPE_STDIN_LOW)
		cr->stdin_want &= ~STDIN_SUSP_PIPE;
	else
		return;
	conn_kick(cr->c);
}

static void stdin_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct crank *cr = arg;
	struct crank_pipes *pp = cr->pp;

	if (wire_drain(pp->in_q, pp->in_fd) < 0) { /* EPIPE: stdin closed */
		stdin_close(cr);
		return;
	}
	stdin_flow(cr);
	if (evbuffer_get_length(pp->in_q) == 0) {
		event_del(pp->in_ev);
		if (pp->in_eof)
			stdin_close(cr);
	}
}

int conn_pipe_stdin(struct crank *cr, const uint8_t *p, size_t len)
{
	struct crank_pipes *pp = cr->pp;

	if (pp->in_fd < 0)
		return -EPIPE;
	if (evbuffer_get_length(pp->in_q) == 0) {
		/* nothing queued ahead: straight into the pipe (latency) */
		ssize_t w = write(pp->in_fd, p, len);
		if (w < 0 && errno == EPIPE) {
			stdin_close(cr);
			return -EPIPE;
		}
		if (w > 0) {
			p += w;
			len -= (size_t)w;
		}
	}
	if (len) {
		if (evbuffer_add(pp->in_q, p, len) < 0)
			return -ENOMEM;
		event_add(pp->in_ev, NULL);
	}
	stdin_flow(cr);
	return 0;
}

void conn_pipe_stdin_eof(struct crank *cr)
{
	cr->pp->in_eof = true;
	if (evbuffer_get_length(cr->pp->in_q) == 0)
		stdin_close(cr);
}

static int pipe_init(struct conn_pipe *p, struct crank *cr, uint32_t channel,
		     int fd)
{
	p->cr = cr;
	p->channel = channel;
	p->fd = fd;
	p->size = fcntl(fd, F_GETPIPE_SZ);
	if (p->size < 0)
		p->size = 0;
	if (p->size >= (int)PIPE_GROWN) { /* grown before a resume: count it */
		p->grown = true;
		cr->c->srv->pipes_grown++;
	}
	p->ev = event_new(cr->c->srv->base, fd, EV_READ | EV_PERSIST,
			  pipe_read_cb, p);
	return p->ev ? 0 : -ENOMEM;
}

static void rank_release(struct crank *cr)
{
	struct crank_pipes *pp = cr->pp;

	if (!pp)
		return;
	struct conn_pipe *ps[2] = {&pp->out, &pp->err};
	for (int i = 0; i < 2; i++) {
		pipe_shrink(ps[i]);
		if (ps[i]->ev)
			event_free(ps[i]->ev);
		if (ps[i]->fd >= 0)
			close(ps[i]->fd);
	}
	if (pp->in_ev)
		event_free(pp->in_ev);
	if (pp->in_fd >= 0)
		close(pp->in_fd);
	if (pp->in_q)
		evbuffer_free(pp->in_q);
	if (pp->exit_held) /* the forwarder did report it */
		conn_rank_finish(cr, ROUTER_STATE_EXITED, pp->exit_status);
	free(pp);
	cr->pp = NULL;
}

/* Is the pipe @fd (conn_pipe_fds() queues pipes only) open for @acc,
 * O_RDONLY or O_WRONLY?  F_GETFL asks the open file, no filesystem. */
static bool is_pipe_for(int fd, int acc)
{
	int fl = fcntl(fd, F_GETFL);

	return wire_fd_is_pipe(fd) && fl >= 0 &&
	       ((fl & O_ACCMODE) == acc || (fl & O_ACCMODE) == O_RDWR);
}

int conn_pipe_start(struct crank *cr)
{
	struct conn *c = cr->c;
	int fd[3];

	for (int i = 0; i < 3; i++)
		fd[i] = fdq_pop(c);
	if (fd[0] < 0 || fd[1] < 0 || fd[2] < 0) {
		for (int i = 0; i < 3; i++)
			if (fd[i] >= 0)
				close(fd[i]);
		return conn_fail(c, PROTO_ERR_FIELD,
				 "RANK_START %u without its three pipes",
				 cr->rank);
	}
	static const char *const what[3] = {"stdin", "stdout", "stderr"};
	for (int i = 0; i < 3; i++) {
		if (is_pipe_for(fd[i], i == 0 ? O_WRONLY : O_RDONLY))
			continue;
		for (int j = 0; j < 3; j++)
			close(fd[j]);
		return conn_fail(c, PROTO_ERR_FIELD,
				 "RANK_START %u: its %s pipe is not open for %s",
				 cr->rank, what[i], i == 0 ? "writing" : "reading");
	}
	cr->pp = calloc(1, sizeof(*cr->pp));
	if (!cr->pp)
		goto fail_close;
	struct crank_pipes *pp = cr->pp;
	pp->in_fd = fd[0];
	pp->out.fd = pp->err.fd = -1;
	for (int i = 0; i < 3; i++)
		fcntl(fd[i], F_SETFL, O_NONBLOCK); /* our open file: our ends */
	pp->in_q = evbuffer_new();
	pp->in_ev = event_new(c->srv->base, fd[0], EV_WRITE | EV_PERSIST,
			      stdin_write_cb, cr);
	if (pipe_init(&pp->out, cr, ROUTER_CH_STDOUT, fd[1]) < 0 ||
	    pipe_init(&pp->err, cr, ROUTER_CH_STDERR, fd[2]) < 0 ||
	    !pp->in_q || !pp->in_ev) {
		rank_release(cr);
		return conn_fail(c, PROTO_REFUSED_ROUTER, "out of memory");
	}
	rank_update(cr);
	return 0;

fail_close:
	for (int i = 0; i < 3; i++)
		close(fd[i]);
	return conn_fail(c, PROTO_REFUSED_ROUTER, "out of memory");
}

int conn_pipe_restart(struct crank *cr)
{
	if (!cr->pp)
		return conn_pipe_start(cr);
	for (int i = 0; i < 3; i++) { /* still ours: theirs are the same */
		int fd = fdq_pop(cr->c);
		if (fd < 0)
			return conn_fail(cr->c, PROTO_ERR_FIELD,
					 "RANK_START %u without its three pipes",
					 cr->rank);
		close(fd);
	}
	return 0;
}

void conn_pipe_detach(struct conn *c)
{
	/* the pipes stay ours and are still read (their bytes keep reaching
	 * the store, stdin already queued still goes in); the forwarder's
	 * RANK_START after the resume finds them here (conn_pipe_restart) */
	while (c->fdq_len)
		close(fdq_pop(c));
	conn_pipe_update(c);
}

bool conn_pipe_hold_exit(struct crank *cr, int status)
{
	if (!cr->pp || !pipes_open(cr->pp))
		return false;
	cr->pp->exit_held = true;
	cr->pp->exit_status = status;
	return true;
}

bool conn_pipe_drain(struct conn *c)
{
	if (!c->handover || c->closing || conn_pipes_done(c))
		return false;
	if (c->draining)
		return true;
	srv_log(c->srv, LOG_WARNING,
		"conn %llu (%s job %s): forwarder gone; reading its ranks' "
		"pipes to their end",
		(unsigned long long)c->id, c->peer, c->nspace);
	c->draining = true; /* conn_service() drops the socket */
	conn_reading(c, false);
	conn_kick(c);
	for (uint32_t i = 0; i < c->rank_count; i++)
		if (c->ranks[i].pp) {
			c->ranks[i].pp->in_eof = true;
			stdin_close(&c->ranks[i]); /* nobody feeds it now */
		}
	conn_pipe_update(c);
	return true;
}

void conn_pipe_release(struct conn *c)
{
	for (uint32_t i = 0; c->ranks && i < c->rank_count; i++)
		rank_release(&c->ranks[i]);
	while (c->fdq_len)
		close(fdq_pop(c));
	free(c->fdq);
	c->fdq = NULL;
	c->fdq_head = c->fdq_len = c->fdq_cap = 0;
}
