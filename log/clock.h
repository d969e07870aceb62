/* SPDX-License-Identifier: MIT */
/*
 * The monotonic clock, read one way everywhere (daemon and forwarder).
 * It lives beside the logger because log/ is the base every module and
 * program links; header-only, as a clock_gettime() call should be.
 *
 * CLOCK_MONOTONIC: never jumps with the wall clock, counts while the
 * process sleeps.  Deadlines, grace periods, rate limits and the loop's
 * poll window are all taken from it; wall time (stat's mtime, the
 * router's timestamps, MUNGE) is CLOCK_REALTIME and is not here.
 */
#ifndef IOFS_LOG_CLOCK_H
#define IOFS_LOG_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds on CLOCK_MONOTONIC. */
static inline uint64_t iofs_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Whole seconds on CLOCK_MONOTONIC (once-a-second rate limits, sweeps). */
static inline uint64_t iofs_mono_s(void)
{
	return iofs_mono_ns() / 1000000000u;
}

/* Milliseconds on CLOCK_MONOTONIC (deadlines: fits int64_t for 292
 * million years, so signed differences are safe). */
static inline uint64_t iofs_mono_ms(void)
{
	return iofs_mono_ns() / 1000000u;
}

#endif /* IOFS_LOG_CLOCK_H */
