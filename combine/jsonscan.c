/*
 * jsonscan.c - the bounded args scanner (jsonscan.h). Recursive descent,
 * with the depth capped at JSCAN_MAX_DEPTH so hostile nesting costs
 * nothing but an error.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "jsonscan.h"

static const char *skip_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Four hex digits at p (p + 4 <= end checked by the caller). */
static int hex4(const char *p)
{
	int v = 0;

	for (int i = 0; i < 4; i++) {
		int h = hexval(p[i]);

		if (h < 0)
			return -1;
		v = v * 16 + h;
	}
	return v;
}

/* Past the string starting at p (on the opening quote), or NULL. */
static const char *skip_string(const char *p, const char *end)
{
	p++;
	while (p < end) {
		unsigned char c = (unsigned char)*p;

		if (c == '"')
			return p + 1;
		if (c < 0x20)
			return NULL;
		if (c == '\\') {
			if (p + 1 >= end)
				return NULL;
			if (p[1] == 'u') {
				if (end - p < 6 || hex4(p + 2) < 0)
					return NULL;
				p += 6;
				continue;
			}
			if (strchr("\"\\/bfnrt", p[1]) == NULL || p[1] == '\0')
				return NULL;
			p += 2;
			continue;
		}
		p++;
	}
	return NULL;
}

static const char *skip_digits(const char *p, const char *end)
{
	while (p < end && *p >= '0' && *p <= '9')
		p++;
	return p;
}

/* Past the number at p, or NULL (JSON's grammar: -?int frac? exp?). */
static const char *skip_number(const char *p, const char *end)
{
	const char *q;

	if (p < end && *p == '-')
		p++;
	if (p >= end)
		return NULL;
	if (*p == '0') {
		p++;
	} else {
		q = skip_digits(p, end);
		if (q == p)
			return NULL;
		p = q;
	}
	if (p < end && *p == '.') {
		q = skip_digits(p + 1, end);
		if (q == p + 1)
			return NULL;
		p = q;
	}
	if (p < end && (*p == 'e' || *p == 'E')) {
		p++;
		if (p < end && (*p == '+' || *p == '-'))
			p++;
		q = skip_digits(p, end);
		if (q == p)
			return NULL;
		p = q;
	}
	return p;
}

static const char *skip_value(const char *p, const char *end, unsigned depth, enum jscan_type *type);

/* Past the object or array at p (on its bracket), or NULL. */
static const char *skip_container(const char *p, const char *end, unsigned depth)
{
	char close = *p == '{' ? '}' : ']';
	bool object = *p == '{';
	enum jscan_type t;

	if (depth >= JSCAN_MAX_DEPTH)
		return NULL;
	p = skip_ws(p + 1, end);
	if (p < end && *p == close)
		return p + 1;
	for (;;) {
		if (object) {
			if (p >= end || *p != '"')
				return NULL;
			p = skip_string(p, end);
			if (p == NULL)
				return NULL;
			p = skip_ws(p, end);
			if (p >= end || *p != ':')
				return NULL;
			p = skip_ws(p + 1, end);
		}
		p = skip_value(p, end, depth + 1, &t);
		if (p == NULL)
			return NULL;
		p = skip_ws(p, end);
		if (p >= end)
			return NULL;
		if (*p == close)
			return p + 1;
		if (*p != ',')
			return NULL;
		p = skip_ws(p + 1, end);
	}
}

static const char *skip_literal(const char *p, const char *end, const char *lit)
{
	size_t n = strlen(lit);

	if ((size_t)(end - p) < n || memcmp(p, lit, n) != 0)
		return NULL;
	return p + n;
}

/* Past the value at p (no leading blanks), or NULL; *type gets its type. */
static const char *skip_value(const char *p, const char *end, unsigned depth, enum jscan_type *type)
{
	*type = JSCAN_NONE;
	if (p >= end)
		return NULL;
	switch (*p) {
	case '{':
		*type = JSCAN_OBJECT;
		return skip_container(p, end, depth);
	case '[':
		*type = JSCAN_ARRAY;
		return skip_container(p, end, depth);
	case '"':
		*type = JSCAN_STRING;
		return skip_string(p, end);
	case 't':
		*type = JSCAN_TRUE;
		return skip_literal(p, end, "true");
	case 'f':
		*type = JSCAN_FALSE;
		return skip_literal(p, end, "false");
	case 'n':
		*type = JSCAN_NULL;
		return skip_literal(p, end, "null");
	default:
		*type = JSCAN_NUMBER;
		return skip_number(p, end);
	}
}

