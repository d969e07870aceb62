/* SPDX-License-Identifier: MIT */
/*
 * iofs router: the core of the I/O forwarding filesystem.
 *
 * The router receives forwarded output from producers (deliver), keeps a
 * retained window of every stream, serves it to any number of readers with
 * independent cursors (pull), routes stdin bytes to ranks' sinks (push),
 * formats the merged per-job views, and turns slow consumers into XOFF/XON
 * toward producers.  It knows nothing of FUSE or sockets: adapters (fs/, net/)
 * sit on both sides of it.
 *
 * Threads.  The router lives on ONE libevent loop (the event_base passed to
 * router_new()).  Every function here must be called on that loop's thread,
 * except router_deliver() and router_defer(), which may be called from any
 * thread.  Every callback the router makes runs on the loop thread.
 *
 * Status codes (dbus-broker style).  0 is success.  Positive ROUTER_* codes
 * are expected outcomes the caller must handle.  Negative values are -errno
 * and are fatal: forward them.
 *
 * Ownership rules are stated on each call.  Handles (router_job_t,
 * router_rank_t, router_reader_t, ...) are opaque.
 *
 * ORTE iof verbs (ORTE's iof.h) map onto this API as follows:
 *   publish / unpublish   router_rank_register() / router_rank_exit()
 *   pull                  router_reader_open()
 *   push                  router_push()
 *   subscribe / unsub.    router_subscribe() / router_unsubscribe()
 *   flush                 router_flush()
 */
#ifndef IOFS_ROUTER_H
#define IOFS_ROUTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "log/log.h"

struct event_base;

typedef struct router router_t;
typedef struct router_job router_job_t;
typedef struct router_rank router_rank_t;
typedef struct router_reader router_reader_t;
typedef struct router_sub router_sub_t;
typedef struct router_push router_push_t;

/* ------------------------------------------------------------------------ */
/* Status codes                                                              */

enum {
	ROUTER_SUCCESS = 0,             /* accepted (non-blocking forms) / done */
	ROUTER_OPERATION_SUCCEEDED = 1, /* blocking form completed; no callback */
	ROUTER_AGAIN = 2,               /* read at the live end: park and retry */
	ROUTER_WOULD_BLOCK = 3,         /* blocking form called on the loop thread */
	ROUTER_ERR_NOT_AVAILABLE = 4,   /* router shut down / loop stopped */
	ROUTER_ERR_INIT = 5,            /* router is NULL / not initialised */
	ROUTER_ERR_BAD_PARAM = 6,       /* invalid name, channel, rank, ... */
	ROUTER_ERR_NOT_FOUND = 7,       /* no such job or rank */
	ROUTER_ERR_EXISTS = 8,          /* (nspace, rank) registered and running */
	ROUTER_ERR_PIPE = 9,            /* stdin target has exited / closed */
	ROUTER_ERR_CANCELED = 10,       /* operation dropped by teardown */
	ROUTER_ERR_BUSY = 11,           /* job still running (remove) */
	ROUTER_STDIN_PENDING = 12,      /* stdin_write: completes later */
	ROUTER_ERR_OWNER = 13,          /* the job belongs to another user */
	ROUTER_ERR_NOT_SUPPORTED = 14,  /* not for this stream (deliver_pipe) */
	ROUTER_STORE_FULL = 15,         /* deliver_pipe: the store is full */
};

/* Human-readable name for any code above or any -errno. Never NULL. */
const char *router_strerror(int status);

/* ------------------------------------------------------------------------ */
/* Names                                                                     */

#define ROUTER_NSPACE_MAX 255
#define ROUTER_RANK_WILDCARD UINT32_MAX /* every rank of the job */
#define ROUTER_RANK_MAX (UINT32_MAX - 1)
/* The longest host name a spool's rank line keeps: router/store.c writes
 * "-" for a longer one, fs/spool_restore.c reads at most this many bytes
 * (docs/design.md, "Restart"). */
#define ROUTER_STATE_HOST_MAX 126

/* Channel bits: the same values as PMIx's pmix_iof_channel_t. */
enum {
	ROUTER_CH_STDIN = 0x1,
	ROUTER_CH_STDOUT = 0x2,
	ROUTER_CH_STDERR = 0x4,
	ROUTER_CH_STDDIAG = 0x8,
};

typedef struct router_proc {
	char nspace[ROUTER_NSPACE_MAX + 1];
	uint32_t rank; /* or ROUTER_RANK_WILDCARD where allowed */
} router_proc_t;

/* Every wire string that reaches info files, the log or the file tree
 * (names, host names): no control byte (< 0x20, 0x7f; so no NUL). */
bool router_text_valid(const char *s, size_t len);

/* 1-255 bytes, no '/', no control byte (< 0x20, 0x7f; so no NUL), not
 * "." or "..". */
bool router_nspace_valid(const char *nspace, size_t len);

/* Fill *proc; ROUTER_ERR_BAD_PARAM on an invalid nspace. */
int router_proc_set(router_proc_t *proc, const char *nspace, uint32_t rank);

/* ------------------------------------------------------------------------ */
/* Directives (PMIx_server_IOF_deliver(3)): a presence/value bitmask.       */

