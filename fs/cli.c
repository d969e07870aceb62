/* SPDX-License-Identifier: MIT */
/* The daemon's command line: fs/cli.h. */
#include "fs/cli.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "fs/fs.h"
#include "fs/loop.h"
#include "fs/spool.h"
#include "iofs_config.h"
#include "log/log.h"
#include "log/num.h"

void cli_defaults(struct daemon_options *o)
{
	*o = (struct daemon_options){.log_level = -1,
				     .linger_lost_s = 3600,
				     .poll_us = LOOP_POLL_DEFAULT_US,
				     .stdin_uid_max = 64u << 20};
}

#define USAGE_LINES                                                    \
	"usage: iofs [-f] [-d] [-o OPT[,OPT...]] [--listen ADDR]...\n"  \
	"            [--output-dir DIR] [--pmix SERVER] MOUNTPOINT\n"

/* A usage error: what was wrong (argv[@at]), the synopsis, where the rest
 * is. */
static void usage_error(char *const argv[], int at, int opt)
{
	if (opt == ':')
		fprintf(stderr, "iofs: option '%s' needs a value\n", argv[at]);
	else
		fprintf(stderr, "iofs: unrecognized option '%s'\n", argv[at]);
	fprintf(stderr, USAGE_LINES "'iofs --help' lists every option; "
				    "see also iofs(8)\n");
}

static void usage(FILE *f)
{
	fprintf(
	    f,
	    USAGE_LINES
	    "\n"
	    "  -f                 stay in the foreground\n"
	    "  -d                 log every FUSE request (implies -f)\n"
	    "  -o linger=SECONDS  remove completed jobs after SECONDS\n"
	    "  -o window=BYTES    retained bytes per stream (default 1M; K, M, G:\n"
	    "                     powers of 1024, as for every byte count)\n"
	    "  -o spool=DIR       keep every stream's history in DIR\n"
	    "                     (default /var/spool/iofs/MOUNT for root,\n"
	    "                     /var/tmp/iofs-UID/MOUNT otherwise)\n"
	    "  -o nospool         keep only the window in memory\n"
	    "  -o spool_max_stream=SIZE, spool_max_job=SIZE, spool_max=SIZE\n"
	    "                     caps (default none, 1G, min(16G, 1/4 of\n"
	    "                     its filesystem)); none = no cap\n"
	    "  -o spool_max_user=SIZE\n"
	    "                     cap on one user's jobs, the daemon's own\n"
	    "                     user's excepted (default spool_max / 4)\n"
	    "  -o spool_keep_cache\n"
	    "                     leave the spool's bytes in the page cache\n"
	    "                     (default: a rank file past 4 MiB is written\n"
	    "                     O_DIRECT, the rest dropped 8 MiB behind)\n"
	    "  -o spool_nostage   write rank files through the page cache\n"
	    "                     (dropped 8 MiB behind) instead of O_DIRECT\n"
	    "  -o max_read=BYTES  largest read request the kernel sends\n"
	    "  -o poll_us=N       poll up to N us before sleeping while a\n"
	    "                     stdin file is in use (default 100, 0 = off)\n"
	    "  -o allow_remote    accept TCP forwarders not on loopback\n"
	    "  -o loglevel=LEVEL  err, warning, notice, info (default), "
	    "debug\n"
	    "  -o debug           the same as -o loglevel=debug\n"
	    "  -o auth=munge|none TCP forwarders prove their uid with MUNGE\n"
	    "                     (default) or are trusted (none)\n"
	    "  -o munge_socket=PATH  munged's socket (default $MUNGE_SOCKET)\n"
	    "  -o linger_lost=SECONDS  remove abandoned jobs (default 3600)\n"
	    "  -o max_...=N       per-user limits, see iofs(8)\n"
	    "  -o resume_window=SECONDS  running ranks of a broken link wait\n"
	    "                     this long for their forwarder (default 300)\n"
	    "  -o OPT             any other option goes to FUSE (mount(8))\n"
	    "  --listen ADDR      unix:/path or tcp:HOST:PORT (repeatable);\n"
	    "                     default $IOFS_ADDR, else for root\n"
	    "                     unix:/run/iofs/iofs.sock, else\n"
	    "                     unix:$XDG_RUNTIME_DIR/iofs.sock, else\n"
	    "                     unix:/tmp/iofs-UID.sock\n"
	    "  --output-dir DIR   also write "
	    "DIR/<nspace>/<rank>/{stdout,stderr}\n"
	    "  --pmix SERVER      pull output from a PMIx server (URI, "
	    "pid:PID,\n"
	    "                     rendezvous file, or 'system')\n"
	    "  -h, --help         this help;  -V, --version  the version\n"
	    "See iofs(8).\n");
}

