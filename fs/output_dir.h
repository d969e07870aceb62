/* SPDX-License-Identifier: MIT */
/*
 * --output-dir: copy every rank's stdout and stderr to
 * DIR/<nspace>/<rank>/{stdout,stderr} (like mpirun --output-filename),
 * through a local router subscriber, so fragments delivered with
 * LOCAL_OUTPUT=false are skipped.  A file is truncated when its stream is
 * first seen and closed when the stream completes; a job re-run under the
 * same nspace overwrites it.  Writes are synchronous on the loop thread.
 *
 * Safety (docs/security.md): DIR must belong to root or the daemon's user
 * and be writable by no one else; everything below it is created with
 * mkdirat/openat relative to its descriptor, O_NOFOLLOW, and handed to the
 * job's owner (directories 0750, files 0640, owner's uid and gid).  A
 * directory or file on the way that belongs to someone else, a symlink, or
 * a file with more than one link is refused and logged.
 */
#ifndef IOFS_FS_OUTPUT_DIR_H
#define IOFS_FS_OUTPUT_DIR_H

#include <stddef.h>

#include "log/log.h"
#include "router/router.h"

typedef struct output_dir output_dir_t;

/* @dir must exist or be creatable, and be safe (above).  Write errors go
 * to @log (borrowed, outlives it; NULL = stderr).  Returns 0 or -errno
 * with a message in
 * @err.  *out is owned by the caller: output_dir_free(). */
int output_dir_new(router_t *r, iofs_log_t *log, const char *dir, char *err,
		   size_t errlen, output_dir_t **out);

/* Unsubscribe and close every file.  NULL-safe. */
void output_dir_free(output_dir_t *od);

#endif /* IOFS_FS_OUTPUT_DIR_H */
