/* SPDX-License-Identifier: MIT */
/*
 * The spool (-o spool=DIR): the router's storage (router_store_ops) as
 * files, so every stream keeps its whole history on disk while the router
 * holds only its window in memory.
 *
 * Layout: DIR/<n>/ for each job the daemon has seen output from (n counts
 * up, skipping names already there), holding `nspace` (the job's name) and
 * one file per rank stream: `<rank>.stdout`, `<rank>.stderr` (with
 * `<rank>.stdout.stage` while a streaming rank's file has a stage:
 * fs/spool_stage.h), and the
 * merged views as indexes into them: `stdout.idx` + `stdout.lit`, the same
 * for stderr (fs/spool_mview.c; an earlier version's plain `stdout` copy
 * is still adopted).  DIR must belong to root or the daemon's user
 * and be writable by no one else (fs/safe_dir.h); everything below it
 * belongs to the daemon, directories 0700 and files 0600 (the daemon serves
 * the bytes; nobody else needs them).  A job's files are removed when the
 * router frees the job (removed from the tree and its last reader gone);
 * jobs still in the tree when the daemon stops stay, with `state` (uid,
 * gid, and each rank's end), for the next daemon's spool_restore().
 */
#ifndef IOFS_FS_SPOOL_H
#define IOFS_FS_SPOOL_H

#include <stddef.h>

#include "log/log.h"
#include "router/router.h"

typedef struct spool spool_t;

/* Create @dir if needed and check it.  Returns 0 or -errno with a message
 * in @err; *out is the caller's: spool_free() after the router. */
int spool_new(iofs_log_t *log, const char *dir, char *err, size_t errlen,
	      spool_t **out);
void spool_free(spool_t *sp); /* NULL-safe */

/* Restart: bring the jobs an earlier daemon left in the spool back into
 * @r (created with this spool as its store), oldest first; each as it
 * ended (`state`), or `lost` if it was still running; every byte of its
 * streams readable.  What cannot be restored is logged and left alone.
 * Returns the number of job directories seen, or -errno. */
int spool_restore(spool_t *sp, router_t *r, bool keep_running);

/* No drop-behind (fs/spool_flush.h): every byte written stays in the page
 * cache until the kernel wants it (-o spool_keep_cache).  Before any
 * append. */
void spool_keep_cache(spool_t *sp);

/* No stage (fs/spool_stage.h): rank files are written through the page
 * cache however long they grow (-o spool_nostage).  Before any append. */
void spool_no_stage(spool_t *sp);

/* For router_config.store / store_ctx. */
const struct router_store_ops *spool_store_ops(void);

#endif /* IOFS_FS_SPOOL_H */
