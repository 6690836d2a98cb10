/*
 * gzblock - one gzip member written as blocks that are compressed
 * independently, on any thread, and concatenated in order (pigz's way):
 * each block is raw DEFLATE that may refer back into the 32 KiB before it
 * (its dictionary, so the ratio does not suffer at block edges) and ends
 * on a byte boundary (an empty stored block, as Z_SYNC_FLUSH ends), except
 * the last, which ends the DEFLATE stream. The member's CRC-32 is the
 * blocks' CRCs combined in order. The result is one ordinary gzip member:
 * gzip -t, zlib, Python's gzip, browsers' inflate read it (docs/OUTPUT.md).
 *
 * The encoder behind it is gzblock.c's to choose per level (the fastest
 * one whose ratio is no worse than zlib's at that level on trace JSON:
 * docs/OUTPUT.md says which and the numbers). zlib stays the reader.
 *
 * Used only inside combine/.
 */
#ifndef FT_COMBINE_GZBLOCK_H
#define FT_COMBINE_GZBLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How far back a block may refer: DEFLATE's window. */
#define GZBLOCK_DICT 32768u

/* The gzip member's header and trailer sizes. */
#define GZBLOCK_HEADER 10u
#define GZBLOCK_TRAILER 8u

/* Per-thread state of the encoder (hash tables, a zlib stream): one per
 * thread that compresses at a time, reused from block to block. */
typedef struct gzblock_ctx gzblock_ctx;

/* level: 1 (fast) .. 9 (small), 0 the default (no worse than zlib -6).
 * NULL on -ENOMEM, or -EINVAL for a level out of range (*err). */
gzblock_ctx *gzblock_ctx_new(int level, int *err);
void gzblock_ctx_free(gzblock_ctx *c); /* NULL: no-op */

/* The most a block of n bytes can take compressed (out's size). */
size_t gzblock_bound(size_t n);

/*
 * Compresses in[0..n) into out (cap >= gzblock_bound(n) bytes). dict[0..
 * dictn) are the bytes just before in in the stream (dictn <= GZBLOCK_DICT;
 * 0 for the first block). last: the stream's last block (n may be 0).
 * Returns the bytes written to out, or a negative errno; *crc is the
 * CRC-32 of in[0..n).
 */
long gzblock_compress(gzblock_ctx *c, const void *dict, size_t dictn, const void *in, size_t n,
		      bool last, void *out, size_t cap, uint32_t *crc);

/* The member's header (GZBLOCK_HEADER bytes) into out. */
void gzblock_header(unsigned char *out);

/* The member's trailer (GZBLOCK_TRAILER bytes): the CRC-32 of all the
 * uncompressed bytes and their number (mod 2^32). */
void gzblock_trailer(unsigned char *out, uint32_t crc, uint64_t total);

/* The CRC-32 of a's bytes followed by b's (len_b bytes). */
uint32_t gzblock_crc_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

#endif /* FT_COMBINE_GZBLOCK_H */
