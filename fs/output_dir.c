/* SPDX-License-Identifier: MIT */
#include "fs/output_dir.h"

#include "fs/safe_dir.h"

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
	/* as on the mount: no group access if the owner's umask says so */
	bool priv = router_job_private(job);
	mode_t dmode = priv ? 0700 : 0750, fmode = priv ? 0600 : 0640;
	while (od->nopen >= OUTPUT_DIR_MAX_FDS) {
		TAILQ_FOREACH_REVERSE(last, &od->streams, od_stream_list, link)
		if (last->fd >= 0)
			break;
		if (!last)
			break;
		od_close(od, last);
	}
	snprintf(rank, sizeof(rank), "%" PRIu32, s->rank);
	nsfd = safe_dir_open(od->dirfd, s->nspace, uid, gid, dmode, why,
			     whylen);
	if (nsfd < 0)
		return nsfd;
	rkfd = safe_dir_open(nsfd, rank, uid, gid, dmode, why, whylen);
	close(nsfd);
	if (rkfd < 0)
		return rkfd;
	s->fd = safe_file_open(
	    rkfd, s->channel == ROUTER_CH_STDOUT ? "stdout" : "stderr",
	    O_WRONLY | O_NONBLOCK, fmode, truncate, uid, gid, why, whylen);
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
	od->dirfd = safe_dir_top(od->dir, 0755, "--output-dir", err, errlen);
	if (od->dirfd < 0) {
		rc = od->dirfd;
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
