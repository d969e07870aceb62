/* SPDX-License-Identifier: MIT */
/*
 * Restart: the jobs a spool holds from an earlier life come back into the
 * router, in the order they were created (a later run under the same name
 * replaces an earlier one, as it did then), with their ranks' recorded end
 * (`state`; a job that was still running then is `lost`), and every byte
 * of their streams as history.
 */
#include <dirent.h>
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
#include "log/num.h"

#define STATE_MAX (16u << 20) /* largest state file read */
#define RESTORE_FEED (64u << 10) /* rank bytes read at a time */
/* sscanf's width for a rank line's host: ROUTER_STATE_HOST_MAX in digits */
#define HOST_WIDTH_(n) #n
#define HOST_WIDTH_N(n) HOST_WIDTH_(n)
#define HOST_WIDTH HOST_WIDTH_N(ROUTER_STATE_HOST_MAX)

struct rrank {
	uint32_t id;
	bool running; /* "running" when the earlier daemon stopped */
	enum router_state state;
	int status;
	uint64_t stdin_bytes; /* these three: 0 if the line had none */
	int64_t started, ended;
	int64_t pid;  /* -1 if the line had none */
	char host[ROUTER_STATE_HOST_MAX + 1]; /* "" if none */
	router_rank_t *rk;
};

struct rjob {
	char nspace[ROUTER_NSPACE_MAX + 1];
	uint32_t uid, gid;
	bool private_job;
	uint32_t job_size;	  /* 0 = unknown */
	router_directives_t dirs; /* the job's format (XML...) for the view */
	char command[ROUTER_COMMAND_MAX + 1]; /* "" if none */
	struct rrank *ranks;
	size_t n, cap;
};

static struct rrank *rank_add(struct rjob *jb, uint32_t id)
{
	for (size_t i = 0; i < jb->n; i++)
		if (jb->ranks[i].id == id)
			return &jb->ranks[i];
	if (jb->n == jb->cap) {
		size_t nc = jb->cap ? jb->cap * 2 : 8;
		struct rrank *nr = realloc(jb->ranks, nc * sizeof(*nr));

		if (!nr)
			return NULL;
		jb->ranks = nr;
		jb->cap = nc;
	}
	/* Not in `state` (registered after it was written): running. */
	jb->ranks[jb->n] = (struct rrank){
	    .id = id, .state = ROUTER_STATE_LOST, .running = true, .pid = -1};
	return &jb->ranks[jb->n++];
}

/* `state`: uid, gid, private, size, dirs (the job's directives: SET VALUE),
 * command and "rank: ID STATE STATUS [STDIN_BYTES STARTED ENDED PID HOST]"
 * lines (router/store.c job_state_save()).  A job without one (its storage never opened far
 * enough) or still "running" then: lost. */