int jscan_parse(jsonw_sv text, jscan_val *out)
{
	const char *end = text.p + text.n, *p, *q;

	out->type = JSCAN_NONE;
	out->text = (jsonw_sv){NULL, 0};
	if (text.p == NULL)
		return -EINVAL;
	p = skip_ws(text.p, end);
	q = skip_value(p, end, 0, &out->type);
	if (q == NULL || skip_ws(q, end) != end) {
		out->type = JSCAN_NONE;
		return -EINVAL;
	}
	out->text = (jsonw_sv){p, (size_t)(q - p)};
	return 0;
}

void jscan_iter_init(jscan_iter *it, const jscan_val *v)
{
	memset(it, 0, sizeof(*it));
	it->first = true;
	if (v->type != JSCAN_OBJECT && v->type != JSCAN_ARRAY) {
		it->done = true;
		it->err = -EINVAL;
		return;
	}
	/* Inside the brackets: the value was validated when it was found. */
	it->p = v->text.p + 1;
	it->end = v->text.p + v->text.n - 1;
}

/* The separator before the next item; false at the end or on error. */
static bool iter_step(jscan_iter *it)
{
	if (it->done)
		return false;
	it->p = skip_ws(it->p, it->end);
	if (!it->first) {
		if (it->p >= it->end) {
			it->done = true;
			return false;
		}
		if (*it->p != ',')
			goto bad;
		it->p = skip_ws(it->p + 1, it->end);
	} else if (it->p >= it->end) {
		it->done = true;
		return false;
	}
	it->first = false;
	return true;
bad:
	it->done = true;
	it->err = -EINVAL;
	return false;
}

static bool iter_value(jscan_iter *it, jscan_val *val)
{
	const char *q = skip_value(it->p, it->end, 1, &val->type);

	if (q == NULL) {
		it->done = true;
		it->err = -EINVAL;
		val->type = JSCAN_NONE;
		return false;
	}
	val->text = (jsonw_sv){it->p, (size_t)(q - it->p)};
	it->p = q;
	return true;
}

bool jscan_next_member(jscan_iter *it, jscan_val *key, jscan_val *val)
{
	if (!iter_step(it))
		return false;
	if (*it->p != '"' || !iter_value(it, key))
		goto bad;
	it->p = skip_ws(it->p, it->end);
	if (it->p >= it->end || *it->p != ':')
		goto bad;
	it->p = skip_ws(it->p + 1, it->end);
	return iter_value(it, val);
bad:
	it->done = true;
	it->err = -EINVAL;
	return false;
}

bool jscan_next_elem(jscan_iter *it, jscan_val *val)
{
	if (!iter_step(it))
		return false;
	return iter_value(it, val);
}

bool jscan_get(const jscan_val *obj, const char *key, jscan_val *out)
{
	jscan_iter it;
	jscan_val k, v;

	if (obj->type != JSCAN_OBJECT)
		return false;
	jscan_iter_init(&it, obj);
	while (jscan_next_member(&it, &k, &v)) {
		if (jscan_str_eq(&k, key)) {
			*out = v;
			return true;
		}
	}
	return false;
}

int jscan_i64(const jscan_val *v, int64_t *out)
{
	const char *p = v->text.p, *end = v->text.p + v->text.n;
	bool neg = false;
	uint64_t acc = 0, limit;

	if (v->type != JSCAN_NUMBER || v->text.n == 0)
		return -EINVAL;
	if (*p == '-') {
		neg = true;
		p++;
	}
	limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	if (p >= end)
		return -EINVAL;
	for (; p < end; p++) {
		unsigned d;

		if (*p < '0' || *p > '9')
			return -EINVAL;
		d = (unsigned)(*p - '0');
		if (acc > (limit - d) / 10)
			return -ERANGE;
		acc = acc * 10 + d;
	}
	*out = neg ? (int64_t)(0 - acc) : (int64_t)acc;
	return 0;
}

/* Appends code point cp as UTF-8 to out (room for 4 bytes). */
static size_t put_utf8(char *out, uint32_t cp)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/*
 * The one unescaping loop: calls emit for each piece of the unescaped
 * text. A lone surrogate becomes U+FFFD, as a JSON parser in a browser
 * would show it. Returns false if v is no valid string.
 */
typedef void (*piece_fn)(void *ctx, const char *p, size_t n);

