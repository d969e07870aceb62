/* SPDX-License-Identifier: MIT */
/*
 * MUNGE credentials in the HELLO (docs/protocol.md "Authentication",
 * docs/security.md).  The forwarder mints a credential whose payload binds
 * the job name, the HELLO's rank range and a random nonce; the daemon
 * decodes it to the uid/gid MUNGE vouches for, off its event loop.
 *
 * MUNGE itself stops replays (munged's replay cache) and old credentials
 * (its TTL); a forged credential or one from another key fails to decode.
 */
#ifndef IOFS_NET_AUTH_H
#define IOFS_NET_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;

#define AUTH_PAYLOAD_MAX 512
#define AUTH_NONCE_HEX	 32
/* A decode not answered within this is refused (munged hung or gone). */
#define AUTH_TIMEOUT_S 10
/* Decodes waiting for the worker at most; more HELLOs are refused. */
#define AUTH_QUEUE_MAX 256

/* The munge socket: @opt if set, else $MUNGE_SOCKET, else NULL (libmunge's
 * default, /run/munge/munge.socket.2). */
const char *auth_socket(const char *opt);

/* The credential payload (NUL-terminated text) into @buf: "iofs-hello 1\n"
 * "nspace=NS\nranks=BASE+COUNT\nnonce=HEX\n"; @nonce NULL = the prefix
 * up to "nonce=".  Returns its length, or -1 if @cap is too small. */
int auth_payload(char *buf, size_t cap, const char *nspace, uint32_t base,
		 uint32_t count, const char *nonce);

/* Forwarder: mint a credential (blocking: libmunge talks to munged).
 * 0 and *cred (free()) or -1 with a reason in @why. */
int auth_encode(const char *socket, const char *nspace, uint32_t base,
		uint32_t count, char **cred, char *why, size_t whylen);

/* Daemon: decoding on a worker thread; results delivered on the loop. */
typedef struct auth_worker auth_worker_t;
struct auth_req;

struct auth_result {
	bool ok;
	uint32_t uid, gid;
	char msg[256]; /* why not ok: names MUNGE's verdict */
};
/* Called on the loop, never inside auth_submit(). */
typedef void (*auth_done_fn)(void *arg, const struct auth_result *res);

/* evthread_use_pthreads() must have been called.  0 or -errno. */
int auth_worker_new(struct event_base *base, const char *socket,
		    auth_worker_t **out);
/* Cancels what is queued; NULL-safe. */
void auth_worker_free(auth_worker_t *w);
/* Decode @cred and check that its payload is bound to (@nspace, @base,
 * @count).  NULL if the queue is full or out of memory (refuse the HELLO).
 * @done fires exactly once unless auth_cancel() comes first; after
 * AUTH_TIMEOUT_S it fires with a timeout verdict. */
struct auth_req *auth_submit(auth_worker_t *w, const char *cred, size_t len,
			     const char *nspace, uint32_t base, uint32_t count,
			     auth_done_fn done, void *arg);
/* @done will not be called; the request is freed. Idempotent via NULL. */
void auth_cancel(struct auth_req *req);

#endif /* IOFS_NET_AUTH_H */
