/* SPDX-License-Identifier: MIT */
/* Private: jobs, ranks, their streams and latches. */
#ifndef IOFS_ROUTER_JOB_I_H
#define IOFS_ROUTER_JOB_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "router/router.h"
#include "router/stream_i.h"

struct push_slice;

/* Channel index of the per-rank and merged streams: 0 stdout, 1 stderr
 * (STDDIAG goes to the stderr streams, tagged <stddiag>). */
enum { CI_OUT = 0, CI_ERR = 1, CI_N = 2 };

/* Merged-view line discipline state of one (rank, channel). */
struct line_state {
	TAILQ_ENTRY(line_state) pend_link; /* r->pend while queued */
	char *buf; /* pending partial line, NULL when none */
	uint32_t len, cap;
	uint64_t off;	/* the rank stream offset of the first pending byte */
	uint64_t since; /* arrival of the first pending byte */
	uint64_t due;	/* timer flush time; r->pend is ordered by it */
	router_directives_t
	    dirs;	  /* effective directives of the pending bytes */
	uint32_t channel; /* channel named in the tag */
	bool queued;	  /* on r->pend */
	bool midline;	  /* the rank's last piece in the view ended mid-line */
};

struct rank_chan {
	struct stream s; /* the exact bytes the rank wrote */
	struct line_state ls;
	router_rank_t *rank; /* back pointer (callbacks get the stream) */
	uint8_t reasons;     /* the (rank, channel) latch: SUSPEND_* bits */
	uint64_t xoff, xon;
	/* deliver_to() between the append and line_feed(): the merged view
	 * has not taken the rank's bytes from @feed_from on, and the caps
	 * wait for it (@caps_due: store_caps() runs after line_feed()) */
	bool feeding, caps_due;
	uint64_t feed_from;
};

/* The rank channel whose stream @s is (@s not a merged view's). */
static inline struct rank_chan *rank_chan_of(struct stream *s)
{
	return (struct rank_chan *)((char *)s - offsetof(struct rank_chan, s));
}

struct router_rank {
	router_job_t *job;
	uint32_t id;
	enum router_state state;
	int exit_status;
	int64_t pid;
	char *host;			     /* owned, never NULL */
	const struct router_source_ops *ops; /* NULL after exit */
	void *ctx;
	struct rank_chan ch[CI_N];
	/* stdin */
	TAILQ_HEAD(, push_slice) fifo; /* pending slices, call order */
	TAILQ_HEAD(, push_slice) sent; /* in the sink, completion pending */
	uint64_t stdin_bytes, stdin_xoff, stdin_xon, stdin_discarded;
	uint64_t stdin_unacked; /* bytes of the slices on @sent */
	uint32_t writers; /* attached writers of this rank's stdin */
	bool stdin_held;  /* sink reported XOFF */
	bool had_writer;  /* some writer has been attached */
	bool eof_sent;	  /* EOF forwarded or queued: no more pushes */
	bool pumping;	  /* inside rank_pump(): ops->stdin_write running */
	/* The producer's link (router_rank_set_link), for info. */
	enum router_link link;
	uint64_t reconnects;
	uint64_t replayed; /* output its forwarder sent again after resumes */
	/* wall clock seconds (time()): registered, ended (0 while running);
	 * router_rank_restore_history() puts an earlier life's back */
	int64_t started, ended;
};

/* A piece of a merged view waiting to be stored (router/mrec.c): its
 * literal prefix (in the view's ring), then @rlen bytes of rank stream
 * @src from @roff with @tag after each inner newline.  All literal (@src
 * NULL): @cover, if set, is the rank stream whose bytes up to @cover_end
 * the literal bytes hold (XML escapes them), so that a restart knows what
 * of that rank the view has (fs/spool_mview.c spool_mview_cover()). */
#define MREC_TAG_MAX 384
struct mrec {
	uint64_t moff, mlen; /* where in the view, how many bytes */
	uint32_t plen;	     /* literal prefix bytes */
	bool nl_end;	     /* the rank bytes end with a newline */
	struct stream *src;  /* NULL: all literal */
	uint64_t roff, rlen;
	struct stream *cover; /* all literal: whose bytes it holds, or NULL */
	uint64_t cover_end;   /* ... up to there */
	uint16_t taglen;
	char tag[MREC_TAG_MAX];
};

struct merged {
	struct stream s; /* first: stream.c finds the view from it */
	struct line_state *open; /* whose line is open (unterminated) in it */
	router_job_t *job;
	/* Its pieces not yet stored, covering [s.stored, s.end) when the
	 * store takes pieces by reference (router_store_ops.append_ref). */
	struct mrec *recs;
	size_t rhead, nrec, rcap; /* recs[rhead, nrec) pending */
	bool follow; /* a rank stream of the job evicted: held_from() */
	bool noref;  /* the store took no reference: everything as it is */
};

