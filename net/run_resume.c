/* SPDX-License-Identifier: MIT */
/*
 * iofs-run: resume after a broken link (docs/protocol.md, "Resume").
 * While down, the ranks' output is kept in the replay queue (up to
 * --replay-buffer bytes; then the pipes are not read, so the ranks block
 * in write()), and we reconnect with a capped exponential back-off with
 * jitter.  A resume HELLO is answered with HELD per rank (what the daemon
 * holds of each stream), then WELCOME: we drop the prefix it holds, send
 * RESUME (our stdin counts), RANK_START/EXIT it lacks, and the rest of the
 * queue.  After --reconnect-timeout seconds, or when the daemon declines
 * with HELD (its own window is over), we fall back to our terminal: at the
 * exact point the daemon holds when it told us, else at its last ACK.
 * A hand-over link has no queue: our copies of the pipes stay unread while
 * down, and are passed again after RESUME (pass_pipes).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "log/clock.h"
#include "net/run_i.h"

void run_resume_queue_full(struct run_link *l)
{
	if (l->uq_bytes >= l->o->replay_max)
		run_kids_suspend_all(l->kids, RUN_SUSP_REPLAY, true);
}

static void schedule(struct run_link *l)
{
	uint32_t r = 0;
	unsigned ms;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
		r = (uint32_t)iofs_mono_ms();
	/* jitter: somewhere in [backoff/2, backoff] */
	ms = l->backoff_ms / 2 + r % (l->backoff_ms / 2 + 1);
	l->backoff_ms = l->backoff_ms * 2 > RUN_RECONNECT_MAX_MS
			    ? RUN_RECONNECT_MAX_MS
			    : l->backoff_ms * 2;
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	evtimer_add(l->retry_ev, &tv);
}

/*
 * Drop from the queue what the daemon holds (the last HELD of each rank),
 * count it, and count what it lacks before the queue (bytes it had
 * acknowledged but lost: a daemon restarted without a spool).
 */
static void trim_held(struct run_link *l)
{
	uint32_t nch = PROTO_HELD_CHANNELS;
	uint64_t *first = malloc(sizeof(*first) * l->o->count * nch);

	if (first) {
		for (uint32_t i = 0; i < l->o->count; i++)
			for (uint32_t c = 0; c < nch; c++)
				first[i * nch + c] = l->rs[i].produced[c];
		for (struct unacked *u = l->uq_head; u; u = u->next) {
			uint64_t *f =
			    &first[(u->rank - l->o->rank_base) * nch +
				   (uint32_t)proto_channel_index(u->channel)];
			if (u->off < *f)
				*f = u->off;
		}
		for (uint32_t i = 0; i < l->o->count * nch; i++) {
			uint64_t h = l->rs[i / nch].held[i % nch];
			if (h < first[i])
				l->lost_bytes += first[i] - h;
			else if (h > l->rs[i / nch].produced[i % nch] &&
				 !l->handover) /* we never saw those bytes */
				run_log(l->log, LOG_WARNING,
					"rank %u: the daemon holds %llu bytes, "
					"more than the %llu produced",
					l->o->rank_base + i / nch,
					(unsigned long long)h,
					(unsigned long long)l->rs[i / nch]
					    .produced[i % nch]);
		}
		free(first);
	}
	struct unacked **pp = &l->uq_head, *last = NULL;
	while (*pp) {
		struct unacked *u = *pp;
		struct rlrank *rs = &l->rs[u->rank - l->o->rank_base];
		uint64_t h = rs->held[proto_channel_index(u->channel)];
		if (u->off + u->len <= h) { /* it has all of it */
			*pp = u->next;
			l->uq_bytes -= u->len;
			l->dup_dropped += u->len;
			free(u);
			continue;
		}
		if (u->off < h) { /* part of it */
			size_t d = (size_t)(h - u->off);
			memmove(u->bytes, u->bytes + d, u->len - d);
			u->len -= d;
			u->off = h;
			l->uq_bytes -= d;
			l->dup_dropped += d;
		}
		last = u;
		pp = &u->next;
	}
	l->uq_tail = last;
}

/*
 * A handed-over rank: pass our copies of its pipes again (RANK_START after
 * RESUME); the daemon reads on where the lost one stopped, its HELD counts
 * are the offsets.  A closed stdin goes as the write end of a fresh pipe
 * with no reader (the daemon takes pipes only; its EOF is in the RESUME,
 * so nothing is written to it).  False when the link went down meanwhile.
 */
static bool pass_pipes(struct run_link *l, const struct proto_frame *s)
{
	int fds[3], spare[2] = {-1, -1};

	if (!run_kids_fds(l->kids, s->rank, fds))
		return true; /* its pipes reached their end: nothing to read */
	if (fds[0] < 0) {
		if (pipe2(spare, O_CLOEXEC) < 0) {
			run_link_fallback(l, "making a pipe for a closed stdin");
			return false;
		}
		close(spare[0]);
		fds[0] = spare[1];
	}
	bool ok = run_link_send_pipes(l, s, fds);
	if (spare[1] >= 0)
		close(spare[1]);
	return ok && l->linked;
}

