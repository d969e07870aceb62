/* SPDX-License-Identifier: MIT */
#include "fs/output_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <unistd.h>

#define OUTPUT_DIR_MAX_FDS 64 /* open files kept; others reopen to append */

struct od_stream {
	char nspace[ROUTER_NSPACE_MAX + 1];
	uint32_t rank;
	uint32_t channel; /* STDOUT or STDERR (STDDIAG goes to stderr) */
	int fd;		  /* -1 while closed to save descriptors */
	bool failed;	  /* an error was logged: drop silently */
	TAILQ_ENTRY(od_stream) link;
};

struct output_dir {
	router_t *r;
	iofs_log_t *log; /* borrowed */
	router_sub_t *sub;
	char *dir;
	int dirfd; /* the verified top directory */
	size_t nopen;
	TAILQ_HEAD(od_stream_list, od_stream) streams; /* MRU first */
};

static int mkdir_p(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0755) != 0 && errno != EEXIST) {
			*p = '/';
			return -errno;
		}
		*p = '/';
	}
	if (mkdir(path, 0755) != 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/*
 * The top directory: owned by root or by us, writable by nobody else.  Every
 * name below it is then created by us (openat/mkdirat relative to its fd,
 * O_NOFOLLOW), so no other user can plant a link on the way to a file we
 * write as root.  0, or a positive errno with a reason in @why.
 */
static int od_check_top(int fd, char *why, size_t whylen)
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

/* -errno of a failed open of @name, a planted link named as such. */
static int od_open_failed(const char *name, char *why, size_t whylen)
{
	int e = errno;

	if (e == ELOOP || e == ENOTDIR)
		snprintf(why, whylen,
			 "%s is a symbolic link or not a directory: not "
			 "following it",
			 name);
	return -e;
}

/*
 * Open (creating if needed) directory @name in @dirfd for a job of
 * @uid/@gid: never through a symlink, and only a directory that already
 * belongs to @uid (or one we just made and gave to it, 0750).  Returns an
 * fd or -errno; -EPERM with @why filled on a directory of someone else.
 */
static int od_open_dir(int dirfd, const char *name, uint32_t uid,
		       uint32_t gid, char *why, size_t whylen)
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
		return od_open_failed(name, why, whylen);
	if (fstat(fd, &st) != 0)
		goto fail_errno;
	if (made && st.st_uid != uid &&
	    (fchown(fd, uid, gid) != 0 || fstat(fd, &st) != 0))
		goto fail_errno;
	if (st.st_uid != uid) {
		snprintf(why, whylen,
			 "directory %s belongs to uid %u, the job to uid %u: "
			 "not writing into it",
			 name, (unsigned)st.st_uid, (unsigned)uid);
		close(fd);
		return -EPERM;
	}
	if (made && fchmod(fd, 0750) != 0)
		goto fail_errno;
	return fd;

fail_errno:
	fd = (close(fd), -errno);
	return fd;
}

/* The job's file @name in @dirfd: a regular file of @uid with one link,
 * created 0640 in its name; never through a symlink. */
static int od_open_file(int dirfd, const char *name, bool truncate,
			uint32_t uid, uint32_t gid, char *why, size_t whylen)
{
	struct stat st;
	int fd = openat(dirfd, name,
			O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW |
			    O_NONBLOCK | O_CLOEXEC,
			0600);

	if (fd < 0)
		return od_open_failed(name, why, whylen);
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
	if (st.st_uid != uid) {
		snprintf(why, whylen,
			 "file %s belongs to uid %u, the job to uid %u: not "
			 "writing into it",
			 name, (unsigned)st.st_uid, (unsigned)uid);
		close(fd);
		return -EPERM;
	}
	if ((truncate && ftruncate(fd, 0) != 0) ||
	    ((st.st_mode & 07777) != 0640 && fchmod(fd, 0640) != 0))
		goto fail_errno;
	return fd;

fail_errno:
	fd = (close(fd), -errno);
	return fd;
}

static void od_close(struct output_dir *od, struct od_stream *s)
{
	if (s->fd >= 0) {
		close(s->fd);
		s->fd = -1;
		od->nopen--;
	}
}

static void od_drop(struct output_dir *od, struct od_stream *s)
{
	od_close(od, s);
	TAILQ_REMOVE(&od->streams, s, link);
	free(s);
}

/* Find (and move to the front) or create the record of a stream. */
static struct od_stream *od_find(struct output_dir *od,
				 const router_proc_t *src, uint32_t channel,
				 bool *created)
{
	struct od_stream *s;

	*created = false;
	TAILQ_FOREACH (s, &od->streams, link)
		if (s->rank == src->rank && s->channel == channel &&
		    !strcmp(s->nspace, src->nspace)) {
			TAILQ_REMOVE(&od->streams, s, link);
			TAILQ_INSERT_HEAD(&od->streams, s, link);
			return s;
		}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	snprintf(s->nspace, sizeof(s->nspace), "%s", src->nspace);
	s->rank = src->rank;
	s->channel = channel;
	s->fd = -1;
	TAILQ_INSERT_HEAD(&od->streams, s, link);
	*created = true;
	return s;
}

