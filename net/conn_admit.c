/* SPDX-License-Identifier: MIT */
/*
 * Admission of a forwarder connection: who it is (SO_PEERCRED on Unix,
 * a MUNGE credential on TCP, decoded off the loop by net/auth.c), the
 * per-user limits (struct net_limits, iofs(8) -o max_*), the check that
 * its rank range is free (O(range * log ranks) in the router, O(the job's
 * connections) here: never a walk over every job or connection), then
 * WELCOME.  docs/security.md explains the choices.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include <event2/event.h>

#include "log/clock.h"
#include "log/num.h"
#include "net/auth.h"
#include "net/server_i.h"

static const char *const limit_names[LIM_N] = {
    [LIM_RANKS_HELLO] = "max_ranks_hello", [LIM_RANKS_JOB] = "max_ranks_job",
    [LIM_RANKS_UID] = "max_ranks_uid",	   [LIM_JOBS_UID] = "max_jobs_uid",
    [LIM_CONNS_UID] = "max_conns_uid",	   [LIM_BUF_UID] = "max_buf_uid",
    [LIM_PIPES_UID] = "max_pipes_uid",
    [LIM_PIPES_ALL] = "RLIMIT_NOFILE/2 (hand-over descriptors, all users)",
};

/* The -o max_* options: struct net_limits field, bounds, default. */
static const struct limit_opt {
	const char *name; /* "max_...=" */
	uint64_t min, max, def;
	size_t off, size;
	bool bytes; /* a byte count: K, M, G, T too (iofs_parse_in()) */
} limit_opts[] = {
#define LIM(n, f, lo, hi, d, b)                                                 \
	{n, lo, hi, d, offsetof(struct net_limits, f),                          \
	 sizeof(((struct net_limits *)0)->f), b}
    LIM("max_ranks_hello=", ranks_hello, 1, PROTO_RANKS_MAX, PROTO_RANKS_MAX,
	false),
    LIM("max_ranks_job=", ranks_job, 1, UINT32_MAX, PROTO_RANKS_MAX, false),
    LIM("max_ranks_uid=", ranks_uid, 1, UINT32_MAX, 2u * PROTO_RANKS_MAX,
	false),
    LIM("max_jobs_uid=", jobs_uid, 1, UINT32_MAX, 1024, false),
    LIM("max_conns_uid=", conns_uid, 1, UINT32_MAX, 512, false),
    LIM("max_buf_conn=", buf_conn, 65536, UINT64_MAX / 4, 8ull << 20, true),
    LIM("max_buf_uid=", buf_uid, 65536, UINT64_MAX / 4, 64ull << 20, true),
    /* 0: net_server_new() gives a quarter of RLIMIT_NOFILE */
    LIM("max_pipes_uid=", pipes_uid, 3, UINT32_MAX, 0, false),
#undef LIM
};
#define N_LIMIT_OPTS (sizeof(limit_opts) / sizeof(limit_opts[0]))

static uint64_t limit_get(const struct net_limits *l, const struct limit_opt *o)
{
	const char *field = (const char *)l + o->off;
	uint32_t v32;
	uint64_t v;

	if (o->size == sizeof(v32)) {
		memcpy(&v32, field, sizeof(v32));
		return v32;
	}
	memcpy(&v, field, sizeof(v));
	return v;
}

static void limit_set(struct net_limits *l, const struct limit_opt *o,
		      uint64_t v)
{
	char *field = (char *)l + o->off;
	uint32_t v32 = (uint32_t)v;

	if (o->size == sizeof(v32))
		memcpy(field, &v32, sizeof(v32));
	else
		memcpy(field, &v, sizeof(v));
}

void net_limits_fill(struct net_limits *l)
{
	for (size_t i = 0; i < N_LIMIT_OPTS; i++)
		if (!limit_get(l, &limit_opts[i]))
			limit_set(l, &limit_opts[i], limit_opts[i].def);
}

