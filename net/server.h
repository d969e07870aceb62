/* SPDX-License-Identifier: MIT */
/*
 * iofs daemon's listeners: accepts forwarders (iofs-run) on Unix and TCP
 * sockets, speaks the wire protocol (docs/protocol.md), registers their
 * ranks in the router, turns DATA frames into non-blocking deliveries and
 * the router's latches into XOFF/XON frames.
 *
 * Runs on the daemon's single libevent loop; every call on that thread.
 * The process must ignore SIGPIPE (a forwarder may vanish mid-write).
 */
#ifndef IOFS_NET_SERVER_H
#define IOFS_NET_SERVER_H

#include <stdbool.h>

#include "log/log.h"
#include "router/router.h"

struct event_base;
typedef struct net_server net_server_t;

/* How TCP forwarders prove who they are (Unix sockets: SO_PEERCRED). */
enum net_auth {
	NET_AUTH_MUNGE = 0, /* default: a MUNGE credential in the HELLO */
	NET_AUTH_NONE = 1,  /* trust the HELLO's uid hint (-o auth=none) */
};

/*
 * Per-user limits (iofs(8) -o max_*; 0 = the default in parentheses).
 * uid 0 is exempt.  A refusal is logged with the uid and the limit's
 * option name and counted (the counts are logged again at the end).
 */
struct net_limits {
	uint32_t ranks_hello; /* announced ranks per HELLO (65536) */
	uint32_t ranks_job;   /* ranks of one job, all connections (65536) */
	uint32_t ranks_uid;   /* announced ranks, all connections (131072) */
	uint32_t jobs_uid;    /* jobs in the registry (1024) */
	uint32_t conns_uid;   /* open connections (512) */
	uint64_t buf_conn;    /* bytes buffered per connection (16 MiB) */
	uint64_t buf_uid;     /* ... per uid, all connections (64 MiB) */
	/* pipe descriptors a uid's connections may hand over (3 per rank
	 * announced; 0: a quarter of the daemon's RLIMIT_NOFILE) */
	uint32_t pipes_uid;
};

struct net_server_config {
	bool allow_remote_tcp; /* accept TCP peers not on loopback */
	enum net_auth auth;
	const char *munge_socket; /* NULL: $MUNGE_SOCKET, libmunge default */
	struct net_limits limits;
	/* -o resume_window=S: how long the ranks of a broken version 4
	 * connection wait for their forwarder (0: lost at once); unset:
	 * NET_RESUME_WINDOW_S. */
	uint32_t resume_window_s;
	bool resume_window_set;
	/* Borrowed, outlives the server; NULL = stderr.  Messages carry the
	 * module "net"; every frame is logged at LOG_DEBUG. */
	iofs_log_t *log;
};

/*
 * One -o option of the daemon's: "auth=munge|none", "munge_socket=PATH" or
 * "max_<limit>=N" (struct net_limits).  1 = taken into @cfg, 0 = not a
 * net option, -EINVAL = bad value (a message in @err).
 */
int net_config_option(struct net_server_config *cfg, const char *tok, char *err,
		      size_t errlen);

/* Returns 0 or -errno.  *out owned by the caller: net_server_free(). */
int net_server_new(struct event_base *base, router_t *r,
		   const struct net_server_config *cfg, net_server_t **out);

/* Is @addr one net_server_listen() can parse?  0, or -EINVAL with the
 * reason in @err (a usage error: checked before the daemon starts). */
int net_addr_check(const char *addr, char *err, size_t errlen);

/*
 * Start listening on @addr: "unix:/path" or "tcp:HOST:PORT" (NULL = the
 * documented default, net_default_addr()).  May be called several times.
 * Returns 0, or -errno with a message in @err (size @errlen) that says what
 * to do (e.g. "address in use: another iofs is listening on ...").
 */
int net_server_listen(net_server_t *s, const char *addr, char *err,
		      size_t errlen);

/* Stop accepting new connections (existing ones carry on). Idempotent. */
void net_server_stop_listening(net_server_t *s);

/* The daemon is stopping (its router shut down, the loop still serving
 * the mount for a moment): stop listening, and read nothing more from any
 * connection or handed-over pipe, so what they hold stays with the
 * forwarders and in the pipes for the next daemon (RESUME) instead of
 * being refused by the stopped router.  Idempotent, NULL-safe. */
void net_server_quiesce(net_server_t *s);

/* Close every connection: their running ranks become LOST, their latches are
 * released by the router; unlink Unix socket files we created.  NULL-safe.
 * Call it BEFORE router_free(): it still calls into the router.  Deliveries
 * still pending in the router are orphaned and freed by their callbacks. */
void net_server_free(net_server_t *s);

#define NET_RESUME_WINDOW_S 300

/* The system daemon's socket, in a directory the daemon owns (the systemd
 * unit's RuntimeDirectory=iofs), and the older one directly in /run. */
#define NET_SYSTEM_DIR	  "/run/iofs"
#define NET_SYSTEM_SOCKET NET_SYSTEM_DIR "/iofs.sock"
#define NET_LEGACY_SOCKET "/run/iofs.sock"

/* The default address to listen on: $IOFS_ADDR, else for root (effective
 * uid 0) unix:/run/iofs/iofs.sock (never $XDG_RUNTIME_DIR), else
 * unix:$XDG_RUNTIME_DIR/iofs.sock, else unix:/tmp/iofs-<uid>.sock.
 * Returns a static buffer. */
const char *net_default_addr(void);

/* Where a forwarder connects by default: $IOFS_ADDR, else the system
 * daemon's unix:/run/iofs/iofs.sock, else unix:/run/iofs.sock, when one of
 * them exists, else net_default_addr().  Whatever it picks, iofs-run
 * checks the peer's credentials before sending anything (root or itself). */
const char *net_default_connect_addr(void);

#endif /* IOFS_NET_SERVER_H */
