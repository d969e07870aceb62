/* SPDX-License-Identifier: MIT */
/*
 * Private: the merged view's line discipline and formats.
 *
 * Whole lines go into the merged view with a tag in front (TAG, RANK,
 * TIMESTAMP, XML, or none when TAG_OUTPUT is set false).  A partial line is
 * held per (rank, channel) until its newline, until it reaches
 * buffering_size, or until buffering_ms passed (router_run_timers); then it
 * is emitted and left "open" in the view.  If another rank's piece must go
 * into the view while a line is open, the open line is ended with "\n" and
 * its later continuation is tagged "[ns,rank]<stdout>+ " instead of ": ".
 * See docs/design.md for the exact rules.
 */
#ifndef IOFS_ROUTER_LINE_I_H
#define IOFS_ROUTER_LINE_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "router/job_i.h"

/* Feed bytes of @rank's channel @ci (tag channel @channel), at offset @at
 * of its stream (in order: where the last feed ended), to the view. */
int line_feed(router_rank_t *rank, int ci, uint32_t channel, const void *p,
	      size_t n, uint64_t at, const router_directives_t *eff,
	      uint64_t now);
/* Emit the pending partial line (if any); @final also ends the rank's open
 * line in the view with "\n" (COMPLETE, exit, shutdown). */
int line_flush(router_rank_t *rank, int ci, bool final);
/* Free the pending buffer and leave r->pend. */
void line_reset(router_t *r, struct line_state *ls);
/* @rank's channel @ci is no longer held back: its pending partial line (if
 * any) gets a whole buffering period from now for the rest to arrive. */
void line_resume(router_rank_t *rank, int ci);
/* The line state's owner. */
router_rank_t *line_rank(struct line_state *ls, int *ci);

#endif
