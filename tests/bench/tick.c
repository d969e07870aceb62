/* SPDX-License-Identifier: MIT */
/*
 * iofs-bench-tick: a mostly idle rank for the scale benchmark.
 *
 *   iofs-bench-tick [-i INTERVAL_MS] [-t DURATION_S]
 *
 * Writes one short line ("tick <rank> <n>\n", rank from $IOFS_RANK) every
 * INTERVAL_MS (default 1000) for DURATION_S seconds (default 60), then
 * exits 0.  The first tick is delayed by a rank-dependent fraction of the
 * interval so thousands of ranks do not all wake at the same instant.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/tools/tools.h"

int main(int argc, char **argv)
{
	double interval_ms = 1000, duration_s = 60;
	int opt;

	while ((opt = getopt(argc, argv, "i:t:")) != -1) {
		switch (opt) {
		case 'i':
			interval_ms = atof(optarg);
			break;
		case 't':
			duration_s = atof(optarg);
			break;
		default:
			fprintf(stderr,
				"usage: iofs-bench-tick [-i MS] [-t S]\n");
			return 2;
		}
	}
	if (interval_ms <= 0)
		return 2;
	const char *r = getenv("IOFS_RANK");
	long rank = r ? atol(r) : 0;
	double end = tools_now() + duration_s;
	tools_sleep_ms(interval_ms * (double)(rank % 97) / 97.0);
	for (unsigned long n = 0; tools_now() < end; n++) {
		char line[64];
		int len =
		    snprintf(line, sizeof(line), "tick %ld %lu\n", rank, n);
		if (tools_write_all(STDOUT_FILENO, line, (size_t)len) < 0)
			return 1;
		tools_sleep_ms(interval_ms);
	}
	return 0;
}
