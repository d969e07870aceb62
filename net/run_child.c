/* SPDX-License-Identifier: MIT */
/*
 * iofs-run: children, their pipes, and their stdin queues.
 *
 * Each child gets fresh pipes (pipe2(O_CLOEXEC)); only OUR ends are made
 * non-blocking, never the child's.  Output is read in RUN_READ_CHUNK reads
 * while no suspend reason (RUN_SUSP_*) is set: with the pipe unread the
 * kernel blocks the child's write(), which is the back-pressure.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "net/run_i.h"
#include "net/wire.h"

struct run_chan {
	struct child *ch;
	uint32_t channel; /* ROUTER_CH_STDOUT / STDERR */
	int fd;		  /* our read end, -1 once closed (or inherited) */
	struct event *ev;
	unsigned susp; /* RUN_SUSP_* */
	bool armed;    /* ev is added */
};

struct child {
	struct run_kids *k;
	uint32_t rank;
	pid_t pid;
	/* Linked: the rank leads a process group of its own, and signals go
	 * to the whole group (what it started too), as mpirun and srun do.
	 * Not in the fallback: a rank on our terminal stays in its
	 * foreground group (reading it must not stop the rank). */
	bool own_group;
	bool reaped;
	int wstatus;
	bool exit_sent;
	struct run_chan out, err;
	int in_fd; /* our write end of its stdin, -1 closed */
	struct event *in_ev;
	struct evbuffer *in_q; /* owned: STDIN bytes not yet written */
	bool in_eof;	       /* close once in_q is written */
	bool in_xoff;	       /* we sent XOFF(stdin) */
	uint64_t in_discarded; /* stdin bytes dropped (child gone) */
	uint64_t in_xoffs, in_xons;
	uint64_t in_recv;  /* STDIN bytes received for this rank */
	uint64_t in_acked; /* in_recv - queued, as last sent in STDIN_ACK */
};

void run_local_write(uint32_t channel, const uint8_t *buf, size_t len)
{
	int fd = channel == ROUTER_CH_STDERR ? 2 : 1;

	while (len > 0) {
		ssize_t n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return; /* our own stdout is gone: nothing left to do */
		buf += n;
		len -= (size_t)n;
	}
}

/* (Re)arm per its suspend bits. */
static void chan_update(struct run_chan *c)
{
	bool want = c->fd >= 0 && c->susp == 0;

	if (want == c->armed)
		return;
	if (want)
		event_add(c->ev, NULL);
	else
		event_del(c->ev);
	c->armed = want;
}

/* Disarm and close our end of @c's pipe (open). */
static void chan_shut(struct run_chan *c)
{
	if (c->armed)
		event_del(c->ev);
	c->armed = false;
	close(c->fd);
	c->fd = -1;
}

static void chan_close(struct run_chan *c)
{
	if (c->fd < 0)
		return;
	chan_shut(c);
	c->ch->k->ops->complete(c->ch->k->ops_ctx, c->ch->rank, c->channel);
}

/* Still to be read by us before the rank's EXIT (not handed over)? */
static bool chan_busy(const struct run_chan *c)
{
	return c->fd >= 0 && !(c->susp & RUN_SUSP_HANDOVER);
}

/* Our copy of a handed-over pipe: closed without a COMPLETE (the daemon
 * sends itself its own at the pipe's end).  Kept while a resume may have to
 * pass it again (a daemon restarted before the pipe's end): only when the
 * kids are released. */
static void chan_drop(struct run_chan *c)
{
	if (c->fd < 0 || !(c->susp & RUN_SUSP_HANDOVER) || c->ch->k->keep_copies)
		return;
	chan_shut(c);
}

static void child_check_done(struct child *ch);

static void chan_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct run_chan *c = arg;
	struct run_kids *k = c->ch->k;
	uint8_t *buf = k->scratch;
	ssize_t n = read(c->fd, buf, RUN_READ_CHUNK);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		chan_close(c);
		child_check_done(c->ch);
		return;
	}
	k->ops->data(k->ops_ctx, c->ch->rank, c->channel, buf, (size_t)n);
}

/* ------------------------------------------------------------------------ */
/* stdin                                                                     */

/* Tell the daemon how many stdin bytes left our queue (its credit). */
static void stdin_ack(struct child *ch)
{
	size_t q = ch->in_q ? evbuffer_get_length(ch->in_q) : 0;
	uint64_t done = ch->in_recv - q;

	if (done == ch->in_acked)
		return;
	ch->in_acked = done;
	ch->k->ops->stdin_ack(ch->k->ops_ctx, ch->rank, done);
}

