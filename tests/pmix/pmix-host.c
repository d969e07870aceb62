/* SPDX-License-Identifier: MIT */
/*
 * pmix-host: a small PMIx SERVER host for iofs's PMIx tests, linked against
 * the real libpmix.  It plays the part of PRRTE's daemon: it accepts tool
 * connections, answers PMIX_QUERY_NAMESPACES, forks the ranks of jobs with
 * pipes on their stdio, passes their output into the PMIx library with
 * PMIx_server_IOF_deliver(3) (zero-length + PMIX_IOF_COMPLETE at EOF),
 * writes what tools push to the ranks' stdin, and raises
 * PMIX_EVENT_PROC_TERMINATED / PMIX_EVENT_JOB_END.
 *
 *   pmix-host --tmpdir DIR --uri-file FILE [--attach-file FILE] [--system]
 *             [--hold] [--control FIFO] [--job NSPACE:NP:CMD [--after SECS]]...
 *
 * CMD runs under /bin/sh -c with the PMIx client environment (PMIX_RANK,
 * PMIX_NAMESPACE, ...).  --hold starts a job's ranks only once a tool has
 * asked to pull that job's output, or every job's with an empty nspace (so
 * a test sees every byte).  --control
 * creates a FIFO that takes lines "job NSPACE:NP:CMD" (start a job now) and
 * "quit".  The host logs one line per event on stdout: "uri URI",
 * "job NSPACE started", "job NSPACE ended STATUS", ...
 *
 * Threads: PMIx calls the host module (query, tool_connected, iof_pull,
 * push_stdin) on its progress thread.  Those up-calls only take the lock,
 * queue work and wake the main thread through a pipe; the main thread does
 * every blocking thing (fork, write, deliver, notify).
 *
 * libpmix's module up-calls carry no context pointer, so the host state is
 * one global struct, `host` (a test program with exactly one server).
 * This file: server init, the module's up-calls but push_stdin, the control
 * FIFO and the main loop; pmix-host-job.c: jobs, ranks, output and stdin.
 */

#include "pmix-host.h"

struct host host = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .wake = {-1, -1},
    .control_fd = -1,
};

/* One whole line per call (the progress thread says things too). */
void say(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	printf("%s\n", line);
	fflush(stdout);
}

double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

void wake_main(void)
{
	char c = 'w';
	ssize_t n = write(host.wake[1], &c, 1);
	(void)n; /* a full pipe already means "wake up" */
}

static void on_signal(int sig)
{
	int saved = errno;
	char c = sig == SIGCHLD ? 'c' : 'q';
	ssize_t n = write(host.wake[1], &c, 1);
	(void)n;
	errno = saved;
}

/* ------------------------------------------------------------------------ */
/* Host module up-calls (PMIx progress thread: never block here)            */

static pmix_status_t up_client_connected(const pmix_proc_t *proc, void *obj,
					 pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	return PMIX_OPERATION_SUCCEEDED;
}

static pmix_status_t up_client_finalized(const pmix_proc_t *proc, void *obj,
					 pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	return PMIX_OPERATION_SUCCEEDED;
}

static pmix_status_t up_abort(const pmix_proc_t *proc, void *obj, int status,
			      const char msg[], pmix_proc_t procs[],
			      size_t nprocs, pmix_op_cbfunc_t cbfunc,
			      void *cbdata)
{
	return PMIX_OPERATION_SUCCEEDED;
}

static void release_infos(void *cbdata)
{
	struct {
		pmix_info_t *info;
		size_t n;
	} *r = cbdata;
	PMIX_INFO_FREE(r->info, r->n);
	free(r);
}

