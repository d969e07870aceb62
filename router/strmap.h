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
#include <stdint.h>

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

/*
 * Per-uid counters on a strmap (key: the uid in decimal, inside the
 * entry).  An entry exists while one of its counters is non-zero.  Used
 * for the per-user limits (net: connections, ranks, buffered bytes; the
 * router: jobs; fs: stdin bytes held for writers).
 */
#define UIDMAP_NCOUNT 4
struct uid_entry {
	char key[12];
	uint64_t n[UIDMAP_NCOUNT];
};
/* The entry of @uid, NULL if it has none (valid while a counter is set). */
struct uid_entry *uidmap_entry(const struct strmap *m, uint32_t uid);
/* Counter @i of @uid (0 if absent). */
uint64_t uidmap_value(const struct strmap *m, uint32_t uid, unsigned i);
/* Counter @i of @uid += @delta (never below 0): 0, or -ENOMEM (a new
 * entry could not be made; nothing changed). */
int uidmap_add(struct strmap *m, uint32_t uid, unsigned i, int64_t delta);
/* Free every entry and the map (idempotent). */
void uidmap_release(struct strmap *m);

#endif /* IOFS_ROUTER_STRMAP_H */
