/* SPDX-License-Identifier: MIT */
/*
 * The daemon's command line (fs/cli.c): its options, their defaults,
 * parsing and the paths made absolute and checked before the daemon
 * leaves its working directory.  Only fs/main.c uses it.
 */
#ifndef IOFS_FS_CLI_H
#define IOFS_FS_CLI_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fs/spool_opt.h"
#include "net/server.h"

#define MAX_LISTEN 16

struct daemon_options {
	bool foreground;
	bool debug;    /* -d: libfuse debug */
	int log_level; /* -o loglevel= / -o debug; -1 = default */
	bool allow_remote_tcp;
	const char *listen[MAX_LISTEN];
	size_t nlisten;
	char listen_abs[MAX_LISTEN][PATH_MAX + 8]; /* relative unix: made absolute */
	const char *output_dir;
	const char *pmix;
	const char *mountpoint;
	char mountpoint_abs[PATH_MAX];
	char output_dir_abs[PATH_MAX];
	struct spool_options spool; /* .dir: the spool in use, or NULL */
	bool spool_default;	    /* .dir is the default: may fail */
	char spool_abs[PATH_MAX];
	uint32_t linger_s;
	uint32_t linger_lost_s;
	uint64_t stdin_uid_max;
	uint32_t max_read;
	uint32_t poll_us; /* -o poll_us=: fs/loop.h */
	size_t window;
	struct net_server_config net; /* auth, munge_socket, max_* */
	char fuse_opts[2048]; /* -o options we pass on to libfuse */
};
/* The defaults (-o ... overrides them). */
void cli_defaults(struct daemon_options *o);
/* Parse argv into @o: -1 to exit with status 2 (usage, said on stderr),
 * 1 to exit 0 (--help, --version), 0 to run. */
int cli_parse(struct daemon_options *o, int argc, char **argv);
/* The mount point, --output-dir and -o spool= made absolute and checked:
 * 0, or -1 after saying why on stderr. */
int cli_resolve_paths(struct daemon_options *o);

#endif /* IOFS_FS_CLI_H */
