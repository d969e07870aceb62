/* SPDX-License-Identifier: MIT */
/*
 * iofs-bench-rtt: round-trip latency through an echoing rank.
 *
 *   iofs-bench-rtt [-n ROUNDS] [-W WARMUP] [-s LINE] [-T TIMEOUT_S]
 *                  [-N NAME] (-w WPATH -r RPATH | -- CMD [ARG...])
 *
 * File mode (-w/-r): open WPATH for writing (a rank's iofs stdin file),
 * write the first line, then open RPATH for reading (its stdout file: an
 * empty live stream's open waits for the first byte) and read the line
 * back.  Both fds stay open for the whole run; reads are blocking.
 * Spawn mode (-- CMD): run CMD with its stdin and stdout on two pipes
 * (the bare-pipe baseline, or `mpirun -n 1 iofs-bench-echo`).
 *
 * Each round writes one LINE-byte line (default 32, '\n'-terminated,
 * carrying the round number) and times, with CLOCK_MONOTONIC, until every
 * byte of it has been read back and checked.  WARMUP rounds (default 20)
 * are not counted.  Prints one line (see bench.h: bench_report) named
 * NAME (default "rtt").  The whole run is bounded by TIMEOUT_S (default
 * 120): SIGALRM ends the process (status 142).  Exit 1 on a mismatch or an
 * I/O error, with a message.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/bench/bench.h"
#include "tests/tools/tools.h"

static int read_exact(int fd, char *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, buf + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			fprintf(stderr, "iofs-bench-rtt: read: %s\n",
				strerror(errno));
			return -1;
		}
		if (n == 0) {
			fprintf(stderr,
				"iofs-bench-rtt: EOF after %zu of %zu "
				"bytes\n",
				got, len);
			return -1;
		}
		got += (size_t)n;
	}
	return 0;
}

static void make_line(char *line, size_t len, unsigned long round)
{
	memset(line, 'x', len);
	int n = snprintf(line, len, "%lu ", round);
	if (n > 0 && (size_t)n < len)
		line[n] = 'x'; /* overwrite snprintf's NUL */
	line[len - 1] = '\n';
}

static pid_t spawn(char **argv, int *wfd, int *rfd)
{
	int in[2], out[2];
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0) {
		perror("iofs-bench-rtt: pipe2");
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("iofs-bench-rtt: fork");
		return -1;
	}
	if (pid == 0) {
		dup2(in[0], STDIN_FILENO);
		dup2(out[1], STDOUT_FILENO);
		execvp(argv[0], argv);
		fprintf(stderr, "iofs-bench-rtt: %s: %s\n", argv[0],
			strerror(errno));
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	*wfd = in[1];
	*rfd = out[0];
	return pid;
}

int main(int argc, char **argv)
{
	unsigned long rounds = 1000, warmup = 20;
	size_t len = 32;
	unsigned timeout = 120;
	const char *wpath = NULL, *rpath = NULL, *name = "rtt";
	int opt, wfd = -1, rfd = -1, rc = 1;
	pid_t child = -1;

	while ((opt = getopt(argc, argv, "+n:W:s:T:N:w:r:")) != -1) {
		switch (opt) {
		case 'n':
			rounds = strtoul(optarg, NULL, 0);
			break;
		case 'W':
			warmup = strtoul(optarg, NULL, 0);
			break;
		case 's':
			len = (size_t)tools_parse_size(optarg);
			break;
		case 'T':
			timeout = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'N':
			name = optarg;
			break;
		case 'w':
			wpath = optarg;
			break;
		case 'r':
			rpath = optarg;
			break;
		default:
			goto usage;
		}
	}
	if (len < 16 || len > (1u << 20) || rounds == 0)
		goto usage;
	if (!!wpath != !!rpath || (!wpath && optind >= argc))
		goto usage;
	alarm(timeout);
	signal(SIGPIPE, SIG_IGN);

	char *line = malloc(len), *back = malloc(len);
	int64_t *lat = calloc(rounds, sizeof(*lat));
	if (!line || !back || !lat) {
		fprintf(stderr, "iofs-bench-rtt: out of memory\n");
		goto out_free;
	}
	if (wpath) {
		wfd = open(wpath, O_WRONLY);
		if (wfd < 0) {
			fprintf(stderr, "iofs-bench-rtt: %s: %s\n", wpath,
				strerror(errno));
			goto out_free;
		}
	} else {
		child = spawn(argv + optind, &wfd, &rfd);
		if (child < 0)
			goto out_free;
	}
	for (unsigned long i = 0; i < warmup + rounds; i++) {
		make_line(line, len, i);
		int64_t t0 = bench_now_ns();
		if (tools_write_all(wfd, line, len) < 0) {
			fprintf(stderr, "iofs-bench-rtt: write: %s\n",
				strerror(errno));
			goto out_close;
		}
		if (rfd < 0) {
			/* first line written: the stream now has a byte */
			rfd = open(rpath, O_RDONLY);
			if (rfd < 0) {
				fprintf(stderr, "iofs-bench-rtt: %s: %s\n",
					rpath, strerror(errno));
				goto out_close;
			}
		}
		if (read_exact(rfd, back, len) < 0)
			goto out_close;
		int64_t dt = bench_now_ns() - t0;
		if (memcmp(line, back, len) != 0) {
			fprintf(stderr,
				"iofs-bench-rtt: round %lu: echoed "
				"line differs\n",
				i);
			goto out_close;
		}
		if (i >= warmup)
			lat[i - warmup] = dt;
	}
	bench_report(name, lat, rounds);
	rc = 0;
out_close:
	close(wfd); /* EOF for the echo rank */
	if (rfd >= 0)
		close(rfd);
	if (child > 0) {
		int st;
		while (waitpid(child, &st, 0) < 0 && errno == EINTR)
			;
	}
out_free:
	free(line);
	free(back);
	free(lat);
	return rc;
usage:
	fprintf(stderr,
		"usage: iofs-bench-rtt [-n ROUNDS] [-W WARMUP] [-s LINE] "
		"[-T S] [-N NAME] (-w WPATH -r RPATH | -- CMD...)\n");
	return 2;
}
