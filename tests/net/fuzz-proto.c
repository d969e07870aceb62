/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the wire decoder.  Input: byte 0 picks the role (even =
 * daemon, odd = forwarder) and, for a forwarder, whether it was greeted;
 * the rest is a byte stream decoded frame after frame, as a connection
 * would.  Properties checked: the decoder never reads past @avail, never
 * loops without progress, and every frame it accepts re-encodes to exactly
 * the bytes it was decoded from.  Built for libFuzzer (-Dfuzz=true) and,
 * always, into fuzz-driver (tests/net/fuzz-driver.c).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz-proto: property violated: %s\n", what);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proto_peer p;
	char err[256];

	if (size < 1)
		return 0;
	proto_peer_init(&p, (data[0] & 1) ? PROTO_ROLE_FORWARDER
					  : PROTO_ROLE_DAEMON);
	if (data[0] & 1) {
		proto_peer_set_ranks(&p, data[0] >> 4,
				     1u + ((data[0] >> 1) & 7));
		p.greeted = (data[0] & 2) != 0;
	}
	data++;
	size--;

	/* Copy into an exact-size heap buffer so ASan sees any over-read. */
	uint8_t *buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	size_t off = 0;
	while (off < size) {
		struct proto_frame f;
		size_t used = 0;
		size_t avail = size - off;
		int rc = proto_decode(&p, buf + off, avail, &f, &used, err,
				      sizeof(err));
		if (rc == PROTO_NEED_MORE) {
			check(used > avail,
			      "NEED_MORE asks for more than avail");
			check(used <= PROTO_FRAME_MAX + PROTO_LEN_SIZE,
			      "NEED_MORE beyond the frame limit");
			break;
		}
		if (rc != PROTO_OK) {
			check(rc >= PROTO_ERR_TYPE && rc <= PROTO_ERR_FIELD,
			      "unknown result code");
			check(err[0] != '\0', "error without a reason");
			break;
		}
		check(used >= PROTO_HDR_SIZE && used <= avail,
		      "consumed out of range");
		uint8_t *again = malloc(used);
		check(again != NULL, "malloc");
		ssize_t n = proto_encode(&f, again, used);
		check(n == (ssize_t)used, "re-encoded size differs");
		check(memcmp(again, buf + off, used) == 0,
		      "re-encoded bytes differ");
		free(again);
		off += used;
	}
	free(buf);
	return 0;
}
