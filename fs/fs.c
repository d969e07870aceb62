/* SPDX-License-Identifier: MIT */
/*
 * iofs filesystem: the FUSE session on the libevent loop, the one op table,
 * name lookup, attributes (lookup, getattr, setattr, forget), and dispatch
 * of file requests to their kind.  Files are in stream_file.c,
 * stdin_file.c and info.c; directories (readdir, rmdir, unlink) in dir.c;
 * parking, interrupts, counted replies, errno mapping and poll handles in
 * req.c.  Every op states its valid replies, as libfuse's fuse_lowlevel.h
 * does.
 */
#include "fs/fs_i.h"
#include "log/clock.h"
#include "log/num.h"

#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FS_ROOT_MODE   (S_IFDIR | 01777) /* sticky: owners remove their jobs */
#define FS_DIR_MODE    (S_IFDIR | 0750)
#define FS_STREAM_MODE (S_IFREG | 0440)
/* Writable by the owner; reading gives EOF at once (see fs_stdin_open). */
#define FS_STDIN_MODE	       (S_IFREG | 0640)
#define FS_INFO_MODE	       (S_IFREG | 0440)
#define FS_CHILD_ENTRY_TIMEOUT 1.0 /* a job's children never change */
#define FS_SWEEP_MS	       1000

const struct fs_name fs_file_names[4] = {
    {"info", FS_K_INFO},
    {"stdout", FS_K_STDOUT},
    {"stderr", FS_K_STDERR},
    {"stdin", FS_K_STDIN},
};

struct fs *fs_req_fs(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

struct fs_inode *fs_inode(struct fs *fs, fuse_ino_t ino)
{
	if (ino == FUSE_ROOT_ID)
		return &fs->root;
	return fs_inode_get(&fs->it, ino);
}

uint32_t fs_kind_channel(enum fs_kind kind)
{
	return kind == FS_K_STDERR ? ROUTER_CH_STDERR : ROUTER_CH_STDOUT;
}

static void set_time_ns(struct stat *st, uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u),
			      .tv_nsec = (long)(ns % 1000000000u)};

	st->st_mtim = ts;
	st->st_ctim = ts;
	st->st_atim = ts;
}

bool fs_job_running(router_job_t *job)
{
	struct router_stats stats;
	size_t n = router_job_rank_count(job);

	/* A rank still runs; not "the job is not complete": a job short of
	 * its announced size whose ranks all ended can be removed. */
	for (size_t i = 0; i < n; i++) {
		router_rank_stats(router_job_rank_at(job, i), &stats);
		if (stats.state == ROUTER_STATE_RUNNING)
			return true;
	}
	return false;
}

int fs_ready(const fs_t *fs)
{
	if (fs->ready)
		return 1;
	return fs->exit_reported || (fs->se && fuse_session_exited(fs->se)) ? -1
									    : 0;
}

size_t fs_open_count(const fs_t *fs)
{
	return fs->rq.nopen;
}

