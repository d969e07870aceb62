/* SPDX-License-Identifier: MIT */
/*
 * The per-connection delivery FIFO (part of conn.c's module, see
 * server_i.h): DATA, COMPLETE and EXIT enter it in frame order; an entry
 * leaves only once it and everything before it is done, so an EXIT is
 * applied after every byte sent before it has reached the router, and the
 * ACK counters only ever cover a prefix of the stream.
 */
#include <stdlib.h>
#include <string.h>

#include "net/net_i.h"
#include "net/server_i.h"

void conn_rank_finish(struct crank *cr, enum router_state st, int status)
{
	if (cr->state == CRANK_RUNNING) {
		router_rank_t *rr = cr->rr;
		cr->state = CRANK_DONE;
		cr->rr = NULL;
		router_rank_exit(rr, st, status);
	}
	cr->state = CRANK_DONE;
}

/* Pop every finished entry at the head; ACK if a counter the forwarder
 * sees moved (entries it never sent, the hand-over's pipe reads and what
 * a resume replaced, change nothing it counts: an ACK for each would wake
 * the forwarder once per pipe read for nothing). */
void conn_dq_pump(struct conn *c)
{
	bool moved = false, acked = false;

	while (c->dq_head && c->dq_head->done) {
		struct dq_entry *e = c->dq_head;
		c->dq_head = e->next;
		if (!c->dq_head)
			c->dq_tail = NULL;
		if (e->is_exit) {
			conn_rank_finish(&c->ranks[e->rank_idx],
					 ROUTER_STATE_EXITED, e->exit_status);
			if (!e->old) {
				c->exits_done++;
				acked = true;
			}
		} else {
			c->dq_bytes -= e->len;
			if (!e->old) {
				c->acked_bytes += e->len;
				acked = true;
			}
			conn_admit_buf(c, -(int64_t)e->len);
		}
		free(e);
		moved = true;
	}
	if (moved) { /* one ACK per loop iteration: conn_service() sends it */
		c->ack_pending |= acked;
		conn_kick(c);
	}
	if ((c->susp & CONN_SUSP_DQ) &&
	    c->dq_bytes <= c->srv->cfg.limits.buf_conn / 4) {
		c->susp &= ~CONN_SUSP_DQ;
		conn_kick(c);
	}
}

void conn_dq_push(struct conn *c, struct dq_entry *e)
{
	e->c = c;
	if (c->dq_tail)
		c->dq_tail->next = e;
	else
		c->dq_head = e;
	c->dq_tail = e;
	if (!e->is_exit) {
		c->dq_bytes += e->len;
		conn_admit_buf(c, (int64_t)e->len);
		if (c->dq_bytes > c->srv->cfg.limits.buf_conn) {
			c->susp |= CONN_SUSP_DQ;
			conn_reading(c, false);
		}
	}
}

static void deliver_cb(int status, void *cbdata)
{
	struct dq_entry *e = cbdata;
	struct conn *c = e->c;

	if (!c) { /* orphan: its connection is gone */
		free(e);
		return;
	}
	e->done = true;
	if (status != ROUTER_SUCCESS && status != ROUTER_OPERATION_SUCCEEDED)
		conn_fail(c, PROTO_REFUSED_ROUTER,
			  "delivery for rank %u failed: %s",
			  c->ranks[e->rank_idx].rank, router_strerror(status));
	conn_dq_pump(c);
}

/* Entry @e (head zeroed, @len bytes at @payload inside e->bytes, or none)
 * into the router and the FIFO; @e is owned from now on. */
static int deliver_entry(struct conn *c, uint32_t idx, uint32_t channel,
			 struct dq_entry *e, const uint8_t *payload, size_t len,
			 bool complete)
{
	struct crank *cr = &c->ranks[idx];
	router_proc_t proc;

	e->payload = payload;
	e->rank_idx = idx;
	e->len = len;
	e->dirs = c->dirs;
	if (complete) {
		e->dirs.set |= ROUTER_DIR_COMPLETE;
		e->dirs.value |= ROUTER_DIR_COMPLETE;
	}
	router_proc_set(&proc, c->nspace, cr->rank);
	int rc = router_deliver(c->srv->router, &proc, channel, e->payload, len,
				&e->dirs, deliver_cb, e);
	if (rc != ROUTER_SUCCESS) {
		free(e);
		return conn_fail(c, PROTO_REFUSED_ROUTER,
			  "router refused %s of rank %u: %s",
			  complete ? "COMPLETE" : "DATA", cr->rank,
			  router_strerror(rc));
	}
	conn_dq_push(c, e);
	int ci = proto_channel_index(channel);
	if (!complete && ci >= 0)
		cr->held[ci] += len;
	return 0;
}