int net_config_option(struct net_server_config *cfg, const char *tok,
		      char *err, size_t errlen)
{
	uint64_t v;

	if (!strcmp(tok, "auth=munge") || !strcmp(tok, "auth=none")) {
		cfg->auth = tok[5] == 'm' ? NET_AUTH_MUNGE : NET_AUTH_NONE;
		return 1;
	}
	if (!strncmp(tok, "auth=", 5)) {
		snprintf(err, errlen, "bad -o %s: auth=munge or auth=none",
			 tok);
		return -EINVAL;
	}
	if (!strncmp(tok, "resume_window=", 14)) {
		if (!iofs_parse_in(tok + 14, false, 0, 86400, &v)) {
			snprintf(err, errlen,
				 "bad -o %s: give seconds from 0 to 86400",
				 tok);
			return -EINVAL;
		}
		cfg->resume_window_s = (uint32_t)v;
		cfg->resume_window_set = true;
		return 1;
	}
	if (!strncmp(tok, "munge_socket=", 13)) {
		if (!tok[13]) {
			snprintf(err, errlen, "bad -o %s: give a path", tok);
			return -EINVAL;
		}
		cfg->munge_socket = tok + 13;
		return 1;
	}
	for (size_t i = 0; i < N_LIMIT_OPTS; i++) {
		const struct limit_opt *o = &limit_opts[i];
		size_t n = strlen(o->name);
		if (strncmp(tok, o->name, n) != 0)
			continue;
		if (!iofs_parse_in(tok + n, o->bytes, o->min, o->max, &v)) {
			snprintf(err, errlen,
				 "bad -o %s: give a number from %llu to %llu%s",
				 tok, (unsigned long long)o->min,
				 (unsigned long long)o->max,
				 o->bytes ? " (or with K, M, G, T: powers of "
					    "1024, e.g. 64M)"
					  : "");
			return -EINVAL;
		}
		limit_set(&cfg->limits, o, v);
		return 1;
	}
	return 0;
}

void conn_admit_report(net_server_t *s)
{
	for (int i = 0; i < LIM_N; i++)
		if (s->refusals[i])
			srv_log(s, LOG_INFO, "limit %s refused %llu times",
				limit_names[i],
				(unsigned long long)s->refusals[i]);
}

/* Count a refusal; log it, at most once a second per limit, with how many
 * were not logged since. */
static void limit_hit(net_server_t *s, uint32_t uid, enum limit_id id,
		      uint64_t have, uint64_t max)
{
	uint64_t now = iofs_mono_ms();

	s->refusals[id]++;
	s->unlogged[id]++;
	if (s->logged_ms[id] && now - s->logged_ms[id] < 1000)
		return;
	srv_log(s, LOG_WARNING,
		"uid %u %s: limit %s=%llu reached (%llu in use); %llu "
		"such refusals in all, %llu since the last report",
		uid,
		id == LIM_BUF_UID ? "paused"
		: id >= LIM_PIPES_UID ? "not handed over (the socket path)"
				      : "refused",
		limit_names[id],
		(unsigned long long)max, (unsigned long long)have,
		(unsigned long long)s->refusals[id],
		(unsigned long long)s->unlogged[id]);
	s->unlogged[id] = 0;
	s->logged_ms[id] = now;
}

static int refuse(struct conn *c, enum limit_id id, uint64_t have, uint64_t max)
{
	limit_hit(c->srv, c->uid, id, have, max);
	c->quiet_fail = true; /* limit_hit() logged it, rate-limited */
	return conn_fail(c, PROTO_REFUSED_LIMIT,
			 "per-user limit %s=%llu reached for uid %u (%llu in "
			 "use; see iofs(8))",
		  limit_names[id], (unsigned long long)max, c->uid,
		  (unsigned long long)have);
}

int conn_admit_owner(struct conn *c)
{
	net_server_t *s = c->srv;

	if (c->owner_counted)
		return 0;
	if (uidmap_add(&s->uids, c->uid, UID_CONNS, 1) < 0) {
		return conn_fail(c, PROTO_REFUSED_ROUTER, "out of memory");
	}
	c->owner_counted = true;
	c->uent = uidmap_entry(&s->uids, c->uid);
	uint64_t n = c->uent->n[UID_CONNS];
	if (c->uid != 0 && n > s->cfg.limits.conns_uid)
		return refuse(c, LIM_CONNS_UID, n - 1, s->cfg.limits.conns_uid);
	return 0;
}

static int conn_index_add(struct conn *c)
{
	net_server_t *s = c->srv;
	struct conn *head = strmap_get(&s->conns_by_ns, c->nspace);

	if (strmap_put(&s->conns_by_ns, c->nspace, c) < 0)
		return -ENOMEM;
	c->ns_next = head;
	c->ns_prev = NULL;
	if (head)
		head->ns_prev = c;
	c->indexed = true;
	return 0;
}

