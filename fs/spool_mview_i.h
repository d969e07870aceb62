/* SPDX-License-Identifier: MIT */
/*
 * A merged view's index on disk: private to fs/spool_mview.c (the view)
 * and fs/spool_mcov.c (what its records hold of each rank, for a restart).
 */
#ifndef IOFS_FS_SPOOL_MVIEW_I_H
#define IOFS_FS_SPOOL_MVIEW_I_H

#include <stdbool.h>
#include <stdint.h>

#include "fs/spool_i.h"

#define MV_MAGIC "IOFSMV1\n"
#define MV_HDR 64u
/* The index's first block (the header, the first records) stays. */
#define MV_IDX_KEEP 4096u
/* A tag is written again once this far behind the literal file's end, so
 * that the records after a cap's cut never name a tag in the part of the
 * literal file the cut punched out. */
#define MV_TAG_REFRESH (1u << 20)
#define MV_RBUF (64u << 10) /* rank bytes read at a time */
#define MV_TAG_MAX 512u
#define MV_WALK 128u /* records read at a time by held_from() */
/* Header: the magic, drop_to at 8, flags at 16. */
#define MV_HDR_FLAGS 16u
/* Some piece with rank bytes is stored as literal bytes without saying
 * whose (a rank whose store failed...): the records do not say what of
 * each rank the view holds, so a restart cannot complete the view
 * (spool_mview_cover).  Literal pieces that say it (XML) do not set it. */
#define MV_F_LITERAL 1u

struct mv_rec { /* on disk, host byte order (the spool is this host's) */
	uint64_t moff, mlen;   /* the piece in the view */
	uint64_t lit_off;      /* its literal prefix in <ch>.lit */
	uint64_t roff, rlen;   /* its range of the rank's file; rlen 0 and
				* a rank: all literal, holding that rank's
				* bytes up to roff (XML) */
	uint64_t tag_off;      /* the line tag in <ch>.lit */
	uint32_t plen, taglen; /* prefix and tag bytes */
	uint32_t rank;	       /* SPOOL_NO_RANK: literal only */
	uint32_t check;
};

struct mv_cur { /* a position inside record @i */
	bool ok;
	uint64_t i;
	struct mv_rec rec;
	uint64_t mrel; /* view bytes of the record before it */
	uint64_t rpos; /* rank bytes before it */
	uint32_t tpos; /* tag bytes before it, while in_tag */
	bool in_tag;
};

struct spool_mview {
	int lfd;      /* <ch>.lit */
	uint64_t n;   /* records */
	uint64_t size; /* view bytes */
	uint64_t lit_end;
	uint64_t drop_to, valid_from;
	/* [MV_IDX_KEEP, punched) of the index is a hole: the records of
	 * what no longer holds its rank bytes (below valid_from), punched
	 * so that the caps' eviction of the ranks frees the view's disk
	 * too (spool_mview_disk()); never read again. */
	uint64_t punched;
	uint64_t lit_punched; /* [0, lit_punched) of <ch>.lit: a hole */
	/* The rank files' cov says all that the punched records held (a new
	 * view, or `<ch>.cov` loaded): only then is it saved at a punch, so
	 * an earlier version's punch never leaves a partial one. */
	bool cov_ok;
	uint64_t cov_len; /* the length of `<ch>.cov` when last written */
	uint64_t flags;   /* MV_F_* (header) */
	uint64_t tag_off; /* the last tag written */
	uint32_t taglen;
	char tag[MV_TAG_MAX];
	struct mv_cur cur;
	uint8_t *rbuf; /* rank bytes [rb_off, rb_off + rb_len) of rb_rank */
	uint64_t rb_off;
	size_t rb_len;
	uint32_t rb_rank;
	char rtag[MV_TAG_MAX]; /* the tag last read, at rtag_off */
	uint64_t rtag_off;
	uint32_t rtag_len;
};

/* The first record not in the punched prefix. */
static inline uint64_t rec_first(const struct spool_mview *mv)
{
	/* record i is [MV_HDR + 64 i, MV_HDR + 64 (i + 1)): the one at
	 * @punched is the first after the hole */
	uint64_t i = mv->punched > MV_IDX_KEEP
			 ? (mv->punched - MV_HDR) / sizeof(struct mv_rec)
			 : 0;

	return i < mv->n ? i : 0;
}

/* Raise the rank files' in_view (@to_cov: cov) to what records [@from,
 * @to) hold; *@last the last record read (spool_mcov.c).  0 or -errno. */
int mview_walk_covers(struct spool_file *f, uint64_t from, uint64_t to,
		      bool to_cov, struct mv_rec *last);

#endif /* IOFS_FS_SPOOL_MVIEW_I_H */
