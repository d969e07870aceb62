/* SPDX-License-Identifier: MIT */
/*
 * PMIx source messages: struct ps_msg, the record of every PMIx operation
 * we start (on ps->pending until PMIx calls it back) and of every callback
 * PMIx makes, and ps_dispatch(), which hands each message to its module
 * on the loop thread.
 *
 * Threads.  ps_msg_new, ps_msg_free, ps_op_claim, ps_op_abort and ps_post
 * run on any thread (the progress thread's pt_* callbacks use them;
 * ps->pending is guarded by ps->lock).  ps_dispatch() runs on the daemon's
 * loop thread (router_defer).
 */
#include <stdlib.h>
#include <string.h>

#include "net/pmix/pmix_source_i.h"

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

struct ps_msg *ps_msg_new(pmix_source_t *ps, enum ps_msg_kind kind)
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
	struct ps_msg *m = ps_msg_new(ps, kind);

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

void ps_copy_nspace(char *dst, const char *src)
{
	size_t n = strnlen(src, PMIX_MAX_NSLEN);
	if (n > ROUTER_NSPACE_MAX)
		n = ROUTER_NSPACE_MAX;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* Loop thread (router_defer): @m to the module that handles its kind. */
static void ps_dispatch(void *arg)
{
	struct ps_msg *m = arg;
	pmix_source_t *ps = m->ps;

	if (ps->closing) {
		ps_msg_free(m);
		return;
	}
	switch (m->kind) {
	case PS_MSG_IOF:
		if (ps_pull_deliver(ps, m))
			return; /* the job took m */
		break;
	case PS_MSG_EVENT:
		ps_event_handle(ps, m);
		break;
	case PS_MSG_QUERY:
		ps_discover_answered(ps, m);
		break;
	case PS_MSG_SIZE:
		ps_size_answered(ps, m);
		break;
	case PS_MSG_ARGV:
		ps_argv_answered(ps, m);
		break;
	case PS_MSG_PULLED:
		ps_pull_answered(ps, m);
		break;
	case PS_MSG_PUSHED:
		if (ps_push_done(ps, m))
			return; /* back with PMIx: the next chunk */
		break;
	}
	ps_msg_free(m);
}
