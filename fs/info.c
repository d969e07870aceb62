/* SPDX-License-Identifier: MIT */
/*
 * info files: "key: value" lines, rendered once at open so every read of
 * one open file sees the same consistent snapshot.
 */
#include "fs/fs_i.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Formatted output into a buffer, or (buf NULL) only counted: one
 * formatter gives both the exact st_size and the text. */
struct info_out {
	char *buf;
	size_t cap;
	size_t len;
};

static void __attribute__((format(printf, 2, 3)))
out_printf(struct info_out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(o->buf ? o->buf + o->len : NULL,
		      o->buf && o->cap > o->len ? o->cap - o->len : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->len += (size_t)n;
}

/* The job's (rank WILDCARD) or rank's stats; -ENOENT for an unknown rank. */
static int info_stats(router_job_t *job, uint32_t rank, struct router_stats *st,
		      router_rank_t **rk)
{
	*rk = NULL;
	if (rank == ROUTER_RANK_WILDCARD) {
		router_job_stats(job, st);
		return 0;
	}
	*rk = router_job_rank(job, rank);
	if (!*rk)
		return -ENOENT;
	router_rank_stats(*rk, st);
	return 0;
}

/* A wall clock time in the daemon's local ISO 8601 (2026-12-06T00:01:02+0000,
 * which `date -d` reads), "" for 0 (not yet). */
static void out_time(struct info_out *o, const char *key, int64_t t)
{
	char buf[40] = "";
	time_t tt = (time_t)t;
	struct tm tm;

	if (t > 0 && localtime_r(&tt, &tm))
		strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S%z", &tm);
	out_printf(o, "%s: %s\n", key, buf);
}

static void info_format(router_job_t *job, uint32_t rank,
			const struct router_stats *st, bool is_rank,
			struct info_out *o)
{
	out_printf(o, "nspace: %s\n", router_job_nspace(job));
	if (is_rank)
		out_printf(o, "rank: %" PRIu32 "\n", rank);
	else
		out_printf(o, "ranks: %" PRIu32 "\njob_size: %" PRIu32 "\n",
			   st->ranks, st->job_size);
	bool running = st->state == ROUTER_STATE_RUNNING;
	char status[16] = ""; /* none yet while it runs */

	if (!running)
		snprintf(status, sizeof(status), "%d", st->exit_status);
	out_printf(
	    o,
	    "state: %s\n"
	    "pid: %" PRId64 "\n"
	    "host: %s\n"
	    "exit_status: %s\n"
	    "uid: %" PRIu32 "\n"
	    "gid: %" PRIu32 "\n"
	    "stdout_bytes: %" PRIu64 "\n"
	    "stderr_bytes: %" PRIu64 "\n"
	    "stdin_bytes: %" PRIu64 "\n"
	    "stdout_xoff: %" PRIu64 "\n"
	    "stdout_xon: %" PRIu64 "\n"
	    "stderr_xoff: %" PRIu64 "\n"
	    "stderr_xon: %" PRIu64 "\n"
	    "stdin_xoff: %" PRIu64 "\n"
	    "stdin_xon: %" PRIu64 "\n"
	    "dropped_bytes: %" PRIu64 "\n"
	    "stdin_discarded: %" PRIu64 "\n"
	    "stdin_unacked: %" PRIu64 "\n",
	    router_state_name(st->state), is_rank ? st->pid : (int64_t)-1,
	    is_rank && st->host ? st->host : "", status, st->uid,
	    st->gid, st->stdout_bytes, st->stderr_bytes, st->stdin_bytes,
	    st->stdout_xoff, st->stdout_xon, st->stderr_xoff, st->stderr_xon,
	    st->stdin_xoff, st->stdin_xon, st->dropped_bytes,
	    st->stdin_discarded, st->stdin_unacked);
	out_time(o, "started", st->started);
	out_time(o, "ended", st->ended);
	out_printf(o, "command: %s\n", router_job_command(job));
	/* The forwarder's connection (docs/protocol.md, "Resume"). */
	if (is_rank)
		out_printf(o,
			   "link: %s\npath: %s\nreconnects: %" PRIu64
			   "\nbytes_replayed: %" PRIu64 "\n",
			   !running ? "none" /* ended: nothing to link */
			   : st->link == ROUTER_LINK_UP ||
				   st->link == ROUTER_LINK_HANDOVER
			       ? "connected"
			   : st->link == ROUTER_LINK_WAITING ? "reconnecting"
							     : "none",
			   st->link == ROUTER_LINK_HANDOVER ? "handover"
			   : st->link == ROUTER_LINK_NONE   ? "none"
							    : "socket",
			   st->reconnects, st->replayed);
	else
		out_printf(o,
			   "ranks_reconnecting: %" PRIu32 "\n"
			   "reconnects: %" PRIu64 "\n"
			   "bytes_replayed: %" PRIu64 "\n",
			   st->ranks_waiting, st->reconnects, st->replayed);
	/* The merged views have their own windows: what they lost is not
	 * in dropped_bytes (the sum over the ranks' own streams). */
	if (!is_rank)
		out_printf(o,
			   "merged_dropped_bytes: %" PRIu64 "\n"
			   "owner_refused: %" PRIu64 "\n",
			   st->merged_dropped_bytes, st->owner_refused);
	out_printf(o, "spool_bytes: %" PRIu64 "\nevicted_bytes: %" PRIu64 "\n",
		   st->spool_bytes, st->evicted_bytes);
	/* Renamed on a name collision (docs/filesystem.md, "Job names"). */
	if (strcmp(router_job_requested(job), router_job_nspace(job)) != 0)
		out_printf(o, "requested: %s\n", router_job_requested(job));
	/* What the producer said it cannot do (router_job_note()). */
	const char *note;
	for (size_t i = 0; (note = router_job_note_at(job, i)); i++)
		out_printf(o, "note: %s\n", note);
}

/* Take the stats of the job (rank WILDCARD) or rank into @st and count
 * the length of its text in *len: 0, or -ENOENT for an unknown rank. */
static int info_measure(router_job_t *job, uint32_t rank,
			struct router_stats *st, bool *is_rank, size_t *len)
{
	struct info_out o = {0};
	router_rank_t *rk;
	int rc = info_stats(job, rank, st, &rk);

	*len = 0;
	*is_rank = rk != NULL;
	if (rc < 0)
		return rc;
	info_format(job, rank, st, *is_rank, &o);
	*len = o.len;
	return 0;
}

int fs_info_attr(router_job_t *job, uint32_t rank, size_t *len, bool *settled)
{
	struct router_stats st;
	bool is_rank;
	int rc = info_measure(job, rank, &st, &is_rank, len);

	*settled = rc == 0 && st.state != ROUTER_STATE_RUNNING;
	return rc;
}

int fs_info_render(router_job_t *job, uint32_t rank, char **text, size_t *len)
{
	struct router_stats st;
	struct info_out o = {0};
	bool is_rank;
	int rc = info_measure(job, rank, &st, &is_rank, &o.cap);

	*text = NULL;
	*len = 0;
	if (rc < 0)
		return rc;
	o.buf = malloc(++o.cap); /* and the NUL */
	if (!o.buf)
		return -ENOMEM;
	info_format(job, rank, &st, is_rank, &o);
	*text = o.buf;
	*len = o.len;
	return 0;
}

void fs_info_open(struct fs *fs, fuse_req_t req, struct fs_inode *in,
		  struct fuse_file_info *fi)
{
	struct fs_info *f;
	int rc;

	(void)fs;
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EACCES);
		return;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	f->base.kind = FS_K_INFO;
	rc = fs_info_render(in->job, in->rank, &f->text, &f->len);
	if (rc < 0) {
		free(f);
		fuse_reply_err(req, -rc);
		return;
	}
	fi->direct_io = 1;
	fi->fh = (uintptr_t)f;
	if (fs_reply_open(&fs->rq, req, fi) != 0)
		fs_info_release(f);
}

void fs_info_open_empty(struct fs *fs, fuse_req_t req,
			struct fuse_file_info *fi)
{
	struct fs_info *f = calloc(1, sizeof(*f));

	if (!f) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	f->base.kind = FS_K_INFO;
	fi->direct_io = 1;
	fi->fh = (uintptr_t)f;
	if (fs_reply_open(&fs->rq, req, fi) != 0)
		fs_info_release(f);
}

void fs_info_read(struct fs_info *f, fuse_req_t req, size_t size, off_t off)
{
	if (off < 0 || (size_t)off >= f->len) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > f->len - (size_t)off)
		size = f->len - (size_t)off;
	fuse_reply_buf(req, f->text + off, size);
}

void fs_info_release(struct fs_info *f)
{
	free(f->text);
	free(f);
}
