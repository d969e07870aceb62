/* SPDX-License-Identifier: MIT */
/*
 * pmix-host: a small PMIx SERVER host for iofs's PMIx tests, linked against
 * the real libpmix.  It plays the part of PRRTE's daemon: it accepts tool
 * connections, answers PMIX_QUERY_NAMESPACES, forks the ranks of jobs with
 * pipes on their stdio, passes their output into the PMIx library with
 * PMIx_server_IOF_deliver (seed 001; zero-length + PMIX_IOF_COMPLETE at EOF),
 * writes what tools push to the ranks' stdin, and raises
 * PMIX_EVENT_PROC_TERMINATED / PMIX_EVENT_JOB_END.
 *
 *   pmix-host --tmpdir DIR --uri-file FILE [--hold] [--control FIFO]
 *             [--job NSPACE:NP:CMD [--after SECONDS]]...
 *
 * CMD runs under /bin/sh -c with the PMIx client environment (PMIX_RANK,
 * PMIX_NAMESPACE, ...).  --hold starts a job's ranks only once a tool has
 * asked to pull that job's output (so a test sees every byte).  --control
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
 * one file-static struct (this is a test program with exactly one server).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pmix.h>
#include <pmix_server.h>

#define MAX_JOBS   16
#define MAX_RANKS  64
#define READ_CHUNK 65536

struct stdin_op {
	pmix_op_cbfunc_t cbfunc;
	void *cbdata;
	int pending; /* chunks not yet written (or dropped) */
	pmix_status_t status;
};

struct chunk {
	struct chunk *next;
	char *data; /* owned; NULL for an EOF marker */
	size_t len, off;
	struct stdin_op *op;
};

struct rank {
	struct job *job;
	uint32_t id;
	pid_t pid;
	int fd[3]; /* stdin (write end), stdout, stderr (read ends); -1 closed
		    */
	bool exited;
	int code; /* exit code, or 128+signal */
	/* under host.lock: */
	struct chunk *in_head, *in_tail;
	bool in_closed; /* EOF requested (no more chunks accepted) */
};

struct job {
	char nspace[PMIX_MAX_NSLEN + 1];
	uint32_t np;
	char *cmd;
	double start_at; /* monotonic seconds; 0 = as soon as possible */
	bool registered, started, ended;
	bool pulled; /* under host.lock: a tool asked for its output */
	struct rank ranks[MAX_RANKS];
};

struct host {
	pthread_mutex_t lock;
	int wake[2]; /* progress thread / signal handler -> main loop */
	bool hold;
	bool quit;
	const char *control;
	int control_fd;
	struct job *jobs[MAX_JOBS];
	int njobs;
	int ntools;
	pmix_proc_t me;
};

static struct host host = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .wake = {-1, -1},
    .control_fd = -1,
};

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void wake_main(void)
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
/* Waiting for a PMIx op callback from the main thread                       */

struct waiter {
	pthread_mutex_t m;
	pthread_cond_t c;
	bool done;
	pmix_status_t status;
};

static void waiter_init(struct waiter *w)
{
	pthread_mutex_init(&w->m, NULL);
	pthread_cond_init(&w->c, NULL);
	w->done = false;
	w->status = PMIX_ERROR;
}

static void waiter_cb(pmix_status_t status, void *cbdata)
{
	struct waiter *w = cbdata;
	pthread_mutex_lock(&w->m);
	w->status = status;
	w->done = true;
	pthread_cond_signal(&w->c);
	pthread_mutex_unlock(&w->m);
}