void run_resume_replay(struct run_link *l)
{
	uint64_t dup0 = l->dup_dropped, lost0 = l->lost_bytes, n = 0;

	trim_held(l);
	/* A new connection: its ACK counts from 0. */
	l->sent_bytes = l->acked_bytes = 0;
	l->exits_sent = l->acked_exits = 0;
	uint64_t *again = calloc(l->o->count, sizeof(*again));
	for (struct unacked *u = l->uq_head; again && u; u = u->next)
		again[u->rank - l->o->rank_base] += u->len;
	for (uint32_t i = 0; i < l->o->count; i++) {
		struct rlrank *rs = &l->rs[i];
		uint32_t rank = l->o->rank_base + i;
		struct proto_frame f = {.type = PROTO_RESUME,
					.rank = rank,
					.stdin_rx = rs->stdin_rx,
					.ack_bytes = rs->stdin_done,
					.stdin_eof = rs->stdin_eof_rx,
					.replay_bytes = again ? again[i] : 0};
		run_link_send(l, &f);
		struct proto_frame s = {.type = PROTO_RANK_START,
					.rank = rank,
					.pid = (uint32_t)rs->pid};
		if (l->handover && rs->pid &&
		    rs->held_state != PROTO_HELD_EXITED) {
			if (!pass_pipes(l, &s))
				return;
		} else if (rs->held_state == PROTO_HELD_RESERVED && rs->pid)
			run_link_send(l, &s);
		if (rs->held_state != PROTO_HELD_EXITED && !rs->exited) {
			struct proto_frame x = {
			    .type = rs->stdin_xoff ? PROTO_XOFF : PROTO_XON,
			    .rank = rank,
			    .channel = ROUTER_CH_STDIN};
			run_link_send(l, &x);
		}
	}
	free(again);
	for (struct unacked *u = l->uq_head; u; u = u->next) {
		struct proto_frame f = {.type = PROTO_DATA,
					.rank = u->rank,
					.channel = u->channel,
					.data = u->bytes,
					.len = u->len};
		run_link_send(l, &f);
		l->sent_bytes += u->len;
		n += u->len;
	}
	for (uint32_t i = 0; i < l->o->count; i++) {
		struct rlrank *rs = &l->rs[i];
		if (rs->held_state == PROTO_HELD_EXITED || !rs->pid)
			continue;
		/* EOFs it may have missed (a second COMPLETE is harmless:
		 * nothing follows it) */
		for (uint32_t ch = ROUTER_CH_STDOUT; ch <= ROUTER_CH_STDDIAG;
		     ch <<= 1) {
			if (!(rs->completed & ch))
				continue;
			struct proto_frame c = {.type = PROTO_COMPLETE,
						.rank = l->o->rank_base + i,
						.channel = ch};
			run_link_send(l, &c);
		}
	}
	for (uint32_t i = 0; i < l->o->count; i++) {
		struct rlrank *rs = &l->rs[i];
		if (rs->exited && rs->held_state != PROTO_HELD_EXITED &&
		    (rs->pid || rs->held_state == PROTO_HELD_RUNNING))
			run_link_send_exit(l, l->o->rank_base + i, rs->wstatus);
	}
	l->replayed += n;
	run_log(l->log, LOG_WARNING,
		"resumed job '%s' on %s after %lld ms (resume %llu): %llu bytes "
		"sent again, %llu the daemon already had%s",
		l->o->nspace, l->o->addr, (long long)((int64_t)iofs_mono_ms() - l->down_ms),
		(unsigned long long)l->reconnects, (unsigned long long)n,
		(unsigned long long)(l->dup_dropped - dup0),
		l->lost_bytes > lost0 ? "" : "");
	if (l->lost_bytes > lost0)
		run_log(l->log, LOG_WARNING,
			"%llu acknowledged bytes are gone from the daemon (it "
			"restarted without a spool)",
			(unsigned long long)(l->lost_bytes - lost0));
	run_kids_suspend_all(l->kids, RUN_SUSP_REPLAY, false);
	if (l->uq_bytes > RUN_CREDIT_HIGH)
		run_kids_suspend_all(l->kids, RUN_SUSP_CREDIT, true);
	l->settled(l->settled_ctx);
}

/* Every rank got a HELD: the daemon said exactly what it holds. */
static bool all_held(const struct run_link *l)
{
	for (uint32_t i = 0; i < l->o->count; i++)
		if (!l->rs[i].got_held)
			return false;
	return true;
}

