/*
 * What io/'s files share and nothing outside io/ sees.
 *
 *   deflate.c   defl_   a DEFLATE encoder for trace JSON (gzblock.c's fast
 *                       levels)
 */
#ifndef FT_COMBINE_IO_INTERNAL_H
#define FT_COMBINE_IO_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The encoder's state (hash tables, the window, the parse): one per
 * thread at a time, reused from call to call. */
typedef struct defl defl;

/* effort: 0 the fastest parse, 1 a parse that also tries the position
 * after a short match (a little smaller, a little slower). NULL on
 * -ENOMEM. */
defl *defl_new(int effort);
void defl_free(defl *d); /* NULL: no-op */

/* The most defl_compress writes for n bytes. */
size_t defl_bound(size_t n);

/*
 * Raw DEFLATE of in[0..n) whose matches may reach back into dict[0..dictn)
 * (the bytes before in, dictn <= 32768), ending byte-aligned: with the
 * final block when last, else with an empty stored block (a sync flush).
 * Writes at most cap bytes to out; returns their number, or -ENOBUFS when
 * cap is too small (out's bytes are then undefined, none past cap).
 * The same input gives the same bytes whatever d did before.
 */
long defl_compress(defl *d, const unsigned char *dict, size_t dictn, const unsigned char *in,
		   size_t n, bool last, unsigned char *out, size_t cap);

#endif /* FT_COMBINE_IO_INTERNAL_H */
