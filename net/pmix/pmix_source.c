/* SPDX-License-Identifier: MIT */
/*
 * PMIx source: attach and lifecycle.  pmix_source_new() (PMIx_tool_init,
 * the PRRTE check, the event and all-namespaces pull registrations, the
 * first namespace query and the requery timer) and pmix_source_free()
 * (finalize or detach, reclaiming what PMIx never answered); the
 * source's references and log; the one live source (`owner`).
 *
 * Threads.  Everything here runs on the daemon's loop thread except
 * ps_owner_get(), ps_owner_ready_one(), ps_ref(), ps_unref() and ps_log(),
 * which the progress-thread callbacks call too (pt_* in pmix_event.c,
 * pmix_pull.c; ps_ref/ps_unref through pmix_msg.c).  The last ps_unref()
 * frees the source, on whichever thread drops it.
 *
 * The progress-thread rule (PMIx_server_IOF_deliver(3)): every PMIx
 * callback (pt_*, in pmix_event.c, pmix_pull.c, pmix_discover.c,
 * pmix_size.c, pmix_push.c) copies what it was handed into a struct ps_msg,
 * then router_defer()s it (ps_post, pmix_msg.c); ps_dispatch() does the
 * work on the daemon's loop thread.  No pt_* function calls the router
 * (other than router_defer) or blocks.
 *
 * libpmix is one connection per process and its IOF and event callbacks
 * carry no context pointer, so the one live source is found through
 * `owner` below: the single file-static of the PMIx source, forced by
 * that API.
 */
#include <errno.h>
#include <event2/event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "net/pmix/pmix_source_i.h"

static struct {
	pthread_mutex_t lock;
	pmix_source_t *owner; /* NULL outside pmix_source_new..free */
	bool busy;	      /* a source exists (PMIx_tool_init'ed) */
	/* a source left connected at shutdown (no PMIx_tool_finalize, see
	 * pmix_source_free): kept reachable until the process exits */
	pmix_source_t *detached;
	/* pmix_source_new waits (bounded) for the event handler and the
	 * all-namespaces pull to be registered: a job that starts and ends
	 * right after attach must not slip past them */
	pthread_cond_t ready;
	unsigned ready_count;
} owner = {.lock = PTHREAD_MUTEX_INITIALIZER,
	   .ready = PTHREAD_COND_INITIALIZER};

/* Progress thread: one of the registrations pmix_source_new waits for is
 * answered. */
void ps_owner_ready_one(void)
{
	pthread_mutex_lock(&owner.lock);
	owner.ready_count++;
	pthread_cond_broadcast(&owner.ready);
	pthread_mutex_unlock(&owner.lock);
}

/* Wait until @n registrations were answered, at most PS_READY_WAIT_MS. */
static void ready_wait(pmix_source_t *ps, unsigned n)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += PS_READY_WAIT_MS / 1000;
	pthread_mutex_lock(&owner.lock);
	while (owner.ready_count < n &&
	       pthread_cond_timedwait(&owner.ready, &owner.lock, &until) == 0)
		;
	if (owner.ready_count < n)
		ps_log(ps, LOG_WARNING,
		       "event/pull registration not answered in %d ms: going "
		       "on (a job ending right now may be missed)",
		       PS_READY_WAIT_MS);
	pthread_mutex_unlock(&owner.lock);
}