static int od_open(struct output_dir *od, struct od_stream *s, bool truncate,
		   char *why, size_t whylen)
{
	router_job_t *job = router_job_lookup(od->r, s->nspace);
	char rank[16];
	struct od_stream *last;
	uint32_t uid, gid;
	int nsfd, rkfd;

	if (!job)
		return -ENOENT;
	router_job_owner(job, &uid, &gid);
	while (od->nopen >= OUTPUT_DIR_MAX_FDS) {
		TAILQ_FOREACH_REVERSE(last, &od->streams, od_stream_list, link)
		if (last->fd >= 0)
			break;
		if (!last)
			break;
		od_close(od, last);
	}
	snprintf(rank, sizeof(rank), "%" PRIu32, s->rank);
	nsfd = od_open_dir(od->dirfd, s->nspace, uid, gid, why, whylen);
	if (nsfd < 0)
		return nsfd;
	rkfd = od_open_dir(nsfd, rank, uid, gid, why, whylen);
	close(nsfd);
	if (rkfd < 0)
		return rkfd;
	s->fd = od_open_file(
	    rkfd, s->channel == ROUTER_CH_STDOUT ? "stdout" : "stderr",
	    truncate, uid, gid, why, whylen);
	close(rkfd);
	if (s->fd < 0)
		return s->fd;
	od->nopen++;
	return 0;
}

static void od_fragment(void *cbdata, const router_proc_t *src,
			uint32_t channel, const void *bytes, size_t len,
			const router_directives_t *dirs)
{
	struct output_dir *od = cbdata;
	struct od_stream *s;
	char why[512];
	bool created;
	int rc;

	/* STDDIAG shares the stderr file but does not close it. */
	s = od_find(od, src,
		    channel == ROUTER_CH_STDOUT ? ROUTER_CH_STDOUT
						: ROUTER_CH_STDERR,
		    &created);
	if (!s || s->failed)
		goto out_complete;
	why[0] = '\0';
	if (len && s->fd < 0 &&
	    (rc = od_open(od, s, created, why, sizeof(why))) < 0) {
		iofs_logf(od->log, LOG_ERR, "output-dir",
			  "%s/%s/%" PRIu32 ": %s: this stream is not copied",
			  od->dir, src->nspace, src->rank,
			  why[0] ? why : strerror(-rc));
		s->failed = true;
		goto out_complete;
	}
	while (len) {
		ssize_t w = write(s->fd, bytes, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			iofs_logf(od->log, LOG_ERR, "output-dir",
				  "write %s/%s/%" PRIu32 ": %s: this stream is "
				  "no longer copied",
				  od->dir, src->nspace, src->rank,
				  w < 0 ? strerror(errno) : "wrote nothing");
			s->failed = true;
			break;
		}
		bytes = (const char *)bytes + w;
		len -= (size_t)w;
	}
out_complete:
	if (s && channel != ROUTER_CH_STDDIAG &&
	    router_dir_on(dirs, ROUTER_DIR_COMPLETE))
		od_drop(od, s);
}

int output_dir_new(router_t *r, iofs_log_t *log, const char *dir, char *err,
		   size_t errlen, output_dir_t **out)
{
	struct output_dir *od;
	char why[256];
	int rc;

	*out = NULL;
	od = calloc(1, sizeof(*od));
	if (!od || !(od->dir = strdup(dir))) {
		free(od);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	od->r = r;
	od->log = log;
	od->dirfd = -1;
	TAILQ_INIT(&od->streams);
	rc = mkdir_p(od->dir);
	if (rc < 0) {
		snprintf(err, errlen,
			 "--output-dir %s: %s: give a writable "
			 "directory",
			 dir, strerror(-rc));
		goto out_free;
	}
	od->dirfd = open(od->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (od->dirfd < 0) {
		rc = -errno;
		snprintf(err, errlen, "--output-dir %s: %s", dir,
			 strerror(-rc));
		goto out_free;
	}
	rc = od_check_top(od->dirfd, why, sizeof(why));
	if (rc) {
		snprintf(err, errlen, "--output-dir %s: %s", dir, why);
		rc = -rc;
		goto out_free;
	}
	rc = router_subscribe(r, NULL, ROUTER_RANK_WILDCARD,
			      ROUTER_CH_STDOUT | ROUTER_CH_STDERR |
				  ROUTER_CH_STDDIAG,
			      ROUTER_SUB_LOCAL, od_fragment, od, &od->sub);
	if (rc != 0) {
		snprintf(err, errlen, "--output-dir: cannot subscribe: %s",
			 router_strerror(rc));
		rc = rc < 0 ? rc : -EIO;
		goto out_free;
	}
	*out = od;
	return 0;

out_free:
	output_dir_free(od);
	return rc;
}

void output_dir_free(output_dir_t *od)
{
	struct od_stream *s;

	if (!od)
		return;
	router_unsubscribe(od->sub);
	while ((s = TAILQ_FIRST(&od->streams)))
		od_drop(od, s);
	if (od->dirfd >= 0)
		close(od->dirfd);
	free(od->dir);
	free(od);
}
