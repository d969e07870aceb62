/* SPDX-License-Identifier: MIT */
/*
 * The spool's options (-o spool=DIR, -o nospool, -o spool_max*=SIZE
 * (stream, job, user and total caps),
 * -o spool_keep_cache) and
 * where it lives by default (docs/design.md "The spool"):
 *   $IOFS_SPOOL_DIR/<mount>   if set to an absolute path (the tests),
 *   /var/spool/iofs/<mount>   for root,
 *   /var/tmp/iofs-<uid>/<mount> for anyone else,
 * <mount> being the mountpoint's absolute path with '/' as '-' and any
 * byte outside [A-Za-z0-9._] as %XX ("/" is "-").  A default spool that
 * cannot be set up is a warning (the daemon runs without); a spool named
 * with -o spool= must work.
 */
#ifndef IOFS_FS_SPOOL_OPT_H
#define IOFS_FS_SPOOL_OPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SPOOL_MAX_JOB_DEFAULT (1ull << 30)	/* 1 GiB */
#define SPOOL_MAX_DEFAULT_CEIL (16ull << 30)	/* 16 GiB */

struct spool_options {
	const char *dir; /* -o spool=DIR; NULL = the default */
	bool off;	 /* -o nospool */
	bool keep_cache; /* -o spool_keep_cache: no drop-behind, no stage */
	bool no_stage;	 /* -o spool_nostage (fs/spool_stage.h) */
	bool set_stream, set_job, set_total, set_user; /* given (else the
							* defaults) */
	uint64_t max_stream, max_job, max, max_user; /* 0 = no cap */
};

/* -o @tok: 1 (ours, taken), 0 (not ours), -1 (bad: @err says why). */
int spool_option(struct spool_options *o, const char *tok, char *err,
		 size_t errlen);

/* A SIZE: digits with an optional K, M, G or T (powers of 1024,
 * optionally followed by "iB" or "B"), or "none" (0).  true if valid. */
bool spool_parse_size(const char *s, uint64_t *out);

/* The default spool directory for @mountpoint (absolute) into @buf:
 * 0, or -ENAMETOOLONG. */
int spool_default_dir(const char *mountpoint, char *buf, size_t len);

/* The default total cap for a spool at @dir: a quarter of its
 * filesystem's size, at most SPOOL_MAX_DEFAULT_CEIL (that if statvfs
 * fails). */
uint64_t spool_default_max(const char *dir);

/* The per-user cap (-o spool_max_user, for every user but the daemon's
 * own): @o's, or by default a quarter of the total cap @max (none when
 * that is none). */
uint64_t spool_max_user(const struct spool_options *o, uint64_t max);

#endif
