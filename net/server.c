/* SPDX-License-Identifier: MIT */
/*
 * The daemon's listeners: Unix and TCP sockets, accept, server lifecycle.
 * Per-connection protocol handling lives in conn.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "net/auth.h"
#include "net/net_i.h"
#include "net/server_i.h"

void srv_log(net_server_t *s, int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	iofs_vlogf(s->cfg.log, level, "net", fmt, ap);
	va_end(ap);
}

/* Raise RLIMIT_NOFILE to its hard limit; then the hand-over's descriptor
 * bounds (conn_admit_pipes()): half of it for all users, a quarter per
 * user unless -o max_pipes_uid says. */
static void raise_nofile(net_server_t *s)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		rl.rlim_cur = rl.rlim_max = 1024;
	s->pipes_max = rl.rlim_max / 2;
	if (!s->cfg.limits.pipes_uid)
		s->cfg.limits.pipes_uid =
		    (uint32_t)(rl.rlim_max / 4 > UINT32_MAX ? UINT32_MAX
							    : rl.rlim_max / 4);
	if (rl.rlim_cur >= rl.rlim_max)
		return;
	rlim_t old = rl.rlim_cur;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
		srv_log(s, LOG_WARNING, "cannot raise RLIMIT_NOFILE: %s",
			strerror(errno));
		s->pipes_max = old / 2;
	} else
		srv_log(s, LOG_DEBUG, "RLIMIT_NOFILE %llu -> %llu",
			(unsigned long long)old,
			(unsigned long long)rl.rlim_max);
}

int net_server_new(struct event_base *base, router_t *r,
		   const struct net_server_config *cfg, net_server_t **out)
{
	net_server_t *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->base = base;
	s->router = r;
	if (cfg)
		s->cfg = *cfg;
	net_limits_fill(&s->cfg.limits);
	raise_nofile(s);
	if (s->cfg.auth == NET_AUTH_NONE)
		srv_log(s, LOG_WARNING,
			"*** -o auth=none: TCP forwarders are NOT "
			"authenticated; anyone who reaches a TCP listener can "
			"run jobs as any uid and read their stdin ***");
	if (conn_resume_arm_restored(s) < 0) {
		free(s);
		return -ENOMEM;
	}
	*out = s;
	return 0;
}

static void accept_cb(struct evconnlistener *evl, evutil_socket_t fd,
		      struct sockaddr *sa, int salen, void *arg)
{
	struct listener *l = arg;
	net_server_t *s = l->srv;
	char who[80];

	if (!l->is_unix && !s->cfg.allow_remote_tcp &&
	    !net_sockaddr_loopback(sa)) {
		net_sockaddr_text(sa, who, sizeof(who));
		srv_log(s, LOG_WARNING,
			"refused TCP connection from %s on %s: not loopback "
			"(start iofs with -o allow_remote to accept remote "
			"forwarders; they then prove their uid with MUNGE)",
			who, l->text);
		close(fd);
		return;
	}
	l->pause_ms = 0; /* accepting works again: next pause starts small */
	conn_new(s, fd, sa, salen, l->is_unix); /* owns fd, even on failure */
}

static void accept_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct listener *l = arg;

	evconnlistener_enable(l->evl);
}

static bool accept_resource_error(int err)
{
	return err == EMFILE || err == ENFILE || err == ENOBUFS ||
	       err == ENOMEM;
}

/*
 * Out of descriptors (or memory): the pending connection stays in the
 * kernel's backlog and every retry fails at once, so retrying immediately
 * spins.  Pause this listener instead, 100 ms doubling to 1 s, and log
 * once per pause with the number of failures it covers.  The first
 * successful accept resets the pause.  Other errors (ECONNABORTED, ...)
 * concern one connection: log and carry on.
 */
