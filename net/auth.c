/* SPDX-License-Identifier: MIT */
/*
 * MUNGE credentials in the HELLO: minting (forwarder) and decoding on a
 * worker thread (daemon).  See auth.h.
 *
 * Why a thread: munge_decode() is a blocking round trip to munged over its
 * Unix socket, and libmunge retries on its own (10 connect attempts with a
 * linear back-off from 50 ms, 5 transaction attempts, 2 s socket timeouts:
 * about 20 s in the worst case).  On the daemon's single loop that would
 * stall every user; on the worker it stalls only other TCP HELLOs, each
 * refused after AUTH_TIMEOUT_S.
 */
#include "net/auth.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <time.h>

#include <event2/event.h>
#include <munge.h>

enum req_where { REQ_PENDING, REQ_RUNNING, REQ_DONE };

struct auth_req {
	TAILQ_ENTRY(auth_req) link; /* w->pending or w->done */
	auth_worker_t *w;
	char *cred; /* NUL-terminated copy */
	char expect[AUTH_PAYLOAD_MAX];
	int expect_len;
	auth_done_fn done;
	void *arg;
	struct event *timer;
	enum req_where where; /* under w->lock */
	bool canceled;	      /* under w->lock */
	struct auth_result res;
};

TAILQ_HEAD(req_list, auth_req);

struct auth_worker {
	struct event_base *base;
	char *socket; /* NULL = libmunge's default */
	pthread_t th;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct req_list pending, done; /* under lock */
	size_t npending;	       /* under lock */
	bool stop;		       /* under lock */
	struct auth_req *leftover;     /* decoded after stop */
	struct event *ev_done;
};

const char *auth_socket(const char *opt)
{
	const char *env = getenv("MUNGE_SOCKET");

	if (opt && *opt)
		return opt;
	return env && *env ? env : NULL;
}

int auth_payload(char *buf, size_t cap, const char *nspace, uint32_t base,
		 uint32_t count, const char *nonce)
{
	int n = snprintf(buf, cap, "iofs-hello 1\nnspace=%s\nranks=%u+%u\nnonce=%s%s",
			 nspace, base, count, nonce ? nonce : "",
			 nonce ? "\n" : "");
	return n < 0 || (size_t)n >= cap ? -1 : n;
}

static munge_ctx_t ctx_for(const char *socket)
{
	munge_ctx_t ctx = munge_ctx_create();

	if (ctx && socket &&
	    munge_ctx_set(ctx, MUNGE_OPT_SOCKET, socket) != EMUNGE_SUCCESS) {
		munge_ctx_destroy(ctx);
		return NULL;
	}
	return ctx;
}

