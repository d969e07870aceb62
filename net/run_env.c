/* SPDX-License-Identifier: MIT */
/*
 * iofs-run: rank, size and job name from the launcher that started us
 * (docs/man/iofs-run.1 "JOB NAMES", docs/filesystem.md "Job names").
 *
 * Launchers nest (mpirun inside an srun allocation, a Flux instance started
 * by srun, ...) and a process inherits the variables of every launcher
 * above it, so the variables are never mixed: the innermost launcher is
 * picked first and everything comes from it.  Its job name is the name the
 * launcher itself shows for this launch, one per launch:
 *   Open MPI 4/5, PRRTE, PMIx  PMIX_NAMESPACE (ORTE: the jobid number,
 *                              PRRTE: "prterun-HOST-PID@N")
 *   Flux                       FLUX_JOB_ID (F58)
 *   Slurm step (srun)          SLURM_JOB_ID.SLURM_STEP_ID ("1234.0"; the
 *                              special ids as sacct shows them: "1234.batch",
 *                              "1234.extern", "1234.interactive")
 *   Slurm batch script         SLURM_JOB_ID.batch (no SLURM_STEP_ID there)
 * Measured under Slurm 22.05 (tests/slurm): srun tasks get SLURM_STEP_ID
 * 0, 1, ...; the batch script has ENVIRONMENT=BATCH and no SLURM_STEP_ID;
 * salloc's interactive step has SLURM_STEP_ID=4294967290; a salloc shell
 * without it has neither.  Open MPI 4.1 sets PMIX_NAMESPACE to its jobid.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log/num.h"
#include "net/run_i.h"

int run_parse_u32(const char *s, uint32_t *out)
{
	uint64_t v;

	if (!iofs_parse_u64(s, ROUTER_RANK_MAX, &v))
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static const char *env(const struct run_env *e, const char *name)
{
	const char *v = e->get(name, e->arg);
	return v && *v ? v : NULL;
}

static void take_u32(const struct run_env *e, const char *name, bool *have,
		     uint32_t *out)
{
	const char *v = env(e, name);
	if (v && run_parse_u32(v, out) == 0)
		*have = true;
}

/* The job name @a, or "@a.@b": kept only if it is a valid nspace. */
static void take_name(struct run_launch *l, const char *a, const char *b)
{
	char buf[ROUTER_NSPACE_MAX + 2];
	int n =
	    snprintf(buf, sizeof(buf), "%s%s%s", a, b ? "." : "", b ? b : "");

	if (n > 0 && n <= ROUTER_NSPACE_MAX && router_nspace_valid(buf, n))
		memcpy(l->nspace, buf, (size_t)n + 1);
}

/* Slurm's step id as sacct prints it: the special ids by name. */
static const char *slurm_step_name(const char *step)
{
	static const struct {
		const char *id, *name;
	} special[] = {
	    {"4294967290", "interactive"}, /* SLURM_INTERACTIVE_STEP */
	    {"4294967291", "batch"},	   /* SLURM_BATCH_SCRIPT */
	    {"4294967292", "extern"},	   /* SLURM_EXTERN_CONT */
	};
	for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++)
		if (!strcmp(step, special[i].id))
			return special[i].name;
	return step;
}

/* A task of an srun step: SLURM_STEP_ID is set only there. */
static bool from_slurm_step(const struct run_env *e, struct run_launch *l)
{
	const char *job = env(e, "SLURM_JOB_ID");
	const char *step = env(e, "SLURM_STEP_ID");

	if (!job || !step)
		return false;
	l->launcher = "slurm";
	take_name(l, job, slurm_step_name(step));
	take_u32(e, "SLURM_PROCID", &l->have_rank, &l->rank);
	take_u32(e, "SLURM_STEP_NUM_TASKS", &l->have_size, &l->size);
	if (!l->have_size)
		take_u32(e, "SLURM_NTASKS", &l->have_size, &l->size);
	return true;
}

/* The batch script (sacct's "JOBID.batch"): one process.  SLURM_NTASKS
 * there is the allocation's, not ours; a salloc shell is no task at all. */
static bool from_slurm_batch(const struct run_env *e, struct run_launch *l)
{
	const char *job = env(e, "SLURM_JOB_ID");
	const char *where = env(e, "ENVIRONMENT");

	if (!job || !where || strcmp(where, "BATCH"))
		return false;
	l->launcher = "slurm";
	take_name(l, job, "batch");
	return true;
}

/* Slurm's own PMIx plugin (srun --mpi=pmix) names its namespace
 * "slurm.pmix.JOBID.STEPID": that launch is the Slurm step. */
