/*
 * libFuzzer target: gzblock (combine/io/gzblock.c and the DEFLATE encoder
 * behind its fast levels, combine/io/deflate.c) on arbitrary bytes. The
 * input:
 *
 *   byte 0: the level (mod 10; 0 the default)
 *   byte 1: how many block ends follow (mod 8)
 *   then two bytes (little-endian) per block end: where it falls (mod the
 *           rest's length + 1; ends out of order make 0-byte blocks)
 *   the rest: the bytes to compress.
 *
 * The blocks are compressed apart, each with the 32 KiB before it, into a
 * buffer of exactly gzblock_bound bytes, and joined into one member; zlib
 * must read it back to the exact input. A crash, a write past the bound,
 * UB, a failed block or a different read-back is a bug. Each block is
 * compressed twice, the second time by a context that compressed other
 * bytes before: the bytes must be the same. The contexts (two per level)
 * are kept from input to input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "gzblock.h"

#define MAX_ENDS 8

static int cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	return x < y ? -1 : x > y;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t ends[MAX_ENDS + 1], nends, pos = 0, w = GZBLOCK_HEADER, n;
	gzblock_ctx *c, *other;
	unsigned char *out, *copy, *back, *scratch;
	const uint8_t *in;
	uint32_t crc = 0;
	int level, err = 0;
	z_stream z;

	if (size < 2)
		return 0;
	level = data[0] % 10;
	nends = data[1] % MAX_ENDS;
	if (size < 2 + 2 * nends)
		return 0;
	in = data + 2 + 2 * nends;
	n = size - 2 - 2 * nends;
	for (size_t i = 0; i < nends; i++)
		ends[i] = (size_t)(data[2 + 2 * i] | data[3 + 2 * i] << 8) % (n + 1);
	qsort(ends, nends, sizeof(ends[0]), cmp_size);
	ends[nends++] = n;

	/* Contexts live across inputs, as a worker's do across blocks. */
	static gzblock_ctx *ctxs[10], *others[10];

	if (ctxs[level] == NULL) {
		ctxs[level] = gzblock_ctx_new(level, &err);
		others[level] = gzblock_ctx_new(level, &err);
	}
	c = ctxs[level];
	other = others[level];
	out = malloc(GZBLOCK_HEADER + GZBLOCK_TRAILER + (MAX_ENDS + 1) * gzblock_bound(n));
	back = malloc(n + 1);
	if (c == NULL || other == NULL || out == NULL || back == NULL)
		abort();
	/* The second context has seen other bytes (the input backwards). */
	copy = malloc(n + 1);
	scratch = malloc(gzblock_bound(n));
	if (copy == NULL || scratch == NULL)
		abort();
	for (size_t i = 0; i < n; i++)
		copy[i] = in[n - 1 - i];
	gzblock_header(out);
	for (size_t b = 0; b < nends; b++) {
		size_t len = ends[b] - pos, dictn = pos < GZBLOCK_DICT ? pos : GZBLOCK_DICT;
		size_t bound = gzblock_bound(len);
		unsigned char *exact = malloc(bound), *again = malloc(bound);
		uint32_t bcrc, crc2, junk;
		long got, got2;

		if (exact == NULL || again == NULL)
			abort();
		/* Into a buffer of exactly the bound: ASan sees a write past it. */
		got = gzblock_compress(c, in + pos - dictn, dictn, in + pos, len, b == nends - 1,
				       exact, bound, &bcrc);
		if (got < 0 || (size_t)got > bound)
			abort();
		if (gzblock_compress(other, NULL, 0, copy, n, true, scratch, gzblock_bound(n),
				     &junk) < 0)
			abort();
		got2 = gzblock_compress(other, in + pos - dictn, dictn, in + pos, len,
					b == nends - 1, again, bound, &crc2);
		if (got2 != got || memcmp(exact, again, (size_t)got) != 0 || crc2 != bcrc)
			abort();
		memcpy(out + w, exact, (size_t)got);
		free(exact);
		free(again);
		w += (size_t)got;
		crc = gzblock_crc_combine(crc, bcrc, len);
		pos = ends[b];
	}
	gzblock_trailer(out + w, crc, n);
	w += GZBLOCK_TRAILER;

	memset(&z, 0, sizeof(z));
	if (inflateInit2(&z, 31) != Z_OK)
		abort();
	z.next_in = out;
	z.avail_in = (uInt)w;
	z.next_out = back;
	z.avail_out = (uInt)n + 1;
	if (inflate(&z, Z_FINISH) != Z_STREAM_END || z.total_out != n || z.avail_in != 0 ||
	    memcmp(back, in, n) != 0)
		abort();
	inflateEnd(&z);
	free(scratch);
	free(copy);
	free(back);
	free(out);
	return 0;
}