enum {
	ROUTER_DIR_COMPLETE = 1u << 0,     /* source channel closed: EOF */
	ROUTER_DIR_TAG_OUTPUT = 1u << 1,   /* "[nspace,rank]<stdout>: " (default) */
	ROUTER_DIR_RANK_OUTPUT = 1u << 2,  /* "[rank]<stdout>: " */
	ROUTER_DIR_XML_OUTPUT = 1u << 3,   /* <stdout nspace=.. rank=..>..</stdout> */
	ROUTER_DIR_TIMESTAMP = 1u << 4,    /* add the time before the tag */
	ROUTER_DIR_OUTPUT_RAW = 1u << 5,   /* no line buffering in merged view */
	ROUTER_DIR_LOCAL_OUTPUT = 1u << 6, /* emit to local sinks (absent: yes) */
	ROUTER_DIR_KNOWN_MASK = (1u << 7) - 1,
};

/*
 * A directive is "present" when its bit is in @set; its boolean value is the
 * same bit in @value.  Bits outside ROUTER_DIR_KNOWN_MASK are ignored
 * (unknown directives are ignored).  A NULL directives pointer means none.
 */
typedef struct router_directives {
	uint32_t set;
	uint32_t value;
} router_directives_t;

/* true if @bit is present and true in @d (NULL-safe). */
bool router_dir_on(const router_directives_t *d, uint32_t bit);
/* LOCAL_OUTPUT: absent means yes. */
bool router_dir_local_output(const router_directives_t *d);

/* ------------------------------------------------------------------------ */
/* Context                                                                   */

typedef void (*router_op_cb_t)(int status, void *cbdata);
typedef uint64_t (*router_clock_fn)(void *ctx); /* CLOCK_REALTIME, ns */

/*
 * Optional storage behind every stream (the spool, fs/spool.h): each
 * stream's bytes are appended to it, from offset 0, so the in-memory window
 * only holds what is in flight and a reader older than the window is served
 * from it.  Loop thread only.  Handles are opened lazily on a stream's first
 * byte (a job's on its first stream).  -errno on failure; the router then
 * logs it once and falls back to the window for that stream.
 */
struct router_store_ref;
struct router_store_ops {
	/* A job's storage (@nspace borrowed). */
	int (*job_open)(void *ctx, const char *nspace, void **jh);
	/* Close a job's storage (every stream of it closed first);
	 * @discard as for close(). */
	void (*job_close)(void *jh, bool discard);
	/* A stream of the job: @rank or ROUTER_RANK_WILDCARD (merged view),
	 * @channel ROUTER_CH_STDOUT or ROUTER_CH_STDERR. */
	int (*open)(void *jh, uint32_t rank, uint32_t channel, void **h);
	/* Append: bytes written (may be short), or -errno.  -ENOSPC and
	 * -EDQUOT are not fatal: the router retries later. */
	ssize_t (*append)(void *h, const struct iovec *iov, int iovcnt);
	/* Read up to @n bytes at @off (< bytes appended): > 0, or -errno. */
	ssize_t (*read_at)(void *h, uint64_t off, void *buf, size_t n);
	/* @discard: the job was removed (its bytes may go); false when the
	 * router is freed with the job still in its registry (a restart may
	 * bring it back: router_job_adopt_store()). */
	void (*close)(void *h, bool discard);
	/* Optional: record the job's state for a restart, @text of key: value
	 * lines (uid, gid, state, and "rank: ID STATE STATUS" per rank once
	 * complete); called when its storage opens and when it completes. */
	void (*job_state)(void *jh, const char *text, size_t len);
	/* Optional: a cap evicted the bytes below @to (a multiple of
	 * ROUTER_STORE_ALIGN, or everything appended): their space may be
	 * freed; they are never read again.  Without it they stay on disk. */
	void (*drop)(void *h, uint64_t to);
	/* Optional: the first byte an adopted handle still holds (what an
	 * earlier life's caps evicted is not); without it, 0.  Also asked of
	 * a merged view's handle after a rank stream of its job evicted bytes
	 * (drop()): a view stored by reference (append_ref) no longer holds
	 * the pieces that repeated them. */
	uint64_t (*held_from)(void *h);
	/* Optional, merged views only: append a piece that repeats bytes a
	 * rank stream of the same job and channel has already appended to its
	 * own store, instead of a second copy of them.  All of it or nothing:
	 * ref->size, or -errno (-ENOSPC, -EDQUOT retried as for append). */
	ssize_t (*append_ref)(void *h, const struct router_store_ref *ref);
	/* Optional, rank streams only: move up to @n bytes from the pipe @fd
	 * to the end of the store (splice(2)) and point @bytes at them (into
	 * @buf, or the store's own memory, valid until its next call): a byte
	 * is then either in the store or still in the pipe, never both and
	 * never neither.  Bytes moved (> 0), 0 at the pipe's end, -EAGAIN
	 * when it is empty, -ENOSPC/-EDQUOT as for append and -ENOTSUP when
	 * this store cannot take bytes from a pipe (nothing moved either
	 * way), other -errno. */
	ssize_t (*splice_in)(void *h, int fd, void *buf, size_t n,
			     const void **bytes);
	/* Optional, merged views stored by reference (append_ref): the bytes
	 * @h takes on disk (its index and literal bytes), which the caps
	 * count instead of the view's size: a view of short tagged lines is
	 * many times the rank bytes it names, and costs a fraction of them. */
	uint64_t (*disk_bytes)(void *h);
	/* Optional, rank streams: the stream ended (end of file, or its
	 * rank's end): what the store holds in flight may settle on disk.
	 * Appends may still follow (a full disk's retry from the ring). */
	void (*complete)(void *h);
};

