/* SPDX-License-Identifier: MIT */
/*
 * Private: stdin pushes.  A push is cut into one slice per target rank; the
 * slices sit on the ranks' FIFOs and share the push's completion.  A rank's
 * FIFO drains into its sink while the sink is not XOFFed.
 */
#ifndef IOFS_ROUTER_PUSH_I_H
#define IOFS_ROUTER_PUSH_I_H

#include "router/job_i.h"

/* Fail every queued slice of @rank with @status, count the bytes in
 * stdin_discarded, release its stdin latch (counted).  Idempotent. */
void push_rank_exit(router_rank_t *rank, int status);
/* New rank: inherit a job writer for the FIFO rule. */
void push_rank_new(router_rank_t *rank);

/* Sequence number of the oldest unfinished push, UINT64_MAX if none. */
uint64_t push_oldest_seq(router_t *r);

#endif
