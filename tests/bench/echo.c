/* SPDX-License-Identifier: MIT */
/*
 * iofs-bench-echo: copy stdin to stdout with no buffering: each read()
 * (up to 64 KiB) is written out at once.  The rank of the latency
 * benchmark.  Exits 0 at EOF on stdin, 1 on a write error.
 */
#include <errno.h>
#include <unistd.h>

#include "tests/tools/tools.h"

int main(void)
{
	static char buf[64 << 10];

	for (;;) {
		ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0;
		if (tools_write_all(STDOUT_FILENO, buf, (size_t)n) < 0)
			return 1;
	}
}