/* Tell the link we hold its stdin back (@xoff) or take it again. */
static void stdin_xoff(struct child *ch, bool xoff)
{
	ch->in_xoff = xoff;
	if (xoff)
		ch->in_xoffs++;
	else
		ch->in_xons++;
	ch->k->ops->stdin_flow(ch->k->ops_ctx, ch->rank, xoff);
}

static void stdin_close(struct child *ch)
{
	size_t left = ch->in_q ? evbuffer_get_length(ch->in_q) : 0;

	if (left) {
		ch->in_discarded += left;
		evbuffer_drain(ch->in_q, left);
	}
	stdin_ack(ch);
	if (ch->in_xoff) /* every XOFF is released: the counters pair */
		stdin_xoff(ch, false);
	if (ch->in_fd >= 0) {
		event_del(ch->in_ev);
		close(ch->in_fd);
		ch->in_fd = -1;
	}
}

static void stdin_flow(struct child *ch)
{
	size_t q = evbuffer_get_length(ch->in_q);

	stdin_ack(ch);
	if (!ch->in_xoff && q > RUN_STDIN_HIGH)
		stdin_xoff(ch, true);
	else if (ch->in_xoff && q <= RUN_STDIN_LOW)
		stdin_xoff(ch, false);
}

static void stdin_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct child *ch = arg;

	if (wire_drain(ch->in_q, ch->in_fd) < 0) { /* EPIPE: stdin closed */
		stdin_close(ch);
		return;
	}
	stdin_flow(ch);
	if (evbuffer_get_length(ch->in_q) == 0) {
		event_del(ch->in_ev);
		if (ch->in_eof)
			stdin_close(ch);
	}
}

static void stdin_push(struct child *ch, const uint8_t *buf, size_t len)
{
	ch->in_recv += len;
	if (ch->in_fd < 0) {
		ch->in_discarded += len;
		stdin_ack(ch);
		return;
	}
	if (evbuffer_get_length(ch->in_q) == 0) {
		/* nothing queued ahead: straight into the pipe (latency) */
		ssize_t w = write(ch->in_fd, buf, len);
		if (w > 0) {
			buf += w;
			len -= (size_t)w;
		}
	}
	if (len) {
		evbuffer_add(ch->in_q, buf, len);
		event_add(ch->in_ev, NULL);
	}
	stdin_flow(ch);
}

static void stdin_eof(struct child *ch)
{
	ch->in_eof = true;
	if (ch->in_fd >= 0 && evbuffer_get_length(ch->in_q) == 0)
		stdin_close(ch);
}

/* ------------------------------------------------------------------------ */
/* Spawn, reap                                                               */

static void set_env_u32(const char *name, uint32_t v)
{
	char buf[16];
	snprintf(buf, sizeof(buf), "%u", v);
	setenv(name, buf, 1);
}