void ps_log(pmix_source_t *ps, int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	iofs_vlogf(ps->log, level, "pmix", fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------------------------ */
/* References                                                                */

static void ps_destroy(pmix_source_t *ps)
{
	while (ps->jobs) {
		struct ps_job *job = ps->jobs;
		ps->jobs = job->next;
		ps_job_free(job);
	}
	if (ps->requery_ev)
		event_free(ps->requery_ev);
	if (ps->xoff_ev)
		event_free(ps->xoff_ev);
	pthread_mutex_destroy(&ps->lock);
	free(ps);
}

void ps_ref(pmix_source_t *ps)
{
	atomic_fetch_add(&ps->refs, 1);
}

void ps_unref(pmix_source_t *ps)
{
	if (atomic_fetch_sub(&ps->refs, 1) == 1)
		ps_destroy(ps);
}

/* The live source, with a reference, or NULL (progress thread). */
pmix_source_t *ps_owner_get(void)
{
	pmix_source_t *ps;

	pthread_mutex_lock(&owner.lock);
	ps = owner.owner;
	if (ps)
		ps_ref(ps);
	pthread_mutex_unlock(&owner.lock);
	return ps;
}

static void on_server_xon(evutil_socket_t fd, short what, void *arg)
{
	ps_flow_server_xon(arg);
}

/* ------------------------------------------------------------------------ */
/* Public API                                                                */

static int server_info(const char *server, pmix_info_t *info, char *err,
		       size_t errlen)
{
	bool t = true;
	struct stat st;

	if (!server || !*server) {
		snprintf(err, errlen,
			 "--pmix: empty SERVER (want a URI, "
			 "pid:PID, 'system' or a rendezvous file)");
		return -EINVAL;
	}
	if (strcmp(server, "system") == 0) {
		PMIx_Info_load(&info[0], PMIX_CONNECT_TO_SYSTEM, &t, PMIX_BOOL);
		return 1;
	}
	if (strncmp(server, "pid:", 4) == 0) {
		char *end;
		errno = 0;
		long pid = strtol(server + 4, &end, 10);
		if (errno || end == server + 4 || *end || pid <= 0 ||
		    pid > 0x7fffffffL) {
			snprintf(err, errlen,
				 "--pmix %s: bad pid (want pid:PID, e.g. "
				 "pid:$(pgrep -o prterun))",
				 server);
			return -EINVAL;
		}
		pid_t p = pid;
		PMIx_Info_load(&info[0], PMIX_SERVER_PIDINFO, &p, PMIX_PID);
		return 1;
	}
	if (strstr(server, "://")) {
		PMIx_Info_load(&info[0], PMIX_SERVER_URI, server, PMIX_STRING);
		return 1;
	}
	const char *path =
	    strncmp(server, "file:", 5) == 0 ? server + 5 : server;
	if (stat(path, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen,
			 "--pmix %s: not a URI (e.g. 'prterun.0;tcp4://"
			 "127.0.0.1:4711'), pid:PID, 'system', or an existing "
			 "rendezvous/attachment file",
			 server);
		return -ENOENT;
	}
	PMIx_Info_load(&info[0], PMIX_TOOL_ATTACHMENT_FILE, path, PMIX_STRING);
	return 1;
}

/* The source before PMIx_tool_init: NULL on ENOMEM. */
static pmix_source_t *source_alloc(struct event_base *base, router_t *r,
				   iofs_log_t *log)
{
	pmix_source_t *ps = calloc(1, sizeof(*ps));

	if (!ps)
		return NULL;
	atomic_init(&ps->refs, 1);
	ps->base = base;
	ps->r = r;
	ps->log = log;
	pthread_mutex_init(&ps->lock, NULL);
	ps->requery_ev = event_new(base, -1, EV_PERSIST, ps_discover_tick, ps);
	ps->xoff_ev = evtimer_new(base, on_server_xon, ps);
	if (!ps->requery_ev || !ps->xoff_ev) {
		ps_destroy(ps);
		return NULL;
	}
	return ps;
}

/* Just attached: say so, and learn whether the server is PRRTE. */
static void attached(pmix_source_t *ps, const char *server)
{
	pthread_mutex_lock(&owner.lock);
	owner.owner = ps;
	pthread_mutex_unlock(&owner.lock);
	ps_log(ps, LOG_INFO, "attached to %s as tool %s.%u (%s)", server,
	       ps->me.nspace, ps->me.rank, PMIx_Get_version());
	/* PRRTE names its tools after itself ("prte-<host>-<pid>@N",
	 * "prterun-..."; libpmix servers say "tool-..."), and PRRTE 3.0.8
	 * (measured, docs/pmix.md) loses the connection on a stdin push
	 * larger than its PRTE_IOF_BASE_MSG_MAX (4096) and never delivers a
	 * push to the wildcard rank: chunk pushes, push rank by rank. */
	if (strncmp(ps->me.nspace, "prte", 4) == 0) {
		ps->prrte = true;
		ps->push_max = PS_PRRTE_PUSH_MAX;
		ps_log(ps, LOG_INFO,
		       "the server is PRRTE: stdin goes in pushes of at most "
		       "%d bytes, a job's stdin rank by rank",
		       PS_PRRTE_PUSH_MAX);
	}
}

/* Register for events and output (waiting, bounded, for both to be
 * answered), then start discovery. */
static void start(pmix_source_t *ps)
{
	bool evreg;

	pthread_mutex_lock(&owner.lock);
	owner.ready_count = 0;
	pthread_mutex_unlock(&owner.lock);
	evreg = ps_event_register(ps);
	ps_pull_all_start(ps);
	ready_wait(ps, evreg + (ps->pull_all == PS_PULL_ALL_PENDING));
	ps_discover_query(ps);
	struct timeval tv = {.tv_sec = 0, .tv_usec = PS_REQUERY_MS * 1000};
	event_add(ps->requery_ev, &tv);
}

int pmix_source_new(struct event_base *base, router_t *r, iofs_log_t *log,
		    const char *server, char *err, size_t errlen,
		    pmix_source_t **out)
{
	pmix_info_t *info;
	pmix_source_t *ps;
	uint32_t retries = 0;
	pmix_status_t st;
	int n, rc;

	if (!base || !r || !out)
		return -EINVAL;
	*out = NULL;
	PMIX_INFO_CREATE(info, 2);
	if (!info)
		return -ENOMEM;
	n = server_info(server, info, err, errlen);
	if (n < 0) {
		rc = n;
		goto out_free_info;
	}
	/* pitfall: with retries the tool reconnects silently and blocking
	 * calls hang instead of reporting the server lost */
	PMIx_Info_load(&info[n++], PMIX_CONNECT_MAX_RETRIES, &retries,
		       PMIX_UINT32);

	pthread_mutex_lock(&owner.lock);
	rc = owner.busy ? -EBUSY : 0;
	owner.busy = true;
	pthread_mutex_unlock(&owner.lock);
	if (rc) {
		snprintf(err, errlen,
			 "--pmix: only one PMIx server per iofs "
			 "(libpmix is one connection per process)");
		goto out_free_info;
	}
	rc = -ENOMEM;
	ps = source_alloc(base, r, log);
	if (!ps)
		goto out_release_busy;

	st = PMIx_tool_init(&ps->me, info, n);
	if (st != PMIX_SUCCESS) {
		snprintf(err, errlen,
			 "--pmix %s: cannot attach to the PMIx server: %s%s",
			 server, PMIx_Error_string(st),
			 strncmp(server, "pid:", 4) == 0 ||
				 strcmp(server, "system") == 0
			     ? " (is it running, with tool support, and "
			       "is TMPDIR the one it uses?)"
			     : " (is it running, with tool support?)");
		rc = -ECONNREFUSED;
		goto out_destroy;
	}
	attached(ps, server);
	start(ps);
	PMIX_INFO_FREE(info, 2);
	*out = ps;
	return 0;

out_destroy:
	ps_destroy(ps);
out_release_busy:
	pthread_mutex_lock(&owner.lock);
	owner.busy = false;
	pthread_mutex_unlock(&owner.lock);
out_free_info:
	PMIX_INFO_FREE(info, 2);
	return rc;
}

/*
 * libpmix 5 (5.0.7 measured; fixed only on openpmix master, commit
 * 5fc2e3ded "Do not delete a peer's events after the base they were on is
 * gone") crashes in PMIx_tool_finalize while the server connection is up:
 * it frees its event base, then releases the server peer, whose destructor
 * event_del()s the recv event and so locks a mutex inside the freed base
 * (SIGSEGV in pthread_mutex_lock under MALLOC_PERTURB_, docs/pmix.md).  So
 * with libpmix >= 5 and the server still there, iofs does not finalize: it
 * leaves the connection to the process exit (the server sees the tool's
 * socket close), silences every callback (owner NULL, ps->detached) and
 * keeps the source and the operations PMIx still holds reachable.
 */
static bool finalize_is_safe(const pmix_source_t *ps)
{
#if PMIX_NUMERIC_VERSION >= 0x00050000
	return ps->lost;
#else
	(void)ps;
	return true;
#endif
}

void pmix_source_free(pmix_source_t *ps)
{
	struct ps_msg *list;

	if (!ps)
		return;
	pthread_mutex_lock(&owner.lock);
	owner.owner = NULL; /* PMIx callbacks from here on do nothing */
	pthread_mutex_unlock(&owner.lock);
	event_del(ps->requery_ev);
	event_del(ps->xoff_ev);
	for (struct ps_job *job = ps->jobs; job; job = job->next)
		ps_job_lost(job);
	ps->closing = true;
	for (struct ps_job *job = ps->jobs; job; job = job->next)
		ps_job_release_held(job); /* frees them: they hold references */
	if (!finalize_is_safe(ps)) {
		pthread_mutex_lock(&ps->lock);
		ps->detached = true; /* op callbacks claim nothing from now */
		pthread_mutex_unlock(&ps->lock);
		pthread_mutex_lock(&owner.lock);
		owner.detached = ps; /* keeps it and its pending ops reachable */
		pthread_mutex_unlock(&owner.lock); /* busy stays: no new init */
		return; /* our reference stays with owner.detached */
	}
	PMIx_tool_finalize();
	/* ops PMIx never called back will not be now: reclaim them */
	pthread_mutex_lock(&ps->lock);
	list = ps->pending;
	ps->pending = NULL;
	for (struct ps_msg *m = list; m; m = m->next)
		m->pending = false;
	pthread_mutex_unlock(&ps->lock);
	while (list) {
		struct ps_msg *next = list->next;
		ps_msg_free(list);
		list = next;
	}
	pthread_mutex_lock(&owner.lock);
	owner.busy = false;
	pthread_mutex_unlock(&owner.lock);
	ps_unref(ps);
}