static void accept_error_cb(struct evconnlistener *evl, void *arg)
{
	struct listener *l = arg;
	int err = EVUTIL_SOCKET_ERROR();

	l->accept_errors++;
	l->accept_errors_total++;
	if (!accept_resource_error(err) || !l->resume) {
		srv_log(l->srv, LOG_ERR, "accept on %s: %s", l->text,
			strerror(err));
		return;
	}
	l->pause_ms = l->pause_ms ? l->pause_ms * 2 : ACCEPT_PAUSE_MIN_MS;
	if (l->pause_ms > ACCEPT_PAUSE_MAX_MS)
		l->pause_ms = ACCEPT_PAUSE_MAX_MS;
	srv_log(l->srv, LOG_ERR,
		"accept on %s: %s (%llu failures since the last report, %llu "
		"in all): not accepting for %u ms",
		l->text, strerror(err), (unsigned long long)l->accept_errors,
		(unsigned long long)l->accept_errors_total, l->pause_ms);
	l->accept_errors = 0;
	evconnlistener_disable(evl);
	struct timeval tv = {l->pause_ms / 1000, (l->pause_ms % 1000) * 1000};
	evtimer_add(l->resume, &tv);
}

/* Is someone answering on the Unix socket @path? */
static bool unix_alive(const struct net_addr *a)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool alive;

	if (fd < 0)
		return false;
	alive = connect(fd, (const struct sockaddr *)&a->ss, a->len) == 0;
	close(fd);
	return alive;
}

/*
 * The directory the socket goes in: another user who may rename entries in
 * it (writable by group or others, no sticky bit) could swap our socket for
 * their own.  0, or -EPERM with a message.
 */
static int unix_dir_safe(const char *path, char *err, size_t errlen)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	const char *slash = strrchr(path, '/');
	struct stat st;

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (stat(dir, &st) != 0)
		return 0; /* bind() reports it */
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
		snprintf(err, errlen,
			 "cannot listen on unix:%s: directory %s (mode %04o) "
			 "is writable by other users without the sticky bit, "
			 "so they could replace the socket: use a directory "
			 "only the daemon's user can write (e.g. %s) or one "
			 "with the sticky bit (like /tmp)",
			 path, dir, (unsigned)(st.st_mode & 07777),
			 NET_SYSTEM_DIR);
		return -EPERM;
	}
	return 0;
}

/* bind() creates the socket file 0666 (any local user may run a job;
 * SO_PEERCRED says who they are) by the umask: a path is never chmod()ed,
 * since another user could have swapped it for a link by then. */
static int bind_unix(int fd, const struct net_addr *a)
{
	mode_t old = umask(0111);
	int rc = bind(fd, (const struct sockaddr *)&a->ss, a->len);
	int e = errno;

	umask(old);
	errno = e;
	return rc;
}

static int open_unix(const struct net_addr *a, const char *path, char *err,
		     size_t errlen)
{
	struct stat st;
	int e;

	if (strcmp(path, NET_SYSTEM_SOCKET) == 0 && geteuid() == 0 &&
	    mkdir(NET_SYSTEM_DIR, 0755) != 0 && errno != EEXIST) {
		e = errno;
		goto fail_report;
	}
	e = unix_dir_safe(path, err, errlen);
	if (e < 0)
		return e;
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen,
				 "%s exists and is not a socket: remove it or "
				 "choose another --listen path",
				 path);
			return -EEXIST;
		}
		if (unix_alive(a)) {
			snprintf(
			    err, errlen,
			    "address in use: another iofs is listening on "
			    "%s (stop it, or choose another --listen path)",
			    path);
			return -EADDRINUSE;
		}
		unlink(path); /* stale socket of a dead daemon */
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		goto fail_errno;
	if (bind_unix(fd, a) != 0)
		goto fail_close;
	if (listen(fd, 512) != 0)
		goto fail_unlink;
	return fd;

fail_unlink:
	e = errno;
	unlink(path);
	close(fd);
	goto fail_report;
fail_close:
	e = errno;
	close(fd);
	goto fail_report;
fail_errno:
	e = errno;
fail_report:
	snprintf(err, errlen, "cannot listen on unix:%s: %s", path,
		 strerror(e));
	return -e;
}

