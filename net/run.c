/* SPDX-License-Identifier: MIT */
/*
 * iofs-run: run one or more ranks and forward their stdio to an iofs
 * daemon (docs/man/iofs-run.1, docs/protocol.md).
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "iofs_config.h"
#include "net/run_i.h"
#include "net/server.h"

void run_log(struct run *r, int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	iofs_vlogf(r->log, level, NULL, fmt, ap);
	va_end(ap);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: iofs-run [--connect ADDR] [--nspace NAME] "
		"[--rank N | -n COUNT] [--size N]\n"
		"                [--tag-output] [--rank-output] "
		"[--timestamp-output] [--xml] [--raw]\n"
		"                [--strict] [-v|--verbose]... [--munge-socket PATH]\n"
		"                -- COMMAND [ARG...]\n"
		"Runs COMMAND as rank(s) of job NAME and forwards its stdio "
		"to the iofs daemon.\n"
		"See iofs-run(1).\n");
}

static const char *real_getenv(const char *name, void *arg)
{
	return getenv(name);
}

/* Rank, size and job name from a launcher's environment (run_env.c). */
static void from_launcher(struct run *r, bool have_rank, bool have_size,
			  bool have_nspace)
{
	const struct run_env e = {.get = real_getenv};
	struct run_launch l;

	run_env_launch(&e, &l);
	if (!l.launcher)
		return;
	run_log(r, LOG_INFO,
		"launcher %s: job name '%s', rank %lld, size %lld "
		"(-1: not given)",
		l.launcher, l.nspace, l.have_rank ? (long long)l.rank : -1LL,
		l.have_size ? (long long)l.size : -1LL);
	if (!have_rank && l.have_rank)
		r->rank_base = l.rank;
	if (!have_size && l.have_size)
		r->size = l.size;
	if (!have_nspace && l.nspace[0])
		memcpy(r->nspace, l.nspace, sizeof(r->nspace));
}

static void dir_on(struct run *r, uint32_t bit)
{
	r->dirs.set |= bit;
	r->dirs.value |= bit;
}

enum {
	OPT_TAG = 256,
	OPT_RANKOUT,
	OPT_TS,
	OPT_XML,
	OPT_RAW,
	OPT_STRICT,
	OPT_VERSION,
	OPT_MUNGE_SOCKET,
};

static int parse_args(struct run *r, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"connect", required_argument, NULL, 'c'},
	    {"nspace", required_argument, NULL, 'N'},
	    {"rank", required_argument, NULL, 'r'},
	    {"np", required_argument, NULL, 'n'},
	    {"size", required_argument, NULL, 's'},
	    {"tag-output", no_argument, NULL, OPT_TAG},
	    {"rank-output", no_argument, NULL, OPT_RANKOUT},
	    {"timestamp-output", no_argument, NULL, OPT_TS},
	    {"xml", no_argument, NULL, OPT_XML},
	    {"raw", no_argument, NULL, OPT_RAW},
	    {"strict", no_argument, NULL, OPT_STRICT},
	    {"munge-socket", required_argument, NULL, OPT_MUNGE_SOCKET},
	    {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, OPT_VERSION},
	    {NULL, 0, NULL, 0},
	};
	bool have_rank = false, have_size = false, have_nspace = false;
	int c;

	r->count = 1;
	while ((c = getopt_long(argc, argv, "+c:N:r:n:s:vh", opts, NULL)) !=
	       -1) {
		switch (c) {
		case 'c':
			r->addr = optarg;
			break;
		case 'N':
			if (!router_nspace_valid(optarg, strlen(optarg))) {
				fprintf(
				    stderr,
				    "iofs-run: invalid --nspace '%s': 1-255 "
				    "bytes, no '/', no control characters, "
				    "not '.' or '..'\n",
				    optarg);
				return -1;
			}
			snprintf(r->nspace, sizeof(r->nspace), "%s", optarg);
			have_nspace = true;
			break;
		case 'r':
			if (run_parse_u32(optarg, &r->rank_base)) {
				fprintf(stderr,
					"iofs-run: invalid --rank '%s'\n",
					optarg);
				return -1;
			}
			have_rank = true;
			break;
		case 'n':
			if (run_parse_u32(optarg, &r->count) || r->count == 0 ||
			    r->count > PROTO_RANKS_MAX) {
				fprintf(stderr,
					"iofs-run: invalid -n '%s' (1..%u)\n",
					optarg, PROTO_RANKS_MAX);
				return -1;
			}
			break;
		case 's':
			if (run_parse_u32(optarg, &r->size)) {
				fprintf(stderr,
					"iofs-run: invalid --size '%s'\n",
					optarg);
				return -1;
			}
			have_size = true;
			break;
		case OPT_TAG:
			dir_on(r, ROUTER_DIR_TAG_OUTPUT);
			break;
		case OPT_RANKOUT:
			dir_on(r, ROUTER_DIR_RANK_OUTPUT);
			break;
		case OPT_TS:
			dir_on(r, ROUTER_DIR_TIMESTAMP);
			break;
		case OPT_XML:
			dir_on(r, ROUTER_DIR_XML_OUTPUT);
			break;
		case OPT_RAW:
			dir_on(r, ROUTER_DIR_OUTPUT_RAW);
			break;
		case OPT_STRICT:
			r->strict = true;
			break;
		case OPT_MUNGE_SOCKET:
			r->munge_socket = optarg;
			break;
		case 'v':
			r->verbose++;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case OPT_VERSION:
			printf("iofs-run %s (protocol %u)\n", IOFS_VERSION,
			       PROTO_VERSION);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "iofs-run: no COMMAND given\n");
		usage(stderr);
		return -1;
	}
	r->argv = argv + optind;
	/* quiet by default (the job's own output shares the terminal):
	 * warnings; -v adds information, -vv debugging */
	iofs_log_set_level(r->log, r->verbose ? LOG_INFO + (int)r->verbose - 1
					      : LOG_WARNING);
	from_launcher(r, have_rank, have_size, have_nspace);
	if (r->count - 1 > ROUTER_RANK_MAX - r->rank_base) {
		fprintf(stderr, "iofs-run: ranks %u+%u overflow\n",
			r->rank_base, r->count);
		return -1;
	}
	if (!r->size || r->size < r->rank_base + r->count)
		r->size = have_size ? r->size : r->rank_base + r->count;
	if (!r->nspace[0]) {
		const char *base = strrchr(r->argv[0], '/');
		base = base ? base + 1 : r->argv[0];
		snprintf(r->nspace, sizeof(r->nspace), "%.200s.%d",
			 base[0] && strcmp(base, ".") && strcmp(base, "..")
			     ? base
			     : "job",
			 (int)getpid());
	}
	if (!r->addr)
		r->addr = net_default_connect_addr();
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Finish                                                                    */

