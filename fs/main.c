/* SPDX-License-Identifier: MIT */
/*
 * iofs: the daemon.  One libevent loop drives the FUSE session, the
 * listeners, the PMIx source and the router's timers.
 *
 *   iofs [-f] [-d] [-o OPT[,OPT...]] [--listen ADDR]... [--output-dir DIR]
 *        [--pmix SERVER] MOUNTPOINT
 */
#include <errno.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "log/clock.h"
#include "fs/fs.h"
#include "fs/loop.h"
#include "fs/output_dir.h"
#include "fs/spool.h"
#include "fs/spool_opt.h"
#include "iofs_config.h"
#include "router/router.h"
#include "net/server.h"
#if IOFS_FS_WITH_PMIX
#include "net/pmix/pmix_source.h"
#endif

#define MAX_LISTEN	16
#define GRACE_MS	2000  /* at most this long for open files to close */
#define INIT_TIMEOUT_MS 10000 /* for the kernel INIT after mount */

struct options {
	bool foreground;
	bool debug;    /* -d: libfuse debug */
	int log_level; /* -o loglevel= / -o debug; -1 = default */
	bool allow_remote_tcp;
	const char *listen[MAX_LISTEN];
	size_t nlisten;
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

struct daemon {
	struct options *opt;
	struct event_base *base;
	iofs_log_t *log; /* the one logger: stderr, syslog once detached */
	router_t *r;
	fs_t *fs;
	output_dir_t *od;
	spool_t *spool;
	net_server_t *net;
#if IOFS_FS_WITH_PMIX
	pmix_source_t *pmix;
#endif
	struct event *sigs[3];
	struct event *grace_ev;
	uint64_t grace_deadline_ms;
	bool stopping;
};

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: iofs [-f] [-d] [-o OPT[,OPT...]] [--listen ADDR]...\n"
	    "            [--output-dir DIR] [--pmix SERVER] MOUNTPOINT\n"
	    "\n"
	    "  -f                 stay in the foreground\n"
	    "  -d                 log every FUSE request (implies -f)\n"
	    "  -o linger=SECONDS  remove completed jobs after SECONDS\n"
	    "  -o window=BYTES    retained bytes per stream (default 1 MiB)\n"
	    "  -o spool=DIR       keep every stream's history in DIR\n"
	    "                     (default /var/spool/iofs/MOUNT for root,\n"
	    "                     /var/tmp/iofs-UID/MOUNT otherwise)\n"
	    "  -o nospool         keep only the window in memory\n"
	    "  -o spool_max_stream=SIZE, spool_max_job=SIZE, spool_max=SIZE\n"
	    "                     caps (default none, 1G, min(16G, 1/4 of\n"
	    "                     its filesystem)); none = no cap\n"
	    "  -o spool_keep_cache\n"
	    "                     leave the spool's bytes in the page cache\n"
	    "                     (default: drop what lies 8 MiB behind)\n"
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

static bool parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!*s || *s == '-')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return false;
	*out = v;
	return true;
}

/* -o NAME=N with N in [min, max]: 1 (*v set), 0 (another option), or -1
 * after telling what to give. */
static int num_opt(const char *tok, const char *name, uint64_t min,
		   uint64_t max, const char *hint, uint64_t *v)
{
	size_t n = strlen(name);

	if (strncmp(tok, name, n) != 0)
		return 0;
	if (!parse_u64(tok + n, max, v) || *v < min) {
		fprintf(stderr, "iofs: bad -o %s: %s\n", tok, hint);
		return -1;
	}
	return 1;
}

