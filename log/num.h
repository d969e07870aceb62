/* SPDX-License-Identifier: MIT */
/*
 * Numbers in options, environment variables, file names and paths, parsed
 * one way everywhere (daemon and forwarder): plain decimal digits, nothing
 * else.  No sign, no blank, no "0x", no locale: strtoull() takes " +7" and
 * "-1" (as 2^64 - 1), which an option or a rank directory must not.
 * Header-only, beside log/clock.h, in the base every program links.
 */
#ifndef IOFS_LOG_NUM_H
#define IOFS_LOG_NUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

/* @s[0, @len): one or more digits, value <= @max; @canonical: no leading
 * zero either ("0" itself is fine), as a name that must be unique is. */
static inline bool iofs_parse_dec(const char *s, size_t len, uint64_t max,
				  bool canonical, uint64_t *out)
{
	uint64_t x = 0;

	if (!len || (canonical && s[0] == '0' && len > 1))
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned d = (unsigned)((unsigned char)s[i] - '0');

		if (d > 9 || d > max || x > (max - d) / 10)
			return false;
		x = x * 10 + d;
	}
	*out = x;
	return true;
}

/* The whole string @s, decimal, <= @max. */
static inline bool iofs_parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	return iofs_parse_dec(s, strlen(s), max, false, out);
}

/* A byte count: decimal with an optional binary unit K, M, G or T (any
 * case), itself optionally followed by "B" or "iB": "64K", "1GiB". */
static inline bool iofs_parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "KMGT";
	size_t n = strspn(s, "0123456789");
	const char *u = s[n] ? strchr(units, s[n] & ~0x20) : NULL;
	unsigned shift = u && *u ? 10u * (unsigned)(u - units + 1) : 0;
	const char *rest = s + n + (shift ? 1 : 0);
	uint64_t v;

	if (s[n] && !shift)
		return false;
	if (shift && *rest && strcasecmp(rest, "B") && strcasecmp(rest, "iB"))
		return false;
	if (!iofs_parse_dec(s, n, UINT64_MAX >> shift, false, &v))
		return false;
	*out = v << shift;
	return true;
}

/* An option's value @s in [@min, @max]: plain decimal, or with @bytes a
 * byte count (iofs_parse_size()).  *@out is set only when it is valid. */
static inline bool iofs_parse_in(const char *s, bool bytes, uint64_t min,
				 uint64_t max, uint64_t *out)
{
	uint64_t v;

	if (!(bytes ? iofs_parse_size(s, &v) : iofs_parse_u64(s, max, &v)) ||
	    v < min || v > max)
		return false;
	*out = v;
	return true;
}

#endif /* IOFS_LOG_NUM_H */
