/* SPDX-License-Identifier: MIT */
/*
 * iofs-run internals: run.c (options, environment, main loop, exit),
 * run_child.c (children, pipes, stdin queues), run_link.c (the connection
 * to the daemon: HELLO, frames, ACK accounting, fallback), run_env.c (rank,
 * size and job name from the launcher's environment).
 */
#ifndef IOFS_NET_RUN_I_H
#define IOFS_NET_RUN_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "log/log.h"
#include "net/framer.h"
#include "net/proto.h"
#include "router/router.h"

struct event;
struct event_base;
struct bufferevent;
struct evbuffer;

#define RUN_READ_CHUNK		(128u << 10) /* one read() of a child's pipe */
#define RUN_CREDIT_HIGH		(1u << 20) /* unacknowledged bytes: stop reading */
#define RUN_CREDIT_LOW		(512u << 10) /* ... resume */
#define RUN_STDIN_HIGH		(64u << 10) /* queued stdin: send XOFF(stdin) */
#define RUN_STDIN_LOW		(16u << 10) /* ... send XON(stdin) */
#define RUN_SOCK_CHUNK		(256u << 10) /* one readv() of the socket */
#define RUN_SOCK_BURST		(2u << 20)   /* per wake-up at most */
#define RUN_CONNECT_TIMEOUT_MS	5000
#define RUN_FINAL_ACK_TIMEOUT_S 10

/* Why an output pipe is not being read (bitmask). */
enum {
	RUN_SUSP_XOFF = 1u << 0,   /* the daemon sent XOFF for it */
	RUN_SUSP_CREDIT = 1u << 1, /* too much output not yet ACKed */
};

struct child;

struct run_chan {
	struct child *ch;
	uint32_t channel; /* ROUTER_CH_STDOUT / STDERR */
	int fd;		  /* our read end, -1 once closed (or inherited) */
	struct event *ev;
	unsigned susp; /* RUN_SUSP_* */
	bool armed;    /* ev is added */
};

struct child {
	struct run *run;
	uint32_t rank;
	pid_t pid;
	bool reaped;
	int wstatus;
	bool exit_sent;
	struct run_chan out, err;
	int in_fd; /* our write end of its stdin, -1 closed */
	struct event *in_ev;
	struct evbuffer *in_q; /* owned: STDIN bytes not yet written */
	bool in_eof;	       /* close once in_q is written */
	bool in_xoff;	       /* we sent XOFF(stdin) */
	uint64_t in_discarded; /* stdin bytes dropped (child gone) */
	uint64_t in_xoffs, in_xons;
	uint64_t in_recv;  /* STDIN bytes received for this rank */
	uint64_t in_acked; /* in_recv - queued, as last sent in STDIN_ACK */
};

/* A DATA frame sent but not acknowledged yet (replayed on fallback). */
struct unacked {
	struct unacked *next;
	uint32_t rank, channel;
	size_t len;
	uint8_t bytes[];
};

struct run {
	struct event_base *base;
	/* options */
	const char *addr;
	const char *munge_socket; /* --munge-socket, else $MUNGE_SOCKET */
	char nspace[ROUTER_NSPACE_MAX + 1];
	uint32_t rank_base, count, size;
	router_directives_t dirs;
	bool strict;
	unsigned verbose; /* -v count: 0 warnings, 1 info, 2 debug */
	iofs_log_t *log;  /* owned: stderr, "iofs-run: " */
	char **argv;
	/* children */
	struct child *kids; /* count entries, owned */
	uint32_t exited;
	int exit_code; /* first non-zero, else 0 */
	bool have_code;
	/* link */
	int link_fd;		 /* socket before the bufferevent takes it */
	struct bufferevent *bev; /* output only, owns the fd; NULL if down */
	struct event *rev;	 /* our read event on the socket */
	bool linked;		 /* HELLO accepted, connection alive */
	bool warned;		 /* fallback warning printed */
	bool failed_strict;	 /* --strict and the link failed */
	struct framer fr; /* decoder state, input buffer (owned), dispatch */
	uint64_t sent_bytes, acked_bytes;
	uint32_t exits_sent, acked_exits;
	struct unacked *uq_head, *uq_tail; /* owned */
	size_t uq_bytes;
	uint64_t xoff_rx, xon_rx;
	/* finish */
	bool finishing;
	struct event *final_timer;
	struct event *sigs[4];
	uint8_t *scratch;	   /* RUN_READ_CHUNK bytes, owned */
	unsigned long nofile_soft; /* RLIMIT_NOFILE soft limit at start */
	bool nofile_raised;
};

/* One line on our stderr through the logger (levels: iofs-run(1) -v). */
void run_log(struct run *r, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* run_link.c */
/* Connect and exchange HELLO/WELCOME synchronously (bounded).  0 = linked;
 * otherwise the link is down and the caller falls back (warned). */
int link_open(struct run *r);
/* Wrap the socket in a bufferevent once the children exist. */
int link_start(struct run *r);
void link_send_rank_start(struct run *r, struct child *ch);
void link_send_data(struct run *r, struct child *ch, uint32_t channel,
		    const uint8_t *buf, size_t len);
void link_send_complete(struct run *r, struct child *ch, uint32_t channel);
void link_send_flow(struct run *r, struct child *ch, bool xoff);
/* STDIN_ACK: @done stdin bytes of @ch left its queue (written or dropped). */
void link_send_stdin_ack(struct run *r, struct child *ch, uint64_t done);
void link_send_exit(struct run *r, struct child *ch);
/* The link failed: warn once, replay unacked output locally. */
void link_down(struct run *r, const char *why);
void link_close(struct run *r);

/* run_child.c */
int child_spawn(struct run *r, struct child *ch);
void chan_update(struct run_chan *c); /* (re)arm per its suspend bits */
void child_stdin_push(struct child *ch, const uint8_t *buf, size_t len);
void child_stdin_eof(struct child *ch);
/* Reap children (SIGCHLD). */
void children_reap(struct run *r);
/* Called on EOF/exit events: send COMPLETE/EXIT when a child is done. */
void child_check_done(struct child *ch);
void children_free(struct run *r);
/* Write @len bytes to our own fd 1/2 (fallback). */
void local_write(uint32_t channel, const uint8_t *buf, size_t len);

/* run.c */
void run_check_finish(struct run *r);

/* run_env.c: what the launcher that started us says (innermost wins). */
struct run_env {
	const char *(*get)(const char *name, void *arg); /* getenv-like */
	void *arg;
};
struct run_launch {
	const char *launcher; /* "slurm", "flux", "openmpi", "pmix", "pmi" */
	bool have_rank, have_size;
	uint32_t rank, size;
	char nspace[ROUTER_NSPACE_MAX + 1]; /* "" if the launcher names none */
};
void run_env_launch(const struct run_env *e, struct run_launch *l);
/* Decimal 0..ROUTER_RANK_MAX, nothing else: 0, else -1. */
int run_parse_u32(const char *s, uint32_t *out);

#endif /* IOFS_NET_RUN_I_H */
