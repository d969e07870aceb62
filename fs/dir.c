/* SPDX-License-Identifier: MIT */
/*
 * iofs filesystem: directories.  readdir is served from a snapshot taken at
 * opendir (and at every rewind), so concurrent job or rank registration
 * never makes a listing skip or repeat an entry.  rmdir and unlink remove
 * completed jobs; nothing can be created, renamed or linked.  The ops are
 * in fs.c's one op table; each states its valid replies as libfuse's
 * fuse_lowlevel.h does.
 */
#include "fs/fs_i.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Directories                                                               */

struct fs_dirent {
	char *name;
	uint64_t ino;
	mode_t type;
};

struct fs_dir {
	struct fs_dirent *ents;
	size_t n, cap;
	bool filled; /* a snapshot was taken (at the first or a rewound read) */
};

static void fs_dir_clear(struct fs_dir *d)
{
	for (size_t i = 0; i < d->n; i++)
		free(d->ents[i].name);
	d->n = 0;
}

static int fs_dir_add(struct fs_dir *d, const char *name,
		      const struct fs_inode *in, mode_t type)
{
	if (!in)
		return -ENOMEM;
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 16;
		struct fs_dirent *e = realloc(d->ents, cap * sizeof(*e));

		if (!e)
			return -ENOMEM;
		d->ents = e;
		d->cap = cap;
	}
	d->ents[d->n].name = strdup(name);
	if (!d->ents[d->n].name)
		return -ENOMEM;
	d->ents[d->n].ino = in->ino;
	d->ents[d->n].type = type;
	d->n++;
	return 0;
}

/* (Re)build the snapshot a directory stream is served from. */
static int fs_dir_fill(struct fs *fs, struct fs_inode *in, struct fs_dir *d)
{
	int rc;

	fs_dir_clear(d);
	d->filled = true;
	rc = fs_dir_add(d, ".", in, S_IFDIR);
	if (!rc)
		rc = fs_dir_add(d, "..", &fs->root, S_IFDIR);
	if (rc)
		return rc;
	if (in->kind == FS_K_ROOT) {
		for (router_job_t *job = router_job_first(fs->r); job && !rc;
		     job = router_job_next(job))
			rc = fs_dir_add(d, router_job_nspace(job),
					fs_inode_ensure(&fs->it, FS_K_JOB, job,
							ROUTER_RANK_WILDCARD),
					S_IFDIR);
		return rc;
	}
	for (size_t i = 0; i < 4 && !rc; i++)
		rc = fs_dir_add(d, fs_file_names[i].name,
				fs_inode_ensure(&fs->it, fs_file_names[i].kind,
						in->job, in->rank),
				S_IFREG);
	if (in->kind != FS_K_JOB)
		return rc;
	for (size_t i = 0; i < router_job_rank_count(in->job) && !rc; i++) {
		uint32_t rank = router_rank_id(router_job_rank_at(in->job, i));
		char name[16];

		snprintf(name, sizeof(name), "%" PRIu32, rank);
		rc = fs_dir_add(
		    d, name, fs_inode_ensure(&fs->it, FS_K_RANK, in->job, rank),
		    S_IFDIR);
	}
	return rc;
}

/* opendir.  Valid replies: fuse_reply_open, fuse_reply_err */
void fs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_req_fs(req);
	struct fs_inode *in = fs_inode(fs, ino);
	struct fs_dir *d;

	if (!in) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	if (in->kind != FS_K_ROOT && in->kind != FS_K_JOB &&
	    in->kind != FS_K_RANK) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	d = calloc(1, sizeof(*d)); /* filled by the first readdir */
	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fi->fh = (uintptr_t)d;
	if (fs_reply_open(&fs->rq, req, fi) != 0) {
		fs_dir_clear(d);
		free(d->ents);
		free(d);
	}
}

/* readdir.  Valid replies: fuse_reply_buf, fuse_reply_data,
 * fuse_reply_err */
