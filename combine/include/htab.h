/*
 * htab - the one hash table of forktrace (htab_): open addressing with
 * linear probing, from a 64-bit key to a nonzero 64-bit value, grown by
 * doubling whenever it would be more than half full. Used by combine/ and
 * the collector.
 *
 * Two kinds of keys:
 *  - A key that is itself a number (a pid, an address) is the key: one
 *    value per key, found with htab_get and replaced with htab_set.
 *  - A key that is a string (or any bytes) is a hash of it made by the
 *    caller (htab_hash_bytes, or the caller's own), and the value points
 *    at the caller's entry (an index + 1 into the caller's array, or a
 *    pointer). Two strings may share a hash: the caller walks every value
 *    under the hash with htab_start and htab_next, compares the strings in
 *    its entries, and adds a new one with htab_add.
 *
 * A value of 0 marks a free slot, so a value is never 0 (store index + 1).
 * A zeroed htab is an empty table; nothing is allocated before the first
 * htab_add or htab_set.
 */
#ifndef FT_COMBINE_HTAB_H
#define FT_COMBINE_HTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct htab_slot {
	uint64_t key;
	uint64_t val; /* 0: free */
} htab_slot;

typedef struct htab {
	htab_slot *slots; /* owned: cap slots */
	size_t cap;       /* 0, or a power of two */
	size_t n;         /* slots in use */
	size_t first;     /* the capacity of the first allocation; 0: 16 */
	unsigned shift;   /* 64 - log2(cap): the slot of a key */
} htab;

/* The slot a key's probe starts at: Fibonacci hashing spreads nearby keys
 * (pids, addresses) over the table by its top bits. */
static inline size_t htab_start(const htab *t, uint64_t key)
{
	return t->cap != 0 ? (size_t)((key * 0x9e3779b97f4a7c15ull) >> t->shift) : 0;
}

/*
 * The next value stored under key from slot *pos on (start the walk at
 * htab_start), or 0 when there is none left; *pos moves past it. Borrows
 * t: the walk ends with any change of the table.
 */
static inline uint64_t htab_next(const htab *t, uint64_t key, size_t *pos)
{
	if (t->cap == 0)
		return 0;
	for (;;) {
		const htab_slot *s = &t->slots[*pos];

		*pos = (*pos + 1) & (t->cap - 1);
		if (s->val == 0)
			return 0;
		if (s->key == key)
			return s->val;
	}
}

/* The (first) value stored under key, or 0. The walk of htab_next with
 * its position kept in a register: lookups by number are per-event work
 * (the merge's pid map). */
static inline uint64_t htab_get(const htab *t, uint64_t key)
{
	size_t mask = t->cap - 1;
	const htab_slot *s;

	if (t->cap == 0)
		return 0;
	for (size_t i = (size_t)((key * 0x9e3779b97f4a7c15ull) >> t->shift);; i = (i + 1) & mask) {
		s = &t->slots[i];
		if (s->key == key || s->val == 0)
			return s->val;
	}
}

/*
 * Adds val (nonzero) under key, beside any value already there (see the
 * string keys above). Returns 0, or -ENOMEM (the table unchanged).
 */
int htab_add(htab *t, uint64_t key, uint64_t val);

/*
 * Makes room for one more entry, so that the next htab_add or htab_set
 * cannot fail: for a caller that must not be left half done. Returns 0,
 * or -ENOMEM (the table unchanged).
 */
int htab_reserve(htab *t);

/*
 * Replaces the value stored under key with val (nonzero), or adds it when
 * there is none. Returns 0, or -ENOMEM (the table unchanged).
 */
int htab_set(htab *t, uint64_t key, uint64_t val);

/*
 * Walks every entry in slot order: starts with *pos = 0, returns false at
 * the end. key or val may be NULL. The order says nothing about the order
 * of insertion.
 */
bool htab_each(const htab *t, size_t *pos, uint64_t *key, uint64_t *val);

/* Empties the table and keeps its memory for the next entries. */
void htab_clear(htab *t);

/* Frees the slots (not what the values point at); t is then an empty
 * table with the same first capacity. NULL is a no-op. */
void htab_free(htab *t);

/* FNV-1a over the n bytes at p: a hash for string keys. */
uint64_t htab_hash_bytes(const void *p, size_t n);

#endif