/*
 * A piece of a merged view stored by reference (append_ref): @lit (the
 * literal prefix: a newline that ends another rank's line, the tag), then
 * the rank's bytes [@off, @off + @len) of its stream's store @src, with
 * @tag inserted after every newline in them except one at their very end.
 * @size = the literal prefix + @len + the inserted tags: the piece's bytes
 * in the view.  @src NULL (@len and @taglen 0): the piece is all literal
 * and holds rank @rank's bytes up to its offset @off (XML escapes them),
 * so that a restart knows what of that rank the view has.
 */
struct router_store_ref {
	const struct iovec *lit;
	int nlit;
	void *src;     /* the rank stream's store handle */
	uint32_t rank; /* its rank */
	uint64_t off, len;
	const char *tag;
	size_t taglen;
	uint64_t size;
};

/* Caps evict whole 4 KiB blocks (docs/design.md "Retention caps"). */
#define ROUTER_STORE_ALIGN 4096u

struct router_config {
	size_t window;         /* retained bytes per stream; 0 = 1 MiB */
	size_t low_water;      /* XON when the lag falls to this; 0 = window/2 */
	size_t budget;         /* bound on the sum of all buffers; 0 = 1 GiB */
	uint32_t buffering_ms; /* partial-line flush delay; 0 = 100 ms */
	size_t buffering_size; /* flush a partial line at this size; 0 = 4 KiB */
	router_clock_fn clock; /* NULL = clock_gettime(CLOCK_REALTIME) */
	void *clock_ctx;
	iofs_log_t *log; /* borrowed, outlives the router; NULL = stderr */
	/* NULL = no storage: the window is all there is (docs/design.md). */
	const struct router_store_ops *store;
	void *store_ctx;
	/* Caps on what the store holds, bytes; 0 = none: per stream, per job
	 * (its rank streams and merged views), and in all. */
	uint64_t store_max_stream, store_max_job, store_max;
	/* Cap on what one owner's jobs hold, bytes (0 = none), for every
	 * owner but @store_user_exempt (the daemon's own uid). */
	uint64_t store_max_user;
	uint32_t store_user_exempt;
};

/*
 * Create a router on @base.  The calling thread becomes the loop thread (the
 * one that runs event_base_dispatch(@base)); see router_set_loop_thread().
 * For the blocking deliver form @base must have locking enabled
 * (evthread_use_pthreads() before event_base_new()).  @cfg may be NULL.
 * Returns 0, ROUTER_ERR_BAD_PARAM (@base or @out NULL) or -ENOMEM; *out
 * owns the router, free it with router_free().
 */
int router_new(struct event_base *base, const struct router_config *cfg,
               router_t **out);

/* Declare the calling thread the loop thread. */
void router_set_loop_thread(router_t *r);

/*
 * Shut the router down: complete every stream (partial lines flushed), answer
 * every parked reader (EOF via its ready callback), fail every pending push
 * with ROUTER_ERR_CANCELED, release every XOFF latch (counted as XON), fire
 * every outstanding callback exactly once.  Afterwards router_deliver() and
 * router_push() return ROUTER_ERR_NOT_AVAILABLE.  Idempotent.
 */
void router_shutdown(router_t *r);

/* router_shutdown() if needed, then free everything. NULL-safe. */
void router_free(router_t *r);

/* Flush partial lines whose delay expired.  The router's own loop timer
 * calls this; tests call it after moving their clock. */
void router_run_timers(router_t *r);

/* Run @fn(@arg) on the loop thread, soon.  Thread-safe.  Returns 0; the
 * expected outcomes ROUTER_ERR_NOT_AVAILABLE after shutdown,
 * ROUTER_ERR_INIT (@r NULL) or ROUTER_ERR_BAD_PARAM (@fn NULL); or the
 * fatal -ENOMEM.  On any non-0 return @fn is not called. */
int router_defer(router_t *r, void (*fn)(void *arg), void *arg);

/* ------------------------------------------------------------------------ */
/* Producers: publish (register) and unpublish (exit) a rank                */

enum router_state {
	ROUTER_STATE_RUNNING = 0,
	ROUTER_STATE_EXITED = 1,
	ROUTER_STATE_LOST = 2,
};
const char *router_state_name(enum router_state s); /* running|exited|lost */

/*
 * The adapter that owns a rank's producer side.  All ops run on the loop
 * thread, possibly synchronously inside any router call (router_deliver,
 * router_reader_read, router_reader_close, router_push, ...), and must not
 * call back into the router (the one exception: router_stdin_flow() from
 * inside stdin_write).  Any op may be NULL.
 */
