/* SPDX-License-Identifier: MIT */
/* Directories and files the daemon writes as root for a job's owner. */
#include "fs/safe_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int safe_mkdir_p(char *path, mode_t mode)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, mode) != 0 && errno != EEXIST) {
			*p = '/';
			return -errno;
		}
		*p = '/';
	}
	if (mkdir(path, mode) != 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/*
 * The top directory: owned by root or by us, writable by nobody else.  Every
 * name below it is then created by us (openat/mkdirat relative to its fd,
 * O_NOFOLLOW), so no other user can plant a link on the way to a file we
 * write as root.  0, or a positive errno with a reason in @why.
 */
int safe_dir_check_top(int fd, char *why, size_t whylen)
{
	struct stat st;

	if (fstat(fd, &st) != 0) {
		snprintf(why, whylen, "%s", strerror(errno));
		return errno;
	}
	if (st.st_uid != 0 && st.st_uid != geteuid()) {
		snprintf(why, whylen,
			 "owned by uid %u: it must belong to root or to the "
			 "daemon's user (uid %u)",
			 (unsigned)st.st_uid, (unsigned)geteuid());
		return EPERM;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(why, whylen,
			 "mode %04o is writable by other users (another user "
			 "could plant a link where a job's files go): "
			 "chmod go-w it",
			 (unsigned)(st.st_mode & 07777));
		return EPERM;
	}
	return 0;
}

int safe_dir_check_path(const char *path, char *why, size_t whylen)
{
	char buf[4096];
	size_t n = strlen(path);
	struct stat st;

	if (n >= sizeof(buf) || path[0] != '/') {
		snprintf(why, whylen, "not an absolute path of at most %zu bytes",
			 sizeof(buf) - 1);
		return EINVAL;
	}
	memcpy(buf, path, n + 1);
	for (size_t i = 1; i < n; i++) {
		if (buf[i] != '/')
			continue;
		buf[i] = '\0';
		if (stat(buf, &st) != 0) {
			int e = errno;

			buf[i] = '/';
			if (e == ENOENT)
				return 0; /* the rest is ours to create */
			snprintf(why, whylen, "%.*s: %s", (int)i, buf,
				 strerror(e));
			return e;
		}
		if (st.st_uid != 0 && st.st_uid != geteuid()) {
			snprintf(why, whylen,
				 "%s belongs to uid %u: every directory on the "
				 "way must belong to root or to the daemon's "
				 "user (uid %u)",
				 buf, (unsigned)st.st_uid, (unsigned)geteuid());
			buf[i] = '/';
			return EPERM;
		}
		if ((st.st_mode & (S_IWGRP | S_IWOTH)) &&
		    !(st.st_mode & S_ISVTX)) {
			snprintf(why, whylen,
				 "%s (mode %04o) is writable by other users "
				 "and not sticky: another user could replace "
				 "what lies below it",
				 buf, (unsigned)(st.st_mode & 07777));
			buf[i] = '/';
			return EPERM;
		}
		buf[i] = '/';
	}
	return 0;
}

int safe_dir_top(const char *path, mode_t mode, const char *what, char *err,
		 size_t errlen)
{
	char *p = strdup(path), why[256];
	int rc, fd = -1;

	if (!p) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = safe_mkdir_p(p, mode);
	free(p);
	if (rc < 0) {
		snprintf(err, errlen, "%s %s: %s: give a writable directory",
			 what, path, strerror(-rc));
		return rc;
	}
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s %s: %s", what, path, strerror(-rc));
		return rc;
	}
	rc = safe_dir_check_top(fd, why, sizeof(why));
	if (rc) {
		snprintf(err, errlen, "%s %s: %s", what, path, why);
		close(fd);
		return -rc;
	}
	return fd;
}

/* -errno of a failed open of @name, a planted link named as such. */
static int open_failed(const char *name, char *why, size_t whylen)
{
	int e = errno;

	if (e == ELOOP || e == ENOTDIR)
		snprintf(why, whylen,
			 "%s is a symbolic link or not a directory: not "
			 "following it",
			 name);
	return -e;
}

/* @fd (@what @name) belongs to @owner, not @uid: close it, -EPERM. */
static int not_owner(int fd, const char *what, const char *name,
		     uid_t owner, uint32_t uid, char *why, size_t whylen)
{
	snprintf(why, whylen,
		 "%s %s belongs to uid %u, the job to uid %u: not writing "
		 "into it",
		 what, name, (unsigned)owner, (unsigned)uid);
	close(fd);
	return -EPERM;
}

/*
 * Open (creating if needed) directory @name in @dirfd for a job of
 * @uid/@gid: never through a symlink, and only a directory that already
 * belongs to @uid (or one we just made and gave to it, @mode).  Returns an
 * fd or -errno; -EPERM with @why filled on a directory of someone else.
 */
int safe_dir_open(int dirfd, const char *name, uint32_t uid, uint32_t gid,
		  mode_t mode, char *why, size_t whylen)
{
	struct stat st;
	bool made = false;
	int fd;

	if (mkdirat(dirfd, name, 0700) == 0)
		made = true;
	else if (errno != EEXIST)
		return -errno;
	fd = openat(dirfd, name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return open_failed(name, why, whylen);
	if (fstat(fd, &st) != 0)
		goto fail_errno;
	if (made && st.st_uid != uid &&
	    (fchown(fd, uid, gid) != 0 || fstat(fd, &st) != 0))
		goto fail_errno;
	if (st.st_uid != uid)
		return not_owner(fd, "directory", name, st.st_uid, uid, why,
				 whylen);
	if (made && fchmod(fd, mode) != 0)
		goto fail_errno;
	return fd;

fail_errno:
	fd = (close(fd), -errno);
	return fd;
}

/* The job's file @name in @dirfd: a regular file of @uid with one link,
 * created @mode in its name (opened @acc: O_WRONLY or O_RDWR, and
 * O_APPEND); never through a symlink. */
int safe_file_open(int dirfd, const char *name, int acc, mode_t mode,
		   bool truncate, uint32_t uid, uint32_t gid, char *why,
		   size_t whylen)
{
	struct stat st;
	int fd = openat(dirfd, name,
			acc | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC,
			0600);

	if (fd < 0)
		return open_failed(name, why, whylen);
	if (fstat(fd, &st) != 0)
		goto fail_errno;
	if (!S_ISREG(st.st_mode) || st.st_nlink != 1) {
		snprintf(why, whylen,
			 "%s is not a plain file with one link: not writing "
			 "into it",
			 name);
		close(fd);
		return -EPERM;
	}
	if (st.st_uid != uid && st.st_uid == geteuid() && st.st_size == 0 &&
	    (fchown(fd, uid, gid) != 0 || fstat(fd, &st) != 0))
		goto fail_errno;
	if (st.st_uid != uid)
		return not_owner(fd, "file", name, st.st_uid, uid, why,
				 whylen);
	if ((truncate && ftruncate(fd, 0) != 0) ||
	    ((st.st_mode & 07777) != mode && fchmod(fd, mode) != 0))
		goto fail_errno;
	return fd;

fail_errno:
	fd = (close(fd), -errno);
	return fd;
}

