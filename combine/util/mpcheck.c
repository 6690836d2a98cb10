/*
 * mpcheck.c - the walk that bounds what msgpack-c allocates for untrusted
 * bytes (mpcheck.h). Without it a 20-byte frame announcing four billion
 * elements costs tens of GiB (found by fuzz_wire).
 */
#include <stdint.h>

#include "mpcheck.h"

bool mpcheck_plausible(const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t pending = 1; /* objects still to read */
	size_t off = 0;

	while (pending) {
		if (off >= len || pending > len - off)
			return false;
		unsigned b = p[off];
		size_t left = len - off;
		uint64_t skip = 1, items = 0; /* bytes of this object, elements it adds */

/* clang-format off */
#define NEED(n) do { if (left < (n)) return false; } while (0)
/* clang-format on */
#define BE16(q) ((uint64_t)(q)[0] << 8 | (q)[1])
#define BE32(q) ((uint64_t)(q)[0] << 24 | (uint64_t)(q)[1] << 16 | (uint64_t)(q)[2] << 8 | (q)[3])
		if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
			skip = 1;
		} else if (b <= 0x8f) {
			items = 2ull * (b & 0x0f);
		} else if (b <= 0x9f) {
			items = b & 0x0f;
		} else if (b <= 0xbf) {
			skip = 1 + (b & 0x1f);
		} else {
			/* clang-format off */
			switch (b) {
			case 0xc4: case 0xd9: NEED(2); skip = 2 + p[off + 1]; break;
			case 0xc5: case 0xda: NEED(3); skip = 3 + BE16(p + off + 1); break;
			case 0xc6: case 0xdb: NEED(5); skip = 5 + BE32(p + off + 1); break;
			case 0xc7: NEED(2); skip = 3 + p[off + 1]; break;
			case 0xc8: NEED(3); skip = 4 + BE16(p + off + 1); break;
			case 0xc9: NEED(5); skip = 6 + BE32(p + off + 1); break;
			case 0xca: skip = 5; break;
			case 0xcb: skip = 9; break;
			case 0xcc: case 0xd0: skip = 2; break;
			case 0xcd: case 0xd1: skip = 3; break;
			case 0xce: case 0xd2: skip = 5; break;
			case 0xcf: case 0xd3: skip = 9; break;
			case 0xd4: skip = 3; break;
			case 0xd5: skip = 4; break;
			case 0xd6: skip = 6; break;
			case 0xd7: skip = 10; break;
			case 0xd8: skip = 18; break;
			case 0xdc: NEED(3); skip = 3; items = BE16(p + off + 1); break;
			case 0xdd: NEED(5); skip = 5; items = BE32(p + off + 1); break;
			case 0xde: NEED(3); skip = 3; items = 2 * BE16(p + off + 1); break;
			case 0xdf: NEED(5); skip = 5; items = 2 * BE32(p + off + 1); break;
			default: return false; /* 0xc1: never used */
			}
			/* clang-format on */
		}
#undef NEED
#undef BE16
#undef BE32
		if (skip > left)
			return false;
		off += (size_t)skip;
		pending = pending - 1 + items;
	}
	return off == len;
}
