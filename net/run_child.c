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

void local_write(uint32_t channel, const uint8_t *buf, size_t len)
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

void chan_update(struct run_chan *c)
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

static void chan_close(struct run_chan *c)
{
	if (c->fd < 0)
		return;
	if (c->armed)
		event_del(c->ev);
	c->armed = false;
	close(c->fd);
	c->fd = -1;
	link_send_complete(c->ch->run, c->ch, c->channel);
}

static void chan_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct run_chan *c = arg;
	struct run *r = c->ch->run;
	uint8_t *buf = r->scratch;
	ssize_t n = read(c->fd, buf, RUN_READ_CHUNK);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		chan_close(c);
		child_check_done(c->ch);
		return;
	}
	link_send_data(r, c->ch, c->channel, buf, (size_t)n);
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
	link_send_stdin_ack(ch->run, ch, done);
}

static void stdin_close(struct child *ch)
{
	struct run *r = ch->run;
	size_t left = ch->in_q ? evbuffer_get_length(ch->in_q) : 0;

	if (left) {
		ch->in_discarded += left;
		evbuffer_drain(ch->in_q, left);
	}
	stdin_ack(ch);
	if (ch->in_xoff) { /* every XOFF is released: the counters pair */
		ch->in_xoff = false;
		ch->in_xons++;
		link_send_flow(r, ch, false);
	}
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
	if (!ch->in_xoff && q > RUN_STDIN_HIGH) {
		ch->in_xoff = true;
		ch->in_xoffs++;
		link_send_flow(ch->run, ch, true);
	} else if (ch->in_xoff && q <= RUN_STDIN_LOW) {
		ch->in_xoff = false;
		ch->in_xons++;
		link_send_flow(ch->run, ch, false);
	}
}

static void stdin_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct child *ch = arg;

	while (evbuffer_get_length(ch->in_q) > 0) {
		int n = evbuffer_write(ch->in_q, ch->in_fd);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) { /* EPIPE: the child closed its stdin */
			stdin_close(ch);
			return;
		}
	}
	stdin_flow(ch);
	if (evbuffer_get_length(ch->in_q) == 0) {
		event_del(ch->in_ev);
		if (ch->in_eof)
			stdin_close(ch);
	}
}

void child_stdin_push(struct child *ch, const uint8_t *buf, size_t len)
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

void child_stdin_eof(struct child *ch)
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
static void exec_child(struct run *r, struct child *ch, const int in[2],
		       const int out[2], const int err[2])
{
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (r->nofile_raised) {
		struct rlimit rl;
		getrlimit(RLIMIT_NOFILE, &rl);
		rl.rlim_cur = r->nofile_soft;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	signal(SIGPIPE, SIG_DFL);
	if (in[0] >= 0 && dup2(in[0], 0) < 0)
		_exit(127);
	if (out[1] >= 0 && dup2(out[1], 1) < 0)
		_exit(127);
	if (err[1] >= 0 && dup2(err[1], 2) < 0)
		_exit(127);
	setenv("IOFS_NSPACE", r->nspace, 1);
	set_env_u32("IOFS_RANK", ch->rank);
	set_env_u32("IOFS_SIZE", r->size);
	execvp(r->argv[0], r->argv);
	/* on the rank's own stderr, as a shell would say it */
	run_log(r, LOG_ERR, "cannot execute %s: %s", r->argv[0],
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

int child_spawn(struct run *r, struct child *ch)
{
	int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
	int e;

	ch->run = r;
	ch->in_fd = ch->out.fd = ch->err.fd = -1;
	ch->out.ch = ch->err.ch = ch;
	ch->out.channel = ROUTER_CH_STDOUT;
	ch->err.channel = ROUTER_CH_STDERR;
	/* Without a daemon the child simply inherits our stdio. */
	if (r->linked) {
		if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) ||
		    pipe2(err, O_CLOEXEC))
			goto fail_pipes;
	}
	ch->pid = fork();
	if (ch->pid < 0)
		goto fail_pipes;
	if (ch->pid == 0)
		exec_child(r, ch, in, out, err);
	if (!r->linked)
		return 0;
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
	ch->in_ev = event_new(r->base, ch->in_fd, EV_WRITE | EV_PERSIST,
			      stdin_write_cb, ch);
	ch->out.ev = event_new(r->base, ch->out.fd, EV_READ | EV_PERSIST,
			       chan_read_cb, &ch->out);
	ch->err.ev = event_new(r->base, ch->err.fd, EV_READ | EV_PERSIST,
			       chan_read_cb, &ch->err);
	if (!ch->in_q || !ch->in_ev || !ch->out.ev || !ch->err.ev)
		return -ENOMEM; /* the caller kills and frees */
	link_send_rank_start(r, ch);
	chan_update(&ch->out);
	chan_update(&ch->err);
	return 0;

fail_pipes:
	e = errno;
	close_pair(in);
	close_pair(out);
	close_pair(err);
	run_log(r, LOG_ERR, "cannot start rank %u: %s", ch->rank, strerror(e));
	return -e;
}

void child_check_done(struct child *ch)
{
	struct run *r = ch->run;

	if (!ch->reaped || ch->exit_sent || ch->out.fd >= 0 || ch->err.fd >= 0)
		return;
	ch->exit_sent = true;
	ch->in_eof = true;
	stdin_close(ch); /* XON before EXIT if we had XOFFed stdin */
	if (ch->in_discarded)
		run_log(r, LOG_INFO,
			"rank %u: discarded %llu bytes of stdin it did not "
			"read",
			ch->rank, (unsigned long long)ch->in_discarded);
	link_send_exit(r, ch);
	int code = WIFSIGNALED(ch->wstatus) ? 128 + WTERMSIG(ch->wstatus)
					    : WEXITSTATUS(ch->wstatus);
	if (code && !r->have_code) {
		r->have_code = true;
		r->exit_code = code;
	}
	r->exited++;
	run_check_finish(r);
}

void children_reap(struct run *r)
{
	for (;;) {
		int st;
		pid_t pid = waitpid(-1, &st, WNOHANG);
		if (pid <= 0)
			return;
		for (uint32_t i = 0; i < r->count; i++) {
			struct child *ch = &r->kids[i];
			if (ch->pid == pid && !ch->reaped) {
				ch->reaped = true;
				ch->wstatus = st;
				child_check_done(ch);
				break;
			}
		}
	}
}

void children_free(struct run *r)
{
	if (!r->kids)
		return;
	for (uint32_t i = 0; i < r->count; i++) {
		struct child *ch = &r->kids[i];
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
	free(r->kids);
	r->kids = NULL;
}
