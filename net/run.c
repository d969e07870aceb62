/* SPDX-License-Identifier: MIT */
/*
 * iofs-run: run one or more ranks and forward their stdio to an iofs
 * daemon (docs/man/iofs-run.1, docs/protocol.md).
 */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "log/num.h"
#include "iofs_config.h"
#include "net/run_i.h"
#include "net/server.h"

struct run {
	struct run_opts o;
	iofs_log_t *log; /* owned: stderr, "iofs-run: " */
	struct event_base *base;
	struct run_kids kids;
	struct run_link link;
	bool finishing;
	struct event *final_timer;
	struct event *sigs[4];
};

void run_log(iofs_log_t *log, int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	iofs_vlogf(log, level, NULL, fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------------------------ */
/* Options                                                                   */

/* What parse_args() learns besides struct run_opts. */
struct run_args {
	struct run_opts *o;
	bool have_rank, have_size, have_nspace, have_reconnect,
	    have_handover;
};

/* An option from the table below; its setter returns 0, RUN_ARGS_EXIT (done,
 * exit 0), or -EINVAL after saying why on stderr. */
enum { RUN_ARGS_EXIT = 1 };

struct run_option {
	const char *name;
	int short_name;	 /* 0: none */
	const char *arg; /* NULL: takes none */
	const char *help;
	int (*set)(struct run_args *a, const struct run_option *t,
		   const char *arg);
	uint32_t dir; /* ROUTER_DIR_* for opt_dir */
	size_t off;   /* offsetof(struct run_opts, ...) for opt_str */
};

static const struct run_option run_options[];

static const char *real_getenv(const char *name, void *arg)
{
	return getenv(name);
}

/* Rank, size and job name from a launcher's environment (run_env.c). */
static void from_launcher(struct run_args *a, iofs_log_t *log)
{
	const struct run_env e = {.get = real_getenv};
	struct run_opts *o = a->o;
	struct run_launch l;

	run_env_launch(&e, &l);
	if (!l.launcher)
		return;
	run_log(log, LOG_INFO,
		"launcher %s: job name '%s', rank %lld, size %lld "
		"(-1: not given)",
		l.launcher, l.nspace, l.have_rank ? (long long)l.rank : -1LL,
		l.have_size ? (long long)l.size : -1LL);
	if (!a->have_rank && l.have_rank)
		o->rank_base = l.rank;
	if (!a->have_size && l.have_size)
		o->size = l.size;
	if (!a->have_nspace && l.nspace[0])
		memcpy(o->nspace, l.nspace, sizeof(o->nspace));
}

/* A string option: run_opts' const char * at t->off. */
static int opt_str(struct run_args *a, const struct run_option *t,
		   const char *arg)
{
	*(const char **)((char *)a->o + t->off) = arg;
	return 0;
}

static int opt_nspace(struct run_args *a, const struct run_option *t,
		      const char *arg)
{
	if (!router_nspace_valid(arg, strlen(arg))) {
		fprintf(stderr,
			"iofs-run: invalid --nspace '%s': 1-255 bytes, no '/', "
			"no control characters, not '.' or '..'\n",
			arg);
		return -EINVAL;
	}
	snprintf(a->o->nspace, sizeof(a->o->nspace), "%s", arg);
	a->have_nspace = true;
	a->o->nspace_given = true;
	return 0;
}

/* A decimal rank-sized number for option --@name: 0, or -EINVAL said. */
static int opt_u32(const char *name, const char *arg, uint32_t *out)
{
	if (run_parse_u32(arg, out)) {
		fprintf(stderr,
			"iofs-run: invalid %s '%s': give a number from 0 to "
			"%u\n",
			name, arg, ROUTER_RANK_MAX);
		return -EINVAL;
	}
	return 0;
}

static int opt_rank(struct run_args *a, const struct run_option *t,
		    const char *arg)
{
	a->have_rank = true;
	return opt_u32("--rank", arg, &a->o->rank_base);
}

static int opt_np(struct run_args *a, const struct run_option *t,
		  const char *arg)
{
	if (run_parse_u32(arg, &a->o->count) || a->o->count == 0 ||
	    a->o->count > PROTO_RANKS_MAX) {
		fprintf(stderr, "iofs-run: invalid -n '%s' (1..%u)\n", arg,
			PROTO_RANKS_MAX);
		return -EINVAL;
	}
	return 0;
}

static int opt_size(struct run_args *a, const struct run_option *t,
		    const char *arg)
{
	a->have_size = true;
	return opt_u32("--size", arg, &a->o->size);
}

static int opt_strict(struct run_args *a, const struct run_option *t,
		      const char *arg)
{
	a->o->strict = true;
	return 0;
}

static int opt_no_stdin(struct run_args *a, const struct run_option *t,
			const char *arg)
{
	a->o->no_stdin = true;
	return 0;
}

/* Seconds 0..86400 (0: no resume) for --reconnect-timeout or
 * $IOFS_RECONNECT_TIMEOUT. */
static int parse_reconnect(const char *what, const char *arg, uint32_t *out)
{
	if (run_parse_u32(arg, out) || *out > 86400) {
		fprintf(stderr,
			"iofs-run: invalid %s '%s': seconds, 0 to 86400\n",
			what, arg);
		return -EINVAL;
	}
	return 0;
}

static int opt_reconnect(struct run_args *a, const struct run_option *t,
			 const char *arg)
{
	a->have_reconnect = true;
	return parse_reconnect("--reconnect-timeout", arg, &a->o->reconnect_s);
}

/* BYTES with an optional K, M or G suffix (binary), 64K..1G. */
static int opt_replay(struct run_args *a, const struct run_option *t,
		      const char *arg)
{
	uint64_t v;

	if (!iofs_parse_in(arg, true, 64u << 10, 1u << 30, &v)) {
		fprintf(stderr,
			"iofs-run: invalid --replay-buffer '%s': bytes (K, M, "
			"G suffixes), 64K to 1G\n",
			arg);
		return -EINVAL;
	}
	a->o->replay_max = (size_t)v;
	return 0;
}

static int opt_handover(struct run_args *a, const struct run_option *t,
			const char *arg)
{
	a->o->handover = strcmp(t->name, "handover") == 0;
	a->have_handover = true;
	return 0;
}

static int opt_verbose(struct run_args *a, const struct run_option *t,
		       const char *arg)
{
	a->o->verbose++;
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: iofs-run [--connect ADDR] [--nspace NAME] "
		   "[--rank N | -n COUNT] [--size N]\n"
		   "                [--tag-output] [--rank-output] "
		   "[--timestamp-output] [--xml] [--raw]\n"
		   "                [--strict] [--[no-]handover] [--no-stdin] "
		   "[-v|--verbose]... [--munge-socket PATH]\n"
		   "                -- COMMAND [ARG...]\n"
		   "Runs COMMAND as rank(s) of job NAME and forwards its stdio "
		   "to the iofs daemon.\n");
	for (const struct run_option *t = run_options; t->name; t++) {
		char lhs[64];
		snprintf(lhs, sizeof(lhs), "%s%c%s--%s%s%s",
			 t->short_name ? "-" : "",
			 t->short_name ? t->short_name : ' ',
			 t->short_name ? ", " : "  ", t->name,
			 t->arg ? " " : "", t->arg ? t->arg : "");
		fprintf(f, "  %-26s %s\n", lhs + !t->short_name, t->help);
	}
	fprintf(f, "See iofs-run(1).\n");
}

static int opt_help(struct run_args *a, const struct run_option *t,
		    const char *arg)
{
	usage(stdout);
	return RUN_ARGS_EXIT;
}

static int opt_version(struct run_args *a, const struct run_option *t,
		       const char *arg)
{
	printf("iofs-run %s (protocol %u)\n", IOFS_VERSION, PROTO_VERSION);
	return RUN_ARGS_EXIT;
}

static int opt_dir(struct run_args *a, const struct run_option *t,
		   const char *arg); /* sets t->dir */

static const struct run_option run_options[] = {
    {"connect", 'c', "ADDR", "the daemon (unix:PATH, tcp:HOST:PORT)", opt_str,
     .off = offsetof(struct run_opts, addr)},
    {"nspace", 'N', "NAME", "the job's name", opt_nspace},
    {"rank", 'r', "N", "the (first) rank", opt_rank},
    {"np", 'n', "COUNT", "run COUNT ranks", opt_np},
    {"size", 's', "N", "the job's size", opt_size},
    {"tag-output", 0, NULL, "merged views: [nspace,rank]<stream>: prefix",
     opt_dir, ROUTER_DIR_TAG_OUTPUT},
    {"rank-output", 0, NULL, "merged views: [rank]<stream>: prefix", opt_dir,
     ROUTER_DIR_RANK_OUTPUT},
    {"timestamp-output", 0, NULL, "merged views: time prefix", opt_dir,
     ROUTER_DIR_TIMESTAMP},
    {"xml", 0, NULL, "merged views: XML", opt_dir, ROUTER_DIR_XML_OUTPUT},
    {"raw", 0, NULL, "merged views: no line buffering", opt_dir,
     ROUTER_DIR_OUTPUT_RAW},
    {"strict", 0, NULL, "no daemon: fail instead of falling back", opt_strict},
    {"reconnect-timeout", 0, "SECONDS",
     "resume a broken link for up to SECONDS (0: no resume; default 300)",
     opt_reconnect},
    {"replay-buffer", 0, "BYTES",
     "output kept while reconnecting (default 4M)", opt_replay},
    {"handover", 0, NULL,
     "same host: hand the pipes to the daemon (the default on a Unix "
     "socket)",
     opt_handover},
    {"no-handover", 0, NULL,
     "relay the pipes' bytes through this process (TCP always does)",
     opt_handover},
    {"no-stdin", 0, NULL,
     "the ranks read /dev/null (EOF at once; their stdin files refuse "
     "writes)",
     opt_no_stdin},
    {"munge-socket", 0, "PATH", "munged's socket (TCP)", opt_str,
     .off = offsetof(struct run_opts, munge_socket)},
    {"verbose", 'v', NULL, "more messages (repeatable)", opt_verbose},
    {"help", 'h', NULL, "this text", opt_help},
    {"version", 'V', NULL, "version and protocol", opt_version},
    {NULL, 0, NULL, NULL, NULL},
};

#define RUN_OPTIONS (sizeof(run_options) / sizeof(run_options[0]))

/* The option run_options[@index] or the first with that short name. */
static const struct run_option *opt_find(int c)
{
	if (c >= 256 && (size_t)(c - 256) < RUN_OPTIONS - 1)
		return &run_options[c - 256];
	for (const struct run_option *t = run_options; t->name; t++)
		if (t->short_name && t->short_name == c)
			return t;
	return NULL;
}

static int opt_dir(struct run_args *a, const struct run_option *t,
		   const char *arg)
{
	a->o->dirs.set |= t->dir;
	a->o->dirs.value |= t->dir;
	return 0;
}
/* getopt_long()'s view of run_options: long options return 256 + index. */
static void opt_getopt(struct option *lo, char *so, size_t solen)
{
	size_t n = 0, i;

	so[n++] = '+';
	for (i = 0; run_options[i].name; i++) {
		const struct run_option *t = &run_options[i];
		lo[i] = (struct option){
		    t->name, t->arg ? required_argument : no_argument, NULL,
		    256 + (int)i};
		if (t->short_name && n + 3 < solen) {
			so[n++] = (char)t->short_name;
			if (t->arg)
				so[n++] = ':';
		}
	}
	lo[i] = (struct option){NULL, 0, NULL, 0};
	so[n] = '\0';
}

/* What is not given: from the launcher, else derived. */
static int opt_defaults(struct run_args *a, iofs_log_t *log)
{
	struct run_opts *o = a->o;

	from_launcher(a, log);
	if (o->count - 1 > ROUTER_RANK_MAX - o->rank_base) {
		fprintf(stderr, "iofs-run: ranks %u+%u overflow\n",
			o->rank_base, o->count);
		return -EINVAL;
	}
	if (a->have_size && o->size && o->size < o->rank_base + o->count) {
		fprintf(stderr,
			"iofs-run: ranks %u..%u are outside --size %u (ranks "
			"0..%u): give a larger --size, or a lower --rank\n",
			o->rank_base, o->rank_base + o->count - 1, o->size,
			o->size - 1);
		return -EINVAL;
	}
	if (!o->size || o->size < o->rank_base + o->count)
		o->size = a->have_size ? o->size : o->rank_base + o->count;
	if (!o->nspace[0]) {
		const char *base = strrchr(o->argv[0], '/');
		base = base ? base + 1 : o->argv[0];
		snprintf(o->nspace, sizeof(o->nspace), "%.200s.%d",
			 base[0] && strcmp(base, ".") && strcmp(base, "..")
			     ? base
			     : "job",
			 (int)getpid());
	}
	if (!o->addr)
		o->addr = net_default_connect_addr();
	const char *ho = getenv("IOFS_HANDOVER");
	const char *nh = getenv("IOFS_NO_HANDOVER");
	if (!a->have_handover && ho && *ho)
		o->handover = strcmp(ho, "0") != 0;
	if (!a->have_handover && nh && *nh && strcmp(nh, "0") != 0)
		o->handover = false;
	const char *env = getenv("IOFS_RECONNECT_TIMEOUT");
	if (!a->have_reconnect && env && *env &&
	    parse_reconnect("$IOFS_RECONNECT_TIMEOUT", env, &o->reconnect_s))
		return -EINVAL;
	return 0;
}

/* 0, RUN_ARGS_EXIT (--help, --version: exit 0) or -EINVAL (said why). */
static int parse_args(struct run_opts *o, iofs_log_t *log, int argc,
		      char **argv)
{
	struct option lo[RUN_OPTIONS];
	char so[2 * RUN_OPTIONS + 2];
	struct run_args a = {.o = o};
	int c;

	opt_getopt(lo, so, sizeof(so));
	o->count = 1;
	o->reconnect_s = RUN_RECONNECT_DEFAULT_S;
	o->replay_max = RUN_REPLAY_DEFAULT;
	o->handover = true;
	while ((c = getopt_long(argc, argv, so, lo, NULL)) != -1) {
		const struct run_option *t = opt_find(c);
		int rc = t ? t->set(&a, t, optarg) : -EINVAL;
		if (!t)
			usage(stderr);
		if (rc != 0)
			return rc;
	}
	if (optind >= argc) {
		fprintf(stderr, "iofs-run: no COMMAND given\n");
		usage(stderr);
		return -EINVAL;
	}
	o->argv = argv + optind;
	/* quiet by default (the job's own output shares the terminal):
	 * warnings; -v adds information, -vv debugging */
	iofs_log_set_level(log, o->verbose ? LOG_INFO + (int)o->verbose - 1
					   : LOG_WARNING);
	return opt_defaults(&a, log);
}

/* ------------------------------------------------------------------------ */
/* Finish                                                                    */

static void final_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct run *r = arg;

	if (run_link_reconnecting(&r->link)) { /* its own timeout rules */
		r->finishing = false;
		return;
	}
	run_link_fallback(&r->link,
			  "no final acknowledgement from the daemon within "
			  "10 s");
	event_base_loopbreak(r->base);
}

