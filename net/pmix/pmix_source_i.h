/* SPDX-License-Identifier: MIT */
/*
 * PMIx source internals, shared by its modules:
 *   pmix_source.c    attach (PMIx_tool_init), lifecycle, references, the
 *                    one live source (`owner`)
 *   pmix_msg.c       struct ps_msg, pending ops, ps_post/ps_dispatch
 *   pmix_event.c     event registration, job events, loss of the server
 *   pmix_discover.c  PMIX_QUERY_NAMESPACES, job discovery, requery timer
 *   pmix_size.c      the PMIx_Get_nb(PMIX_JOB_SIZE) queue
 *   pmix_pull.c      PMIx_IOF_pull and the output PMIx delivers
 *   pmix_job.c       jobs and ranks on the router side: registration,
 *                    deliveries, exits
 *   pmix_push.c      stdin: PMIx_IOF_push, push queues, server XOFF
 *
 * Threads.  Functions named pt_*() run on PMIx's progress thread: they
 * copy what PMIx handed them into a struct ps_msg, take a reference on the
 * source and router_defer() it (ps_post).  Everything else runs on the
 * daemon's loop thread, but for the helpers the pt_*() functions call,
 * marked "Progress thread" or "Any thread" below.  No PMIx callback
 * touches the router or a job directly.
 */
#ifndef IOFS_PMIX_SOURCE_I_H
#define IOFS_PMIX_SOURCE_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <event2/util.h>
#include <pmix_tool.h>

#include "net/pmix/pmix_source.h"
#include "router/router.h"

struct event;
struct event_base;

/* Back-pressure toward a rank's stdin: each FUSE write is answered from its
 * push's own callback (ROUTER_STDIN_PENDING).  The kernel serialises writes
 * to one FUSE file (libfuse 3.14 has no FOPEN_PARALLEL_DIRECT_WRITES), so a
 * rank has at most two pushes in flight: from its own stdin file and from
 * the job's.  No byte-count latch is needed (docs/pmix.md). */
/* With a libpmix that has PMIX_ERR_IOF_XOFF: a push answered with it holds
 * that rank's stdin this long (PMIx has no "resume" status, PRRTE's XON/XOFF change). */
#define PS_SERVER_XOFF_MS 100

/* After JOB_END, a rank whose stdout/stderr have not completed yet waits at
 * most this long for them before it is marked exited anyway. */
#define PS_END_GRACE_MS 2000
/* A job that vanished from PMIX_QUERY_NAMESPACES without a JOB_END event is
 * treated as ended (status unknown: 0) after this long. */
#define PS_VANISH_GRACE_MS 3000
/* Pull anyway when PMIX_JOB_SIZE is not answered within this many
 * namespace queries. */
#define PS_SIZE_WAIT_QUERIES 10
/* A namespace query unanswered for this many requery ticks is reissued. */
#define PS_QUERY_STUCK_TICKS 20
/* Ranks per job iofs follows (the rank table is indexed by rank). */
#define PS_MAX_RANKS (1u << 22)
/* Namespace queries answered PMIX_ERR_UNREACH in a row that mean the
 * server is gone (PRRTE gives a few after a prun exits). */
#define PS_UNREACH_QUERIES 6
/* pmix_source_new waits at most this long for its registrations. */
#define PS_READY_WAIT_MS 5000
/* PRRTE's PRTE_IOF_BASE_MSG_MAX: the largest stdin push it survives. */
#define PS_PRRTE_PUSH_MAX 4096
/* A job's command line in info: this long at most before " [...]", as
 * iofs-run's (PROTO_COMMAND_MAX). */
#define PS_COMMAND_MAX 1024
/* Re-query the server's namespaces this often. */
#define PS_REQUERY_MS 500

struct ps_job;

/* The all-namespaces pull (pmix_pull.c ps_pull_all_start) */
enum ps_pull_all {
	PS_PULL_ALL_REFUSED = 0, /* or not tried: each job is pulled */
	PS_PULL_ALL_PENDING,	 /* asked, no answer yet */
	PS_PULL_ALL_OK,		 /* every job's output comes through it */
};

/* One PMIx_IOF_push of a rank awaiting its callback, in push order: the
 * callbacks may come in any order, the router hears of them in this one. */
struct ps_push {
	struct ps_push *next;
	struct ps_rank *rk; /* whose queue it is on */
	bool write; /* a ROUTER_STDIN_PENDING write (not the EOF push) */
	bool done;  /* PMIx called back */
	int status;
};

struct ps_rank {
	struct ps_job *job;
	uint32_t id;
	router_rank_t *rr; /* registered with our ops; NULL once exited */
	bool registered;   /* ever registered by us (rr may be NULL now) */
	bool out_done, err_done;
	bool exit_pending; /* job ended; waiting for the streams */
	bool have_code;	   /* PROC_TERMINATED gave its own code */
	int code;
	struct ps_push *pq, **pq_tail; /* pushes awaiting callbacks, owned */
	bool stdin_xoff;	       /* our router_stdin_flow() latch */
	bool server_xoff;	    /* the server answered a push with XOFF */
	uint64_t out_xoff, out_xon; /* router flow() calls, counted */
};

