/*
 * gzblock (combine/io/gzblock.c): a gzip member made of blocks compressed
 * apart and concatenated (header, blocks, trailer) is what zlib inflates
 * back, byte for byte, for every level, for inputs of every kind (trace
 * JSON, random bytes, one byte repeated, empty) and block splits of every
 * size, 0-byte blocks included; a block never writes past its cap.
 *
 *   test_gzblock               the checks
 *   test_gzblock write FILE    writes FILE.src and FILE (its gzip member, of
 *                              blocks) for check_gzblock.py's readers
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "check.h"
#include "gzblock.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* Trace JSON as forktrace writes a traced function's calls: lines that
 * repeat most of an earlier one and differ in a few digits of the time and
 * the duration, now and then another name, another thread or a counter. */
static size_t make_trace(unsigned char *buf, size_t cap)
{
	static const char *const names[] = {"fib", "main", "compute_matrix_product",
					    "std::vector<int>::push_back", "a"};
	size_t n = 0;
	uint64_t ts = 37187370088000ull;
	unsigned tid = 22403;

	while (n + 256 < cap) {
		uint64_t r = rng();
		int w;

		ts += r % 300;
		if (r % 4096 == 0)
			tid = 22403 + (unsigned)(r >> 40) % 4;
		if (r % 997 == 0)
			w = snprintf(
				(char *)buf + n, cap - n,
				"{\"ph\":\"C\",\"name\":\"rss\",\"cat\":\"rusage\",\"pid\":22403,"
				"\"tid\":%u,\"ts\":%llu.%03u,\"args\":{\"peak_mib\":%llu}}\n,\n",
				tid, (unsigned long long)ts / 1000, (unsigned)(ts % 1000),
				(unsigned long long)(r >> 50));
		else
			w = snprintf(
				(char *)buf + n, cap - n,
				"{\"ph\":\"X\",\"name\":\"%s\",\"cat\":\"function\","
				"\"pid\":22403,\"tid\":%u,\"ts\":%llu.%03u,\"dur\":0.%03u}\n,\n",
				names[r % 16 == 0 ? (r >> 8) % 5 : 0], tid,
				(unsigned long long)ts / 1000, (unsigned)(ts % 1000),
				20 + (unsigned)(r >> 24) % 40);
		n += (size_t)w;
	}
	return n;
}

enum input_kind { IN_TRACE, IN_RANDOM, IN_ONE_BYTE, IN_TEXT_RANDOM, IN_MIXED, IN_KINDS };

static const char *const kind_names[IN_KINDS] = {"trace", "random", "one byte", "random text",
						 "mixed"};

static size_t make_input(enum input_kind kind, unsigned char *buf, size_t n)
{
	size_t i;

	switch (kind) {
	case IN_TRACE:
		return make_trace(buf, n);
	case IN_RANDOM:
		for (i = 0; i < n; i++)
			buf[i] = (unsigned char)rng();
		return n;
	case IN_ONE_BYTE:
		memset(buf, 'x', n);
		return n;
	case IN_TEXT_RANDOM:
		for (i = 0; i < n; i++)
			buf[i] = (unsigned char)("0123456789,:\"{}"[rng() % 15]);
		return n;
	case IN_MIXED:
		/* Runs, random stretches and repeats of earlier bytes at every
		 * distance, in turns. */
		for (i = 0; i < n;) {
			uint64_t r = rng();
			size_t len = 1 + r % 300;

			if (len > n - i)
				len = n - i;
			if (r % 3 == 0) {
				memset(buf + i, (int)(r >> 32), len);
			} else if (r % 3 == 1 || i == 0) {
				for (size_t k = 0; k < len; k++)
					buf[i + k] = (unsigned char)rng();
			} else {
				size_t dist = 1 + (r >> 20) % (i < 40000 ? i : 40000);

				for (size_t k = 0; k < len; k++)
					buf[i + k] = buf[i + k - dist];
			}
			i += len;
		}
		return n;
	case IN_KINDS:
		break;
	}
	return 0;
}

/* The member of in[0..n) split at the block sizes sizes[0..nsizes) (the
 * rest in a last block), each block compressed by its own call at level.
 * Returns its size, or 0 when a call failed (checked). */
