/*
 * libFuzzer target: the link's frame parser (collector/link.c, link_parse),
 * which reads whatever a stranger sends the head's port before it has
 * proved anything, and whatever a head sends a node.
 *
 *   byte 0: which frames may come (bits 0-1: a head before ACCEPT, a head
 *           after it, a node before it, a node after it), and whether the
 *           callback stops the parse at the first END (bit 2)
 *   byte 1: the seed of the split: the rest is fed in pieces of 1..64
 *           bytes, then again whole
 *   the rest: the stream.
 *
 * Each feeding must give the same frames (types, lengths, DATA bytes) and
 * the same result whatever the split, every payload within its type's
 * limits, DATA's slices adding up to the frame's length, and nothing
 * after an error. Crashes, UB or a difference are bugs.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "link.h"

typedef struct trace {
	uint64_t hash;   /* of every event and byte, in order */
	size_t frames;   /* completed */
	size_t data_len; /* of the DATA frame in progress */
	bool stop_at_end, done;
} trace;

static void mix(trace *t, uint64_t v)
{
	t->hash = (t->hash ^ v) * 0x100000001b3ull;
}

static int on_frame(void *arg, unsigned type, const uint8_t *bytes, size_t len, bool last)
{
	trace *t = arg;
	uint32_t min, max;

	if (t->done)
		abort(); /* nothing after the parse stopped */
	link_frame_limits(type, &min, &max);
	if (type == LINK_DATA) {
		t->data_len += len;
		if (t->data_len > max)
			abort();
		for (size_t i = 0; i < len; i++)
			mix(t, bytes[i]);
		if (!last)
			return 0;
		mix(t, 0x1000000 + t->data_len);
		t->data_len = 0;
	} else {
		if (!last || len < min || len > max || len > LINK_AUTH_MAX)
			abort();
		mix(t, (uint64_t)type << 32 | len);
		for (size_t i = 0; i < len; i++)
			mix(t, bytes[i]);
	}
	t->frames++;
	if (t->stop_at_end && type == LINK_END) {
		t->done = true;
		return -7;
	}
	return 0;
}

static const uint32_t masks[4] = {
	1u << LINK_PROVE,
	1u << LINK_DATA | 1u << LINK_PING | 1u << LINK_END,
	1u << LINK_CHALLENGE | 1u << LINK_ACCEPT | 1u << LINK_REFUSE,
	1u << LINK_PONG | 1u << LINK_END_ACK,
};

static int feed(const uint8_t *data, size_t size, uint32_t allowed, bool stop, unsigned seed,
		trace *t)
{
	static link_parser p;
	size_t i = 0;
	int rc = 0;

	memset(&p, 0, sizeof(p));
	memset(t, 0, sizeof(*t));
	p.allowed = allowed;
	t->stop_at_end = stop;
	while (i < size && rc == 0) {
		size_t n = seed ? 1 + (seed = seed * 1103515245u + 12345u) % 64 : size - i;
		if (n > size - i)
			n = size - i;
		rc = link_parse(&p, data + i, n, on_frame, t);
		i += n;
	}
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	trace a, b;

	if (size < 2)
		return 0;
	uint32_t allowed = masks[data[0] & 3];
	bool stop = data[0] & 4;
	int ra = feed(data + 2, size - 2, allowed, stop, data[1] | 1u, &a);
	int rb = feed(data + 2, size - 2, allowed, stop, 0, &b);
	if (ra != rb || a.hash != b.hash || a.frames != b.frames)
		abort();
	if (ra != 0 && ra != -7 && ra != LINK_ERR_MAGIC && ra != LINK_ERR_VERSION &&
	    ra != LINK_ERR_TYPE && ra != LINK_ERR_LENGTH)
		abort();
	return 0;
}
