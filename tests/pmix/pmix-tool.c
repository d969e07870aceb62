/* SPDX-License-Identifier: MIT */
/*
 * pmix-tool: a test-only standalone PMIx tool, to check pmix-host (and the
 * libpmix pitfalls) without iofs.  It connects to SERVER (a URI, or
 * file:PATH), queries PMIX_QUERY_NAMESPACES every 200 ms, pulls stdout and
 * stderr of every rank of each new nspace, and appends the bytes to
 * OUTDIR/NSPACE.RANK.{stdout,stderr}.  It logs one line per event on stdout:
 *   "ns NSPACE", "pulled NSPACE", "complete NSPACE RANK CHANNEL",
 *   "event NAME NSPACE RANK CODE" (NAME: see status_name()),
 *   "pushed STATUS", "lost".
 * --push NSPACE:RANK:FILE pushes FILE's bytes then EOF to that rank (RANK
 * may be '*'), once the nspace was seen; non-blocking with a callback.
 * --exit-after-end N exits 0 after N JOB_END events.
 *
 * Everything the progress thread reports is handed to the main thread
 * through a pipe; the main thread does the blocking calls.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pmix_tool.h>

struct tool {
	int pipe[2];
	const char *outdir;
	pthread_mutex_t lock;
};

/* PMIx's IOF callback carries no context: one static tool. */
static struct tool tool = {.pipe = {-1, -1}, .lock = PTHREAD_MUTEX_INITIALIZER};

