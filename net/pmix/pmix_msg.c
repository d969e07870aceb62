/* SPDX-License-Identifier: MIT */
/*
 * PMIx source: the messages (struct ps_msg) that carry what a PMIx callback
 * was handed from the progress thread to the loop thread, and the list of
 * ops handed to PMIx whose callback has not come yet (ps->pending), which
 * pmix_source_free() reclaims.
 */
#include <stdlib.h>

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
