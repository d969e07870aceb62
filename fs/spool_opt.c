/* SPDX-License-Identifier: MIT */
#include "fs/spool_opt.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "log/num.h"

bool spool_parse_size(const char *s, uint64_t *out)
{
	if (!strcasecmp(s, "none")) {
		*out = 0;
		return true;
	}
	return iofs_parse_size(s, out);
}

/* -o NAME=SIZE into *@v: 1, 0 (another option), -1 (bad). */
static int size_opt(const char *tok, const char *name, uint64_t *v,
		    bool *set, char *err, size_t errlen)
{
	size_t n = strlen(name);

	if (strncmp(tok, name, n) != 0 || tok[n] != '=')
		return 0;
	if (!spool_parse_size(tok + n + 1, v) ||
	    (*v && *v < 2 * 4096)) {
		snprintf(err, errlen,
			 "bad -o %s: give a size of at least 8K, e.g. %s=1G "
			 "(K, M, G, T: powers of 1024), or none",
			 tok, name);
		return -1;
	}
	*set = true;
	return 1;
}

int spool_option(struct spool_options *o, const char *tok, char *err,
		 size_t errlen)
{
	int rc;

	if (!strncmp(tok, "spool=", 6)) {
		if (!tok[6]) {
			snprintf(err, errlen, "bad -o spool=: give a directory");
			return -1;
		}
		o->dir = tok + 6;
		o->off = false;
		return 1;
	}
	if (!strcmp(tok, "nospool")) {
		o->off = true;
		return 1;
	}
	if (!strcmp(tok, "spool_keep_cache")) {
		o->keep_cache = true;
		return 1;
	}
	if (!strcmp(tok, "spool_nostage")) {
		o->no_stage = true;
		return 1;
	}
	if ((rc = size_opt(tok, "spool_max_stream", &o->max_stream,
			   &o->set_stream, err, errlen)) ||
	    (rc = size_opt(tok, "spool_max_job", &o->max_job, &o->set_job,
			   err, errlen)) ||
	    (rc = size_opt(tok, "spool_max_user", &o->max_user, &o->set_user,
			   err, errlen)) ||
	    (rc = size_opt(tok, "spool_max", &o->max, &o->set_total, err,
			   errlen)))
		return rc;
	return 0;
}

/* Escape @path: '/' as '-', bytes outside [A-Za-z0-9._] as %XX, a leading
 * '.' too (no hidden or "..", names). */
static int mount_key(const char *path, char *buf, size_t len)
{
	size_t n = 0;

	while (*path == '/')
		path++;
	if (!*path)
		path = "/"; /* the root: "-" */
	for (const char *p = path; *p; p++) {
		unsigned char c = (unsigned char)*p;
		int w;

		if (c == '/')
			w = snprintf(buf + n, len - n, "-");
		else if ((isalnum(c) || c == '_' || c == '.') &&
			 !(c == '.' && p == path))
			w = snprintf(buf + n, len - n, "%c", c);
		else
			w = snprintf(buf + n, len - n, "%%%02X", c);
		if (w < 0 || (size_t)w >= len - n)
			return -ENAMETOOLONG;
		n += (size_t)w;
	}
	return 0;
}

int spool_default_dir(const char *mountpoint, char *buf, size_t len)
{
	const char *base = getenv("IOFS_SPOOL_DIR");
	char key[1024], own[64];
	int w;

	if (mount_key(mountpoint, key, sizeof(key)) < 0)
		return -ENAMETOOLONG;
	if (!base || base[0] != '/') { /* unset, or not absolute: ignored */
		if (geteuid() == 0) {
			base = "/var/spool/iofs";
		} else {
			snprintf(own, sizeof(own), "/var/tmp/iofs-%u",
				 (unsigned)geteuid());
			base = own;
		}
	}
	w = snprintf(buf, len, "%s/%s", base, key);
	return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

uint64_t spool_default_max(const char *dir)
{
	struct statvfs sv;
	uint64_t q;

	if (statvfs(dir, &sv) != 0)
		return SPOOL_MAX_DEFAULT_CEIL;
	q = (uint64_t)sv.f_blocks * sv.f_frsize / 4;
	return q < SPOOL_MAX_DEFAULT_CEIL ? q : SPOOL_MAX_DEFAULT_CEIL;
}

uint64_t spool_max_user(const struct spool_options *o, uint64_t max)
{
	return o->set_user ? o->max_user : max / 4;
}