void fs_fill_stat(struct fs *fs, const struct fs_inode *in, struct stat *st)
{
	struct router_stream_attr sa = {0};
	uint64_t mtime;
	uint32_t uid, gid;

	memset(st, 0, sizeof(*st));
	st->st_ino = in->ino;
	st->st_nlink = 1;
	st->st_blksize = 4096;
	if (in->kind == FS_K_ROOT) {
		st->st_mode = FS_ROOT_MODE;
		st->st_nlink = 2;
		st->st_uid = fs->uid;
		st->st_gid = fs->gid;
		st->st_mtim = st->st_ctim = st->st_atim = fs->start;
		return;
	}
	/* O(1) (a job's info: O(ranks), see fs_info_attr): getattr runs for
	 * every stat and every tail -f poll */
	router_job_owner(in->job, &uid, &gid);
	st->st_uid = uid;
	st->st_gid = gid;
	switch (in->kind) {
	case FS_K_JOB:
	case FS_K_RANK:
		st->st_mode = FS_DIR_MODE;
		st->st_nlink =
		    2 + (in->kind == FS_K_JOB
			     ? (nlink_t)router_job_rank_count(in->job)
			     : 0);
		router_stream_attr(in->job, in->rank, ROUTER_CH_STDOUT, &sa);
		set_time_ns(st, sa.mtime_ns);
		break;
	case FS_K_STDOUT:
	case FS_K_STDERR:
		st->st_mode = FS_STREAM_MODE;
		router_stream_attr(in->job, in->rank, fs_kind_channel(in->kind),
				   &sa);
		st->st_size = (off_t)sa.size;
		st->st_blocks = (blkcnt_t)((sa.size + 511) / 512);
		set_time_ns(st, sa.mtime_ns);
		break;
	case FS_K_STDIN:
		st->st_mode = FS_STDIN_MODE;
		router_stream_attr(in->job, in->rank, ROUTER_CH_STDOUT, &sa);
		set_time_ns(st, sa.mtime_ns);
		break;
	case FS_K_INFO: {
		size_t len = 0;
		bool settled = false;

		st->st_mode = FS_INFO_MODE;
		/* the exact length of a rendering now, counted, not rendered */
		if (fs_info_attr(in->job, in->rank, &len, &settled) == 0)
			st->st_size = (off_t)len;
		if (settled) {
			/* Settled content, settled times: tar and rsync
			 * would see a file "changed as we read it". */
			router_stream_attr(in->job, in->rank, ROUTER_CH_STDOUT,
					   &sa);
			mtime = sa.mtime_ns;
			router_stream_attr(in->job, in->rank, ROUTER_CH_STDERR,
					   &sa);
			set_time_ns(st,
				    sa.mtime_ns > mtime ? sa.mtime_ns : mtime);
		} else {
			clock_gettime(CLOCK_REALTIME, &st->st_mtim);
			st->st_ctim = st->st_atim = st->st_mtim;
		}
		break;
	}
	case FS_K_ROOT:
		break;
	}
	if (router_job_private(in->job)) /* the owner's umask denied its group */
		st->st_mode &= ~(mode_t)0070;
}

/* ------------------------------------------------------------------------ */
/* Lookup, getattr, forget                                                   */

/* A rank directory's name: canonical decimal only ("7", not "07"). */
static bool parse_rank(const char *name, uint32_t *rank)
{
	uint64_t v;

	if (!iofs_parse_dec(name, strlen(name), ROUTER_RANK_MAX, true, &v))
		return false;
	*rank = (uint32_t)v;
	return true;
}

/* The child @name of @parent, or NULL (errno-style code in *err). */
struct fs_inode *fs_child(struct fs *fs, struct fs_inode *parent,
			  const char *name, int *err)
{
	struct fs_inode *in = NULL;
	uint32_t rank;

	*err = ENOENT;
	if (parent->kind == FS_K_ROOT) {
		router_job_t *job = router_job_lookup(fs->r, name);

		if (!job)
			return NULL;
		in = fs_inode_ensure(&fs->it, FS_K_JOB, job,
				     ROUTER_RANK_WILDCARD);
	} else if (parent->kind == FS_K_JOB || parent->kind == FS_K_RANK) {
		for (size_t i = 0; i < 4 && !in; i++)
			if (!strcmp(name, fs_file_names[i].name))
				in = fs_inode_ensure(&fs->it,
						     fs_file_names[i].kind,
						     parent->job, parent->rank);
		if (!in && strcmp(name, "info") && strcmp(name, "stdout") &&
		    strcmp(name, "stderr") && strcmp(name, "stdin")) {
			if (parent->kind != FS_K_JOB ||
			    !parse_rank(name, &rank) ||
			    !router_job_rank(parent->job, rank))
				return NULL;
			in = fs_inode_ensure(&fs->it, FS_K_RANK, parent->job,
					     rank);
		}
	} else {
		*err = ENOTDIR;
		return NULL;
	}
	if (!in)
		*err = ENOMEM;
	return in;
}

