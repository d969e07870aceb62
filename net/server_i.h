/* SPDX-License-Identifier: MIT */
/*
 * Private to the daemon's listeners: server.c (listeners, accept,
 * lifecycle) and conn.c (one forwarder connection: frames, ranks,
 * deliveries, flow control).
 */
#ifndef IOFS_NET_SERVER_I_H
#define IOFS_NET_SERVER_I_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "net/framer.h"
#include "net/proto.h"
#include "net/server.h"
#include "router/router.h"
#include "router/strmap.h"

struct bufferevent;
struct event;
struct evconnlistener;
struct auth_req;
struct auth_worker;

/* Watermarks protecting the daemon's memory (per connection).  Pending
 * delivery bytes: stop reading above limits.buf_conn (-o max_buf_conn,
 * 8 MiB), resume at a quarter of it. */
#define CONN_OUT_HIGH	(1u << 20)   /* output toward the forwarder: stop */
#define CONN_STDIN_HIGH (128u << 10) /* ... above this: XOFF its stdin */
#define CONN_OUT_LOW	(32u << 10)  /* ... resume both */
/* stdin sent to a rank and not yet let go by its forwarder's queue
 * (STDIN_ACK): above this the rank's stdin is XOFFed, resumed at half. */
#define CONN_STDIN_CREDIT (256u << 10)
#define CONN_IN_MAX	  (2 * (PROTO_FRAME_MAX + PROTO_LEN_SIZE)) /* read buffer */

#define CONN_READ_CHUNK	     (256u << 10) /* one readv() */
#define CONN_READ_BURST	     (2u << 20)	  /* bytes read per wake-up at most */
#define CONN_WRITE_MAX	     (1 << 20)	  /* bufferevent max single write */
#define CONN_HELLO_TIMEOUT_S 10 /* after accept, no complete HELLO: drop */
#define CONN_CLOSE_TIMEOUT_S 5	/* ERROR not taken by the peer: drop */

/* Why a connection's input is not being read (bitmask). */
enum {
	CONN_SUSP_DQ = 1u << 0,	    /* too many bytes pending in the router */
	CONN_SUSP_OUTBUF = 1u << 1, /* forwarder not reading our frames */
	CONN_SUSP_AUTH = 1u << 2,   /* HELLO's credential being decoded */
	CONN_SUSP_UID = 1u << 3,    /* its uid holds max_buf_uid bytes */
	/* the daemon is stopping (net_server_quiesce()): nothing more is
	 * read, socket or pipe; the forwarder resumes with the next daemon */
	CONN_SUSP_STOPPING = 1u << 4,
};

/* Per-uid counters (strmap uidmap) of the server's connections. */
enum { UID_CONNS = 0, UID_RANKS = 1, UID_BUF = 2, UID_PIPES = 3 };
/* A connection paused by max_buf_uid looks again after this. */
#define CONN_UID_RETRY_MS 20

/* The limits, for logging and counting refusals. */
enum limit_id {
	LIM_RANKS_HELLO,
	LIM_RANKS_JOB,
	LIM_RANKS_UID,
	LIM_JOBS_UID,
	LIM_CONNS_UID,
	LIM_BUF_UID,
	LIM_PIPES_UID, /* not a refusal: the socket path instead */
	LIM_PIPES_ALL, /* the same, daemon-wide (half of RLIMIT_NOFILE) */
	LIM_N
};

/* Why a rank's stdin is XOFFed toward the router (bitmask). */
enum {
	STDIN_SUSP_PEER = 1u << 0,   /* the forwarder sent XOFF(stdin) */
	STDIN_SUSP_OUTBUF = 1u << 1, /* our output buffer is full */
	STDIN_SUSP_CREDIT = 1u << 2, /* too much stdin unacknowledged */
	STDIN_SUSP_DETACHED = 1u << 3, /* no connection: waiting for a resume */
	STDIN_SUSP_PIPE = 1u << 4, /* hand-over: the rank's stdin pipe is full */
};

enum crank_state {
	CRANK_RESERVED = 0, /* announced in HELLO, no RANK_START yet */
	CRANK_RUNNING = 1,  /* registered in the router */
	CRANK_DONE = 2,	    /* EXIT processed or lost */
};

struct conn;
struct crank_pipes; /* conn_pipe.c */

