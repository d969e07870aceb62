/* SPDX-License-Identifier: MIT */
/*
 * iofs filesystem: the FUSE low-level adapter over the router.
 *
 * Serves MOUNTPOINT/<nspace>/{info,stdout,stderr,stdin} and
 * MOUNTPOINT/<nspace>/<rank>/{stdout,stderr,stdin,info} straight from the
 * router (docs/filesystem.md).  Single-threaded: the FUSE device is one
 * persistent read event on the daemon's libevent loop, and every request
 * that cannot be answered at once (a read at the live end, a write while the
 * rank's stdin is XOFFed) is parked and
 * answered later from a router callback.  Every call here runs on the loop
 * thread.
 */
#ifndef IOFS_FS_H
#define IOFS_FS_H

#include <stdbool.h>
#include <stdint.h>

#include "log/log.h"
#include "router/router.h"

struct event_base;
typedef struct fs fs_t;

struct fs_config {
	/* Absolute path of an existing directory; copied. */
	const char *mountpoint;
	/* Extra FUSE mount options ("-o" syntax without the "-o", comma
	 * separated; NULL = none); copied.  allow_other (as root),
	 * default_permissions, auto_unmount, fsname and subtype are added. */
	const char *fuse_opts;
	bool debug;	   /* libfuse debug: log every request to stderr */
	uint32_t linger_s; /* remove completed jobs after this; 0 = never */
	/* ... jobs whose forwarder vanished (state lost), if sooner;
	 * 0 = like linger_s */
	uint32_t linger_lost_s;
	/* stdin bytes held for blocked writers per uid (0 = unlimited) */
	uint64_t stdin_uid_max;
	uint32_t max_read; /* the "-o max_read=" value if given, else 0 */
	/* Called once, on the loop thread, when the session ends by itself
	 * (fusermount3 -u, umount, fatal device error).  May be NULL. */
	void (*on_exit)(void *ctx);
	void *on_exit_ctx;
	/* Borrowed, outlives the fs; NULL = stderr.  Module "fs". */
	iofs_log_t *log;
};

/* What the daemon's loop watches to decide whether to poll before it
 * sleeps (fs/loop.h): kept up to date by the fs on the loop thread; the
 * pointer fs_activity() returns lives as long as the fs. */
struct fs_activity {
	uint64_t requests; /* FUSE requests taken since the start */
	uint64_t stdin_ns; /* CLOCK_MONOTONIC ns of the last stdin write,
			      0 = none yet */
};
const struct fs_activity *fs_activity(const fs_t *fs);

/*
 * Create the filesystem on @base over @r (both borrowed; they must outlive
 * the fs).  Parses the FUSE options: a bad option fails with -EINVAL and a
 * message in @err.  Nothing is mounted yet.  Returns 0 or -errno; *out is
 * owned by the caller, free it with fs_free().
 */
int fs_new(struct event_base *base, router_t *r, const struct fs_config *cfg,
	   char *err, size_t errlen, fs_t **out);

/*
 * Mount and start serving (adds the device's read event to the loop).
 * Returns 0, or -errno with a message in @err that says what to do.
 */
int fs_mount(fs_t *fs, char *err, size_t errlen);

/* After fs_mount(): 1 once the kernel's INIT was answered (the mount is
 * usable), 0 while pending (run the loop), -1 if the session failed. */
int fs_ready(const fs_t *fs);

/*
 * Answer every parked request: reads get EOF, opens succeed, writes get the
 * bytes consumed so far (EPIPE if none).  Later requests are answered at
 * once (no parking).  Call before router_shutdown().  Idempotent.
 */
void fs_shutdown(fs_t *fs);

/* Files and directories opened and not yet released.  After fs_shutdown()
 * the daemon keeps serving until this reaches 0 (or a grace time passes),
 * so closing programs get their FLUSH/RELEASE answered. */
size_t fs_open_count(const fs_t *fs);

/* Unmount (if mounted) and stop serving.  Idempotent.  Returns 0, or
 * -EBUSY when the mount is still there afterwards (fusermount3 refused:
 * logged, with what the user can do), so the daemon exits non-zero. */
int fs_unmount(fs_t *fs);

/* fs_shutdown() + fs_unmount(), then free everything (open handles, inode
 * references).  NULL-safe. */
void fs_free(fs_t *fs);

/*
 * Pre-mount checks shared with the daemon: /dev/fuse usable, @path an
 * existing directory and not already a mount point.  Returns 0 or -errno
 * with a message in @err saying what to do.
 */
int fs_check_mountpoint(const char *path, char *err, size_t errlen);

/* Is a FUSE filesystem mounted at @real (a realpath())?  Reads
 * /proc/self/mountinfo only: never touches the path (ours would ask
 * this very thread). */
bool fs_fuse_mounted_at(const char *real);

/*
 * Is @path (absolute or relative, need not exist) @mount_abs or below it,
 * symlinks of its existing part resolved?  @mount_abs: a realpath().  A
 * socket or output file there would be served by the daemon to itself.
 */
bool fs_path_inside(const char *mount_abs, const char *path);

#endif /* IOFS_FS_H */