struct ps_job {
	struct ps_job *next;
	pmix_source_t *ps;
	char nspace[ROUTER_NSPACE_MAX + 1];
	uint32_t size;	    /* from PMIX_JOB_SIZE, 0 = unknown */
	bool pulling;	    /* PMIx_IOF_pull accepted */
	bool pulled;	    /* ... and registered: @iof_id is valid */
	size_t iof_id;	    /* for PMIx_IOF_deregister at free */
	bool size_pending;  /* PMIX_JOB_SIZE wanted: pull after the answer */
	bool size_asked;    /* ... and its PMIx_Get_nb was started */
	unsigned size_wait; /* queries seen while waiting for it */
	bool argv_pending;  /* PMIX_APP_ARGV wanted (after the size) */
	bool argv_asked;    /* ... and its PMIx_Get_nb was started */
	char *command;	    /* its answer, shown as the job's command: */
	/* output that came before the size answer, delivered after it */
	struct ps_msg *held, **held_tail;
	bool listed; /* seen in the last namespace query */
	bool ended;  /* JOB_END seen (or vanished) */
	int end_code;
	struct event *grace_ev; /* end grace / vanish timer */
	bool vanishing;		/* grace_ev armed for a vanished job */
	struct ps_rank **ranks; /* indexed by rank id; entries may be NULL */
	size_t nranks;		/* length of @ranks */
	bool warned_flow;
	bool warned_rank;
	bool ignored; /* not a valid directory name: never pulled */
};

struct pmix_source {
	struct event_base *base;
	router_t *r;
	iofs_log_t *log; /* borrowed */
	atomic_int refs; /* owner + one per deferred message in flight */
	bool closing;	 /* pmix_source_free() ran: loop fns only unref */
	bool lost;	 /* server gone: no more PMIx calls but finalize */
	bool query_inflight;
	unsigned unreach_answers; /* namespace queries answered UNREACH in a row */
	enum ps_pull_all pull_all;
	/* PRRTE: stdin pushes of at most this many bytes (0: no limit) and
	 * no push to the wildcard rank (see pmix_source_new) */
	size_t push_max;
	bool prrte;
	bool size_inflight; /* a PMIx_Get_nb (JOB_SIZE or APP_ARGV) is out */
	bool detached;	    /* left connected at shutdown: ignore callbacks */
	unsigned query_ticks; /* requery ticks the current query has taken */
	pmix_proc_t me;
	struct event *requery_ev;
	struct event *xoff_ev; /* ends the servers' stdin XOFFs (if any) */
	struct ps_job *jobs;
	pthread_mutex_t lock;	/* guards @pending (progress thread vs loop) */
	struct ps_msg *pending; /* ops PMIx has not called back yet */
};

/* What a progress-thread callback hands to the loop, and the cbdata of
 * every PMIx operation we start (an op is on ps->pending until PMIx calls
 * it back, so pmix_source_free() can reclaim the ones PMIx never answers). */
enum ps_msg_kind {
	PS_MSG_IOF,    /* output fragment */
	PS_MSG_EVENT,  /* event notification */
	PS_MSG_QUERY,  /* PMIx_Query_info_nb answer */
	PS_MSG_SIZE,   /* PMIx_Get_nb(PMIX_JOB_SIZE) answer */
	PS_MSG_ARGV,   /* PMIx_Get_nb(PMIX_APP_ARGV) answer (@bytes) */
	PS_MSG_PULLED, /* PMIx_IOF_pull registration answer */
	PS_MSG_PUSHED, /* PMIx_IOF_push completion */
};

struct ps_msg {
	/* arguments PMIx may keep pointers to until it calls back */
	pmix_proc_t proc;
	enum ps_msg_kind kind;
	pmix_source_t *ps;	    /* holds a reference */
	struct ps_msg *prev, *next; /* on ps->pending while PMIx holds it */
	bool pending;
	char nspace[ROUTER_NSPACE_MAX + 1];
	char src_nspace[ROUTER_NSPACE_MAX + 1]; /* EVENT: who raised it */
	uint32_t rank;
	int status;
	uint32_t channel;	  /* IOF */
	router_directives_t dirs; /* IOF */
	void *bytes;		  /* IOF data, QUERY list: owned copy */
	size_t len;		  /* IOF, PUSHED */
	bool have_code;		  /* EVENT */
	int code;		  /* EVENT exit code */
	/* PUSHED: one record per target rank, each on its rank's queue (not
	 * owned); the array is owned unless it is @one (a one-rank push) */
	struct ps_push **pushes, *one;
	size_t npushes;
	pmix_byte_object_t bo;
	/* PUSHED to a server with a push size limit (ps->push_max): the
	 * chunk of @bo now with PMIx, its size limit and offset */
	pmix_byte_object_t cbo;
	size_t chunk, off;
	pmix_info_t *info;
	size_t ninfo;
	pmix_query_t *queries;
};

