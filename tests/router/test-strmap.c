/* SPDX-License-Identifier: MIT */
/* strmap: the string-keyed hash map behind the job registry, checked
 * against a plain array under random puts and deletes (backward-shift
 * deletion must keep every probe run reachable). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "router/strmap.h"

#define NKEYS 3000

static void basics(void **state)
{
	struct strmap m = {0};
	int a, b;

	(void)state;
	assert_null(strmap_get(&m, "x"));
	assert_null(strmap_del(&m, "x"));
	assert_int_equal(strmap_put(&m, "x", &a), 0);
	assert_ptr_equal(strmap_get(&m, "x"), &a);
	assert_int_equal(strmap_put(&m, "x", &b), 0); /* replace */
	assert_int_equal(strmap_count(&m), 1);
	assert_ptr_equal(strmap_get(&m, "x"), &b);
	assert_null(strmap_get(&m, "y"));
	assert_ptr_equal(strmap_del(&m, "x"), &b);
	assert_null(strmap_get(&m, "x"));
	assert_int_equal(strmap_count(&m), 0);
	strmap_release(&m);
	strmap_release(&m); /* idempotent */
}

static void random_against_array(void **state)
{
	static char keys[NKEYS][16];
	static int present[NKEYS];
	struct strmap m = {0};
	unsigned seed = 12;

	(void)state;
	for (int i = 0; i < NKEYS; i++)
		snprintf(keys[i], sizeof(keys[i]), "job.%d", i);
	for (int step = 0; step < 200000; step++) {
		int k = rand_r(&seed) % NKEYS;
		if (rand_r(&seed) % 3) {
			assert_int_equal(strmap_put(&m, keys[k], keys[k]), 0);
			present[k] = 1;
		} else {
			void *v = strmap_del(&m, keys[k]);
			assert_ptr_equal(v, present[k] ? keys[k] : NULL);
			present[k] = 0;
		}
		if (step % 10007 == 0) {
			size_t n = 0;
			for (int i = 0; i < NKEYS; i++) {
				n += (size_t)present[i];
				assert_ptr_equal(strmap_get(&m, keys[i]),
						 present[i] ? keys[i] : NULL);
			}
			assert_int_equal(strmap_count(&m), n);
		}
	}
	for (int i = 0; i < NKEYS; i++)
		assert_ptr_equal(strmap_get(&m, keys[i]),
				 present[i] ? keys[i] : NULL);
	strmap_release(&m);
}

/* Per-uid counters: an entry lives while a counter is non-zero. */
static void uid_counters(void **state)
{
	struct strmap m = {0};

	(void)state;
	assert_int_equal(uidmap_value(&m, 7, 0), 0);
	assert_int_equal(uidmap_add(&m, 7, 0, -1), 0); /* no entry, no-op */
	assert_int_equal(strmap_count(&m), 0);
	assert_int_equal(uidmap_add(&m, 7, 0, 3), 0);
	assert_int_equal(uidmap_add(&m, 7, 2, 10), 0);
	assert_int_equal(uidmap_add(&m, 4294967295u, 1, 1), 0);
	assert_int_equal(uidmap_value(&m, 7, 0), 3);
	assert_int_equal(uidmap_value(&m, 7, 2), 10);
	assert_int_equal(uidmap_value(&m, 4294967295u, 1), 1);
	assert_non_null(uidmap_entry(&m, 7));
	assert_int_equal(uidmap_add(&m, 7, 0, -5), 0); /* floors at 0 */
	assert_int_equal(uidmap_value(&m, 7, 0), 0);
	assert_non_null(uidmap_entry(&m, 7)); /* counter 2 still set */
	assert_int_equal(uidmap_add(&m, 7, 2, -10), 0);
	assert_null(uidmap_entry(&m, 7));
	assert_int_equal(strmap_count(&m), 1);
	assert_int_equal(uidmap_add(&m, 7, UIDMAP_NCOUNT, 1), -EINVAL);
	uidmap_release(&m); /* frees the entry left */
	uidmap_release(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(basics),
	    cmocka_unit_test(random_against_array),
	    cmocka_unit_test(uid_counters),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