static void final_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct run *r = arg;

	link_down(r, "no final acknowledgement from the daemon within 10 s");
	event_base_loopbreak(r->base);
}

void run_check_finish(struct run *r)
{
	if (!r->kids || r->exited < r->count)
		return;
	if (!r->linked || (r->acked_exits == r->exits_sent &&
			   r->acked_bytes == r->sent_bytes)) {
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

	if (sig == SIGCHLD) {
		children_reap(r);
		return;
	}
	for (uint32_t i = 0; i < r->count; i++)
		if (r->kids[i].pid > 0 && !r->kids[i].reaped)
			kill(r->kids[i].pid, (int)sig);
}

static int setup_signals(struct run *r)
{
	static const int sigs[4] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP};

	signal(SIGPIPE, SIG_IGN);
	for (int i = 0; i < 4; i++) {
		r->sigs[i] = evsignal_new(r->base, sigs[i], sig_cb, r);
		if (!r->sigs[i] || evsignal_add(r->sigs[i], NULL) < 0)
			return -1;
	}
	return 0;
}

static void release_run(struct run *r)
{
	link_close(r);
	children_free(r);
	for (int i = 0; i < 4; i++)
		if (r->sigs[i])
			event_free(r->sigs[i]);
	if (r->final_timer)
		event_free(r->final_timer);
	if (r->base)
		event_base_free(r->base);
	free(r->scratch);
	iofs_log_free(r->log);
	r->log = NULL;
}

/* Three pipes per rank: -n 1000 needs more than the usual 1024 fds. */
static void raise_nofile(struct run *r)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	r->nofile_soft = rl.rlim_cur; /* the ranks get this one back */
	r->nofile_raised = rl.rlim_cur < rl.rlim_max;
	if (r->nofile_raised) {
		rl.rlim_cur = rl.rlim_max;
		r->nofile_raised = setrlimit(RLIMIT_NOFILE, &rl) == 0;
	}
}

int main(int argc, char **argv)
{
	struct run run = {.link_fd = -1};
	struct run *r = &run;
	int rc = 1;

	if (iofs_log_new("iofs-run", &r->log) < 0)
		return 1;
	if (parse_args(r, argc, argv) < 0) {
		iofs_log_free(r->log);
		return 2;
	}
	raise_nofile(r);
	r->base = event_base_new();
	r->scratch = malloc(RUN_READ_CHUNK);
	r->kids = calloc(r->count, sizeof(*r->kids));
	if (!r->base || !r->scratch || !r->kids)
		goto out_release;
	r->final_timer = evtimer_new(r->base, final_timeout_cb, r);
	if (!r->final_timer || setup_signals(r) < 0)
		goto out_release;

	if (link_open(r) < 0 && r->strict)
		goto out_release;
	if (link_start(r) < 0 && r->strict)
		goto out_release;
	for (uint32_t i = 0; i < r->count; i++) {
		struct child *ch = &r->kids[i];
		ch->rank = r->rank_base + i;
		if (child_spawn(r, ch) < 0) {
			/* Counted as exited with 127; the others still run. */
			if (ch->pid > 0)
				kill(ch->pid, SIGKILL);
			ch->pid = -1;
			ch->reaped = ch->exit_sent = true;
			r->exited++;
			if (!r->have_code) {
				r->have_code = true;
				r->exit_code = 127;
			}
		}
	}
	children_reap(r); /* a child may have exited before the loop */
	if (r->exited < r->count)
		event_base_dispatch(r->base);
	if (r->failed_strict)
		rc = 1;
	else
		rc = r->exit_code;
	if (r->xoff_rx || r->xon_rx)
		run_log(r, LOG_INFO, "XOFF received %llu, XON received %llu",
			(unsigned long long)r->xoff_rx,
			(unsigned long long)r->xon_rx);
out_release:
	release_run(r);
	return rc;
}