struct fs_inode *fs_child_of(fuse_req_t req, struct fs *fs, fuse_ino_t parent,
			     const char *name)
{
	struct fs_inode *pin = fs_inode(fs, parent), *in;
	int err;

	if (!pin) {
		fuse_reply_err(req, ESTALE);
		return NULL;
	}
	in = fs_child(fs, pin, name, &err);
	if (!in)
		fuse_reply_err(req, err);
	return in;
}

/* lookup.  Valid replies: fuse_reply_entry, fuse_reply_err */
static void fs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_req_fs(req);
	struct fs_inode *in = fs_child_of(req, fs, parent, name);
	struct fuse_entry_param e;

	if (!in)
		return;
	memset(&e, 0, sizeof(e));
	e.ino = in->ino;
	e.attr_timeout = 0;
	/* A root entry can be replaced (a job re-run under the same name). */
	e.entry_timeout = parent == FUSE_ROOT_ID ? 0 : FS_CHILD_ENTRY_TIMEOUT;
	fs_fill_stat(fs, in, &e.attr);
	if (fuse_reply_entry(req, &e) == 0)
		in->nlookup++;
}

static void fs_forget_one(struct fs *fs, fuse_ino_t ino, uint64_t n)
{
	struct fs_inode *in = ino == FUSE_ROOT_ID ? NULL : fs_inode(fs, ino);

	if (!in)
		return;
	in->nlookup = in->nlookup > n ? in->nlookup - n : 0;
	if (in->nlookup == 0 && router_job_removed(in->job))
		fs_inode_free(&fs->it, in);
}

/* forget.  Valid replies: fuse_reply_none */
static void fs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	fs_forget_one(fs_req_fs(req), ino, nlookup);
	fuse_reply_none(req);
}

/* forget_multi.  Valid replies: fuse_reply_none */
static void fs_op_forget_multi(fuse_req_t req, size_t count,
			       struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		fs_forget_one(fs_req_fs(req), forgets[i].ino,
			      forgets[i].nlookup);
	fuse_reply_none(req);
}

/* getattr.  Valid replies: fuse_reply_attr, fuse_reply_err */
static void fs_op_getattr(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	struct fs *fs = fs_req_fs(req);
	struct fs_inode *in = fs_inode(fs, ino);
	struct fs_file *f = fi ? (struct fs_file *)(uintptr_t)fi->fh : NULL;
	struct stat st;

	if (!in) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	/* With a handle (FUSE_GETATTR_FH): the kernel asks for this open
	 * file's size -- lseek(SEEK_END), or SEEK_DATA/SEEK_HOLE without a
	 * lseek op -- never for fstat(), which comes without one. */
	if (f && (f->kind == FS_K_STDOUT || f->kind == FS_K_STDERR))
		fs_stream_file_mode((struct fs_stream *)f);
	fs_fill_stat(fs, in, &st);
	fuse_reply_attr(req, &st, 0);
}

/* setattr.  Valid replies: fuse_reply_attr, fuse_reply_err */
static void fs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
			  int to_set, struct fuse_file_info *fi)
{
	struct fs *fs = fs_req_fs(req);
	struct fs_inode *in = fs_inode(fs, ino);
	struct stat st;

	(void)fi;
	if (!in) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	/* "> stdin" may truncate: a no-op on a FIFO-like file. */
	if (in->kind != FS_K_STDIN || to_set != FUSE_SET_ATTR_SIZE ||
	    attr->st_size != 0) {
		fuse_reply_err(req, EPERM);
		return;
	}
	fs_fill_stat(fs, in, &st);
	fuse_reply_attr(req, &st, 0);
}

/* ------------------------------------------------------------------------ */
/* Files: dispatch on the inode kind (open) or the handle's tag              */