struct router_job {
	TAILQ_ENTRY(router_job) link;	  /* r->jobs while registered */
	TAILQ_ENTRY(router_job) all_link; /* r->all_jobs until freed */
	router_t *r;
	char *nspace;
	unsigned refs; /* the registry's + readers' + router_job_ref()'s */
	bool removed;
	bool owner_counted; /* counted in r->uid_jobs */
	router_rank_t **ranks; /* sorted by id */
	size_t nranks, rcap;
	uint32_t running; /* ranks in state RUNNING */
	uint32_t uid, gid, job_size;
	bool owner_set;		/* uid/gid fixed (a registration named them) */
	bool private_job;	/* ... and no group access, with them */
	char *requested;	/* owned; NULL = same as nspace */
	uint64_t owner_refused; /* other uids refused (join, replace) */
	char *notes[ROUTER_NOTES_MAX]; /* owned; router_job_note() */
	char *command; /* owned, NULL until router_job_set_command() */
	size_t nnotes;
	router_directives_t dirs; /* job defaults for the merged view */
	int exit_status;	  /* first non-zero */
	bool any_lost;
	bool complete;
	uint32_t writers; /* writers attached to the job's stdin */
	struct merged m[CI_N];
	void *store;	   /* router_store_ops job handle, NULL until needed */
	bool store_failed; /* job_open failed: logged once, no storage */
	bool store_discard; /* removed (not by router_free): storage may go */
	uint64_t store_bytes; /* what its streams' stores hold */
	TAILQ_ENTRY(router_job) done_link; /* r->store_done while on_done */
	bool on_done;
	/* "over the per-user cap, nothing its readers keep" logged (once) */
	bool user_over_logged;
	TAILQ_ENTRY(router_job) state_link; /* r->state_dirty while dirty */
	bool state_dirty;
};

/* 0 or ROUTER_ERR_BAD_PARAM; *ci set. */
int job_channel_index(uint32_t channel, int *ci);
/* Find or create (replacing a complete one) the job and the rank. */
int job_rank_get(router_t *r, const router_proc_t *proc,
		 const struct router_rank_info *info,
		 const struct router_source_ops *ops, void *ctx,
		 bool must_be_new, router_rank_t **out);
/* job_deliver() of what the rank's store takes from the pipe @fd first
 * (router_deliver_pipe(), its replies). */
int job_deliver_pipe(router_t *r, const router_proc_t *source,
		     uint32_t channel, int fd, void *buf, size_t cap,
		     const router_directives_t *d, size_t *taken);
/* The deliver work itself, on the loop thread. */
int job_deliver(router_t *r, const router_proc_t *source, uint32_t channel,
		const void *bytes, size_t len, const router_directives_t *d);
/* Shutdown: complete everything, release every latch. */
void job_shutdown(router_job_t *job);
/* The job's storage handle, opened on first use: NULL if the router has
 * no storage or it failed (logged once). */
void *job_store(router_job_t *job);
/* Record the job's state in its storage (restart), if it has some. */
void job_state_save(router_job_t *job);
/* A rank of the running @job came or ended: its state is recorded (and
 * its storage opened: a job that printed nothing yet survives a restart)
 * within STATE_DELAY_MS, once for all that changed meanwhile (and at
 * shutdown).  Loop thread. */
void job_state_mark(router_job_t *job);
/* Off r->state_dirty (idempotent): saved, or freed. */
void job_state_unmark(router_job_t *job);
/* Record the state of every marked job. */
void store_state_flush(router_t *r);
/* Apply the caps after @s's store took bytes (router/store.c). */
void store_caps(struct stream *s);
/* The store is full: evict the oldest complete job (not @writing) that
 * holds bytes.  true if that freed some. */
bool store_make_room(router_t *r, router_job_t *writing);
/* True when @job's owner is at the per-owner cap (router.max_user) even
 * after evicting what it may (its complete jobs, then @job's and its
 * other running jobs' oldest bytes) and blocking readers of that owner's
 * jobs keep the rest.  Its streams' writes wait (store_wait(),
 * SUSPEND_SPOOL) until it is not.  With no such reader nothing would ever
 * change (what is left is the views' index, blocks not yet whole):
 * false, the cap is exceeded, logged once per job. */
bool store_user_full(router_job_t *job);
/* The job completed / is freed: on / off r->store_done. */
void store_job_done(router_job_t *job);
void store_job_forget(router_job_t *job);
/* Merged views stored by reference (router/mrec.c). */
/* The view takes records (the store has append_ref and works). */
bool mrec_on(const struct merged *m);
/* A piece: @plen literal bytes at view offset @moff (@lit, for the merge
 * test), then @rlen bytes of @src from @roff (@nl_end: they end a line),
 * with @tag at the start of each further line. */
void mrec_add(struct merged *m, uint64_t moff, const char *lit, size_t plen,
	      struct stream *src, uint64_t roff, uint64_t rlen, bool nl_end,
	      const char *tag, size_t taglen);
/* A piece of @len literal bytes at view offset @moff that holds rank
 * stream @cover's bytes up to @cover_end (escaped: XML), or no rank bytes
 * (@cover NULL: a newline that ends another rank's line). */
void mrec_add_lit(struct merged *m, uint64_t moff, size_t len,
		  struct stream *cover, uint64_t cover_end);
/* A cap must not evict a rank's bytes before its merged view has stored
 * its reference to them: the view would store them as they are, and hold
 * bytes of the rank that the rank's file no longer does.  For rank stream
 * @src, the first byte the view has not taken yet (a partial line
 * pending, bytes being delivered), and the first byte a piece of the view
 * not stored yet refers to; UINT64_MAX: none (or a view stored as it is,
 * which holds copies anyway). */
uint64_t mrec_unfed_from(const struct stream *src);
uint64_t mrec_unstored_from(const struct stream *src);
/* Forget the records past the view's end (an append failed). */
void mrec_trim(struct merged *m);
void mrec_free(struct merged *m);
/* Store the next piece of @m (from s.stored): bytes taken or -errno;
 * -EAGAIN: its rank's bytes are not in the rank's store yet (held for a
 * full disk or the owner's cap), the view waits for them. */
ssize_t mrec_write(struct merged *m);
/* After rank streams of @job evicted: the views follow (held_from). */
void mrec_follow(router_job_t *job);
/* router_free(): drop the job whatever its references. */
void job_destroy(router_job_t *job);

#endif
