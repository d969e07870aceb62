/* SPDX-License-Identifier: MIT */
/*
 * PMIx source: connection (PMIx_tool_init), the PMIx callbacks (progress
 * thread), the requery timer, and the job / loss events.  Namespace
 * discovery and the pulls are in pmix_discover.c, the messages in
 * pmix_msg.c, the jobs in pmix_job.c.
 *
 * The progress-thread rule (PMIx_server_IOF_deliver(3)): every PMIx callback here (pt_*)
 * copies what it was handed into a struct ps_msg, then router_defer()s it;
 * ps_dispatch() does the work on the daemon's loop thread.  No pt_*
 * function calls the router (other than router_defer) or blocks.
 *
 * libpmix is one connection per process and its IOF and event callbacks
 * carry no context pointer, so the one live source is found through
 * `owner` below: the single file-static of this module, forced by that API.
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
static void ready_one(void)
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
/* References, messages, pending ops                                         */

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

static void ps_dispatch(void *arg);

void ps_post(struct ps_msg *m)
{
	if (router_defer(m->ps->r, ps_dispatch, m) != 0)
		ps_msg_free(
		    m); /* the router is shutting down: nobody to tell */
}

/* The live source, with a reference, or NULL (progress thread). */
static pmix_source_t *owner_get(void)
{
	pmix_source_t *ps;

	pthread_mutex_lock(&owner.lock);
	ps = owner.owner;
	if (ps)
		ps_ref(ps);
	pthread_mutex_unlock(&owner.lock);
	return ps;
}

static void copy_nspace(char *dst, const char *src)
{
	size_t n = strnlen(src, PMIX_MAX_NSLEN);
	if (n > ROUTER_NSPACE_MAX)
		n = ROUTER_NSPACE_MAX;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* ------------------------------------------------------------------------ */
/* Progress-thread callbacks                                                 */

static void dir_from_info(router_directives_t *d, const pmix_info_t *info)
{
	static const struct {
		const char *key;
		uint32_t bit;
	} map[] = {
	    {PMIX_IOF_COMPLETE, ROUTER_DIR_COMPLETE},
	    {PMIX_IOF_TAG_OUTPUT, ROUTER_DIR_TAG_OUTPUT},
	    {PMIX_IOF_RANK_OUTPUT, ROUTER_DIR_RANK_OUTPUT},
	    {PMIX_IOF_XML_OUTPUT, ROUTER_DIR_XML_OUTPUT},
	    {PMIX_IOF_TIMESTAMP_OUTPUT, ROUTER_DIR_TIMESTAMP},
	    {PMIX_IOF_OUTPUT_RAW, ROUTER_DIR_OUTPUT_RAW},
	    /* PMIX_IOF_LOCAL_OUTPUT is the host's business (PMIx_server_IOF_deliver(3)):
	     * it carries no meaning for a tool, so it is not mapped */
	};

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		if (strcmp(info->key, map[i].key) != 0)
			continue;
		d->set |= map[i].bit;
		if (info->value.type != PMIX_BOOL || info->value.data.flag)
			d->value |= map[i].bit;
	}
}

void pt_iof(size_t iofhdlr, pmix_iof_channel_t channel, pmix_proc_t *source,
	    pmix_byte_object_t *payload, pmix_info_t info[], size_t ninfo)
{
	pmix_source_t *ps = owner_get();
	struct ps_msg *m;

	if (!ps)
		return;
	m = ps_msg_new(ps, PS_MSG_IOF);
	ps_unref(ps); /* ps_msg_new took its own */
	if (!m)
		return;
	copy_nspace(m->nspace, source->nspace);
	m->rank = source->rank;
	m->channel = channel;
	for (size_t i = 0; info && i < ninfo; i++)
		dir_from_info(&m->dirs, &info[i]);
	/* the payload is only valid during this callback: copy it out */
	if (payload && payload->size > 0) {
		m->bytes = malloc(payload->size);
		if (!m->bytes) {
			ps_log(ps, LOG_ERR,
			       "out of memory: %zu bytes of %s/%u dropped",
			       payload->size, m->nspace, m->rank);
			ps_msg_free(m);
			return;
		}
		memcpy(m->bytes, payload->bytes, payload->size);
		m->len = payload->size;
	} else {
		/* a zero-length delivery completes the stream */
		m->dirs.set |= ROUTER_DIR_COMPLETE;
		m->dirs.value |= ROUTER_DIR_COMPLETE;
	}
	ps_post(m);
}

