/* SPDX-License-Identifier: MIT */
/*
 * iofs wire protocol codec (docs/protocol.md is the specification).
 *
 * Pure functions over byte buffers: no sockets, no allocation, no global
 * state.  Both ends use it: the daemon (net/server.c) decodes what
 * forwarders send, iofs-run (net/run*.c) decodes what the daemon sends.
 *
 * Framing: every frame is
 *     u32 length   bytes that follow this field (type + body), little-endian
 *     u8  type     enum proto_type
 *     ... body     fixed fields, then at most one trailing byte string
 * A frame's length is at most PROTO_FRAME_MAX.  The first frame of a
 * forwarder is HELLO (magic + version); the first frame of the daemon is
 * WELCOME or ERROR.
 *
 * Ownership: struct proto_frame's pointer fields (data, nspace, host, msg)
 * borrow the buffer given to proto_decode(); they are valid as long as that
 * buffer is.  Strings are NOT NUL-terminated: use the *_len fields.
 */
#ifndef IOFS_NET_PROTO_H
#define IOFS_NET_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PROTO_MAGIC	  0x53464f49u /* "IOFS" as little-endian bytes */
#define PROTO_VERSION	  4	      /* 4: resume (HELD, RESUME) */
#define PROTO_VERSION_MIN 2	      /* 2: STDIN_ACK (stdin credit) */
#define PROTO_PAYLOAD_MAX (1u << 20)  /* bytes in one DATA/STDIN frame */
#define PROTO_FRAME_MAX	  (PROTO_PAYLOAD_MAX + 1024u) /* length field limit */
#define PROTO_LEN_SIZE	  4
#define PROTO_HDR_SIZE	  5 /* length + type */
#define PROTO_HOST_MAX	  255
#define PROTO_MSG_MAX	  1024	/* ERROR text */
#define PROTO_COMMAND_MAX 1024	/* COMMAND text */
#define PROTO_RANKS_MAX	  65536 /* ranks one HELLO may announce */
#define PROTO_CRED_MAX	  4096	/* HELLO v3 credential bytes */

enum proto_type {
	PROTO_HELLO = 1,      /* F->D  first frame: who we are */
	PROTO_WELCOME = 2,    /* D->F  HELLO accepted */
	PROTO_ERROR = 3,      /* D->F  refused / protocol error, then close */
	PROTO_RANK_START = 4, /* F->D  a rank of the HELLO range started */
	PROTO_DATA = 5,	      /* F->D  output bytes */
	PROTO_COMPLETE = 6,   /* F->D  channel closed (EOF) */
	PROTO_EXIT = 7,	      /* F->D  rank ended */
	PROTO_STDIN = 8,      /* D->F  stdin bytes for a rank */
	PROTO_STDIN_EOF = 9,  /* D->F  close a rank's stdin */
	PROTO_XOFF = 10,      /* both  stop sending (rank, channel) */
	PROTO_XON = 11,	      /* both  resume (rank, channel) */
	PROTO_ACK = 12,	      /* D->F  cumulative receipt */
	PROTO_STDIN_ACK = 13, /* F->D  stdin bytes a rank's queue let go */
	PROTO_HELD = 14,      /* D->F  v4: what the daemon holds of a rank */
	PROTO_RESUME = 15,    /* F->D  v4: stdin a rank's forwarder holds */
	PROTO_COMMAND = 16,   /* F->D  the ranks' command line, for info */
	PROTO_TYPE_MAX = 16,
};

/* Which side decodes: a daemon decodes forwarder frames and vice versa. */
enum proto_role {
	PROTO_ROLE_DAEMON = 0,
	PROTO_ROLE_FORWARDER = 1,
};

/* EXIT "how" */
enum {
	PROTO_EXIT_CODE = 0,   /* code = exit status 0..255 */
	PROTO_EXIT_SIGNAL = 1, /* code = signal number 1..127 */
};

/* Decoder results: 0 = a frame, 1 = need more bytes, >= 2 = protocol
 * error (close the connection, log proto_strerror() and the detail). */
enum {
	PROTO_OK = 0,
	PROTO_NEED_MORE = 1,
	PROTO_ERR_TYPE = 2,	  /* unknown frame type */
	PROTO_ERR_LENGTH = 3,	  /* length does not fit the frame's layout */
	PROTO_ERR_OVERSIZE = 4,	  /* length > PROTO_FRAME_MAX */
	PROTO_ERR_MAGIC = 5,	  /* HELLO without the magic */
	PROTO_ERR_VERSION = 6,	  /* unsupported protocol version */
	PROTO_ERR_NSPACE = 7,	  /* invalid namespace */
	PROTO_ERR_ORDER = 8,	  /* frame before HELLO/WELCOME, second HELLO */
	PROTO_ERR_RANK = 9,	  /* rank outside the HELLO range */
	PROTO_ERR_CHANNEL = 10,	  /* channel not valid for this frame */
	PROTO_ERR_DIRECTION = 11, /* frame not valid in this direction */
	PROTO_ERR_FIELD = 12,	  /* another field out of range */
};