static pmix_status_t up_query(pmix_proc_t *proct, pmix_query_t *queries,
			      size_t nqueries, pmix_info_cbfunc_t cbfunc,
			      void *cbdata)
{
	size_t nkeys = 0;
	for (size_t q = 0; q < nqueries; q++)
		for (size_t k = 0; queries[q].keys && queries[q].keys[k]; k++)
			nkeys++;
	if (nkeys == 0)
		return PMIX_ERR_NOT_FOUND;

	struct {
		pmix_info_t *info;
		size_t n;
	} *r = calloc(1, sizeof(*r));
	if (!r)
		return PMIX_ERR_NOMEM;
	PMIX_INFO_CREATE(r->info, nkeys);
	size_t n = 0;
	char list[MAX_JOBS * (PMIX_MAX_NSLEN + 1) + 1];
	list[0] = '\0';
	pthread_mutex_lock(&host.lock);
	for (int j = 0; j < host.njobs; j++) {
		struct job *job = host.jobs[j];
		if (!job->registered || job->ended)
			continue;
		if (list[0])
			strcat(list, ",");
		strcat(list, job->nspace);
	}
	pthread_mutex_unlock(&host.lock);
	for (size_t q = 0; q < nqueries; q++)
		for (size_t k = 0; queries[q].keys && queries[q].keys[k]; k++) {
			const char *key = queries[q].keys[k];
			if (strcmp(key, PMIX_QUERY_NAMESPACES) == 0)
				PMIx_Info_load(&r->info[n++], key, list,
					       PMIX_STRING);
		}
	if (n == 0) {
		PMIX_INFO_FREE(r->info, nkeys);
		free(r);
		return PMIX_ERR_NOT_FOUND;
	}
	r->n = nkeys;
	cbfunc(PMIX_SUCCESS, r->info, n, cbdata, release_infos, r);
	return PMIX_SUCCESS;
}

static void up_tool_connected(pmix_info_t *info, size_t ninfo,
			      pmix_tool_connection_cbfunc_t cbfunc,
			      void *cbdata)
{
	pmix_proc_t tool;
	char ns[PMIX_MAX_NSLEN + 1];
	bool have_ns = false;
	uint32_t rank = 0;

	for (size_t i = 0; i < ninfo; i++) {
		if (strcmp(info[i].key, PMIX_NSPACE) == 0 &&
		    info[i].value.type == PMIX_STRING &&
		    info[i].value.data.string) {
			snprintf(ns, sizeof(ns), "%s",
				 info[i].value.data.string);
			have_ns = true;
		} else if (strcmp(info[i].key, PMIX_RANK) == 0 &&
			   info[i].value.type == PMIX_PROC_RANK) {
			rank = info[i].value.data.rank;
		}
	}
	pthread_mutex_lock(&host.lock);
	int id = ++host.ntools;
	pthread_mutex_unlock(&host.lock);
	if (!have_ns)
		snprintf(ns, sizeof(ns), "tool-%d-%d", (int)getpid(), id);
	PMIX_LOAD_PROCID(&tool, ns, rank);
	say("tool connected %s", ns);
	if (cbfunc)
		cbfunc(PMIX_SUCCESS, &tool, cbdata);
}

static pmix_status_t up_iof_pull(const pmix_proc_t procs[], size_t nprocs,
				 const pmix_info_t directives[], size_t ndirs,
				 pmix_iof_channel_t channels,
				 pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	bool any = false;
	pthread_mutex_lock(&host.lock);
	for (size_t p = 0; p < nprocs; p++)
		if (!procs[p].nspace[0] && !host.pulled_all) {
			/* an empty nspace pulls every job, also later ones
			 * (PMIx's nspace match, iofs's all-namespaces pull) */
			host.pulled_all = true;
			any = true;
		}
	for (size_t p = 0; p < nprocs; p++)
		for (int j = 0; j < host.njobs; j++)
			if (strcmp(host.jobs[j]->nspace, procs[p].nspace) ==
				0 &&
			    !host.jobs[j]->pulled) {
				host.jobs[j]->pulled = true;
				any = true;
			}
	pthread_mutex_unlock(&host.lock);
	if (any)
		wake_main();
	return PMIX_OPERATION_SUCCEEDED;
}

static pmix_server_module_t module = {
    .client_connected = up_client_connected,
    .client_finalized = up_client_finalized,
    .abort = up_abort,
    .query = up_query,
    .tool_connected = up_tool_connected,
    .iof_pull = up_iof_pull,
    .push_stdin = up_push_stdin,
};

/* ------------------------------------------------------------------------ */
/* Control FIFO                                                              */

static void control_line(char *line)
{
	char err[256];
	if (strcmp(line, "quit") == 0) {
		host.quit = true;
		return;
	}
	if (strncmp(line, "job ", 4) == 0) {
		struct job *job = job_parse(line + 4, err, sizeof(err));
		if (!job || job_add(job) < 0) {
			say("control: %s", job ? "too many jobs" : err);
			if (job) {
				free(job->cmd);
				free(job);
			}
		}
		return;
	}
	say("control: unknown command '%s'", line);
}

