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
#include "fs/cli.h"
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

#define GRACE_MS	2000  /* at most this long for open files to close */
#define INIT_TIMEOUT_MS 10000 /* for the kernel INIT after mount */

struct daemon {
	struct daemon_options *opt;
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
		net_server_quiesce(d->net); /* before the router stops */
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
	struct daemon_options *o = d->opt;
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
	struct daemon_options *o = d->opt;
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

/* Everything the daemon holds, on every exit path.  Idempotent.  Returns
 * -EBUSY when the mount could not be removed (logged). */
static int release_daemon(struct daemon *d)
{
	int rc = fs_unmount(d->fs);

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
	return rc;
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

/* Background mode, on the starting terminal before it lets go: silent on
 * success (as mount, sshfs), but not when its messages will go nowhere. */
static void tell_started(void)
{
	if (access("/dev/log", W_OK) != 0)
		fprintf(stderr,
			"iofs: no syslog here (/dev/log: %s): its messages "
			"are lost; run it with -f to see them\n",
			strerror(errno));
}

/* A user's own daemon while the system one runs: iofs-run tries the
 * system socket first (docs/security.md: nothing planted in /tmp can
 * take its place), so this daemon would get no job unless told where.
 * Say what to export, the way ssh-agent does. */
static void tell_address(const struct daemon_options *o)
{
	const char *mine = NULL, *found;

	if (geteuid() == 0)
		return;
	for (size_t i = 0; i < (o->nlisten ? o->nlisten : 1) && !mine; i++) {
		const char *a = o->nlisten ? o->listen[i] : net_default_addr();

		if (!strncmp(a, "unix:", 5))
			mine = a;
	}
	found = net_default_connect_addr(); /* $IOFS_ADDR, if set, is no
					     * system daemon */
	if (!mine || !strcmp(found, mine) ||
	    (strcmp(found, "unix:" NET_SYSTEM_SOCKET) &&
	     strcmp(found, "unix:" NET_LEGACY_SOCKET)))
		return;
	fprintf(stderr,
		"iofs: iofs-run connects to the system daemon (%s) first: "
		"for your jobs to come here, export IOFS_ADDR=%s\n",
		found, mine);
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
	if (so->no_stage)
		spool_no_stage(d->spool);
	cfg->store = spool_store_ops();
	cfg->store_ctx = d->spool;
	cfg->store_max_stream = so->set_stream ? so->max_stream : 0;
	cfg->store_max_job = so->set_job ? so->max_job : SPOOL_MAX_JOB_DEFAULT;
	cfg->store_max = so->set_total ? so->max : spool_default_max(so->dir);
	cfg->store_max_user = spool_max_user(so, cfg->store_max);
	cfg->store_user_exempt = (uint32_t)geteuid(); /* its own jobs */
	iofs_logf(d->log, LOG_INFO, NULL,
		  "spool %s: caps per stream %" PRIu64 ", per job %" PRIu64
		  ", per user %" PRIu64 " (not uid %" PRIu32 "), in all %" PRIu64
		  " bytes (0: none)",
		  so->dir, cfg->store_max_stream, cfg->store_max_job,
		  cfg->store_max_user, cfg->store_user_exempt, cfg->store_max);
	return 0;
}

/* The loop, the spool, the router (with an earlier life's jobs) and the
 * FUSE session, not mounted yet.  0, or -1 with @err said and *@status
 * set for a bad -o (2); release_daemon() undoes what was made. */
static int start_core(struct daemon *d, char *err, size_t errlen,
		      int *status)
{
	const struct daemon_options *o = d->opt;
	struct router_config rc_cfg = {0};
	int rc;

	d->base = event_base_new();
	if (!d->base) {
		snprintf(err, errlen, "cannot create the event loop");
		return -1;
	}
	rc_cfg.window = o->window;
	rc_cfg.log = d->log;
	if (start_spool(d, &rc_cfg, err, errlen) < 0)
		return -1;
	rc = router_new(d->base, &rc_cfg, &d->r);
	if (rc != 0) {
		snprintf(err, errlen, "cannot create the router: %s",
			 router_strerror(rc));
		return -1;
	}
	if (d->spool)
		/* an earlier life's jobs; its running ranks wait for their
		 * forwarders to resume (-o resume_window) */
		spool_restore(d->spool, d->r,
			      !o->net.resume_window_set ||
				  o->net.resume_window_s > 0);
	struct fs_config fc = {
	    .mountpoint = o->mountpoint_abs,
	    .fuse_opts = o->fuse_opts,
	    .debug = o->debug,
	    .linger_s = o->linger_s,
	    .linger_lost_s = o->linger_lost_s,
	    .stdin_uid_max = o->stdin_uid_max,
	    .max_read = o->max_read,
	    .on_exit = on_fs_exit,
	    .on_exit_ctx = d,
	    .log = d->log,
	};

	rc = fs_new(d->base, d->r, &fc, err, errlen, &d->fs);
	if (rc < 0) {
		*status = rc == -EINVAL ? 2 : 1; /* a bad -o: usage */
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct daemon_options o;
	struct daemon d = {.opt = &o};
	char err[1024] = "";
	int ready_fd = -1, rc, status = 1;
	bool spool_made = false;

	cli_defaults(&o);
	rc = cli_parse(&o, argc, argv);
	if (rc)
		return rc > 0 ? 0 : 2;
	if (cli_resolve_paths(&o) < 0)
		return 1;
	for (size_t i = 0; i < o.nlisten; i++) { /* a usage error: now */
		if (net_addr_check(o.listen[i], err, sizeof(err)) < 0) {
			fprintf(stderr, "iofs: --listen: %s\n", err);
			return 2;
		}
	}
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
	/* a start that fails takes back the spool directory it made */
	spool_made = o.spool.dir && access(o.spool.dir, F_OK) != 0;
	if (start_core(&d, err, sizeof(err), &status) < 0)
		goto out_fail;
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
	if (!o.foreground)
		tell_started();
	tell_address(&o);
	report_ready(&d, &ready_fd, 0);

	struct loop_poll lp;
	loop_poll_init(&lp, o.poll_us, loop_cpus());
	if (loop_run(d.base, fs_activity(d.fs), &lp) < 0)
		iofs_logf(d.log, LOG_ERR, NULL, "event loop failed");

	status = release_daemon(&d) < 0 ? 1 : 0;
	iofs_log_free(d.log);
	return status;

out_fail:
	iofs_logf(d.log, LOG_ERR, NULL, "%s", err); /* the terminal too */
	release_daemon(&d);
	if (spool_made && o.spool.dir)
		rmdir(o.spool.dir); /* empty: nothing ran (else it fails) */
	report_ready(&d, &ready_fd, (unsigned char)status);
	iofs_log_free(d.log);
	return status;
}