/* In the child, after fork: never returns. */
static void exec_child(struct run_kids *k, struct child *ch, const int in[2],
		       const int out[2], const int err[2])
{
	const struct run_opts *o = k->o;
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (k->nofile_raised) {
		struct rlimit rl;
		getrlimit(RLIMIT_NOFILE, &rl);
		rl.rlim_cur = k->nofile_soft;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	signal(SIGPIPE, SIG_DFL);
	if (o->no_stdin) {
		/* our end of its stdin pipe then has no reader: the daemon's
		 * write fails (EPIPE), and so do the stdin file's writers */
		int fd = open("/dev/null", O_RDONLY);
		if (fd < 0 || dup2(fd, 0) < 0)
			_exit(127);
		if (fd != 0)
			close(fd);
		if (in[0] >= 0)
			close(in[0]);
	} else if (in[0] >= 0 && dup2(in[0], 0) < 0) {
		_exit(127);
	}
	if (out[1] >= 0 && dup2(out[1], 1) < 0)
		_exit(127);
	if (err[1] >= 0 && dup2(err[1], 2) < 0)
		_exit(127);
	setenv("IOFS_NSPACE", o->nspace, 1);
	set_env_u32("IOFS_RANK", ch->rank);
	set_env_u32("IOFS_SIZE", o->size);
	execvp(o->argv[0], o->argv);
	/* on the rank's own stderr, as a shell would say it */
	run_log(k->log, LOG_ERR, "cannot execute %s: %s", o->argv[0],
		strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

static void close_pair(int p[2])
{
	for (int i = 0; i < 2; i++)
		if (p[i] >= 0)
			close(p[i]);
	p[0] = p[1] = -1;
}

static int child_spawn(struct run_kids *k, struct child *ch)
{
	int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
	bool linked = k->ops->linked(k->ops_ctx);
	int e;

	ch->k = k;
	ch->in_fd = ch->out.fd = ch->err.fd = -1;
	ch->out.ch = ch->err.ch = ch;
	ch->out.channel = ROUTER_CH_STDOUT;
	ch->err.channel = ROUTER_CH_STDERR;
	/* Without a daemon the child simply inherits our stdio. */
	if (linked) {
		if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) ||
		    pipe2(err, O_CLOEXEC))
			goto fail_pipes;
	}
	ch->pid = fork();
	if (ch->pid < 0)
		goto fail_pipes;
	if (ch->pid == 0) {
		if (linked)
			setpgid(0, 0);
		exec_child(k, ch, in, out, err);
	}
	if (!linked)
		return 0;
	setpgid(ch->pid, ch->pid); /* either of us: no race with a signal */
	ch->own_group = true;
	close(in[0]);
	close(out[1]);
	close(err[1]);
	ch->in_fd = in[1];
	ch->out.fd = out[0];
	ch->err.fd = err[0];
	fcntl(ch->in_fd, F_SETFL, O_NONBLOCK);
	fcntl(ch->out.fd, F_SETFL, O_NONBLOCK);
	fcntl(ch->err.fd, F_SETFL, O_NONBLOCK);
	ch->in_q = evbuffer_new();
	ch->in_ev = event_new(k->base, ch->in_fd, EV_WRITE | EV_PERSIST,
			      stdin_write_cb, ch);
	ch->out.ev = event_new(k->base, ch->out.fd, EV_READ | EV_PERSIST,
			       chan_read_cb, &ch->out);
	ch->err.ev = event_new(k->base, ch->err.fd, EV_READ | EV_PERSIST,
			       chan_read_cb, &ch->err);
	if (!ch->in_q || !ch->in_ev || !ch->out.ev || !ch->err.ev)
		return -ENOMEM; /* the caller kills and frees */
	int ours[3] = {ch->in_fd, ch->out.fd, ch->err.fd};
	if (k->ops->rank_start(k->ops_ctx, ch->rank, ch->pid, ours)) {
		/* The daemon reads them; we keep our copies for a fallback. */
		ch->out.susp |= RUN_SUSP_HANDOVER;
		ch->err.susp |= RUN_SUSP_HANDOVER;
	}
	chan_update(&ch->out);
	chan_update(&ch->err);
	return 0;

fail_pipes:
	e = errno;
	close_pair(in);
	close_pair(out);
	close_pair(err);
	run_log(k->log, LOG_ERR, "cannot start rank %u: %s", ch->rank,
		strerror(e));
	return -e;
}

/* Called on EOF/exit events: send COMPLETE/EXIT when a child is done. */
static void child_check_done(struct child *ch)
{
	struct run_kids *k = ch->k;

	if (!ch->reaped || ch->exit_sent || chan_busy(&ch->out) ||
	    chan_busy(&ch->err))
		return;
	ch->exit_sent = true;
	chan_drop(&ch->out); /* handed over: the daemon reads to the end */
	chan_drop(&ch->err);
	ch->in_eof = true;
	stdin_close(ch); /* XON before EXIT if we had XOFFed stdin */
	if (ch->in_discarded)
		run_log(k->log, LOG_INFO,
			"rank %u: discarded %llu bytes of stdin it did not "
			"read",
			ch->rank, (unsigned long long)ch->in_discarded);
	int code = WIFSIGNALED(ch->wstatus) ? 128 + WTERMSIG(ch->wstatus)
					    : WEXITSTATUS(ch->wstatus);
	if (code && !k->have_code) {
		k->have_code = true;
		k->exit_code = code;
	}
	k->exited++;
	k->ops->exit(k->ops_ctx, ch->rank, ch->wstatus); /* the last: finish */
}

void run_kids_reap(struct run_kids *k)
{
	for (;;) {
		int st;
		pid_t pid = waitpid(-1, &st, WNOHANG);
		if (pid <= 0)
			return;
		for (uint32_t i = 0; k->kids && i < k->o->count; i++) {
			struct child *ch = &k->kids[i];
			if (ch->pid == pid && !ch->reaped) {
				ch->reaped = true;
				ch->wstatus = st;
				child_check_done(ch);
				break;
			}
		}
	}
}

void run_kids_release(struct run_kids *k)
{
	free(k->scratch);
	k->scratch = NULL;
	if (!k->kids)
		return;
	for (uint32_t i = 0; i < k->o->count; i++) {
		struct child *ch = &k->kids[i];
		if (ch->out.fd >= 0)
			close(ch->out.fd);
		if (ch->err.fd >= 0)
			close(ch->err.fd);
		if (ch->in_fd >= 0)
			close(ch->in_fd);
		if (ch->out.ev)
			event_free(ch->out.ev);
		if (ch->err.ev)
			event_free(ch->err.ev);
		if (ch->in_ev)
			event_free(ch->in_ev);
		if (ch->in_q)
			evbuffer_free(ch->in_q);
	}
	free(k->kids);
	k->kids = NULL;
}

/* ------------------------------------------------------------------------ */
/* The link's and run.c's calls                                              */

/* Three pipes per rank: -n 1000 needs more than the usual 1024 fds. */
static void raise_nofile(struct run_kids *k)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	k->nofile_soft = rl.rlim_cur; /* the ranks get this one back */
	k->nofile_raised = rl.rlim_cur < rl.rlim_max;
	if (k->nofile_raised) {
		rl.rlim_cur = rl.rlim_max;
		k->nofile_raised = setrlimit(RLIMIT_NOFILE, &rl) == 0;
	}
}