struct router_source_ops {
	/* Stop (xoff=true) or resume reading @channel of @rank at its source.
	 * Called only on transitions of the (rank, channel) latch, so calls
	 * alternate strictly, starting with xoff=true. */
	void (*flow)(void *ctx, router_rank_t *rank, uint32_t channel, bool xoff);
	/* Forward stdin bytes; the adapter copies them before returning.
	 * Return 0 (the sink has them: done), -errno (the push then fails
	 * with ROUTER_ERR_PIPE), or ROUTER_STDIN_PENDING: the sink has them
	 * but learns later whether they arrived, and calls
	 * router_stdin_written() exactly once for this write, on the loop
	 * thread, never from inside an op.  Pending writes of a rank complete
	 * in the order they were made; later writes need not wait for them.
	 * The push that made the write completes only then. */
	int (*stdin_write)(void *ctx, router_rank_t *rank, const void *bytes,
	                   size_t len);
	/* The last stdin writer is gone: forward EOF. */
	void (*stdin_eof)(void *ctx, router_rank_t *rank);
	/* Optional: forward one broadcast to @targets (@n ranks of one job)
	 * in a single operation (PMIx: one push to the wildcard rank).  Used
	 * instead of a stdin_write per rank when every target has these same
	 * ops and nothing queued or held before it; @ctx is targets[0]'s.
	 * Returns like stdin_write, for all targets at once; after
	 * ROUTER_STDIN_PENDING, router_stdin_written() is due once for every
	 * target (each in its own rank's order). */
	int (*stdin_write_job)(void *ctx, router_rank_t *const *targets,
			       size_t n, const void *bytes, size_t len);
};

struct router_rank_info {
	int64_t pid;           /* -1 if unknown */
	const char *host;      /* copied; NULL = ""; router_text_valid() */
	uint32_t uid, gid;     /* the job's owner: fixed when it is created */
	bool private_job;      /* its files the owner's only (no group), fixed
	                        * with the owner (the forwarder's umask) */
	/* The name the run asked for when the daemon gave it another one
	 * (docs/filesystem.md, "Job names"); NULL = the nspace itself. */
	const char *requested;
	uint32_t job_size;     /* expected ranks, 0 = unknown */
	router_directives_t dirs; /* job-level defaults for the merged view */
};

/*
 * Register (publish) a running rank.  Creates the job if needed, owned by
 * @info's uid/gid for good.  If the job exists and is complete, it is
 * replaced (removed first; open readers keep the old one alive).
 * ROUTER_ERR_EXISTS if the rank is registered and running, or has ended
 * while its job still runs (no restart in place).  ROUTER_ERR_OWNER if
 * the job belongs to another uid (root included: nobody joins or replaces
 * another user's job); counted in the job's owner_refused and logged.
 * *out is valid until router_rank_exit() for it returns; @ops and
 * @ctx must stay valid until then.
 */
int router_rank_register(router_t *r, const router_proc_t *proc,
                         const struct router_rank_info *info,
                         const struct router_source_ops *ops, void *ctx,
                         router_rank_t **out);

/*
 * Unpublish: the rank ended (EXITED, with @exit_status as a wait() status
 * or 128+signal convention documented in docs/design.md) or its producer
 * vanished (LOST).  Completes its stdout/stderr (partial lines flushed),
 * releases every latch of the rank (counted), fails its pending pushes with
 * ROUTER_ERR_PIPE, forgets @ops.  Idempotent.  The rank object stays in the
 * job for readers and stats.
 */
void router_rank_exit(router_rank_t *rank, enum router_state state,
                      int exit_status);

/*
 * The producer's link to the daemon (a forwarder's connection), shown in
 * the rank's info as "link:" and "reconnects:".  ROUTER_LINK_NONE: no
 * link to speak of (PMIx, restored ranks).  Loop thread.
 */
enum router_link {
	ROUTER_LINK_NONE = 0,
	ROUTER_LINK_UP = 1,	 /* "connected" */
	ROUTER_LINK_WAITING = 2, /* "reconnecting": waiting for a resume */
	/* "connected", and the daemon reads the rank's pipes itself (the
	 * pipe hand-over, docs/protocol.md): info shows "path: handover" */
	ROUTER_LINK_HANDOVER = 3,
};
void router_rank_set_link(router_rank_t *rank, enum router_link link,
			  uint64_t reconnects);
/* @bytes of the rank's output its forwarder is sending again after a
 * resume (counted as bytes_replayed in its info). */
void router_rank_count_replayed(router_rank_t *rank, uint64_t bytes);
/* Restart: what @rank's earlier life recorded (its spool `state` line, or
 * its forwarder's RESUME): stdin_bytes rises to @stdin_bytes (never falls),
 * and its start and end on the wall clock (seconds) replace this life's
 * where non-zero.  Before router_rank_exit() of a restored rank, so that
 * the `state` its job's completion writes has them (an end given to a
 * running rank is shown once it ends, and router_rank_exit() keeps it). */
void router_rank_restore_history(router_rank_t *rank, uint64_t stdin_bytes,
				 int64_t started, int64_t ended);
/*
 * A running rank without source ops (restored from the spool, waiting for
 * its forwarder) gets @ops/@ctx: its producer is back.  ROUTER_SUCCESS,
 * or ROUTER_ERR_EXISTS if it has ops already or is not running.
 *
 * stdin: while such a rank waits (link ROUTER_LINK_WAITING, no ops), what
 * writers push is queued, not failed (they block, as behind an XOFF); the
 * rank being lost fails it.  Adopting leaves the rank's stdin XOFFed
 * (counted in stdin_xoff): the source calls router_stdin_flow(rank, false)
 * once it can take stdin, and the queue goes to it in order.
 */