/* Split one -o argument: ours are consumed, the rest appended for FUSE. */
static int parse_o(struct options *o, char *arg)
{
	char *save = NULL;

	for (char *tok = strtok_r(arg, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		uint64_t v;
		char err[256];
		int rc;
		size_t used = strlen(o->fuse_opts);

		if ((rc = num_opt(tok, "linger=", 0, UINT32_MAX,
				  "give a number of seconds, e.g. -o linger=600",
				  &v))) {
			if (rc < 0)
				return -1;
			o->linger_s = (uint32_t)v;
		} else if ((rc = num_opt(tok, "window=", 4096, SIZE_MAX / 4,
					 "give a byte count of at least 4096, "
					 "e.g. -o window=1048576",
					 &v))) {
			if (rc < 0)
				return -1;
			o->window = (size_t)v;
		} else if ((rc = num_opt(tok, "max_read=", 4096, UINT32_MAX,
					 "give a byte count of at least 4096",
					 &v))) {
			if (rc < 0)
				return -1;
			/* libfuse 3.14 also needs conn->max_read in init */
			o->max_read = (uint32_t)v;
			snprintf(o->fuse_opts + used,
				 sizeof(o->fuse_opts) - used, "%s%s",
				 used ? "," : "", tok);
		} else if ((rc = num_opt(tok, "poll_us=", 0, LOOP_POLL_MAX_US,
					 "give microseconds, 0 (off) to 1000",
					 &v))) {
			if (rc < 0)
				return -1;
			o->poll_us = (uint32_t)v;
		} else if ((rc = spool_option(&o->spool, tok, err,
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
		} else if ((rc = num_opt(tok, "linger_lost=", 0, UINT32_MAX,
					 "give a number of seconds (0 = like "
					 "linger)",
					 &v))) {
			if (rc < 0)
				return -1;
			o->linger_lost_s = (uint32_t)v;
		} else if ((rc = num_opt(tok, "max_stdin_uid=", 0,
					 UINT64_MAX / 4,
					 "give a byte count (0 = unlimited)",
					 &v))) {
			if (rc < 0)
				return -1;
			o->stdin_uid_max = v;
		} else if ((rc = net_config_option(&o->net, tok, err,
						   sizeof(err))) != 0) {
			if (rc < 0) {
				fprintf(stderr, "iofs: %s\n", err);
				return -1;
			}
		} else if (used + strlen(tok) + 2 < sizeof(o->fuse_opts)) {
			snprintf(o->fuse_opts + used,
				 sizeof(o->fuse_opts) - used, "%s%s",
				 used ? "," : "", tok);
		} else {
			fprintf(stderr, "iofs: too many -o options\n");
			return -1;
		}
	}
	return 0;
}

enum { OPT_LISTEN = 256, OPT_OUTPUT_DIR, OPT_PMIX };

/* Returns -1 to exit with status 2 (usage), 1 to exit 0 (help), 0 to run. */
static int parse_args(struct options *o, int argc, char **argv)
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

	while ((c = getopt_long(argc, argv, "+fdo:hV", longopts, NULL)) != -1) {
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
			usage(stderr);
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


/* After shutdown, serve the FLUSH/RELEASE of closing programs (a reader
 * just answered with EOF closes its file) before unmounting. */
static void on_grace(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;

	(void)fd;
	(void)what;
	if (fs_open_count(d->fs) == 0 || iofs_mono_ms() >= d->grace_deadline_ms)
		event_base_loopexit(d->base, NULL);
}

static void daemon_stop(struct daemon *d, bool session_gone)
{
	struct timeval tv = {.tv_sec = 0, .tv_usec = 20000};

	if (!d->stopping) {
		d->stopping = true;
		net_server_stop_listening(d->net);
		fs_shutdown(
		    d->fs); /* parked reads EOF, writes what was taken */
		router_shutdown(d->r); /* streams complete, XOFFs released */
		d->grace_deadline_ms = iofs_mono_ms() + GRACE_MS;
	}
	if (session_gone || fs_open_count(d->fs) == 0) {
		event_base_loopexit(d->base, NULL);
		return;
	}
	if (!d->grace_ev) {
		d->grace_ev = event_new(d->base, -1, EV_PERSIST, on_grace, d);
		if (!d->grace_ev || event_add(d->grace_ev, &tv) < 0)
			event_base_loopexit(d->base, NULL);
	}
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct daemon *d = arg;

	(void)what;
	iofs_logf(d->log, LOG_NOTICE, NULL, "%s: unmounting",
		  strsignal((int)sig));
	daemon_stop(d, false);
}

static void on_fs_exit(void *ctx)
{
	daemon_stop(ctx, true);
}

/*
 * Before the mount: --output-dir (so it sees every byte) and the PMIx
 * source.  PMIx_tool_init blocks the loop, and looking for a server it
 * walks the tmpdir tree (stat of every entry): a live mount under it
 * would wait for this very thread, forever.
 */
static int start_pmix(struct daemon *d, char *err, size_t errlen)
{
	struct options *o = d->opt;
	int rc;

	if (o->output_dir) {
		rc = output_dir_new(d->r, d->log, o->output_dir, err, errlen,
				    &d->od);
		if (rc < 0)
			return rc;
	}
	if (o->pmix) {
#if IOFS_FS_WITH_PMIX
		rc = pmix_source_new(d->base, d->r, d->log, o->pmix, err,
				     errlen, &d->pmix);
		if (rc < 0)
			return rc;
#else
		snprintf(
		    err, errlen,
		    "--pmix: this iofs was built without PMIx support: "
		    "install libpmix-dev and reconfigure with -Dpmix=enabled");
		return -ENOTSUP;
#endif
	}
	return 0;
}

/* After the kernel's INIT: the listeners. */
static int start_listeners(struct daemon *d, char *err, size_t errlen)
{
	struct options *o = d->opt;
	struct net_server_config nc = o->net;

	nc.allow_remote_tcp = o->allow_remote_tcp;
	nc.log = d->log;
	int rc;

	rc = net_server_new(d->base, d->r, &nc, &d->net);
	if (rc < 0) {
		snprintf(err, errlen, "cannot start listeners: %s",
			 strerror(-rc));
		return rc;
	}
	for (size_t i = 0; i < (o->nlisten ? o->nlisten : 1); i++) {
		rc = net_server_listen(d->net, o->nlisten ? o->listen[i] : NULL,
				       err, errlen);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int add_signals(struct daemon *d)
{
	static const int sigs[3] = {SIGTERM, SIGINT, SIGHUP};

	signal(SIGPIPE, SIG_IGN);
	for (size_t i = 0; i < 3; i++) {
		d->sigs[i] = evsignal_new(d->base, sigs[i], on_signal, d);
		if (!d->sigs[i] || event_add(d->sigs[i], NULL) < 0)
			return -ENOMEM;
	}
	return 0;
}

static void release_daemon(struct daemon *d)
{
	fs_unmount(d->fs);
#if IOFS_FS_WITH_PMIX
	pmix_source_free(d->pmix);
	d->pmix = NULL;
#endif
	net_server_free(d->net);
	d->net = NULL;
	output_dir_free(d->od);
	d->od = NULL;
	fs_free(d->fs);
	d->fs = NULL;
	router_free(d->r);
	d->r = NULL;
	spool_free(d->spool); /* after the router: it closes its files */
	d->spool = NULL;
	if (d->grace_ev)
		event_free(d->grace_ev);
	d->grace_ev = NULL;
	for (size_t i = 0; i < 3; i++) {
		if (d->sigs[i])
			event_free(d->sigs[i]);
		d->sigs[i] = NULL;
	}
	if (d->base)
		event_base_free(d->base);
	d->base = NULL;
}

/* Run the loop until the kernel's INIT is answered, so "mounted" means
 * usable (a bad option such as a max_read mismatch fails here). */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
}

static int wait_init(struct daemon *d, char *err, size_t errlen)
{
	uint64_t deadline = iofs_mono_ms() + INIT_TIMEOUT_MS;
	struct timeval tv = {.tv_sec = 0, .tv_usec = 100000};
	/* a private wake-up: event_base_loopexit() would outlive this loop */
	struct event *tick = event_new(d->base, -1, EV_PERSIST, on_tick, NULL);

	if (!tick || event_add(tick, &tv) < 0) {
		if (tick)
			event_free(tick);
		snprintf(err, errlen, "cannot create a timer");
		return -ENOMEM;
	}
	while (fs_ready(d->fs) == 0 && !d->stopping && iofs_mono_ms() < deadline)
		event_base_loop(d->base, EVLOOP_ONCE);
	event_free(tick);
	if (fs_ready(d->fs) == 1)
		return 0;
	snprintf(err, errlen,
		 "the kernel did not initialise the mount (see the message "
		 "above): check the -o options");
	return -EIO;
}

/* Background: the parent waits for one status byte, then exits with it. */
static int daemonize(int *ready_fd)
{
	int pfd[2];
	pid_t pid;
	unsigned char status = 1;

	if (pipe2(pfd, O_CLOEXEC) < 0) {
		perror("iofs: pipe");
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		perror("iofs: fork");
		return -1;
	}
	if (pid > 0) {
		ssize_t n;

		close(pfd[1]);
		do
			n = read(pfd[0], &status, 1);
		while (n < 0 && errno == EINTR);
		if (n != 1) {
			waitpid(pid, NULL, 0);
			status = 1;
		}
		_exit(status);
	}
	close(pfd[0]);
	setsid();
	/* Hold no directory busy (every path was made absolute). */
	if (chdir("/") < 0)
		perror("iofs: chdir /");
	*ready_fd = pfd[1];
	return 0;
}

static void report_ready(struct daemon *d, int *ready_fd, unsigned char st)
{
	int nul;

	if (*ready_fd < 0)
		return;
	if (st == 0) {
		/* Detach from the terminal before the parent returns. */
		nul = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (nul >= 0) {
			dup2(nul, STDIN_FILENO);
			dup2(nul, STDOUT_FILENO);
			dup2(nul, STDERR_FILENO);
			if (nul > STDERR_FILENO)
				close(nul);
		}
		iofs_log_set_echo(d->log, -1); /* the terminal is gone */
	}
	if (write(*ready_fd, &st, 1) != 1)
		st = 1;
	close(*ready_fd);
	*ready_fd = -1;
}

/* The spool and its caps into @cfg (none with -o nospool, or when the
 * default one cannot be set up: a warning).  0 or -1 with @err set. */
static int start_spool(struct daemon *d, struct router_config *cfg,
		       char *err, size_t errlen)
{
	const struct spool_options *so = &d->opt->spool;

	if (!so->dir) {
		if (d->opt->spool_default)
			iofs_logf(d->log, LOG_WARNING, NULL,
				  "no default spool for %s: running without "
				  "one (-o spool=DIR to name one)",
				  d->opt->mountpoint_abs);
		return 0;
	}
	if (spool_new(d->log, so->dir, err, errlen, &d->spool) < 0) {
		if (!d->opt->spool_default)
			return -1;
		iofs_logf(d->log, LOG_WARNING, NULL,
			  "%s: running without a spool (-o spool=DIR to name "
			  "one, -o nospool to say so)",
			  err);
		err[0] = '\0';
		return 0;
	}
	if (so->keep_cache)
		spool_keep_cache(d->spool);
	cfg->store = spool_store_ops();
	cfg->store_ctx = d->spool;
	cfg->store_max_stream = so->set_stream ? so->max_stream : 0;
	cfg->store_max_job = so->set_job ? so->max_job : SPOOL_MAX_JOB_DEFAULT;
	cfg->store_max = so->set_total ? so->max : spool_default_max(so->dir);
	iofs_logf(d->log, LOG_INFO, NULL,
		  "spool %s: caps per stream %" PRIu64 ", per job %" PRIu64
		  ", in all %" PRIu64 " bytes (0: none)",
		  so->dir, cfg->store_max_stream, cfg->store_max_job,
		  cfg->store_max);
	return 0;
}

/* A socket or --output-dir inside the mountpoint would be served by this
 * daemon to itself: its only thread would wait for itself, forever. */
static int check_paths(const struct options *o)
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

/* The mount point, --output-dir and -o spool= made absolute and checked.
 * 0, or -1 after saying why on stderr. */
static int resolve_paths(struct options *o)
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
	    abs_path(&o->spool.dir, o->spool_abs, "-o spool=") < 0)
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

int main(int argc, char **argv)
{
	struct options o = {.log_level = -1,
			    .linger_lost_s = 3600,
			    .poll_us = LOOP_POLL_DEFAULT_US,
			    .stdin_uid_max = 64u << 20};
	struct daemon d = {.opt = &o};
	struct router_config rc_cfg = {0};
	char err[1024] = "";
	int ready_fd = -1, rc;

	rc = parse_args(&o, argc, argv);
	if (rc)
		return rc > 0 ? 0 : 2;
	if (resolve_paths(&o) < 0)
		return 1;
	if (iofs_log_new("iofs", &d.log) < 0) {
		fprintf(stderr, "iofs: out of memory\n");
		return 1;
	}
	if (o.log_level >= 0)
		iofs_log_set_level(d.log, o.log_level);
	if (!o.foreground) {
		if (daemonize(&ready_fd) < 0) {
			iofs_log_free(d.log);
			return 1;
		}
		/* syslog from now on; until the parent returns, warnings and
		 * errors (why the start fails) also go to its terminal */
		iofs_log_to_syslog(d.log);
		iofs_log_set_echo(d.log, LOG_WARNING);
	}

	evthread_use_pthreads(); /* the router's blocking deliver needs it */
	d.base = event_base_new();
	if (!d.base) {
		snprintf(err, sizeof(err), "cannot create the event loop");
		goto out_fail;
	}
	rc_cfg.window = o.window;
	rc_cfg.log = d.log;
	if (start_spool(&d, &rc_cfg, err, sizeof(err)) < 0)
		goto out_fail;
	rc = router_new(d.base, &rc_cfg, &d.r);
	if (rc != 0) {
		snprintf(err, sizeof(err), "cannot create the router: %s",
			 router_strerror(rc));
		goto out_fail;
	}
	if (d.spool)
		/* an earlier life's jobs; its running ranks wait for their
		 * forwarders to resume (-o resume_window) */
		spool_restore(d.spool, d.r,
			      !o.net.resume_window_set ||
				  o.net.resume_window_s > 0);
	{
		struct fs_config fc = {
		    .mountpoint = o.mountpoint_abs,
		    .fuse_opts = o.fuse_opts,
		    .debug = o.debug,
		    .linger_s = o.linger_s,
		    .linger_lost_s = o.linger_lost_s,
		    .stdin_uid_max = o.stdin_uid_max,
		    .max_read = o.max_read,
		    .on_exit = on_fs_exit,
		    .on_exit_ctx = &d,
		    .log = d.log,
		};

		if (fs_new(d.base, d.r, &fc, err, sizeof(err), &d.fs) < 0)
			goto out_fail;
	}
	if (add_signals(&d) < 0) {
		snprintf(err, sizeof(err), "cannot install signal handlers");
		goto out_fail;
	}
	if (start_pmix(&d, err, sizeof(err)) < 0)
		goto out_fail;
	if (fs_mount(d.fs, err, sizeof(err)) < 0)
		goto out_fail;
	if (wait_init(&d, err, sizeof(err)) < 0)
		goto out_fail;
	if (start_listeners(&d, err, sizeof(err)) < 0)
		goto out_fail;
	iofs_logf(d.log, LOG_INFO, NULL, "mounted %s", o.mountpoint_abs);
	report_ready(&d, &ready_fd, 0);

	struct loop_poll lp;
	loop_poll_init(&lp, o.poll_us, loop_cpus());
	if (loop_run(d.base, fs_activity(d.fs), &lp) < 0)
		iofs_logf(d.log, LOG_ERR, NULL, "event loop failed");

	release_daemon(&d);
	iofs_log_free(d.log);
	return 0;

out_fail:
	iofs_logf(d.log, LOG_ERR, NULL, "%s", err); /* the terminal too */
	release_daemon(&d);
	report_ready(&d, &ready_fd, 1);
	iofs_log_free(d.log);
	return 1;
}