static void control_read(void)
{
	static char buf[8192];
	static size_t have;
	ssize_t n = read(host.control_fd, buf + have, sizeof(buf) - 1 - have);
	if (n <= 0) {
		/* last writer gone: reopen so the next writer is seen */
		close(host.control_fd);
		host.control_fd = open(host.control, O_RDONLY | O_NONBLOCK);
		return;
	}
	have += n;
	char *nl;
	while ((nl = memchr(buf, '\n', have))) {
		*nl = '\0';
		control_line(buf);
		size_t used = nl + 1 - buf;
		memmove(buf, nl + 1, have - used);
		have -= used;
	}
	if (have == sizeof(buf) - 1)
		have = 0; /* overlong line: drop it */
}

/* ------------------------------------------------------------------------ */
/* Main loop                                                                 */

static int write_file(const char *path, const char *text)
{
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f)
		return -1;
	fprintf(f, "%s\n", text);
	if (fclose(f) != 0)
		return -1;
	return rename(tmp, path);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: pmix-host --tmpdir DIR --uri-file FILE [--hold] "
		"[--control FIFO] [--job NSPACE:NP:CMD [--after SECS]]...\n");
	exit(2);
}

static void main_loop(void)
{
	struct pollfd pfd[2 + MAX_JOBS * MAX_RANKS * 3];
	struct rank *who[2 + MAX_JOBS * MAX_RANKS * 3];
	int which[2 + MAX_JOBS * MAX_RANKS * 3];

	while (!host.quit) {
		double now = now_s(), next = -1;
		for (int j = 0; j < host.njobs; j++) {
			struct job *job = host.jobs[j];
			if (!job->registered && job->start_at <= now) {
				if (job_register(job) < 0) {
					job->started = job->ended = true;
					continue;
				}
			}
			bool pulled;
			pthread_mutex_lock(&host.lock);
			pulled = job->pulled || host.pulled_all;
			pthread_mutex_unlock(&host.lock);
			if (job->registered && !job->started &&
			    (!host.hold || pulled))
				job_start(job);
			if (!job->registered &&
			    (next < 0 || job->start_at < next))
				next = job->start_at;
			job_check_end(job);
		}

		int n = 0;
		pfd[n] = (struct pollfd){.fd = host.wake[0], .events = POLLIN};
		who[n++] = NULL;
		if (host.control_fd >= 0) {
			pfd[n] = (struct pollfd){.fd = host.control_fd,
						 .events = POLLIN};
			who[n++] = NULL;
		}
		for (int j = 0; j < host.njobs; j++) {
			struct job *job = host.jobs[j];
			for (uint32_t r = 0; job->started && r < job->np; r++) {
				struct rank *rk = &job->ranks[r];
				for (int i = 0; i < 3; i++) {
					if (rk->fd[i] < 0)
						continue;
					short ev = POLLIN;
					if (i == 0) {
						pthread_mutex_lock(&host.lock);
						bool queued = rk->in_head;
						pthread_mutex_unlock(
						    &host.lock);
						if (!queued)
							continue;
						ev = POLLOUT;
					}
					pfd[n] = (struct pollfd){
					    .fd = rk->fd[i], .events = ev};
					who[n] = rk;
					which[n++] = i;
				}
			}
		}
		int timeout = next < 0 ? 1000 : (int)((next - now) * 1000) + 1;
		if (timeout > 1000)
			timeout = 1000;
		if (poll(pfd, n, timeout) < 0 && errno != EINTR)
			break;
		for (int i = 0; i < n; i++) {
			if (!pfd[i].revents)
				continue;
			if (pfd[i].fd == host.wake[0]) {
				char c[64];
				ssize_t k = read(host.wake[0], c, sizeof(c));
				for (ssize_t m = 0; m < k; m++) {
					if (c[m] == 'c')
						reap();
					if (c[m] == 'q')
						host.quit = true;
				}
			} else if (!who[i]) {
				control_read();
			} else if (which[i] == 0) {
				rank_write_stdin(who[i]);
			} else {
				rank_read(who[i], which[i]);
			}
		}
	}
}

