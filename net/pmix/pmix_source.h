/* SPDX-License-Identifier: MIT */
/*
 * PMIx tool source: attach to a running PMIx server (PRRTE, Open MPI 5,
 * or any PMIx server host) as a tool and pull every namespace's stdout and
 * stderr into the router; forward writes to stdin as PMIx_IOF_push.
 * Built only with the meson feature option `pmix` (IOFS_HAVE_PMIX).
 *
 * PMIx calls back on its own progress thread; this module shifts every
 * callback into the daemon's loop (router_defer / router_deliver) before
 * touching the router.
 */
#ifndef IOFS_PMIX_SOURCE_H
#define IOFS_PMIX_SOURCE_H

#include "log/log.h"
#include "router/router.h"

struct event_base;
typedef struct pmix_source pmix_source_t;

/*
 * @server: a PMIX_SERVER_URI string, "pid:PID", a path to a rendezvous /
 * attachment file, or "system".  Connects (PMIx_tool_init), learns and
 * follows namespaces, pulls their output.  @log (borrowed, outlives the
 * source; NULL = stderr) gets its messages, module "pmix", from any
 * thread.  Returns 0 or -errno with a
 * message in @err.  *out owned by the caller: pmix_source_free().
 */
int pmix_source_new(struct event_base *base, router_t *r, iofs_log_t *log,
		    const char *server, char *err, size_t errlen,
		    pmix_source_t **out);

/* Disconnect (PMIx_tool_finalize); jobs stay readable. NULL-safe. */
void pmix_source_free(pmix_source_t *ps);

#endif /* IOFS_PMIX_SOURCE_H */