/* open.  Valid replies: fuse_reply_open, fuse_reply_err */
static void fs_op_open(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct fs *fs = fs_req_fs(req);
	struct fs_inode *in = fs_inode(fs, ino);

	if (!in) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	switch (in->kind) {
	case FS_K_STDOUT:
	case FS_K_STDERR:
		fs_stream_open(fs, req, in, fi);
		break;
	case FS_K_STDIN:
		fs_stdin_open(fs, req, in, fi);
		break;
	case FS_K_INFO:
		fs_info_open(fs, req, in, fi);
		break;
	default:
		fuse_reply_err(req, EISDIR);
		break;
	}
}

static struct fs_file *fh_file(struct fuse_file_info *fi)
{
	return (struct fs_file *)(uintptr_t)fi->fh;
}

/* read.  Valid replies: fuse_reply_buf, fuse_reply_iov, fuse_reply_data,
 * fuse_reply_err */
static void fs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct fs_file *f = fh_file(fi);

	(void)ino;
	if (f->kind == FS_K_STDOUT || f->kind == FS_K_STDERR)
		fs_stream_read((struct fs_stream *)f, req, size, off, fi);
	else if (f->kind == FS_K_INFO)
		fs_info_read((struct fs_info *)f, req, size, off);
	else
		fuse_reply_err(req, EBADF);
}

/* write.  Valid replies: fuse_reply_write, fuse_reply_err */
static void fs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
			size_t size, off_t off, struct fuse_file_info *fi)
{
	struct fs_file *f = fh_file(fi);

	(void)ino;
	(void)off; /* stdin is a FIFO: offsets mean nothing */
	if (f->kind == FS_K_STDIN) {
		fs_req_fs(req)->act.stdin_ns = iofs_mono_ns();
		fs_stdin_write((struct fs_stdin *)f, req, buf, size);
	} else {
		fuse_reply_err(req, EBADF);
	}
}

/* poll.  Valid replies: fuse_reply_poll, fuse_reply_err */
static void fs_op_poll(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi, struct fuse_pollhandle *ph)
{
	struct fs_file *f = fh_file(fi);

	(void)ino;
	if (f->kind == FS_K_STDOUT || f->kind == FS_K_STDERR) {
		fs_stream_poll((struct fs_stream *)f, req, ph);
	} else if (f->kind == FS_K_STDIN) {
		fs_stdin_poll((struct fs_stdin *)f, req, ph);
	} else {
		struct fuse_pollhandle *none = NULL; /* info: always readable */

		fs_poll_reply(req, &none, ph, POLLIN | POLLRDNORM);
	}
}

/* flush.  Valid replies: fuse_reply_err */
static void fs_op_flush(fuse_req_t req, fuse_ino_t ino,
			struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

/* release.  Valid replies: fuse_reply_err */
static void fs_op_release(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	struct fs_file *f = fh_file(fi);

	(void)ino;
	if (f->kind == FS_K_STDOUT || f->kind == FS_K_STDERR)
		fs_stream_release((struct fs_stream *)f);
	else if (f->kind == FS_K_STDIN)
		fs_stdin_release((struct fs_stdin *)f);
	else
		fs_info_release((struct fs_info *)f);
	fs_reply_release(&fs_req_fs(req)->rq, req);
}

/* fsync.  Valid replies: fuse_reply_err */
static void fs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
			struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	fuse_reply_err(req, 0);
}

/* init: no reply (libfuse answers INIT after it returns). */
static void fs_op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct fs *fs = userdata;

	if (fs->max_read)
		conn->max_read = fs->max_read;
	fs->init_seen = true; /* fs_dev_cb: ready once the reply went out */
}

/* The one op table.  An op left out is answered ENOSYS by libfuse (lseek:
 * the kernel then falls back to a GETATTR with the handle, which is what
 * makes a stream handle file-mode, see stream_file.c). */