int run_kids_init(struct run_kids *k, struct event_base *base,
		  const struct run_opts *o, iofs_log_t *log,
		  const struct run_kids_ops *ops, void *ops_ctx)
{
	*k = (struct run_kids){
	    .base = base, .o = o, .log = log, .ops = ops, .ops_ctx = ops_ctx};
	k->keep_copies = o->handover && o->reconnect_s > 0;
	raise_nofile(k);
	k->scratch = malloc(RUN_READ_CHUNK);
	k->kids = calloc(o->count, sizeof(*k->kids));
	if (!k->scratch || !k->kids) {
		run_kids_release(k);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < o->count; i++) {
		struct child *ch = &k->kids[i];
		ch->k = k;
		ch->rank = o->rank_base + i;
		ch->in_fd = ch->out.fd = ch->err.fd = -1;
	}
	return 0;
}

void run_kids_spawn(struct run_kids *k)
{
	for (uint32_t i = 0; i < k->o->count; i++) {
		struct child *ch = &k->kids[i];
		if (child_spawn(k, ch) < 0) {
			/* Counted as exited with 127; the others still run. */
			if (ch->pid > 0)
				kill(ch->pid, SIGKILL);
			ch->pid = -1;
			ch->reaped = ch->exit_sent = true;
			k->exited++;
			if (!k->have_code) {
				k->have_code = true;
				k->exit_code = 127;
			}
		}
	}
}

void run_kids_signal(struct run_kids *k, int sig)
{
	for (uint32_t i = 0; k->kids && i < k->o->count; i++)
		if (k->kids[i].pid > 0 && !k->kids[i].reaped)
			kill(k->kids[i].own_group ? -k->kids[i].pid
						  : k->kids[i].pid,
			     sig);
}

bool run_kids_done(const struct run_kids *k)
{
	return k->kids && k->exited >= k->o->count;
}

static struct child *kid(struct run_kids *k, uint32_t rank)
{
	return &k->kids[rank - k->o->rank_base]; /* the decoder checked it */
}

static void chan_suspend(struct run_chan *c, unsigned bit, bool on)
{
	unsigned old = c->susp;

	if (on)
		c->susp |= bit;
	else
		c->susp &= ~bit;
	if (old != c->susp)
		chan_update(c);
}

void run_kids_suspend(struct run_kids *k, uint32_t rank, uint32_t channel,
		      unsigned bit, bool on)
{
	struct child *ch = kid(k, rank);

	chan_suspend(channel == ROUTER_CH_STDERR ? &ch->err : &ch->out, bit,
		     on);
}

void run_kids_suspend_all(struct run_kids *k, unsigned bit, bool on)
{
	for (uint32_t i = 0; k->kids && i < k->o->count; i++) {
		chan_suspend(&k->kids[i].out, bit, on);
		chan_suspend(&k->kids[i].err, bit, on);
	}
}

void run_kids_stdin_push(struct run_kids *k, uint32_t rank, const uint8_t *buf,
			 size_t len)
{
	stdin_push(kid(k, rank), buf, len);
}

void run_kids_stdin_eof(struct run_kids *k, uint32_t rank)
{
	stdin_eof(kid(k, rank));
}

bool run_kids_fds(struct run_kids *k, uint32_t rank, int fds[3])
{
	struct child *ch = kid(k, rank);

	if (ch->out.fd < 0 || ch->err.fd < 0 ||
	    !(ch->out.susp & RUN_SUSP_HANDOVER))
		return false;
	fds[0] = ch->in_fd;
	fds[1] = ch->out.fd;
	fds[2] = ch->err.fd;
	return true;
}

void run_kids_unlinked(struct run_kids *k)
{
	/* handed-over pipes too: what the daemon did not read is ours */
	run_kids_suspend_all(k,
			     RUN_SUSP_XOFF | RUN_SUSP_CREDIT | RUN_SUSP_HANDOVER,
			     false);
	for (uint32_t i = 0; k->kids && i < k->o->count; i++)
		stdin_eof(&k->kids[i]);
}
