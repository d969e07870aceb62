/* SPDX-License-Identifier: MIT */
/*
 * Standalone driver for fuzz-proto.c (no libFuzzer needed): runs the target
 * over a built-in seed corpus of valid frame streams, then over N thousand
 * deterministic random, truncated and mutated inputs.
 *   fuzz-driver [THOUSANDS]          default 50
 *   fuzz-driver --write-corpus DIR   write the seeds as files (libFuzzer)
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/proto.h"
#include "router/router.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SEED_MAX 8192

struct seed {
	uint8_t b[SEED_MAX];
	size_t n;
};

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
	/* xorshift64*: deterministic across runs */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dULL;
}

static void add(struct seed *s, const struct proto_frame *f)
{
	ssize_t n = proto_encode(f, s->b + s->n, SEED_MAX - s->n);
	if (n < 0) {
		fprintf(stderr, "fuzz-driver: encode %s: %s\n",
			proto_type_name(f->type), strerror((int)-n));
		exit(1);
	}
	s->n += (size_t)n;
}

#define NSEEDS 6

static size_t make_seeds(struct seed *seeds)
{
	static const uint8_t payload[] = "hello\0world\n\xff\x00tail";
	struct proto_frame hello = {
	    .type = PROTO_HELLO,
	    .hello = {.version = PROTO_VERSION,
		      .rank_base = 0,
		      .rank_count = 4,
		      .job_size = 4,
		      .pid = 1,
		      .uid = 0,
		      .nspace = "job",
		      .nspace_len = 3,
		      .host = "h",
		      .host_len = 1},
	};
	size_t k = 0;

	/* 0: a daemon's view of a whole job. */
	struct seed *s = &seeds[k++];
	s->b[s->n++] = 0;
	add(s, &hello);
	for (uint32_t r = 0; r < 4; r++) {
		struct proto_frame f = {
		    .type = PROTO_RANK_START, .rank = r, .pid = 100 + r};
		add(s, &f);
		f = (struct proto_frame){.type = PROTO_DATA,
					 .rank = r,
					 .channel = ROUTER_CH_STDOUT,
					 .data = payload,
					 .len = sizeof(payload)};
		add(s, &f);
		f.channel = ROUTER_CH_STDERR;
		add(s, &f);
		f = (struct proto_frame){
		    .type = PROTO_XOFF, .rank = r, .channel = ROUTER_CH_STDIN};
		add(s, &f);
		f.type = PROTO_XON;
		add(s, &f);
		f = (struct proto_frame){.type = PROTO_COMPLETE,
					 .rank = r,
					 .channel = ROUTER_CH_STDOUT};
		add(s, &f);
		f = (struct proto_frame){
		    .type = PROTO_EXIT, .rank = r, .how = r & 1, .code = r + 1};
		add(s, &f);
	}
	/* 1: a forwarder's view. */
	s = &seeds[k++];
	s->b[s->n++] = 1 | (0 << 4) | (3 << 1); /* ranks 0..3, not greeted */
	struct proto_frame w = {.type = PROTO_WELCOME,
				.version = PROTO_VERSION,
				.max_payload = PROTO_PAYLOAD_MAX};
	add(s, &w);
	for (uint32_t r = 0; r < 4; r++) {
		struct proto_frame f = {
		    .type = PROTO_STDIN, .rank = r, .data = payload, .len = 7};
		add(s, &f);
		f = (struct proto_frame){
		    .type = PROTO_XOFF, .rank = r, .channel = ROUTER_CH_STDOUT};
		add(s, &f);
		f.type = PROTO_XON;
		add(s, &f);
		f = (struct proto_frame){.type = PROTO_STDIN_EOF, .rank = r};
		add(s, &f);
		f = (struct proto_frame){
		    .type = PROTO_ACK, .ack_bytes = 1000 * r, .ack_exits = r};
		add(s, &f);
	}
	/* 2: a refusal. */
	s = &seeds[k++];
	s->b[s->n++] = 1;
	struct proto_frame e = {.type = PROTO_ERROR,
				.code = PROTO_REFUSED_EXISTS,
				.msg = "rank 0 of job 'job' is running",
				.msg_len = 30};
	add(s, &e);
	/* 3: a version 3 HELLO with a credential; 4: a version 2 HELLO. */
	static const char cred[] = "MUNGE:AwQFAACmIv1tBjG9SXuFmW8Cfcx7+pPfGu3F:";
	s = &seeds[k++];
	s->b[s->n++] = 0;
	hello.hello.cred = cred;
	hello.hello.cred_len = sizeof(cred) - 1;
	add(s, &hello);
	s = &seeds[k++];
	s->b[s->n++] = 0;
	hello.hello.version = 2;
	hello.hello.cred_len = 0;
	add(s, &hello);
	/* 5: a version 4 resume: HELLO, RESUME per rank (daemon's view)
	 * and HELD (decoded by a forwarder: the first byte says which). */
	s = &seeds[k++];
	s->b[s->n++] = 0;
	hello.hello.version = PROTO_VERSION;
	hello.hello.flags = PROTO_HELLO_F_NAME | PROTO_HELLO_F_RESUME;
	add(s, &hello);
	for (uint32_t r = 0; r < 4; r++) {
		struct proto_frame f = {.type = PROTO_RESUME,
					.rank = r,
					.stdin_rx = 10 * r,
					.ack_bytes = 5 * r,
					.stdin_eof = r & 1,
					.replay_bytes = 7 * r};
		add(s, &f);
		f = (struct proto_frame){.type = PROTO_HELD,
					 .rank = r,
					 .held_state = (uint8_t)(r % 3),
					 .held = {r, 2 * r, 3 * r}};
		add(s, &f);
	}
	return k;
}

