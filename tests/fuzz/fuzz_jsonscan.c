/*
 * libFuzzer target: the args scanner of the HDF5 sink (combine/jsonscan.c)
 * on arbitrary bytes. Walks every member and element it accepts, reads
 * numbers and strings, and checks that what it says is a string unescapes
 * to the length it announced. The input is copied to a buffer of exactly
 * its size, so ASan catches any read past the slice.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jsonscan.h"

static void walk(const jscan_val *v, int depth)
{
	jscan_iter it;
	jscan_val k, e;
	int64_t i;
	char buf[8];
	size_t n;
	char *s;

	if (depth > JSCAN_MAX_DEPTH + 2)
		abort();
	switch (v->type) {
	case JSCAN_OBJECT:
		jscan_iter_init(&it, v);
		while (jscan_next_member(&it, &k, &e)) {
			if (k.type != JSCAN_STRING)
				abort();
			walk(&k, depth + 1);
			walk(&e, depth + 1);
		}
		jscan_get(v, "name", &e);
		break;
	case JSCAN_ARRAY:
		jscan_iter_init(&it, v);
		while (jscan_next_elem(&it, &e))
			walk(&e, depth + 1);
		break;
	case JSCAN_STRING:
		s = jscan_strdup(v, &n);
		if (s == NULL || strlen(s) > n)
			abort();
		if (jscan_str(v, buf, sizeof(buf)) != n || strlen(buf) >= sizeof(buf))
			abort();
		jscan_str_eq(v, s);
		free(s);
		break;
	case JSCAN_NUMBER:
		jscan_i64(v, &i);
		break;
	default:
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy = malloc(size ? size : 1);
	jscan_val v;

	if (copy == NULL)
		return 0;
	memcpy(copy, data, size);
	if (jscan_parse((jsonw_sv){copy, size}, &v) == 0)
		walk(&v, 0);
	free(copy);
	return 0;
}
