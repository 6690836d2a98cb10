/*
 * Speed and size of gzblock on a file, one thread:
 *   bench_gzblock FILE [LEVEL [BLOCK_KIB [MAX_MIB]]]
 * compresses FILE (its first MAX_MIB) as blocks of BLOCK_KIB with their
 * dictionaries, as the ostream's workers do, checks zlib reads it back,
 * and prints the size and MB/s of the compression (CRC included) per second of the thread's CPU time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zlib.h>

#include "gzblock.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	int level = argc > 2 ? atoi(argv[2]) : 0, err = 0;
	size_t block = (argc > 3 ? (size_t)atol(argv[3]) : 1024) * 1024;
	size_t max = (argc > 4 ? (size_t)atol(argv[4]) : 400) << 20, n = 0, w = GZBLOCK_HEADER;
	unsigned char *in, *out, *back;
	uint32_t crc = 0;
	gzblock_ctx *c;
	FILE *f;
	double t0, t1;
	z_stream z;

	if (argc < 2)
		return 2;
	f = fopen(argv[1], "rb");
	in = malloc(max);
	out = malloc(gzblock_bound(max) + max / 16 + 4096);
	if (f == NULL || in == NULL || out == NULL)
		return 1;
	n = fread(in, 1, max, f);
	fclose(f);
	c = gzblock_ctx_new(level, &err);
	if (c == NULL)
		return 1;
	gzblock_header(out);
	t0 = now();
	for (size_t pos = 0; pos < n || pos == 0; pos += block) {
		size_t len = n - pos < block ? n - pos : block;
		size_t dictn = pos < GZBLOCK_DICT ? pos : GZBLOCK_DICT;
		uint32_t bcrc;
		long got = gzblock_compress(c, in + pos - dictn, dictn, in + pos, len,
					    pos + len >= n, out + w, gzblock_bound(len), &bcrc);

		if (got < 0) {
			fprintf(stderr, "block at %zu: %ld\n", pos, got);
			return 1;
		}
		w += (size_t)got;
		crc = gzblock_crc_combine(crc, bcrc, len);
		if (pos + len >= n)
			break;
	}
	t1 = now();
	gzblock_trailer(out + w, crc, n);
	w += GZBLOCK_TRAILER;
	back = malloc(n + 1);
	memset(&z, 0, sizeof(z));
	inflateInit2(&z, 31);
	z.next_in = out;
	z.avail_in = (uInt)w;
	z.next_out = back;
	z.avail_out = (uInt)n + 1;
	if (inflate(&z, Z_FINISH) != Z_STREAM_END || z.total_out != n || memcmp(back, in, n) != 0) {
		fprintf(stderr, "zlib does not read it back\n");
		return 1;
	}
	inflateEnd(&z);
	printf("level %d block %zu KiB: %zu -> %zu bytes (%.3f%%), %.1f MB/s\n", level, block >> 10,
	       n, w, 100.0 * (double)w / (double)n, (double)n / (t1 - t0) / 1e6);
	gzblock_ctx_free(c);
	return 0;
}