static void retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct run_link *l = arg;
	char why[PROTO_MSG_MAX + 128];
	int64_t left = l->down_ms + (int64_t)l->o->reconnect_s * 1000 -
		       (int64_t)iofs_mono_ms();
	uint32_t code;

	if (left <= 0) {
		snprintf(why, sizeof(why),
			 "%s: no resume within %u s (--reconnect-timeout)",
			 l->o->addr, l->o->reconnect_s);
		run_link_fallback(l, why);
		return;
	}
	int64_t dl = (int64_t)iofs_mono_ms() + (left < RUN_CONNECT_TIMEOUT_MS
				      ? left
				      : RUN_CONNECT_TIMEOUT_MS);
	bool was_handover = l->handover;
	int rc = run_link_greet(l, true, dl, &code, why, sizeof(why));
	if (rc >= 0) {
		l->fd = rc;
		l->linked = true;
		l->reconnecting = false;
		l->reconnects++;
		if (was_handover && !l->handover) {
			run_link_fallback(l, "the daemon no longer takes the "
					     "pipes (hand-over)");
			return;
		}
		if (run_link_start(l) == 0 && l->linked)
			run_resume_replay(l);
		return;
	}
	if (rc == -EREMOTEIO) {
		if (code == PROTO_REFUSED_RESUME && all_held(l)) {
			/* Exact hand-over: it keeps what it holds, we print
			 * the rest. */
			trim_held(l);
			run_log(l->log, LOG_WARNING,
				"hand-over: the daemon keeps what it holds, "
				"%llu bytes follow here",
				(unsigned long long)l->uq_bytes);
		}
		run_link_fallback(l, why);
		return;
	}
	run_log(l->log, LOG_INFO, "reconnect: %s", why);
	schedule(l);
}

bool run_resume_start(struct run_link *l, const char *why)
{
	if (l->version < 4 || !l->o->reconnect_s || l->gave_up || !l->rs)
		return false;
	if (!l->retry_ev &&
	    !(l->retry_ev = evtimer_new(l->base, retry_cb, l)))
		return false;
	run_log(l->log, LOG_WARNING,
		"%s; reconnecting for up to %u s (output kept, up to %zu "
		"bytes)",
		why, l->o->reconnect_s, l->o->replay_max);
	run_link_close(l);
	l->reconnecting = true;
	l->down_ms = (int64_t)iofs_mono_ms();
	l->backoff_ms = RUN_RECONNECT_MIN_MS;
	/* Nobody XONs us over a dead link: the daemon re-sends the latches
	 * still set after the resume.  Counted, so XOFF and XON pair. */
	uint64_t open = l->xoff_rx - l->xon_rx - l->xon_implicit;
	l->xon_implicit += open;
	run_kids_suspend_all(l->kids, RUN_SUSP_XOFF | RUN_SUSP_CREDIT, false);
	run_resume_queue_full(l);
	schedule(l);
	return true;
}

void run_resume_release(struct run_link *l)
{
	if (l->retry_ev) {
		event_free(l->retry_ev);
		l->retry_ev = NULL;
	}
	if (l->rs && (l->reconnects || l->dup_dropped || l->lost_bytes ||
		      l->handover_local))
		run_log(l->log, LOG_INFO,
			"resume: %llu reconnects, %llu bytes sent again, %llu "
			"duplicates dropped, %llu lost, %llu printed here at "
			"the hand-over",
			(unsigned long long)l->reconnects,
			(unsigned long long)l->replayed,
			(unsigned long long)l->dup_dropped,
			(unsigned long long)l->lost_bytes,
			(unsigned long long)l->handover_local);
	free(l->rs);
	l->rs = NULL;
}

/* ------------------------------------------------------------------------ */
/* Down: resume, or give up (run_i.h)                                        */

void run_link_down(struct run_link *l, const char *why)
{
	/* a link that handed the pipes over resumes too: our copies stay
	 * unread meanwhile (back-pressure), run_resume_replay passes them
	 * again */
	if (l->linked && run_resume_start(l, why))
		return; /* reconnecting */
	run_link_fallback(l, why);
}

void run_link_fallback(struct run_link *l, const char *why)
{
	bool was = l->linked || l->reconnecting;

	l->linked = false;
	l->reconnecting = false;
	l->gave_up = true;
	if (!l->warned) {
		l->warned = true;
		run_log(l->log, LOG_WARNING, "%s; %s", why,
			l->o->strict ? "giving up (--strict)"
				     : "output continues on iofs-run's own stdout and stderr");
	}
	if (l->o->strict && !l->failed_strict) {
		l->failed_strict = true;
		run_kids_signal(l->kids, SIGTERM);
	}
	/* Replay what the daemon has not acknowledged (after an exact
	 * hand-over, run_resume.c trimmed the queue to what it lacks). */
	uint64_t replayed = 0;
	for (struct unacked *u = l->uq_head; u; u = u->next) {
		run_local_write(u->channel, u->bytes, u->len);
		replayed += u->len;
	}
	l->handover_local += replayed;
	if (replayed)
		run_log(l->log, LOG_INFO, "replayed %llu unacknowledged bytes",
			(unsigned long long)replayed);
	run_link_release(l);
	if (!was)
		return;
	run_kids_unlinked(l->kids);
	l->settled(l->settled_ctx);
}
