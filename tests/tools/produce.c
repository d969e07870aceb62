/* SPDX-License-Identifier: MIT */
/*
 * iofs-produce: write a deterministic pseudo-random byte stream to stdout.
 *
 *   iofs-produce [-n BYTES] [-b CHUNK] [-s SEED] [-t] [-l]
 *
 * -n total bytes (default 1 MiB; suffixes K, M, G), -b write size (default
 * 64 KiB), -s seed (default 1), -l line mode: printable text lines of
 * varying length (still deterministic), -t print "bytes seconds" to stderr
 * at the end.  Same arguments, same bytes: tests compare sha256 of what a
 * reader got against `iofs-produce ... | sha256sum`.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/tools/tools.h"

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static void fill(unsigned char *buf, size_t len, uint64_t *state, int lines,
		 size_t *col)
{
	for (size_t i = 0; i < len; i++) {
		uint64_t r = xorshift(state);
		if (!lines) {
			buf[i] = (unsigned char)(r >> 24);
			continue;
		}
		/* printable lines, 120 characters long on average */
		if (*col > 0 && (r % 120) == 0) {
			buf[i] = '\n';
			*col = 0;
		} else {
			buf[i] = (unsigned char)(' ' + 1 + (r >> 32) % 94);
			(*col)++;
		}
	}
}

int main(int argc, char **argv)
{
	uint64_t total = 1 << 20, chunk = 64 << 10, seed = 1;
	int lines = 0, timing = 0, opt;

	while ((opt = getopt(argc, argv, "n:b:s:lt")) != -1) {
		switch (opt) {
		case 'n':
			total = tools_parse_size(optarg);
			break;
		case 'b':
			chunk = tools_parse_size(optarg);
			break;
		case 's':
			seed = strtoull(optarg, NULL, 0);
			break;
		case 'l':
			lines = 1;
			break;
		case 't':
			timing = 1;
			break;
		default:
			fprintf(stderr,
				"usage: iofs-produce [-n BYTES] [-b CHUNK] "
				"[-s SEED] [-l] [-t]\n");
			return 2;
		}
	}
	if (chunk == 0 || chunk > (64u << 20)) {
		fprintf(stderr, "iofs-produce: bad chunk size\n");
		return 2;
	}
	unsigned char *buf = malloc(chunk);
	if (!buf)
		return 1;
	uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
	size_t col = 0;
	double t0 = tools_now();
	uint64_t done = 0;
	while (done < total) {
		size_t n =
		    total - done < chunk ? (size_t)(total - done) : chunk;
		fill(buf, n, &state, lines, &col);
		if (tools_write_all(STDOUT_FILENO, buf, n) < 0) {
			fprintf(stderr, "iofs-produce: write: %s\n",
				strerror(errno));
			free(buf);
			return 1;
		}
		done += n;
	}
	if (timing)
		fprintf(stderr, "%llu %.6f\n", (unsigned long long)done,
			tools_now() - t0);
	free(buf);
	return 0;
}
