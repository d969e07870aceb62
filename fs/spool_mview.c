/* SPDX-License-Identifier: MIT */
/*
 * A merged view in the spool without a second copy of its ranks' bytes.
 *
 * `<ch>.idx`: a header (magic, the view's own cap eviction point), then
 * fixed records, one per piece of the view, in view order: the piece's
 * view offset and size, its literal prefix (a range of `<ch>.lit`: a
 * newline that ended another rank's line, the tag), then a range of the
 * rank's own file `<rank>.<ch>`, with the line tag (also in `<ch>.lit`,
 * written once while it does not change) after each newline in that range
 * but one at its very end.  A record is written after the bytes it names
 * (the rank's, the literal ones), in one pwrite: a crash leaves whole
 * records, and a torn last one fails its check and is not read.
 *
 * A read renders the records: the literal prefix, the rank's bytes, the
 * tags; the position of the last read is kept, so a reader going forward
 * does not look for its offset again.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/safe_dir.h"
#include "fs/spool_i.h"
#include "fs/spool_mview_i.h"

static void view_punch(struct spool_file *f);

static uint32_t rec_check(const struct mv_rec *r)
{
	const uint32_t *w = (const uint32_t *)r;
	uint32_t h = 0x9e3779b9u;

	for (size_t i = 0; i < offsetof(struct mv_rec, check) / 4; i++)
		h = (h ^ w[i]) * 0x01000193u;
	return h ^ 0x5bd1e995u;
}

static const char *ch_name(int ci)
{
	return ci == 0 ? "stdout" : "stderr";
}

static int rec_read(struct spool_file *f, uint64_t i, struct mv_rec *r)
{
	return pread_full(f->fd, r, sizeof(*r), MV_HDR + i * sizeof(*r));
}

bool spool_mview_exists(struct spool_job *j, int ci)
{
	char name[24];
	struct stat st;

	snprintf(name, sizeof(name), "%s.idx", ch_name(ci));
	return fstatat(j->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

uint64_t spool_mview_size(const struct spool_file *f)
{
	return f->mv->size;
}

/* A record an earlier life wrote: whole, and what it names is there. */
static bool rec_sane(struct spool_file *f, const struct mv_rec *r,
		     uint64_t lit_size)
{
	struct spool_file *rf;
	struct stat st;

	if (r->check != rec_check(r) || r->lit_off + r->plen > lit_size ||
	    (r->taglen && r->tag_off + r->taglen > lit_size) ||
	    r->taglen > MV_TAG_MAX || r->mlen < r->plen + r->rlen)
		return false;
	if (!r->rlen)
		return true;
	rf = spool_rank_find(f->j, f->ci, r->rank);
	return rf && spool_file_fd(rf) >= 0 && fstat(rf->fd, &st) == 0 &&
	       r->roff + r->rlen <= (uint64_t)st.st_size;
}

/* Adopt: the records that are whole (a crash may have torn the last),
 * the view's size, the literal file's end. */