int router_rank_adopt_source(router_rank_t *rank,
			     const struct router_source_ops *ops, void *ctx);
/* Has the rank source ops (a producer that can take XOFF or stdin)? */
bool router_rank_has_source(const router_rank_t *rank);

/*
 * Deliver forwarded output (PMIx_server_IOF_deliver(3) semantics).
 *
 * @source must name one rank.  An unregistered rank is registered on the fly
 * with no source ops (PMIx sources work like that).  @channel is exactly one
 * of STDOUT, STDERR, STDDIAG (STDDIAG goes to the stderr streams, tagged
 * <stddiag>).  @len may be 0 (with COMPLETE: just EOF).  Bytes after the
 * channel's COMPLETE or the rank's exit are dropped (dropped_bytes).
 *
 * Non-blocking (@cbfunc != NULL): returns ROUTER_SUCCESS = accepted; @cbfunc
 * fires exactly once, on the loop thread, never inside this call, with the
 * final status, when the router no longer needs @bytes; the caller keeps
 * @bytes and @dirs until then.  Any other return: not accepted, @cbfunc will
 * not fire, the caller may free at once.
 *
 * Blocking (@cbfunc == NULL): from any thread but the loop's, the work is
 * shifted into the loop and ROUTER_OPERATION_SUCCEEDED returned when done.
 * On the loop thread: ROUTER_WOULD_BLOCK at once, nothing done, a diagnostic
 * naming the call is logged.
 *
 * Other returns: ROUTER_ERR_INIT (r NULL), ROUTER_ERR_BAD_PARAM,
 * ROUTER_ERR_NOT_AVAILABLE (shut down), -ENOMEM.
 */
int router_deliver(router_t *r, const router_proc_t *source, uint32_t channel,
                   const void *bytes, size_t len,
                   const router_directives_t *dirs, router_op_cb_t cbfunc,
                   void *cbdata);

/*
 * Deliver up to @cap bytes from the pipe @fd of @source's @channel: the
 * rank's store takes them out of the pipe itself (store op splice_in) and
 * copies them into @buf (or points at them in its own memory), then they
 * are delivered as router_deliver() would; at most @cap and at most the
 * window (router_window()) at a time.
 * Whatever kills the daemon, each byte is either in the store or still in
 * the pipe (the pipe hand-over's exact resume, docs/design.md "Pipe
 * hand-over").  Loop thread, non-blocking form only (@cbfunc required).
 *
 * Valid replies:
 *   ROUTER_SUCCESS, *@taken > 0: that many bytes left the pipe, are in the
 *     store and in @buf, and were delivered; @cbfunc fires as for
 *     router_deliver() (keep @buf until then).
 *   ROUTER_AGAIN: the pipe is empty.  ROUTER_ERR_PIPE: it is at its end
 *     (no writer left); deliver the COMPLETE with router_deliver().
 *   ROUTER_STORE_FULL: nothing done, the store is full (ENOSPC, EDQUOT):
 *     read the pipe and router_deliver() this time; the bytes wait in the
 *     stream for the disk like any delivered ones (the XOFF latch, the
 *     retry timer, one log line), and the next call splices again.
 *   ROUTER_ERR_NOT_SUPPORTED: nothing done; this stream cannot take bytes
 *     from a pipe (no store, the store gave up, no splice_in, a complete
 *     stream, a filesystem without splice): read the pipe and use
 *     router_deliver().
 *   The other returns of router_deliver(), nothing done.
 */
int router_deliver_pipe(router_t *r, const router_proc_t *source,
                        uint32_t channel, int fd, void *buf, size_t cap,
                        const router_directives_t *dirs,
                        router_op_cb_t cbfunc, void *cbdata, size_t *taken);

/* ------------------------------------------------------------------------ */
/* Jobs and ranks: lookup, iteration, stats                                 */

/* Borrowed pointers, valid until the job is removed or replaced; take a
 * reference to keep one longer. */
router_job_t *router_job_lookup(router_t *r, const char *nspace);
router_job_t *router_job_first(router_t *r);
router_job_t *router_job_next(router_job_t *job);
/* Keep a job (and all its ranks and streams) alive after removal. */
router_job_t *router_job_ref(router_job_t *job);
void router_job_unref(router_job_t *job); /* NULL-safe */

const char *router_job_nspace(const router_job_t *job);
bool router_job_removed(const router_job_t *job); /* unlinked from registry */
/* Ranks in ascending order: router_job_rank_at(job, 0 .. count-1). */
size_t router_job_rank_count(const router_job_t *job);
/* The job's owner (set by its first rank), in O(1): for getattr, where
 * router_job_stats() (O(ranks)) would be too slow for big jobs. */
void router_job_owner(const router_job_t *job, uint32_t *uid, uint32_t *gid);
/* The owner asked for no group access (router_rank_info.private_job). */
bool router_job_private(const router_job_t *job);
/* Jobs in the registry (running or complete) owned by @uid.  O(1). */
size_t router_uid_jobs(router_t *r, uint32_t uid);
/* The window (router_config.window, or its default): the lag at which a
 * blocking reader XOFFs its producer; a producer's read of more than it
 * would overshoot that by the difference. */
