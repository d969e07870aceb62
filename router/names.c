/* SPDX-License-Identifier: MIT */
/* Placeholder so the skeleton builds; replaced by the router module. */
#include "router/router.h"

#include <string.h>

bool router_nspace_valid(const char *nspace, size_t len)
{
	if (!nspace || len == 0 || len > ROUTER_NSPACE_MAX)
		return false;
	if (memchr(nspace, '\0', len) || memchr(nspace, '/', len))
		return false;
	if ((len == 1 && nspace[0] == '.') ||
	    (len == 2 && nspace[0] == '.' && nspace[1] == '.'))
		return false;
	return true;
}
