/* SPDX-License-Identifier: MIT */
/* iofs filesystem internals, shared by the fs/ sources only. */
#ifndef IOFS_FS_I_H
#define IOFS_FS_I_H

#define FUSE_USE_VERSION 34
#include <fuse_lowlevel.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/stat.h>

#include "fs/fs.h"
#include "fs/req.h"
#include "router/strmap.h"

struct event;

/* What an inode is.  Job-level files use rank ROUTER_RANK_WILDCARD. */
enum fs_kind {
	FS_K_ROOT = 0,
	FS_K_JOB,    /* MNT/<nspace> */
	FS_K_RANK,   /* MNT/<nspace>/<rank> */
	FS_K_STDOUT, /* stream files */
	FS_K_STDERR,
	FS_K_STDIN,
	FS_K_INFO,
};

/*
 * One inode.  Numbers are allocated sequentially and never reused; an entry
 * lives while the kernel holds lookups on it (nlookup > 0) or while its job
 * is still in the router's registry, so the same object keeps the same
 * number.  The key is (job pointer, rank, kind); the job reference held by
 * the entry keeps the pointer from being reused while the entry exists.
 */
struct fs_inode {
	uint64_t ino;
	enum fs_kind kind;
	router_job_t *job; /* reference owned by this entry; NULL for root */
	uint32_t rank;
	uint64_t nlookup; /* kernel lookup count */
	uint64_t
	    complete_since_s; /* FS_K_JOB: monotonic s of completion seen */
	struct fs_inode *ino_next; /* hash chains */
	struct fs_inode *key_next;
};

struct fs_itable {
	struct fs_inode **by_ino;
	struct fs_inode **by_key;
	size_t nbuckets; /* power of two */
	size_t count;
	uint64_t next_ino;
};

/* Every fi->fh starts with this tag. */
struct fs_file {
	enum fs_kind kind;
};

struct fs_stream {
	struct fs_file base;
	struct fs *fs;
	router_reader_t *rd;	      /* owned; closed at release */
	struct fs_parked_list parked; /* FS_P_READ */
	struct fuse_pollhandle *ph;   /* owned; NULL if no poll waiting */
	uint64_t pos;	/* end of the last answered read, for poll */
	bool file_mode; /* asked for its end: blocking reads at the live end
			   give 0 (see stream_file.c) */
	bool cut;	/* the daemon stopped before its stream ended: reads at
			   the end fail ENOTCONN, not EOF (fs_stream_shutdown) */
	TAILQ_ENTRY(fs_stream) link; /* in fs->streams */
};

struct fs_stdin {
	struct fs_file base;
	struct fs *fs;
	router_job_t *job; /* reference owned by the handle */
	uint32_t rank;	   /* or ROUTER_RANK_WILDCARD (broadcast) */
	bool tried;	   /* became a writer: wrote, or opened with O_TRUNC */
	bool attached;	   /* ... and router_stdin_attach() succeeded */
	struct fs_parked_list parked;
	struct fuse_pollhandle *ph;
	TAILQ_ENTRY(fs_stdin) link; /* in fs->stdins */
};

struct fs_info {
	struct fs_file base;
	char *text; /* snapshot taken at open, owned */
	size_t len;
};

struct fs {
	struct event_base *base;
	router_t *r;
	iofs_log_t *log; /* borrowed */
	struct fuse_session *se;
	struct event *dev_ev;	/* persistent read event on the FUSE fd */
	/* A copy of the FUSE fd above every fd open at mount time (so above
	 * fusermount3's auto_unmount socket), closed after the session;
	 * -1 if none.  Why: fs_mount(). */
	int dev_hold;
	struct event *sweep_ev; /* linger + inode garbage collection */
	struct fuse_buf buf;	/* receive buffer, reused */
	char *mountpoint;
	struct fuse_args args;
	bool mounted;
	bool init_seen; /* the kernel's INIT reached our init op */
	bool ready;	/* ... and was answered without ending the session */
	bool shutdown;	/* fs_shutdown() ran: answer at once, never park */
	bool exit_reported;
	bool debug;
	uint32_t linger_s;
	uint32_t linger_lost_s;
	uint32_t max_read;
	/* stdin bytes held for parked writes, per writer uid (uid 0 exempt):
	 * above stdin_uid_max a write fails with ENOBUFS. */
	uint64_t stdin_uid_max;
	struct strmap stdin_uids;
	uint64_t stdin_refusals, stdin_unlogged;
	uint64_t stdin_logged_s;
	uid_t uid; /* the daemon's, for the root directory */
	gid_t gid;
	struct timespec start;
	void (*on_exit)(void *ctx);
	void *on_exit_ctx;
	struct fs_inode root; /* not in the table: no job, never goes away */
	struct fs_itable it;
	struct fs_rq rq; /* parking, counted replies */
	TAILQ_HEAD(, fs_stream) streams;
	TAILQ_HEAD(, fs_stdin) stdins;
	struct fs_activity act; /* fs_activity(); lives as long as the fs */
};

