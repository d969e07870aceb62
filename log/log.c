/* SPDX-License-Identifier: MIT */
/*
 * The one logger: level filter, escaping, and the three sinks (stderr,
 * syslog, a function).  See log.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "log/log_i.h"

static const char *const level_names[] = {
    "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug",
};

static int clamp_level(int level)
{
	return level < LOG_EMERG   ? LOG_EMERG
	       : level > LOG_DEBUG ? LOG_DEBUG
				   : level;
}

int iofs_log_new(const char *ident, iofs_log_t **out)
{
	iofs_log_t *l;

	if (!ident || !out || strlen(ident) >= IOFS_LOG_IDENT_MAX)
		return -EINVAL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	snprintf(l->ident, sizeof(l->ident), "%s", ident);
	l->level = LOG_INFO;
	l->echo = -1;
	*out = l;
	return 0;
}

void iofs_log_free(iofs_log_t *l)
{
	if (!l)
		return;
	if (l->syslog_open)
		closelog();
	free(l);
}

void iofs_log_set_level(iofs_log_t *l, int level)
{
	l->level = clamp_level(level);
}

int iofs_log_level(const iofs_log_t *l)
{
	return l ? l->level : LOG_INFO;
}

bool iofs_log_enabled(const iofs_log_t *l, int level)
{
	return level <= iofs_log_level(l);
}

int iofs_log_level_parse(const char *name)
{
	if (!name)
		return -1;
	if (name[0] >= '0' && name[0] <= '7' && name[1] == '\0')
		return name[0] - '0';
	if (!strcmp(name, "error"))
		return LOG_ERR;
	if (!strcmp(name, "warn"))
		return LOG_WARNING;
	for (int i = LOG_EMERG; i <= LOG_DEBUG; i++)
		if (!strcmp(name, level_names[i]))
			return i;
	return -1;
}

const char *iofs_log_level_name(int level)
{
	return level >= LOG_EMERG && level <= LOG_DEBUG ? level_names[level]
							: "?";
}

void iofs_log_to_syslog(iofs_log_t *l)
{
	/* openlog() keeps the pointer: l->ident lives as long as l. */
	openlog(l->ident, LOG_PID, LOG_DAEMON);
	l->syslog_open = true;
	l->where = IOFS_LOG_SYSLOG;
}

void iofs_log_set_echo(iofs_log_t *l, int level)
{
	l->echo = level < 0 ? -1 : clamp_level(level);
}

void iofs_log_set_sink(iofs_log_t *l, iofs_log_sink_fn fn, void *ctx)
{
	l->fn = fn;
	l->fn_ctx = ctx;
	l->where = fn ? IOFS_LOG_FUNC : IOFS_LOG_STDERR;
}

size_t iofs_log_escape(const char *in, char *out, size_t outlen)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
		bool ctl = *p < 0x20 || *p == 0x7f;
		size_t need = ctl ? 4 : 1;
		if (o + need + 4 > outlen) { /* room for "..." and NUL */
			if (outlen >= 4) {
				memcpy(out + o, "...", 3);
				o += 3;
			}
			break;
		}
		if (ctl) {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[*p >> 4];
			out[o++] = hex[*p & 15];
		} else {
			out[o++] = (char)*p;
		}
	}
	out[o] = '\0';
	return o;
}

void iofs_vlogf(iofs_log_t *l, int level, const char *module, const char *fmt,
		va_list ap)
{
	char msg[IOFS_LOG_MSG_MAX];
	char line[IOFS_LOG_LINE_MAX];
	int n = 0;

	if (!iofs_log_enabled(l, level))
		return;
	if (module)
		n = snprintf(msg, sizeof(msg) / 2, "%.64s: ", module);
	vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
	iofs_log_escape(msg, line, sizeof(line));
	if (l && l->where == IOFS_LOG_SYSLOG)
		syslog(clamp_level(level), "%s", line);
	else if (l && l->where == IOFS_LOG_FUNC)
		l->fn(l->fn_ctx, level, line);
	if (!l || l->where == IOFS_LOG_STDERR || level <= l->echo)
		/* one call: lines of threads do not interleave */
		fprintf(stderr, "%s: %s\n", l ? l->ident : "iofs", line);
}

void iofs_logf(iofs_log_t *l, int level, const char *module, const char *fmt,
	       ...)
{
	va_list ap;

	va_start(ap, fmt);
	iofs_vlogf(l, level, module, fmt, ap);
	va_end(ap);
}
