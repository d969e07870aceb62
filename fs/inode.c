/* SPDX-License-Identifier: MIT */
/*
 * The inode table: stable inode numbers for (job, rank, kind), two chained
 * hash tables (by number and by key) over the same entries.
 */
#include "fs/fs_i.h"

#include <stdlib.h>

#define FS_ITABLE_MIN 64

static size_t hash_ino(uint64_t ino, size_t n)
{
	return (size_t)((ino * 0x9e3779b97f4a7c15ull) >> 17) & (n - 1);
}

static size_t hash_key(enum fs_kind kind, const router_job_t *job,
		       uint32_t rank, size_t n)
{
	uint64_t h = (uint64_t)(uintptr_t)job;

	h ^= ((uint64_t)rank << 3) ^ ((uint64_t)kind << 40);
	h *= 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 23) & (n - 1);
}

void fs_itable_init(struct fs_itable *it)
{
	it->by_ino = NULL;
	it->by_key = NULL;
	it->nbuckets = 0;
	it->count = 0;
	it->next_ino = FUSE_ROOT_ID + 1;
}

void fs_itable_release(struct fs_itable *it)
{
	for (size_t i = 0; i < it->nbuckets; i++) {
		struct fs_inode *in = it->by_ino[i];

		while (in) {
			struct fs_inode *next = in->ino_next;

			router_job_unref(in->job);
			free(in);
			in = next;
		}
	}
	free(it->by_ino);
	free(it->by_key);
	it->by_ino = NULL;
	it->by_key = NULL;
	it->nbuckets = 0;
	it->count = 0;
}

static int itable_grow(struct fs_itable *it)
{
	size_t n = it->nbuckets ? it->nbuckets * 2 : FS_ITABLE_MIN;
	struct fs_inode **bi = calloc(n, sizeof(*bi));
	struct fs_inode **bk = calloc(n, sizeof(*bk));

	if (!bi || !bk) {
		free(bi);
		free(bk);
		return -1;
	}
	for (size_t i = 0; i < it->nbuckets; i++) {
		struct fs_inode *in = it->by_ino[i];

		while (in) {
			struct fs_inode *next = in->ino_next;
			size_t hi = hash_ino(in->ino, n);
			size_t hk = hash_key(in->kind, in->job, in->rank, n);

			in->ino_next = bi[hi];
			bi[hi] = in;
			in->key_next = bk[hk];
			bk[hk] = in;
			in = next;
		}
	}
	free(it->by_ino);
	free(it->by_key);
	it->by_ino = bi;
	it->by_key = bk;
	it->nbuckets = n;
	return 0;
}

struct fs_inode *fs_inode_get(struct fs_itable *it, uint64_t ino)
{
	if (!it->nbuckets)
		return NULL;
	for (struct fs_inode *in = it->by_ino[hash_ino(ino, it->nbuckets)]; in;
	     in = in->ino_next)
		if (in->ino == ino)
			return in;
	return NULL;
}

struct fs_inode *fs_inode_ensure(struct fs_itable *it, enum fs_kind kind,
				 router_job_t *job, uint32_t rank)
{
	struct fs_inode *in;
	size_t hi, hk;

	if (it->nbuckets) {
		hk = hash_key(kind, job, rank, it->nbuckets);
		for (in = it->by_key[hk]; in; in = in->key_next)
			if (in->kind == kind && in->job == job &&
			    in->rank == rank)
				return in;
	}
	if (it->count >= it->nbuckets && itable_grow(it) < 0)
		return NULL;
	in = calloc(1, sizeof(*in));
	if (!in)
		return NULL;
	in->ino = it->next_ino++;
	in->kind = kind;
	in->job = job ? router_job_ref(job) : NULL;
	in->rank = rank;
	hi = hash_ino(in->ino, it->nbuckets);
	hk = hash_key(kind, job, rank, it->nbuckets);
	in->ino_next = it->by_ino[hi];
	it->by_ino[hi] = in;
	in->key_next = it->by_key[hk];
	it->by_key[hk] = in;
	it->count++;
	return in;
}

void fs_inode_free(struct fs_itable *it, struct fs_inode *in)
{
	struct fs_inode **pp;

	pp = &it->by_ino[hash_ino(in->ino, it->nbuckets)];
	while (*pp && *pp != in)
		pp = &(*pp)->ino_next;
	if (*pp)
		*pp = in->ino_next;
	pp = &it->by_key[hash_key(in->kind, in->job, in->rank, it->nbuckets)];
	while (*pp && *pp != in)
		pp = &(*pp)->key_next;
	if (*pp)
		*pp = in->key_next;
	it->count--;
	router_job_unref(in->job);
	free(in);
}

void fs_itable_gc(struct fs_itable *it)
{
	for (size_t i = 0; i < it->nbuckets; i++) {
		struct fs_inode *in = it->by_ino[i];

		while (in) {
			struct fs_inode *next = in->ino_next;

			if (in->nlookup == 0 && in->job &&
			    router_job_removed(in->job))
				fs_inode_free(it, in);
			in = next;
		}
	}
}

void fs_itable_foreach(struct fs_itable *it,
		       void (*fn)(struct fs_inode *in, void *ctx), void *ctx)
{
	for (size_t i = 0; i < it->nbuckets; i++)
		for (struct fs_inode *in = it->by_ino[i]; in; in = in->ino_next)
			fn(in, ctx);
}
