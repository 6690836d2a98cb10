/*
 * jsonscan - a small, bounded scanner for the args objects of trace events
 * (the JSON text a sink_event carries in ev.args and raw): find a key, walk
 * an object's members or an array's elements, read a number, a bool or a
 * string (unescaped). It never allocates except in jscan_strdup, never
 * reads past the slice it is given, and refuses nesting deeper than
 * JSCAN_MAX_DEPTH, so it is safe on any input (fuzzed by
 * tests/fuzz/fuzz_jsonscan.c).
 *
 * It validates what it walks over (strings, numbers, literals, nesting)
 * but is not a full validator: it reports the first problem it meets.
 *
 * Internal to combine/.
 */
#ifndef FT_COMBINE_JSONSCAN_H
#define FT_COMBINE_JSONSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

#define JSCAN_MAX_DEPTH 64

enum jscan_type {
	JSCAN_NONE = 0, /* absent or invalid */
	JSCAN_OBJECT,
	JSCAN_ARRAY,
	JSCAN_STRING,
	JSCAN_NUMBER,
	JSCAN_TRUE,
	JSCAN_FALSE,
	JSCAN_NULL,
};

/* One value: its type and its whole text (quotes included for strings),
 * a slice of the scanned input. */
typedef struct jscan_val {
	enum jscan_type type;
	jsonw_sv text;
} jscan_val;

/* A walk over the members of an object or the elements of an array. */
typedef struct jscan_iter {
	const char *p, *end;
	bool first;
	bool done;
	int err; /* 0, or -EINVAL once the text turned out malformed */
} jscan_iter;

/* The first value of text (leading/trailing blanks allowed; anything else
 * after it is an error). Returns 0 or -EINVAL. */
int jscan_parse(jsonw_sv text, jscan_val *out);

/* Starts walking v, an object or an array (anything else: an empty walk
 * with it->err = -EINVAL). */
void jscan_iter_init(jscan_iter *it, const jscan_val *v);

/* The next member of an object: key (the string value, quotes included)
 * and value. Returns true while there is one. */
bool jscan_next_member(jscan_iter *it, jscan_val *key, jscan_val *val);

/* The next element of an array. Returns true while there is one. */
bool jscan_next_elem(jscan_iter *it, jscan_val *val);

/* The member of object obj named key (plain text, compared with the
 * unescaped key); false if obj is no object or has no such key. The
 * first match wins. */
bool jscan_get(const jscan_val *obj, const char *key, jscan_val *out);

/* A number that is an integer in int64 range (no fraction or exponent).
 * Returns 0 or -EINVAL / -ERANGE. */
int jscan_i64(const jscan_val *v, int64_t *out);

/* v is a string whose unescaped text equals s. */
bool jscan_str_eq(const jscan_val *v, const char *s);

/* The unescaped text of string v into buf (size bytes, NUL-terminated,
 * cut at a character boundary if too long). Returns the full unescaped
 * length, or (size_t)-1 if v is not a valid string. */
size_t jscan_str(const jscan_val *v, char *buf, size_t size);

/* The unescaped text of string v, malloc'd (caller owns, free()), NULL if
 * v is not a valid string or on allocation failure. *len (may be NULL)
 * gets its length. */
char *jscan_strdup(const jscan_val *v, size_t *len);

#endif /* FT_COMBINE_JSONSCAN_H */