static void conn_index_del(struct conn *c)
{
	net_server_t *s = c->srv;

	if (!c->indexed)
		return;
	c->indexed = false;
	if (c->ns_next)
		c->ns_next->ns_prev = c->ns_prev;
	if (c->ns_prev) {
		c->ns_prev->ns_next = c->ns_next;
	} else if (c->ns_next) {
		/* the new head's own nspace becomes the key: cannot fail, the
		 * key is present */
		strmap_put(&s->conns_by_ns, c->ns_next->nspace, c->ns_next);
	} else {
		strmap_del(&s->conns_by_ns, c->nspace);
	}
	c->ns_next = c->ns_prev = NULL;
}

int64_t conn_index_claimed(const struct conn *c, uint32_t base,
				  uint32_t count)
{
	const struct conn *o = strmap_get(&c->srv->conns_by_ns, c->nspace);
	uint64_t end = (uint64_t)base + count;

	for (; o; o = o->ns_next) {
		if (o == c || o->dead || !o->ranks)
			continue;
		uint64_t lo = base > o->rank_base ? base : o->rank_base;
		uint64_t hi = (uint64_t)o->rank_base + o->rank_count;
		if (hi > end)
			hi = end;
		for (uint64_t r = lo; r < hi; r++)
			if (o->ranks[r - o->rank_base].state != CRANK_DONE)
				return (int64_t)r;
	}
	return -1;
}

/* First rank of the HELLO range that is running in the router or claimed
 * by another connection, or -1.  O(range * log ranks) in the router (hashed
 * job, binary-searched ranks) and O(overlap) over the job's connections. */
static int64_t hello_range_busy(struct conn *c, router_job_t *job,
				uint32_t base, uint32_t count)
{
	if (job && router_job_rank_count(job) > 0) {
		for (uint32_t i = 0; i < count; i++) {
			router_rank_t *rr = router_job_rank(job, base + i);
			struct router_stats st;
			if (!rr)
				continue;
			router_rank_stats(rr, &st);
			if (st.state == ROUTER_STATE_RUNNING)
				return base + i;
		}
	}
	return conn_index_claimed(c, base, count);
}

/* Ranks announced by the live connections of @c's job. */
static uint64_t job_ranks_announced(const struct conn *c)
{
	uint64_t n = 0;

	for (const struct conn *o = strmap_get(&c->srv->conns_by_ns, c->nspace);
	     o; o = o->ns_next)
		if (o != c && !o->dead)
			n += o->rank_count;
	return n;
}

static int check_limits(struct conn *c, router_job_t *job, uint32_t count)
{
	const struct net_limits *l = &c->srv->cfg.limits;
	uint64_t n;

	if (c->uid == 0) /* root is exempt (it could stop the daemon) */
		return 0;
	if (count > l->ranks_hello)
		return refuse(c, LIM_RANKS_HELLO, count, l->ranks_hello);
	n = c->uent ? c->uent->n[UID_RANKS] : 0;
	if (n + count > l->ranks_uid)
		return refuse(c, LIM_RANKS_UID, n, l->ranks_uid);
	n = job_ranks_announced(c);
	if (n + count > l->ranks_job)
		return refuse(c, LIM_RANKS_JOB, n, l->ranks_job);
	n = router_uid_jobs(c->srv->router, c->uid);
	if (!job && n >= l->jobs_uid)
		return refuse(c, LIM_JOBS_UID, n, l->jobs_uid);
	return 0;
}