static int mview_load(struct spool_file *f)
{
	struct spool_mview *mv = f->mv;
	char hdr[MV_HDR];
	struct stat st, lst;
	struct mv_rec r;
	uint64_t n;

	if (fstat(f->fd, &st) != 0 || fstat(mv->lfd, &lst) != 0)
		return -errno;
	if (pread_full(f->fd, hdr, sizeof(hdr), 0) < 0 ||
	    memcmp(hdr, MV_MAGIC, 8) != 0)
		return -EINVAL;
	memcpy(&mv->drop_to, hdr + 8, sizeof(mv->drop_to));
	memcpy(&mv->flags, hdr + MV_HDR_FLAGS, sizeof(mv->flags));
	mv->lit_end = (uint64_t)lst.st_size;
	n = st.st_size > MV_HDR ? ((uint64_t)st.st_size - MV_HDR) / sizeof(r)
				: 0;
	while (n && (rec_read(f, n - 1, &r) < 0 ||
		     !rec_sane(f, &r, mv->lit_end)))
		n--;
	mv->n = n;
	mv->size = n ? r.moff + r.mlen : 0;
	mv->valid_from = mv->drop_to;
	/* an earlier life's punched prefix (SEEK_DATA: whole blocks) */
	off_t data = lseek(f->fd, MV_IDX_KEEP, SEEK_DATA);
	mv->punched = data > (off_t)MV_IDX_KEEP
			  ? (uint64_t)data & ~(uint64_t)(MV_IDX_KEEP - 1)
			  : MV_IDX_KEEP;
	data = mv->lit_end ? lseek(mv->lfd, 0, SEEK_DATA) : 0;
	mv->lit_punched = data > 0 ? (uint64_t)data & ~(uint64_t)(MV_IDX_KEEP - 1)
				   : 0;
	/* A punch took only records wholly below valid_from, so the view
	 * starts at the first record after the hole at the earliest.  The
	 * header's drop_to does not say so when the view followed its ranks
	 * (a job cap): held_from()'s walk starts there and would stop at
	 * once when those records' ranks still hold their bytes, leaving a
	 * start inside the hole, whose reads fail (EIO). */
	if (rec_first(mv) && rec_read(f, rec_first(mv), &r) == 0 &&
	    r.check == rec_check(&r) && r.moff > mv->valid_from)
		mv->valid_from = r.moff;
	return 0;
}

int spool_mview_open(struct spool_job *j, int ci, bool create,
		     struct spool_file **out)
{
	char name[24], why[256] = "";
	struct spool_file *f;
	int rc;

	snprintf(name, sizeof(name), "%s.idx", ch_name(ci));
	rc = spool_file_open(j, name, create, &f);
	if (rc < 0)
		return rc;
	spool_file_pin(f); /* its records are read by offset all the time */
	f->ci = ci;
	f->mv = calloc(1, sizeof(*f->mv));
	if (f->mv) {
		f->mv->lfd = -1;
		f->mv->punched = MV_IDX_KEEP;
	}
	if (!f->mv || !(f->mv->rbuf = malloc(MV_RBUF))) {
		rc = -ENOMEM;
		goto fail;
	}
	f->mv->rb_rank = SPOOL_NO_RANK;
	snprintf(name, sizeof(name), "%s.lit", ch_name(ci));
	f->mv->lfd = safe_file_open(j->dirfd, name, O_RDWR, 0600, create,
				    geteuid(), getegid(), why, sizeof(why));
	if (f->mv->lfd < 0) {
		rc = f->mv->lfd;
		if (why[0])
			spool_log(j->sp, j->name, why);
		goto fail;
	}
	/* Records and literal bytes go where they are due (pwrite): a write
	 * a full disk cut short is written again at the same place. */
	if (fcntl(f->fd, F_SETFL, fcntl(f->fd, F_GETFL) & ~O_APPEND) != 0 ||
	    fcntl(f->mv->lfd, F_SETFL,
		  fcntl(f->mv->lfd, F_GETFL) & ~O_APPEND) != 0) {
		rc = -errno;
		goto fail;
	}
	if (create) {
		char hdr[MV_HDR] = MV_MAGIC;

		f->mv->cov_ok = true; /* nothing punched yet */
		rc = pwrite(f->fd, hdr, sizeof(hdr), 0) == (ssize_t)sizeof(hdr)
			 ? 0
			 : -EIO;
	} else {
		rc = mview_load(f);
	}
	if (rc < 0)
		goto fail;
	*out = f;
	return 0;

fail:
	spool_close(f, create); /* a new one goes again */
	return rc;
}

/* Commit record @r (its literal bytes @iov at lit_end first). */
static ssize_t mview_commit(struct spool_file *f, struct mv_rec *r,
			    struct iovec *iov, int cnt, uint64_t litlen)
{
	struct spool_mview *mv = f->mv;
	int rc = cnt ? pwritev_full(mv->lfd, iov, cnt, mv->lit_end) : 0;

