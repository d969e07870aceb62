/* SPDX-License-Identifier: MIT */
/*
 * iofs-run internals: run.c (options, main loop, finish, exit status),
 * run_child.c (children, pipes, stdin queues: struct run_kids),
 * run_link.c (the connection to the daemon: HELLO, frames, ACK accounting,
 * fallback: struct run_link), run_handover.c (RANK_START with the pipes,
 * on a Unix socket), run_env.c (rank, size and job name from the
 * launcher's environment).  The children talk to the link only through
 * struct run_kids_ops; the link talks to them only through run_kids_*().
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
	RUN_SUSP_REPLAY = 1u << 2, /* reconnecting: the replay buffer is full */
	RUN_SUSP_HANDOVER = 1u << 3, /* the daemon reads this pipe itself */
};

#define RUN_REPLAY_DEFAULT	  (4u << 20) /* --replay-buffer */
#define RUN_RECONNECT_DEFAULT_S	  300	     /* --reconnect-timeout */
#define RUN_RECONNECT_MIN_MS	  100	     /* first back-off */
#define RUN_RECONNECT_MAX_MS	  5000	     /* back-off cap */

/* What the command line and the launcher say (run.c fills it in). */
struct run_opts {
	const char *addr;
	const char *munge_socket; /* --munge-socket, else $MUNGE_SOCKET */
	/* the job name; the link renames it when the daemon says so, before
	 * any child is started */
	char nspace[ROUTER_NSPACE_MAX + 1];
	bool nspace_given; /* --nspace: a re-run replaces its ended job */
	uint32_t rank_base, count, size;
	router_directives_t dirs;
	bool strict;
	/* --no-stdin: the ranks' stdin is /dev/null (a batch job's program
	 * that reads stdin ends instead of waiting for a writer) */
	bool no_stdin;
	/* --reconnect-timeout (else $IOFS_RECONNECT_TIMEOUT, else 300 s;
	 * 0: no resume, protocol 2/3 as before) and --replay-buffer */
	uint32_t reconnect_s;
	size_t replay_max;
	unsigned verbose; /* -v count: 0 warnings, 1 info, 2 debug */
	/* On by default (--handover, $IOFS_HANDOVER other than 0); off with
	 * --no-handover, $IOFS_HANDOVER=0 or $IOFS_NO_HANDOVER=1 (the
	 * command line wins, then $IOFS_NO_HANDOVER): on a Unix socket, hand
	 * the ranks' pipes to the daemon (docs/protocol.md, "Pipe
	 * hand-over").  TCP never does.  With a spool a daemon kill -9 loses
	 * nothing on either path; without one the hand-over may lose
	 * (uncounted) one read per rank the daemon held (docs/design.md). */
	bool handover;
	char **argv;
};