/* One rank of a connection's HELLO range.  Router source-ops context. */
struct crank {
	struct conn *c;
	router_rank_t *rr; /* borrowed from the router while RUNNING */
	uint32_t rank;
	enum crank_state state;
	bool exit_queued;     /* EXIT received, waiting in the FIFO */
	unsigned stdin_want;  /* STDIN_SUSP_* wanted */
	bool stdin_xoff;      /* what the router was last told */
	uint64_t stdin_sent;  /* STDIN payload bytes sent to the forwarder */
	uint64_t stdin_acked; /* ... of which STDIN_ACK says it let go */
	/* Resume (conn_resume.c).  stdin_keep: the STDIN bytes from
	 * stdin_acked to stdin_sent (owned, NULL until the first), re-sent
	 * from the forwarder's count after a reconnect. */
	struct evbuffer *stdin_keep;
	bool stdin_eof_sent;	/* the router's EOF was passed on */
	bool await_resume;	/* resumed: stdin waits for its RESUME */
	uint64_t replay_pending; /* RESUME's replay_bytes before RANK_START */
	unsigned out_latch;	/* output channels XOFFed (ROUTER_CH_*) */
	uint64_t held[PROTO_HELD_CHANNELS]; /* DATA bytes taken, per channel */
	/* Pipe hand-over (conn_pipe.c): the rank's pipes, owned; NULL on
	 * the socket path. */
	struct crank_pipes *pp;
};

/* An entry of a connection's in-order FIFO: a delivery or an EXIT. */
struct dq_entry {
	struct dq_entry *next;
	struct conn *c; /* NULL once the connection is gone (orphan) */
	bool is_exit;
	bool done; /* the router's callback fired (deliveries) */
	/* not in this connection's ACK: from before a resume, or read from
	 * a handed-over pipe (the forwarder never sent it) */
	bool old;
	uint32_t rank_idx;
	int exit_status; /* EXIT: router convention */
	size_t len;
	const uint8_t *payload;	  /* into bytes[]: the frame or a copy */
	router_directives_t dirs; /* kept alive for router_deliver() */
	uint8_t bytes[];
};

struct conn {
	struct conn *next, *prev; /* server's list */
	/* Connections of the same job (s->conns_by_ns), from HELLO on. */
	struct conn *ns_next, *ns_prev;
	bool indexed;
	net_server_t *srv;
	struct bufferevent
	    *bev;	     /* output only; owns the fd; NULL once closed */
	struct event *rev;   /* our read event on the fd */
	bool reading;	     /* rev is added (never with a timeout) */
	struct event *hello_timer; /* one-shot: no HELLO since accept */
	struct event *kick;	 /* deferred service (flow, resume, free) */
	uint64_t id;
	char peer[128]; /* for the log */
	bool is_unix;
	bool cred_ok; /* uid/gid from SO_PEERCRED or MUNGE */
	/* The forwarder's process on a Unix socket (SO_PEERCRED; 0 if not
	 * in our pid namespace) and its start time (/proc, 0 if unknown):
	 * a detached connection whose forwarder is gone is lost at once. */
	int peer_pid;
	unsigned long long peer_start;
	uint32_t uid, gid;
	struct framer fr; /* input: reads, decodes, dispatches */
	uint16_t version; /* the HELLO's protocol version */
	uint32_t pid;	  /* the HELLO's forwarder pid */
	struct auth_req *auth_req; /* MUNGE decode in flight */
	uint32_t want_base, want_count; /* HELLO range while authenticating */
	struct uid_entry *uent; /* s->uids entry while owner_counted */
	bool owner_counted;	/* counted in UID_CONNS */
	uint32_t ranks_counted; /* added to UID_RANKS */
	uint64_t uid_buf;	/* added to UID_BUF (its dq_bytes) */
	uint32_t pipes_counted; /* added to UID_PIPES and srv->pipes_held */
	struct event *uid_timer; /* retry while CONN_SUSP_UID */

	/* From HELLO. */
	char requested[ROUTER_NSPACE_MAX + 1]; /* the name asked for */
	uint32_t hello_flags; /* PROTO_HELLO_F_* of its HELLO */
	char nspace[ROUTER_NSPACE_MAX + 1]; /* the name given (conn_name.c) */
	char host[PROTO_HOST_MAX + 1];
	uint32_t job_size;
	router_directives_t dirs;
	uint32_t rank_base, rank_count;
	struct crank *ranks; /* rank_count entries, owned */
	char *command; /* COMMAND's text, owned; NULL until one came */

