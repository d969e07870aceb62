/* SPDX-License-Identifier: MIT */
/*
 * info files: "key: value" lines, rendered once at open so every read of
 * one open file sees the same consistent snapshot.
 */
#include "fs/fs_i.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int fs_info_render(router_job_t *job, uint32_t rank, char **text, size_t *len)
{
	struct router_stats st;
	router_rank_t *rk = NULL;
	FILE *f;

	*text = NULL;
	*len = 0;
	if (rank == ROUTER_RANK_WILDCARD) {
		router_job_stats(job, &st);
	} else {
		rk = router_job_rank(job, rank);
		if (!rk)
			return -ENOENT;
		router_rank_stats(rk, &st);
	}
	f = open_memstream(text, len);
	if (!f)
		return -ENOMEM;
	fprintf(f, "nspace: %s\n", router_job_nspace(job));
	if (rk)
		fprintf(f, "rank: %" PRIu32 "\n", rank);
	else
		fprintf(f, "ranks: %" PRIu32 "\njob_size: %" PRIu32 "\n",
			st.ranks, st.job_size);
	fprintf(f,
		"state: %s\n"
		"pid: %" PRId64 "\n"
		"host: %s\n"
		"exit_status: %d\n"
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
		router_state_name(st.state), rk ? st.pid : (int64_t)-1,
		rk && st.host ? st.host : "", st.exit_status, st.uid, st.gid,
		st.stdout_bytes, st.stderr_bytes, st.stdin_bytes,
		st.stdout_xoff, st.stdout_xon, st.stderr_xoff, st.stderr_xon,
		st.stdin_xoff, st.stdin_xon, st.dropped_bytes,
		st.stdin_discarded, st.stdin_unacked);
	/* The merged views have their own windows: what they lost is not
	 * in dropped_bytes (the sum over the ranks' own streams). */
	if (!rk)
		fprintf(f,
			"merged_dropped_bytes: %" PRIu64 "\n"
			"owner_refused: %" PRIu64 "\n",
			st.merged_dropped_bytes, st.owner_refused);
	/* Renamed on a name collision (docs/filesystem.md, "Job names"). */
	if (strcmp(router_job_requested(job), router_job_nspace(job)) != 0)
		fprintf(f, "requested: %s\n", router_job_requested(job));
	if (fclose(f) != 0) {
		free(*text);
		*text = NULL;
		*len = 0;
		return -ENOMEM;
	}
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
	if (fs_reply_open(fs, req, fi) != 0)
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
	if (fs_reply_open(fs, req, fi) != 0)
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
