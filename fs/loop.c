/* SPDX-License-Identifier: MIT */
/* The daemon's event loop with its adaptive poll (see loop.h). */
#include "fs/loop.h"
#include "log/clock.h"

#include <event2/event.h>
#include <sched.h>
#include <time.h>

void loop_poll_init(struct loop_poll *lp, uint32_t max_us, long ncpus)
{
	lp->max_ns = ncpus >= 2 ? (uint64_t)max_us * 1000u : 0;
	lp->window_ns = 0;
}

void loop_poll_adapt(struct loop_poll *lp, uint64_t slept_ns)
{
	uint64_t w = lp->window_ns;

	if (!lp->max_ns)
		return;
	if (slept_ns <= lp->max_ns) { /* a longer poll would have won */
		w = w < LOOP_POLL_START_NS ? LOOP_POLL_START_NS : 2 * w;
		if (w > lp->max_ns)
			w = lp->max_ns;
	} else {
		w /= 2;
		if (w < LOOP_POLL_START_NS)
			w = 0;
	}
	lp->window_ns = w;
}

bool loop_talking(const struct loop_poll *lp, const struct fs_activity *act,
		  uint64_t now)
{
	return lp->max_ns && act->stdin_ns && now >= act->stdin_ns &&
	       now - act->stdin_ns < LOOP_TALK_NS;
}

long loop_cpus(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return 1;
	int n = CPU_COUNT(&set);
	return n > 0 ? n : 1;
}

/* Poll for work until a window passes with no FUSE request or the talk
 * ends (busy output alone must not keep it polling): 0 to go on, 1 when
 * the loop was told to exit, -1 on a libevent failure. */
static int poll_window(struct event_base *base, const struct fs_activity *act,
		       const struct loop_poll *lp)
{
	uint64_t now = iofs_mono_ns(), start = now, seen = act->requests;

	while (now - start < lp->window_ns && loop_talking(lp, act, now)) {
		if (event_base_loop(base, EVLOOP_NONBLOCK) < 0)
			return -1;
		if (event_base_got_exit(base) || event_base_got_break(base))
			return 1;
		now = iofs_mono_ns();
		if (act->requests != seen) { /* work came: the window restarts */
			seen = act->requests;
			start = now;
		} else {
			sched_yield(); /* a rank on this CPU goes first */
		}
	}
	return 0;
}

int loop_run(struct event_base *base, const struct fs_activity *act,
	     struct loop_poll *lp)
{
	for (;;) {
		bool talk = loop_talking(lp, act, iofs_mono_ns());

		if (talk && lp->window_ns) {
			int rc = poll_window(base, act, lp);
			if (rc)
				return rc < 0 ? -1 : 0;
		}
		uint64_t before = iofs_mono_ns();
		int rc = event_base_loop(base, EVLOOP_ONCE);
		if (rc < 0)
			return -1;
		if (rc == 1 || event_base_got_exit(base) ||
		    event_base_got_break(base))
			return 0;
		if (talk)
			loop_poll_adapt(lp, iofs_mono_ns() - before);
	}
}