/* The owner is final: limits, range, ranks, WELCOME. */
static int hello_accept(struct conn *c, uint32_t base, uint32_t count)
{
	net_server_t *s = c->srv;
	router_job_t *job = router_job_lookup(s->router, c->nspace);
	bool resume = c->version >= 4 && (c->hello_flags & PROTO_HELLO_F_RESUME);
	int rc = 0;

	/* A reconnect: its detached connection, its restored ranks, or a
	 * job this daemon does not know (conn_resume.c). */
	if (resume && (rc = conn_resume_admit(c, base, count)) != 0 &&
	    rc != 2)
		return rc < 0 ? rc : 0;
	bool adopt = rc == 2;
	/* Limits against the name asked for (a rename must not escape
	 * max_ranks_job), then the job-name collision rule (conn_name.c),
	 * which never lets another uid join or replace a job. */
	rc = check_limits(c, job, count);
	if (rc < 0)
		return rc;
	if (!adopt && (rc = conn_name_assign(c, base, count)) < 0)
		return rc;
	job = router_job_lookup(s->router, c->nspace);
	int64_t busy = adopt ? -1 : hello_range_busy(c, job, base, count);
	if (busy >= 0) {
		return conn_fail(
		    c, PROTO_REFUSED_EXISTS,
			  "rank %lld of job '%s' is already running (another "
			  "iofs-run with the same --nspace/--rank?)",
			  (long long)busy, c->nspace);
	}
	c->ranks = calloc(count, sizeof(*c->ranks));
	if (!c->ranks || conn_index_add(c) < 0 ||
	    uidmap_add(&s->uids, c->uid, UID_RANKS, count) < 0) {
		return conn_fail(c, PROTO_REFUSED_ROUTER, "out of memory");
	}
	c->ranks_counted = count;
	c->rank_base = base;
	c->rank_count = count;
	for (uint32_t i = 0; i < c->rank_count; i++) {
		c->ranks[i].c = c;
		c->ranks[i].rank = c->rank_base + i;
	}
	if (adopt)
		conn_resume_take(c, job);
	srv_log(s, LOG_INFO,
		"conn %llu (%s): job '%s' ranks %u..%u of %u from %s pid %u "
		"uid %u%s",
		(unsigned long long)c->id, c->peer, c->nspace, c->rank_base,
		c->rank_base + c->rank_count - 1, c->job_size, c->host, c->pid,
		c->uid,
		c->is_unix ? "" : c->cred_ok ? " (MUNGE)" : " (unauthenticated)");
	event_del(c->hello_timer); /* greeted: no deadline any more */
	if (resume)
		conn_resume_held(c);
	struct proto_frame w = {.type = PROTO_WELCOME,
				.version = c->version,
				.max_payload = PROTO_PAYLOAD_MAX};
	if (c->hello_flags & PROTO_HELLO_F_NAME) { /* it learns its name */
		w.flags = PROTO_WELCOME_F_NAME;
		w.name = c->nspace;
		w.name_len = strlen(c->nspace);
	}
	if (conn_pipe_offer(c)) /* every RANK_START brings the pipes */
		w.flags |= PROTO_WELCOME_F_HANDOVER;
	w.flags |= PROTO_WELCOME_F_COMMAND; /* for info */
	conn_send(c, &w);
	return 0;
}

static void auth_done(void *arg, const struct auth_result *res)
{
	struct conn *c = arg;

	c->auth_req = NULL;
	c->susp &= ~CONN_SUSP_AUTH;
	if (c->dead || c->closing)
		return;
	if (!res->ok) {
		conn_fail(c, PROTO_REFUSED_AUTH, "MUNGE: %s", res->msg);
		return;
	}
	c->uid = res->uid;
	c->gid = res->gid;
	c->cred_ok = true;
	if (conn_admit_owner(c) < 0 ||
	    hello_accept(c, c->want_base, c->want_count) < 0)
		return;
	conn_kick(c); /* resume reading */
}

int conn_admit(struct conn *c, uint32_t base, uint32_t count, const char *cred,
	       size_t cred_len)
{
	net_server_t *s = c->srv;

	if (c->is_unix || s->cfg.auth == NET_AUTH_NONE) {
		int rc = c->owner_counted ? 0 : conn_admit_owner(c);
		if (rc < 0)
			return rc;
		return hello_accept(c, base, count);
	}
	if (!cred_len)
		return conn_fail(c, PROTO_REFUSED_AUTH,
				 "no MUNGE credential: this daemon requires "
				 "one on TCP (-o auth=munge); run iofs-run "
				 "where munged runs with the daemon's key "
				 "(iofs-run --munge-socket), or use a Unix "
				 "socket");
	if (!s->auth) {
		int rc = auth_worker_new(
		    s->base, auth_socket(s->cfg.munge_socket), &s->auth);
		if (rc < 0) {
			return conn_fail(c, PROTO_REFUSED_ROUTER,
				  "cannot start the MUNGE worker: %s",
				  strerror(-rc));
		}
	}
	c->want_base = base;
	c->want_count = count;
	c->auth_req = auth_submit(s->auth, cred, cred_len, c->nspace, base,
				  count, auth_done, c);
	if (!c->auth_req) {
		return conn_fail(
		    c, PROTO_REFUSED_AUTH,
			  "too many HELLOs waiting for MUNGE (%d): try again",
			  AUTH_QUEUE_MAX);
	}
	c->susp |= CONN_SUSP_AUTH;
	conn_reading(c, false);
	event_del(c->hello_timer); /* AUTH_TIMEOUT_S bounds the decode */
	return 0;
}