size_t router_window(const router_t *r);
router_rank_t *router_job_rank_at(const router_job_t *job, size_t i);
router_rank_t *router_job_rank(const router_job_t *job, uint32_t rank);
router_job_t *router_rank_job(const router_rank_t *rank);
uint32_t router_rank_id(const router_rank_t *rank);

/* The job's ranks all ended (and its announced size was reached). */
bool router_job_complete(const router_job_t *job);
/* Some open file of the job's tree still has bytes to give (a reader
 * short of the end, or of a live stream), or a stdin writer is attached.
 * A reader that read everything of an ended job does not count: its
 * close may still be on its way (FUSE releases asynchronously).
 * O(ranks + readers). */
bool router_job_in_use(const router_job_t *job);
/* The announced job size (largest of its ranks'), 0 = unknown.  O(1). */
uint32_t router_job_size(const router_job_t *job);
/* The name its run asked for (== nspace unless the daemon renamed it). */
const char *router_job_requested(const router_job_t *job);
/* A producer's word to the job's users about what it cannot do (e.g. a
 * launcher that reports no per-rank exit codes): one line each, shown as
 * "note: TEXT" in the job's info; the same text is kept once, control
 * characters are refused (router_text_valid).  At most ROUTER_NOTES_MAX
 * notes.  0, ROUTER_ERR_BAD_PARAM or -ENOMEM.  Loop thread. */
#define ROUTER_NOTES_MAX 8
int router_job_note(router_job_t *job, const char *text);
/* The @i-th note (0-based), or NULL past the last one. */
const char *router_job_note_at(const router_job_t *job, size_t i);
/* The command line its ranks run, as a producer said it (shown as
 * "command: TEXT" in the job's and its ranks' info, kept in the spool's
 * `state`): the first one said is kept, later ones are ignored (an MPMD
 * job's other commands too).  At most ROUTER_COMMAND_MAX bytes, no control
 * characters.  0, ROUTER_ERR_BAD_PARAM or -ENOMEM.  Loop thread. */
#define ROUTER_COMMAND_MAX 1100
/* What ends a command line its producer had to cut (each producer cuts at
 * a whole word, well under ROUTER_COMMAND_MAX). */
#define ROUTER_COMMAND_CUT " [...]"
int router_job_set_command(router_job_t *job, const char *text);
/* Its command line, "" if nobody said. */
const char *router_job_command(const router_job_t *job);
/* @uid tried to join or replace @job of another owner (@what: "join",
 * "replace"...): count it (owner_refused in the job's info) and log it
 * with both uids. */
void router_job_owner_refused(router_job_t *job, uint32_t uid,
			      const char *what);

/*
 * Restart from storage (the spool): give @job, created by registering its
 * ranks, the job handle @jh of its earlier life, then each of its streams
 * (@rank or ROUTER_RANK_WILDCARD, @channel STDOUT or STDERR) the store
 * handle @h already holding @size bytes: they become the stream's history
 * (readable from byte 0, counted in its size), and the router owns the
 * handles from here (closes them).  Before any byte of that stream;
 * ROUTER_ERR_EXISTS otherwise, ROUTER_ERR_NOT_AVAILABLE without storage
 * (the handles stay the caller's then).
 */
int router_job_adopt_store(router_job_t *job, void *jh);
int router_stream_adopt(router_job_t *job, uint32_t rank, uint32_t channel,
			void *h, uint64_t size);
/* Restart: the stream shows @mtime_ns (ns since the epoch: when its earlier
 * life last changed it) as its mtime until its next byte, instead of this
 * life's start; ls -l, ls -t and find -newer then see the job's times.
 * ROUTER_SUCCESS, ROUTER_ERR_BAD_PARAM or ROUTER_ERR_NOT_FOUND. */
int router_stream_restore_mtime(router_job_t *job, uint32_t rank,
				uint32_t channel, uint64_t mtime_ns);
/*
 * Restart: bytes [@at, @at + @n) of @rank's adopted @channel history that
 * the adopted merged view lacks (the daemon died before it stored the
 * view's last batch, or a partial line it held) go into the view now, as
 * if they had just arrived; in order, before the rank ends.  0, or a
 * negative errno from the view's store, or ROUTER_ERR_BAD_PARAM (a
 * range outside the history, a completed stream), ROUTER_ERR_NOT_FOUND.
 */
int router_stream_refeed(router_job_t *job, uint32_t rank, uint32_t channel,
			 uint64_t at, const void *p, size_t n);
/*
 * Restart: where @rank's line stands in the adopted merged view of
 * @channel: its last byte there ended mid-line (@midline: its next piece
 * is a continuation, tagged "+"), and the view ends inside that line
 * (@open: the next piece of another rank ends it with "\n" first, the
 * rank's own continues it).  Before any new byte of the rank.
 */
int router_stream_view_line(router_job_t *job, uint32_t rank,
			    uint32_t channel, bool midline, bool open);

/* Remove a job from the registry (rmdir).  ROUTER_ERR_BUSY while any rank
 * runs.  A job whose ranks all ended short of its job_size is completed
 * first (merged views reach EOF).  Open readers keep their references. */
int router_job_remove(router_t *r, router_job_t *job);

