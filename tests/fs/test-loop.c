/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the daemon's loop (fs/loop.c): the poll window's policy
 * (grows on short sleeps, halves to nothing on long ones, never on one
 * CPU, only while a stdin file is written), and loop_run() on a real
 * libevent base: it stops polling once the talk is over, however busy the
 * output (measured in CPU time: a loop that kept polling would burn the
 * whole interval) and it
 * leaves at once when told to exit while polling.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>
#include <event2/event.h>

#include "fs/loop.h"

#define US 1000ull
#define MS (1000ull * US)

static uint64_t mono_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void window_grows_on_short_sleeps(void **state)
{
	struct loop_poll lp;
	const uint64_t want[] = {10 * US, 20 * US, 40 * US, 80 * US, 100 * US,
				 100 * US};

	(void)state;
	loop_poll_init(&lp, 100, 2);
	assert_int_equal(lp.max_ns, 100 * US);
	assert_int_equal(lp.window_ns, 0);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		loop_poll_adapt(&lp, 5 * US);
		assert_int_equal(lp.window_ns, want[i]);
	}
}

static void window_shrinks_on_long_sleeps(void **state)
{
	struct loop_poll lp;

	(void)state;
	loop_poll_init(&lp, 100, 8);
	lp.window_ns = 100 * US;
	loop_poll_adapt(&lp, 1 * MS);
	assert_int_equal(lp.window_ns, 50 * US);
	loop_poll_adapt(&lp, 1 * MS);
	assert_int_equal(lp.window_ns, 25 * US);
	loop_poll_adapt(&lp, 1 * MS);
	assert_int_equal(lp.window_ns, 12500);
	loop_poll_adapt(&lp, 1 * MS);
	assert_int_equal(lp.window_ns, 0);
	/* a sleep a longer window would have caught: grow */
	lp.window_ns = 40 * US;
	loop_poll_adapt(&lp, 50 * US);
	assert_int_equal(lp.window_ns, 80 * US);
	/* ... one even the longest would not have: shrink */
	loop_poll_adapt(&lp, 101 * US);
	assert_int_equal(lp.window_ns, 40 * US);
}

static void never_on_one_cpu_or_when_off(void **state)
{
	struct loop_poll lp;
	struct fs_activity act = {.requests = 1, .stdin_ns = 1 * MS};

	(void)state;
	loop_poll_init(&lp, 100, 1);
	loop_poll_adapt(&lp, 1 * US);
	assert_int_equal(lp.window_ns, 0);
	assert_false(loop_talking(&lp, &act, 2 * MS));
	loop_poll_init(&lp, 0, 4);
	loop_poll_adapt(&lp, 1 * US);
	assert_int_equal(lp.window_ns, 0);
	assert_false(loop_talking(&lp, &act, 2 * MS));
}

static void talking_only_after_a_stdin_write(void **state)
{
	struct loop_poll lp;
	struct fs_activity act = {.requests = 100, .stdin_ns = 0};
	uint64_t t = 50 * MS;

	(void)state;
	loop_poll_init(&lp, 100, 2);
	assert_false(loop_talking(&lp, &act, t)); /* output alone */
	act.stdin_ns = t - 5 * MS;
	assert_true(loop_talking(&lp, &act, t));
	act.stdin_ns = t - LOOP_TALK_NS;
	assert_false(loop_talking(&lp, &act, t));
	act.stdin_ns = t + 1; /* not in the future either */
	assert_false(loop_talking(&lp, &act, t));
}

struct tick {
	struct event_base *base;
	struct event *ev;
	struct fs_activity *act;
	uint64_t end_ns;
	unsigned n;
};

/* A "FUSE request" every 200 us until end_ns, the first 50 with a stdin
 * write (a talk of a few ms), the rest output alone; then the loop is
 * told to exit. */
static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tick *t = arg;
	uint64_t now = mono_ns(CLOCK_MONOTONIC);
	struct timeval tv = {0, 200};

	(void)fd;
	(void)what;
	t->act->requests++;
	if (t->n++ < 50)
		t->act->stdin_ns = now; /* a 1 ms talk, then output alone */
	if (now >= t->end_ns) {
		event_base_loopexit(t->base, NULL);
		return;
	}
	evtimer_add(t->ev, &tv);
}

static void polling_stops_when_the_talk_ends(void **state)
{
	struct fs_activity act = {0};
	struct loop_poll lp;
	struct event_config *cfg = event_config_new();
	/* timerfd: epoll's own timeout has whole milliseconds */
	event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
	struct event_base *base = event_base_new_with_config(cfg);
	struct tick t = {.base = base, .act = &act};

	(void)state;
	assert_non_null(base);
	t.ev = evtimer_new(base, tick_cb, &t);
	loop_poll_init(&lp, LOOP_POLL_MAX_US, 2);
	t.end_ns = mono_ns(CLOCK_MONOTONIC) + 400 * MS;
	uint64_t cpu0 = mono_ns(CLOCK_PROCESS_CPUTIME_ID);
	uint64_t wall0 = mono_ns(CLOCK_MONOTONIC);
	tick_cb(-1, 0, &t);
	assert_int_equal(loop_run(base, &act, &lp), 0);
	uint64_t cpu = mono_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
	uint64_t wall = mono_ns(CLOCK_MONOTONIC) - wall0;
	print_message("talk then output alone: %u requests, %.1f ms CPU in "
		      "%.1f ms\n",
		      t.n, cpu / 1e6, wall / 1e6);
	assert_true(wall >= 400 * MS);
	/* it polled during the talk (10 ms at most after its end), then slept
	 * between requests: a loop that polled on output alone would have
	 * used the whole 400 ms (its window grows: every sleep is short) */
	assert_true(cpu < 6 * wall / 10);
	evtimer_del(t.ev);
	event_free(t.ev);
	event_base_free(base);
	event_config_free(cfg);
}

static void exit_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	event_base_loopexit(arg, NULL);
}

static void exit_while_polling(void **state)
{
	struct fs_activity act = {0};
	struct loop_poll lp;
	struct event_base *base = event_base_new();
	struct timeval tv = {0, 30000};

	(void)state;
	loop_poll_init(&lp, LOOP_POLL_MAX_US, 2);
	lp.window_ns = lp.max_ns;
	act.stdin_ns = mono_ns(CLOCK_MONOTONIC);
	act.requests = 1;
	struct event *ev = evtimer_new(base, exit_cb, base);
	evtimer_add(ev, &tv);
	uint64_t t0 = mono_ns(CLOCK_MONOTONIC);
	assert_int_equal(loop_run(base, &act, &lp), 0);
	uint64_t dt = mono_ns(CLOCK_MONOTONIC) - t0;
	assert_true(dt >= 20 * MS); /* libevent's clock is the coarse one */
	assert_true(dt < 2000 * MS);
	event_free(ev);
	event_base_free(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(window_grows_on_short_sleeps),
	    cmocka_unit_test(window_shrinks_on_long_sleeps),
	    cmocka_unit_test(never_on_one_cpu_or_when_off),
	    cmocka_unit_test(talking_only_after_a_stdin_write),
	    cmocka_unit_test(polling_stops_when_the_talk_ends),
	    cmocka_unit_test(exit_while_polling),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