static const struct fuse_lowlevel_ops fs_ops = {
    .init = fs_op_init,
    .lookup = fs_op_lookup,
    .forget = fs_op_forget,
    .forget_multi = fs_op_forget_multi,
    .getattr = fs_op_getattr,
    .setattr = fs_op_setattr,
    .open = fs_op_open,
    .read = fs_op_read,
    .write = fs_op_write,
    .flush = fs_op_flush,
    .release = fs_op_release,
    .fsync = fs_op_fsync,
    .poll = fs_op_poll,
    .opendir = fs_op_opendir,
    .readdir = fs_op_readdir,
    .releasedir = fs_op_releasedir,
    .rmdir = fs_op_rmdir,
    .unlink = fs_op_unlink,
    .mkdir = fs_op_mkdir,
    .mknod = fs_op_mknod,
    .symlink = fs_op_symlink,
    .rename = fs_op_rename,
    .link = fs_op_link,
};

/* ------------------------------------------------------------------------ */
/* The session on the loop                                                   */

static void fs_session_ended(struct fs *fs, int res)
{
	if (fs->dev_ev)
		event_del(fs->dev_ev);
	if (fs->exit_reported)
		return;
	fs->exit_reported = true;
	iofs_logf(fs->log, LOG_NOTICE, "fs", "FUSE session of %s ended: %s",
		  fs->mountpoint,
		  res < 0 ? strerror(-res) : "unmounted or exited");
	if (fs->on_exit)
		fs->on_exit(fs->on_exit_ctx);
}

static void fs_dev_cb(evutil_socket_t fd, short what, void *arg)
{
	struct fs *fs = arg;

	(void)fd;
	(void)what;
	/* A bounded batch keeps sockets and timers served under load. */
	for (int i = 0; i < 64; i++) {
		int res = fuse_session_receive_buf(fs->se, &fs->buf);

		if (res == -EINTR)
			continue; /* the request was withdrawn: next one */
		if (res == -EAGAIN)
			return;
		if (res <= 0 || fuse_session_exited(fs->se)) {
			fs_session_ended(fs, res);
			return;
		}
		fuse_session_process_buf(fs->se, &fs->buf);
		fs->act.requests++;
		if (fs->init_seen && !fuse_session_exited(fs->se))
			fs->ready = true;
		if (fuse_session_exited(fs->se)) {
			fs_session_ended(fs, 0);
			return;
		}
	}
}

const struct fs_activity *fs_activity(const fs_t *fs)
{
	return &fs->act;
}

/* Remove jobs completed for longer than the linger time, in one pass
 * (removing a job leaves the others, and the next one, in place:
 * restarting after each removal made N expiring jobs cost N^2). */
static void fs_linger_sweep(struct fs *fs, uint64_t now)
{
	router_job_t *next;

	for (router_job_t *job = router_job_first(fs->r); job; job = next) {
		struct fs_inode *in;
		next = router_job_next(job);
		struct router_stats st;

		/* Complete, not just idle: ranks of a job short of its
		 * size may still be starting. */
		router_job_stats(job, &st);
		if (st.state == ROUTER_STATE_RUNNING)
			continue;
		/* abandoned (forwarder gone): linger_lost_s if sooner */
		uint32_t linger = fs->linger_s;
		if (st.state == ROUTER_STATE_LOST && fs->linger_lost_s &&
		    (!linger || fs->linger_lost_s < linger))
			linger = fs->linger_lost_s;
		if (!linger)
			continue;
		in = fs_inode_ensure(&fs->it, FS_K_JOB, job,
				     ROUTER_RANK_WILDCARD);
		if (!in)
			return;
		if (!in->complete_since_s) {
			in->complete_since_s = now;
			continue;
		}
		if (now - in->complete_since_s < linger)
			continue;
		char name[ROUTER_NSPACE_MAX + 1];
		snprintf(name, sizeof(name), "%s", router_job_nspace(job));
		if (router_job_remove(fs->r, job) == 0)
			iofs_logf(fs->log, LOG_INFO, "fs",
				  "job '%s' removed: %s for %u s (-o %s)", name,
				  router_state_name(st.state), linger,
				  linger == fs->linger_s ? "linger"
							 : "linger_lost");
	}
}