static bool unescape(const jscan_val *v, piece_fn emit, void *ctx)
{
	const char *p, *end;

	if (v->type != JSCAN_STRING || v->text.n < 2)
		return false;
	p = v->text.p + 1;
	end = v->text.p + v->text.n - 1;
	while (p < end) {
		const char *q = p;
		char buf[8];
		uint32_t cp;
		int h;

		while (q < end && *q != '\\')
			q++;
		if (q > p)
			emit(ctx, p, (size_t)(q - p));
		if (q >= end)
			break;
		if (q + 1 >= end)
			return false;
		switch (q[1]) {
		case '"':
		case '\\':
		case '/':
			emit(ctx, q + 1, 1);
			p = q + 2;
			continue;
		case 'b':
			emit(ctx, "\b", 1);
			p = q + 2;
			continue;
		case 'f':
			emit(ctx, "\f", 1);
			p = q + 2;
			continue;
		case 'n':
			emit(ctx, "\n", 1);
			p = q + 2;
			continue;
		case 'r':
			emit(ctx, "\r", 1);
			p = q + 2;
			continue;
		case 't':
			emit(ctx, "\t", 1);
			p = q + 2;
			continue;
		case 'u':
			break;
		default:
			return false;
		}
		if (end - q < 6 || (h = hex4(q + 2)) < 0)
			return false;
		cp = (uint32_t)h;
		p = q + 6;
		if (cp >= 0xd800 && cp < 0xdc00 && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
			int lo = hex4(p + 2);

			if (lo >= 0xdc00 && lo < 0xe000) {
				cp = 0x10000 + ((cp - 0xd800) << 10) + ((uint32_t)lo - 0xdc00);
				p += 6;
			}
		}
		if (cp >= 0xd800 && cp < 0xe000)
			cp = 0xfffd;
		emit(ctx, buf, put_utf8(buf, cp));
	}
	return true;
}

typedef struct buf_ctx {
	char *buf;
	size_t size, len;
	bool full;
} buf_ctx;

/* Copies into a fixed buffer, never cutting a UTF-8 sequence. */
static void buf_piece(void *ctx, const char *p, size_t n)
{
	buf_ctx *b = ctx;

	if (!b->full && b->size > 0 && b->len + n < b->size) {
		memcpy(b->buf + b->len, p, n);
	} else if (!b->full && b->size > 0) {
		size_t room = b->size - 1 - b->len, k = room;

		/* Back up to a character start within the room. */
		while (k > 0 && k < n && ((unsigned char)p[k] & 0xc0) == 0x80)
			k--;
		memcpy(b->buf + b->len, p, k);
		b->buf[b->len + k] = '\0';
		b->full = true;
	}
	b->len += n;
}

size_t jscan_str(const jscan_val *v, char *buf, size_t size)
{
	buf_ctx b = {.buf = buf, .size = size};

	if (!unescape(v, buf_piece, &b))
		return (size_t)-1;
	if (!b.full && size > 0)
		buf[b.len] = '\0';
	return b.len;
}

static void count_piece(void *ctx, const char *p, size_t n)
{
	(void)p;
	*(size_t *)ctx += n;
}

char *jscan_strdup(const jscan_val *v, size_t *len)
{
	size_t n = 0;
	char *s;

	if (!unescape(v, count_piece, &n))
		return NULL;
	s = malloc(n + 1);
	if (s == NULL)
		return NULL;
	jscan_str(v, s, n + 1);
	if (len != NULL)
		*len = n;
	return s;
}

typedef struct eq_ctx {
	const char *s;
	size_t pos, n;
	bool differ;
} eq_ctx;

static void eq_piece(void *ctx, const char *p, size_t n)
{
	eq_ctx *e = ctx;

	if (e->differ || e->pos + n > e->n || memcmp(e->s + e->pos, p, n) != 0)
		e->differ = true;
	else
		e->pos += n;
}

bool jscan_str_eq(const jscan_val *v, const char *s)
{
	eq_ctx e = {.s = s, .n = strlen(s)};

	/* Fast path: no escapes, compare the slice. */
	if (v->type == JSCAN_STRING && v->text.n >= 2 &&
	    memchr(v->text.p, '\\', v->text.n) == NULL)
		return v->text.n - 2 == e.n && memcmp(v->text.p + 1, s, e.n) == 0;
	if (!unescape(v, eq_piece, &e))
		return false;
	return !e.differ && e.pos == e.n;
}