/* ERROR frame codes beyond the protocol errors above (which an ERROR may
 * also carry): the daemon refused a well-formed request. */
enum {
	PROTO_REFUSED_EXISTS = 32, /* a rank of the HELLO range is running */
	PROTO_REFUSED_REMOTE = 33, /* TCP peer not on loopback */
	PROTO_REFUSED_ROUTER = 34, /* the router failed or is shutting down */
	PROTO_REFUSED_AUTH = 35,   /* no valid credential (TCP, auth=munge) */
	PROTO_REFUSED_LIMIT = 36,  /* a per-user limit (iofs(8) -o max_*) */
	PROTO_REFUSED_RESUME = 37, /* resume refused: window over, other uid */
};

/* HELLO flags */
enum {
	/* The forwarder reads the job name the daemon assigned in WELCOME
	 * (it may differ from the one asked for: docs/filesystem.md). */
	PROTO_HELLO_F_NAME = 1u << 0,
	/* Version 4: this is a reconnect of a running job (its name is the
	 * one WELCOME gave); the daemon answers with one HELD frame per
	 * rank of the range before WELCOME or ERROR. */
	PROTO_HELLO_F_RESUME = 1u << 1,
	/* Unix socket only: the forwarder offers to hand each rank's pipes
	 * over (docs/protocol.md, "Pipe hand-over").  A daemon that does
	 * not answer PROTO_WELCOME_F_HANDOVER (older, or TCP) gets DATA
	 * frames as before. */
	PROTO_HELLO_F_HANDOVER = 1u << 2,
	/* The job's files are its owner's only, no group access: the
	 * forwarder's umask denies its group reading (077, 047: private;
	 * 027, 022, 002: the group reads).  Fixed by the HELLO that creates
	 * the job; an older daemon ignores it (group-readable). */
	PROTO_HELLO_F_PRIVATE = 1u << 3,
	/* The name is the launcher's (or iofs-run's COMMAND.PID), not
	 * --nspace: an ended job of that name is never replaced, the run
	 * takes the next free incarnation (two iofs-run in one sbatch
	 * script are both JOBID.batch; a requeued job repeats its step ids).
	 * An older daemon ignores it (replaces, as before). */
	PROTO_HELLO_F_KEEP = 1u << 4,
};
/* WELCOME flags */
enum {
	/* The trailing bytes are the assigned nspace. */
	PROTO_WELCOME_F_NAME = 1u << 0,
	/* Hand-over accepted: every RANK_START carries the rank's stdin
	 * write end, stdout and stderr read ends (SCM_RIGHTS, that order). */
	PROTO_WELCOME_F_HANDOVER = 1u << 1,
	/* Say the ranks' command line (one COMMAND frame, before any
	 * RANK_START); an older daemon does not ask, and would refuse the
	 * frame type. */
	PROTO_WELCOME_F_COMMAND = 1u << 2,
};
/* COMMAND flags */
enum {
	/* The forwarder cut the command line at PROTO_COMMAND_MAX bytes. */
	PROTO_COMMAND_F_CUT = 1u << 0,
};

struct proto_hello {
	uint16_t version;
	uint16_t flags; /* PROTO_HELLO_F_*; other bits ignored */
	uint32_t rank_base;
	uint32_t rank_count; /* 1..PROTO_RANKS_MAX */
	uint32_t job_size;   /* 0 = unknown */
	uint32_t pid;	     /* the forwarder's pid */
	uint32_t uid, gid;   /* hints; Unix sockets use SO_PEERCRED instead */
	uint32_t dirs_set, dirs_value; /* router_directives_t */
	const char *nspace;	       /* borrowed, not NUL-terminated */
	size_t nspace_len;
	const char *host; /* borrowed, not NUL-terminated */
	size_t host_len;
	/* Version 3: a MUNGE credential (text), 0..PROTO_CRED_MAX bytes;
	 * version 2 has none (cred_len 0).  Borrowed. */
	const char *cred;
	size_t cred_len;
};

/* HELD: the rank's state in the daemon. */
enum {
	PROTO_HELD_RESERVED = 0, /* no RANK_START seen: send it again */
	PROTO_HELD_RUNNING = 1,	 /* running, no EXIT seen */
	PROTO_HELD_EXITED = 2,	 /* EXIT seen (or the rank ended) */
};
#define PROTO_HELD_CHANNELS 3 /* stdout, stderr, stddiag (in that order) */

