/*
 * mpcheck - a guard in front of msgpack-c's unpacker (mpcheck_): msgpack-c
 * allocates an array's or map's elements from the count a container
 * announces before it reads them, so untrusted bytes must be walked first.
 * Used by the collector's frame decoder and the model stream's reader.
 */
#ifndef FT_COMBINE_MPCHECK_H
#define FT_COMBINE_MPCHECK_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Is data[0..len) exactly one msgpack object whose containers announce no
 * more elements, and whose strings, binaries and extensions no more bytes,
 * than there are bytes left to hold them? Every element takes at least one
 * byte, so when this holds, what msgpack_unpack_next allocates for the
 * object is bounded by a small multiple of len.
 */
bool mpcheck_plausible(const void *data, size_t len);

#endif /* FT_COMBINE_MPCHECK_H */
