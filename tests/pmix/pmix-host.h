/* SPDX-License-Identifier: MIT */
/* pmix-host internals shared by pmix-host.c (server, up-calls, main loop)
 * and pmix-host-job.c (jobs, ranks, output, stdin).  See pmix-host.c. */
#ifndef IOFS_TESTS_PMIX_HOST_H
#define IOFS_TESTS_PMIX_HOST_H

#include <errno.h>
#include <fcntl.h>
#include <pmix.h>
#include <pmix_server.h>
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
	bool pulled_all; /* under lock: a tool pulled the empty nspace (all) */
	bool quit;
	const char *control;
	int control_fd;
	struct job *jobs[MAX_JOBS];
	int njobs;
	int ntools;
	pmix_proc_t me;
};

/* libpmix's module up-calls carry no context: the one host of this test
 * program (defined in pmix-host.c). */
extern struct host host;

void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
double now_s(void);
void wake_main(void);
pmix_status_t up_push_stdin(const pmix_proc_t *source,
			    const pmix_proc_t targets[], size_t ntargets,
			    const pmix_info_t directives[], size_t ndirs,
			    const pmix_byte_object_t *bo,
			    pmix_op_cbfunc_t cbfunc, void *cbdata);
struct job *job_parse(const char *spec, char *err, size_t errlen);
int job_add(struct job *job);
int job_register(struct job *job);
void job_start(struct job *job);
void job_check_end(struct job *job);
void rank_read(struct rank *rk, int which);
void rank_write_stdin(struct rank *rk);
void reap(void);

#endif /* IOFS_TESTS_PMIX_HOST_H */