/* inode.c */
void fs_itable_init(struct fs_itable *it);
void fs_itable_release(struct fs_itable *it);
struct fs_inode *fs_inode_get(struct fs_itable *it, uint64_t ino);
/* Find or create; takes a job reference for a new entry.  NULL on ENOMEM. */
struct fs_inode *fs_inode_ensure(struct fs_itable *it, enum fs_kind kind,
				 router_job_t *job, uint32_t rank);
void fs_inode_free(struct fs_itable *it, struct fs_inode *in);
/* Free entries nobody looks up whose job left the registry. */
void fs_itable_gc(struct fs_itable *it);
/* Iterate: call @fn on every entry (it may not free entries). */
void fs_itable_foreach(struct fs_itable *it,
		       void (*fn)(struct fs_inode *in, void *ctx), void *ctx);

/* fs.c */
struct fs *fs_req_fs(fuse_req_t req);
struct fs_inode *fs_inode(struct fs *fs, fuse_ino_t ino);
/* The child @name of @parent (created in the table if needed), or NULL
 * with an errno in *err. */
struct fs_inode *fs_child(struct fs *fs, struct fs_inode *parent,
			  const char *name, int *err);
/* fs_child() of the inode @parent for a request: NULL once @req has been
 * answered with the error (ESTALE for an unknown parent). */
struct fs_inode *fs_child_of(fuse_req_t req, struct fs *fs, fuse_ino_t parent,
			     const char *name);
bool fs_job_running(router_job_t *job);
extern const struct fs_name {
	const char *name;
	enum fs_kind kind;
} fs_file_names[4]; /* info, stdout, stderr, stdin */

/* dir.c: the directory operations (in fs.c's op table) */
void fs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		   struct fuse_file_info *fi);
void fs_op_releasedir(fuse_req_t req, fuse_ino_t ino,
		      struct fuse_file_info *fi);
void fs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		 mode_t mode);
void fs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		 mode_t mode, dev_t rdev);
void fs_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		   const char *name);
void fs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		  fuse_ino_t newparent, const char *newname,
		  unsigned int flags);
void fs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		const char *newname);

void fs_fill_stat(struct fs *fs, const struct fs_inode *in, struct stat *st);
uint32_t fs_kind_channel(enum fs_kind kind);

/* stream_file.c */
void fs_stream_open(struct fs *fs, fuse_req_t req, struct fs_inode *in,
		    struct fuse_file_info *fi);
void fs_stream_read(struct fs_stream *s, fuse_req_t req, size_t size, off_t off,
		    struct fuse_file_info *fi);
void fs_stream_poll(struct fs_stream *s, fuse_req_t req,
		    struct fuse_pollhandle *ph);
void fs_stream_release(struct fs_stream *s);
void fs_stream_shutdown(struct fs_stream *s);
/* The handle asked the kernel for the file's end (GETATTR with its fh). */
void fs_stream_file_mode(struct fs_stream *s);

/* stdin_file.c */
void fs_stdin_open(struct fs *fs, fuse_req_t req, struct fs_inode *in,
		   struct fuse_file_info *fi);
void fs_stdin_write(struct fs_stdin *w, fuse_req_t req, const char *buf,
		    size_t size);
void fs_stdin_poll(struct fs_stdin *w, fuse_req_t req,
		   struct fuse_pollhandle *ph);
void fs_stdin_release(struct fs_stdin *w);
void fs_stdin_shutdown(struct fs_stdin *w);

/* info.c */
/* Render the info text of a job (rank WILDCARD) or rank; malloc'ed. */
int fs_info_render(router_job_t *job, uint32_t rank, char **text, size_t *len);
/* For getattr: the length fs_info_render() would give now, and whether
 * the job (rank) has ended, without rendering or allocating.  O(1) for a
 * rank; O(ranks) for a job (its counters are sums over the ranks). */
int fs_info_attr(router_job_t *job, uint32_t rank, size_t *len, bool *settled);
void fs_info_open(struct fs *fs, fuse_req_t req, struct fs_inode *in,
		  struct fuse_file_info *fi);
/* An O_RDONLY open of a stdin file: an empty snapshot (reads give EOF at
 * once, so cp -r, tar and rsync of a job work); not a writer. */
void fs_info_open_empty(struct fs *fs, fuse_req_t req,
			struct fuse_file_info *fi);
void fs_info_read(struct fs_info *f, fuse_req_t req, size_t size, off_t off);
void fs_info_release(struct fs_info *f);

#endif /* IOFS_FS_I_H */
