/* SPDX-License-Identifier: MIT */
/* The logger: levels, escaping of control bytes, module prefix, sinks. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "log/log.h"

struct cap {
	char line[IOFS_LOG_LINE_MAX + 16];
	int level;
	int n;
};

static void cap_sink(void *ctx, int level, const char *line)
{
	struct cap *c = ctx;

	snprintf(c->line, sizeof(c->line), "%s", line);
	c->level = level;
	c->n++;
}

static iofs_log_t *cap_log(struct cap *c)
{
	iofs_log_t *l;

	memset(c, 0, sizeof(*c));
	assert_int_equal(iofs_log_new("t", &l), 0);
	iofs_log_set_sink(l, cap_sink, c);
	return l;
}

static void levels(void **state)
{
	(void)state;
	assert_int_equal(iofs_log_level_parse("err"), LOG_ERR);
	assert_int_equal(iofs_log_level_parse("error"), LOG_ERR);
	assert_int_equal(iofs_log_level_parse("warning"), LOG_WARNING);
	assert_int_equal(iofs_log_level_parse("warn"), LOG_WARNING);
	assert_int_equal(iofs_log_level_parse("notice"), LOG_NOTICE);
	assert_int_equal(iofs_log_level_parse("info"), LOG_INFO);
	assert_int_equal(iofs_log_level_parse("debug"), LOG_DEBUG);
	assert_int_equal(iofs_log_level_parse("7"), LOG_DEBUG);
	assert_int_equal(iofs_log_level_parse("0"), LOG_EMERG);
	assert_int_equal(iofs_log_level_parse("8"), -1);
	assert_int_equal(iofs_log_level_parse("Debug"), -1);
	assert_int_equal(iofs_log_level_parse(""), -1);
	assert_int_equal(iofs_log_level_parse(NULL), -1);
	assert_string_equal(iofs_log_level_name(LOG_WARNING), "warning");
	assert_string_equal(iofs_log_level_name(42), "?");
	assert_int_equal(iofs_log_new("x", NULL), -EINVAL);
}

static void filter(void **state)
{
	struct cap c;
	iofs_log_t *l = cap_log(&c);

	(void)state;
	assert_int_equal(iofs_log_level(l), LOG_INFO); /* the default */
	iofs_logf(l, LOG_DEBUG, "net", "frame %d", 1);
	assert_int_equal(c.n, 0);
	iofs_logf(l, LOG_INFO, "net", "listening on %s", "unix:/x");
	assert_int_equal(c.n, 1);
	assert_string_equal(c.line, "net: listening on unix:/x");
	assert_int_equal(c.level, LOG_INFO);
	iofs_log_set_level(l, LOG_DEBUG);
	iofs_logf(l, LOG_DEBUG, NULL, "frame %d", 2);
	assert_int_equal(c.n, 2);
	assert_string_equal(c.line, "frame 2");
	iofs_log_set_level(l, LOG_WARNING);
	iofs_logf(l, LOG_NOTICE, "fs", "dropped");
	iofs_logf(l, LOG_ERR, "fs", "kept");
	assert_int_equal(c.n, 3);
	assert_string_equal(c.line, "fs: kept");
	iofs_log_set_level(l, 99); /* clamped */
	assert_int_equal(iofs_log_level(l), LOG_DEBUG);
	assert_true(iofs_log_enabled(NULL, LOG_INFO));
	assert_false(iofs_log_enabled(NULL, LOG_DEBUG));
	iofs_log_free(l);
	iofs_log_free(NULL);
}

/* What a peer puts on the wire (a host name, an ERROR text) cannot forge a
 * second line or reach the terminal as an escape sequence. */
static void escaping(void **state)
{
	struct cap c;
	iofs_log_t *l = cap_log(&c);
	char out[64];

	(void)state;
	iofs_logf(l, LOG_WARNING, "net", "from %s end",
		  "evil\n<28>iofs[1]: forged\x1b[31m\r\t\x7f\x01");
	assert_string_equal(c.line, "net: from evil\\x0a<28>iofs[1]: forged"
				    "\\x1b[31m\\x0d\\x09\\x7f\\x01 end");
	for (const char *p = c.line; *p; p++)
		assert_true((unsigned char)*p >= 0x20 && *p != 0x7f);
	/* bytes >= 0x80 (UTF-8) pass unchanged */
	iofs_logf(l, LOG_WARNING, NULL, "h\xc3\xa9");
	assert_string_equal(c.line, "h\xc3\xa9");

	assert_int_equal(iofs_log_escape("abc", out, sizeof(out)), 3);
	assert_string_equal(out, "abc");
	/* cut short: "..." and always terminated */
	assert_int_equal(iofs_log_escape("0123456789", out, 8), 7);
	assert_string_equal(out, "0123...");
	iofs_log_escape("\n\n\n\n", out, 12);
	assert_string_equal(out, "\\x0a\\x0a...");
	iofs_log_free(l);
}

static void long_message(void **state)
{
	struct cap c;
	iofs_log_t *l = cap_log(&c);
	char big[4000];

	(void)state;
	memset(big, '\n', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	iofs_logf(l, LOG_ERR, "net", "%s", big);
	assert_true(strlen(c.line) < IOFS_LOG_LINE_MAX);
	assert_non_null(strstr(c.line, "..."));
	assert_null(strchr(c.line, '\n'));
	iofs_log_free(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(levels),
	    cmocka_unit_test(filter),
	    cmocka_unit_test(escaping),
	    cmocka_unit_test(long_message),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
