/*
 * vec - the one growable array of forktrace (vec_): an array the caller
 * owns, as a pointer and a capacity in elements, grown by doubling so that
 * appends stay amortised O(1). Used by combine/ and the collector.
 */
#ifndef FT_COMBINE_VEC_H
#define FT_COMBINE_VEC_H

#include <stddef.h>

/*
 * Makes room for need elements of elem bytes in *arrp (a pointer to the
 * caller's array pointer, NULL when nothing is allocated yet), whose
 * capacity is *cap elements. When need > *cap, the new capacity is *cap
 * (first when *cap is 0) doubled until need fits, and the array is moved
 * with realloc: pointers into it are then stale. Returns 0, or -ENOMEM
 * (the array and *cap unchanged) when memory runs out or the size would
 * overflow. The array stays the caller's (free() it). The check is
 * inline, so that an append that fits (nearly all of them, on per-event
 * paths) costs no call.
 */
int vec_grow_slow(void *arrp, size_t *cap, size_t need, size_t elem, size_t first);

static inline int vec_grow(void *arrp, size_t *cap, size_t need, size_t elem, size_t first)
{
	return need <= *cap ? 0 : vec_grow_slow(arrp, cap, need, elem, first);
}

#endif
