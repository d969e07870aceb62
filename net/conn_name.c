/* SPDX-License-Identifier: MIT */
/*
 * Which job a HELLO joins: the job-name collision rule (docs/filesystem.md,
 * "Job names").  A run asks for a name X; its ranks get, in this order:
 *   1. the newest incarnation of X (X, X~1, X~2, ...) that belongs to the
 *      same uid, has not ended, and has all the announced ranks free
 *      (neither registered in the router, even as ended, nor claimed by
 *      another live connection): the run's later ranks find the job their
 *      first rank created, whatever order they arrive in;
 *   2. else the first incarnation that has ended, belongs to the same uid,
 *      and has no open reader or stdin writer: it is replaced (as a re-run
 *      of a finished job always was), unless the name is the launcher's
 *      (PROTO_HELLO_F_KEEP: two runs in one batch script, a requeue);
 *   3. else the first free incarnation: a new job, under a distinct name.
 * Nothing else is ever joined or replaced: not another user's job (root's
 * neither: a squatted name costs the real job its name, never its output),
 * not a job still running with those ranks taken, not an ended job that
 * someone is still reading.  "~" cannot collide with the launchers' own
 * names (Slurm's <jobid>.<stepid>).
 */
#include <stdio.h>
#include <string.h>
#include <syslog.h>

#include "net/server_i.h"
#include "router/strmap.h"

#define NAME_TRIES 1000 /* incarnations looked at before refusing */

struct incarnation {
	router_job_t *job;	    /* in the router, or NULL */
	const struct conn *claimer; /* a live connection announcing it */
	uint32_t owner, size;
	bool exists, complete;
};

static void look(struct conn *c, const char *name, struct incarnation *in)
{
	const struct conn *o = strmap_get(&c->srv->conns_by_ns, name);
	uint32_t gid;

	while (o && (o == c || o->dead || !o->ranks))
		o = o->ns_next;
	in->job = router_job_lookup(c->srv->router, name);
	in->claimer = o;
	in->exists = in->job || o;
	in->complete = in->job && router_job_complete(in->job);
	if (in->job) {
		router_job_owner(in->job, &in->owner, &gid);
		in->size = router_job_size(in->job);
	} else if (o) {
		in->owner = o->uid;
		in->size = o->job_size;
	}
}

/* The ranks of one run announce the same job size (0: unknown). */
static bool same_size(const struct conn *c, const struct incarnation *in)
{
	return !c->job_size || !in->size || c->job_size == in->size;
}

/* First rank of the range taken in @name (c->nspace is set to it), or -1. */
static int64_t taken(struct conn *c, const struct incarnation *in,
		     uint32_t base, uint32_t count)
{
	if (in->job && !in->complete && router_job_rank_count(in->job))
		for (uint32_t i = 0; i < count; i++)
			if (router_job_rank(in->job, base + i))
				return base + i;
	return conn_index_claimed(c, base, count);
}

/* Why the run does not get the name it asked for (for the log). */
static void why_not(struct conn *c, const struct incarnation *in, uint32_t base,
		    uint32_t count, char *why, size_t len)
{
	int64_t r;

	if (in->owner != c->uid) {
		snprintf(why, len, "belongs to uid %u", in->owner);
		if (in->job)
			router_job_owner_refused(
			    in->job, c->uid, in->complete ? "replace" : "join");
	} else if (in->complete && (c->hello_flags & PROTO_HELLO_F_KEEP)) {
		snprintf(why, len,
			 "has ended (a launcher's name is kept, not "
			 "replaced)");
	} else if (in->complete) {
		snprintf(why, len,
			 "has ended but is still open (a reader or "
			 "a stdin writer)");
	} else if ((r = taken(c, in, base, count)) >= 0) {
		snprintf(why, len, "already has a rank %lld (running or ended)",
			 (long long)r);
	} else if (!same_size(c, in)) {
		snprintf(why, len,
			 "is a running job of %u ranks, this run "
			 "announces %u",
			 in->size, c->job_size);
	} else {
		snprintf(why, len, "is in use");
	}
}

int conn_name_assign(struct conn *c, uint32_t base, uint32_t count)
{
	char name[ROUTER_NSPACE_MAX + 1], why[128] = "";
	char join[ROUTER_NSPACE_MAX + 1] = "",
				      replace[ROUTER_NSPACE_MAX + 1] = "";
	struct incarnation in;
	unsigned k;

	for (k = 0; k < NAME_TRIES; k++) {
		int n =
		    k ? snprintf(name, sizeof(name), "%s~%u", c->requested, k)
		      : snprintf(name, sizeof(name), "%s", c->requested);
		if (n < 0 || (size_t)n >= sizeof(name))
			break;
		memcpy(c->nspace, name, (size_t)n + 1);
		look(c, name, &in);
		if (!in.exists)
			break;
		if (in.owner != c->uid)
			goto not_this;
		if ((!in.complete || in.claimer) && same_size(c, &in) &&
		    taken(c, &in, base, count) < 0)
			memcpy(join, name, (size_t)n + 1); /* the newest wins */
		else if (in.complete && !in.claimer && !replace[0] &&
			 !router_job_in_use(in.job) &&
			 !(c->hello_flags & PROTO_HELLO_F_KEEP))
			memcpy(replace, name, (size_t)n + 1);
	not_this:
		if (k == 0 && strcmp(join, name) && strcmp(replace, name))
			why_not(c, &in, base, count, why, sizeof(why));
		else if (k == 0)
			snprintf(why, sizeof(why),
				 "has a newer incarnation "
				 "this run belongs to");
	}
	if (join[0])
		snprintf(c->nspace, sizeof(c->nspace), "%s", join);
	else if (replace[0])
		snprintf(c->nspace, sizeof(c->nspace), "%s", replace);
	else if (k == NAME_TRIES || in.exists) {
		return conn_fail(c, PROTO_REFUSED_EXISTS,
			  "job '%s' %s, and no free name '%s~N' is left",
			  c->requested, why, c->requested);
	}
	if (strcmp(c->nspace, c->requested) != 0)
		srv_log(c->srv, LOG_WARNING,
			"conn %llu (%s): job '%s' %s: this run is '%s'",
			(unsigned long long)c->id, c->peer, c->requested, why,
			c->nspace);
	return 0;
}