static void fs_sweep_cb(evutil_socket_t fd, short what, void *arg)
{
	struct fs *fs = arg;

	(void)fd;
	(void)what;
	if ((fs->linger_s || fs->linger_lost_s) && !fs->shutdown) {
		uint64_t now = iofs_mono_s() + 1; /* never 0 */

		fs_linger_sweep(fs, now);
	}
	fs_itable_gc(&fs->it);
}

int fs_new(struct event_base *base, router_t *r, const struct fs_config *cfg,
	   char *err, size_t errlen, fs_t **out)
{
	struct fs *fs;
	char opts[4096];
	struct timeval tv = {.tv_sec = FS_SWEEP_MS / 1000,
			     .tv_usec = (FS_SWEEP_MS % 1000) * 1000};
	int rc = -ENOMEM;

	*out = NULL;
	fs = calloc(1, sizeof(*fs));
	if (!fs) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	fs->base = base;
	fs->r = r;
	fs->dev_hold = -1;
	fs->debug = cfg->debug;
	fs->linger_s = cfg->linger_s;
	fs->linger_lost_s = cfg->linger_lost_s;
	fs->stdin_uid_max = cfg->stdin_uid_max;
	fs->max_read = cfg->max_read;
	fs->log = cfg->log;
	fs->on_exit = cfg->on_exit;
	fs->on_exit_ctx = cfg->on_exit_ctx;
	fs->root.ino = FUSE_ROOT_ID;
	fs->root.kind = FS_K_ROOT;
	fs->uid = getuid();
	fs->gid = getgid();
	clock_gettime(CLOCK_REALTIME, &fs->start);
	fs_itable_init(&fs->it);
	TAILQ_INIT(&fs->streams);
	TAILQ_INIT(&fs->stdins);
	fs->mountpoint = strdup(cfg->mountpoint);
	fs->sweep_ev = event_new(base, -1, EV_PERSIST, fs_sweep_cb, fs);
	if (fs_rq_init(&fs->rq, base) < 0 || !fs->mountpoint || !fs->sweep_ev) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	snprintf(
	    opts, sizeof(opts),
	    "default_permissions,auto_unmount,fsname=iofs,subtype=iofs%s%s%s",
	    geteuid() == 0 ? ",allow_other" : "",
	    cfg->fuse_opts && *cfg->fuse_opts ? "," : "",
	    cfg->fuse_opts ? cfg->fuse_opts : "");
	if (fuse_opt_add_arg(&fs->args, "iofs") ||
	    fuse_opt_add_arg(&fs->args, "-o") ||
	    fuse_opt_add_arg(&fs->args, opts) ||
	    (cfg->debug && fuse_opt_add_arg(&fs->args, "-d"))) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	fs->se = fuse_session_new(&fs->args, &fs_ops, sizeof(fs_ops), fs);
	if (!fs->se) {
		snprintf(err, errlen,
			 "bad FUSE mount option in '-o %s' (see the message "
			 "above and iofs(8))",
			 cfg->fuse_opts ? cfg->fuse_opts : "");
		rc = -EINVAL;
		goto out_free;
	}
	event_add(fs->sweep_ev, &tv);
	*out = fs;
	return 0;

out_free:
	fs_free(fs);
	return rc;
}

/* The highest fd open in this process, or -1. */
static int highest_fd(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int hi = -1;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char *end;
		long v = strtol(e->d_name, &end, 10);

		if (*end == '\0' && end != e->d_name && v > hi && v < INT_MAX)
			hi = (int)v;
	}
	closedir(d);
	return hi;
}

