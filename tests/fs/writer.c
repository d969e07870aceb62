/* SPDX-License-Identifier: MIT */
/*
 * fs-writer PATH COUNTFILE [MAX_BYTES]: write 1 MiB chunks of 'x' to PATH
 * until MAX_BYTES (default 64 MiB), SIGINT or an error, keeping the exact
 * total that write() reported in COUNTFILE (rewritten after every write).
 * SIGINT has a handler without SA_RESTART, so an interrupted write returns
 * what was consumed (or -1 EINTR) and the count stays exact -- a Python
 * writer loses counts when KeyboardInterrupt lands between the return of
 * os.write() and the addition.  Exit 0; prints the total.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_int(int sig)
{
	(void)sig;
	stop = 1;
}

static void save(const char *path, unsigned long long total)
{
	char tmp[4096];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		return;
	fprintf(f, "%llu\n", total);
	fclose(f);
	rename(tmp, path);
}

int main(int argc, char **argv)
{
	static char buf[1 << 20];
	unsigned long long total = 0, max = 64ull << 20;
	struct sigaction sa;
	int fd;

	if (argc < 3) {
		fprintf(stderr, "usage: fs-writer PATH COUNTFILE [MAX]\n");
		return 2;
	}
	if (argc > 3)
		max = strtoull(argv[3], NULL, 10);
	memset(buf, 'x', sizeof(buf));
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_int; /* no SA_RESTART */
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	fd = open(argv[1], O_WRONLY);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	while (!stop && total < max) {
		ssize_t n = write(fd, buf, sizeof(buf));

		if (n < 0) {
			if (errno != EINTR)
				fprintf(stderr, "fs-writer: %s\n",
					strerror(errno));
			break;
		}
		total += (unsigned long long)n;
		save(argv[2], total);
	}
	save(argv[2], total);
	close(fd);
	printf("%llu\n", total);
	return 0;
}