	if (rc < 0)
		return rc;
	r->moff = mv->size;
	r->check = rec_check(r);
	do
		rc = (int)pwrite(f->fd, r, sizeof(*r),
				 (off_t)(MV_HDR + mv->n * sizeof(*r)));
	while (rc < 0 && errno == EINTR);
	if (rc != (int)sizeof(*r))
		return rc < 0 ? -errno : -ENOSPC; /* not committed */
	mv->lit_end += litlen;
	mv->n++;
	mv->size += r->mlen;
	return (ssize_t)r->mlen;
}

ssize_t spool_mview_append(struct spool_file *f, const struct iovec *iov,
			   int iovcnt)
{
	struct iovec v[16];
	struct mv_rec r = {.rank = SPOOL_NO_RANK};
	uint64_t len = 0;
	int cnt = iovcnt < 16 ? iovcnt : 16;

	for (int i = 0; i < cnt; i++) {
		v[i] = iov[i];
		len += iov[i].iov_len;
	}
	/* a literal "\n" ends another rank's line; anything else may hold
	 * rank bytes: say so once, before the record */
	if (!(f->mv->flags & MV_F_LITERAL) &&
	    !(len == 1 && cnt >= 1 && v[0].iov_len == 1 &&
	      *(const char *)v[0].iov_base == '\n')) {
		uint64_t fl = f->mv->flags | MV_F_LITERAL;

		if (pwrite(f->fd, &fl, sizeof(fl), MV_HDR_FLAGS) !=
		    (ssize_t)sizeof(fl))
			return -EIO;
		f->mv->flags = fl;
	}
	r.lit_off = f->mv->lit_end;
	r.plen = (uint32_t)len;
	r.mlen = len;
	return mview_commit(f, &r, v, cnt, len);
}

/* @iov holds exactly @len bytes equal to @p. */
static bool iov_is(const struct iovec *iov, int cnt, const char *p,
		   size_t len)
{
	size_t at = 0;

	for (int i = 0; i < cnt; i++) {
		if (at + iov[i].iov_len > len ||
		    memcmp(iov[i].iov_base, p + at, iov[i].iov_len) != 0)
			return false;
		at += iov[i].iov_len;
	}
	return at == len;
}

ssize_t spool_mview_append_ref(struct spool_file *f,
			       const struct router_store_ref *ref)
{
	struct spool_mview *mv = f->mv;
	struct iovec v[18];
	struct mv_rec r = {.roff = ref->off, .rlen = ref->len,
			   .rank = ref->rank, .mlen = ref->size};
	uint64_t len = 0;
	bool newtag;
	int cnt = 0;
	ssize_t w;

	if (!mv)
		return -EOPNOTSUPP; /* an earlier life's plain file */
	if (ref->nlit > 16 || ref->taglen > MV_TAG_MAX ||
	    (!ref->src && (ref->len || ref->taglen)))
		return -EINVAL; /* no src: all literal (router.h) */
	for (int i = 0; i < ref->nlit; i++) {
		v[cnt++] = ref->lit[i];
		len += ref->lit[i].iov_len;
	}
	r.lit_off = mv->lit_end;
	r.plen = (uint32_t)len;
	r.taglen = (uint32_t)ref->taglen;
	newtag = ref->taglen && (mv->taglen != ref->taglen ||
				 memcmp(mv->tag, ref->tag, ref->taglen) != 0 ||
				 mv->lit_end - mv->tag_off > MV_TAG_REFRESH);
	r.tag_off = newtag ? mv->lit_end + len : mv->tag_off;
	if (newtag && iov_is(ref->lit, ref->nlit, ref->tag, ref->taglen)) {
		r.tag_off = r.lit_off; /* the prefix is the tag: once */
	} else if (newtag) {
		v[cnt].iov_base = (void *)ref->tag;
		v[cnt++].iov_len = ref->taglen;
		len += ref->taglen;
	}
	w = mview_commit(f, &r, v, cnt, len);
	if (w > 0 && newtag) {
		mv->tag_off = r.tag_off;
		mv->taglen = r.taglen;
		memcpy(mv->tag, ref->tag, ref->taglen);
	}
	return w;
}