/* Bounded wait (10 s): libpmix must not hang the test host forever. */
static pmix_status_t waiter_wait(struct waiter *w)
{
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 10;
	pthread_mutex_lock(&w->m);
	while (!w->done)
		if (pthread_cond_timedwait(&w->c, &w->m, &dl) == ETIMEDOUT)
			break;
	pmix_status_t st = w->done ? w->status : PMIX_ERR_TIMEOUT;
	pthread_mutex_unlock(&w->m);
	/* on timeout the waiter leaks by design: the callback may still come */
	return st;
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

static pmix_status_t up_push_stdin(const pmix_proc_t *source,
				   const pmix_proc_t targets[], size_t ntargets,
				   const pmix_info_t directives[], size_t ndirs,
				   const pmix_byte_object_t *bo,
				   pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	bool eof = !bo || bo->size == 0;
	for (size_t i = 0; i < ndirs; i++)
		if (strcmp(directives[i].key, PMIX_IOF_COMPLETE) == 0 &&
		    PMIX_INFO_TRUE(&directives[i]))
			eof = true;

	struct stdin_op *op = calloc(1, sizeof(*op));
	if (!op)
		return PMIX_ERR_NOMEM;
	op->cbfunc = cbfunc;
	op->cbdata = cbdata;
	op->status = PMIX_SUCCESS;
	op->pending = 1; /* held until every chunk is queued */

	pthread_mutex_lock(&host.lock);
	for (size_t t = 0; t < ntargets; t++) {
		for (int j = 0; j < host.njobs; j++) {
			struct job *job = host.jobs[j];
			if (strcmp(job->nspace, targets[t].nspace) != 0 ||
			    job->ended)
				continue;
			for (uint32_t r = 0; r < job->np; r++) {
				struct rank *rk = &job->ranks[r];
				if (targets[t].rank != PMIX_RANK_WILDCARD &&
				    targets[t].rank != r)
					continue;
				/* before the start: queue until the pipe exists
				 */
				if (rk->in_closed ||
				    (job->started && rk->fd[0] < 0))
					continue;
				struct chunk *c = calloc(1, sizeof(*c));
				if (!c)
					continue;
				if (bo && bo->size > 0) {
					c->data = malloc(bo->size);
					if (!c->data) {
						free(c);
						continue;
					}
					memcpy(c->data, bo->bytes, bo->size);
					c->len = bo->size;
				}
				if (eof) {
					/* data (if any) then an EOF marker */
					if (c->data) {
						c->op = op;
						op->pending++;
						if (rk->in_tail)
							rk->in_tail->next = c;
						else
							rk->in_head = c;
						rk->in_tail = c;
						c = calloc(1, sizeof(*c));
						if (!c)
							continue;
					}
					rk->in_closed = true;
				}
				c->op = op;
				op->pending++;
				if (rk->in_tail)
					rk->in_tail->next = c;
				else
					rk->in_head = c;
				rk->in_tail = c;
			}
		}
	}
	bool done = --op->pending == 0;
	pthread_mutex_unlock(&host.lock);
	if (done) {
		/* nothing to write to (every target gone): already "delivered"
		 */
		free(op);
		return PMIX_OPERATION_SUCCEEDED;
	}
	wake_main();
	return PMIX_SUCCESS;
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
/* Output: PMIx_server_IOF_deliver                                          */

struct delivery {
	pmix_proc_t src; /* pitfall: 4.2.2 keeps the pointer, not a copy */
	pmix_byte_object_t bo; /* bytes owned */
	pmix_info_t *info;
	size_t ninfo;
};

static void delivery_done(pmix_status_t status, void *cbdata)
{
	struct delivery *d = cbdata;
	free(d->bo.bytes);
	if (d->info)
		PMIX_INFO_FREE(d->info, d->ninfo);
	free(d);
}

static void deliver(struct rank *rk, pmix_iof_channel_t ch, char *bytes,
		    size_t len)
{
	struct delivery *d = calloc(1, sizeof(*d));

	if (!d) {
		free(bytes);
		return;
	}
	d->bo.bytes = bytes;
	d->bo.size = len;
	d->ninfo = 1;
	PMIX_INFO_CREATE(d->info, d->ninfo);
	bool t = true, f = false;
	if (len == 0)
		PMIx_Info_load(&d->info[0], PMIX_IOF_COMPLETE, &t, PMIX_BOOL);
	else
		PMIx_Info_load(&d->info[0], PMIX_IOF_LOCAL_OUTPUT, &f,
			       PMIX_BOOL);
	PMIX_LOAD_PROCID(&d->src, rk->job->nspace, rk->id);
	pmix_status_t st = PMIx_server_IOF_deliver(&d->src, ch, &d->bo, d->info,
						   d->ninfo, delivery_done, d);
	if (st != PMIX_SUCCESS) {
		say("deliver %s.%u failed: %s", rk->job->nspace, rk->id,
		    PMIx_Error_string(st));
		delivery_done(st, d);
	}
}

/* ------------------------------------------------------------------------ */
/* Jobs                                                                     */

static struct job *job_parse(const char *spec, char *err, size_t errlen)
{
	const char *c1 = strchr(spec, ':');
	const char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
	if (!c1 || !c2 || c1 == spec || (size_t)(c1 - spec) > PMIX_MAX_NSLEN) {
		snprintf(err, errlen, "bad job spec '%s' (want NSPACE:NP:CMD)",
			 spec);
		return NULL;
	}
	char *end;
	unsigned long np = strtoul(c1 + 1, &end, 10);
	if (end != c2 || np == 0 || np > MAX_RANKS) {
		snprintf(err, errlen, "bad rank count in '%s' (1-%d)", spec,
			 MAX_RANKS);
		return NULL;
	}
	struct job *job = calloc(1, sizeof(*job));
	if (!job)
		return NULL;
	memcpy(job->nspace, spec, c1 - spec);
	job->np = np;
	job->cmd = strdup(c2 + 1);
	for (uint32_t r = 0; r < job->np; r++) {
		job->ranks[r].job = job;
		job->ranks[r].id = r;
		job->ranks[r].pid = -1;
		for (int i = 0; i < 3; i++)
			job->ranks[r].fd[i] = -1;
	}
	return job;
}

static int job_add(struct job *job)
{
	pthread_mutex_lock(&host.lock);
	int rc = host.njobs < MAX_JOBS ? 0 : -1;
	if (rc == 0)
		host.jobs[host.njobs++] = job;
	pthread_mutex_unlock(&host.lock);
	return rc;
}

static void notify(pmix_status_t code, const char *nspace, pmix_rank_t rank,
		   int exit_code)
{
	pmix_info_t *info;
	pmix_proc_t affected;
	bool t = true;
	size_t n = 4;

	PMIX_INFO_CREATE(info, n);
	PMIX_LOAD_PROCID(&affected, nspace, rank);
	PMIx_Info_load(&info[0], PMIX_EVENT_AFFECTED_PROC, &affected,
		       PMIX_PROC);
	PMIx_Info_load(&info[1], PMIX_EXIT_CODE, &exit_code, PMIX_INT);
	pmix_status_t ts = exit_code;
	PMIx_Info_load(&info[2], PMIX_JOB_TERM_STATUS, &ts, PMIX_STATUS);
	PMIx_Info_load(&info[3], PMIX_EVENT_NON_DEFAULT, &t, PMIX_BOOL);
	/* NULL cbfunc: the info is copied before this returns */
	pmix_status_t st = PMIx_Notify_event(code, &host.me, PMIX_RANGE_GLOBAL,
					     info, n, NULL, NULL);
	if (st != PMIX_SUCCESS && st != PMIX_OPERATION_SUCCEEDED)
		say("notify %s failed: %s", PMIx_Error_string(code),
		    PMIx_Error_string(st));
	PMIX_INFO_FREE(info, n);
}

static int job_register(struct job *job)
{
	struct waiter w;
	pmix_info_t *info;
	size_t n = 5;
	char peers[MAX_RANKS * 4 + 1] = "";
	char host_name[256] = "localhost";
	uint32_t np = job->np;

	gethostname(host_name, sizeof(host_name) - 1);
	for (uint32_t r = 0; r < np; r++)
		snprintf(peers + strlen(peers), sizeof(peers) - strlen(peers),
			 "%s%u", r ? "," : "", r);
	PMIX_INFO_CREATE(info, n);
	PMIx_Info_load(&info[0], PMIX_JOB_SIZE, &np, PMIX_UINT32);
	PMIx_Info_load(&info[1], PMIX_LOCAL_SIZE, &np, PMIX_UINT32);
	PMIx_Info_load(&info[2], PMIX_UNIV_SIZE, &np, PMIX_UINT32);
	PMIx_Info_load(&info[3], PMIX_LOCAL_PEERS, peers, PMIX_STRING);
	PMIx_Info_load(&info[4], PMIX_HOSTNAME, host_name, PMIX_STRING);
	waiter_init(&w);
	pmix_status_t st = PMIx_server_register_nspace(job->nspace, np, info, n,
						       waiter_cb, &w);
	if (st == PMIX_SUCCESS)
		st = waiter_wait(&w);
	PMIX_INFO_FREE(info, n);
	if (st != PMIX_SUCCESS && st != PMIX_OPERATION_SUCCEEDED) {
		say("register_nspace %s: %s", job->nspace,
		    PMIx_Error_string(st));
		return -1;
	}
	for (uint32_t r = 0; r < np; r++) {
		pmix_proc_t p;
		PMIX_LOAD_PROCID(&p, job->nspace, r);
		waiter_init(&w);
		st = PMIx_server_register_client(&p, getuid(), getgid(), NULL,
						 waiter_cb, &w);
		if (st == PMIX_SUCCESS)
			st = waiter_wait(&w);
		if (st != PMIX_SUCCESS && st != PMIX_OPERATION_SUCCEEDED) {
			say("register_client %s.%u: %s", job->nspace, r,
			    PMIx_Error_string(st));
			return -1;
		}
	}
	pthread_mutex_lock(&host.lock);
	job->registered = true;
	pthread_mutex_unlock(&host.lock);
	say("job %s registered", job->nspace);
	notify(PMIX_EVENT_JOB_START, job->nspace, PMIX_RANK_WILDCARD, 0);
	return 0;
}

static int rank_spawn(struct rank *rk)
{
	struct job *job = rk->job;
	int in[2], out[2], errp[2];
	char **env = NULL;
	pmix_proc_t p;

	PMIX_LOAD_PROCID(&p, job->nspace, rk->id);
	pmix_status_t st = PMIx_server_setup_fork(&p, &env);
	if (st != PMIX_SUCCESS) {
		say("setup_fork %s.%u: %s", job->nspace, rk->id,
		    PMIx_Error_string(st));
		return -1;
	}
	if (pipe2(in, O_CLOEXEC) < 0)
		goto out_free_env;
	if (pipe2(out, O_CLOEXEC) < 0)
		goto out_close_in;
	if (pipe2(errp, O_CLOEXEC) < 0)
		goto out_close_out;
	pid_t pid = fork();
	if (pid < 0)
		goto out_close_err;
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		dup2(errp[1], 2);
		for (char **e = env; e && *e; e++)
			putenv(*e);
		signal(SIGPIPE, SIG_DFL);
		/* like a real launcher: the rank must not inherit the server's
		 * sockets (a tool's connection would outlive a killed server)
		 */
		close_range(3, ~0U, 0);
		execl("/bin/sh", "sh", "-c", job->cmd, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	close(errp[1]);
	rk->pid = pid;
	rk->fd[0] = in[1];
	rk->fd[1] = out[0];
	rk->fd[2] = errp[0];
	for (int i = 0; i < 3; i++)
		fcntl(rk->fd[i], F_SETFL,
		      fcntl(rk->fd[i], F_GETFL) | O_NONBLOCK);
	PMIX_ARGV_FREE(env);
	return 0;

out_close_err:
	close(errp[0]);
	close(errp[1]);
out_close_out:
	close(out[0]);
	close(out[1]);
out_close_in:
	close(in[0]);
	close(in[1]);
out_free_env:
	PMIX_ARGV_FREE(env);
	say("spawn %s.%u: %s", job->nspace, rk->id, strerror(errno));
	return -1;
}

static void job_start(struct job *job)
{
	for (uint32_t r = 0; r < job->np; r++)
		if (rank_spawn(&job->ranks[r]) < 0) {
			job->ranks[r].exited = true;
			job->ranks[r].code = 127;
		}
	pthread_mutex_lock(&host.lock);
	job->started = true;
	pthread_mutex_unlock(&host.lock);
	say("job %s started", job->nspace);
}

/* Complete every op of a chunk list (stdin dropped: rank gone). */
static void chunks_fail(struct chunk *c, pmix_status_t why,
			struct stdin_op **done, int *ndone)
{
	while (c) {
		struct chunk *next = c->next;
		c->op->status = why;
		if (--c->op->pending == 0)
			done[(*ndone)++] = c->op;
		free(c->data);
		free(c);
		c = next;
	}
}

static void op_finish(struct stdin_op *op)
{
	if (op->cbfunc)
		op->cbfunc(op->status, op->cbdata);
	free(op);
}

/* Write queued stdin to @rk; called when its pipe is writable. */
static void rank_write_stdin(struct rank *rk)
{
	struct stdin_op *done[256];
	int ndone = 0;

	pthread_mutex_lock(&host.lock);
	while (rk->in_head && ndone < 255) {
		struct chunk *c = rk->in_head;
		if (!c->data) { /* EOF marker */
			close(rk->fd[0]);
			rk->fd[0] = -1;
			rk->in_head = c->next;
			if (!rk->in_head)
				rk->in_tail = NULL;
			if (--c->op->pending == 0)
				done[ndone++] = c->op;
			free(c);
			chunks_fail(rk->in_head, PMIX_ERR_IOF_COMPLETE, done,
				    &ndone);
			rk->in_head = rk->in_tail = NULL;
			break;
		}
		ssize_t n = write(rk->fd[0], c->data + c->off, c->len - c->off);
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0) { /* EPIPE: the rank closed its stdin */
			close(rk->fd[0]);
			rk->fd[0] = -1;
			rk->in_closed = true;
			chunks_fail(rk->in_head, PMIX_ERR_UNREACH, done,
				    &ndone);
			rk->in_head = rk->in_tail = NULL;
			break;
		}
		c->off += n;
		if (c->off < c->len)
			continue;
		rk->in_head = c->next;
		if (!rk->in_head)
			rk->in_tail = NULL;
		if (--c->op->pending == 0)
			done[ndone++] = c->op;
		free(c->data);
		free(c);
	}
	pthread_mutex_unlock(&host.lock);
	for (int i = 0; i < ndone; i++)
		op_finish(done[i]);
}

static void rank_read(struct rank *rk, int which)
{
	char *buf = malloc(READ_CHUNK);
	if (!buf)
		return;
	ssize_t n = read(rk->fd[which], buf, READ_CHUNK);
	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		free(buf);
		return;
	}
	pmix_iof_channel_t ch =
	    which == 1 ? PMIX_FWD_STDOUT_CHANNEL : PMIX_FWD_STDERR_CHANNEL;
	if (n <= 0) {
		free(buf);
		close(rk->fd[which]);
		rk->fd[which] = -1;
		deliver(rk, ch, NULL, 0);
		return;
	}
	deliver(rk, ch, buf, n);
}

static void reap(void)
{
	int status;
	pid_t pid;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (int j = 0; j < host.njobs; j++)
			for (uint32_t r = 0; r < host.jobs[j]->np; r++) {
				struct rank *rk = &host.jobs[j]->ranks[r];
				if (rk->pid != pid)
					continue;
				rk->exited = true;
				rk->code = WIFEXITED(status)
					       ? WEXITSTATUS(status)
					       : 128 + WTERMSIG(status);
			}
	}
}