struct router_stats {
	enum router_state state; /* job: running until every known rank ended */
	int64_t pid;             /* rank only; -1 for jobs */
	const char *host;        /* rank only, borrowed; "" for jobs */
	int exit_status;         /* rank; job: first non-zero, else 0 */
	uint32_t uid, gid;
	uint32_t ranks;    /* job: registered ranks; rank: 1 */
	uint32_t job_size; /* as announced, 0 = unknown */
	uint64_t stdout_bytes, stderr_bytes, stdin_bytes;
	uint64_t stdout_xoff, stdout_xon, stderr_xoff, stderr_xon;
	uint64_t stdin_xoff, stdin_xon;
	/* Discarded unread beyond the window: bytes that left the retained
	 * window before some attached reader had read them (all of them with
	 * no reader attached), and bytes delivered after EOF. */
	uint64_t dropped_bytes;
	uint64_t stdin_discarded; /* undeliverable stdin at rank exit */
	/* stdin a sink holds pending (ROUTER_STDIN_PENDING), not yet
	 * acknowledged: neither in stdin_bytes nor discarded yet */
	uint64_t stdin_unacked;
	/* Job only: the same for the merged views (not in dropped_bytes,
	 * which, like every job counter, is the sum over the ranks). */
	uint64_t merged_dropped_bytes;
	/* What the store (the spool) holds: rank, its two streams; job, all
	 * of its streams and merged views.  0 without storage. */
	uint64_t spool_bytes;
	/* What a cap took from the start of the rank streams (their first
	 * bytes a reader from byte 0 no longer gets, whether or not a reader
	 * had read them: dropped_bytes counts only what nobody had). */
	uint64_t evicted_bytes;
	/* Job only: attempts by other uids to join or replace it. */
	uint64_t owner_refused;
	/* Rank only: router_rank_set_link() */
	enum router_link link;
	uint64_t reconnects; /* job: the sum over its ranks */
	uint32_t ranks_waiting; /* running ranks "reconnecting" (job: sum) */
	uint64_t replayed;	/* router_rank_count_replayed() (job: sum) */
	/* Wall clock seconds: a rank's registration and end; a job's first
	 * rank's start and, once complete, its last rank's end.  0: not yet
	 * (ended while running). */
	int64_t started, ended;
};
void router_job_stats(const router_job_t *job, struct router_stats *out);
void router_rank_stats(const router_rank_t *rank, struct router_stats *out);

/* Stream attributes for getattr.  @rank may be ROUTER_RANK_WILDCARD (the
 * merged view).  size = bytes produced so far (never shrinks); mtime_ns =
 * time of the last append (or of creation); complete = EOF reached. */
struct router_stream_attr {
	uint64_t size;
	uint64_t mtime_ns;
	bool complete;
};
int router_stream_attr(router_job_t *job, uint32_t rank, uint32_t channel,
                       struct router_stream_attr *out);

/* ------------------------------------------------------------------------ */
/* Readers (pull)                                                            */

enum {
	/* The reader does not hold the producer back: if it lags beyond the
	 * window, bytes are discarded under it (counted) instead of XOFF. */
	ROUTER_READER_NONBLOCK = 1u << 0,
};

/*
 * Attach a reader to one stream: @rank's @channel (STDOUT|STDERR), or the
 * merged view with @rank == ROUTER_RANK_WILDCARD.  Its cursor starts at the
 * oldest retained byte.  Unless NONBLOCK, an attached reader is a consumer
 * in the flow-control sense: while its cursor lags the stream end by more
 * than the window, the producer(s) are XOFFed; the lag falling to the low
 * watermark, or the reader closing, releases them.
 * @ready fires on the loop thread from a deferred loop event (never
 * synchronously inside a router call), after new bytes were appended or the
 * stream completed; notifications coalesce and may be spurious.  It may call
 * router_reader_read() but must not close the reader.
 * Takes a reference on the job.  Returns 0 or a code.
 */
int router_reader_open(router_job_t *job, uint32_t rank, uint32_t channel,
                       unsigned flags, void (*ready)(void *cbdata),
                       void *cbdata, router_reader_t **out);

/*
 * Read up to @size bytes at file offset @off.  Offsets are absolute stream
 * positions, except that a reader whose first read was at 0 and that asks
 * at 0 for discarded bytes is moved to the oldest retained byte, and its
 * later offsets keep that skew while it reads on from where its last read
 * ended, so it neither fails nor sees garbage or repeats; a read at any
 * other offset (a seek, a step back onto 0) is absolute, and discarded
 * bytes read as zeros from there on (a punched hole: tac, tail -n),
 * followed by the retained bytes in the same reply (docs/filesystem.md).
 * Returns ROUTER_SUCCESS with *n > 0 and @iov (1 or 2 entries, pointing into
 * the router's buffer: valid until the next router call) filled, or
 * ROUTER_SUCCESS with *n == 0 at the end of a completed stream (EOF), or
 * ROUTER_AGAIN at the live end, or ROUTER_ERR_BAD_PARAM for @size 0.
 * Moves the reader's cursor to the end of what it returned (which may
 * release an XOFF).
 */
int router_reader_read(router_reader_t *rd, uint64_t off, size_t size,
                       struct iovec iov[2], int *iovcnt, size_t *n);

/* Bytes available at @off without blocking (0 at the live end or EOF). */
uint64_t router_reader_avail(router_reader_t *rd, uint64_t off);
/* True once the stream has completed and @off is at (or past) its end. */
bool router_reader_eof(router_reader_t *rd, uint64_t off);
/* True once the stream has completed (its producer's end, an exit, a
 * shutdown). */