/* pmix_source.c */
/* Any thread. */
void ps_log(pmix_source_t *ps, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Any thread; the last reference frees the source. */
void ps_ref(pmix_source_t *ps);
void ps_unref(pmix_source_t *ps);
/* Progress thread: the live source, with a reference, or NULL. */
pmix_source_t *ps_owner_get(void);
/* Progress thread: one of the registrations pmix_source_new waits for
 * is answered. */
void ps_owner_ready_one(void);

/* pmix_msg.c */
/* Any thread: a message with a reference on @ps (not on ps->pending).
 * NULL on ENOMEM. */
struct ps_msg *ps_msg_new(pmix_source_t *ps, enum ps_msg_kind kind);
/* A message (with a reference on ps) for an op about to be handed to PMIx;
 * on ps->pending.  NULL on ENOMEM. */
struct ps_msg *ps_op_new(pmix_source_t *ps, enum ps_msg_kind kind);
/* Progress thread, first thing in an op's callback: take @m off
 * ps->pending.  false: pmix_source_free() reclaimed it, do nothing. */
bool ps_op_claim(struct ps_msg *m);
/* Any thread: hand @m to the loop (ps_dispatch there), or free it. */
void ps_post(struct ps_msg *m);
/* Put @m (new, or claimed) on ps->pending for a PMIx call. */
void ps_op_rearm(struct ps_msg *m);
/* PMIx refused the op (no callback will come): unlink and free. */
void ps_op_abort(struct ps_msg *m);
/* Any thread: free @m's payload and drop its reference. */
void ps_msg_free(struct ps_msg *m);
/* Any thread: a PMIx nspace into a ROUTER_NSPACE_MAX buffer (truncated). */
void ps_copy_nspace(char *dst, const char *src);

/* pmix_event.c (loop thread) */
/* Register the event handler; true: its answer will come (the progress
 * thread then calls ps_owner_ready_one). */
bool ps_event_register(pmix_source_t *ps);
void ps_event_handle(pmix_source_t *ps, struct ps_msg *m);
/* A status that says our connection to the server is gone. */
bool ps_event_is_loss(pmix_status_t st);
/* The server is gone: running ranks lost, no more queries. */
void ps_event_lost(pmix_source_t *ps, pmix_status_t why);

/* pmix_discover.c (loop thread) */
/* The job record of a namespace the server runs (pulling its output);
 * NULL for ours, an ignored one or on ENOMEM. */
struct ps_job *ps_discover(pmix_source_t *ps, const char *nspace);
/* Ask the server for its namespaces (unless a query is out). */
void ps_discover_query(pmix_source_t *ps);
void ps_discover_answered(pmix_source_t *ps, struct ps_msg *m);
/* ps->requery_ev, every PS_REQUERY_MS. */
void ps_discover_tick(evutil_socket_t fd, short what, void *arg);

/* pmix_size.c (loop thread) */
/* Want @job's size; it is pulled after the answer. */
void ps_size_request(struct ps_job *job);
/* No size wait any more for @job: pull it, deliver what was held. */
void ps_size_settled(struct ps_job *job);
void ps_size_answered(pmix_source_t *ps, struct ps_msg *m);
/* @job's command line (PMIX_APP_ARGV of its first app) came: kept, and
 * shown once the job is published (ps_job_command()). */
void ps_argv_answered(pmix_source_t *ps, struct ps_msg *m);

/* pmix_job.c: @job's command, onto its router job if it has one (the
 * first rank published puts it there otherwise). */
void ps_job_command(struct ps_job *job);

/* pmix_pull.c (loop thread) */
void ps_pull_all_start(pmix_source_t *ps);
void ps_pull_start(struct ps_job *job);
void ps_pull_answered(pmix_source_t *ps, struct ps_msg *m);
/* Output @m to its job; true: the job took @m. */
bool ps_pull_deliver(pmix_source_t *ps, struct ps_msg *m);

/* pmix_job.c (loop thread) */
struct ps_job *ps_job_find(pmix_source_t *ps, const char *nspace);
struct ps_job *ps_job_new(pmix_source_t *ps, const char *nspace);
void ps_job_set_size(struct ps_job *job, uint32_t size);
void ps_job_iof(struct ps_job *job, struct ps_msg *m); /* takes m */
void ps_job_rank_end(struct ps_job *job, uint32_t rank, int code);
void ps_job_end(struct ps_job *job, int code);
void ps_job_vanished(struct ps_job *job);
void ps_job_lost(struct ps_job *job);
void ps_job_free(struct ps_job *job);
/* Deliver (or, closing, free) what was held for the size answer. */
void ps_job_release_held(struct ps_job *job);

/* pmix_push.c (loop thread) */
/* The router's stdin ops of a rank (ctx: its struct ps_rank). */
int ps_push_write(void *ctx, router_rank_t *rr, const void *bytes, size_t len);
int ps_push_write_job(void *ctx, router_rank_t *const *targets, size_t n,
		      const void *bytes, size_t len);
void ps_push_eof(void *ctx, router_rank_t *rr);
/* true: @m went back to PMIx (the next chunk of a chunked push) */
bool ps_push_done(pmix_source_t *ps, struct ps_msg *m);
void ps_flow_server_xon(pmix_source_t *ps);

#endif /* IOFS_PMIX_SOURCE_I_H */