/* A job ends once every rank exited and its output pipes reached EOF. */
static void job_check_end(struct job *job)
{
	if (!job->started || job->ended)
		return;
	int code = 0;
	for (uint32_t r = 0; r < job->np; r++) {
		struct rank *rk = &job->ranks[r];
		if (!rk->exited || rk->fd[1] >= 0 || rk->fd[2] >= 0)
			return;
		if (code == 0)
			code = rk->code;
	}
	for (uint32_t r = 0; r < job->np; r++) {
		struct rank *rk = &job->ranks[r];
		struct stdin_op *done[256];
		int ndone = 0;
		pthread_mutex_lock(&host.lock);
		if (rk->fd[0] >= 0)
			close(rk->fd[0]);
		rk->fd[0] = -1;
		rk->in_closed = true;
		struct chunk *c = rk->in_head;
		rk->in_head = rk->in_tail = NULL;
		chunks_fail(c, PMIX_ERR_UNREACH, done, &ndone);
		pthread_mutex_unlock(&host.lock);
		for (int i = 0; i < ndone; i++)
			op_finish(done[i]);
		notify(PMIX_EVENT_PROC_TERMINATED, job->nspace, r, rk->code);
	}
	pthread_mutex_lock(&host.lock);
	job->ended = true;
	pthread_mutex_unlock(&host.lock);
	notify(PMIX_EVENT_JOB_END, job->nspace, PMIX_RANK_WILDCARD, code);
	say("job %s ended %d", job->nspace, code);
}

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
			pulled = job->pulled;
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
