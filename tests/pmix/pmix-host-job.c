/* SPDX-License-Identifier: MIT */
/*
 * pmix-host, jobs: nspace/client registration, fork/exec of the ranks with
 * pipes, PMIx_server_IOF_deliver of their output, the stdin queue filled by
 * the push_stdin up-call (progress thread: queue and wake only) and drained
 * by the main loop, PROC_TERMINATED / JOB_END.  See pmix-host.c.
 */
#include "pmix-host.h"

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

/* Queue @c (one more piece of @op) on @rk's stdin; host.lock held. */
static void chunk_append(struct rank *rk, struct chunk *c, struct stdin_op *op)
{
	c->op = op;
	op->pending++;
	if (rk->in_tail)
		rk->in_tail->next = c;
	else
		rk->in_head = c;
	rk->in_tail = c;
}

pmix_status_t up_push_stdin(const pmix_proc_t *source,
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

	/* the tests count pushes by target: "push NSPACE:RANK|* BYTES[ eof]" */
	for (size_t t = 0; t < ntargets; t++) {
		if (targets[t].rank == PMIX_RANK_WILDCARD)
			say("push %s:* %zu%s", targets[t].nspace,
			    bo ? bo->size : 0, eof ? " eof" : "");
		else
			say("push %s:%u %zu%s", targets[t].nspace,
			    targets[t].rank, bo ? bo->size : 0,
			    eof ? " eof" : "");
	}
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
						chunk_append(rk, c, op);
						c = calloc(1, sizeof(*c));
						if (!c)
							continue;
					}
					rk->in_closed = true;
				}
				chunk_append(rk, c, op);
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

struct job *job_parse(const char *spec, char *err, size_t errlen)
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

int job_add(struct job *job)
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

int job_register(struct job *job)
{
	struct waiter w;
	pmix_info_t *info, *app;
	pmix_data_array_t apps;
	uint32_t appnum = 0;
	size_t n = 6;
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
	/* its one app's command line, as PRRTE registers it (argv joined
	 * by spaces, in the app's info) */
	PMIX_INFO_CREATE(app, 2);
	PMIx_Info_load(&app[0], PMIX_APPNUM, &appnum, PMIX_UINT32);
	PMIx_Info_load(&app[1], PMIX_APP_ARGV, job->cmd, PMIX_STRING);
	apps = (pmix_data_array_t){.type = PMIX_INFO, .size = 2, .array = app};
	PMIx_Info_load(&info[5], PMIX_APP_INFO_ARRAY, &apps, PMIX_DATA_ARRAY);
	PMIX_INFO_FREE(app, 2);
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

void job_start(struct job *job)
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
void rank_write_stdin(struct rank *rk)
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

void rank_read(struct rank *rk, int which)
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

void reap(void)
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
void job_check_end(struct job *job)
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
