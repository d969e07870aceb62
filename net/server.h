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

#include "router/router.h"

struct event_base;
typedef struct net_server net_server_t;

struct net_server_config {
	bool allow_remote_tcp; /* accept TCP peers not on loopback */
	bool debug;	       /* log every frame */
	/* Optional log sink (syslog LOG_* level); NULL = stderr.  Called on
	 * the loop thread; @msg is borrowed for the call. */
	void (*log)(void *ctx, int level, const char *msg);
	void *log_ctx;
};

/* Returns 0 or -errno.  *out owned by the caller: net_server_free(). */
int net_server_new(struct event_base *base, router_t *r,
		   const struct net_server_config *cfg, net_server_t **out);

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

/* Close every connection: their running ranks become LOST, their latches are
 * released by the router; unlink Unix socket files we created.  NULL-safe.
 * Call it BEFORE router_free(): it still calls into the router.  Deliveries
 * still pending in the router are orphaned and freed by their callbacks. */
void net_server_free(net_server_t *s);

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