/* The link's settled hook: every rank exited and the daemon has it all? */
static void run_check_finish(void *arg)
{
	struct run *r = arg;

	if (!run_kids_done(&r->kids) || run_link_reconnecting(&r->link))
		return;
	if (!run_link_up(&r->link) || run_link_settled(&r->link)) {
		event_base_loopbreak(r->base);
		return;
	}
	if (!r->finishing) {
		struct timeval tv = {RUN_FINAL_ACK_TIMEOUT_S, 0};
		r->finishing = true;
		evtimer_add(r->final_timer, &tv);
	}
}

/* ------------------------------------------------------------------------ */
/* Signals                                                                   */

static void sig_cb(evutil_socket_t sig, short what, void *arg)
{
	struct run *r = arg;

	if (sig == SIGCHLD)
		run_kids_reap(&r->kids);
	else
		run_kids_signal(&r->kids, (int)sig);
}

static int setup_signals(struct run *r)
{
	static const int sigs[4] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP};

	signal(SIGPIPE, SIG_IGN);
	for (int i = 0; i < 4; i++) {
		r->sigs[i] = evsignal_new(r->base, sigs[i], sig_cb, r);
		if (!r->sigs[i] || evsignal_add(r->sigs[i], NULL) < 0)
			return -ENOMEM;
	}
	return 0;
}

