/* SPDX-License-Identifier: MIT */
/* Private: the spool's records, shared by fs/spool.c (the store) and
 * fs/spool_restore.c (bringing an earlier life's jobs back). */
#ifndef IOFS_FS_SPOOL_I_H
#define IOFS_FS_SPOOL_I_H

#include <stdbool.h>
#include <stdint.h>

#include "fs/spool.h"

#define SPOOL_NAME_TRIES 100000 /* job directory numbers tried per job */

struct spool {
	iofs_log_t *log; /* borrowed */
	char *dir;
	int dirfd; /* the verified top directory */
	uint64_t next; /* next job directory number to try */
	bool no_punch; /* the filesystem cannot punch holes: logged once */
};

struct spool_job {
	spool_t *sp;
	int dirfd;
	char name[24]; /* its directory in sp->dir */
};

struct spool_file {
	struct spool_job *j;
	int fd;
	uint64_t punched; /* [0, punched) is a hole (retention caps) */
	char name[24];
};

/* "DIR/NAME: WHAT" at LOG_ERR */
void spool_log(spool_t *sp, const char *name, const char *what);
/* Open (creating; emptied if @truncate) @name in the job's directory. */
int spool_file_open(struct spool_job *j, const char *name, bool truncate,
		    struct spool_file **out);
void spool_close(void *h, bool discard);
void spool_job_close(void *jh, bool discard);

#endif /* IOFS_FS_SPOOL_I_H */
