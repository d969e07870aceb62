/* SPDX-License-Identifier: MIT */
/*
 * iofs-pace: copy stdin (or -i FILE) to stdout (or -o FILE) at a set pace.
 *
 *   iofs-pace [-c CHUNK] [-d MS] [-r RATE] [-f FAST_AFTER_BYTES]
 *             [-x STOP_AFTER_BYTES] [-w HOLD_MS] [-i IN] [-o OUT] [-t]
 *             [-T FILE]
 *
 * Reads CHUNK bytes (default 2 KiB), then sleeps MS milliseconds (default 3)
 * -- "a reader taking 2 KiB every 3 ms".  -r RATE (bytes/s) paces by rate
 * instead.  -f: after that many bytes, read at full speed (1 MiB chunks).
 * -x: after that many bytes, stop reading, sleep HOLD_MS (-w, default
 * 500), and exit 0 without reading the rest (the teardown case).  -t:
 * print "bytes seconds" to stderr at the end; -T FILE: write it to FILE
 * (for a rank whose stderr is forwarded).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/tools/tools.h"

int main(int argc, char **argv)
{
	uint64_t chunk = 2048, fast_after = UINT64_MAX, stop_after = UINT64_MAX;
	double delay_ms = 3, rate = 0, hold_ms = 500;
	int in = STDIN_FILENO, out = STDOUT_FILENO, timing = 0, opt;
	const char *timing_file = NULL;

	while ((opt = getopt(argc, argv, "c:d:r:f:x:w:i:o:tT:")) != -1) {
		switch (opt) {
		case 'c':
			chunk = tools_parse_size(optarg);
			break;
		case 'd':
			delay_ms = atof(optarg);
			break;
		case 'r':
			rate = (double)tools_parse_size(optarg);
			break;
		case 'f':
			fast_after = tools_parse_size(optarg);
			break;
		case 'x':
			stop_after = tools_parse_size(optarg);
			break;
		case 'w':
			hold_ms = atof(optarg);
			break;
		case 'i':
			in = open(optarg, O_RDONLY);
			if (in < 0) {
				fprintf(stderr, "iofs-pace: %s: %s\n", optarg,
					strerror(errno));
				return 1;
			}
			break;
		case 'o':
			out = open(optarg, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			if (out < 0) {
				fprintf(stderr, "iofs-pace: %s: %s\n", optarg,
					strerror(errno));
				return 1;
			}
			break;
		case 't':
			timing = 1;
			break;
		case 'T':
			timing_file = optarg;
			break;
		default:
			fprintf(stderr, "usage: see the comment in pace.c\n");
			return 2;
		}
	}
	if (chunk == 0)
		return 2;
	size_t cap = chunk > (1u << 20) ? chunk : (1u << 20);
	char *buf = malloc(cap);
	if (!buf)
		return 1;
	double t0 = tools_now();
	uint64_t done = 0;
	for (;;) {
		if (done >= stop_after) {
			tools_sleep_ms(hold_ms);
			break;
		}
		size_t want = done >= fast_after ? cap : chunk;
		if (stop_after - done < want)
			want = (size_t)(stop_after - done);
		ssize_t n = read(in, buf, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			fprintf(stderr, "iofs-pace: read: %s\n",
				strerror(errno));
			free(buf);
			return 1;
		}
		if (n == 0)
			break;
		if (tools_write_all(out, buf, (size_t)n) < 0) {
			fprintf(stderr, "iofs-pace: write: %s\n",
				strerror(errno));
			free(buf);
			return 1;
		}
		done += (uint64_t)n;
		if (done >= fast_after)
			continue;
		if (rate > 0) {
			double due = t0 + (double)done / rate;
			double now = tools_now();
			if (due > now)
				tools_sleep_ms((due - now) * 1000);
		} else if (delay_ms > 0) {
			tools_sleep_ms(delay_ms);
		}
	}
	double secs = tools_now() - t0;
	if (timing)
		fprintf(stderr, "%llu %.6f\n", (unsigned long long)done, secs);
	if (timing_file) {
		FILE *f = fopen(timing_file, "w");
		if (!f ||
		    fprintf(f, "%llu %.6f\n", (unsigned long long)done, secs) <
			0 ||
		    fclose(f) != 0) {
			fprintf(stderr, "iofs-pace: %s: %s\n", timing_file,
				strerror(errno));
			free(buf);
			return 1;
		}
	}
	free(buf);
	return 0;
}