static size_t compress_blocks(int level, const unsigned char *in, size_t n, const size_t *sizes,
			      size_t nsizes, unsigned char *out, size_t cap)
{
	gzblock_ctx *c;
	int err = 0;
	size_t pos = 0, w = GZBLOCK_HEADER;
	uint32_t crc = 0;

	c = gzblock_ctx_new(level, &err);
	MUST(c != NULL);
	gzblock_header(out);
	for (size_t b = 0; b <= nsizes; b++) {
		size_t len = b < nsizes ? sizes[b] : n - pos;
		size_t dictn = pos < GZBLOCK_DICT ? pos : GZBLOCK_DICT;
		uint32_t bcrc = 1;
		long got;

		MUST(pos + len <= n);
		MUST(w + gzblock_bound(len) + GZBLOCK_TRAILER <= cap);
		got = gzblock_compress(c, in + pos - dictn, dictn, in + pos, len, b == nsizes,
				       out + w, gzblock_bound(len), &bcrc);
		CHECK_INT(got, >, 0);
		if (got <= 0) {
			gzblock_ctx_free(c);
			return 0;
		}
		CHECK_UINT(bcrc, ==, crc32(0, in + pos, (uInt)len));
		crc = gzblock_crc_combine(crc, bcrc, len);
		w += (size_t)got;
		pos += len;
	}
	gzblock_ctx_free(c);
	CHECK_UINT(crc, ==, crc32(0, in, (uInt)n));
	gzblock_trailer(out + w, crc, n);
	return w + GZBLOCK_TRAILER;
}

/* zlib's gzip reader (window bits 31) on gz[0..gzn): true when it reads
 * one whole member, exactly want[0..n), with nothing after it. */
static bool inflates_to(const unsigned char *gz, size_t gzn, const unsigned char *want, size_t n,
			unsigned char *scratch, size_t scratch_cap)
{
	z_stream z;
	int ret;

	memset(&z, 0, sizeof(z));
	MUST(inflateInit2(&z, 31) == Z_OK);
	z.next_in = (unsigned char *)gz;
	z.avail_in = (uInt)gzn;
	z.next_out = scratch;
	z.avail_out = (uInt)scratch_cap;
	ret = inflate(&z, Z_FINISH);
	inflateEnd(&z);
	return ret == Z_STREAM_END && z.avail_in == 0 && z.total_out == n &&
	       memcmp(scratch, want, n) == 0;
}

#define MAX_IN (400u * 1024u)

static unsigned char *in_buf, *gz_buf, *out_buf;
static size_t gz_cap;

/* Splits of n bytes: into kind-many pieces (random, 0-byte ones included,
 * one byte each, all in one block, a block of GZBLOCK_DICT then the rest). */
static size_t make_split(int how, size_t n, size_t *sizes, size_t max)
{
	size_t k = 0, left = n;

	switch (how) {
	case 0: /* one block */
		return 0;
	case 1: /* random sizes, a 0-byte block now and then */
		while (left > 0 && k < max) {
			uint64_t r = rng();
			size_t len = r % 5 == 0 ? 0 : (size_t)(r >> 8) % (n / 3 + 2);

			if (len > left)
				len = left;
			sizes[k++] = len;
			left -= len;
		}
		return k;
	case 2: /* small blocks, shorter than the dictionary */
		while (left > 0 && k < max) {
			size_t len = 1 + rng() % 700;

			if (len > left)
				len = left;
			sizes[k++] = len;
			left -= len;
		}
		return k;
	case 3: /* empty blocks around a whole one, and an empty last one */
		sizes[k++] = 0;
		sizes[k++] = n;
		sizes[k++] = 0;
		return k;
	}
	return 0;
}

static void check_roundtrips(void)
{
	static size_t sizes[4096];
	static const size_t lengths[] = {0, 1, 2, 3, 7, 100, 4095, 40000, 70000, MAX_IN};
	/* The default, each encoder (greedy 1-3, lazy 4-7, zlib 8-9) and
	 * the edges between them; every level in the other checks. */
	static const int levels[] = {0, 1, 3, 4, 7, 8, 9};

	for (int kind = 0; kind < IN_KINDS; kind++) {
		for (size_t li = 0; li < sizeof(lengths) / sizeof(lengths[0]); li++) {
			size_t n = make_input(kind, in_buf, lengths[li]);

			for (size_t lv = 0; lv < sizeof(levels) / sizeof(levels[0]); lv++) {
				int level = levels[lv];

				for (int how = 0; how < 4; how++) {
					size_t ns = make_split(how, n, sizes, 4096);
					size_t gzn;

					/* Big inputs in two splits: more are slow
					 * and no more telling than of smaller ones. */
					if (n > 40000 && (how == 2 || how == 3))
						continue;
					gzn = compress_blocks(level, in_buf, n, sizes, ns, gz_buf,
							      gz_cap);
					CHECK_MSG(gzn > 0 && inflates_to(gz_buf, gzn, in_buf, n,
									 out_buf, MAX_IN),
						  "%s input of %zu bytes, level %d, split %d",
						  kind_names[kind], n, level, how);
				}
			}
		}
	}
}

/* A stream of no bytes is one empty last block between header and
 * trailer. */