/* ---- reading -------------------------------------------------------- */

/* Rank @rank's bytes at @off (at most @max): a pointer into rbuf. */
static const uint8_t *rank_bytes(struct spool_file *f, uint32_t rank,
				 uint64_t off, size_t max, size_t *len)
{
	struct spool_mview *mv = f->mv;
	struct spool_file *rf;

	if (mv->rb_rank != rank || off < mv->rb_off ||
	    off >= mv->rb_off + mv->rb_len) {
		rf = spool_rank_find(f->j, f->ci, rank);
		mv->rb_rank = SPOOL_NO_RANK;
		if (max > MV_RBUF)
			max = MV_RBUF;
		if (!rf || spool_stage_pread(rf, mv->rbuf, max, off) < 0)
			return NULL;
		mv->rb_rank = rank;
		mv->rb_off = off;
		mv->rb_len = max;
	}
	*len = (size_t)(mv->rb_off + mv->rb_len - off);
	if (*len > max)
		*len = max;
	return mv->rbuf + (off - mv->rb_off);
}

static const char *tag_bytes(struct spool_file *f, const struct mv_rec *r)
{
	struct spool_mview *mv = f->mv;

	if (mv->rtag_len != r->taglen || mv->rtag_off != r->tag_off) {
		mv->rtag_len = 0;
		if (pread_full(mv->lfd, mv->rtag, r->taglen, r->tag_off) < 0)
			return NULL;
		mv->rtag_len = r->taglen;
		mv->rtag_off = r->tag_off;
	}
	return mv->rtag;
}

/* Up to @n bytes of the record from @c into @out (NULL: skip them). */
static ssize_t render(struct spool_file *f, struct mv_cur *c, uint8_t *out,
		      size_t n)
{
	const struct mv_rec *r = &c->rec;
	size_t done = 0, k;

	while (done < n && c->mrel < r->mlen) {
		size_t room = n - done;

		if (c->mrel < r->plen) {
			k = r->plen - (size_t)c->mrel < room
				? r->plen - (size_t)c->mrel
				: room;
			if (out && pread_full(f->mv->lfd, out + done, k,
					      r->lit_off + c->mrel) < 0)
				return -EIO;
		} else if (c->in_tag) {
			const char *t = tag_bytes(f, r);

			if (!t)
				return -EIO;
			k = r->taglen - c->tpos < room ? r->taglen - c->tpos
						       : room;
			if (out)
				memcpy(out + done, t + c->tpos, k);
			c->tpos += (uint32_t)k;
			c->in_tag = c->tpos < r->taglen;
		} else {
			uint64_t left = r->rlen - c->rpos;
			const uint8_t *p, *nl;

			if (!left) /* fewer lines than tags: not this file */
				return -EIO;
			if (left > room)
				left = room;
			if (!r->taglen && !out) {
				k = (size_t)left; /* nothing to look for */
			} else {
				p = rank_bytes(f, r->rank, r->roff + c->rpos,
					       (size_t)left, &k);
				if (!p)
					return -EIO;
				nl = r->taglen ? memchr(p, '\n', k) : NULL;
				if (nl) {
					k = (size_t)(nl - p) + 1;
					if (c->rpos + k < r->rlen) {
						c->in_tag = true;
						c->tpos = 0;
					}
				}
				if (out)
					memcpy(out + done, p, k);
			}
			c->rpos += k;
		}
		c->mrel += k;
		done += k;
	}
	return (ssize_t)done;
}