static int write_corpus(const char *dir)
{
	struct seed *seeds = calloc(NSEEDS, sizeof(*seeds));
	size_t k = make_seeds(seeds);

	for (size_t i = 0; i < k; i++) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/seed-%zu", dir, i);
		FILE *f = fopen(path, "wb");
		if (!f || fwrite(seeds[i].b, 1, seeds[i].n, f) != seeds[i].n) {
			fprintf(stderr, "fuzz-driver: %s: %s\n", path,
				strerror(errno));
			return 1;
		}
		fclose(f);
	}
	free(seeds);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0)
		return write_corpus(argv[2]);
	long thousands = argc > 1 ? strtol(argv[1], NULL, 10) : 50;
	struct seed *seeds = calloc(NSEEDS, sizeof(*seeds));
	uint8_t *m = malloc(SEED_MAX + 64);
	size_t k = make_seeds(seeds);
	unsigned long runs = 0;

	for (size_t i = 0; i < k; i++, runs++)
		LLVMFuzzerTestOneInput(seeds[i].b, seeds[i].n);
	for (long it = 0; it < thousands * 1000; it++, runs++) {
		struct seed *s = &seeds[rnd() % k];
		size_t n;
		switch (rnd() % 4) {
		case 0: /* truncated */
			n = 1 + rnd() % s->n;
			memcpy(m, s->b, n);
			break;
		case 1: /* random bytes, sometimes after a valid prefix */
			n = rnd() % 64;
			size_t keep = n < s->n ? n : s->n;
			memcpy(m, s->b, keep);
			for (size_t j = keep; j < n + 16; j++)
				m[j] = (uint8_t)rnd();
			n += 16;
			break;
		default: { /* mutated: flip, set, insert or delete bytes */
			n = s->n;
			memcpy(m, s->b, n);
			int edits = 1 + (int)(rnd() % 4);
			for (int e = 0; e < edits; e++) {
				size_t at = 1 + rnd() % (n > 1 ? n - 1 : 1);
				switch (rnd() % 4) {
				case 0:
					m[at] ^= (uint8_t)(1u << (rnd() % 8));
					break;
				case 1: {
					static const uint8_t hot[] = {
					    0, 1, 0x7f, 0x80, 0xff, 5, 13};
					m[at] = hot[rnd() % sizeof(hot)];
					break;
				}
				case 2:
					if (n < SEED_MAX + 32) {
						memmove(m + at + 1, m + at,
							n - at);
						m[at] = (uint8_t)rnd();
						n++;
					}
					break;
				default:
					if (n > 2) {
						memmove(m + at, m + at + 1,
							n - at - 1);
						n--;
					}
					break;
				}
			}
			break;
		}
		}
		m[0] = (uint8_t)(rnd() & 0xff); /* any role */
		LLVMFuzzerTestOneInput(m, n);
	}
	printf("fuzz-driver: %lu inputs, no property violated\n", runs);
	free(m);
	free(seeds);
	return 0;
}
