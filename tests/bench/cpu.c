/* SPDX-License-Identifier: MIT */
/*
 * iofs-bench-cpu: run a command and report the CPU time it used itself.
 *
 *   iofs-bench-cpu FILE CMD [ARG...]
 *
 * Runs CMD as a child, waits for it to exit without reaping it (waitid
 * with WNOWAIT), reads the zombie's /proc/PID/stat and writes one line
 * "SELF_S CHILDREN_S" to FILE: the user+system seconds of CMD itself
 * (utime+stime) and of the children it reaped (cutime+cstime).  That
 * separates a forwarder's own cost (iofs-run) from its ranks', which
 * getrusage(RUSAGE_CHILDREN) or time(1) would add together.  Then reaps
 * CMD and exits with its status (128+N for a signal N).  SIGTERM, SIGINT
 * and SIGHUP are passed on to CMD (so `timeout` still ends it).  Exit 127
 * if CMD cannot run, 126 on a failure of its own.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile pid_t child = -1;

static void pass_on(int sig)
{
	if (child > 0)
		kill(child, sig);
}

/* utime, stime, cutime, cstime of a /proc/PID/stat, in seconds */
static int stat_cpu(pid_t pid, double *self, double *kids)
{
	char path[64], buf[1024];
	unsigned long long ut, st;
	long long cut, cst;
	long hz = sysconf(_SC_CLK_TCK);
	FILE *f;
	size_t n;
	char *p;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the command name may hold spaces */
	if (!p || hz <= 0)
		return -1;
	/* after ") ": state(3) ... utime is field 14, so skip 11 fields */
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
			  "%llu %llu %lld %lld",
		   &ut, &st, &cut, &cst) != 4)
		return -1;
	*self = (double)(ut + st) / (double)hz;
	*kids = (double)(cut + cst) / (double)hz;
	return 0;
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	siginfo_t si;
	double self = 0, kids = 0;
	int st;

	if (argc < 3) {
		fprintf(stderr, "usage: iofs-bench-cpu FILE CMD [ARG...]\n");
		return 2;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = pass_on;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	child = fork();
	if (child < 0) {
		perror("iofs-bench-cpu: fork");
		return 126;
	}
	if (child == 0) {
		execvp(argv[2], argv + 2);
		fprintf(stderr, "iofs-bench-cpu: %s: %s\n", argv[2],
			strerror(errno));
		_exit(127);
	}
	memset(&si, 0, sizeof(si));
	while (waitid(P_PID, (id_t)child, &si, WEXITED | WNOWAIT) < 0) {
		if (errno != EINTR) {
			perror("iofs-bench-cpu: waitid");
			return 126;
		}
	}
	if (stat_cpu(child, &self, &kids) == 0) {
		FILE *out = fopen(argv[1], "w");
		if (out) {
			fprintf(out, "%.2f %.2f\n", self, kids);
			fclose(out);
		}
	}
	while (waitpid(child, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return WEXITSTATUS(st);
}