int conn_deliver(struct conn *c, uint32_t idx, uint32_t channel,
		 const uint8_t *bytes, size_t len, bool complete)
{
	struct dq_entry *e = c->frame_entry;

	if (e) { /* the frame was read straight into an entry: no copy */
		c->frame_entry = NULL;
	} else {
		e = malloc(sizeof(*e) + len);
		if (!e) {
			return conn_fail(c, PROTO_REFUSED_ROUTER,
					 "out of memory");
		}
		memset(e, 0, sizeof(*e));
		if (len)
			memcpy(e->bytes, bytes, len);
		bytes = e->bytes;
	}
	/* a taken frame: @bytes point past its header, inside the entry */
	return deliver_entry(c, idx, channel, e, bytes, len, complete);
}

int conn_deliver_piped(struct conn *c, uint32_t idx, uint32_t channel,
		       struct dq_entry *e, size_t len, bool complete)
{
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (!e)
			return conn_fail(c, PROTO_REFUSED_ROUTER,
					 "out of memory");
	}
	e->old = true; /* the forwarder never sent these: not ACKed */
	return deliver_entry(c, idx, channel, e, e->bytes, len, complete);
}

int conn_deliver_spliced(struct conn *c, uint32_t idx, uint32_t channel,
			 struct dq_entry *e, uint8_t *buf, size_t cap, int fd,
			 size_t *taken)
{
	struct crank *cr = &c->ranks[idx];
	router_proc_t proc;
	int rc;

	e->old = true; /* the forwarder never sent these: not ACKed */
	e->payload = e->bytes;
	e->rank_idx = idx;
	e->dirs = c->dirs;
	router_proc_set(&proc, c->nspace, cr->rank);
	rc = router_deliver_pipe(c->srv->router, &proc, channel, fd, buf,
				 cap, &e->dirs, deliver_cb, e, taken);
	if (rc == ROUTER_AGAIN || rc == ROUTER_ERR_PIPE ||
	    rc == ROUTER_ERR_NOT_SUPPORTED || rc == ROUTER_STORE_FULL)
		return rc;
	if (rc != ROUTER_SUCCESS) {
		free(e);
		return conn_fail(c, PROTO_REFUSED_ROUTER,
				 "router refused DATA of rank %u: %s",
				 cr->rank, router_strerror(rc));
	}
	e->len = *taken;
	conn_dq_push(c, e);
	int ci = proto_channel_index(channel);
	if (ci >= 0)
		cr->held[ci] += *taken;
	return 0;
}

int conn_dq_exit(struct conn *c, uint32_t idx, int status)
{
	struct dq_entry *e = calloc(1, sizeof(*e));

	if (!e)
		return conn_fail(c, PROTO_REFUSED_ROUTER, "out of memory");
	e->is_exit = true;
	e->done = true;
	e->rank_idx = idx;
	e->exit_status = status;
	conn_dq_push(c, e);
	conn_dq_pump(c);
	return 0;
}

/* Connection teardown: EXITs the forwarder did send are honoured, in
 * order; bytes already handed to the router stay there (their entries
 * become orphans, freed by their callbacks). */
void conn_dq_release(struct conn *c)
{
	while (c->dq_head) {
		struct dq_entry *e = c->dq_head;
		c->dq_head = e->next;
		if (e->is_exit) {
			conn_rank_finish(&c->ranks[e->rank_idx],
					 ROUTER_STATE_EXITED, e->exit_status);
			free(e);
		} else if (e->done) {
			free(e);
		} else {
			e->c = NULL;
		}
	}
	c->dq_tail = NULL;
}
