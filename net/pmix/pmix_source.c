/* SPDX-License-Identifier: MIT */
/*
 * PMIx source: connection (PMIx_tool_init), the PMIx callbacks (progress
 * thread), namespace discovery (PMIX_QUERY_NAMESPACES on a timer and on job
 * events), PMIx_IOF_pull per namespace, and the job / loss events.
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

void ps_msg_free(struct ps_msg *m)
{
	pmix_source_t *ps;

	if (!m)
		return;
	ps = m->ps;
	free(m->bytes);
	free(m->bo.bytes);
	if (m->pushes != &m->one)
		free(m->pushes);
	if (m->info)
		PMIX_INFO_FREE(m->info, m->ninfo);
	if (m->queries)
		PMIX_QUERY_FREE(m->queries, 1);
	free(m);
	ps_unref(ps);
}

static struct ps_msg *msg_new(pmix_source_t *ps, enum ps_msg_kind kind)
{
	struct ps_msg *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->kind = kind;
	m->ps = ps;
	ps_ref(ps);
	return m;
}

void ps_op_rearm(struct ps_msg *m)
{
	pmix_source_t *ps = m->ps;

	pthread_mutex_lock(&ps->lock);
	m->pending = true;
	m->prev = NULL;
	m->next = ps->pending;
	if (m->next)
		m->next->prev = m;
	ps->pending = m;
	pthread_mutex_unlock(&ps->lock);
}

struct ps_msg *ps_op_new(pmix_source_t *ps, enum ps_msg_kind kind)
{
	struct ps_msg *m = msg_new(ps, kind);

	if (m)
		ps_op_rearm(m);
	return m;
}

bool ps_op_claim(struct ps_msg *m)
{
	pmix_source_t *ps = m->ps;
	bool mine;

	pthread_mutex_lock(&ps->lock);
	mine = m->pending && !ps->detached;
	if (mine) {
		m->pending = false;
		if (m->prev)
			m->prev->next = m->next;
		else
			ps->pending = m->next;
		if (m->next)
			m->next->prev = m->prev;
		m->prev = m->next = NULL;
	}
	pthread_mutex_unlock(&ps->lock);
	return mine;
}

void ps_op_abort(struct ps_msg *m)
{
	if (ps_op_claim(m))
		ps_msg_free(m);
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

static void pt_iof(size_t iofhdlr, pmix_iof_channel_t channel,
		   pmix_proc_t *source, pmix_byte_object_t *payload,
		   pmix_info_t info[], size_t ninfo)
{
	pmix_source_t *ps = owner_get();
	struct ps_msg *m;

	if (!ps)
		return;
	m = msg_new(ps, PS_MSG_IOF);
	ps_unref(ps); /* msg_new took its own */
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
	struct ps_msg *m = ps ? msg_new(ps, PS_MSG_EVENT) : NULL;
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

