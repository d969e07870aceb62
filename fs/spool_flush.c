/* SPDX-License-Identifier: MIT */
#include "fs/spool_flush.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

struct flush_req {
	int fd; /* our duplicate */
	uint64_t off, len;
};

/* Everything below @lock is shared by the event loop (spool_flusher_queue)
 * and the thread; the thread owns a request once it took it. */
struct spool_flusher {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct flush_req q[SPOOL_FLUSH_QUEUE]; /* ring */
	unsigned head, len;
	bool stop;
	uint64_t done;
};

static void flush_one(const struct flush_req *rq)
{
	/* Start writeback of the range and wait for it (this thread only),
	 * then drop the clean pages. */
	sync_file_range(rq->fd, (off_t)rq->off, (off_t)rq->len,
			SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
			    SYNC_FILE_RANGE_WAIT_AFTER);
	posix_fadvise(rq->fd, (off_t)rq->off, (off_t)rq->len,
		      POSIX_FADV_DONTNEED);
	close(rq->fd);
}

static void *flush_main(void *arg)
{
	spool_flusher_t *fl = arg;

	pthread_mutex_lock(&fl->lock);
	for (;;) {
		while (!fl->stop && !fl->len)
			pthread_cond_wait(&fl->cond, &fl->lock);
		if (fl->stop)
			break;
		struct flush_req rq = fl->q[fl->head];
		fl->head = (fl->head + 1) % SPOOL_FLUSH_QUEUE;
		fl->len--;
		pthread_mutex_unlock(&fl->lock);
		flush_one(&rq);
		pthread_mutex_lock(&fl->lock);
		fl->done++;
	}
	pthread_mutex_unlock(&fl->lock);
	return NULL;
}

int spool_flusher_new(spool_flusher_t **out)
{
	spool_flusher_t *fl = calloc(1, sizeof(*fl));
	int rc;

	*out = NULL;
	if (!fl)
		return -ENOMEM;
	pthread_mutex_init(&fl->lock, NULL);
	pthread_cond_init(&fl->cond, NULL);
	rc = pthread_create(&fl->thread, NULL, flush_main, fl);
	if (rc) {
		pthread_cond_destroy(&fl->cond);
		pthread_mutex_destroy(&fl->lock);
		free(fl);
		return -rc;
	}
	*out = fl;
	return 0;
}

void spool_flusher_free(spool_flusher_t *fl)
{
	if (!fl)
		return;
	pthread_mutex_lock(&fl->lock);
	fl->stop = true;
	pthread_cond_signal(&fl->cond);
	pthread_mutex_unlock(&fl->lock);
	pthread_join(fl->thread, NULL);
	for (; fl->len; fl->len--) { /* never taken: ours to close */
		close(fl->q[fl->head].fd);
		fl->head = (fl->head + 1) % SPOOL_FLUSH_QUEUE;
	}
	pthread_cond_destroy(&fl->cond);
	pthread_mutex_destroy(&fl->lock);
	free(fl);
}

void spool_flusher_queue(spool_flusher_t *fl, int fd, uint64_t off,
			 uint64_t len)
{
	int dup_fd;

	if (!fl || !len)
		return;
	dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (dup_fd < 0)
		return;
	pthread_mutex_lock(&fl->lock);
	if (fl->len < SPOOL_FLUSH_QUEUE) {
		fl->q[(fl->head + fl->len) % SPOOL_FLUSH_QUEUE] =
		    (struct flush_req){dup_fd, off, len};
		fl->len++;
		dup_fd = -1;
		pthread_cond_signal(&fl->cond);
	}
	pthread_mutex_unlock(&fl->lock);
	if (dup_fd >= 0) /* full, the disk is behind: these pages stay cached */
		close(dup_fd);
}

uint64_t spool_flusher_done(spool_flusher_t *fl)
{
	uint64_t n;

	pthread_mutex_lock(&fl->lock);
	n = fl->done;
	pthread_mutex_unlock(&fl->lock);
	return n;
}