static bool pmix_is_slurm(const struct run_env *e, const char *ns)
{
	const char *job = env(e, "SLURM_JOB_ID");
	const char *step = env(e, "SLURM_STEP_ID");
	char buf[ROUTER_NSPACE_MAX + 2];

	if (!job || !step)
		return false;
	snprintf(buf, sizeof(buf), "slurm.pmix.%s.%s", job, step);
	return !strcmp(ns, buf);
}

static bool from_pmix(const struct run_env *e, struct run_launch *l)
{
	const char *ns = env(e, "PMIX_NAMESPACE");

	if (!ns || pmix_is_slurm(e, ns))
		return false;
	l->launcher = env(e, "OMPI_COMM_WORLD_RANK") ? "openmpi" : "pmix";
	take_name(l, ns, NULL);
	take_u32(e, "OMPI_COMM_WORLD_RANK", &l->have_rank, &l->rank);
	if (!l->have_rank)
		take_u32(e, "PMIX_RANK", &l->have_rank, &l->rank);
	take_u32(e, "OMPI_COMM_WORLD_SIZE", &l->have_size, &l->size);
	return true;
}

static bool from_flux(const struct run_env *e, struct run_launch *l)
{
	const char *id = env(e, "FLUX_JOB_ID");

	if (!id || !env(e, "FLUX_TASK_RANK"))
		return false;
	l->launcher = "flux";
	take_name(l, id, NULL);
	take_u32(e, "FLUX_TASK_RANK", &l->have_rank, &l->rank);
	take_u32(e, "FLUX_JOB_SIZE", &l->have_size, &l->size);
	return true;
}

/* MPICH's hydra and other PMI-1/2 launchers: rank and size, no name. */
static bool from_pmi(const struct run_env *e, struct run_launch *l)
{
	if (!env(e, "PMI_RANK"))
		return false;
	l->launcher = "pmi";
	take_u32(e, "PMI_RANK", &l->have_rank, &l->rank);
	take_u32(e, "PMI_SIZE", &l->have_size, &l->size);
	return true;
}

void run_env_launch(const struct run_env *e, struct run_launch *l)
{
	memset(l, 0, sizeof(*l));
	/* Innermost first: an MPI launch inside a Flux or Slurm job, a Flux
	 * job inside a Slurm step, then Slurm's own launches. */
	if (env(e, "OMPI_COMM_WORLD_RANK") && from_pmix(e, l))
		return;
	if (from_flux(e, l) || from_pmix(e, l) || from_slurm_step(e, l) ||
	    from_slurm_batch(e, l))
		return;
	from_pmi(e, l);
}

/* A word as a POSIX shell reads it back: as it is when it holds only
 * characters no shell treats specially, else in single quotes ('\'' for a
 * quote).  Control characters (not allowed in an info line) become '?'. */
static size_t quote_word(const char *w, char *out, size_t cap)
{
	static const char plain[] = "abcdefghijklmnopqrstuvwxyz"
				    "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				    "0123456789_./=:,+@%^-";
	bool quote = !w[0] || w[strspn(w, plain)] != '\0';
	size_t n = 0;

#define PUT(ch)                                                                \
	do {                                                                   \
		if (n < cap)                                                   \
			out[n] = (ch);                                         \
		n++;                                                           \
	} while (0)
	if (quote)
		PUT('\'');
	for (const unsigned char *p = (const unsigned char *)w; *p; p++) {
		if (*p == '\'') {
			PUT('\'');
			PUT('\\');
			PUT('\'');
			PUT('\'');
		} else {
			PUT(*p < 0x20 || *p == 0x7f ? '?' : (char)*p);
		}
	}
	if (quote)
		PUT('\'');
#undef PUT
	return n;
}

ssize_t run_command_frame(char *const *argv, uint8_t *buf, size_t cap)
{
	char text[PROTO_COMMAND_MAX + 1];
	bool cut;
	size_t len = run_command_text(argv, text, sizeof(text), &cut);
	struct proto_frame f = {.type = PROTO_COMMAND,
				.flags = cut ? PROTO_COMMAND_F_CUT : 0,
				.msg = text,
				.msg_len = len};

	return len ? proto_encode(&f, buf, cap) : 0;
}

size_t run_command_text(char *const *argv, char *buf, size_t cap, bool *cut)
{
	size_t len = 0;

	*cut = false;
	if (!cap)
		return 0;
	for (size_t i = 0; argv[i]; i++) {
		size_t room = cap - 1 - len;
		size_t sep = i ? 1 : 0;
		size_t n = sep <= room
			       ? quote_word(argv[i], buf + len + sep, room - sep)
			       : 0;

		if (sep + n > room) { /* cut at a whole word, if one fits */
			*cut = true;
			break;
		}
		if (sep)
			buf[len] = ' ';
		len += sep + n;
	}
	buf[len] = '\0';
	return len;
}