static void pt_event(size_t id, pmix_status_t status, const pmix_proc_t *source,
		     pmix_info_t info[], size_t ninfo, pmix_info_t *results,
		     size_t nresults,
		     pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
	pmix_source_t *ps = owner_get();
	struct ps_msg *m = ps ? ps_msg_new(ps, PS_MSG_EVENT) : NULL;
	bool have_term = false;
	int term = 0;

	if (ps)
		ps_unref(ps);
	if (m) {
		m->status = status;
		m->rank = ROUTER_RANK_WILDCARD;
		if (source)
			copy_nspace(m->src_nspace, source->nspace);
		for (size_t i = 0; info && i < ninfo; i++) {
			const pmix_value_t *v = &info[i].value;
			if (strcmp(info[i].key, PMIX_EVENT_AFFECTED_PROC) ==
				0 &&
			    v->type == PMIX_PROC && v->data.proc) {
				copy_nspace(m->nspace, v->data.proc->nspace);
				m->rank = v->data.proc->rank;
			} else if (strcmp(info[i].key, PMIX_EXIT_CODE) == 0 &&
				   v->type == PMIX_INT) {
				m->have_code = true;
				m->code = v->data.integer;
			} else if (strcmp(info[i].key, PMIX_JOB_TERM_STATUS) ==
				       0 &&
				   v->type == PMIX_STATUS) {
				have_term = true;
				term = v->data.status;
			}
		}
		if (!m->have_code && have_term) {
			/* PRRTE puts the job's exit code here (the first
			 * non-zero one, state_dvm.c dvm_notify); a negative
			 * value is a PMIx error status: failure, 1 */
			m->have_code = true;
			m->code = term >= 0 ? term : 1;
		}
		ps_post(m);
	}
	if (cbfunc)
		cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static void pt_evreg(pmix_status_t status, size_t refid, void *cbdata)
{
	pmix_source_t *ps;

	if (cbdata)
		ready_one();
	if (status == PMIX_SUCCESS || !(ps = owner_get()))
		return;
	ps_log(ps, LOG_WARNING,
	       "cannot register for job events: %s (job ends will "
	       "only be seen when a job leaves the namespace list)",
	       PMIx_Error_string(status));
	ps_unref(ps);
}

void pt_query(pmix_status_t status, pmix_info_t *info, size_t ninfo,
	      void *cbdata, pmix_release_cbfunc_t release_fn,
	      void *release_cbdata)
{
	struct ps_msg *m = cbdata;
	bool mine = ps_op_claim(m);

	if (mine) {
		m->status = status;
		for (size_t i = 0; info && i < ninfo; i++)
			if (strcmp(info[i].key, PMIX_QUERY_NAMESPACES) == 0 &&
			    info[i].value.type == PMIX_STRING &&
			    info[i].value.data.string)
				m->bytes = strdup(info[i].value.data.string);
	}
	if (release_fn)
		release_fn(release_cbdata);
	if (mine)
		ps_post(m);
}

void pt_size(pmix_status_t status, pmix_value_t *kv, void *cbdata)
{
	struct ps_msg *m = cbdata;

	if (!ps_op_claim(m))
		return;
	m->status = status;
	if (status == PMIX_SUCCESS && kv && kv->type == PMIX_UINT32)
		m->rank = kv->data.uint32;
	else if (status == PMIX_SUCCESS)
		m->status = PMIX_ERR_BAD_PARAM;
	/* pitfall (measured with LeakSanitizer): 4.2.2 hands the value over
	 * to the callback; it is ours to release */
	if (kv)
		PMIX_VALUE_RELEASE(kv);
	ps_post(m);
}

void pt_pulled(pmix_status_t status, size_t refid, void *cbdata)
{
	struct ps_msg *m = cbdata;

	if (!m->nspace[0])
		ready_one(); /* the all-namespaces pull */
	if (!ps_op_claim(m))
		return;
	m->status = status;
	m->len = refid;
	ps_post(m);
}

/* ------------------------------------------------------------------------ */
/* Loop thread                                                               */

/* A status that says our connection to the server is gone.  Not
 * PMIX_ERR_UNREACH: PRRTE answers operations and raises events with it
 * about other procs (a prun that exited) while our connection is fine;
 * a real loss is reported by PMIX_ERR_LOST_CONNECTION within ~1 s. */
bool ps_is_loss(pmix_status_t st)
{
	return st == PMIX_ERR_LOST_CONNECTION || st == PMIX_ERR_COMM_FAILURE;
}

void ps_source_lost(pmix_source_t *ps, pmix_status_t why)
{
	if (ps->lost)
		return;
	ps->lost = true;
	ps_log(ps, LOG_WARNING,
	       "lost the PMIx server (%s): running ranks are marked lost, "
	       "what was received stays readable",
	       PMIx_Error_string(why));
	event_del(ps->requery_ev);
	for (struct ps_job *job = ps->jobs; job; job = job->next)
		ps_job_lost(job);
}

static void on_event(pmix_source_t *ps, struct ps_msg *m)
{
	struct ps_job *job;

	/* A loss event is checked before it ends everything: PRRTE raises
	 * PMIX_ERR_LOST_CONNECTION (source: the DVM itself) when another
	 * tool, e.g. a prun, goes away.  So ask the server at once: our
	 * query fails if our connection is really gone (on_query). */
	if (ps_is_loss(m->status) || m->status == PMIX_ERR_UNREACH) {
		ps->query_inflight = false;
		ps_query_now(ps);
		return;
	}
	job = m->nspace[0] ? ps_discover(ps, m->nspace) : NULL;
	if (m->status == PMIX_EVENT_JOB_END && job) {
		/* PRRTE 3.0.8 gives a tool no per-rank code: no
		 * PROC_TERMINATED, and its process table shows no rank
		 * terminated while the job runs and forgets the job when it
		 * ends (NOT_FOUND), measured (docs/pmix.md) */
		if (ps->prrte && !job->ignored)
			ps_log(ps, LOG_NOTICE,
			       "%s ended (exit code %d): PRRTE reports no "
			       "per-rank codes, every rank shows the job's",
			       job->nspace, m->have_code ? m->code : 0);
		ps_job_end(job, m->have_code ? m->code : 0);
	} else if (m->status == PMIX_EVENT_PROC_TERMINATED && job &&
		   m->rank != PMIX_RANK_WILDCARD) {
		ps_job_rank_end(job, m->rank, m->have_code ? m->code : 0);
	} else if (m->status == PMIX_EVENT_JOB_START ||
		   m->status == PMIX_LAUNCH_COMPLETE) {
		ps_query_now(ps);
	}
}

static void ps_dispatch(void *arg)
{
	struct ps_msg *m = arg;
	pmix_source_t *ps = m->ps;
	struct ps_job *job;

	if (ps->closing) {
		ps_msg_free(m);
		return;
	}
	switch (m->kind) {
	case PS_MSG_IOF:
		job = ps_discover(ps, m->nspace);
		if (job) {
			ps_job_iof(job, m); /* takes m */
			return;
		}
		break;
	case PS_MSG_EVENT:
		on_event(ps, m);
		break;
	case PS_MSG_QUERY:
		ps_query_done(ps, m);
		break;
	case PS_MSG_SIZE:
		job = ps_job_find(ps, m->nspace);
		if (job && m->status == PMIX_SUCCESS)
			ps_job_set_size(job, m->rank);
		if (job) {
			job->size_pending = false;
			ps_pull_start(job);
			ps_job_release_held(job);
		}
		ps_size_next(ps);
		break;
	case PS_MSG_PULLED:
		if (!m->nspace[0]) {
			ps_pull_all_done(ps, m);
			break;
		}
		job = ps_job_find(ps, m->nspace);
		if (job && m->status == PMIX_SUCCESS) {
			job->pulled = true;
			job->iof_id = m->len;
		} else if (job) {
			ps_log(ps, LOG_WARNING, "PMIx_IOF_pull %s refused: %s",
			       m->nspace, PMIx_Error_string(m->status));
			job->pulling = false;
			if (ps_is_loss(m->status))
				ps_source_lost(ps, m->status);
		}
		break;
	case PS_MSG_PUSHED:
		if (ps_push_done(ps, m))
			return; /* back with PMIx: the next chunk */
		break;
	}
	ps_msg_free(m);
}

static void on_requery(evutil_socket_t fd, short what, void *arg)
{
	pmix_source_t *ps = arg;

	/* a query PMIx never answers must not stop discovery: ask again (a
	 * late answer is still handled, it only re-lists the namespaces) */
	if (ps->query_inflight && ++ps->query_ticks > PS_QUERY_STUCK_TICKS) {
		ps_log(ps, LOG_NOTICE,
		       "namespace query unanswered for %u ms: asking again",
		       PS_QUERY_STUCK_TICKS * PS_REQUERY_MS);
		ps->query_inflight = false;
	}
	if (!ps->query_inflight)
		ps->query_ticks = 0;
	ps_query_now(ps);
}

static void on_server_xon(evutil_socket_t fd, short what, void *arg)
{
	ps_flow_server_xon(arg);
}

/* ------------------------------------------------------------------------ */
/* Public API                                                                */

/* Fill @info (room for 2) from @server.  Returns the count or -errno. */
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

/* Just attached (PMIx_tool_init): become the owner, learn whether the
 * server is PRRTE, register the event handler, pull, query, and start the
 * requery timer. */
static void ps_attached(pmix_source_t *ps, const char *server)
{
	static pmix_status_t codes[] = {
	    PMIX_EVENT_JOB_END,	      PMIX_EVENT_PROC_TERMINATED,
	    PMIX_EVENT_JOB_START,     PMIX_LAUNCH_COMPLETE,
	    PMIX_ERR_LOST_CONNECTION, PMIX_ERR_UNREACH,
	};
	struct timeval tv = {.tv_sec = 0, .tv_usec = PS_REQUERY_MS * 1000};
	pmix_status_t st;

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

	/* explicitly: a default handler never sees JOB_END in 4.2.2 */
	pthread_mutex_lock(&owner.lock);
	owner.ready_count = 0;
	pthread_mutex_unlock(&owner.lock);
	st =
	    PMIx_Register_event_handler(codes, sizeof(codes) / sizeof(codes[0]),
					NULL, 0, pt_event, pt_evreg, &owner);
	if (st != PMIX_SUCCESS)
		pt_evreg(st, 0, NULL);
	ps_pull_all_start(ps);
	ready_wait(ps,
		   (st == PMIX_SUCCESS) + (ps->pull_all == PS_PULL_ALL_PENDING));
	ps_query_now(ps);
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
	ps = calloc(1, sizeof(*ps));
	if (!ps)
		goto out_release_busy;
	atomic_init(&ps->refs, 1);
	ps->base = base;
	ps->r = r;
	ps->log = log;
	pthread_mutex_init(&ps->lock, NULL);
	ps->requery_ev = event_new(base, -1, EV_PERSIST, on_requery, ps);
	ps->xoff_ev = evtimer_new(base, on_server_xon, ps);
	if (!ps->requery_ev || !ps->xoff_ev)
		goto out_destroy;

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
	ps_attached(ps, server);
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
