/* SPDX-License-Identifier: MIT */
/*
 * Private to log.c: the logger object.
 */
#ifndef IOFS_LOG_LOG_I_H
#define IOFS_LOG_LOG_I_H

#include <stdbool.h>

#include "log/log.h"

#define IOFS_LOG_MSG_MAX   1024 /* bytes of one formatted message */
#define IOFS_LOG_IDENT_MAX 32

enum iofs_log_where {
	IOFS_LOG_STDERR = 0,
	IOFS_LOG_SYSLOG = 1,
	IOFS_LOG_FUNC = 2,
};

struct iofs_log {
	char ident[IOFS_LOG_IDENT_MAX]; /* stderr prefix, syslog tag */
	int level;			/* keep messages <= level */
	enum iofs_log_where where;
	int echo; /* also stderr at <= echo (where != STDERR); -1 none */
	bool syslog_open; /* we called openlog() */
	iofs_log_sink_fn fn;
	void *fn_ctx;
};

#endif /* IOFS_LOG_LOG_I_H */