static void post(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void post(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (n > (int)sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	ssize_t w = write(tool.pipe[1], line, n);
	(void)w;
}

/* Names that do not depend on the libpmix version: PMIx_Error_string says
 * "PROC TERMINATED" / "SUCCESS" in 4.2.2 and "PMIX_EVENT_PROC_TERMINATED" /
 * "PMIX_SUCCESS" in 5.0.7. */
static const char *status_name(pmix_status_t st)
{
	switch (st) {
	case PMIX_SUCCESS:
		return "SUCCESS";
	case PMIX_EVENT_PROC_TERMINATED:
		return "PROC_TERMINATED";
	case PMIX_EVENT_JOB_END:
		return "JOB_END";
	default:
		return PMIx_Error_string(st);
	}
}

static void on_iof(size_t iofhdlr, pmix_iof_channel_t channel,
		   pmix_proc_t *source, pmix_byte_object_t *payload,
		   pmix_info_t info[], size_t ninfo)
{
	char path[4096];
	bool complete = false;

	for (size_t i = 0; i < ninfo; i++)
		if (strcmp(info[i].key, PMIX_IOF_COMPLETE) == 0 &&
		    PMIX_INFO_TRUE(&info[i]))
			complete = true;
	const char *ch =
	    channel & PMIX_FWD_STDOUT_CHANNEL ? "stdout" : "stderr";
	if (payload && payload->size > 0) {
		snprintf(path, sizeof(path), "%s/%s.%u.%s", tool.outdir,
			 source->nspace, source->rank, ch);
		/* a plain append from the progress thread: test-only tool */
		pthread_mutex_lock(&tool.lock);
		int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) {
			ssize_t w = write(fd, payload->bytes, payload->size);
			(void)w;
			close(fd);
		}
		pthread_mutex_unlock(&tool.lock);
	} else {
		complete = true;
	}
	if (complete)
		post("complete %s %u %s", source->nspace, source->rank, ch);
}

static void on_event(size_t id, pmix_status_t status, const pmix_proc_t *source,
		     pmix_info_t info[], size_t ninfo, pmix_info_t *results,
		     size_t nresults,
		     pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
	const char *ns = "-";
	long rank = -1;
	int code = -1;
	for (size_t i = 0; i < ninfo; i++) {
		if (strcmp(info[i].key, PMIX_EVENT_AFFECTED_PROC) == 0 &&
		    info[i].value.type == PMIX_PROC) {
			ns = info[i].value.data.proc->nspace;
			rank =
			    info[i].value.data.proc->rank == PMIX_RANK_WILDCARD
				? -2
				: (long)info[i].value.data.proc->rank;
		} else if (strcmp(info[i].key, PMIX_EXIT_CODE) == 0 &&
			   info[i].value.type == PMIX_INT) {
			code = info[i].value.data.integer;
		}
	}
	if (status == PMIX_ERR_LOST_CONNECTION || status == PMIX_ERR_UNREACH)
		post("lost");
	else if (status == PMIX_EVENT_JOB_END)
		post("end %s %d", ns, code);
	else
		post("event %s %s %ld %d", status_name(status), ns, rank,
		     code);
	if (cbfunc)
		cbfunc(PMIX_SUCCESS, NULL, 0, NULL, NULL, cbdata);
}

static void on_reg(pmix_status_t status, size_t refid, void *cbdata)
{
	const char *what = cbdata;
	post("registered %s %s", what, status_name(status));
}

struct push {
	pmix_byte_object_t bo;
	pmix_info_t *info;
	size_t ninfo;
};

static void on_pushed(pmix_status_t status, void *cbdata)
{
	struct push *p = cbdata;
	free(p->bo.bytes);
	if (p->info)
		PMIX_INFO_FREE(p->info, p->ninfo);
	free(p);
	post("pushed %s", status_name(status));
}

static int push(const pmix_proc_t *target, char *bytes, size_t len, bool eof)
{
	struct push *p = calloc(1, sizeof(*p));
	bool t = true;
	if (!p)
		return -1;
	p->bo.bytes = bytes;
	p->bo.size = len;
	if (eof) {
		p->ninfo = 1;
		PMIX_INFO_CREATE(p->info, 1);
		PMIx_Info_load(&p->info[0], PMIX_IOF_COMPLETE, &t, PMIX_BOOL);
	}
	/* pitfall: the blocking form (NULL cbfunc) hangs in 4.2.2 */
	pmix_status_t st =
	    PMIx_IOF_push(target, 1, &p->bo, p->info, p->ninfo, on_pushed, p);
	if (st != PMIX_SUCCESS) {
		printf("push failed %s\n", PMIx_Error_string(st));
		on_pushed(st, p);
		return -1;
	}
	return 0;
}

#define MAX_NS 64

int main(int argc, char **argv)
{
	const char *server = NULL, *push_spec = NULL;
	int exit_after = 0, ends = 0;
	char seen[MAX_NS][PMIX_MAX_NSLEN + 1];
	int nseen = 0;
	bool pushed = false;

	setvbuf(stdout, NULL, _IOLBF, 0);
	tool.outdir = ".";
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--server") == 0)
			server = argv[i + 1];
		else if (strcmp(argv[i], "--outdir") == 0)
			tool.outdir = argv[i + 1];
		else if (strcmp(argv[i], "--push") == 0)
			push_spec = argv[i + 1];
		else if (strcmp(argv[i], "--exit-after-end") == 0)
			exit_after = atoi(argv[i + 1]);
	}
	if (!server) {
		fprintf(stderr, "usage: pmix-tool --server URI|file:PATH "
				"[--outdir DIR] [--push NS:RANK:FILE] "
				"[--exit-after-end N]\n");
		return 2;
	}
	if (pipe2(tool.pipe, O_CLOEXEC) < 0)
		return 1;

	pmix_info_t *info;
	size_t ninfo = 2;
	uint32_t retries = 0;
	PMIX_INFO_CREATE(info, ninfo);
	if (strncmp(server, "file:", 5) == 0)
		PMIx_Info_load(&info[0], PMIX_TOOL_ATTACHMENT_FILE, server + 5,
			       PMIX_STRING);
	else
		PMIx_Info_load(&info[0], PMIX_SERVER_URI, server, PMIX_STRING);
	PMIx_Info_load(&info[1], PMIX_CONNECT_MAX_RETRIES, &retries,
		       PMIX_UINT32);
	pmix_proc_t me;
	pmix_status_t st = PMIx_tool_init(&me, info, ninfo);
	PMIX_INFO_FREE(info, ninfo);
	if (st != PMIX_SUCCESS) {
		printf("tool_init failed %s\n", PMIx_Error_string(st));
		return 1;
	}
	printf("connected %s.%u\n", me.nspace, me.rank);

	pmix_status_t codes[] = {PMIX_EVENT_JOB_END, PMIX_EVENT_JOB_START,
				 PMIX_EVENT_PROC_TERMINATED,
				 PMIX_ERR_LOST_CONNECTION, PMIX_ERR_UNREACH};
	PMIx_Register_event_handler(codes, 5, NULL, 0, on_event, on_reg,
				    (void *)"events");
	PMIx_Register_event_handler(NULL, 0, NULL, 0, on_event, on_reg,
				    (void *)"default");

	int rc = 0;
	for (;;) {
		pmix_query_t *q;
		pmix_info_t *res = NULL;
		size_t nres = 0;
		PMIX_QUERY_CREATE(q, 1);
		PMIX_ARGV_APPEND(st, q[0].keys, PMIX_QUERY_NAMESPACES);
		st = PMIx_Query_info(q, 1, &res, &nres);
		PMIX_QUERY_FREE(q, 1);
		if (st == PMIX_SUCCESS && nres > 0 &&
		    res[0].value.type == PMIX_STRING) {
			char *list = strdup(res[0].value.data.string);
			for (char *s, *tok = strtok_r(list, ",", &s); tok;
			     tok = strtok_r(NULL, ",", &s)) {
				bool known = false;
				for (int k = 0; k < nseen; k++)
					known |= strcmp(seen[k], tok) == 0;
				if (known || nseen == MAX_NS)
					continue;
				snprintf(seen[nseen++], PMIX_MAX_NSLEN + 1,
					 "%s", tok);
				printf("ns %s\n", tok);
				pmix_proc_t all;
				PMIX_LOAD_PROCID(&all, tok, PMIX_RANK_WILDCARD);
				st = PMIx_IOF_pull(&all, 1, NULL, 0,
						   PMIX_FWD_STDOUT_CHANNEL |
						       PMIX_FWD_STDERR_CHANNEL,
						   on_iof, on_reg,
						   (void *)"pull");
				if (st != PMIX_SUCCESS)
					printf("pull failed %s\n",
					       PMIx_Error_string(st));
			}
			free(list);
		} else if (st != PMIX_SUCCESS && st != PMIX_ERR_NOT_FOUND) {
			printf("query %s\n", PMIx_Error_string(st));
		}
		if (res)
			PMIX_INFO_FREE(res, nres);

		if (push_spec && !pushed) {
			char ns[PMIX_MAX_NSLEN + 1], rk[16], file[1024];
			if (sscanf(push_spec, "%255[^:]:%15[^:]:%1023s", ns, rk,
				   file) == 3) {
				bool known = false;
				for (int k = 0; k < nseen; k++)
					known |= strcmp(seen[k], ns) == 0;
				if (known) {
					pmix_proc_t tgt;
					PMIX_LOAD_PROCID(
					    &tgt, ns,
					    rk[0] == '*'
						? PMIX_RANK_WILDCARD
						: (pmix_rank_t)atoi(rk));
					FILE *f = fopen(file, "r");
					char *buf = malloc(1 << 20);
					size_t n =
					    f && buf ? fread(buf, 1, 1 << 20, f)
						     : 0;
					if (f)
						fclose(f);
					push(&tgt, buf, n, false);
					push(&tgt, NULL, 0, true);
					pushed = true;
				}
			}
		}

		struct pollfd pfd = {.fd = tool.pipe[0], .events = POLLIN};
		if (poll(&pfd, 1, 200) > 0) {
			char buf[4096];
			ssize_t n = read(tool.pipe[0], buf, sizeof(buf));
			if (n > 0) {
				fwrite(buf, 1, n, stdout);
				if (n >= 4 && memcmp(buf, "end ", 4) == 0)
					ends++;
				for (ssize_t i = 0; i + 6 < n; i++)
					if (memcmp(buf + i, "lost\n", 5) == 0 &&
					    (i == 0 || buf[i - 1] == '\n'))
						goto out_finalize;
				for (char *p = buf;
				     (p = memmem(p, buf + n - p, "\nend ", 5));
				     p += 5)
					ends++;
			}
		}
		if (exit_after > 0 && ends >= exit_after)
			break;
	}
out_finalize:
#if PMIX_NUMERIC_VERSION >= 0x00050000
	/* libpmix 5.0.7's finalize locks a mutex in its freed event base
	 * while the server is connected: it crashes or hangs under
	 * MALLOC_PERTURB_ (docs/pmix.md, libpmix 5 pitfall 1).  Exit instead;
	 * the server sees the connection close. */
	return rc;
#else
	PMIx_tool_finalize();
	return rc;
#endif
}