static int open_tcp(const struct net_addr *a, char *err, size_t errlen)
{
	int one = 1;
	int fd =
	    socket(a->family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		goto fail_errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)&a->ss, a->len) != 0) {
		int e = errno;
		close(fd);
		if (e == EADDRINUSE) {
			snprintf(err, errlen,
				 "address in use: something (another iofs?) is "
				 "listening on %s",
				 a->text);
			return -e;
		}
		errno = e;
		goto fail_errno;
	}
	if (listen(fd, 512) != 0) {
		int e = errno;
		close(fd);
		errno = e;
		goto fail_errno;
	}
	return fd;
fail_errno:
	snprintf(err, errlen, "cannot listen on %s: %s%s", a->text,
		 strerror(errno),
		 errno == EADDRNOTAVAIL
		     ? " (HOST must be an address of this machine, e.g. "
		       "127.0.0.1, or 0.0.0.0 for all; see iofs(8))"
		     : "");
	return -errno;
}

int net_server_listen(net_server_t *s, const char *addr, char *err,
		      size_t errlen)
{
	struct net_addr a;
	char dummy[8];
	int rc, fd;

	if (!err || !errlen) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	if (!addr)
		addr = net_default_addr();
	rc = net_addr_parse(addr, &a, err, errlen);
	if (rc < 0)
		return rc;

	struct listener *l = calloc(1, sizeof(*l));
	if (!l) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	l->srv = s;
	l->is_unix = a.family == AF_UNIX;
	snprintf(l->text, sizeof(l->text), "%s", addr);
	if (l->is_unix) {
		const char *path = ((struct sockaddr_un *)&a.ss)->sun_path;
		fd = open_unix(&a, path, err, errlen);
		if (fd >= 0)
			snprintf(l->path, sizeof(l->path), "%s", path);
	} else {
		fd = open_tcp(&a, err, errlen);
	}
	if (fd < 0) {
		free(l);
		return fd;
	}
	l->evl = evconnlistener_new(
	    s->base, accept_cb, l,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0 /* listen() done: keep its backlog */,
	    fd);
	if (!l->evl) {
		close(fd);
		if (l->path[0])
			unlink(l->path);
		free(l);
		snprintf(err, errlen, "cannot create a listener for %s", addr);
		return -ENOMEM;
	}
	evconnlistener_set_error_cb(l->evl, accept_error_cb);
	/* Without the timer a resource error is only logged (no back-off). */
	l->resume = evtimer_new(s->base, accept_resume_cb, l);
	l->next = s->listeners;
	s->listeners = l;
	srv_log(s, l->is_unix || s->cfg.auth == NET_AUTH_MUNGE ? LOG_INFO
								 : LOG_WARNING,
		"listening on %s%s%s", addr,
		!l->is_unix && !s->cfg.allow_remote_tcp
		    ? " (loopback peers only)"
		    : "",
		l->is_unix ? ""
		: s->cfg.auth == NET_AUTH_MUNGE
		    ? " (MUNGE credentials required)"
		    : " (UNAUTHENTICATED: -o auth=none)");
	return 0;
}

void net_server_stop_listening(net_server_t *s)
{
	if (!s)
		return;
	while (s->listeners) {
		struct listener *l = s->listeners;
		s->listeners = l->next;
		evconnlistener_free(l->evl);
		if (l->resume)
			event_free(l->resume);
		if (l->path[0])
			unlink(l->path);
		free(l);
	}
}

int net_addr_check(const char *addr, char *err, size_t errlen)
{
	struct net_addr a;

	return net_addr_parse(addr, &a, err, errlen) < 0 ? -EINVAL : 0;
}

void net_server_quiesce(net_server_t *s)
{
	if (!s)
		return;
	net_server_stop_listening(s);
	for (struct conn *c = s->conns; c; c = c->next) {
		c->susp |= CONN_SUSP_STOPPING;
		conn_reading(c, false);
		conn_pipe_update(c);
	}
}

void net_server_free(net_server_t *s)
{
	if (!s)
		return;
	net_server_stop_listening(s);
	while (s->conns)
		conn_destroy(s->conns);
	conn_admit_report(s);
	if (s->restored_timer)
		event_free(s->restored_timer);
	strmap_release(&s->conns_by_ns);
	uidmap_release(&s->uids);
	auth_worker_free(s->auth);
	free(s->pipe_buf);
	free(s);
}