static int parse_state(struct rjob *jb, char *text)
{
	char *save = NULL;

	for (char *l = strtok_r(text, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		unsigned long long a, in = 0;
		long long t0 = 0, t1 = 0, pid = -1;
		char st[16], host[ROUTER_STATE_HOST_MAX + 1] = "";
		int status;
		struct rrank *rr;

		if (sscanf(l, "uid: %llu", &a) == 1 && a <= UINT32_MAX)
			jb->uid = (uint32_t)a;
		else if (sscanf(l, "gid: %llu", &a) == 1 && a <= UINT32_MAX)
			jb->gid = (uint32_t)a;
		else if (sscanf(l, "private: %llu", &a) == 1)
			jb->private_job = a != 0;
		else if (sscanf(l, "size: %llu", &a) == 1 && a <= UINT32_MAX)
			jb->job_size = (uint32_t)a;
		else if (sscanf(l, "dirs: %llu %llu", &a, &in) == 2) {
			jb->dirs.set = (uint32_t)a & ROUTER_DIR_KNOWN_MASK &
				       ~(uint32_t)ROUTER_DIR_COMPLETE;
			jb->dirs.value = (uint32_t)in & jb->dirs.set;
		}
		else if (!strncmp(l, "command: ", 9))
			snprintf(jb->command, sizeof(jb->command), "%s", l + 9);
		else if (sscanf(l, "rank: %llu %15s %d %llu %lld %lld %lld %" HOST_WIDTH "s",
				&a, st, &status, &in, &t0, &t1, &pid,
				host) >= 3 &&
			 a <= ROUTER_RANK_MAX) {
			rr = rank_add(jb, (uint32_t)a);
			if (!rr)
				return -ENOMEM;
			rr->state = !strcmp(st, "exited") ? ROUTER_STATE_EXITED
							  : ROUTER_STATE_LOST;
			rr->running = !strcmp(st, "running");
			rr->status = status;
			rr->stdin_bytes = in;
			rr->started = t0 > 0 ? t0 : 0;
			rr->ended = t1 > 0 ? t1 : 0;
			rr->pid = pid > 0 ? pid : -1;
			if (strcmp(host, "-") &&
			    router_text_valid(host, strlen(host)))
				snprintf(rr->host, sizeof(rr->host), "%s", host);
		}
	}
	return 0;
}

/* The stream files: "<rank>.stdout|stderr" add ranks (lost unless the
 * state said otherwise). */
static int scan_ranks(int dirfd, struct rjob *jb)
{
	int fd = dup(dirfd);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	struct dirent *e;
	int rc = 0;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	while (rc == 0 && (e = readdir(d))) {
		const char *dot = strchr(e->d_name, '.');
		uint64_t id;

		if (dot && (!strcmp(dot, ".stdout") || !strcmp(dot, ".stderr")) &&
		    iofs_parse_dec(e->d_name, (size_t)(dot - e->d_name),
				   ROUTER_RANK_MAX, true, &id) &&
		    !rank_add(jb, (uint32_t)id))
			rc = -ENOMEM;
	}
	closedir(d);
	return rc;
}

static uint64_t mtime_ns(const struct stat *st)
{
	return (uint64_t)st->st_mtim.tv_sec * 1000000000u +
	       (uint64_t)st->st_mtim.tv_nsec;
}

/* The stream's earlier life's time of last change, as its mtime (ls -l,
 * find -newer): its file's, or for a stream that left none (a view no byte
 * reached) the job's start (its nspace file's). */
static void restore_mtime(struct spool_job *j, router_job_t *job,
			  uint32_t rank, uint32_t channel,
			  struct spool_file *f)
{
	struct stat st;

	if ((f && spool_file_fd(f) >= 0 && fstat(f->fd, &st) == 0) ||
	    fstatat(j->dirfd, "nspace", &st, AT_SYMLINK_NOFOLLOW) == 0)
		(void)router_stream_restore_mtime(job, rank, channel,
						  mtime_ns(&st));
}

/* Hand one stream file to the router (if it is there), with its time; the
 * view's file when @rank is the wildcard and the view is an index, else
 * NULL. */
static struct spool_file *adopt(struct spool_job *j, router_job_t *job,
				uint32_t rank, uint32_t channel)
{
	const char *ch = channel == ROUTER_CH_STDOUT ? "stdout" : "stderr";
	struct spool_file *f;
	char name[24];
	struct stat st;

	int ci = channel == ROUTER_CH_STDOUT ? 0 : 1;
	uint64_t size;

	if (rank == ROUTER_RANK_WILDCARD && spool_mview_exists(j, ci)) {
		/* an index into the rank files (adopted first) */
		if (spool_mview_open(j, ci, false, &f) < 0)
			return NULL;
		size = spool_mview_size(f);
		goto adopt;
	}
	if (rank == ROUTER_RANK_WILDCARD) /* an earlier version's copy */
		snprintf(name, sizeof(name), "%s", ch);
	else
		snprintf(name, sizeof(name), "%" PRIu32 ".%s", rank, ch);
	if (rank != ROUTER_RANK_WILDCARD) { /* what a killed daemon staged */
		int rc = spool_stage_apply(j->dirfd, name);

		if (rc < 0)
			spool_log(j->sp, j->name, strerror(-rc));
	}
	if (fstatat(j->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
	    spool_file_open(j, name, false, &f) < 0) {
		restore_mtime(j, job, rank, channel, NULL);
		return NULL;
	}
	if (spool_file_fd(f) < 0 || fstat(f->fd, &st) != 0 ||
	    (rank != ROUTER_RANK_WILDCARD &&
	     spool_rank_file(j, rank, ci, f) < 0)) {
		spool_close(f, false);
		return NULL;
	}
	size = (uint64_t)st.st_size;
	spool_file_adopted(f, size);
adopt:
	restore_mtime(j, job, rank, channel, f);
	if (router_stream_adopt(job, rank, channel, f, size)) {
		spool_close(f, false);
		return NULL;
	}
	return f->mv ? f : NULL;
}

/* @rank's bytes from @at to its file's end into the view; the count. */
static uint64_t refeed_rank(router_job_t *job, uint32_t id, uint32_t channel,
			    struct spool_file *rf, uint64_t at, uint8_t *buf)
{
	uint64_t fed = 0;

	while (at < rf->end) {
		size_t want = rf->end - at < RESTORE_FEED
				  ? (size_t)(rf->end - at)
				  : RESTORE_FEED;
		int fd = spool_file_fd(rf);
		ssize_t n = fd < 0 ? -1 : pread(fd, buf, want, (off_t)at);

		if (n <= 0 ||
		    router_stream_refeed(job, id, channel, at, buf, (size_t)n))
			break;
		at += (uint64_t)n;
		fed += (uint64_t)n;
	}
	return fed;
}

/* True when @j has no view of channel @ci on disk at all, neither an
 * index nor an earlier version's copy: the daemon died before it stored
 * the view's first batch. */
static bool view_never_stored(struct spool_job *j, int ci)
{
	struct stat st;

	return !spool_mview_exists(j, ci) &&
	       fstatat(j->dirfd, ci ? "stderr" : "stdout", &st,
		       AT_SYMLINK_NOFOLLOW) != 0 &&
	       errno == ENOENT;
}

/*
 * The adopted view as the old daemon left it, for the line discipline:
 * where each rank's line stands (its last byte in the view ended
 * mid-line: its next piece continues it, "+"), and whose line the view
 * ends in (the next piece of another rank ends it with "\n" first).
 * Then a daemon that died without a shutdown (kill -9, a crash) had not
 * stored its views' last batch (up to 64 KiB or 100 ms) nor the partial
 * lines it held: the rank files have those bytes, the view's records end
 * short of them.  Feed each rank's bytes past its last record to the view
 * again, as if they had just arrived.  Nothing when the records cannot
 * tell (spool_mview_cover()).  No view file at all: the daemon died
 * before its first batch, every rank's bytes go in.  After a shutdown
 * there is nothing to feed.
 */
static void complete_view(struct spool_job *j, router_job_t *job,
			  const struct rjob *jb, struct spool_file *view,
			  int ci)
{
	uint32_t channel = ci ? ROUTER_CH_STDERR : ROUTER_CH_STDOUT;
	uint32_t last_rank = SPOOL_NO_RANK; /* no view: none of it is there */
	uint64_t fed = 0;
	uint8_t *buf;

	if ((view ? spool_mview_cover(view, &last_rank) != 0
		  : !view_never_stored(j, ci)) ||
	    !(buf = malloc(RESTORE_FEED)))
		return;
	for (size_t i = 0; i < jb->n; i++) { /* every state before any byte */
		uint32_t id = jb->ranks[i].id;
		struct spool_file *rf = spool_rank_find(j, ci, id);
		int fd;

		if (!rf || !rf->in_view || rf->in_view <= rf->evicted)
			continue;
		fd = spool_file_fd(rf);
		if (fd >= 0 && pread(fd, buf, 1, (off_t)(rf->in_view - 1)) == 1 &&
		    buf[0] != '\n')
			router_stream_view_line(job, id, channel, true,
						id == last_rank);
	}
	for (size_t i = 0; i < jb->n; i++) {
		uint32_t id = jb->ranks[i].id;
		struct spool_file *rf = spool_rank_find(j, ci, id);

		if (rf)
			fed += refeed_rank(job, id, channel, rf,
					   rf->in_view > rf->evicted
					       ? rf->in_view
					       : rf->evicted,
					   buf);
	}
	free(buf);
	if (fed)
		iofs_logf(j->sp->log, LOG_INFO, "spool",
			  "%s/%s: job %s: %" PRIu64 " bytes of its ranks' %s "
			  "put in the merged view again (not stored there "
			  "before the daemon ended)",
			  j->sp->dir, j->name, jb->nspace, fed,
			  ci ? "stderr" : "stdout");
}

/* Register the ranks, adopt the files, end the ranks.  0: @j is the
 * router's now; else it is still the caller's. */
static int restore_into(router_t *r, struct spool_job *j, struct rjob *jb,
			bool keep_running, router_job_t **out)
{
	struct router_rank_info info = {.pid = -1, .uid = jb->uid,
					.gid = jb->gid,
					.private_job = jb->private_job,
					.job_size = jb->job_size,
					.dirs = jb->dirs};
	router_job_t *job;
	size_t i;
	int rc = 0;

	for (i = 0; i < jb->n && rc == 0; i++) {
		router_proc_t p;

		rc = router_proc_set(&p, jb->nspace, jb->ranks[i].id);
		info.pid = jb->ranks[i].pid;
		info.host = jb->ranks[i].host;
		if (rc == 0)
			rc = router_rank_register(r, &p, &info, NULL, NULL,
						  &jb->ranks[i].rk);
	}
	if (rc != 0) {
		while (i-- > 1)
			router_rank_exit(jb->ranks[i - 1].rk, ROUTER_STATE_LOST,
					 0);
		return rc;
	}
	job = router_job_lookup(r, jb->nspace);
	rc = router_job_adopt_store(job, j);
	if (rc == 0 && jb->command[0]) /* after: it marks the state */
		(void)router_job_set_command(job, jb->command);
	for (i = 0; rc == 0 && i < jb->n; i++) {
		adopt(j, job, jb->ranks[i].id, ROUTER_CH_STDOUT);
		adopt(j, job, jb->ranks[i].id, ROUTER_CH_STDERR);
	}
	if (rc == 0) {
		complete_view(j, job, jb,
			      adopt(j, job, ROUTER_RANK_WILDCARD,
				    ROUTER_CH_STDOUT),
			      0);
		complete_view(j, job, jb,
			      adopt(j, job, ROUTER_RANK_WILDCARD,
				    ROUTER_CH_STDERR),
			      1);
	}
	for (i = 0; i < jb->n; i++) {
		/* Running then: it waits for its forwarder to resume (the
		 * daemon's resume window ends the wait, net/conn_resume.c). */
		struct rrank *rr = &jb->ranks[i];

		/* first: the last exit completes the job, which writes its
		 * `state` with what the ranks hold then */
		router_rank_restore_history(rr->rk, rr->stdin_bytes,
					    rr->started, rr->ended);
		if (keep_running && rr->running)
			router_rank_set_link(rr->rk, ROUTER_LINK_WAITING, 0);
		else
			router_rank_exit(rr->rk, rr->state, rr->status);
	}
	*out = job;
	return rc;
}

static void restore_one(spool_t *sp, router_t *r, uint64_t num,
			bool keep_running)
{
	struct spool_job *j = calloc(1, sizeof(*j));
	struct rjob jb = {.uid = geteuid(), .gid = getegid()};
	char why[256] = "", *text = NULL;
	router_job_t *job;
	ssize_t len;
	int rc = -ENOMEM;

	if (!j)
		goto out_log;
	j->sp = sp;
	snprintf(j->name, sizeof(j->name), "%" PRIu64, num);
	j->dirfd = safe_dir_open(sp->dirfd, j->name, geteuid(), getegid(),
				 0700, why, sizeof(why));
	if (j->dirfd < 0) {
		rc = j->dirfd;
		free(j);
		j = NULL;
		goto out_log;
	}
	len = spool_read_file(j->dirfd, "nspace", ROUTER_NSPACE_MAX, &text);
	if (len < 0 || !router_nspace_valid(text, (size_t)len)) {
		rc = len < 0 ? (int)len : -EINVAL;
		snprintf(why, sizeof(why), "no valid nspace file");
		goto out_log;
	}
	memcpy(jb.nspace, text, (size_t)len + 1);
	free(text);
	text = NULL;
	len = spool_read_file(j->dirfd, "state", STATE_MAX, &text);
	if ((len >= 0 && (rc = parse_state(&jb, text)) < 0) ||
	    (rc = scan_ranks(j->dirfd, &jb)) < 0)
		goto out_log;
	if (jb.n == 0) {
		snprintf(why, sizeof(why), "no rank files");
		rc = -ENOENT;
		goto out_log;
	}
	rc = restore_into(r, j, &jb, keep_running, &job);
	if (rc == ROUTER_SUCCESS) {
		iofs_logf(sp->log, LOG_INFO, "spool",
			  "%s/%s: job %s restored: %zu ranks", sp->dir, j->name,
			  jb.nspace, jb.n);
		j = NULL; /* adopted: the router's */
	}
out_log:
	if (rc != 0)
		iofs_logf(sp->log, LOG_WARNING, "spool",
			  "%s/%" PRIu64 ": not restored: %s", sp->dir, num,
			  why[0] ? why
			  : rc < 0 ? strerror(-rc)
				   : router_strerror(rc));
	if (j)
		spool_job_close(j, false);
	free(text);
	free(jb.ranks);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int spool_restore(spool_t *sp, router_t *r, bool keep_running)
{
	int fd = dup(sp->dirfd);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	uint64_t *nums = NULL, v;
	size_t n = 0, cap = 0;
	struct dirent *e;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	while ((e = readdir(d))) {
		if (!iofs_parse_dec(e->d_name, strlen(e->d_name), UINT64_MAX - 1,
				    true, &v))
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 16;
			uint64_t *nn = realloc(nums, nc * sizeof(*nn));

			if (!nn)
				break;
			nums = nn;
			cap = nc;
		}
		nums[n++] = v;
		if (v >= sp->next)
			sp->next = v + 1;
	}
	closedir(d);
	if (n)
		qsort(nums, n, sizeof(*nums), cmp_u64);
	for (size_t i = 0; i < n; i++)
		restore_one(sp, r, nums[i], keep_running);
	free(nums);
	return (int)n;
}
