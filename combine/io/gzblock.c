/*
 * gzblock - one gzip member as blocks compressed independently
 * (gzblock.h). Each block is raw DEFLATE primed with the 32 KiB before it
 * and ends byte-aligned (Z_SYNC_FLUSH's empty stored block), the last one
 * with the final block bit (Z_FINISH).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <libdeflate.h>
#include <zlib.h>

#include "gzblock.h"
#include "internal.h"

/* The level that 0 asks for: no worse than zlib's -6. */
#define GZBLOCK_DEFAULT_LEVEL 6

/* Levels up to this one are deflate.c's (its effort: 0 below
 * GZBLOCK_LAZY_LEVEL, 1 from it), each smaller than zlib's at that level
 * on trace JSON; above it zlib's, whose long hash chains make it smaller
 * still (docs/OUTPUT.md, "gz", has the numbers). */
#define GZBLOCK_FAST_LEVELS 7
#define GZBLOCK_LAZY_LEVEL 4

struct gzblock_ctx {
	int level;
	defl *fast; /* NULL: zlib */
	z_stream z;
};

gzblock_ctx *gzblock_ctx_new(int level, int *err)
{
	gzblock_ctx *c;

	if (level < 0 || level > 9) {
		*err = -EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		goto fail_alloc;
	c->level = level == 0 ? GZBLOCK_DEFAULT_LEVEL : level;
	if (c->level <= GZBLOCK_FAST_LEVELS) {
		c->fast = defl_new(c->level >= GZBLOCK_LAZY_LEVEL);
		if (c->fast == NULL)
			goto fail_init;
		return c;
	}
	/* Negative window bits: raw DEFLATE, no zlib or gzip wrapper; the
	 * member's header and trailer are written around the blocks. */
	if (deflateInit2(&c->z, c->level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		goto fail_init;
	return c;

fail_init:
	free(c);
fail_alloc:
	*err = -ENOMEM;
	return NULL;
}

void gzblock_ctx_free(gzblock_ctx *c)
{
	if (c == NULL)
		return;
	if (c->fast != NULL)
		defl_free(c->fast);
	else
		deflateEnd(&c->z);
	free(c);
}

/*
 * zlib's bound for its default memory level (deflateBound), plus the
 * empty stored block a sync flush ends with and the bits before it, plus
 * the stored blocks' headers (5 bytes per 16 KiB at most) should a block
 * of incompressible bytes be stored.
 */
size_t gzblock_bound(size_t n)
{
	return n + (n >> 12) + (n >> 14) + (n >> 25) + 5 * (n / 16383 + 1) + 64;
}

/* Runs deflate on z until it has taken all its input and,
 * with a flush other than Z_NO_FLUSH, written all it owes: 0, or -ENOBUFS
 * when out is full first. */
static int deflate_all(z_stream *z, int flush)
{
	for (;;) {
		int ret = deflate(z, flush);

		if (ret == Z_STREAM_END)
			return 0;
		if (ret != Z_OK && ret != Z_BUF_ERROR)
			return -EIO;
		if (flush != Z_FINISH && z->avail_in == 0 &&
		    (flush == Z_NO_FLUSH || z->avail_out > 0))
			return 0;
		if (z->avail_out == 0)
			return -ENOBUFS;
	}
}

long gzblock_compress(gzblock_ctx *c, const void *dict, size_t dictn, const void *in, size_t n,
		      bool last, void *out, size_t cap, uint32_t *crc)
{
	z_stream *z = &c->z;
	const unsigned char *p = in;
	size_t left = n;
	int ret;

	if (dictn > GZBLOCK_DICT || cap > LONG_MAX)
		return -EINVAL;
	/* libdeflate's CRC folds with carry-less multiplies: several times
	 * zlib's speed, which would cost as much as the fast levels' work. */
	*crc = libdeflate_crc32(0, in, n);
	if (c->fast != NULL)
		return defl_compress(c->fast, dict, dictn, in, n, last, out, cap);
	if (deflateReset(z) != Z_OK)
		return -EIO;
	if (dictn > 0 && deflateSetDictionary(z, dict, (uInt)dictn) != Z_OK)
		return -EIO;
	z->next_out = out;
	z->avail_out = cap > UINT_MAX ? UINT_MAX : (uInt)cap;
	/* avail_in is 32 bits: a larger block goes in in pieces. */
	do {
		uInt take = left > UINT_MAX ? UINT_MAX : (uInt)left;

		z->next_in = (unsigned char *)p;
		z->avail_in = take;
		p += take;
		left -= take;
		ret = deflate_all(z, left > 0 ? Z_NO_FLUSH : last ? Z_FINISH : Z_SYNC_FLUSH);
		if (ret < 0)
			return ret;
	} while (left > 0);
	return (long)z->total_out;
}

void gzblock_header(unsigned char *out)
{
	/* Magic, DEFLATE, no flags, no time (the same bytes for the same
	 * input), no extra flags, OS Unix. */
	static const unsigned char header[GZBLOCK_HEADER] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};

	memcpy(out, header, sizeof(header));
}

static void put_le32(unsigned char *out, uint32_t v)
{
	out[0] = (unsigned char)v;
	out[1] = (unsigned char)(v >> 8);
	out[2] = (unsigned char)(v >> 16);
	out[3] = (unsigned char)(v >> 24);
}

void gzblock_trailer(unsigned char *out, uint32_t crc, uint64_t total)
{
	put_le32(out, crc);
	put_le32(out + 4, (uint32_t)total);
}

uint32_t gzblock_crc_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
	return (uint32_t)crc32_combine(crc_a, crc_b, (z_off_t)len_b);
}