void fs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	struct fs *fs = fs_req_fs(req);
	struct fs_dir *d = (struct fs_dir *)(uintptr_t)fi->fh;
	struct fs_inode *in = fs_inode(fs, ino);
	char *buf;
	size_t used = 0;

	if ((off == 0 || !d->filled) && in && fs_dir_fill(fs, in, d) < 0) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (size_t i = (size_t)off; i < d->n; i++) {
		struct stat st = {.st_ino = d->ents[i].ino,
				  .st_mode = d->ents[i].type};
		size_t need =
		    fuse_add_direntry(req, buf + used, size - used,
				      d->ents[i].name, &st, (off_t)(i + 1));

		if (need > size - used)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

/* releasedir.  Valid replies: fuse_reply_err */
void fs_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs_dir *d = (struct fs_dir *)(uintptr_t)fi->fh;

	(void)ino;
	fs_dir_clear(d);
	free(d->ents);
	free(d);
	fs_reply_release(&fs_req_fs(req)->rq, req);
}

/* rmdir MNT/<nspace> removes a completed job (EBUSY while it runs).  Inside
 * a completed job rmdir and unlink succeed without doing anything, so
 * "rm -r MNT/<nspace>" works.  In a running job unlink does too (rm -r says
 * EBUSY once per rank directory and for the job, not for every file), but
 * rmdir of a rank directory is EBUSY: a successful rmdir marks the
 * kernel's inode dead (S_DEAD), and while anything holds it (a tail -f of
 * a file in it) every lookup in it fails with ENOENT.
 * rmdir.  Valid replies: fuse_reply_err */
void fs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_req_fs(req);
	struct fs_inode *in = fs_child_of(req, fs, parent, name);
	int rc;

	if (!in)
		return;
	if (in->kind != FS_K_JOB && in->kind != FS_K_RANK) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	if (fs_job_running(in->job)) {
		fuse_reply_err(req, EBUSY);
		return;
	}
	if (in->kind == FS_K_RANK || router_job_removed(in->job)) {
		fuse_reply_err(req, 0);
		return;
	}
	rc = router_job_remove(fs->r, in->job);
	if (rc == 0)
		fs_itable_gc(&fs->it);
	fuse_reply_err(req, rc == 0 ? 0 : fs_errno(rc, false));
}

/* unlink.  Valid replies: fuse_reply_err */
void fs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_req_fs(req);
	struct fs_inode *in = fs_child_of(req, fs, parent, name);

	if (!in)
		return;
	if (in->kind == FS_K_JOB || in->kind == FS_K_RANK) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	fuse_reply_err(req, 0); /* nothing to do: see fs_op_rmdir() */
}

/* Nothing can be created, renamed or linked: EPERM. */

/* mkdir.  Valid replies: fuse_reply_entry (not used), fuse_reply_err */
void fs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		 mode_t mode)
{
	(void)parent;
	(void)name;
	(void)mode;
	fuse_reply_err(req, EPERM);
}

/* mknod.  Valid replies: fuse_reply_entry (not used), fuse_reply_err */
void fs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		 mode_t mode, dev_t rdev)
{
	(void)parent;
	(void)name;
	(void)mode;
	(void)rdev;
	fuse_reply_err(req, EPERM);
}

/* symlink.  Valid replies: fuse_reply_entry (not used), fuse_reply_err */
void fs_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		   const char *name)
{
	(void)link;
	(void)parent;
	(void)name;
	fuse_reply_err(req, EPERM);
}

/* rename.  Valid replies: fuse_reply_err */
void fs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		  fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	(void)parent;
	(void)name;
	(void)newparent;
	(void)newname;
	(void)flags;
	fuse_reply_err(req, EPERM);
}

/* link.  Valid replies: fuse_reply_entry (not used), fuse_reply_err */
void fs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		const char *newname)
{
	(void)ino;
	(void)newparent;
	(void)newname;
	fuse_reply_err(req, EPERM);
}