/* One decoded frame.  Only the fields of its type are meaningful. */
struct proto_frame {
	enum proto_type type;
	uint32_t
	    rank; /* RANK_START DATA COMPLETE EXIT STDIN STDIN_EOF XON XOFF */
	uint32_t channel;    /* DATA COMPLETE XON XOFF: a ROUTER_CH_* bit */
	const uint8_t *data; /* DATA STDIN payload, borrowed */
	size_t len;
	uint32_t pid;	      /* RANK_START */
	uint8_t how;	      /* EXIT: PROTO_EXIT_* */
	uint32_t code;	      /* EXIT code/signal; ERROR code */
	uint64_t ack_bytes;   /* ACK: DATA payload bytes accepted so far;
			       * STDIN_ACK: stdin bytes of @rank written to
			       * its pipe or discarded, so far */
	uint32_t ack_exits;   /* ACK: EXIT frames processed so far */
	uint32_t max_payload; /* WELCOME */
	uint16_t version;     /* WELCOME: the HELLO's version */
	uint16_t flags;	      /* WELCOME: PROTO_WELCOME_F_*; COMMAND:
			       * PROTO_COMMAND_F_* */
	const char *name;     /* WELCOME F_NAME: assigned nspace, borrowed */
	size_t name_len;
	const char *msg;      /* ERROR, COMMAND text, borrowed */
	size_t msg_len;
	struct proto_hello hello; /* HELLO */
	/* HELD: state (PROTO_HELD_*) and the bytes the daemon holds of each
	 * output channel (index: proto_channel_index()) */
	uint8_t held_state;
	uint64_t held[PROTO_HELD_CHANNELS];
	/* RESUME: stdin bytes of @rank received (stdin_rx) and let go
	 * (ack_bytes) by the forwarder; stdin_eof: STDIN_EOF received;
	 * replay_bytes: output of @rank it is about to send again */
	uint64_t stdin_rx;
	uint8_t stdin_eof;
	uint64_t replay_bytes;
};

/* stdout 0, stderr 1, stddiag 2; -1 for anything else. */
int proto_channel_index(uint32_t channel);

/*
 * Per-connection decoder state.  Initialise with proto_peer_init(); the
 * decoder advances it (HELLO/WELCOME seen, rank range).  A forwarder sets
 * its own rank range with proto_peer_set_ranks() after sending HELLO.
 */
struct proto_peer {
	enum proto_role role;
	bool greeted; /* daemon: HELLO seen; forwarder: WELCOME seen */
	uint32_t rank_base;
	uint32_t rank_count;
};

void proto_peer_init(struct proto_peer *p, enum proto_role role);
void proto_peer_set_ranks(struct proto_peer *p, uint32_t base, uint32_t count);

/*
 * Decode the frame at the start of @buf (@avail bytes).
 * PROTO_OK: *f filled, *consumed = its full size (header included).
 * PROTO_NEED_MORE: *consumed = total bytes needed for this frame (>= @avail
 * + 1; PROTO_HDR_SIZE while the header is incomplete).
 * PROTO_ERR_*: @err (may be NULL) gets a one-line detail; the stream cannot
 * be resynchronised, the caller closes the connection.
 * The peer state is updated only on PROTO_OK.
 */
int proto_decode(struct proto_peer *p, const uint8_t *buf, size_t avail,
		 struct proto_frame *f, size_t *consumed, char *err,
		 size_t errlen);

/* Name of a proto_decode() result; never NULL. */
const char *proto_strerror(int code);
/* "HELLO", "DATA", ...; "UNKNOWN" for anything else. */
const char *proto_type_name(unsigned type);
/* Name of a ROUTER_CH_* bit: "stdout", ...; "?" otherwise. */
const char *proto_channel_name(uint32_t channel);

/*
 * Encode @f.  proto_encode() writes the whole frame, trailing bytes (data,
 * nspace/host, msg) included.  proto_encode_head() writes all but f->data
 * of a DATA/STDIN frame (the length field counts it): the caller appends
 * f->len bytes itself (zero-copy into an evbuffer).  Both return the bytes
 * written, or -ENOSPC (@cap too small) / -EINVAL (field out of range, e.g.
 * payload > PROTO_PAYLOAD_MAX, unknown type).  @buf is never read.
 */
ssize_t proto_encode(const struct proto_frame *f, uint8_t *buf, size_t cap);
ssize_t proto_encode_head(const struct proto_frame *f, uint8_t *buf,
			  size_t cap);

/* Upper bound of proto_encode_head()'s output for any frame. */
#define PROTO_HEAD_MAX (1024 + PROTO_CRED_MAX)

#endif /* IOFS_NET_PROTO_H */