bool router_reader_complete(const router_reader_t *rd);

/* Detach; releases any latch this reader held.  NULL-safe.  @ready will
 * not fire after this returns.  Drops the job reference. */
void router_reader_close(router_reader_t *rd);

/* ------------------------------------------------------------------------ */
/* Subscribers (subscribe): a callback per fragment, for in-process sinks     */

enum {
	/* A local sink (console, output files): skips fragments delivered with
	 * LOCAL_OUTPUT=false. */
	ROUTER_SUB_LOCAL = 1u << 0,
};

/* Per-rank raw fragment, synchronously from inside router_deliver() on the
 * loop thread.  Completion of a channel arrives as @len == 0 with
 * ROUTER_DIR_COMPLETE set in @dirs.  @bytes and @dirs are borrowed. */
typedef void (*router_fragment_fn)(void *cbdata, const router_proc_t *src,
                                   uint32_t channel, const void *bytes,
                                   size_t len, const router_directives_t *dirs);

/* @nspace NULL = every job; @rank may be ROUTER_RANK_WILDCARD; @channels is a
 * mask.  *out stays valid until router_unsubscribe(). */
int router_subscribe(router_t *r, const char *nspace, uint32_t rank,
                     uint32_t channels, unsigned flags, router_fragment_fn cb,
                     void *cbdata, router_sub_t **out);
void router_unsubscribe(router_sub_t *sub); /* NULL-safe */

/* ------------------------------------------------------------------------ */
/* stdin (push)                                                              */

enum {
	ROUTER_PUSH_COMPLETE = 1u << 0, /* EOF after the bytes (len may be 0) */
};

/*
 * Push stdin bytes to @rank of @job, or to every rank (broadcast) with
 * ROUTER_RANK_WILDCARD.  Per rank, pushes reach the sink in call order.
 * While a target's sink is XOFFed (router_stdin_flow()), the push waits for
 * it; a broadcast completes when the slowest target has taken it.
 * Returns ROUTER_SUCCESS (accepted; @cbfunc fires exactly once, never inside
 * this call, with ROUTER_SUCCESS once every target took the bytes, or
 * ROUTER_ERR_PIPE / ROUTER_ERR_CANCELED), or an error (not accepted, no
 * callback): ROUTER_ERR_PIPE (every target has exited), ROUTER_ERR_NOT_FOUND,
 * ROUTER_ERR_NOT_AVAILABLE.  The caller keeps @bytes until the callback.
 * If @handle is non-NULL it receives a handle for router_push_cancel(),
 * valid until the callback fires.
 */
int router_push(router_job_t *job, uint32_t rank, const void *bytes,
                size_t len, unsigned flags, router_op_cb_t cbfunc,
                void *cbdata, router_push_t **handle);

/*
 * Withdraw a pending push (an interrupted write).  Returns the bytes already
 * consumed: 0 if no target took them yet (nothing will be sent), or len if
 * at least one broadcast target took them (the rest still receive them in
 * the background: a broadcast is never half-delivered; the router then keeps
 * its own copy of @bytes).  A push whose bytes a sink holds pending
 * (ROUTER_STDIN_PENDING) counts as consumed.  After this returns the push's
 * callback will not fire and the caller may free @bytes.
 */
size_t router_push_cancel(router_push_t *push);

/* The source adapter reports its rank's stdin sink backed up (xoff=true) or
 * drained.  Counted as stdin_xoff / stdin_xon; an XOFF outstanding at
 * router_rank_exit() is released and counted as XON.  May also be called
 * from inside ops->stdin_write() (the write that filled the sink says so at
 * once; later pushes then wait). */
void router_stdin_flow(router_rank_t *rank, bool xoff);

/*
 * The oldest ROUTER_STDIN_PENDING write of @rank has completed: @status 0
 * (the bytes arrived; counted in stdin_bytes) or -errno (that slice of its
 * push fails with ROUTER_ERR_PIPE; counted in stdin_discarded).  Loop
 * thread, never inside an op.  A call without a pending write, or after
 * router_rank_exit(), is ignored: router_rank_exit() fails the writes still
 * pending with ROUTER_ERR_PIPE and counts their bytes in stdin_discarded
 * (unacknowledged: their fate is unknown).
 */
void router_stdin_written(router_rank_t *rank, int status);

/*
 * Writers (the FIFO rule).  A writer attaches to one rank or to the job
 * (ROUTER_RANK_WILDCARD).  When a rank that has had a writer is left with no
 * writer on either its own stdin or the job's, it gets EOF (after every
 * pending push).  Returns 0 or ROUTER_ERR_PIPE / ROUTER_ERR_NOT_FOUND.
 */
int router_stdin_attach(router_job_t *job, uint32_t rank);
void router_stdin_detach(router_job_t *job, uint32_t rank);

/* ------------------------------------------------------------------------ */
/* Flush                                                                     */

/* @cbfunc fires (loop thread, never inside this call) once every push
 * accepted before this call has reached its sinks (or failed) and every
 * deliver accepted before it has completed.  Returns 0 or a code. */
int router_flush(router_t *r, router_op_cb_t cbfunc, void *cbdata);

#endif /* IOFS_ROUTER_H */
