/*
 * A small strict JSON + UTF-8 validator for the fuzz targets' outputs,
 * written independently of combine/io/jsonr.c so that it does not share its
 * bugs. Header-only: each target is one translation unit.
 */
#ifndef FT_FUZZ_JSONCHECK_H
#define FT_FUZZ_JSONCHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

typedef struct val {
	const unsigned char *p, *end;
} val;

static void ws(val *v)
{
	while (v->p < v->end && (*v->p == ' ' || *v->p == '\n' || *v->p == '\r' || *v->p == '\t'))
		v->p++;
}

static bool utf8_seq(val *v)
{
	unsigned char c = *v->p;
	int n;
	unsigned char lo = 0x80, hi = 0xbf;

	if (c >= 0xc2 && c <= 0xdf)
		n = 1;
	else if (c >= 0xe0 && c <= 0xef) {
		n = 2;
		if (c == 0xe0)
			lo = 0xa0;
		if (c == 0xed)
			hi = 0x9f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 3;
		if (c == 0xf0)
			lo = 0x90;
		if (c == 0xf4)
			hi = 0x8f;
	} else
		return false;
	if (v->end - v->p <= n || v->p[1] < lo || v->p[1] > hi)
		return false;
	for (int i = 2; i <= n; i++)
		if (v->p[i] < 0x80 || v->p[i] > 0xbf)
			return false;
	v->p += n + 1;
	return true;
}

static bool string(val *v)
{
	v->p++;
	while (v->p < v->end) {
		unsigned char c = *v->p;

		if (c == '"') {
			v->p++;
			return true;
		}
		if (c < 0x20)
			return false;
		if (c == '\\') {
			if (v->end - v->p < 2)
				return false;
			c = v->p[1];
			if (c == 'u') {
				if (v->end - v->p < 6)
					return false;
				for (int i = 2; i < 6; i++)
					if (!strchr("0123456789abcdefABCDEF", v->p[i]) || !v->p[i])
						return false;
				v->p += 6;
			} else if (c && strchr("\"\\/bfnrt", c)) {
				v->p += 2;
			} else {
				return false;
			}
			continue;
		}
		if (c >= 0x80) {
			if (!utf8_seq(v))
				return false;
			continue;
		}
		v->p++;
	}
	return false;
}

static bool digits(val *v)
{
	const unsigned char *s = v->p;

	while (v->p < v->end && *v->p >= '0' && *v->p <= '9')
		v->p++;
	return v->p > s;
}

static bool number(val *v)
{
	if (*v->p == '-')
		v->p++;
	if (v->p < v->end && *v->p == '0')
		v->p++;
	else if (!digits(v))
		return false;
	if (v->p < v->end && *v->p == '.') {
		v->p++;
		if (!digits(v))
			return false;
	}
	if (v->p < v->end && (*v->p == 'e' || *v->p == 'E')) {
		v->p++;
		if (v->p < v->end && (*v->p == '+' || *v->p == '-'))
			v->p++;
		if (!digits(v))
			return false;
	}
	return true;
}

/* The next code point of a string literal's content at *p (after its
 * opening quote, valid as string() checked it), escapes decoded (a
 * surrogate pair joined); -1 at the closing quote. */
static long key_cp(const unsigned char **p)
{
	const unsigned char *q = *p;
	long c = 0;
	int n;

	if (*q == '"')
		return -1;
	if (*q == '\\') {
		const char *map = "\"\"\\\\//b\bf\fn\nr\rt\t";

		if (q[1] != 'u') {
			*p = q + 2;
			for (int i = 0; map[i]; i += 2)
				if (map[i] == (char)q[1])
					return (unsigned char)map[i + 1];
			return q[1];
		}
		for (int i = 2; i < 6; i++)
			c = c * 16 + (q[i] <= '9' ? q[i] - '0' : (q[i] | 0x20) - 'a' + 10);
		*p = q + 6;
		if (c >= 0xd800 && c < 0xdc00 && q[6] == '\\' && q[7] == 'u') {
			long lo = 0;

			for (int i = 8; i < 12; i++)
				lo = lo * 16 +
				     (q[i] <= '9' ? q[i] - '0' : (q[i] | 0x20) - 'a' + 10);
			if (lo >= 0xdc00 && lo < 0xe000) {
				c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
				*p = q + 12;
			}
		}
		return c;
	}
	if (*q < 0x80) {
		*p = q + 1;
		return *q;
	}
	n = *q >= 0xf0 ? 4 : *q >= 0xe0 ? 3 : 2;
	c = *q & (0x7f >> n);
	for (int i = 1; i < n; i++)
		c = (c << 6) | (q[i] & 0x3f);
	*p = q + n;
	return c;
}

/* Whether two keys (after their opening quotes) are the same string. */
static bool same_key(const unsigned char *a, const unsigned char *b)
{
	for (;;) {
		long x = key_cp(&a), y = key_cp(&b);

		if (x != y)
			return false;
		if (x < 0)
			return true;
	}
}

/* Every object has each key once (compared decoded, as a JSON parser
 * would): forktrace never writes an object with a key twice. Keys past
 * the first JSONCHECK_KEYS of an object are compared with those only. */
#define JSONCHECK_KEYS 64

static bool value(val *v, int depth)
{
	ws(v);
	if (v->p >= v->end || depth > 200)
		return false;
	switch (*v->p) {
	case '"':
		return string(v);
	case '{':
	case '[': {
		char close = *v->p == '{' ? '}' : ']';
		bool obj = close == '}';
		const unsigned char *keys[JSONCHECK_KEYS], *key;
		size_t nkeys = 0;

		v->p++;
		ws(v);
		if (v->p < v->end && *v->p == close) {
			v->p++;
			return true;
		}
		for (;;) {
			if (obj) {
				ws(v);
				if (v->p >= v->end || *v->p != '"')
					return false;
				key = v->p + 1;
				if (!string(v))
					return false;
				for (size_t i = 0; i < nkeys; i++)
					if (same_key(keys[i], key))
						return false; /* a key twice */
				if (nkeys < JSONCHECK_KEYS)
					keys[nkeys++] = key;
				ws(v);
				if (v->p >= v->end || *v->p != ':')
					return false;
				v->p++;
			}
			if (!value(v, depth + 1))
				return false;
			ws(v);
			if (v->p >= v->end)
				return false;
			if (*v->p == ',') {
				v->p++;
				continue;
			}
			if (*v->p == close) {
				v->p++;
				return true;
			}
			return false;
		}
	}
	case 't':
		if (v->end - v->p >= 4 && !memcmp(v->p, "true", 4)) {
			v->p += 4;
			return true;
		}
		return false;
	case 'f':
		if (v->end - v->p >= 5 && !memcmp(v->p, "false", 5)) {
			v->p += 5;
			return true;
		}
		return false;
	case 'n':
		if (v->end - v->p >= 4 && !memcmp(v->p, "null", 4)) {
			v->p += 4;
			return true;
		}
		return false;
	default:
		return number(v);
	}
}

/* Is buf[0..n) one valid JSON value (surrounding whitespace allowed)? */
static bool json_check(const unsigned char *buf, size_t n)
{
	val v = {buf, buf + n};

	if (!value(&v, 0))
		return false;
	ws(&v);
	return v.p == v.end;
}

#endif /* FT_FUZZ_JSONCHECK_H */
