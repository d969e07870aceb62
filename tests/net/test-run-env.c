/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of iofs-run's launcher detection (net/run_env.c): the job name,
 * rank and size each launcher's environment gives, nested launchers (the
 * innermost wins), Slurm steps named "JOBID.STEPID" (issue 11 defect 4).
 * The environments are the ones measured under the real launchers
 * (docs/man/iofs-run.1, tests/slurm/steps.sh runs real srun steps).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "net/run_i.h"

/* A NULL-terminated list of "NAME=value" strings. */
static const char *lookup(const char *name, void *arg)
{
	const char *const *vars = arg;
	size_t n = strlen(name);

	for (; *vars; vars++)
		if (!strncmp(*vars, name, n) && (*vars)[n] == '=')
			return *vars + n + 1;
	return NULL;
}

static struct run_launch detect(const char *const *vars)
{
	const struct run_env e = {.get = lookup, .arg = (void *)vars};
	struct run_launch l;

	run_env_launch(&e, &l);
	return l;
}

static void expect(const char *const *vars, const char *launcher,
		   const char *nspace, int rank, int size)
{
	struct run_launch l = detect(vars);

	if (!launcher) {
		assert_null(l.launcher);
	} else {
		assert_non_null(l.launcher);
		assert_string_equal(l.launcher, launcher);
	}
	assert_string_equal(l.nspace, nspace);
	assert_int_equal(l.have_rank, rank >= 0);
	if (rank >= 0)
		assert_int_equal(l.rank, rank);
	assert_int_equal(l.have_size, size >= 0);
	if (size >= 0)
		assert_int_equal(l.size, size);
}

static void test_nothing(void **state)
{
	const char *v[] = {"HOME=/root", NULL};
	expect(v, NULL, "", -1, -1);
}

/* Two srun steps of one allocation: distinct names (the defect). */
static void test_slurm_steps(void **state)
{
	const char *s0[] = {"SLURM_JOB_ID=7159",
			    "SLURM_STEP_ID=0",
			    "SLURM_STEPID=0",
			    "SLURM_PROCID=2",
			    "SLURM_NTASKS=3",
			    "SLURM_STEP_NUM_TASKS=3",
			    NULL};
	const char *s1[] = {"SLURM_JOB_ID=7159",      "SLURM_STEP_ID=1",
			    "SLURM_PROCID=0",	      "SLURM_NTASKS=4",
			    "SLURM_STEP_NUM_TASKS=2", NULL};
	expect(s0, "slurm", "7159.0", 2, 3);
	/* the step's own size, not the allocation's */
	expect(s1, "slurm", "7159.1", 0, 2);
}

static void test_slurm_special_steps(void **state)
{
	const char *inter[] = {"SLURM_JOB_ID=12", "SLURM_STEP_ID=4294967290",
			       "SLURM_PROCID=0", NULL};
	const char *batch[] = {"SLURM_JOB_ID=12", "SLURM_STEP_ID=4294967291",
			       NULL};
	const char *ext[] = {"SLURM_JOB_ID=12", "SLURM_STEP_ID=4294967292",
			     NULL};
	const char *no_size[] = {"SLURM_JOB_ID=12", "SLURM_STEP_ID=3",
				 "SLURM_NTASKS=5", NULL};
	expect(inter, "slurm", "12.interactive", 0, -1);
	expect(batch, "slurm", "12.batch", -1, -1);
	expect(ext, "slurm", "12.extern", -1, -1);
	expect(no_size, "slurm", "12.3", -1, 5);
}

/* The batch script: no SLURM_STEP_ID; its SLURM_NTASKS is the allocation's
 * (sbatch -n 4), the script itself is one process. */
static void test_slurm_batch(void **state)
{
	const char *v[] = {"ENVIRONMENT=BATCH", "SLURM_JOB_ID=7160",
			   "SLURM_PROCID=0", "SLURM_NTASKS=4", NULL};
	expect(v, "slurm", "7160.batch", -1, -1);
}

/* A salloc shell is no task: nothing from Slurm (not even SLURM_NTASKS,
 * which would announce ranks that never come). */
static void test_salloc_shell(void **state)
{
	const char *v[] = {"SLURM_JOB_ID=7162", "SLURM_NTASKS=4",
			   "SLURM_JOB_NAME=interactive", NULL};
	expect(v, NULL, "", -1, -1);
}

/* srun --mpi=pmix: Slurm's PMIx namespace is the step: named as a step. */
static void test_srun_pmix(void **state)
{
	const char *v[] = {"SLURM_JOB_ID=88",
			   "SLURM_STEP_ID=1",
			   "SLURM_PROCID=1",
			   "SLURM_STEP_NUM_TASKS=2",
			   "PMIX_NAMESPACE=slurm.pmix.88.1",
			   "PMIX_RANK=1",
			   NULL};
	expect(v, "slurm", "88.1", 1, 2);
}

/* Open MPI 4.1 (ORTE) as measured: the namespace is the jobid number. */
static void test_ompi4(void **state)
{
	const char *v[] = {"OMPI_COMM_WORLD_RANK=1",
			   "OMPI_COMM_WORLD_SIZE=2",
			   "OMPI_MCA_ess_base_jobid=439681025",
			   "PMIX_NAMESPACE=439681025",
			   "PMIX_RANK=1",
			   NULL};
	expect(v, "openmpi", "439681025", 1, 2);
}

/* mpirun inside an salloc: its daemons are an srun step, the ranks inherit
 * that step's SLURM_STEP_ID and SLURM_PROCID (the node index). */