int fs_mount(fs_t *fs, char *err, size_t errlen)
{
	int fd, fl;

	if (fs->mounted)
		return 0;
	if (fuse_session_mount(fs->se, fs->mountpoint) != 0) {
		snprintf(err, errlen,
			 "cannot mount %s (see the message above): check that "
			 "fusermount3 is installed and /dev/fuse is usable",
			 fs->mountpoint);
		return -EIO;
	}
	fs->mounted = true;
	fd = fuse_session_fd(fs->se);
	/*
	 * kill -9 must leave no stale mount.  fusermount3's auto_unmount
	 * helper unmounts when its socket to us (libfuse keeps it open)
	 * ends, but only if opening the mountpoint then fails with ENOTCONN.
	 * A dying process's files are released highest fd first, and the
	 * socket is above the FUSE fd: the helper could wake, open the
	 * mountpoint while the connection still lived, get ECONNABORTED
	 * when it died, and leave the mount (5-8 kills in 100 under load;
	 * tests/fs/mount.sh kills 20 times in a row).  A copy of the FUSE fd above both makes
	 * the connection end first.
	 */
	fs->dev_hold = fcntl(fd, F_DUPFD_CLOEXEC, highest_fd() + 1);
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		goto out_unmount;
	fs->dev_ev =
	    event_new(fs->base, fd, EV_READ | EV_PERSIST, fs_dev_cb, fs);
	if (!fs->dev_ev || event_add(fs->dev_ev, NULL) < 0)
		goto out_unmount;
	return 0;

out_unmount:
	snprintf(err, errlen, "cannot watch the FUSE device: %s",
		 strerror(errno));
	fs_unmount(fs);
	return -EIO;
}

void fs_shutdown(fs_t *fs)
{
	struct fs_stream *s;
	struct fs_stdin *w;

	if (!fs || fs->shutdown)
		return;
	fs->shutdown = true;
	TAILQ_FOREACH (s, &fs->streams, link)
		fs_stream_shutdown(s);
	TAILQ_FOREACH (w, &fs->stdins, link)
		fs_stdin_shutdown(w);
}

int fs_unmount(fs_t *fs)
{
	if (!fs || !fs->mounted)
		return 0;
	if (fs->dev_ev) {
		event_free(fs->dev_ev);
		fs->dev_ev = NULL;
	}
	fuse_session_unmount(fs->se); /* lazy: gone at once, or refused */
	fs->mounted = false;
	/* a session that ended was unmounted by someone else (libfuse then
	 * leaves the path alone): what is there now is not ours */
	if (fs->exit_reported || !fs_fuse_mounted_at(fs->mountpoint))
		return 0;
	iofs_logf(fs->log, LOG_ERR, NULL,
		  "could not unmount %s (the message above says why): it "
		  "stays as a dead mount; remove it with 'fusermount3 -u %s' "
		  "or, as root, 'umount -l %s'",
		  fs->mountpoint, fs->mountpoint, fs->mountpoint);
	return -EBUSY;
}

void fs_free(fs_t *fs)
{
	struct fs_stream *s;
	struct fs_stdin *w;

	if (!fs)
		return;
	fs_shutdown(fs);
	fs_unmount(fs);
	/* Handles the kernel never released (the mount is gone). */
	while ((s = TAILQ_FIRST(&fs->streams)))
		fs_stream_release(s);
	while ((w = TAILQ_FIRST(&fs->stdins)))
		fs_stdin_release(w);
	if (fs->se)
		fuse_session_destroy(fs->se);
	if (fs->dev_hold >= 0)
		close(fs->dev_hold);
	fuse_opt_free_args(&fs->args);
	free(fs->buf.mem);
	fs_itable_release(&fs->it);
	fs_rq_release(&fs->rq);
	uidmap_release(&fs->stdin_uids);
	if (fs->sweep_ev)
		event_free(fs->sweep_ev);
	free(fs->mountpoint);
	free(fs);
}
