/* SPDX-License-Identifier: MIT */
/*
 * Drop-behind for the spool's rank files (docs/performance.md, "The
 * spool"): a stream that writes gigabytes would otherwise leave every
 * byte of it in the page cache, and take a page the kernel has not handed
 * out for a while for every 4 KiB it appends.  On a VM with free page
 * reporting (virtio-balloon) such a page costs the host a fault and a
 * zeroing first: 3 s of the daemon's CPU per GiB measured, eight times
 * the write itself.  So the spool writes back and drops what lies
 * SPOOL_FLUSH_LAG behind a file's end, in SPOOL_FLUSH_CHUNK pieces, on a
 * thread of its own (the event loop never waits for the disk): the pages
 * come back to the allocator and are taken again, still warm, by the next
 * appends.  Readers of older history read it from the disk then; the
 * newest bytes are in the router's window anyway.  Best effort: a request
 * that cannot be queued is skipped (its pages just stay cached), and on a
 * filesystem without writeback (tmpfs) both calls do nothing.
 */
#ifndef IOFS_FS_SPOOL_FLUSH_H
#define IOFS_FS_SPOOL_FLUSH_H

#include <stdint.h>

#define SPOOL_FLUSH_CHUNK (4u << 20) /* written back and dropped at once */
#define SPOOL_FLUSH_LAG (8u << 20)   /* the newest bytes stay cached */
#define SPOOL_FLUSH_QUEUE 64	     /* requests waiting at most */

typedef struct spool_flusher spool_flusher_t;

/* Start the thread: 0 or -errno. */
int spool_flusher_new(spool_flusher_t **out);
/* Stop it (requests still queued are dropped) and free.  NULL-safe. */
void spool_flusher_free(spool_flusher_t *fl);
/* Write back and drop [@off, @off + @len) of @fd (duplicated: the caller
 * may close its own at once).  Never blocks on the disk. */
void spool_flusher_queue(spool_flusher_t *fl, int fd, uint64_t off,
			 uint64_t len);
/* Requests done so far (tests). */
uint64_t spool_flusher_done(spool_flusher_t *fl);

#endif /* IOFS_FS_SPOOL_FLUSH_H */