int auth_encode(const char *socket, const char *nspace, uint32_t base,
		uint32_t count, char **cred, char *why, size_t whylen)
{
	uint8_t rnd[AUTH_NONCE_HEX / 2];
	char nonce[AUTH_NONCE_HEX + 1], payload[AUTH_PAYLOAD_MAX];
	int n;

	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		snprintf(why, whylen, "no random bytes for the nonce: %s",
			 strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(nonce + 2 * i, 3, "%02x", rnd[i]);
	n = auth_payload(payload, sizeof(payload), nspace, base, count, nonce);
	munge_ctx_t ctx = ctx_for(socket);
	if (n < 0 || !ctx) {
		snprintf(why, whylen, "cannot set up a MUNGE context");
		munge_ctx_destroy(ctx);
		return -1;
	}
	munge_err_t e = munge_encode(cred, ctx, payload, n);
	if (e != EMUNGE_SUCCESS) {
		snprintf(why, whylen, "MUNGE (socket %s): %s",
			 socket ? socket : "default", munge_ctx_strerror(ctx));
		munge_ctx_destroy(ctx);
		return -1;
	}
	munge_ctx_destroy(ctx);
	return 0;
}

/* ---- decoding (worker thread) ------------------------------------------ */

static const char *verdict(munge_err_t e)
{
	switch (e) {
	case EMUNGE_CRED_REPLAYED:
		return "credential replayed (MUNGE has seen it before)";
	case EMUNGE_CRED_EXPIRED:
		return "credential expired (older than its time-to-live)";
	case EMUNGE_CRED_REWOUND:
		return "credential from the future (clock skew)";
	case EMUNGE_BAD_CRED:
	case EMUNGE_BAD_VERSION:
	case EMUNGE_BAD_CIPHER:
	case EMUNGE_BAD_MAC:
	case EMUNGE_BAD_ZIP:
	case EMUNGE_BAD_REALM:
	case EMUNGE_BAD_LENGTH:
	case EMUNGE_CRED_INVALID:
		return "invalid credential (forged, corrupted, or minted with "
		       "another MUNGE key)";
	case EMUNGE_CRED_UNAUTHORIZED:
		return "not authorized to decode this credential";
	case EMUNGE_SOCKET:
		return "cannot reach munged";
	default:
		return "credential refused by MUNGE";
	}
}

/* The payload must be ours, byte for byte, up to a well-formed nonce. */
static bool payload_matches(const struct auth_req *q, const char *p, int len)
{
	if (len != q->expect_len + AUTH_NONCE_HEX + 1 ||
	    memcmp(p, q->expect, (size_t)q->expect_len) != 0 ||
	    p[len - 1] != '\n')
		return false;
	for (int i = q->expect_len; i < len - 1; i++)
		if (!strchr("0123456789abcdef", p[i]) || !p[i])
			return false;
	return true;
}

static void decode_one(auth_worker_t *w, struct auth_req *q)
{
	struct auth_result *res = &q->res;
	munge_ctx_t ctx = ctx_for(w->socket);
	void *payload = NULL;
	int len = 0;
	uid_t uid;
	gid_t gid;

	if (!ctx) {
		snprintf(res->msg, sizeof(res->msg),
			 "cannot set up a MUNGE context");
		return;
	}
	munge_err_t e = munge_decode(q->cred, ctx, &payload, &len, &uid, &gid);
	if (e != EMUNGE_SUCCESS) {
		snprintf(res->msg, sizeof(res->msg), "%s: %s", verdict(e),
			 munge_ctx_strerror(ctx));
	} else if (!payload_matches(q, payload, len)) {
		snprintf(res->msg, sizeof(res->msg),
			 "credential of uid %u is not bound to this HELLO "
			 "(job name, rank range or format differ)",
			 (unsigned)uid);
	} else {
		res->ok = true;
		res->uid = (uint32_t)uid;
		res->gid = (uint32_t)gid;
	}
	free(payload);
	munge_ctx_destroy(ctx);
}

static void *worker_main(void *arg)
{
	auth_worker_t *w = arg;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (!w->stop && TAILQ_EMPTY(&w->pending))
			pthread_cond_wait(&w->cond, &w->lock);
		if (w->stop)
			break;
		struct auth_req *q = TAILQ_FIRST(&w->pending);
		TAILQ_REMOVE(&w->pending, q, link);
		w->npending--;
		q->where = REQ_RUNNING;
		pthread_mutex_unlock(&w->lock);
		decode_one(w, q);
		pthread_mutex_lock(&w->lock);
		q->where = REQ_DONE;
		if (w->stop) { /* the loop may be gone: touch no event */
			w->leftover = q; /* freed by auth_worker_free() */
			break;
		}
		TAILQ_INSERT_TAIL(&w->done, q, link);
		event_active(w->ev_done, EV_READ, 0);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

static void req_free(struct auth_req *q)
{
	if (q->timer)
		event_free(q->timer);
	free(q->cred);
	free(q);
}

/* On the loop: hand finished decodes to their owners. */
static void done_cb(evutil_socket_t fd, short what, void *arg)
{
	auth_worker_t *w = arg;
	struct req_list list = TAILQ_HEAD_INITIALIZER(list);
	struct auth_req *q;

	pthread_mutex_lock(&w->lock);
	TAILQ_CONCAT(&list, &w->done, link);
	pthread_mutex_unlock(&w->lock);
	while ((q = TAILQ_FIRST(&list))) {
		TAILQ_REMOVE(&list, q, link);
		if (!q->canceled)
			q->done(q->arg, &q->res);
		req_free(q);
	}
}

static void timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct auth_req *q = arg;
	struct auth_result res = {.ok = false};
	auth_done_fn done = q->done;
	void *done_arg = q->arg;

	snprintf(res.msg, sizeof(res.msg),
		 "MUNGE did not answer within %d s (munged hung or "
		 "overloaded?)",
		 AUTH_TIMEOUT_S);
	auth_cancel(q);
	done(done_arg, &res);
}

int auth_worker_new(struct event_base *base, const char *socket,
		    auth_worker_t **out)
{
	auth_worker_t *w = calloc(1, sizeof(*w));

	if (!w)
		return -ENOMEM;
	w->base = base;
	TAILQ_INIT(&w->pending);
	TAILQ_INIT(&w->done);
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	w->ev_done = event_new(base, -1, 0, done_cb, w);
	if ((socket && !(w->socket = strdup(socket))) || !w->ev_done)
		goto fail_free;
	int rc = pthread_create(&w->th, NULL, worker_main, w);
	if (rc != 0) {
		errno = rc;
		goto fail_free;
	}
	*out = w;
	return 0;

fail_free:
	rc = errno ? -errno : -ENOMEM;
	if (w->ev_done)
		event_free(w->ev_done);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	free(w->socket);
	free(w);
	return rc;
}

void auth_worker_free(auth_worker_t *w)
{
	struct auth_req *q;
	struct timespec ts;

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_signal(&w->cond);
	while ((q = TAILQ_FIRST(&w->pending))) {
		TAILQ_REMOVE(&w->pending, q, link);
		req_free(q);
	}
	pthread_mutex_unlock(&w->lock);
	/* A decode stuck in libmunge's retries: do not hang the daemon's
	 * exit for it (the worker and its request are left behind). */
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 3;
	if (pthread_timedjoin_np(w->th, NULL, &ts) != 0)
		return;
	if (w->leftover)
		req_free(w->leftover);
	while ((q = TAILQ_FIRST(&w->done))) {
		TAILQ_REMOVE(&w->done, q, link);
		req_free(q);
	}
	event_free(w->ev_done);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	free(w->socket);
	free(w);
}

struct auth_req *auth_submit(auth_worker_t *w, const char *cred, size_t len,
			     const char *nspace, uint32_t base, uint32_t count,
			     auth_done_fn done, void *arg)
{
	struct auth_req *q = calloc(1, sizeof(*q));
	struct timeval tv = {AUTH_TIMEOUT_S, 0};

	if (!q)
		return NULL;
	q->w = w;
	q->done = done;
	q->arg = arg;
	q->cred = strndup(cred, len);
	q->expect_len = auth_payload(q->expect, sizeof(q->expect), nspace,
				     base, count, NULL);
	q->timer = evtimer_new(w->base, timeout_cb, q);
	if (!q->cred || q->expect_len < 0 || !q->timer)
		goto fail_free;
	pthread_mutex_lock(&w->lock);
	if (w->npending >= AUTH_QUEUE_MAX) {
		pthread_mutex_unlock(&w->lock);
		goto fail_free;
	}
	TAILQ_INSERT_TAIL(&w->pending, q, link);
	w->npending++;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	evtimer_add(q->timer, &tv);
	return q;

fail_free:
	req_free(q);
	return NULL;
}

void auth_cancel(struct auth_req *q)
{
	auth_worker_t *w;

	if (!q)
		return;
	w = q->w;
	evtimer_del(q->timer);
	pthread_mutex_lock(&w->lock);
	if (q->where == REQ_PENDING) {
		TAILQ_REMOVE(&w->pending, q, link);
		w->npending--;
		pthread_mutex_unlock(&w->lock);
		req_free(q);
		return;
	}
	q->canceled = true; /* running or done: done_cb frees it */
	pthread_mutex_unlock(&w->lock);
}