static void check_empty_stream(void)
{
	for (int level = 0; level <= 9; level++) {
		size_t gzn = compress_blocks(level, in_buf, 0, NULL, 0, gz_buf, gz_cap);

		CHECK(gzn > 0 && inflates_to(gz_buf, gzn, in_buf, 0, out_buf, MAX_IN));
	}
}

/* What the fast levels are for: trace JSON in blocks of 128 KiB is no
 * larger at the default level than zlib -6 of the same bytes as one
 * stream. */
static void check_ratio(void)
{
	static size_t sizes[64];
	size_t n = make_trace(in_buf, MAX_IN), ns = 0, gzn;
	uLongf zn = (uLongf)gz_cap;

	for (size_t pos = 0; pos + 128 * 1024 < n; pos += 128 * 1024)
		sizes[ns++] = 128 * 1024;
	gzn = compress_blocks(0, in_buf, n, sizes, ns, gz_buf, gz_cap);
	MUST(compress2(out_buf, &zn, in_buf, n, 6) == Z_OK);
	/* zlib's wrapper is 6 bytes, gzip's 18. */
	CHECK_MSG(gzn <= zn + 12, "default level: %zu bytes, zlib -6 %lu", gzn, (unsigned long)zn);
}

/* Out of room, a block fails and leaves the bytes past its cap alone. */
static void check_cap(void)
{
	for (int kind = 0; kind < IN_KINDS; kind++) {
		size_t n = make_input(kind, in_buf, 50000);

		for (int level = 0; level <= 9; level++) {
			gzblock_ctx *c;
			int err = 0;
			uint32_t crc;
			long full, got;

			c = gzblock_ctx_new(level, &err);
			MUST(c != NULL);
			full = gzblock_compress(c, NULL, 0, in_buf, n, true, gz_buf, gz_cap, &crc);
			CHECK_INT(full, >, 0);
			CHECK_UINT((size_t)full, <=, gzblock_bound(n));
			for (long cap = full - 1; cap >= 0 && cap >= full - 40; cap -= 13) {
				memset(gz_buf, 0xa5, (size_t)full + 64);
				got = gzblock_compress(c, NULL, 0, in_buf, n, true, gz_buf,
						       (size_t)cap, &crc);
				CHECK_INT(got, <, 0);
				for (long i = cap; i < full + 64; i++)
					if (gz_buf[i] != 0xa5) {
						CHECK_MSG(
							false,
							"%s, level %d: byte %ld of cap %ld written",
							kind_names[kind], level, i, cap);
						break;
					}
			}
			/* The context works again after a failure. */
			got = gzblock_compress(c, NULL, 0, in_buf, n, true, gz_buf, gz_cap, &crc);
			CHECK_INT(got, ==, full);
			gzblock_ctx_free(c);
		}
	}
}

static void check_levels(void)
{
	int err = 0;

	CHECK(gzblock_ctx_new(10, &err) == NULL);
	CHECK_INT(err, ==, -EINVAL);
	err = 0;
	CHECK(gzblock_ctx_new(-1, &err) == NULL);
	CHECK_INT(err, ==, -EINVAL);
	gzblock_ctx_free(NULL);
}

/* Writes FILE.src (trace JSON and a few random bytes) and FILE, its gzip
 * member of random blocks. */
static int write_files(const char *path)
{
	static size_t sizes[256];
	size_t n = make_trace(in_buf, MAX_IN);
	size_t ns = make_split(1, n, sizes, 256), gzn;
	char src[4096];
	FILE *f;

	gzn = compress_blocks(0, in_buf, n, sizes, ns, gz_buf, gz_cap);
	MUST(gzn > 0);
	snprintf(src, sizeof(src), "%s.src", path);
	f = fopen(src, "wb");
	MUST(f != NULL && fwrite(in_buf, 1, n, f) == n && fclose(f) == 0);
	f = fopen(path, "wb");
	MUST(f != NULL && fwrite(gz_buf, 1, gzn, f) == gzn && fclose(f) == 0);
	return 0;
}

int main(int argc, char **argv)
{
	gz_cap = 2 * gzblock_bound(MAX_IN) + 4096 * 64;
	in_buf = malloc(MAX_IN);
	gz_buf = malloc(gz_cap);
	out_buf = malloc(MAX_IN);
	MUST(in_buf != NULL && gz_buf != NULL && out_buf != NULL);
	if (argc == 3 && strcmp(argv[1], "write") == 0)
		return write_files(argv[2]);
	check_levels();
	check_empty_stream();
	check_roundtrips();
	check_ratio();
	check_cap();
	free(in_buf);
	free(gz_buf);
	free(out_buf);
	return check_done("gzblock");
}