/* One line on our stderr through the logger (levels: iofs-run(1) -v). */
void run_log(iofs_log_t *log, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ------------------------------------------------------------------------ */
/* run_child.c: the children, their pipes and stdin queues                   */

struct child;
struct run_kids;

/* What the children tell the link (run_link.c implements it). */
struct run_kids_ops {
	/* true: give the children pipes; false: they inherit our stdio */
	bool (*linked)(void *ctx);
	/* @fds: our ends of its stdin, stdout, stderr pipes.  True: the
	 * daemon took them over (the hand-over): the child does not read its
	 * output pipes while the link lasts, and sends no COMPLETE. */
	bool (*rank_start)(void *ctx, uint32_t rank, pid_t pid,
			   const int fds[3]);
	/* output bytes of @rank's @channel */
	void (*data)(void *ctx, uint32_t rank, uint32_t channel,
		     const uint8_t *buf, size_t len);
	void (*complete)(void *ctx, uint32_t rank, uint32_t channel);
	/* the rank's stdin queue passed its high mark (@xoff) or drained */
	void (*stdin_flow)(void *ctx, uint32_t rank, bool xoff);
	/* @done stdin bytes of @rank left its queue (written or dropped) */
	void (*stdin_ack)(void *ctx, uint32_t rank, uint64_t done);
	/* the rank exited (and its pipes closed) with @wstatus */
	void (*exit)(void *ctx, uint32_t rank, int wstatus);
};

struct run_kids {
	struct event_base *base;
	const struct run_opts *o;
	iofs_log_t *log;
	const struct run_kids_ops *ops;
	void *ops_ctx;
	struct child *kids; /* o->count entries, owned; NULL before spawn */
	uint32_t exited;
	int exit_code; /* first non-zero, else 0 */
	bool have_code;
	uint8_t *scratch;	   /* RUN_READ_CHUNK bytes, owned */
	unsigned long nofile_soft; /* RLIMIT_NOFILE soft limit at start */
	bool nofile_raised;
	bool keep_copies; /* handed-over pipes: keep ours until released */
};

/* 0 or -ENOMEM; raises RLIMIT_NOFILE (three pipes per rank). */
int run_kids_init(struct run_kids *k, struct event_base *base,
		  const struct run_opts *o, iofs_log_t *log,
		  const struct run_kids_ops *ops, void *ops_ctx);
/* Start every rank; one that cannot start counts as exited with 127. */
void run_kids_spawn(struct run_kids *k);
/* Reap children (SIGCHLD). */
void run_kids_reap(struct run_kids *k);
/* Our copies of a handed-over rank's pipes (stdin -1 once closed), to
 * pass them again on a resume; false when not handed over or closed. */
bool run_kids_fds(struct run_kids *k, uint32_t rank, int fds[3]);
/* Send @sig to every child not yet reaped. */
void run_kids_signal(struct run_kids *k, int sig);
/* All ranks exited (EXIT sent for each)? */
bool run_kids_done(const struct run_kids *k);
/* Set (@on) or clear suspend reason @bit on one output channel, or on
 * every channel (run_kids_suspend_all); the pipe is read while none is. */
void run_kids_suspend(struct run_kids *k, uint32_t rank, uint32_t channel,
		      unsigned bit, bool on);
void run_kids_suspend_all(struct run_kids *k, unsigned bit, bool on);
/* STDIN bytes for @rank, and its end of file. */
void run_kids_stdin_push(struct run_kids *k, uint32_t rank, const uint8_t *buf,
			 size_t len);
void run_kids_stdin_eof(struct run_kids *k, uint32_t rank);
/* The link is gone: nobody will XON us or send stdin any more (every
 * suspend reason cleared, every stdin at end of file). */
void run_kids_unlinked(struct run_kids *k);
/* Idempotent. */
void run_kids_release(struct run_kids *k);
/* Write @len bytes to our own fd 1/2 (fallback). */
void run_local_write(uint32_t channel, const uint8_t *buf, size_t len);

/* ------------------------------------------------------------------------ */
/* run_link.c: the connection to the daemon                                  */

/* A DATA frame sent but not acknowledged yet (replayed on fallback). */
struct unacked {
	struct unacked *next;
	uint32_t rank, channel;
	uint64_t off; /* offset of bytes[0] in the (rank, channel) stream */
	size_t len;
	uint8_t bytes[];
};

/* What the link remembers of one rank across reconnects (run_resume.c). */
struct rlrank {
	uint64_t produced[PROTO_HELD_CHANNELS]; /* output bytes taken */
	uint64_t held[PROTO_HELD_CHANNELS];	/* the last HELD */
	uint8_t held_state;			/* PROTO_HELD_* */
	bool got_held;
	pid_t pid;	 /* 0 until started */
	bool exited;	 /* EXIT due (sent or not) */
	int wstatus;
	uint64_t stdin_rx;   /* STDIN payload bytes received */
	uint64_t stdin_done; /* let go (the last STDIN_ACK) */
	bool stdin_eof_rx;   /* STDIN_EOF received */
	bool stdin_xoff;     /* our last XOFF(stdin) / XON(stdin) */
	uint32_t completed;  /* output channels at EOF (COMPLETE sent) */
};

struct run_link {
	struct event_base *base;
	struct run_opts *o; /* o->nspace may be renamed by the daemon */
	iofs_log_t *log;
	struct run_kids *kids; /* calls into the children */
	/* called when the link may have settled (an ACK, the last EXIT
	 * sent, the link down): run.c checks whether to finish */
	void (*settled)(void *ctx);
	void *settled_ctx;
	int fd;			 /* socket before the bufferevent takes it */
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
	/* Resume (run_resume.c) */
	struct rlrank *rs;	   /* o->count entries, owned */
	uint16_t version;	   /* the protocol spoken (4: resumable) */
	bool reconnecting;	   /* down, trying to resume */
	bool gave_up;		   /* fell back to the terminal for good */
	struct event *retry_ev;	   /* next attempt */
	int64_t down_ms;	   /* when the link went down */
	unsigned backoff_ms;
	uint64_t reconnects, replayed, dup_dropped, lost_bytes;
	uint64_t xon_implicit;	   /* XOFF latches cleared by a link loss */
	uint64_t handover_local;   /* bytes printed here at the hand-over */
	/* The pipe hand-over (WELCOME said yes): no DATA; on a link loss
	 * the copies stay parked for the resume (run_resume.c), and on the
	 * final fallback we read them ourselves. */
	bool handover;
	uint32_t handed; /* ranks whose pipes the daemon took */
};

/* The children's view of the link (struct run_kids_ops, ctx: the link). */
extern const struct run_kids_ops run_link_kids_ops;

void run_link_init(struct run_link *l, struct event_base *base,
		   struct run_opts *o, iofs_log_t *log, struct run_kids *kids,
		   void (*settled)(void *ctx), void *settled_ctx);
/* Connect and exchange HELLO/WELCOME synchronously (bounded).  0 = linked;
 * -ENOTCONN: the link is down and the caller falls back (warned). */
int run_link_open(struct run_link *l);
/* Wrap the socket in a bufferevent once the children exist. */
int run_link_start(struct run_link *l);
/* Up, and everything sent acknowledged? */
bool run_link_up(const struct run_link *l);
bool run_link_settled(const struct run_link *l);
/* The link failed: warn once, replay unacked output locally. */
void run_link_down(struct run_link *l, const char *why);
/* Idempotent. */
void run_link_release(struct run_link *l);
/* Give up on the daemon for good: print what it has not acknowledged
 * (or, after an exact hand-over, what it does not hold) and from now on
 * everything on our terminal. */
void run_link_fallback(struct run_link *l, const char *why);
/* Down but trying to resume: the job is not finished. */
bool run_link_reconnecting(const struct run_link *l);

/* run_link.c, for run_resume.c */
/* A fresh framer with the link's frame handlers: 0 or -ENOMEM (run_link.c). */
int run_link_framer_reset(struct run_link *l);
/* Connect, HELLO (@resume: PROTO_HELLO_F_RESUME), read HELD frames and
 * WELCOME.  The socket (>= 0), or -errno with @why; -EREMOTEIO when
 * the daemon answered ERROR (@code set; a refused connect() is
 * -ECONNREFUSED). */
int run_link_greet(struct run_link *l, bool resume, int64_t deadline,
		   uint32_t *code, char *why, size_t whylen);
/* Drop the socket, keep the replay queue. */
void run_link_close(struct run_link *l);
/* Send (nothing if down). */
void run_link_send(struct run_link *l, const struct proto_frame *f);
/* EXIT for @rank from its wait status (counted in exits_sent); nothing
 * while the link is down. */
void run_link_send_exit(struct run_link *l, uint32_t rank, int wstatus);

/* run_handover.c: RANK_START with @fds (stdin write end, stdout and
 * stderr read ends) attached, after what is queued ahead of it; true if
 * sent (else the link went down, said why). */
bool run_link_send_pipes(struct run_link *l, const struct proto_frame *f,
			 const int fds[3]);

/* run_resume.c */
/* The link broke: start reconnecting (true), or false if it cannot
 * resume (then the caller falls back). */
bool run_resume_start(struct run_link *l, const char *why);
/* Output taken while down (queued; may pause the pipes). */
void run_resume_queue_full(struct run_link *l);
/* A greeting succeeded after a resume HELLO: apply HELD, replay. */
void run_resume_replay(struct run_link *l);
/* Exact hand-over after the daemon declined a resume with HELD. */
void run_resume_release(struct run_link *l);

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
/* Decimal 0..ROUTER_RANK_MAX, nothing else: 0, else -1 (a yes/no test). */
int run_parse_u32(const char *s, uint32_t *out);
/* @argv as one line a shell reads back (words quoted where needed, control
 * characters as '?') into @buf, NUL-terminated: its length.  What does not
 * fit in @cap - 1 bytes is left out by whole words, and *cut says so (the
 * first word alone too long: an empty line). */
size_t run_command_text(char *const *argv, char *buf, size_t cap, bool *cut);
/* The COMMAND frame of @argv (run_command_text()) into @buf: its size, 0
 * if there is nothing to say (the first word alone too long), or -errno. */
ssize_t run_command_frame(char *const *argv, uint8_t *buf, size_t cap);

#endif /* IOFS_NET_RUN_I_H */
