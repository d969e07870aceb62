/* SPDX-License-Identifier: MIT */
/* Names, status strings and directive helpers. */
#include "router/router.h"

#include <stdio.h>
#include <string.h>

bool router_text_valid(const char *s, size_t len)
{
	/* Control bytes (newline, escape, DEL...) would forge "key: value"
	 * lines of info files, the merged views' line tags or log lines. */
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] == 0x7f)
			return false;
	return true;
}

bool router_nspace_valid(const char *nspace, size_t len)
{
	if (!nspace || len == 0 || len > ROUTER_NSPACE_MAX)
		return false;
	if (memchr(nspace, '/', len) || !router_text_valid(nspace, len))
		return false;
	if ((len == 1 && nspace[0] == '.') ||
	    (len == 2 && nspace[0] == '.' && nspace[1] == '.'))
		return false;
	return true;
}

int router_proc_set(router_proc_t *proc, const char *nspace, uint32_t rank)
{
	size_t len;

	if (!proc || !nspace)
		return ROUTER_ERR_BAD_PARAM;
	len = strnlen(nspace, ROUTER_NSPACE_MAX + 1);
	if (!router_nspace_valid(nspace, len))
		return ROUTER_ERR_BAD_PARAM;
	memcpy(proc->nspace, nspace, len);
	proc->nspace[len] = '\0';
	proc->rank = rank;
	return ROUTER_SUCCESS;
}

const char *router_strerror(int status)
{
	switch (status) {
	case ROUTER_SUCCESS:
		return "success";
	case ROUTER_OPERATION_SUCCEEDED:
		return "operation succeeded";
	case ROUTER_AGAIN:
		return "no data yet, try again";
	case ROUTER_WOULD_BLOCK:
		return "blocking call on the router's loop thread";
	case ROUTER_ERR_NOT_AVAILABLE:
		return "router not available (shut down)";
	case ROUTER_ERR_INIT:
		return "router not initialised";
	case ROUTER_ERR_BAD_PARAM:
		return "bad parameter";
	case ROUTER_ERR_NOT_FOUND:
		return "no such job or rank";
	case ROUTER_ERR_EXISTS:
		return "rank already registered and running";
	case ROUTER_ERR_PIPE:
		return "stdin target has exited or closed";
	case ROUTER_ERR_CANCELED:
		return "operation canceled";
	case ROUTER_ERR_BUSY:
		return "job still running";
	case ROUTER_STDIN_PENDING:
		return "stdin write pending in the sink";
	case ROUTER_ERR_OWNER:
		return "the job belongs to another user";
	case ROUTER_ERR_NOT_SUPPORTED:
		return "not supported for this stream";
	case ROUTER_STORE_FULL:
		return "the store is full";
	default:
		break;
	}
	if (status < 0)
		return strerror(-status);
	return "unknown router status";
}

const char *router_state_name(enum router_state s)
{
	switch (s) {
	case ROUTER_STATE_RUNNING:
		return "running";
	case ROUTER_STATE_EXITED:
		return "exited";
	case ROUTER_STATE_LOST:
		return "lost";
	}
	return "unknown";
}

bool router_dir_on(const router_directives_t *d, uint32_t bit)
{
	if (!d)
		return false;
	bit &= ROUTER_DIR_KNOWN_MASK;
	return (d->set & bit) && (d->value & bit);
}

bool router_dir_local_output(const router_directives_t *d)
{
	if (!d || !(d->set & ROUTER_DIR_LOCAL_OUTPUT))
		return true;
	return (d->value & ROUTER_DIR_LOCAL_OUTPUT) != 0;
}
