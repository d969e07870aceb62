/* SPDX-License-Identifier: MIT */
/*
 * iofs-run: connect to the daemon and greet it, synchronously and within a
 * deadline (HELLO or RESUME, then WELCOME after any HELD frames), before
 * the link goes on the main loop (run_link.c).  Also used to reconnect
 * (run_resume.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log/clock.h"
#include "net/auth.h"
#include "net/framer.h"
#include "net/net_i.h"
#include "net/run_i.h"

/* Does our umask deny the group reading what we create (its 040 bit, as
 * in 077)?  Then the job's files under the mount are ours only
 * (PROTO_HELLO_F_PRIVATE), as the files we would have written ourselves. */
static bool run_private(void)
{
	mode_t m = umask(0);

	umask(m);
	return (m & S_IRGRP) != 0;
}

static int wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - (int64_t)iofs_mono_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p = {.fd = fd, .events = events};
		int n = poll(&p, 1, (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

/*
 * Before anything is sent on a Unix socket: is the daemon at its other end
 * root or ourselves?  Anyone can put a socket at a path in /tmp; a fake
 * daemon would read our output and feed our stdin.  0 or -EPERM with the
 * reason in @why.
 */
static int peer_trusted(struct run_link *l, int fd, char *why, size_t whylen)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) != 0) {
		snprintf(why, whylen,
			 "refusing %s: cannot learn who listens there (%s)",
			 l->o->addr, strerror(errno));
		return -EPERM;
	}
	if (uc.uid == 0 || uc.uid == getuid())
		return 0;
	snprintf(why, whylen,
		 "refusing %s: the process listening there (pid %d) runs as "
		 "uid %u, neither root nor you (uid %u): not an iofs daemon "
		 "you can trust, nothing sent",
		 l->o->addr, (int)uc.pid, (unsigned)uc.uid, (unsigned)getuid());
	return -EPERM;
}