static void pt_query(pmix_status_t status, pmix_info_t *info, size_t ninfo,
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

static void pt_size(pmix_status_t status, pmix_value_t *kv, void *cbdata)
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

static void pt_pulled(pmix_status_t status, size_t refid, void *cbdata)
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
static bool is_loss(pmix_status_t st)
{
	return st == PMIX_ERR_LOST_CONNECTION || st == PMIX_ERR_COMM_FAILURE;
}

static void source_lost(pmix_source_t *ps, pmix_status_t why)
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

static void start_pull(struct ps_job *job);

/* PMIx_IOF_pull of stdout|stderr of @proc (cbdata @m, on ps->pending). */
static pmix_status_t pull(struct ps_msg *m)
{
	pmix_status_t st;

/* GCC 12 false positive: it sizes &m->proc as its first member (the
 * 256-byte nspace) after PMIX_LOAD_PROCID */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overread"
#endif
	st = PMIx_IOF_pull(&m->proc, 1, NULL, 0,
			   PMIX_FWD_STDOUT_CHANNEL | PMIX_FWD_STDERR_CHANNEL,
			   pt_iof, pt_pulled, m);
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
	return st;
}

/*
 * Be early: one pull for every namespace, registered at attach time, so
 * the server forwards a job's output from its first byte.  PMIx matches a
 * pull's proc against an output's source with PMIX_CHECK_PROCID, where an
 * empty (invalid) nspace matches any nspace and PMIX_RANK_WILDCARD any
 * rank (openpmix src/common/pmix_iof.c, bfrop_base_tma.h).  A pull made
 * when iofs first sees a job comes after the output its ranks printed in
 * their first ~0.3 s, which PRRTE's server does not replay (docs/pmix.md).
 * If the server refuses it, each job is pulled on its own (start_pull).
 */
static void start_pull_all(pmix_source_t *ps)
{
	struct ps_msg *m = ps_op_new(ps, PS_MSG_PULLED);
	pmix_status_t st;

	ps->pull_all = PS_PULL_ALL_REFUSED;
	if (!m)
		return;
	m->nspace[0] = '\0'; /* marks the all-namespaces pull */
	PMIX_LOAD_PROCID(&m->proc, "", PMIX_RANK_WILDCARD);
	st = pull(m);
	if (st != PMIX_SUCCESS) {
		ps_log(ps, LOG_WARNING,
		       "pull of all namespaces refused (%s): pulling each job "
		       "when it is seen; its first output may be missed",
		       PMIx_Error_string(st));
		ps_op_abort(m);
		return;
	}
	ps->pull_all = PS_PULL_ALL_PENDING;
}

static void on_pulled_all(pmix_source_t *ps, struct ps_msg *m)
{
	if (m->status == PMIX_SUCCESS) {
		ps->pull_all = PS_PULL_ALL_OK;
		return;
	}
	ps->pull_all = PS_PULL_ALL_REFUSED;
	ps_log(ps, LOG_WARNING,
	       "pull of all namespaces refused (%s): pulling each job when "
	       "it is seen; its first output may be missed",
	       PMIx_Error_string(m->status));
	if (is_loss(m->status)) {
		source_lost(ps, m->status);
		return;
	}
	for (struct ps_job *job = ps->jobs; job; job = job->next)
		if (!job->ignored)
			start_pull(job);
}

static void start_pull(struct ps_job *job)
{
	pmix_source_t *ps = job->ps;
	struct ps_msg *m;
	pmix_status_t st;

	if (job->pulling || job->size_pending || ps->lost)
		return;
	if (ps->pull_all == PS_PULL_ALL_PENDING)
		return; /* started when the answer says it is needed */
	if (ps->pull_all == PS_PULL_ALL_OK) {
		job->pulling = true; /* covered by the all-namespaces pull */
		return;
	}
	m = ps_op_new(ps, PS_MSG_PULLED);
	if (!m)
		return;
	snprintf(m->nspace, sizeof(m->nspace), "%s", job->nspace);
	PMIX_LOAD_PROCID(&m->proc, job->nspace, PMIX_RANK_WILDCARD);
	st = pull(m);
	if (st != PMIX_SUCCESS) {
		ps_log(ps, LOG_WARNING,
		       "PMIx_IOF_pull %s: %s (retried at the next query)",
		       job->nspace, PMIx_Error_string(st));
		ps_op_abort(m);
		return;
	}
	job->pulling = true;
}

/* One PMIx_Get_nb at a time: libpmix 5.0.7 answers every pending get of
 * the same proc from one reply and frees the request that reply belongs
 * to while still walking the list with it (heap-use-after-free in
 * PMIx_Check_nspace, openpmix v5.0.7 src/client/pmix_client_get.c
 * _getnb_cbfunc; docs/pmix.md).  With a single get in flight that walk
 * ends at the freed request.  Jobs wait (size_pending, !size_asked) in
 * discovery order; ps_size_next() asks for the next. */
static void request_size(struct ps_job *job)
{
	pmix_source_t *ps = job->ps;
	struct ps_msg *m;
	int timeout = 5;
	pmix_status_t st;

	job->size_pending = true; /* pull after the answer (or the wait) */
	if (ps->size_inflight || ps->lost || ps->closing)
		return; /* asked by ps_size_next() */
	m = ps_op_new(ps, PS_MSG_SIZE);
	if (!m) {
		job->size_pending = false;
		return;
	}
	snprintf(m->nspace, sizeof(m->nspace), "%s", job->nspace);
	PMIX_LOAD_PROCID(&m->proc, job->nspace, PMIX_RANK_WILDCARD);
	PMIX_INFO_CREATE(m->info, 1);
	if (m->info) {
		m->ninfo = 1;
		PMIx_Info_load(&m->info[0], PMIX_TIMEOUT, &timeout, PMIX_INT);
	}
	st =
	    PMIx_Get_nb(&m->proc, PMIX_JOB_SIZE, m->info, m->ninfo, pt_size, m);
	if (st != PMIX_SUCCESS) {
		ps_op_abort(m); /* ranks then appear with their first output */
		job->size_pending = false;
		return;
	}
	job->size_asked = true;
	ps->size_inflight = true;
}

/* The size get in flight was answered: ask for the next waiting job's. */
static void ps_size_next(pmix_source_t *ps)
{
	ps->size_inflight = false;
	for (struct ps_job *job = ps->jobs; job && !ps->size_inflight;
	     job = job->next)
		if (job->size_pending && !job->size_asked && !job->ignored) {
			request_size(job);
			if (!job->size_pending) { /* refused: pull without it */
				start_pull(job);
				ps_job_release_held(job);
			}
		}
}

/* A namespace the server runs: the job record, pulling its output. */
static struct ps_job *discover(pmix_source_t *ps, const char *nspace)
{
	struct ps_job *job;

	if (!nspace[0] || strcmp(nspace, ps->me.nspace) == 0)
		return NULL;
	job = ps_job_find(ps, nspace);
	if (job)
		return job->ignored ? NULL : job;
	job = ps_job_new(ps, nspace);
	if (!job) {
		ps_log(ps, LOG_ERR,
		       "namespace '%s' not followed: out of memory", nspace);
		return NULL;
	}
	if (job->ignored) { /* remembered, so this is said once */
		ps_log(ps, LOG_WARNING,
		       "ignoring namespace '%s': not a valid directory name",
		       nspace);
		return NULL;
	}
	if (ps->prrte)
		ps_log(ps, LOG_INFO,
		       "%s: with PRRTE, stdin reaches only the ranks in prun "
		       "--stdin's set (rank 0 by default); PRRTE drops writes "
		       "to the others and a tool cannot learn the set",
		       nspace);
	/* the size first: every rank is then published (with the job size)
	 * before its output, which the server keeps until we pull */
	request_size(job);
	start_pull(job);
	return job;
}

static void query_now(pmix_source_t *ps)
{
	struct ps_msg *m;
	pmix_status_t st;

	if (ps->lost || ps->closing || ps->query_inflight)
		return;
	m = ps_op_new(ps, PS_MSG_QUERY);
	if (!m)
		return;
	PMIX_QUERY_CREATE(m->queries, 1);
	if (!m->queries) {
		ps_op_abort(m);
		return;
	}
	PMIX_ARGV_APPEND(st, m->queries[0].keys, PMIX_QUERY_NAMESPACES);
	st = PMIx_Query_info_nb(m->queries, 1, pt_query, m);
	if (st != PMIX_SUCCESS) {
		ps_op_abort(m);
		if (is_loss(st) || st == PMIX_ERR_UNREACH) /* not connected */
			source_lost(ps, st);
		return;
	}
	ps->query_inflight = true;
}

static void on_query(pmix_source_t *ps, struct ps_msg *m)
{
	struct ps_job *job;
	char *save, *tok;

	ps->query_inflight = false;
	/* PRRTE answers UNREACH for a while after another tool (a prun)
	 * left, our connection being fine: only answers that stay UNREACH
	 * for PS_UNREACH_QUERIES queries in a row mean the server is gone */
	if (is_loss(m->status) ||
	    (m->status == PMIX_ERR_UNREACH &&
	     ++ps->unreach_answers >= PS_UNREACH_QUERIES)) {
		source_lost(ps, m->status);
		return;
	}
	if (m->status != PMIX_ERR_UNREACH)
		ps->unreach_answers = 0;
	if (m->status != PMIX_SUCCESS && m->status != PMIX_ERR_NOT_FOUND)
		return; /* transient: the next query tries again */
	for (job = ps->jobs; job; job = job->next)
		job->listed = false;
	for (tok = m->bytes ? strtok_r(m->bytes, ",", &save) : NULL; tok;
	     tok = strtok_r(NULL, ",", &save)) {
		job = discover(ps, tok);
		if (job)
			job->listed = true;
	}
	for (job = ps->jobs; job; job = job->next) {
		if (job->ignored)
			continue;
		if (job->size_pending &&
		    ++job->size_wait > PS_SIZE_WAIT_QUERIES) {
			ps_log(ps, LOG_NOTICE,
			       "%s: no PMIX_JOB_SIZE answer: pulling anyway",
			       job->nspace);
			job->size_pending = false;
			start_pull(job);
			ps_job_release_held(job);
		}
		if (job->ended)
			continue;
		if (!job->listed) {
			ps_job_vanished(job);
		} else {
			if (job->vanishing) {
				job->vanishing = false;
				evtimer_del(job->grace_ev);
			}
			start_pull(job); /* a failed pull is retried */
		}
	}
}

static void on_event(pmix_source_t *ps, struct ps_msg *m)
{
	struct ps_job *job;

	/* A loss event is checked before it ends everything: PRRTE raises
	 * PMIX_ERR_LOST_CONNECTION (source: the DVM itself) when another
	 * tool, e.g. a prun, goes away.  So ask the server at once: our
	 * query fails if our connection is really gone (on_query). */
	if (is_loss(m->status) || m->status == PMIX_ERR_UNREACH) {
		ps->query_inflight = false;
		query_now(ps);
		return;
	}
	job = m->nspace[0] ? discover(ps, m->nspace) : NULL;
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
		query_now(ps);
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
		job = discover(ps, m->nspace);
		if (job) {
			ps_job_iof(job, m); /* takes m */
			return;
		}
		break;
	case PS_MSG_EVENT:
		on_event(ps, m);
		break;
	case PS_MSG_QUERY:
		on_query(ps, m);
		break;
	case PS_MSG_SIZE:
		job = ps_job_find(ps, m->nspace);
		if (job && m->status == PMIX_SUCCESS)
			ps_job_set_size(job, m->rank);
		if (job) {
			job->size_pending = false;
			start_pull(job);
			ps_job_release_held(job);
		}
		ps_size_next(ps);
		break;
	case PS_MSG_PULLED:
		if (!m->nspace[0]) {
			on_pulled_all(ps, m);
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
			if (is_loss(m->status))
				source_lost(ps, m->status);
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
	query_now(ps);
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

int pmix_source_new(struct event_base *base, router_t *r, iofs_log_t *log,
		    const char *server, char *err, size_t errlen,
		    pmix_source_t **out)
{
	static pmix_status_t codes[] = {
	    PMIX_EVENT_JOB_END,	      PMIX_EVENT_PROC_TERMINATED,
	    PMIX_EVENT_JOB_START,     PMIX_LAUNCH_COMPLETE,
	    PMIX_ERR_LOST_CONNECTION, PMIX_ERR_UNREACH,
	};
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
	start_pull_all(ps);
	ready_wait(ps,
		   (st == PMIX_SUCCESS) + (ps->pull_all == PS_PULL_ALL_PENDING));
	query_now(ps);
	struct timeval tv = {.tv_sec = 0, .tv_usec = PS_REQUERY_MS * 1000};
	event_add(ps->requery_ev, &tv);
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
