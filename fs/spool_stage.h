/* SPDX-License-Identifier: MIT */
/*
 * The stage (docs/design.md "The stage"; docs/performance.md "The stage in
 * the daemon"): a rank file past SPOOL_STAGE_AFTER gets a
 * mapped, preallocated `<name>.stage` (page 0 a header, then
 * SPOOL_STAGE_SLOTS buffers of SPOOL_STAGE_SLOT bytes).  Appends are
 * copied into the current buffer and its length published after the
 * bytes; a full buffer is written to the rank file with O_DIRECT through
 * io_uring and its length zeroed when the write completes.  The pages are
 * the page cache's, reused, never allocated again, so a kill -9 keeps every
 * byte copied in, and the next daemon writes back the buffers with a
 * length (spool_stage_apply()).
 *
 * Exact on both paths: on the socket path a byte is in the stage before it
 * is acknowledged; on the pipe hand-over (spool_stage_splice()) the daemon
 * reads the pipe straight into the stage with the read's intent recorded
 * first (buffer, position, count, and the pipe's first byte, peeked with
 * tee(2), whose complement the stage holds there until the read lands), so
 * a restart knows whether the read happened (docs/design.md, "The stage",
 * which also says what is left: a read cut short by a page fault while the
 * kill is pending).
 *
 * Owned by the loop thread.  Return codes: negative errno.
 */
#ifndef IOFS_FS_SPOOL_STAGE_H
#define IOFS_FS_SPOOL_STAGE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "log/log.h"

#define SPOOL_STAGE_SLOT (1u << 20)  /* one direct write */
#define SPOOL_STAGE_SLOTS 4	     /* per staged file */
#define SPOOL_STAGE_AFTER (4u << 20) /* a file this long is staged */
#define SPOOL_STAGE_MAX 16	     /* staged files at once, per daemon */
#define SPOOL_STAGE_IDLE_NS 2000000000ull /* a stage idle this long may go */

struct spool_file;
struct spool_job;
typedef struct spool_stager spool_stager_t;

/* The spool's io_uring and the list of stages: 0 and *out, or -errno
 * (*out NULL: nothing is staged; the caller logs why once). */
int spool_stager_new(iofs_log_t *log, spool_stager_t **out);
/* Every stage closed first (spool_stage_close()).  NULL-safe. */
void spool_stager_free(spool_stager_t *sg);

/* Whether @f (a rank file of @size bytes) should be staged now: the
 * stager works, @f has no stage, has grown past SPOOL_STAGE_AFTER and was
 * not refused one for good. */
bool spool_stage_want(spool_stager_t *sg, struct spool_file *f);
/* Give @f a stage (closing an idle one when SPOOL_STAGE_MAX are open):
 * 0, or -errno and @f keeps the page-cache path (a filesystem without
 * O_DIRECT refuses it for good, a full one until a later try). */
int spool_stage_open(spool_stager_t *sg, struct spool_file *f);
/* Append to @f's stage: bytes taken (> 0; may be short: up to the end of
 * a buffer), or -ENOSPC/-EDQUOT (nothing taken: the stage's disk or a
 * buffer's direct write is full; the router holds the bytes and retries),
 * other -errno (the store gives up). */
ssize_t spool_stage_append(struct spool_file *f, const struct iovec *iov,
			   int iovcnt);
/* The store op splice_in for a staged @f: move up to @n bytes from the
 * pipe @fd into the stage and point @bytes at them there (valid until
 * the next call on @f).  As append, and
 * -EAGAIN (the pipe is empty), 0 at its end. */
ssize_t spool_stage_splice(struct spool_file *f, int fd, size_t n,
			   const void **bytes);
/* All @n bytes at @off of @f, from its stage or its file: 0 or -errno. */
int spool_stage_pread(struct spool_file *f, void *buf, size_t n,
		      uint64_t off);
/* The first byte of @f not yet written to its file (its size when it has
 * no stage): caps punch holes below it only. */
uint64_t spool_stage_durable(struct spool_file *f);
/* Bytes [0, @to) of @f were evicted: a restart must not write them back. */
void spool_stage_evicted(struct spool_file *f, uint64_t to);
/* Wait for @f's writes, write its last partial slot (and any slot whose
 * direct write failed) through the page cache unless @discard, unmap and
 * remove the stage (kept if those writes fail: the next daemon applies
 * it).  No-op without one. */
void spool_stage_close(struct spool_file *f, bool discard);

/* Restart: write what `@name.stage` in the job directory @dirfd holds
 * into @name (below its evicted mark: nothing), then remove the stage.  0 (also when there is none),
 * or -errno (logged by the caller; the stage is left alone). */
int spool_stage_apply(int dirfd, const char *name);

#endif /* IOFS_FS_SPOOL_STAGE_H */
