/* SPDX-License-Identifier: MIT */
/*
 * What a merged view holds of each rank, for a restart after kill -9
 * (spool_mview_cover(): the records, and `<ch>.cov` for those a cap
 * punched).
 *
 * A cap that evicts a rank's bytes punches the view's records of them out
 * of its index (spool_mview.c view_punch()).  Those records were the only
 * place that said how far into each rank the view had got, and a restart
 * after kill -9 needs that to put the view's unstored tail back once
 * (spool_mview_cover(), fs/spool_restore.c complete_view()).  So before a
 * punch, the covers of the records it takes are folded into each rank
 * file's `cov` and written here: a magic, then one (rank, cover) pair per
 * rank with a cover, through `<ch>.cov.tmp` and a rename.  After a crash
 * the file is the old one or the new one, whole; either is right, since
 * the records not punched yet say the rest.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs/spool_i.h"
#include "fs/spool_mview_i.h"

#define MC_MAGIC "IOFSMC1\n"
#define MC_MAGIC_LEN 8u
#define MC_MAX (64u << 20) /* a file longer than this is not ours */

struct mc_ent { /* on disk, host byte order (the spool is this host's) */
	uint32_t rank, pad;
	uint64_t cov;
};

static void mc_name(char *buf, size_t len, int ci, const char *suffix)
{
	snprintf(buf, len, "%s.cov%s", ci ? "stderr" : "stdout", suffix);
}

ssize_t spool_mcov_save(struct spool_job *j, int ci)
{
	size_t n = 0, len;
	char name[24];
	uint8_t *buf;
	int rc;

	for (size_t k = 0; k < j->nrf[ci]; k++)
		n += j->rf[ci][k]->cov > 0;
	len = MC_MAGIC_LEN + n * sizeof(struct mc_ent);
	if (!(buf = malloc(len)))
		return -ENOMEM;
	memcpy(buf, MC_MAGIC, MC_MAGIC_LEN);
	n = 0;
	for (size_t k = 0; k < j->nrf[ci]; k++) {
		const struct spool_file *rf = j->rf[ci][k];
		struct mc_ent e = {.rank = rf->rank, .cov = rf->cov};

		if (rf->cov)
			memcpy(buf + MC_MAGIC_LEN + n++ * sizeof(e), &e,
			       sizeof(e));
	}
	mc_name(name, sizeof(name), ci, "");
	rc = spool_replace(j, name, buf, len);
	free(buf);
	return rc ? rc : (ssize_t)len;
}

int spool_mcov_load(struct spool_job *j, int ci)
{
	char name[24], *buf = NULL;
	ssize_t len;
	size_t n;

	mc_name(name, sizeof(name), ci, "");
	len = spool_read_file(j->dirfd, name, MC_MAX, &buf);
	if (len == -ENOENT || len == -EINVAL || len == -EIO)
		return 1; /* none, or not ours: the view cannot say */
	if (len < 0)
		return (int)len;
	if ((size_t)len < MC_MAGIC_LEN ||
	    ((size_t)len - MC_MAGIC_LEN) % sizeof(struct mc_ent) ||
	    memcmp(buf, MC_MAGIC, MC_MAGIC_LEN) != 0) {
		free(buf);
		return 1;
	}
	n = ((size_t)len - MC_MAGIC_LEN) / sizeof(struct mc_ent);
	for (size_t i = 0; i < n; i++) {
		struct mc_ent e;
		struct spool_file *rf;

		memcpy(&e, buf + MC_MAGIC_LEN + i * sizeof(e), sizeof(e));
		rf = spool_rank_find(j, ci, e.rank);
		if (rf && e.cov > rf->cov)
			rf->cov = e.cov;
	}
	free(buf);
	return 0;
}

void spool_mcov_discard(struct spool_job *j, int ci)
{
	char name[24];

	mc_name(name, sizeof(name), ci, "");
	unlinkat(j->dirfd, name, 0);
	mc_name(name, sizeof(name), ci, ".tmp"); /* a crash's */
	unlinkat(j->dirfd, name, 0);
}

/* Raise the rank files' in_view (@to_cov: cov) to what records [@from,
 * @to) hold of them (a record with rank bytes, or a literal one that says
 * whose: XML); *@last the last record read.  0 or -errno. */
int mview_walk_covers(struct spool_file *f, uint64_t from, uint64_t to,
		      bool to_cov, struct mv_rec *last)
{
	struct mv_rec *rs = malloc(MV_WALK * sizeof(*rs));

	if (!rs)
		return -ENOMEM;
	for (uint64_t i = from; i < to;) {
		size_t cnt = to - i < MV_WALK ? (size_t)(to - i) : MV_WALK;
		int rc = pread_full(f->fd, rs, cnt * sizeof(*rs),
				    MV_HDR + i * sizeof(*rs));

		if (rc < 0) {
			free(rs);
			return rc;
		}
		for (size_t k = 0; k < cnt; k++) {
			struct spool_file *rf;
			uint64_t *at;

			if (rs[k].rank == SPOOL_NO_RANK)
				continue;
			rf = spool_rank_find(f->j, f->ci, rs[k].rank);
			if (!rf)
				continue;
			at = to_cov ? &rf->cov : &rf->in_view;
			if (rs[k].roff + rs[k].rlen > *at)
				*at = rs[k].roff + rs[k].rlen;
		}
		if (last)
			*last = rs[cnt - 1];
		i += cnt;
	}
	free(rs);
	return 0;
}

/* The rank whose line the view ends in, after its last record @r: its
 * rank's; not after a literal record (XML) whose last byte ends a line. */
static uint32_t ends_open(struct spool_file *f, const struct mv_rec *r)
{
	char c;

	if (r->rlen)
		return r->rank;
	if (r->rank == SPOOL_NO_RANK || !r->plen)
		return SPOOL_NO_RANK;
	if (pread(f->mv->lfd, &c, 1, (off_t)(r->lit_off + r->plen - 1)) == 1 &&
	    c == '\n')
		return SPOOL_NO_RANK;
	return r->rank;
}

int spool_mview_cover(struct spool_file *f, uint32_t *last_rank)
{
	struct spool_mview *mv = f->mv;
	struct spool_job *j = f->j;
	struct mv_rec last;
	uint64_t keep, first;
	int rc;

	*last_rank = SPOOL_NO_RANK;
	for (size_t k = 0; k < j->nrf[f->ci]; k++)
		j->rf[f->ci][k]->in_view = j->rf[f->ci][k]->cov = 0;
	/* the punched records' part (and later punches build on it) */
	rc = spool_mcov_load(j, f->ci);
	if (rc < 0)
		return rc;
	mv->cov_ok = mv->punched <= MV_IDX_KEEP || rc == 0;
	if ((mv->flags & MV_F_LITERAL) || !mv->cov_ok)
		return 1;
	for (size_t k = 0; k < j->nrf[f->ci]; k++)
		j->rf[f->ci][k]->in_view = j->rf[f->ci][k]->cov;
	/* the index's kept first block, then the records after the hole
	 * (not the hole: zeros, and as long as the punched index was) */
	keep = (MV_IDX_KEEP - MV_HDR) / sizeof(last);
	first = rec_first(mv);
	rc = mview_walk_covers(f, 0, first > keep ? keep : mv->n, false,
			       &last);
	if (rc == 0 && first > keep)
		rc = mview_walk_covers(f, first, mv->n, false, &last);
	if (rc == 0 && mv->n) /* the view ends with this piece */
		*last_rank = ends_open(f, &last);
	return rc;
}