static void test_ompi_in_slurm(void **state)
{
	const char *v[] = {"SLURM_JOB_ID=90",
			   "SLURM_STEP_ID=0",
			   "SLURM_PROCID=0",
			   "SLURM_NTASKS=1",
			   "OMPI_COMM_WORLD_RANK=3",
			   "OMPI_COMM_WORLD_SIZE=4",
			   "PMIX_NAMESPACE=prterun-vm-4242@1",
			   "PMIX_RANK=3",
			   NULL};
	expect(v, "openmpi", "prterun-vm-4242@1", 3, 4);
}

/* PRRTE's prun of a non-MPI program: PMIx only. */
static void test_prrte(void **state)
{
	const char *v[] = {"PMIX_NAMESPACE=prterun-vm-77@2", "PMIX_RANK=5",
			   NULL};
	expect(v, "pmix", "prterun-vm-77@2", 5, -1);
}

/* A Flux job inside a Slurm step (flux started by srun --mpi=pmix). */
static void test_flux_in_slurm(void **state)
{
	const char *v[] = {"SLURM_JOB_ID=91",
			   "SLURM_STEP_ID=0",
			   "SLURM_PROCID=0",
			   "PMIX_NAMESPACE=slurm.pmix.91.0",
			   "PMIX_RANK=0",
			   "FLUX_JOB_ID=\xc6\x92"
			   "2Jq5LrGV",
			   "FLUX_TASK_RANK=2",
			   "FLUX_JOB_SIZE=4",
			   "PMI_RANK=2",
			   "PMI_SIZE=4",
			   NULL};
	expect(v, "flux",
	       "\xc6\x92"
	       "2Jq5LrGV",
	       2, 4);
}

static void test_pmi(void **state)
{
	const char *v[] = {"PMI_RANK=3", "PMI_SIZE=8", NULL};
	expect(v, "pmi", "", 3, 8);
}

/* Values that are no name or number are ignored, nothing else. */
static void test_bad_values(void **state)
{
	const char *v[] = {"SLURM_JOB_ID=a/b", "SLURM_STEP_ID=0",
			   "SLURM_PROCID=-1", "SLURM_STEP_NUM_TASKS=x", NULL};
	const char *e[] = {"SLURM_JOB_ID=", "SLURM_STEP_ID=0", NULL};
	expect(v, "slurm", "", -1, -1);
	expect(e, NULL, "", -1, -1);
}

static void test_parse_u32(void **state)
{
	uint32_t n = 7;
	assert_int_equal(run_parse_u32("0", &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(run_parse_u32("", &n), -1);
	assert_int_equal(run_parse_u32("-1", &n), -1);
	assert_int_equal(run_parse_u32("1x", &n), -1);
	assert_int_equal(run_parse_u32("99999999999", &n), -1);
}

/* The command line for info: words a shell reads back as they were;
 * control characters as '?'; cut at whole words. */
static void test_command_text(void **state)
{
	char buf[64];
	bool cut;
	char *plain[] = {"./app", "-n", "4", "--out=/tmp/x,y", NULL};
	char *odd[] = {"sh", "-c", "echo \"it's $HOME\"", "", "a\tb", NULL};
	char *ctl[] = {"x\x1b[2J\x7f", NULL};
	char *lng[] = {"prog", "aaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbb",
		       "cccccccccccccccccccc", NULL};
	char *huge[] = {"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
			"xxxxxxxxxxxxxxxxxxxxxx",
			NULL};

	(void)state;
	assert_int_equal(run_command_text(plain, buf, sizeof(buf), &cut), 25);
	assert_string_equal(buf, "./app -n 4 --out=/tmp/x,y");
	assert_false(cut);
	run_command_text(odd, buf, sizeof(buf), &cut);
	assert_string_equal(buf, "sh -c 'echo \"it'\\''s $HOME\"' '' 'a?b'");
	assert_false(cut);
	run_command_text(ctl, buf, sizeof(buf), &cut);
	assert_string_equal(buf, "'x?[2J?'");
	/* 63 bytes of room: prog + two words fit (46), the third does not */
	run_command_text(lng, buf, sizeof(buf), &cut);
	assert_string_equal(buf, "prog aaaaaaaaaaaaaaaaaaaa bbbbbbbbbbbbbbbbbbbb");
	assert_true(cut);
	assert_int_equal(run_command_text(huge, buf, sizeof(buf), &cut), 0);
	assert_string_equal(buf, "");
	assert_true(cut);
	/* the frame: header, flags (not cut), the text */
	uint8_t fr[PROTO_HDR_SIZE + 2 + PROTO_COMMAND_MAX];
	assert_int_equal(run_command_frame(plain, fr, sizeof(fr)),
			 PROTO_HDR_SIZE + 2 + 25);
	assert_int_equal(fr[4], PROTO_COMMAND);
	assert_int_equal(fr[5] | fr[6], 0);
	assert_memory_equal(fr + 7, "./app -n 4 --out=/tmp/x,y", 25);
	assert_true(run_command_frame(plain, fr, 10) < 0); /* no room */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_nothing),
	    cmocka_unit_test(test_slurm_steps),
	    cmocka_unit_test(test_slurm_special_steps),
	    cmocka_unit_test(test_slurm_batch),
	    cmocka_unit_test(test_salloc_shell),
	    cmocka_unit_test(test_srun_pmix),
	    cmocka_unit_test(test_ompi4),
	    cmocka_unit_test(test_ompi_in_slurm),
	    cmocka_unit_test(test_prrte),
	    cmocka_unit_test(test_flux_in_slurm),
	    cmocka_unit_test(test_pmi),
	    cmocka_unit_test(test_bad_values),
	    cmocka_unit_test(test_parse_u32),
	    cmocka_unit_test(test_command_text),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