int main(int argc, char **argv)
{
	const char *tmpdir = NULL, *uri_file = NULL, *attach_file = NULL;
	bool system_support = false;
	char err[256];

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--hold") == 0) {
			host.hold = true;
			continue;
		}
		if (strcmp(a, "--system") == 0) {
			system_support = true;
			continue;
		}
		if (!v)
			usage();
		i++;
		if (strcmp(a, "--tmpdir") == 0) {
			tmpdir = v;
		} else if (strcmp(a, "--uri-file") == 0) {
			uri_file = v;
		} else if (strcmp(a, "--attach-file") == 0) {
			attach_file = v;
		} else if (strcmp(a, "--control") == 0) {
			host.control = v;
		} else if (strcmp(a, "--job") == 0) {
			struct job *job = job_parse(v, err, sizeof(err));
			if (!job || job_add(job) < 0) {
				fprintf(stderr, "pmix-host: %s\n",
					job ? "too many jobs" : err);
				return 2;
			}
		} else if (strcmp(a, "--after") == 0) {
			if (host.njobs == 0)
				usage();
			host.jobs[host.njobs - 1]->start_at = atof(v);
		} else {
			usage();
		}
	}
	if (!tmpdir || !uri_file)
		usage();
	double t0 = now_s();
	for (int j = 0; j < host.njobs; j++)
		if (host.jobs[j]->start_at > 0)
			host.jobs[j]->start_at += t0;

	if (pipe2(host.wake, O_CLOEXEC | O_NONBLOCK) < 0)
		return 1;
	struct sigaction sa = {.sa_handler = on_signal,
			       .sa_flags = SA_RESTART | SA_NOCLDSTOP};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGCHLD, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (host.control) {
		unlink(host.control);
		if (mkfifo(host.control, 0600) < 0) {
			fprintf(stderr, "pmix-host: mkfifo %s: %s\n",
				host.control, strerror(errno));
			return 1;
		}
		host.control_fd = open(host.control, O_RDONLY | O_NONBLOCK);
	}

	/* pitfall: without LOCAL_OUTPUT=false the first deliver segfaults */
	pmix_info_t *info;
	size_t ninfo = 0;
	pmix_rank_t zero = 0;
	bool t = true, f = false;
	PMIX_INFO_CREATE(info, 8);
	PMIx_Info_load(&info[ninfo++], PMIX_SERVER_TOOL_SUPPORT, &t, PMIX_BOOL);
	PMIx_Info_load(&info[ninfo++], PMIX_SERVER_TMPDIR, tmpdir, PMIX_STRING);
	PMIx_Info_load(&info[ninfo++], PMIX_SYSTEM_TMPDIR, tmpdir, PMIX_STRING);
	PMIx_Info_load(&info[ninfo++], PMIX_IOF_LOCAL_OUTPUT, &f, PMIX_BOOL);
	PMIx_Info_load(&info[ninfo++], PMIX_SERVER_NSPACE, "pmix-host",
		       PMIX_STRING);
	PMIx_Info_load(&info[ninfo++], PMIX_SERVER_RANK, &zero, PMIX_PROC_RANK);
	if (system_support)
		PMIx_Info_load(&info[ninfo++], PMIX_SERVER_SYSTEM_SUPPORT, &t,
			       PMIX_BOOL);
	if (attach_file) /* PMIx writes "URI\nVERSION" there */
		PMIx_Info_load(&info[ninfo++], PMIX_TCP_REPORT_URI, attach_file,
			       PMIX_STRING);
	pmix_status_t st = PMIx_server_init(&module, info, ninfo);
	PMIX_INFO_FREE(info, 8);
	if (st != PMIX_SUCCESS) {
		fprintf(stderr, "pmix-host: PMIx_server_init: %s\n",
			PMIx_Error_string(st));
		return 1;
	}
	PMIX_LOAD_PROCID(&host.me, "pmix-host", 0);

	pmix_value_t *val = NULL;
	st = PMIx_Get(&host.me, PMIX_MYSERVER_URI, NULL, 0, &val);
	if (st != PMIX_SUCCESS)
		st = PMIx_Get(&host.me, PMIX_SERVER_URI, NULL, 0, &val);
	if (st != PMIX_SUCCESS || !val || val->type != PMIX_STRING) {
		fprintf(stderr, "pmix-host: no server URI: %s\n",
			PMIx_Error_string(st));
		PMIx_server_finalize();
		return 1;
	}
	say("uri %s", val->data.string);
	say("pid %d", (int)getpid());
	if (write_file(uri_file, val->data.string) < 0) {
		fprintf(stderr, "pmix-host: %s: %s\n", uri_file,
			strerror(errno));
		PMIX_VALUE_RELEASE(val);
		PMIx_server_finalize();
		return 1;
	}
	PMIX_VALUE_RELEASE(val);

	main_loop();

	say("finalizing");
	for (int j = 0; j < host.njobs; j++) {
		struct job *job = host.jobs[j];
		for (uint32_t r = 0; job->started && r < job->np; r++) {
			struct rank *rk = &job->ranks[r];
			if (!rk->exited && rk->pid > 0)
				kill(rk->pid, SIGTERM);
		}
	}
	PMIx_server_finalize();
	if (host.control)
		unlink(host.control);
	return 0;
}