	unsigned susp; /* CONN_SUSP_* */
	bool closing;  /* ERROR queued: free once flushed */
	bool quiet_fail; /* conn_fail() logs at debug level (logged already) */
	bool dead;     /* closed, waiting for the kick to free it */
	bool out_full; /* output > CONN_STDIN_HIGH: stdin XOFFed for it */
	/* Resume (conn_resume.c).  detached: the socket is gone, the ranks
	 * wait for their forwarder until resume_timer fires. */
	bool detached;
	bool detach_pending; /* socket ended, conn_service() detaches */
	struct event *resume_timer; /* 1 s ticks with a local peer */
	uint64_t resume_deadline_ms; /* end of the window, CLOCK_MONOTONIC */
	struct conn *handoff; /* resume HELLO: the detached conn to wake */
	bool resume_fresh;    /* resume HELLO for a job this daemon lacks */
	uint64_t resumes;     /* times this conn's ranks were resumed */

	struct dq_entry *dq_head, *dq_tail; /* owned, in frame order */
	size_t dq_bytes;
	uint64_t acked_bytes;
	uint32_t exits_done;
	bool ack_pending;	      /* counters moved since the last ACK */
	struct dq_entry *frame_entry; /* DATA frame being dispatched (owned) */
	uint64_t xoff_sent, xon_sent;
	/* Pipe hand-over (conn_pipe.c): negotiated in HELLO/WELCOME; the
	 * descriptors received and not yet taken by a RANK_START (owned);
	 * draining: the socket is gone, the pipes are read to their end. */
	bool handover;
	bool draining;
	int *fdq;
	size_t fdq_head, fdq_len, fdq_cap;
};

/* Accept back-off on EMFILE/ENFILE/ENOBUFS/ENOMEM: pause accepting for
 * ACCEPT_PAUSE_MIN_MS, doubling up to ACCEPT_PAUSE_MAX_MS while it
 * persists; one log line per pause, with the count of failures. */
#define ACCEPT_PAUSE_MIN_MS 100
#define ACCEPT_PAUSE_MAX_MS 1000

struct listener {
	struct listener *next;
	net_server_t *srv;
	struct evconnlistener *evl;
	struct event *resume; /* timer: re-enable after a pause */
	unsigned pause_ms;    /* current pause, 0 = not backing off */
	uint64_t accept_errors; /* failures since the last log line */
	uint64_t accept_errors_total;
	bool is_unix;
	char path[108]; /* Unix socket file we created (unlinked at stop) */
	char text[300];
};

struct net_server {
	struct event_base *base;
	router_t *router;
	struct net_server_config cfg;
	struct listener *listeners;
	struct conn *conns;
	/* nspace -> first connection of that job (list via ns_next): a HELLO
	 * looks at its own job's connections only, never at every one. */
	struct strmap conns_by_ns;
	struct strmap uids; /* uid -> struct uid_entry (UID_*) */
	struct auth_worker *auth; /* created at the first MUNGE HELLO */
	uint64_t refusals[LIM_N];
	uint64_t unlogged[LIM_N]; /* refusals since the last log line */
	uint64_t logged_ms[LIM_N];
	uint64_t next_id;
	struct event *restored_timer; /* conn_resume_arm_restored() */
	/* Descriptors granted to hand-over connections (3 per rank each
	 * announced, until the connection is freed) and their bound, half
	 * of RLIMIT_NOFILE (conn_admit_pipes()). */
	uint64_t pipes_held, pipes_max;
	/* Output pipes grown to PIPE_GROWN (conn_pipe.c): at most
	 * PIPE_GROWN_MAX at a time, the pages being the ranks' owner's
	 * (pipe-user-pages-soft); and the buffer a store's splice_in may
	 * copy into (the router copies out of it at once). */
	unsigned pipes_grown;
	uint8_t *pipe_buf;
};