/* The numeric -o NAME=N options: N in [min, max], stored at @off (a
 * uint32_t or a 64-bit field, @size says which); @bytes: a byte count,
 * which takes K, M, G, T as the spool's caps do (log/num.h); @fuse: FUSE
 * sees it too (in plain digits: libfuse knows no units). */
static const struct num_opt {
	const char *name;
	uint64_t min, max;
	const char *hint;
	size_t off, size;
	bool bytes, fuse;
} num_opts[] = {
#define NUM_OPT(n, lo, hi, field, h, b, f)                                     \
	{n, lo, hi, h, offsetof(struct daemon_options, field),                        \
	 sizeof(((struct daemon_options *)0)->field), b, f}
    NUM_OPT("linger=", 0, UINT32_MAX, linger_s,
	    "give a number of seconds, e.g. -o linger=600", false, false),
    NUM_OPT("linger_lost=", 0, UINT32_MAX, linger_lost_s,
	    "give a number of seconds (0 = like linger)", false, false),
    NUM_OPT("window=", 4096, SIZE_MAX / 4, window,
	    "give a byte count of at least 4K, e.g. -o window=1M "
	    "(K, M, G, T: powers of 1024)",
	    true, false),
    /* libfuse 3.14 also needs conn->max_read in init: ours and FUSE's */
    NUM_OPT("max_read=", 4096, UINT32_MAX, max_read,
	    "give a byte count from 4K to 4294967295, e.g. -o max_read=128K",
	    true, true),
    NUM_OPT("poll_us=", 0, LOOP_POLL_MAX_US, poll_us,
	    "give microseconds, 0 (off) to 1000", false, false),
    NUM_OPT("max_stdin_uid=", 0, UINT64_MAX / 4, stdin_uid_max,
	    "give a byte count, e.g. -o max_stdin_uid=64M (0 = unlimited)",
	    true, false),
#undef NUM_OPT
};

/* Append @tok to the options FUSE sees: 0, or -1 when they are full. */
static int fuse_opt_add(struct daemon_options *o, const char *tok)
{
	size_t used = strlen(o->fuse_opts);

	if (used + strlen(tok) + 2 >= sizeof(o->fuse_opts)) {
		fprintf(stderr, "iofs: too many -o options\n");
		return -1;
	}
	snprintf(o->fuse_opts + used, sizeof(o->fuse_opts) - used, "%s%s",
		 used ? "," : "", tok);
	return 0;
}

/* @tok one of num_opts: 1 (stored), 0 (another option), or -1 after
 * telling what to give. */
static int num_opt(struct daemon_options *o, const char *tok)
{
	for (size_t i = 0; i < sizeof(num_opts) / sizeof(num_opts[0]); i++) {
		const struct num_opt *t = &num_opts[i];
		size_t n = strlen(t->name);
		char *at = (char *)o + t->off;
		uint64_t v;

		if (strncmp(tok, t->name, n) != 0)
			continue;
		if (!iofs_parse_in(tok + n, t->bytes, t->min, t->max, &v)) {
			fprintf(stderr, "iofs: bad -o %s: %s\n", tok, t->hint);
			return -1;
		}
		if (t->size == sizeof(uint32_t)) {
			uint32_t v32 = (uint32_t)v;
			memcpy(at, &v32, sizeof(v32));
		} else {
			_Static_assert(sizeof(size_t) == sizeof(uint64_t),
				       "window= is stored as 64 bits");
			memcpy(at, &v, sizeof(v));
		}
		if (t->fuse) {
			char plain[64];

			snprintf(plain, sizeof(plain), "%.*s%" PRIu64, (int)n,
				 t->name, v);
			if (fuse_opt_add(o, plain) < 0)
				return -1;
		}
		return 1;
	}
	return 0;
}

