/* SPDX-License-Identifier: MIT */
/* Private: the spool's records, shared by fs/spool.c (the store) and
 * fs/spool_restore.c (bringing an earlier life's jobs back). */
#ifndef IOFS_FS_SPOOL_I_H
#define IOFS_FS_SPOOL_I_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "fs/spool.h"
#include "fs/spool_flush.h"
#include "fs/spool_stage.h"

#define SPOOL_NAME_TRIES 100000 /* job directory numbers tried per job */

struct spool {
	iofs_log_t *log; /* borrowed */
	char *dir;
	int dirfd; /* the verified top directory */
	uint64_t next; /* next job directory number to try */
	bool no_punch; /* the filesystem cannot punch holes: logged once */
	bool stage_warned; /* a stage could not be made: logged once */
	spool_flusher_t *fl; /* drop-behind (spool_flush.h); NULL: none */
	spool_stager_t *sg; /* the stage (spool_stage.h); NULL: none */
	/* Plain files with a descriptor, most recently used first: at most
	 * max_open (0 until the first open: a quarter of RLIMIT_NOFILE then),
	 * the least recently used is closed and reopened by name when used
	 * again (spool_file_fd()).  A daemon keeps every job's history, so a
	 * descriptor per rank file would grow without bound. */
	TAILQ_HEAD(spool_lru, spool_file) lru;
	size_t nopen, max_open;
};

struct spool_job {
	spool_t *sp;
	int dirfd;
	char name[24]; /* its directory in sp->dir */
	/* Its rank files per channel (0 stdout, 1 stderr), sorted by rank:
	 * what the merged views' records point into. */
	struct spool_file **rf[2];
	size_t nrf[2], crf[2];
	uint64_t epoch; /* of the last held_from() walk of a view */
};

#define SPOOL_NO_RANK UINT32_MAX
#define SPOOL_MIN_OPEN 64 /* sp->max_open at least */

struct spool_mview;

struct spool_file {
	struct spool_job *j;
	int fd;
	uint64_t punched; /* [0, punched) is a hole (retention caps) */
	/* A plain file's drop-behind (spool_flush.h): its size (0 when
	 * created, set by spool_file_adopted() for an earlier life's), and
	 * [0, flushed) handed to the flusher. */
	uint64_t end, flushed;
	char name[24];
	uint32_t rank;	  /* a rank file's rank, else SPOOL_NO_RANK */
	int ci;		  /* channel: 0 stdout, 1 stderr */
	uint64_t evicted; /* a rank file: a cap evicted [0, evicted) */
	uint64_t seen;	  /* epoch of the walk that saw it still held */
	uint64_t in_view; /* a rank file: its bytes [0, in_view) are in its
			   * merged view (spool_mview_cover(), at restore) */
	uint64_t cov;	  /* a rank file: records of its view that a cap
			   * punched held its bytes [0, cov) (spool_mcov.c) */
	/* A rank file's stage (spool_stage.h), NULL: the page cache; no_stage:
	 * its filesystem has no O_DIRECT, never try again. */
	struct spool_stage *st;
	bool no_stage;
	struct spool_mview *mv; /* a merged view's index, NULL: plain file */
	bool spliced; /* O_APPEND cleared for splice_in (position at its end) */
	bool listed;  /* on sp->lru (plain files; a view's stay open) */
	TAILQ_ENTRY(spool_file) lru;
};

/* All @n bytes at @off, or -errno (-EIO at end of file). */
int pread_full(int fd, void *buf, size_t n, uint64_t off);
/* All of @iov (@cnt pieces, advanced as written) at @off, or -errno. */
int pwritev_full(int fd, struct iovec *iov, int cnt, uint64_t off);
/* All @n bytes of @buf at @off, or -errno. */
int pwrite_full(int fd, const void *buf, size_t n, uint64_t off);
/* "DIR/NAME: WHAT" at LOG_ERR */
void spool_log(spool_t *sp, const char *name, const char *what);
/* Replace the job's file @name by @len bytes of @buf, through `@name.tmp`
 * and a rename: after a crash a reader sees the old file or the new one,
 * whole.  0, or -errno (logged). */
int spool_replace(struct spool_job *j, const char *name, const void *buf,
		  size_t len);
/* Read small file @name of @dirfd (no links, at most @max bytes) into a
 * NUL-terminated buffer (the caller's to free): its length, or -errno
 * (-EINVAL: not a regular file, too long, or no memory). */
ssize_t spool_read_file(int dirfd, const char *name, size_t max, char **out);
/* Open (creating; emptied if @truncate) @name in the job's directory;
 * its descriptor is one of the spool's least-recently-used ones (a view's
 * index takes it off: spool_file_pin()). */
int spool_file_open(struct spool_job *j, const char *name, bool truncate,
		    struct spool_file **out);
/* @f's descriptor, reopened if the spool closed it since: >= 0 or
 * -errno.  Valid until the next spool_file_fd() or spool_file_open(). */
int spool_file_fd(struct spool_file *f);
/* @f keeps its descriptor for as long as it is open. */
void spool_file_pin(struct spool_file *f);
void spool_close(void *h, bool discard);
void spool_job_close(void *jh, bool discard);
/* @f, a plain file of an earlier life, is @size bytes long: its next
 * append lands there (drop-behind counts from it). */
void spool_file_adopted(struct spool_file *f, uint64_t size);
/* @f is @rank's file of channel @ci: merged views may point into it. */
int spool_rank_file(struct spool_job *j, uint32_t rank, int ci,
		    struct spool_file *f);
struct spool_file *spool_rank_find(struct spool_job *j, int ci,
				   uint32_t rank);

/* A merged view stored as an index into the rank files (spool_mview.c):
 * `<ch>.idx`, records, and `<ch>.lit`, the bytes that are no rank's (tags,
 * newlines that end another rank's line, XML). */
int spool_mview_open(struct spool_job *j, int ci, bool create,
		     struct spool_file **out);
bool spool_mview_exists(struct spool_job *j, int ci);
uint64_t spool_mview_size(const struct spool_file *f);
ssize_t spool_mview_append(struct spool_file *f, const struct iovec *iov,
			   int iovcnt);
ssize_t spool_mview_append_ref(struct spool_file *f,
			       const struct router_store_ref *ref);
ssize_t spool_mview_read(struct spool_file *f, uint64_t off, void *buf,
			 size_t n);
void spool_mview_drop(struct spool_file *f, uint64_t to);
uint64_t spool_mview_held_from(struct spool_file *f);
/* Restart: set each rank file's in_view from the view's records, and
 * @last_rank to the rank whose bytes end the view (SPOOL_NO_RANK: a
 * literal piece does).  0; 1 when the records cannot tell (literal rank
 * bytes, a punched prefix whose `<ch>.cov` is gone: in_view stays 0,
 * complete nothing); or -errno.  Also loads the rank files' cov. */
int spool_mview_cover(struct spool_file *f, uint32_t *last_rank);
/* What the punched records of job @j's view of channel @ci held
 * (spool_mcov.c, `<ch>.cov`): save writes each rank file's cov (the
 * file's length, or -errno, logged); load raises each rank file's cov to what the file says
 * (0; 1 when there is no such file or it is not one; -errno). */
ssize_t spool_mcov_save(struct spool_job *j, int ci);
int spool_mcov_load(struct spool_job *j, int ci);
void spool_mcov_discard(struct spool_job *j, int ci);
/* What the view's files take: its index and its literal bytes. */
uint64_t spool_mview_disk(const struct spool_file *f);
void spool_mview_close(struct spool_file *f, bool discard);

#endif /* IOFS_FS_SPOOL_I_H */