void srv_log(net_server_t *s, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* conn.c */
/* Takes @fd (closed on failure).  NULL on failure (logged). */
struct conn *conn_new(net_server_t *s, int fd, const struct sockaddr *sa,
		      int salen, bool is_unix);
/* Tear down now: running ranks LOST, queued EXITs honoured, deliveries
 * orphaned.  Frees @c. */
void conn_destroy(struct conn *c);
/* Send @f (nothing once closing). */
void conn_send(struct conn *c, const struct proto_frame *f);

/* conn_admit.c: who may open a connection and announce ranks. */
/* The owner is known (Unix: at accept): count it, apply max_conns_uid.
 * 0, or a negative errno after conn_fail() (net_i.h). */
int conn_admit_owner(struct conn *c);
/* HELLO: MUNGE on TCP (asynchronous), the limits, the range check, then
 * WELCOME.  0 (accepted or pending) or a negative errno after
 * conn_fail(). */
int conn_admit(struct conn *c, uint32_t base, uint32_t count, const char *cred,
	       size_t cred_len);
/* Teardown: leave the job index, uncount, cancel a decode.  Idempotent. */
void conn_admit_release(struct conn *c);
/* May @c take its ranks' pipes (3 descriptors per rank announced)?  Within
 * max_pipes_uid (root exempt) and, for all users together, half of
 * RLIMIT_NOFILE: counted until conn_admit_release(), true; else false
 * (logged, rate-limited): the connection takes the socket path. */
bool conn_admit_pipes(struct conn *c);
/* Pending deliveries of @c grew (@delta > 0) or shrank: max_buf_uid. */
void conn_admit_buf(struct conn *c, int64_t delta);
/* Log how often each limit refused (at the end). */
void conn_admit_report(net_server_t *s);
/* The limits in effect (defaults filled in). */
void net_limits_fill(struct net_limits *l);

/* First rank of [base, base+count) claimed by another live connection of
 * c->nspace's job, or -1 (the job's connection index, conn_admit.c). */
int64_t conn_index_claimed(const struct conn *c, uint32_t base, uint32_t count);

/* conn_name.c: pick c->nspace for c->requested, c->uid and the HELLO
 * range (the job-name collision rule); logs a rename.  0, or a negative
 * errno after conn_fail(). */
int conn_name_assign(struct conn *c, uint32_t base, uint32_t count);

/* conn.c, for conn_dq.c: wake conn_service() soon; start/stop reading the
 * socket; send ERROR with a logged reason and close (idempotent), and
 * return the negative errno for @code (the rule in net_i.h). */
void conn_kick(struct conn *c);
int conn_attach_socket(struct conn *d, struct conn *n);
void conn_reading(struct conn *c, bool on);
int conn_fail(struct conn *c, uint32_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* conn_resume.c: reconnects (docs/protocol.md, "Resume"). */
/* The socket of @c ended: may its ranks wait for a resume (version 4,
 * ranks not ended, a window)?  Then conn_resume_detach() (from
 * conn_service(), outside the socket's callbacks) drops the socket and
 * arms the window. */
bool conn_resume_wants(const struct conn *c);
void conn_resume_detach(struct conn *c);
/* The resume window in seconds (-o resume_window). */
unsigned conn_resume_window(const net_server_t *s);
/* A resume HELLO passed authentication: find its detached conn (or
 * restored ranks), check the owner.  1: handled (handoff pending or
 * answered), 0: a fresh job (admit as usual, then conn_resume_welcome),
 * or a negative errno after conn_fail(). */
int conn_resume_admit(struct conn *c, uint32_t base, uint32_t count);
/* conn_service() of a conn with a handoff: move the socket. */
void conn_resume_handoff(struct conn *c);
/* conn_resume_admit() answered 2: @c's ranks exist in @job, restored
 * from the spool and waiting; take them (after c->ranks is set up). */
void conn_resume_take(struct conn *c, router_job_t *job);
/* COMMAND: keep the ranks' command line for their job (conn_admit.c).
 * 0, or conn_fail()'s value. */
int conn_admit_command(struct conn *c, const struct proto_frame *f);
/* Ranks restored running from the spool wait this long (server start). */
int conn_resume_arm_restored(net_server_t *s);
extern const struct router_source_ops conn_source_ops;
/* Before WELCOME to a resume HELLO: one HELD frame per rank. */
void conn_resume_held(struct conn *c);
/* A RESUME frame (v4). */
int conn_resume_frame(struct conn *c, const struct proto_frame *f);
/* Keep @len stdin bytes of @cr until STDIN_ACKed.  0 or -ENOMEM. */
int conn_resume_keep(struct crank *cr, const uint8_t *p, size_t len);
/* STDIN_ACK moved to @acked: drop kept bytes. */
void conn_resume_acked(struct crank *cr, uint64_t acked);
/* Teardown of one rank's resume state.  Idempotent. */
void conn_resume_release(struct crank *cr);

/* conn_dq.c: the delivery FIFO. */
/* Mark @cr ended in the router (once). */
void conn_rank_finish(struct crank *cr, enum router_state st, int status);
/* Append @e (owned by the FIFO from now on). */
void conn_dq_push(struct conn *c, struct dq_entry *e);
/* Pop every finished entry at the head; ACK if anything moved. */
void conn_dq_pump(struct conn *c);
/* DATA or COMPLETE of rank index @idx into the router, through the FIFO.
 * 0, or a negative errno after conn_fail(). */
int conn_deliver(struct conn *c, uint32_t idx, uint32_t channel,
		 const uint8_t *bytes, size_t len, bool complete);
/* The same for bytes read from a handed-over pipe: in the FIFO, not in
 * the ACK counters.  @e: an entry (zeroed head) holding the bytes, owned
 * from now on, or NULL (COMPLETE). */
int conn_deliver_piped(struct conn *c, uint32_t idx, uint32_t channel,
		       struct dq_entry *e, size_t len, bool complete);
/* EXIT of rank index @idx (router convention) into the FIFO.  0 or a
 * negative errno after conn_fail(). */
int conn_dq_exit(struct conn *c, uint32_t idx, int status);
/* Teardown: apply queued EXITs in order, orphan deliveries in flight. */
void conn_dq_release(struct conn *c);

/* conn_pipe.c: the pipe hand-over (docs/protocol.md, "Pipe hand-over"). */
/* Did @c's HELLO offer the hand-over (Unix socket, known peer)? */
bool conn_pipe_offered(const struct conn *c);
/* Should @c's WELCOME accept the hand-over its HELLO offered?  Sets
 * c->handover: offered and within the descriptor budget
 * (conn_admit_pipes()). */
bool conn_pipe_offer(struct conn *c);
/* Descriptors that came with the socket's bytes (framer_ops.fds). */
/* The hand-over's exact read (conn_dq.c): up to @cap bytes of the pipe
 * @fd into @e->bytes, taken out of the pipe by the rank's store
 * (router_deliver_pipe()).  0 (ROUTER_SUCCESS): *@taken > 0 bytes
 * delivered, @e owned by the FIFO; ROUTER_AGAIN (empty), ROUTER_ERR_PIPE
 * (at its end), ROUTER_STORE_FULL (read it yourself this time) or
 * ROUTER_ERR_NOT_SUPPORTED (read it yourself from now on): nothing done,
 * @e still the caller's; < 0: the connection failed, @e freed. */
int conn_deliver_spliced(struct conn *c, uint32_t idx, uint32_t channel,
			 struct dq_entry *e, uint8_t *buf, size_t cap, int fd,
			 size_t *taken);
void conn_pipe_fds(void *ctx, const int *fds, int n);
/* RANK_START on a hand-over connection: take the next three descriptors
 * and start reading.  0, or a negative errno after conn_fail(). */
int conn_pipe_start(struct crank *cr);
/* RANK_START of a running rank on a resumed hand-over: its pipes again
 * (a daemon that still reads them closes the new copies; a restarted one
 * reads on where the lost one stopped).  0, or a negative errno after
 * conn_fail(). */
int conn_pipe_restart(struct crank *cr);
/* The link is detached for a resume: the pipes stay ours and are still
 * read; descriptors not yet taken are closed. */
void conn_pipe_detach(struct conn *c);
/* (Re)arm the pipe reads of every rank of @c (flow, memory, closing). */
void conn_pipe_update(struct conn *c);
/* EXIT of @cr: true if held until its pipes reach end of file. */
bool conn_pipe_hold_exit(struct crank *cr, int status);
/* stdin for a handed-over rank (router source ops). */
int conn_pipe_stdin(struct crank *cr, const uint8_t *p, size_t len);
void conn_pipe_stdin_eof(struct crank *cr);
/* The socket ended: true if @c stays to drain its pipes (then it frees
 * itself once they are all at end of file). */
bool conn_pipe_drain(struct conn *c);
/* Teardown of @c's pipes and queued descriptors.  Idempotent. */
void conn_pipe_release(struct conn *c);

#endif /* IOFS_NET_SERVER_I_H */
