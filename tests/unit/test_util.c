/*
 * Unit tests of combine/util/: the growable array (vec.h) and the hash
 * table (htab.h) that every part of forktrace shares.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "htab.h"
#include "vec.h"

/* Capacities double from the first one until the need fits; the contents
 * move along; a need that fits allocates nothing. */
static void test_vec_grow(void)
{
	int *v = NULL;
	size_t cap = 0;

	CHECK_INT(vec_grow(&v, &cap, 0, sizeof(*v), 8), ==, 0);
	CHECK(v == NULL);
	CHECK_UINT(cap, ==, 0);
	CHECK_INT(vec_grow(&v, &cap, 1, sizeof(*v), 8), ==, 0);
	CHECK_UINT(cap, ==, 8);
	MUST(v != NULL);
	for (int i = 0; i < 8; i++)
		v[i] = i;
	CHECK_INT(vec_grow(&v, &cap, 8, sizeof(*v), 8), ==, 0);
	CHECK_UINT(cap, ==, 8);
	CHECK_INT(vec_grow(&v, &cap, 9, sizeof(*v), 8), ==, 0);
	CHECK_UINT(cap, ==, 16);
	CHECK_INT(vec_grow(&v, &cap, 100, sizeof(*v), 8), ==, 0);
	CHECK_UINT(cap, ==, 128);
	for (int i = 0; i < 8; i++)
		CHECK_INT(v[i], ==, i);
	free(v);

	/* The first capacity is the caller's. */
	char *b = NULL;
	size_t bcap = 0;

	CHECK_INT(vec_grow(&b, &bcap, 5, 1, 4096), ==, 0);
	CHECK_UINT(bcap, ==, 4096);
	CHECK_INT(vec_grow(&b, &bcap, 5000, 1, 4096), ==, 0);
	CHECK_UINT(bcap, ==, 8192);
	free(b);
}

/* A size that cannot be allocated or would overflow fails with -ENOMEM
 * and leaves the array as it was. */
static void test_vec_overflow(void)
{
	uint64_t *v = NULL;
	size_t cap = 0;

	MUST(vec_grow(&v, &cap, 3, sizeof(*v), 4) == 0);
	v[0] = 42;
	CHECK_INT(vec_grow(&v, &cap, SIZE_MAX, sizeof(*v), 4), ==, -ENOMEM);
	CHECK_INT(vec_grow(&v, &cap, SIZE_MAX / 4, sizeof(*v), 4), ==, -ENOMEM);
	CHECK_INT(vec_grow(&v, &cap, (SIZE_MAX >> 1) + 2, 1, 4), ==, -ENOMEM);
	CHECK_UINT(cap, ==, 4);
	CHECK_UINT(v[0], ==, 42);
	free(v);
}

/* Numeric keys: one value per key, replaced by htab_set, every key found
 * again after the table grew many times, keys 0 and UINT64_MAX included. */
static void test_htab_numbers(void)
{
	htab t = {0};
	enum { N = 100000 };

	CHECK_UINT(htab_get(&t, 7), ==, 0);
	for (uint64_t k = 0; k < N; k++)
		MUST(htab_set(&t, k * 4096, k + 1) == 0);
	MUST(htab_set(&t, UINT64_MAX, 5) == 0);
	CHECK_UINT(t.n, ==, N + 1);
	CHECK_UINT(t.cap, >=, 2 * t.n);
	for (uint64_t k = 0; k < N; k++)
		if (htab_get(&t, k * 4096) != k + 1)
			check_fail_at(__FILE__, __LINE__, "key %llu: %llu", (unsigned long long)k,
				      (unsigned long long)htab_get(&t, k * 4096));
	CHECK_UINT(htab_get(&t, UINT64_MAX), ==, 5);
	CHECK_UINT(htab_get(&t, 1), ==, 0);
	MUST(htab_set(&t, 4096, 99) == 0);
	CHECK_UINT(htab_get(&t, 4096), ==, 99);
	CHECK_UINT(t.n, ==, N + 1);

	/* Every entry once, by htab_each. */
	size_t pos = 0, seen = 0;
	uint64_t key, val, sum = 0;

	while (htab_each(&t, &pos, &key, &val)) {
		seen++;
		sum += val;
	}
	CHECK_UINT(seen, ==, N + 1);
	CHECK_UINT(sum, ==, (uint64_t)N * (N + 1) / 2 - 2 + 99 + 5);

	/* Cleared, it keeps its memory and finds nothing. */
	size_t cap = t.cap;

	htab_clear(&t);
	CHECK_UINT(t.n, ==, 0);
	CHECK_UINT(t.cap, ==, cap);
	CHECK_UINT(htab_get(&t, 4096), ==, 0);
	MUST(htab_set(&t, 4096, 1) == 0);
	CHECK_UINT(htab_get(&t, 4096), ==, 1);
	htab_free(&t);
	CHECK(t.slots == NULL);
	CHECK_UINT(htab_get(&t, 4096), ==, 0);
	htab_free(NULL);
}

/* String keys: several values under one hash are all walked, so the caller
 * tells strings with the same hash apart. */
static void test_htab_strings(void)
{
	static const char *const words[] = {"fork", "exec", "wait", "exit", "spawn"};
	htab t = {.first = 4};

	CHECK_UINT(htab_hash_bytes("fork", 4), !=, htab_hash_bytes("exec", 4));
	CHECK_UINT(htab_hash_bytes("", 0), ==, 0xcbf29ce484222325ULL);
	for (size_t i = 0; i < 5; i++)
		MUST(htab_add(&t, 42, i + 1) == 0); /* one hash for all */
	CHECK_UINT(t.cap, ==, 16);
	for (size_t i = 0; i < 5; i++) {
		size_t pos = htab_start(&t, 42);
		uint64_t v, found = 0;

		while ((v = htab_next(&t, 42, &pos)) != 0)
			if (strcmp(words[v - 1], words[i]) == 0)
				found = v;
		CHECK_UINT(found, ==, i + 1);
	}
	size_t pos = htab_start(&t, 42), n = 0;

	while (htab_next(&t, 42, &pos) != 0)
		n++;
	CHECK_UINT(n, ==, 5);
	htab_free(&t);
}

/* htab_reserve makes the room the next add needs: that add moves nothing,
 * so a caller that reserved first cannot fail half way. */
static void test_htab_reserve(void)
{
	htab t = {.first = 4};
	htab_slot *slots;

	MUST(htab_add(&t, 1, 1) == 0);
	MUST(htab_add(&t, 2, 2) == 0);
	CHECK_UINT(t.cap, ==, 4);
	MUST(htab_reserve(&t) == 0); /* a third entry would fill more than half */
	CHECK_UINT(t.cap, ==, 8);
	slots = t.slots;
	MUST(htab_add(&t, 3, 3) == 0);
	CHECK(t.slots == slots);
	MUST(htab_reserve(&t) == 0); /* room already */
	CHECK(t.slots == slots);
	CHECK_UINT(htab_get(&t, 1) + htab_get(&t, 2) + htab_get(&t, 3), ==, 6);
	htab_free(&t);
}

int main(void)
{
	test_vec_grow();
	test_vec_overflow();
	test_htab_numbers();
	test_htab_strings();
	test_htab_reserve();
	return check_done("unit.util");
}
