/* SPDX-License-Identifier: MIT */
/* String-keyed hash map: see strmap.h. */
#include "router/strmap.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STRMAP_MIN_CAP 16

static size_t strmap_hash(const char *s)
{
	uint64_t h = 14695981039346656037ull; /* FNV-1a 64 */

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ull;
	}
	return (size_t)(h ^ (h >> 29));
}

void strmap_release(struct strmap *m)
{
	free(m->slots);
	m->slots = NULL;
	m->cap = m->n = 0;
}

/* The slot holding @key, or the empty slot where it would go. */
static size_t strmap_find(const struct strmap *m, const char *key)
{
	size_t mask = m->cap - 1, i = strmap_hash(key) & mask;

	while (m->slots[i].key && strcmp(m->slots[i].key, key) != 0)
		i = (i + 1) & mask;
	return i;
}

void *strmap_get(const struct strmap *m, const char *key)
{
	if (!m->cap)
		return NULL;
	size_t i = strmap_find(m, key);
	return m->slots[i].key ? m->slots[i].value : NULL;
}

static int strmap_grow(struct strmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : STRMAP_MIN_CAP;
	struct strmap old = *m;

	m->slots = calloc(cap, sizeof(*m->slots));
	if (!m->slots) {
		*m = old;
		return -ENOMEM;
	}
	m->cap = cap;
	for (size_t i = 0; i < old.cap; i++)
		if (old.slots[i].key)
			m->slots[strmap_find(m, old.slots[i].key)] =
			    old.slots[i];
	free(old.slots);
	return 0;
}

int strmap_put(struct strmap *m, const char *key, void *value)
{
	/* Load factor at most 1/2: probes stay short. */
	if ((m->n + 1) * 2 > m->cap && strmap_grow(m) < 0)
		return -ENOMEM;
	size_t i = strmap_find(m, key);
	if (!m->slots[i].key)
		m->n++;
	m->slots[i].key = key;
	m->slots[i].value = value;
	return 0;
}

void *strmap_del(struct strmap *m, const char *key)
{
	if (!m->cap)
		return NULL;
	size_t mask = m->cap - 1, i = strmap_find(m, key);
	void *value = m->slots[i].value;

	if (!m->slots[i].key)
		return NULL;
	/* Backward shift: move later entries of the probe run into the
	 * hole when their home slot does not lie cyclically in (i, j]. */
	for (size_t j = (i + 1) & mask; m->slots[j].key; j = (j + 1) & mask) {
		size_t home = strmap_hash(m->slots[j].key) & mask;
		bool stays = i <= j ? (i < home && home <= j)
				    : (i < home || home <= j);
		if (stays)
			continue;
		m->slots[i] = m->slots[j];
		i = j;
	}
	m->slots[i].key = NULL;
	m->slots[i].value = NULL;
	m->n--;
	return value;
}

/* ---- per-uid counters --------------------------------------------------- */

static void uid_key(char key[12], uint32_t uid)
{
	snprintf(key, 12, "%u", uid);
}

struct uid_entry *uidmap_entry(const struct strmap *m, uint32_t uid)
{
	char key[12];

	uid_key(key, uid);
	return strmap_get(m, key);
}

uint64_t uidmap_value(const struct strmap *m, uint32_t uid, unsigned i)
{
	const struct uid_entry *e = uidmap_entry(m, uid);

	return e && i < UIDMAP_NCOUNT ? e->n[i] : 0;
}

int uidmap_add(struct strmap *m, uint32_t uid, unsigned i, int64_t delta)
{
	char key[12];

	if (i >= UIDMAP_NCOUNT)
		return -EINVAL;
	uid_key(key, uid);
	struct uid_entry *e = strmap_get(m, key);
	if (!e) {
		if (delta <= 0)
			return 0;
		e = calloc(1, sizeof(*e));
		if (!e)
			return -ENOMEM;
		memcpy(e->key, key, sizeof(key));
		if (strmap_put(m, e->key, e) < 0) {
			free(e);
			return -ENOMEM;
		}
	}
	if (delta < 0 && (uint64_t)-delta >= e->n[i])
		e->n[i] = 0;
	else
		e->n[i] += (uint64_t)delta;
	for (unsigned k = 0; k < UIDMAP_NCOUNT; k++)
		if (e->n[k])
			return 0;
	strmap_del(m, e->key);
	free(e);
	return 0;
}

void uidmap_release(struct strmap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		free(m->slots[i].value);
	strmap_release(m);
}