/* Split one -o argument: ours are consumed, the rest appended for FUSE. */
static int parse_o(struct daemon_options *o, char *arg)
{
	char *save = NULL;

	for (char *tok = strtok_r(arg, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char err[256];
		int rc;

		if ((rc = num_opt(o, tok)) != 0) {
			if (rc < 0)
				return -1;
		} else if ((rc = spool_option(&o->spool, tok, err,
					      sizeof(err))) != 0 ||
			   (rc = net_config_option(&o->net, tok, err,
						   sizeof(err))) != 0) {
			if (rc < 0) {
				fprintf(stderr, "iofs: %s\n", err);
				return -1;
			}
		} else if (!strcmp(tok, "allow_remote")) {
			o->allow_remote_tcp = true;
		} else if (!strcmp(tok, "debug")) {
			o->log_level = LOG_DEBUG;
		} else if (!strncmp(tok, "loglevel=", 9)) {
			o->log_level = iofs_log_level_parse(tok + 9);
			if (o->log_level < 0) {
				fprintf(stderr,
					"iofs: bad -o %s: give err, warning, "
					"notice, info or debug\n",
					tok);
				return -1;
			}
		} else if (fuse_opt_add(o, tok) < 0) {
			return -1;
		}
	}
	return 0;
}

enum { OPT_LISTEN = 256, OPT_OUTPUT_DIR, OPT_PMIX };

/* cli.h */
int cli_parse(struct daemon_options *o, int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"listen", required_argument, NULL, OPT_LISTEN},
	    {"output-dir", required_argument, NULL, OPT_OUTPUT_DIR},
	    {"pmix", required_argument, NULL, OPT_PMIX},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	int c;

	opterr = 0; /* usage_error() says it, as iofs */
	while ((c = getopt_long(argc, argv, "+:fdo:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			o->foreground = true;
			break;
		case 'd':
			o->debug = o->foreground = true;
			o->log_level = LOG_DEBUG;
			break;
		case 'o':
			if (parse_o(o, optarg) < 0)
				return -1;
			break;
		case OPT_LISTEN:
			if (o->nlisten == MAX_LISTEN) {
				fprintf(stderr, "iofs: at most %d --listen\n",
					MAX_LISTEN);
				return -1;
			}
			o->listen[o->nlisten++] = optarg;
			break;
		case OPT_OUTPUT_DIR:
			o->output_dir = optarg;
			break;
		case OPT_PMIX:
			o->pmix = optarg;
			break;
		case 'h':
			usage(stdout);
			return 1;
		case 'V':
			printf("iofs %s\n", IOFS_VERSION);
			return 1;
		default:
			usage_error(argv, optind - 1, c);
			return -1;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "iofs: %s\n",
			optind >= argc ? "missing MOUNTPOINT"
				       : "exactly one MOUNTPOINT expected");
		usage(stderr);
		return -1;
	}
	o->mountpoint = argv[optind];
	return 0;
}

/* A socket or --output-dir inside the mountpoint would be served by this
 * daemon to itself: its only thread would wait for itself, forever. */
static int check_paths(const struct daemon_options *o)
{
	const char *env = getenv("IOFS_ADDR");
	const char *what = NULL, *path = NULL;

	if (o->output_dir && fs_path_inside(o->mountpoint_abs, o->output_dir)) {
		what = "--output-dir";
		path = o->output_dir;
	}
	if (!what && o->spool.dir && !o->spool_default &&
	    fs_path_inside(o->mountpoint_abs, o->spool.dir)) {
		what = "-o spool=";
		path = o->spool.dir;
	}
	for (size_t i = 0; !what && i < o->nlisten; i++) {
		if (!strncmp(o->listen[i], "unix:", 5) &&
		    fs_path_inside(o->mountpoint_abs, o->listen[i] + 5)) {
			what = "--listen";
			path = o->listen[i] + 5;
		}
	}
	if (!what && !o->nlisten && env && !strncmp(env, "unix:", 5) &&
	    fs_path_inside(o->mountpoint_abs, env + 5)) {
		what = "$IOFS_ADDR";
		path = env + 5;
	}
	if (!what)
		return 0;
	fprintf(stderr,
		"iofs: %s %s is inside the mountpoint %s: choose a path "
		"outside it\n",
		what, path, o->mountpoint_abs);
	return -EINVAL;
}

/* Make *@path (if set) absolute, in @buf (PATH_MAX): the daemon leaves
 * its working directory. */
static int abs_path(const char **path, char *buf, const char *what)
{
	char cwd[PATH_MAX];

	if (!*path || (*path)[0] == '/')
		return 0;
	if (!getcwd(cwd, sizeof(cwd)) ||
	    (size_t)snprintf(buf, PATH_MAX, "%s/%s", cwd, *path) >= PATH_MAX) {
		fprintf(stderr, "iofs: %s %s: path too long\n", what, *path);
		return -1;
	}
	*path = buf;
	return 0;
}

/* unix:PATH listeners (--listen, or $IOFS_ADDR without one) relative to
 * the working directory, as the user meant them, made absolute (a copy
 * each, for the daemon's life). */
static int abs_listen(struct daemon_options *o)
{
	const char *env = getenv("IOFS_ADDR");
	char buf[PATH_MAX];
	const char *p;

	for (size_t i = 0; i <= o->nlisten; i++) {
		const char *a = i < o->nlisten ? o->listen[i]
			      : !o->nlisten	 ? env
						 : NULL;
		char *full = o->listen_abs[i < o->nlisten ? i : 0];

		if (!a || strncmp(a, "unix:", 5) != 0 || a[5] == '/' || !a[5])
			continue;
		p = a + 5;
		if (abs_path(&p, buf, "--listen unix:") < 0)
			return -1;
		if ((size_t)snprintf(full, sizeof(o->listen_abs[0]), "unix:%s",
				     p) >= sizeof(o->listen_abs[0])) {
			fprintf(stderr, "iofs: --listen %s: path too long\n", a);
			return -1;
		}
		if (i < o->nlisten)
			o->listen[i] = full;
		else if (setenv("IOFS_ADDR", full, 1) != 0)
			return -1;
	}
	return 0;
}

/* cli.h */
int cli_resolve_paths(struct daemon_options *o)
{
	char err[1024] = "";

	if (fs_check_mountpoint(o->mountpoint, err, sizeof(err)) < 0) {
		fprintf(stderr, "iofs: %s\n", err);
		return -1;
	}
	if (!realpath(o->mountpoint, o->mountpoint_abs)) {
		fprintf(stderr, "iofs: %s: %s\n", o->mountpoint,
			strerror(errno));
		return -1;
	}
	if (abs_path(&o->output_dir, o->output_dir_abs, "--output-dir") < 0 ||
	    abs_path(&o->spool.dir, o->spool_abs, "-o spool=") < 0 ||
	    abs_listen(o) < 0)
		return -1;
	if (o->spool.off) {
		o->spool.dir = NULL;
	} else if (!o->spool.dir) {
		o->spool_default = true;
		if (spool_default_dir(o->mountpoint_abs, o->spool_abs,
				      sizeof(o->spool_abs)) == 0 &&
		    !fs_path_inside(o->mountpoint_abs, o->spool_abs))
			o->spool.dir = o->spool_abs;
	}
	if (check_paths(o) < 0)
		return -1;
	return 0;
}