static int cur_load(struct spool_file *f, uint64_t i)
{
	struct mv_cur *c = &f->mv->cur;

	memset(c, 0, sizeof(*c));
	if (rec_read(f, i, &c->rec) < 0)
		return -EIO;
	c->i = i;
	c->ok = true;
	return 0;
}

/* The record holding view offset @off (< size). */
static uint64_t rec_find(struct spool_file *f, uint64_t off)
{
	uint64_t lo = rec_first(f->mv), hi = f->mv->n;
	struct mv_rec r;

	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (rec_read(f, mid, &r) < 0)
			return lo;
		if (r.moff <= off)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Put the cursor at view offset @off. */
static int cur_seek(struct spool_file *f, uint64_t off)
{
	struct mv_cur *c = &f->mv->cur;
	ssize_t k;

	if (c->ok && c->rec.moff + c->mrel == off)
		return 0;
	if (c->ok && c->mrel == c->rec.mlen && c->i + 1 < f->mv->n &&
	    c->rec.moff + c->rec.mlen == off)
		return cur_load(f, c->i + 1);
	if (!(c->ok && off >= c->rec.moff + c->mrel &&
	      off < c->rec.moff + c->rec.mlen) &&
	    cur_load(f, rec_find(f, off)) < 0)
		return -EIO;
	k = render(f, c, NULL, (size_t)(off - c->rec.moff - c->mrel));
	if (k < 0 || c->rec.moff + c->mrel != off) {
		c->ok = false;
		return -EIO;
	}
	return 0;
}

ssize_t spool_mview_read(struct spool_file *f, uint64_t off, void *buf,
			 size_t n)
{
	struct spool_mview *mv = f->mv;
	size_t got = 0;
	ssize_t k;

	if (off >= mv->size)
		return 0;
	if (n > mv->size - off)
		n = (size_t)(mv->size - off);
	if (cur_seek(f, off) < 0)
		return -EIO;
	while (got < n) {
		if (mv->cur.mrel == mv->cur.rec.mlen &&
		    cur_load(f, mv->cur.i + 1) < 0)
			break;
		k = render(f, &mv->cur, (uint8_t *)buf + got, n - got);
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	if (!got)
		mv->cur.ok = false;
	return got ? (ssize_t)got : -EIO;
}

/* ---- caps ------------------------------------------------------------- */

void spool_mview_drop(struct spool_file *f, uint64_t to)
{
	struct spool_mview *mv = f->mv;

	if (to <= mv->drop_to)
		return;
	mv->drop_to = to;
	if (to > mv->valid_from) {
		mv->valid_from = to;
		view_punch(f);
	}
	if (pwrite(f->fd, &to, sizeof(to), 8) != (ssize_t)sizeof(to))
		spool_log(f->j->sp, f->j->name, "merged view: eviction not "
						"recorded (a restart shows "
						"those bytes again)");
}

static bool punch(int fd, uint64_t *done, uint64_t to)
{
	to &= ~(uint64_t)(MV_IDX_KEEP - 1); /* whole blocks */
	if (to <= *done)
		return true;
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      (off_t)*done, (off_t)(to - *done)) != 0)
		return false;
	*done = to;
	return true;
}

/* Free what the view no longer shows (below valid_from), whole blocks:
 * the index's records before the one holding valid_from, and the literal
 * bytes before that record's (its tag included: records name ever later
 * literal bytes and tags, MV_TAG_REFRESH). */