static void release_run(struct run *r)
{
	run_link_release(&r->link);
	run_kids_release(&r->kids);
	for (int i = 0; i < 4; i++)
		if (r->sigs[i]) {
			event_free(r->sigs[i]);
			r->sigs[i] = NULL;
		}
	if (r->final_timer) {
		event_free(r->final_timer);
		r->final_timer = NULL;
	}
	if (r->base) {
		event_base_free(r->base);
		r->base = NULL;
	}
	iofs_log_free(r->log);
	r->log = NULL;
}

int main(int argc, char **argv)
{
	struct run run = {0};
	struct run *r = &run;
	int rc = 1;

	run_link_init(&r->link, NULL, &r->o, NULL, &r->kids, run_check_finish,
		      r);
	if (iofs_log_new("iofs-run", &r->log) < 0)
		return 1;
	rc = parse_args(&r->o, r->log, argc, argv);
	if (rc != 0) {
		iofs_log_free(r->log);
		return rc > 0 ? 0 : 2;
	}
	rc = 1;
	/* Every DATA frame's bytes are held in a malloc()ed buffer (up to
	 * RUN_READ_CHUNK) until the daemon ACKs them.  With glibc's default
	 * 128 KiB trim threshold, the heap's top went back to the kernel and
	 * was faulted in (and zeroed) again about 1 100 times per GiB: a
	 * quarter to a third of the forwarder's CPU (docs/performance.md,
	 * "Where the time goes").  Keep a few windows' worth instead. */
	mallopt(M_TRIM_THRESHOLD, (int)(8 * RUN_CREDIT_HIGH));
	mallopt(M_TOP_PAD, (int)RUN_CREDIT_HIGH);
	r->base = event_base_new();
	if (!r->base || run_kids_init(&r->kids, r->base, &r->o, r->log,
				      &run_link_kids_ops, &r->link) < 0)
		goto out_release;
	run_link_init(&r->link, r->base, &r->o, r->log, &r->kids,
		      run_check_finish, r);
	r->final_timer = evtimer_new(r->base, final_timeout_cb, r);
	if (!r->final_timer || setup_signals(r) < 0)
		goto out_release;

	if (run_link_open(&r->link) < 0 && r->o.strict)
		goto out_release;
	if (run_link_start(&r->link) < 0 && r->o.strict)
		goto out_release;
	run_kids_spawn(&r->kids);
	run_kids_reap(&r->kids); /* a child may have exited before the loop */
	/* Every rank may be done already (after a hand-over nothing waits for
	 * the pipes): the loop still runs until the daemon ACKed the EXITs. */
	if (!run_kids_done(&r->kids) ||
	    (run_link_up(&r->link) && !run_link_settled(&r->link)))
		event_base_dispatch(r->base);
	rc = r->link.failed_strict ? 1 : r->kids.exit_code;
	if (r->link.xoff_rx || r->link.xon_rx)
		run_log(r->log, LOG_INFO,
			"XOFF received %llu, XON received %llu (%llu of them "
			"by a link loss)",
			(unsigned long long)r->link.xoff_rx,
			(unsigned long long)(r->link.xon_rx +
					     r->link.xon_implicit),
			(unsigned long long)r->link.xon_implicit);
out_release:
	release_run(r);
	return rc;
}
