/* htab: the hash table (htab.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "htab.h"

#define HTAB_FIRST 16

/* Puts an entry into a free slot of a table with room for it. */
static void place(htab *t, uint64_t key, uint64_t val)
{
	size_t i = htab_start(t, key);

	while (t->slots[i].val != 0)
		i = (i + 1) & (t->cap - 1);
	t->slots[i].key = key;
	t->slots[i].val = val;
	t->n++;
}

/* The table is kept at most half full. */
int htab_reserve(htab *t)
{
	size_t ncap, old_cap = t->cap;
	htab_slot *old = t->slots;
	unsigned bits = 0;

	if ((t->n + 1) * 2 <= t->cap)
		return 0;
	ncap = old_cap != 0 ? old_cap * 2 : t->first != 0 ? t->first : HTAB_FIRST;
	if (ncap < 2 || ncap > SIZE_MAX / 2 / sizeof(*t->slots) || (ncap & (ncap - 1)) != 0)
		return -ENOMEM;
	t->slots = calloc(ncap, sizeof(*t->slots));
	if (t->slots == NULL) {
		t->slots = old;
		return -ENOMEM;
	}
	while (((size_t)1 << bits) < ncap)
		bits++;
	t->cap = ncap;
	t->shift = 64 - bits;
	t->n = 0;
	for (size_t i = 0; i < old_cap; i++)
		if (old[i].val != 0)
			place(t, old[i].key, old[i].val);
	free(old);
	return 0;
}

int htab_add(htab *t, uint64_t key, uint64_t val)
{
	int err = htab_reserve(t);

	if (err < 0)
		return err;
	place(t, key, val);
	return 0;
}

int htab_set(htab *t, uint64_t key, uint64_t val)
{
	size_t i = htab_start(t, key);

	for (; t->cap != 0 && t->slots[i].val != 0; i = (i + 1) & (t->cap - 1)) {
		if (t->slots[i].key == key) {
			t->slots[i].val = val;
			return 0;
		}
	}
	return htab_add(t, key, val);
}

bool htab_each(const htab *t, size_t *pos, uint64_t *key, uint64_t *val)
{
	for (; *pos < t->cap; (*pos)++) {
		const htab_slot *s = &t->slots[*pos];

		if (s->val == 0)
			continue;
		if (key != NULL)
			*key = s->key;
		if (val != NULL)
			*val = s->val;
		(*pos)++;
		return true;
	}
	return false;
}

void htab_clear(htab *t)
{
	if (t->n != 0)
		memset(t->slots, 0, t->cap * sizeof(*t->slots));
	t->n = 0;
}

void htab_free(htab *t)
{
	if (t == NULL)
		return;
	free(t->slots);
	t->slots = NULL;
	t->cap = 0;
	t->n = 0;
	t->shift = 0;
}

uint64_t htab_hash_bytes(const void *p, size_t n)
{
	const unsigned char *s = p;
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}
