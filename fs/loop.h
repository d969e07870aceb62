/* SPDX-License-Identifier: MIT */
/*
 * The daemon's event loop: libevent's, plus a short adaptive poll before
 * it sleeps while someone is talking to a rank.
 *
 * Why: on a round trip (a driver writes a rank's stdin file, then reads
 * its stdout) the daemon wakes two or three times, and each wake-up of a
 * sleeping CPU costs tens of microseconds on a VM, more than the work.
 * For up to poll_us after its last FUSE request the loop keeps looking for
 * work (epoll with no timeout, sched_yield() between looks) instead of
 * sleeping, so the rank's answer and the driver's next request find it
 * awake.  It does that only while a stdin file was written in the last
 * LOOP_TALK_NS (output alone, however busy, never polls), and the window
 * adapts like the kernel's halt polling: it grows when a sleep turned out
 * short and shrinks to nothing when sleeps are long, so a rank that
 * answers slowly costs no CPU.  Never on one CPU.  docs/performance.md
 * ("Polling before sleeping") has the figures.
 *
 * Loop thread only.
 */
#ifndef IOFS_FS_LOOP_H
#define IOFS_FS_LOOP_H

#include <stdbool.h>
#include <stdint.h>

#include "fs/fs.h"

struct event_base;

/* A stdin write keeps polling allowed this long. */
#define LOOP_TALK_NS (10 * 1000 * 1000ull)
/* The first window after a short sleep; windows below it become 0. */
#define LOOP_POLL_START_NS (10 * 1000ull)
/* -o poll_us= default and ceiling */
#define LOOP_POLL_DEFAULT_US 100
#define LOOP_POLL_MAX_US 1000

struct loop_poll {
	uint64_t max_ns;    /* 0: never poll */
	uint64_t window_ns; /* the current window, 0..max_ns */
};

/* @max_us (0 = off) on a machine with @ncpus CPUs usable: off below 2. */
void loop_poll_init(struct loop_poll *lp, uint32_t max_us, long ncpus);

/* After a poll of the current window, the loop slept @slept_ns before
 * work came: grow the window (doubling, up to the ceiling) if the longest
 * poll would have caught it, halve it (then 0) if not. */
void loop_poll_adapt(struct loop_poll *lp, uint64_t slept_ns);

/* Poll before sleeping now (@now_ns, CLOCK_MONOTONIC)?  Only with a window,
 * and while a stdin write is less than LOOP_TALK_NS old. */
bool loop_talking(const struct loop_poll *lp, const struct fs_activity *act,
		  uint64_t now_ns);

/* The CPUs this process may run on (sched_getaffinity), at least 1. */
long loop_cpus(void);

/*
 * Run @base until event_base_loopexit()/loopbreak() or until no events are
 * left, polling as above on @act (fs_activity(), borrowed).  0, or -1 when
 * libevent failed.
 */
int loop_run(struct event_base *base, const struct fs_activity *act,
	     struct loop_poll *lp);

#endif /* IOFS_FS_LOOP_H */
