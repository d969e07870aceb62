/* SPDX-License-Identifier: MIT */
/*
 * The one logger of iofs and iofs-run.  One object per process, created by
 * main() and handed to every module in the context it already takes
 * (router_config, net_server_config, fs_config, pmix_source_new(),
 * output_dir_new(), iofs-run's struct run); there is no global instance.
 *
 * Levels are syslog's (LOG_ERR ... LOG_DEBUG, <syslog.h>); a message above
 * the logger's level is dropped before it is formatted.  Sinks: stderr
 * ("IDENT: MODULE: message"), syslog (so journald: "MODULE: message" with
 * IDENT[pid] from openlog), or a function (tests).
 *
 * Every message is one line: control bytes (< 0x20 and 0x7f), which may
 * come from the wire (host names, ERROR texts, job names), are written as
 * \xNN here and nowhere else, so a peer cannot forge or recolour lines.
 *
 * Thread safety: iofs_logf() may be called from any thread (the PMIx
 * progress thread does); configure the logger before starting threads.
 */
#ifndef IOFS_LOG_LOG_H
#define IOFS_LOG_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <syslog.h>

typedef struct iofs_log iofs_log_t;

/* A message at or below @level (already escaped, "MODULE: text", no
 * newline); @line is borrowed for the call. */
typedef void (*iofs_log_sink_fn)(void *ctx, int level, const char *line);

#define IOFS_LOG_LINE_MAX 2048 /* bytes of one escaped line, at most */

/*
 * A logger writing to stderr at LOG_INFO, lines prefixed "@ident: ".
 * Returns 0 or -ENOMEM / -EINVAL.  *out owned by the caller:
 * iofs_log_free().
 */
int iofs_log_new(const char *ident, iofs_log_t **out);
/* NULL-safe.  Closes the syslog connection if this logger opened it. */
void iofs_log_free(iofs_log_t *l);

/* Keep messages at @level and more severe (LOG_EMERG..LOG_DEBUG; out of
 * range values are clamped). */
void iofs_log_set_level(iofs_log_t *l, int level);
int iofs_log_level(const iofs_log_t *l);
/* True if a message at @level would be written (NULL logger: LOG_INFO). */
bool iofs_log_enabled(const iofs_log_t *l, int level);

/* "err", "error", "warning", "warn", "notice", "info", "debug" (also
 * "emerg", "alert", "crit") or a digit 0-7 -> the level; -1 otherwise. */
int iofs_log_level_parse(const char *name);
/* The canonical name of @level ("warning"), "?" if out of range. */
const char *iofs_log_level_name(int level);

/* From now on write to syslog(3): openlog(ident, LOG_PID, LOG_DAEMON). */
void iofs_log_to_syslog(iofs_log_t *l);
/* While the sink is syslog or a function, also copy messages at @level
 * and more severe to stderr (a daemon starting in the background: its
 * terminal still sees why it fails); -1 = no copy (the default). */
void iofs_log_set_echo(iofs_log_t *l, int level);
/* From now on hand every line to @fn (NULL: back to stderr). */
void iofs_log_set_sink(iofs_log_t *l, iofs_log_sink_fn fn, void *ctx);

/*
 * Log one message of @module ("net", "pmix", ...; NULL: none) at @level.
 * @l may be NULL: stderr at LOG_INFO, prefix "iofs: ".
 */
void iofs_logf(iofs_log_t *l, int level, const char *module, const char *fmt,
	       ...) __attribute__((format(printf, 4, 5)));
void iofs_vlogf(iofs_log_t *l, int level, const char *module, const char *fmt,
		va_list ap) __attribute__((format(printf, 4, 0)));

/* Copy @in to @out (size @outlen >= 1, always terminated) with bytes
 * < 0x20 and 0x7f as \xNN; a line cut short ends in "...".  Returns the
 * length written. */
size_t iofs_log_escape(const char *in, char *out, size_t outlen);

#endif /* IOFS_LOG_LOG_H */