static void uid_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	const struct net_limits *l = &c->srv->cfg.limits;
	struct timeval tv = {0, CONN_UID_RETRY_MS * 1000};

	if (c->uent && c->uent->n[UID_BUF] > l->buf_uid / 2) {
		evtimer_add(c->uid_timer, &tv);
		return;
	}
	c->susp &= ~CONN_SUSP_UID;
	conn_kick(c);
}

void conn_admit_buf(struct conn *c, int64_t delta)
{
	const struct net_limits *l = &c->srv->cfg.limits;
	struct timeval tv = {0, CONN_UID_RETRY_MS * 1000};

	if (!c->uent)
		return;
	c->uid_buf += (uint64_t)delta;
	c->uent->n[UID_BUF] += (uint64_t)delta;
	if (delta <= 0 || c->uid == 0 || c->uent->n[UID_BUF] <= l->buf_uid ||
	    (c->susp & CONN_SUSP_UID))
		return;
	if (!c->uid_timer)
		c->uid_timer = evtimer_new(c->srv->base, uid_retry_cb, c);
	if (!c->uid_timer)
		return; /* no memory: the per-connection bound still holds */
	limit_hit(c->srv, c->uid, LIM_BUF_UID, c->uent->n[UID_BUF], l->buf_uid);
	c->susp |= CONN_SUSP_UID;
	conn_reading(c, false);
	evtimer_add(c->uid_timer, &tv);
}

void conn_admit_release(struct conn *c)
{
	net_server_t *s = c->srv;

	auth_cancel(c->auth_req);
	c->auth_req = NULL;
	conn_index_del(c);
	if (c->uid_timer) {
		event_free(c->uid_timer);
		c->uid_timer = NULL;
	}
	if (!c->owner_counted)
		return;
	c->owner_counted = false;
	c->uent = NULL;
	uidmap_add(&s->uids, c->uid, UID_BUF, -(int64_t)c->uid_buf);
	uidmap_add(&s->uids, c->uid, UID_RANKS, -(int64_t)c->ranks_counted);
	uidmap_add(&s->uids, c->uid, UID_PIPES, -(int64_t)c->pipes_counted);
	uidmap_add(&s->uids, c->uid, UID_CONNS, -1);
	s->pipes_held -= c->pipes_counted;
	c->uid_buf = 0;
	c->ranks_counted = 0;
	c->pipes_counted = 0;
}

bool conn_admit_pipes(struct conn *c)
{
	net_server_t *s = c->srv;
	uint64_t want = 3ull * c->rank_count;
	uint64_t mine = c->uent ? c->uent->n[UID_PIPES] : 0;

	if (s->pipes_held + want > s->pipes_max) {
		limit_hit(s, c->uid, LIM_PIPES_ALL, s->pipes_held,
			  s->pipes_max);
		return false;
	}
	if (c->uid != 0 && mine + want > s->cfg.limits.pipes_uid) {
		limit_hit(s, c->uid, LIM_PIPES_UID, mine,
			  s->cfg.limits.pipes_uid);
		return false;
	}
	if (!c->owner_counted ||
	    uidmap_add(&s->uids, c->uid, UID_PIPES, (int64_t)want) < 0)
		return false; /* no memory: the socket path needs none */
	c->pipes_counted = (uint32_t)want;
	s->pipes_held += want;
	return true;
}

/* The ranks' command line (WELCOME asked for it): kept for the RANK_STARTs
 * to give their job; a job this connection has ranks in already (a
 * resume) gets it now. */
int conn_admit_command(struct conn *c, const struct proto_frame *f)
{
	bool cut = f->flags & PROTO_COMMAND_F_CUT;

	if (c->command)
		return conn_fail(c, PROTO_ERR_ORDER, "second COMMAND");
	if (asprintf(&c->command, "%.*s%s", (int)f->msg_len, f->msg,
		     cut ? ROUTER_COMMAND_CUT : "") < 0) {
		c->command = NULL;
		return conn_fail(c, PROTO_REFUSED_ROUTER, "out of memory");
	}
	for (uint32_t i = 0; i < c->rank_count; i++)
		if (c->ranks[i].rr) {
			(void)router_job_set_command(
			    router_rank_job(c->ranks[i].rr), c->command);
			break;
		}
	return 0;
}
