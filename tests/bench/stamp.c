/* SPDX-License-Identifier: MIT */
/*
 * iofs-bench-stamp: write-to-read latency of a followed stream.
 *
 *   iofs-bench-stamp -w [-i INTERVAL_MS] [-j JITTER_MS] [-c COUNT]
 *   iofs-bench-stamp -r [-c COUNT] [-T TIMEOUT_S] [-N NAME]
 *
 * -w (the rank): write COUNT lines (default 50) "STAMP <ns>\n", one every
 * INTERVAL_MS (default 200) plus a pseudo-random 0..JITTER_MS (default 0;
 * a follower that polls at a fixed period would otherwise phase-lock with
 * the writer and always see the same delay), each with a single write(); <ns>
 * is CLOCK_MONOTONIC at the write (system-wide, so comparable across processes
 * on one machine). -r (the follower's consumer, e.g. `tail -f FILE |
 * iofs-bench-stamp -r`): read stdin, and for every complete "STAMP <ns>" line
 * take now - ns. Other lines are ignored.  After COUNT stamps (or EOF) print
 * one line (bench.h: bench_report) named NAME (default "stamp") and exit 0; the
 * run is bounded by TIMEOUT_S (default 60): SIGALRM ends it (status 142).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/bench/bench.h"
#include "tests/tools/tools.h"

static int do_write(unsigned long count, double interval_ms, double jitter_ms)
{
	uint64_t x = (uint64_t)bench_now_ns() | 1;

	for (unsigned long i = 0; i < count; i++) {
		char line[64];
		int n = snprintf(line, sizeof(line), "STAMP %lld\n",
				 (long long)bench_now_ns());
		if (tools_write_all(STDOUT_FILENO, line, (size_t)n) < 0)
			return 1;
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if (i + 1 < count)
			tools_sleep_ms(interval_ms +
				       jitter_ms * (double)(x % 1000) / 1000.0);
	}
	return 0;
}

static int do_read(unsigned long count, const char *name)
{
	int64_t *lat = calloc(count, sizeof(*lat));
	char buf[8192];
	size_t have = 0;
	unsigned long got = 0;

	if (!lat)
		return 1;
	while (got < count) {
		ssize_t n = read(STDIN_FILENO, buf + have, sizeof(buf) - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		int64_t now = bench_now_ns();
		have += (size_t)n;
		char *p = buf, *nl;
		while ((nl = memchr(p, '\n', have - (size_t)(p - buf)))) {
			*nl = '\0';
			long long ns;
			if (got < count && sscanf(p, "STAMP %lld", &ns) == 1)
				lat[got++] = now - ns;
			p = nl + 1;
		}
		have -= (size_t)(p - buf);
		memmove(buf, p, have);
		if (have == sizeof(buf))
			have = 0; /* an overlong line: not ours */
	}
	bench_report(name, lat, got);
	free(lat);
	return 0;
}

int main(int argc, char **argv)
{
	int mode = 0, opt;
	unsigned long count = 50;
	double interval_ms = 200, jitter_ms = 0;
	unsigned timeout = 60;
	const char *name = "stamp";

	while ((opt = getopt(argc, argv, "wri:j:c:T:N:")) != -1) {
		switch (opt) {
		case 'w':
		case 'r':
			mode = opt;
			break;
		case 'i':
			interval_ms = atof(optarg);
			break;
		case 'j':
			jitter_ms = atof(optarg);
			break;
		case 'c':
			count = strtoul(optarg, NULL, 0);
			break;
		case 'T':
			timeout = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'N':
			name = optarg;
			break;
		default:
			mode = 0;
			goto usage;
		}
	}
	if (count == 0)
		goto usage;
	if (mode == 'w')
		return do_write(count, interval_ms, jitter_ms);
	if (mode == 'r') {
		alarm(timeout);
		return do_read(count, name);
	}
usage:
	fprintf(stderr,
		"usage: iofs-bench-stamp -w [-i MS] [-j MS] [-c N] | -r [-c N] "
		"[-T S] [-N NAME]\n");
	return 2;
}
