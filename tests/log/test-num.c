/* SPDX-License-Identifier: MIT */
/* log/num.h: the one decimal and size parser of options, environment
 * variables and file names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "log/num.h"

static void test_u64(void **state)
{
	uint64_t v = 42;

	(void)state;
	assert_true(iofs_parse_u64("0", 10, &v));
	assert_int_equal(v, 0);
	assert_true(iofs_parse_u64("007", 10, &v)); /* not canonical: fine here */
	assert_int_equal(v, 7);
	assert_true(iofs_parse_u64("18446744073709551615", UINT64_MAX, &v));
	assert_true(v == UINT64_MAX);
	v = 42;
	/* what strtoull() would take */
	const char *bad[] = {"", "-1", "+7", " 7", "7 ", "0x10", "1e3", "7k",
			     "18446744073709551616", "99999999999999999999999"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(iofs_parse_u64(bad[i], UINT64_MAX, &v));
	assert_int_equal(v, 42); /* untouched on failure */
	/* the bound, exactly */
	assert_true(iofs_parse_u64("600", 600, &v));
	assert_false(iofs_parse_u64("601", 600, &v));
	assert_false(iofs_parse_u64("9", 5, &v)); /* a digit over a small max */
	assert_true(iofs_parse_u64("5", 5, &v));
}

static void test_dec_canonical(void **state)
{
	uint64_t v = 0;

	(void)state;
	assert_true(iofs_parse_dec("0", 1, 100, true, &v));
	assert_false(iofs_parse_dec("07", 2, 100, true, &v));
	assert_false(iofs_parse_dec("00", 2, 100, true, &v));
	assert_true(iofs_parse_dec("12.idx", 2, 100, true, &v)); /* a prefix */
	assert_int_equal(v, 12);
	assert_false(iofs_parse_dec("12", 0, 100, true, &v));
}

static void test_size(void **state)
{
	uint64_t v = 0;

	(void)state;
	assert_true(iofs_parse_size("4096", &v));
	assert_int_equal(v, 4096);
	assert_true(iofs_parse_size("64K", &v));
	assert_int_equal(v, 64 << 10);
	assert_true(iofs_parse_size("64k", &v));
	assert_int_equal(v, 64 << 10);
	assert_true(iofs_parse_size("1GiB", &v));
	assert_int_equal(v, 1u << 30);
	assert_true(iofs_parse_size("2mb", &v));
	assert_int_equal(v, 2u << 20);
	assert_true(iofs_parse_size("16T", &v));
	assert_true(v == (uint64_t)16 << 40);
	v = 7;
	const char *bad[] = {"", "K", "-1K", "1X", "1KK", "1KiBs", "1 K", "1.5G",
			     "16777216T", "+1M"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(iofs_parse_size(bad[i], &v));
	assert_int_equal(v, 7);
	assert_true(iofs_parse_size("16777215T", &v)); /* the largest in T */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_u64),
	    cmocka_unit_test(test_dec_canonical),
	    cmocka_unit_test(test_size),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