static int connect_to(struct run_link *l, char *why, size_t whylen, int64_t dl)
{
	struct net_addr a;
	char err[256];
	int rc = net_addr_parse(l->o->addr, &a, err, sizeof(err));

	if (rc < 0) {
		snprintf(why, whylen, "%s", err);
		return rc;
	}
	int fd =
	    socket(a.family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		goto fail_errno;
	if (connect(fd, (struct sockaddr *)&a.ss, a.len) != 0) {
		if (errno != EINPROGRESS)
			goto fail_close;
		rc = wait_fd(fd, POLLOUT, dl);
		if (rc < 0) {
			close(fd);
			snprintf(why, whylen, "cannot connect to %s: %s",
				 l->o->addr, strerror(-rc));
			return rc;
		}
		int soerr = 0;
		socklen_t sl = sizeof(soerr);
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
		if (soerr) {
			errno = soerr;
			goto fail_close;
		}
	}
	if (a.family == AF_UNIX &&
	    (rc = peer_trusted(l, fd, why, whylen)) < 0) {
		close(fd);
		return rc;
	}
	net_tcp_tune(fd);
	return fd;

fail_close:
	rc = -errno;
	close(fd);
	snprintf(why, whylen, "cannot connect to %s: %s", l->o->addr,
		 strerror(-rc));
	return rc;
fail_errno:
	rc = -errno;
	snprintf(why, whylen, "cannot connect to %s: %s", l->o->addr,
		 strerror(-rc));
	return rc;
}

static int write_all(int fd, const uint8_t *b, size_t n, int64_t dl)
{
	while (n > 0) {
		ssize_t w = write(fd, b, n);
		if (w > 0) {
			b += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			int rc = wait_fd(fd, POLLOUT, dl);
			if (rc < 0)
				return rc;
			continue;
		}
		return -errno;
	}
	return 0;
}

/* Read one whole frame (bounded) into @buf. */
static int read_frame(struct run_link *l, int fd, uint8_t *buf, size_t cap,
		      struct proto_frame *f, char *why, size_t whylen,
		      int64_t dl)
{
	size_t have = 0;
	char err[256];

	for (;;) {
		size_t need = 0;
		int rc = proto_decode(&l->fr.dec, buf, have, f, &need, err,
				      sizeof(err));
		if (rc == PROTO_OK)
			return (int)need;
		if (rc != PROTO_NEED_MORE) {
			snprintf(why, whylen, "bad reply from %s: %s: %s",
				 l->o->addr, proto_strerror(rc), err);
			return -EPROTO;
		}
		if (need > cap) {
			snprintf(why, whylen, "reply from %s too large",
				 l->o->addr);
			return -EPROTO;
		}
		ssize_t n = read(fd, buf + have, need - have);
		if (n > 0) {
			have += (size_t)n;
			continue;
		}
		if (n == 0) {
			snprintf(why, whylen, "%s closed the connection",
				 l->o->addr);
			return -ECONNRESET;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN) {
			snprintf(why, whylen, "reading from %s: %s", l->o->addr,
				 strerror(errno));
			return -errno;
		}
		rc = wait_fd(fd, POLLIN, dl);
		if (rc < 0) {
			snprintf(why, whylen, "no answer from %s: %s",
				 l->o->addr, strerror(-rc));
			return rc;
		}
	}
}

/* The daemon gave the job another name than the one asked for (a name
 * collision: iofs-run(1), JOB NAMES): say so, and use it from now on. */
static void take_name(struct run_link *l, const struct proto_frame *welcome)
{
	if (!welcome->name_len ||
	    (welcome->name_len == strlen(l->o->nspace) &&
	     !memcmp(welcome->name, l->o->nspace, welcome->name_len)))
		return;
	/* always said: the user looks for the job under the other name (a
	 * squatter may have taken the launcher's, docs/security.md) */
	run_log(l->log, LOG_WARNING,
		l->o->nspace_given
		    ? "job name '%s' is taken (another job, or one still "
		      "open); this run is '%.*s'"
		    : "job name '%s' is taken (another job, or an earlier "
		      "run of this launch); this run is '%.*s'",
		l->o->nspace, (int)welcome->name_len, welcome->name);
	memcpy(l->o->nspace, welcome->name, welcome->name_len);
	l->o->nspace[welcome->name_len] = '\0';
}

/* One HELD frame of a resume answer: remember it for the replay. */
static int take_held(struct run_link *l, const struct proto_frame *f)
{
	struct rlrank *rs = &l->rs[f->rank - l->o->rank_base];

	rs->got_held = true;
	rs->held_state = f->held_state;
	memcpy(rs->held, f->held, sizeof(rs->held));
	return 0;
}

/* COMMAND: the ranks' command line, for the daemon's info files. */
static int send_command(struct run_link *l, int fd, int64_t dl)
{
	uint8_t buf[PROTO_HDR_SIZE + 2 + PROTO_COMMAND_MAX];
	ssize_t n = run_command_frame(l->o->argv, buf, sizeof(buf));

	return n <= 0 ? (int)n : write_all(fd, buf, (size_t)n, dl);
}

/* The daemon's answer to HELLO into @reply (its strings in @buf): WELCOME
 * or ERROR, after the HELD frames of a resume (take_held()).  0, or a
 * negative errno with @why said. */
static int await_reply(struct run_link *l, int fd, bool resume, uint8_t *buf,
		       size_t buflen, struct proto_frame *reply, char *why,
		       size_t whylen, int64_t dl)
{
	int rc;

	for (uint32_t i = 0; l->rs && i < l->o->count; i++)
		l->rs[i].got_held = false;
	for (;;) {
		rc = read_frame(l, fd, buf, buflen, reply, why, whylen, dl);
		if (rc < 0)
			return rc;
		if (reply->type != PROTO_HELD)
			return 0;
		if (!resume || !l->rs) {
			snprintf(why, whylen, "%s sent HELD unasked",
				 l->o->addr);
			return -EPROTO;
		}
		take_held(l, reply);
	}
}

int run_link_greet(struct run_link *l, bool resume, int64_t dl, uint32_t *code,
		   char *why, size_t whylen)
{
	char host[PROTO_HOST_MAX + 1] = "";
	uint8_t buf[PROTO_HEAD_MAX + PROTO_MSG_MAX + 64];

	*code = 0;
	if (run_link_framer_reset(l) < 0) {
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	proto_peer_set_ranks(&l->fr.dec, l->o->rank_base, l->o->count);
	int fd = connect_to(l, why, whylen, dl);
	if (fd < 0)
		return fd;
	gethostname(host, sizeof(host) - 1);
	/* TCP: prove who we are with MUNGE (protocol 3 and 4); a Unix
	 * socket's SO_PEERCRED does that already (protocol 2, any daemon,
	 * when we do not resume). */
	bool tcp = strncmp(l->o->addr, "tcp:", 4) == 0;
	/* Same host: offer the pipes themselves; on a resume only when the
	 * lost link had them (run_resume.c passes them again). */
	bool offer = !tcp && l->o->handover && (!resume || l->handover);
	char *cred = NULL, mwhy[256] = "";
	if (tcp && auth_encode(auth_socket(l->o->munge_socket), l->o->nspace,
			       l->o->rank_base, l->o->count, &cred, mwhy,
			       sizeof(mwhy)) < 0)
		cred = NULL; /* a daemon with -o auth=none does without */
	uint16_t version = l->version ? l->version
			   : l->o->reconnect_s ? PROTO_VERSION
			   : tcp	       ? 3
					       : 2;
	struct proto_frame f = {
	    .type = PROTO_HELLO,
	    .hello = {.version = version,
		      .flags = PROTO_HELLO_F_NAME |
			       (resume ? PROTO_HELLO_F_RESUME : 0) |
			       (offer ? PROTO_HELLO_F_HANDOVER : 0) |
			       (run_private() ? PROTO_HELLO_F_PRIVATE : 0) |
			       (l->o->nspace_given ? 0 : PROTO_HELLO_F_KEEP),
		      .cred = version >= 3 ? cred : NULL,
		      .cred_len = cred && version >= 3 ? strlen(cred) : 0,
		      .rank_base = l->o->rank_base,
		      .rank_count = l->o->count,
		      .job_size = l->o->size,
		      .pid = (uint32_t)getpid(),
		      .uid = (uint32_t)getuid(),
		      .gid = (uint32_t)getgid(),
		      .dirs_set = l->o->dirs.set,
		      .dirs_value = l->o->dirs.value,
		      .nspace = l->o->nspace,
		      .nspace_len = strlen(l->o->nspace),
		      .host = host,
		      .host_len = strlen(host)},
	};
	ssize_t n = proto_encode(&f, buf, sizeof(buf));
	free(cred);
	int rc = n < 0 ? (int)n : write_all(fd, buf, (size_t)n, dl);
	if (rc < 0) {
		snprintf(why, whylen, "sending HELLO to %s: %s", l->o->addr,
			 strerror(-rc));
		goto out_close;
	}
	struct proto_frame reply;
	rc = await_reply(l, fd, resume, buf, sizeof(buf), &reply, why, whylen,
			 dl);
	if (rc < 0)
		goto out_close;
	if (reply.type == PROTO_ERROR) {
		*code = reply.code;
		snprintf(why, whylen, "%s refused the job: %.*s%s%s%s",
			 l->o->addr, (int)reply.msg_len, reply.msg,
			 mwhy[0] ? " (no credential sent: " : "", mwhy,
			 mwhy[0] ? ")" : "");
		rc = -EREMOTEIO;
		goto out_close;
	}
	l->version = version;
	l->handover = offer && (reply.flags & PROTO_WELCOME_F_HANDOVER);
	take_name(l, &reply);
	if ((reply.flags & PROTO_WELCOME_F_COMMAND) &&
	    (rc = send_command(l, fd, dl)) < 0) {
		snprintf(why, whylen, "sending COMMAND to %s: %s", l->o->addr,
			 strerror(-rc));
		goto out_close;
	}
	return fd;

out_close:
	close(fd);
	return rc;
}

int run_link_open(struct run_link *l)
{
	int64_t dl = (int64_t)iofs_mono_ms() + RUN_CONNECT_TIMEOUT_MS;
	char why[PROTO_MSG_MAX + 128];
	uint32_t code;

	l->fd = -1;
	l->rs = calloc(l->o->count, sizeof(*l->rs));
	if (!l->rs) {
		snprintf(why, sizeof(why), "out of memory");
		goto fallback;
	}
	int fd = run_link_greet(l, false, dl, &code, why, sizeof(why));
	if (fd == -EREMOTEIO && code == PROTO_ERR_VERSION &&
	    l->o->reconnect_s) {
		/* A daemon older than protocol 4: no resume with it. */
		run_log(l->log, LOG_INFO, "%s; speaking the older protocol",
			why);
		l->o->reconnect_s = 0;
		fd = run_link_greet(l, false, dl, &code, why, sizeof(why));
	}
	if (fd < 0)
		goto fallback;
	l->fd = fd;
	l->linked = true;
	run_log(l->log, LOG_INFO, "connected to %s: job '%s' ranks %u..%u",
		l->o->addr, l->o->nspace, l->o->rank_base,
		l->o->rank_base + l->o->count - 1);
	if (l->handover)
		run_log(l->log, LOG_INFO,
			"the daemon takes the ranks' pipes (hand-over)");
	return 0;

fallback:
	run_link_fallback(l, why);
	return -ENOTCONN;
}
