/* SPDX-License-Identifier: MIT */
/*
 * Directories and files the daemon writes (possibly as root) below a
 * verified top directory: --output-dir and the spool.  The top directory
 * must belong to root or the daemon's user and be writable by no one else;
 * everything below it is created with mkdirat/openat relative to its
 * descriptor, O_NOFOLLOW, and belongs to a given owner.  A directory or
 * file on the way that belongs to someone else, a symlink, or a file with
 * more than one link is refused, with the reason in @why
 * (docs/security.md).
 */
#ifndef IOFS_FS_SAFE_DIR_H
#define IOFS_FS_SAFE_DIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* mkdir -p @path (modified in place, restored), @mode for new ones:
 * 0 or -errno. */
int safe_mkdir_p(char *path, mode_t mode);

/* The top directory @fd: owned by root or by us, writable by nobody else.
 * 0, or a positive errno with a reason in @why. */
int safe_dir_check_top(int fd, char *why, size_t whylen);

/* Every existing directory on the way to @path (not @path itself):
 * owned by root or by us, and writable by others only if sticky (/tmp,
 * /var/tmp).  Checked before creating anything below, so no other user
 * can move or replace a directory on the way.  0, or a positive errno
 * with a reason in @why. */
int safe_dir_check_path(const char *path, char *why, size_t whylen);

/* The top directory @path: created (mkdir -p, @mode) if needed, opened and
 * checked as above.  An fd, or -errno with "@what @path: reason" in @err. */
int safe_dir_top(const char *path, mode_t mode, const char *what, char *err,
		 size_t errlen);

/* Open (creating with @mode if needed) directory @name in @dirfd for
 * @uid/@gid: an fd, or -errno (-EPERM with @why filled on a directory of
 * someone else, a link). */
int safe_dir_open(int dirfd, const char *name, uint32_t uid, uint32_t gid,
		  mode_t mode, char *why, size_t whylen);

/* Open (creating) plain file @name in @dirfd for @uid/@gid with @mode,
 * @acc (O_WRONLY or O_RDWR, plus e.g. O_NONBLOCK) | O_APPEND, truncated
 * if @truncate: an fd, or -errno (-EPERM with @why filled). */
int safe_file_open(int dirfd, const char *name, int acc, mode_t mode,
		   bool truncate, uint32_t uid, uint32_t gid, char *why,
		   size_t whylen);

#endif /* IOFS_FS_SAFE_DIR_H */
