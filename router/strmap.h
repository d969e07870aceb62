/* SPDX-License-Identifier: MIT */
/*
 * A string-keyed hash map (open addressing, linear probing, backward-shift
 * deletion: no tombstones), O(1) expected per operation.  The key string is
 * borrowed: it must stay valid and unchanged while its entry is in the map
 * (typically it lives inside the value).  Used by the router's job registry
 * and the daemon's per-job connection index.  Not thread-safe.
 */
#ifndef IOFS_ROUTER_STRMAP_H
#define IOFS_ROUTER_STRMAP_H

#include <stddef.h>

struct strmap_slot {
	const char *key; /* NULL = empty */
	void *value;
};

struct strmap {
	struct strmap_slot *slots; /* cap entries, cap a power of two */
	size_t cap, n;
};

/* A zeroed struct strmap is an empty map; strmap_release() frees it
 * (idempotent; the values are the caller's). */
void strmap_release(struct strmap *m);
/* The value stored under @key, or NULL. */
void *strmap_get(const struct strmap *m, const char *key);
/* Store @value under @key (replacing any): 0 or -ENOMEM (map unchanged). */
int strmap_put(struct strmap *m, const char *key, void *value);
/* Remove @key's entry if present; returns its value or NULL. */
void *strmap_del(struct strmap *m, const char *key);
static inline size_t strmap_count(const struct strmap *m) { return m->n; }

#endif /* IOFS_ROUTER_STRMAP_H */
