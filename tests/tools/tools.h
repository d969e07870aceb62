/* SPDX-License-Identifier: MIT */
/* Small helpers shared by the test and benchmark tools (header-only). */
#ifndef IOFS_TESTS_TOOLS_H
#define IOFS_TESTS_TOOLS_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static inline double tools_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* "123", "4K", "16M", "1G" (binary units). */
static inline uint64_t tools_parse_size(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 0);
	switch (*end) {
	case 'k':
	case 'K':
		return v << 10;
	case 'm':
	case 'M':
		return v << 20;
	case 'g':
	case 'G':
		return v << 30;
	default:
		return v;
	}
}

/* write() all of @buf, retrying on EINTR and short writes; 0 or -1. */
static inline int tools_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

static inline void tools_sleep_ms(double ms)
{
	struct timespec ts = {
	    .tv_sec = (time_t)(ms / 1000),
	    .tv_nsec = (long)((ms - (double)(time_t)(ms / 1000) * 1000) * 1e6)};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

#endif
