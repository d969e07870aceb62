/* SPDX-License-Identifier: MIT */
/*
 * Private helpers shared by the daemon's listeners (server.c) and the
 * forwarder (run*.c): address parsing.
 *
 * The error rule of all of net/ (router.h's, dbus-broker's): a negative
 * -errno is fatal to what it is about and is passed up unchanged; a
 * positive module code (PROTO_NEED_MORE, FRAMER_CLOSED, 1 = "taken" from
 * net_config_option) is an expected outcome.  A function that ends a
 * connection calls conn_fail() (daemon) or run_link_down() (forwarder)
 * first and then returns the negative errno: conn_fail() returns the one
 * that stands for its ERROR code (PROTO_ERR_* -EPROTO, REFUSED_EXISTS
 * -EEXIST, _REMOTE -EPERM, _AUTH -EACCES, _LIMIT -EUSERS, _ROUTER
 * -ENOMEM), the forwarder's frame handlers -EPROTO (the daemon broke the
 * protocol) or -ECONNRESET (the link is down).  Callers test < 0 and never
 * look at the value beyond passing it on.
 */
#ifndef IOFS_NET_NET_I_H
#define IOFS_NET_NET_I_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

/* A parsed "unix:/path" or "tcp:HOST:PORT" address (HOST may be [v6]). */
struct net_addr {
	int family; /* AF_UNIX, AF_INET or AF_INET6 */
	struct sockaddr_storage ss;
	socklen_t len;
	char text[300]; /* as given, for messages */
};

/*
 * Parse and resolve @s (numeric or resolvable TCP hosts).  Returns 0, or
 * -EINVAL / -ENAMETOOLONG / -EHOSTUNREACH with a message in @err.
 */
int net_addr_parse(const char *s, struct net_addr *out, char *err,
		   size_t errlen);

/* True if @sa is a loopback address (127/8, ::1, v4-mapped 127/8). */
bool net_sockaddr_loopback(const struct sockaddr *sa);

/* "127.0.0.1:5000" / "[::1]:5000" into @buf. */
void net_sockaddr_text(const struct sockaddr *sa, char *buf, size_t len);

/*
 * TCP liveness for both ends: TCP_NODELAY, keepalive (idle 5 s, 3 probes
 * 2 s apart) and TCP_USER_TIMEOUT 10 s, so a dead link or peer is noticed
 * in ~10-15 s instead of the kernel's minutes.  No-op on Unix sockets.
 * An idle connection whose peer answers the probes is never dropped.
 */
void net_tcp_tune(int fd);

/* "connection closed by the peer" (@err 0) or the socket error @err as a
 * drop reason for the log; ETIMEDOUT and EHOSTUNREACH & co. (what a
 * keepalive or user timeout reports) say what timed out. */
/* read() gave 0 on @fd: 0 for an orderly close by the peer, else the
 * errno that ended it (SO_ERROR; ENOTCONN: a TCP connection the kernel
 * ended whose error a write took first). */
int net_eof_error(int fd);
/* A write on @fd failed with @err: EPIPE on a TCP socket the kernel has
 * closed (its error taken first by another call) is that closure's
 * reason, as net_eof_error() tells it; any other @err is itself. */
int net_write_error(int fd, int err);
/* Start time of process @pid (/proc/PID/stat field 22, clock ticks since
 * boot), 0 if it is gone, a zombie, or unknown. */
unsigned long long net_proc_start(int pid);
void net_drop_reason(int err, char *buf, size_t len);

#endif /* IOFS_NET_NET_I_H */