static void view_punch(struct spool_file *f)
{
	struct spool_mview *mv = f->mv;
	struct mv_rec r;
	uint64_t i, lit, to;

	if (f->j->sp->no_punch || !mv->n)
		return;
	/* all of it cut: all but the last record (a restart finds the view's
	 * size in it) */
	i = mv->valid_from >= mv->size ? mv->n - 1
				       : rec_find(f, mv->valid_from);
	if (rec_read(f, i, &r) < 0 || r.check != rec_check(&r))
		return;
	lit = r.lit_off;
	if (r.taglen && r.tag_off < lit)
		lit = r.tag_off;
	/* what the records to be punched hold of each rank, kept first: a
	 * restart after a crash completes the view from it.  The file is
	 * written whole (16 bytes a rank): not before as much index is to
	 * be freed, so that it never writes more than it frees. */
	to = (MV_HDR + i * sizeof(r)) & ~(uint64_t)(MV_IDX_KEEP - 1);
	if (mv->cov_ok && to > mv->punched) {
		ssize_t len;

		if (to - mv->punched < mv->cov_len ||
		    mview_walk_covers(f, (mv->punched - MV_HDR) / sizeof(r),
				(to - MV_HDR) / sizeof(r), true, NULL) < 0 ||
		    (len = spool_mcov_save(f->j, f->ci)) < 0)
			return; /* punched later, or never: disk, not bytes */
		mv->cov_len = (uint64_t)len;
	}
	if (!punch(f->fd, &mv->punched, MV_HDR + i * sizeof(r)) ||
	    !punch(mv->lfd, &mv->lit_punched, lit))
		spool_log(f->j->sp, f->j->name,
			  "merged view: cannot free what a cap cut (its disk "
			  "space stays until the job is removed)");
}

/* The first view byte whose pieces all still hold their rank bytes: walk
 * the records from the last answer while a rank file a cap evicted from
 * has not yet shown a piece above what it lost (a rank's pieces go up its
 * file in view order). */
uint64_t spool_mview_held_from(struct spool_file *f)
{
	struct spool_mview *mv = f->mv;
	struct spool_job *j = f->j;
	struct mv_rec *rs;
	uint64_t v = mv->valid_from, i, epoch = ++j->epoch;
	size_t pending = 0;

	for (size_t k = 0; k < j->nrf[f->ci]; k++)
		pending += j->rf[f->ci][k]->evicted > 0;
	if (!pending || v >= mv->size || !(rs = malloc(MV_WALK * sizeof(*rs))))
		return v;
	for (i = rec_find(f, v); i < mv->n && pending;) {
		size_t cnt = mv->n - i < MV_WALK ? (size_t)(mv->n - i) : MV_WALK;

		if (pread_full(f->fd, rs, cnt * sizeof(*rs),
			       MV_HDR + i * sizeof(*rs)) < 0)
			break;
		for (size_t k = 0; k < cnt && pending; k++) {
			struct spool_file *rf;

			if (!rs[k].rlen)
				continue;
			rf = spool_rank_find(j, f->ci, rs[k].rank);
			if (!rf || rs[k].roff < rf->evicted)
				v = rs[k].moff + rs[k].mlen;
			else if (rf->evicted && rf->seen != epoch) {
				rf->seen = epoch;
				pending--;
			}
		}
		i += cnt;
	}
	free(rs);
	if (v > mv->valid_from) {
		mv->valid_from = v;
		view_punch(f);
	}
	return mv->valid_from;
}

uint64_t spool_mview_disk(const struct spool_file *f)
{
	const struct spool_mview *mv = f->mv;
	uint64_t idx = MV_HDR + mv->n * sizeof(struct mv_rec);

	return idx - (mv->punched > MV_IDX_KEEP ? mv->punched - MV_IDX_KEEP : 0) +
	       mv->lit_end - mv->lit_punched;
}

void spool_mview_close(struct spool_file *f, bool discard)
{
	struct spool_mview *mv = f->mv;
	char name[24];

	if (!mv)
		return;
	if (mv->lfd >= 0) {
		close(mv->lfd);
		if (discard) {
			snprintf(name, sizeof(name), "%s.lit", ch_name(f->ci));
			unlinkat(f->j->dirfd, name, 0);
			spool_mcov_discard(f->j, f->ci);
		}
	}
	free(mv->rbuf);
	free(mv);
	f->mv = NULL;
}
