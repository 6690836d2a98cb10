/*
 * jsonr.c - the JSON scanner of the trace readers (see jsonr.h for why it
 * is hand-written and the buffer contract).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "jsonr.h"
#include "ostream.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define JSONR_FIRST_BYTE(m) ((unsigned)__builtin_clzll(m) >> 3)
#else
#define JSONR_FIRST_BYTE(m) ((unsigned)__builtin_ctzll(m) >> 3)
#endif

#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

/*
 * The bytes of a word that end a run of plain string content: '"', '\\',
 * controls (< 0x20) and non-ASCII (>= 0x80, checked separately). The
 * lowest flagged byte is exact (the classic has-zero-byte trick can only
 * flag bytes above a real hit falsely), which is all the scan uses.
 */
static inline uint64_t str_special(uint64_t w)
{
	uint64_t q = w ^ (ONES * '"');
	uint64_t b = w ^ (ONES * '\\');

	return ((q - ONES) & ~q) | ((b - ONES) & ~b) | ((w - ONES * 0x20) & ~w) | w;
}

static inline bool byte_special(unsigned char c)
{
	return c == '"' || c == '\\' || c < 0x20 || c >= 0x80;
}

static inline bool is_ws(unsigned char c)
{
	return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static inline bool is_digit(unsigned char c)
{
	return (unsigned)(c - '0') < 10u;
}

static inline int hexval(unsigned char c)
{
	if ((unsigned)(c - '0') < 10u)
		return c - '0';
	c |= 0x20;
	if ((unsigned)(c - 'a') < 6u)
		return c - 'a' + 10;
	return -1;
}

/* String flags. */
#define SF_ESC 1u
#define SF_FIX 2u

/*
 * Scans string content from p (after the opening quote) to the closing
 * quote. Returns a pointer to the closing quote, or NULL with *st set to
 * JSONR_MORE (the text ends first) or JSONR_ERR (*err_at: a bad escape).
 */
static inline __attribute__((always_inline)) const char *str_scan(const char *p, const char *end, unsigned *flags, int *st,
				   const char **err_at)
{
	for (;;) {
		uint64_t w, m;
		unsigned char c;

		/* The sentinel (end[0] == 0) is special: no bounds check. */
		for (;;) {
			memcpy(&w, p, 8);
			m = str_special(w) & HIGHS;
			if (m != 0)
				break;
			p += 8;
		}
		p += JSONR_FIRST_BYTE(m);
		c = (unsigned char)*p;
		if (c == '"') {
			if (p >= end)
				goto more;
			return p;
		}
		if (p >= end)
			goto more;
		if (c == '\\') {
			unsigned char e = (unsigned char)p[1];

			*flags |= SF_ESC;
			if (p + 1 >= end)
				goto more;
			if (e == 'u') {
				for (int i = 2; i < 6; i++) {
					if (p + i >= end)
						goto more;
					if (hexval((unsigned char)p[i]) < 0) {
						*err_at = p + i;
						*st = JSONR_ERR;
						return NULL;
					}
				}
				p += 6;
				continue;
			}
			if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' ||
			    e == 'r' || e == 't') {
				p += 2;
				continue;
			}
			*err_at = p + 1;
			*st = JSONR_ERR;
			return NULL;
		}
		if (c < 0x80) {
			/* A raw control character: not valid JSON, repaired by
			 * jsonr_sanitize. */
			*flags |= SF_FIX;
			p++;
			continue;
		}
		{
			size_t n = ostream_utf8_len(p, (size_t)(end - p));

			if (n == 0) {
				/* A sequence cut by the end of the buffer. */
				if (end - p < 4)
					goto more;
				*flags |= SF_FIX;
				p++;
			} else {
				p += n;
			}
		}
	}
more:
	*st = JSONR_MORE;
	return NULL;
}

/* Scans a number; returns the byte after it, or NULL (error at *err_at). */
static inline __attribute__((always_inline)) const char *num_scan(const char *p, const char **err_at)
{
	if (*p == '-')
		p++;
	if (*p == '0') {
		p++;
	} else if (is_digit((unsigned char)*p)) {
		while (is_digit((unsigned char)*p))
			p++;
	} else {
		*err_at = p;
		return NULL;
	}
	if (*p == '.') {
		p++;
		if (!is_digit((unsigned char)*p)) {
			*err_at = p;
			return NULL;
		}
		while (is_digit((unsigned char)*p))
			p++;
	}
	if ((*p | 0x20) == 'e') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!is_digit((unsigned char)*p)) {
			*err_at = p;
			return NULL;
		}
		while (is_digit((unsigned char)*p))
			p++;
	}
	return p;
}

/* Which interpreted key the key text k[0..n) is, or -1. */
static inline int key_id(const char *k, size_t n)
{
	switch (n) {
	case 1:
		return k[0] == 's' ? JSONR_K_S : -1;
	case 2:
		if (k[0] == 'p' && k[1] == 'h')
			return JSONR_K_PH;
		if (k[0] == 't' && k[1] == 's')
			return JSONR_K_TS;
		if (k[0] == 'i' && k[1] == 'd')
			return JSONR_K_ID;
		if (k[0] == 'b' && k[1] == 'p')
			return JSONR_K_BP;
		return -1;
	case 3:
		if (!memcmp(k, "pid", 3))
			return JSONR_K_PID;
		if (!memcmp(k, "tid", 3))
			return JSONR_K_TID;
		if (!memcmp(k, "cat", 3))
			return JSONR_K_CAT;
		if (!memcmp(k, "dur", 3))
			return JSONR_K_DUR;
		return -1;
	case 4:
		if (!memcmp(k, "name", 4))
			return JSONR_K_NAME;
		if (!memcmp(k, "args", 4))
			return JSONR_K_ARGS;
		return -1;
	default:
		return -1;
	}
}

#define SKIP_WS(p)                                                                                 \
	do {                                                                                       \
		while (is_ws((unsigned char)*(p)))                                                 \
			(p)++;                                                                     \
	} while (0)

int jsonr_value(const char *p, const char *end, const char **next, jsonr_obj *o, bool keys)
{
	char stack[JSONR_MAX_DEPTH];
	unsigned depth = 0;
	int cur = -1, st = JSONR_ERR;
	const char *vstart = NULL, *q;
	unsigned flags;

	memset(o->v, 0, sizeof(o->v));
	o->esc = 0;
	o->fix = false;
	o->err_at = NULL;
	o->expected = NULL;

value:
	SKIP_WS(p);
	switch (*p) {
	case '{':
		if (depth == JSONR_MAX_DEPTH) {
			o->expected = "at most 64 levels of nesting";
			goto fail;
		}
		stack[depth++] = '{';
		p++;
		SKIP_WS(p);
		if (*p == '}') {
			p++;
			depth--;
			goto after;
		}
		goto key;
	case '[':
		if (depth == JSONR_MAX_DEPTH) {
			o->expected = "at most 64 levels of nesting";
			goto fail;
		}
		stack[depth++] = '[';
		p++;
		SKIP_WS(p);
		if (*p == ']') {
			p++;
			depth--;
			goto after;
		}
		goto value;
	case '"':
		flags = 0;
		q = str_scan(p + 1, end, &flags, &st, &o->err_at);
		if (q == NULL) {
			if (st == JSONR_ERR) {
				o->expected = "a valid escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)";
				p = o->err_at;
			} else {
				p = end;
			}
			goto fail;
		}
		if (flags & SF_FIX)
			o->fix = true;
		if (cur >= 0 && depth == 1 && (flags & SF_ESC))
			o->esc |= 1u << cur;
		p = q + 1;
		goto after;
	case '-':
	case '0':
	case '1':
	case '2':
	case '3':
	case '4':
	case '5':
	case '6':
	case '7':
	case '8':
	case '9':
		q = num_scan(p, &o->err_at);
		if (q == NULL) {
			p = o->err_at;
			o->expected = "a digit";
			goto fail;
		}
		/* A number that reaches the end may go on. */
		p = q;
		if (p >= end)
			goto fail;
		goto after;
	case 't':
		if (memcmp(p, "true", 4) != 0)
			goto bad_literal;
		p += 4;
		goto after;
	case 'f':
		if (memcmp(p, "false", 5) != 0)
			goto bad_literal;
		p += 5;
		goto after;
	case 'n':
		if (memcmp(p, "null", 4) != 0)
			goto bad_literal;
		p += 4;
		goto after;
	default:
		o->expected = "a value";
		goto fail;
	}

bad_literal:
	/* "tru" at the end of the buffer may go on. */
	for (const char *l = p; l < end; l++)
		if (!(*l >= 'a' && *l <= 'z')) {
			o->expected = "a value (true, false or null)";
			goto fail;
		}
	p = end;
	goto fail;

key:
	if (*p != '"') {
		o->expected = "a key (a string)";
		goto fail;
	}
	flags = 0;
	q = str_scan(p + 1, end, &flags, &st, &o->err_at);
	if (q == NULL) {
		if (st == JSONR_ERR) {
			o->expected = "a valid escape";
			p = o->err_at;
		} else {
			p = end;
		}
		goto fail;
	}
	if (flags & SF_FIX)
		o->fix = true;
	if (depth == 1 && keys && !(flags & SF_ESC))
		cur = key_id(p + 1, (size_t)(q - p - 1));
	p = q + 1;
	SKIP_WS(p);
	if (*p != ':') {
		o->expected = "':' after a key";
		goto fail;
	}
	p++;
	SKIP_WS(p);
	if (depth == 1)
		vstart = p;
	goto value;

after:
	if (depth == 0) {
		if (p > end) {
			p = end;
			goto fail;
		}
		*next = p;
		return JSONR_OK;
	}
	if (depth == 1 && cur >= 0) {
		o->v[cur] = (jsonw_sv){vstart, (size_t)(p - vstart)};
		cur = -1;
	}
	SKIP_WS(p);
	if (stack[depth - 1] == '{') {
		if (*p == ',') {
			p++;
			SKIP_WS(p);
			goto key;
		}
		if (*p == '}') {
			p++;
			depth--;
			goto after;
		}
		o->expected = "',' or '}' in an object";
		goto fail;
	}
	if (*p == ',') {
		p++;
		goto value;
	}
	if (*p == ']') {
		p++;
		depth--;
		goto after;
	}
	o->expected = "',' or ']' in an array";
	goto fail;

fail:
	if (p >= end)
		return JSONR_MORE;
	o->err_at = p;
	return JSONR_ERR;
}

int jsonr_skip_value(jsonr_skip *s, const char *p, const char *end, const char **next)
{
	while (p < end) {
		unsigned char c = (unsigned char)*p;

		if (s->in_str) {
			if (s->esc) {
				s->esc = false;
				p++;
				continue;
			}
			if (c == '"') {
				s->in_str = false;
				p++;
				if (s->depth == 0)
					goto done;
				continue;
			}
			if (c == '\\') {
				s->esc = true;
				p++;
				continue;
			}
			/* A run of plain content. */
			while (p < end && !byte_special((unsigned char)*p))
				p++;
			if (p < end && (unsigned char)*p >= 0x80)
				p++;
			else if (p < end && (unsigned char)*p < 0x20)
				p++;
			continue;
		}
		if (s->scalar) {
			if (c == ',' || c == '}' || c == ']' || is_ws(c))
				goto done;
			p++;
			continue;
		}
		if (!s->started) {
			if (is_ws(c)) {
				p++;
				continue;
			}
			s->started = true;
		}
		switch (c) {
		case '"':
			s->in_str = true;
			break;
		case '{':
		case '[':
			s->depth++;
			break;
		case '}':
		case ']':
			if (s->depth == 0)
				return -1;
			s->depth--;
			if (s->depth == 0) {
				p++;
				goto done;
			}
			break;
		default:
			if (s->depth == 0) {
				if (!(c == '-' || is_digit(c) || (c >= 'a' && c <= 'z')))
					return -1;
				s->scalar = true;
			}
			break;
		}
		p++;
	}
	*next = p;
	return 0;
done:
	*next = p;
	return 1;
}

jsonw_sv jsonr_find_key(jsonw_sv obj, const char *key)
{
	const char *p = obj.p, *end, *q;
	size_t klen = strlen(key);
	jsonr_obj o;
	unsigned flags;
	int st;

	if (p == NULL || obj.n < 2 || *p != '{')
		return (jsonw_sv){NULL, 0};
	end = obj.p + obj.n;
	p++;
	for (;;) {
		SKIP_WS(p);
		if (p >= end || *p != '"')
			break;
		flags = 0;
		q = str_scan(p + 1, end, &flags, &st, &o.err_at);
		if (q == NULL)
			break;
		bool match = !(flags & SF_ESC) && (size_t)(q - p - 1) == klen && !memcmp(p + 1, key, klen);
		p = q + 1;
		SKIP_WS(p);
		if (*p != ':')
			break;
		p++;
		SKIP_WS(p);
		if (jsonr_value(p, end, &q, &o, false) != JSONR_OK)
			break;
		if (match)
			return (jsonw_sv){p, (size_t)(q - p)};
		p = q;
		SKIP_WS(p);
		if (p >= end || *p != ',')
			break;
		p++;
	}
	return (jsonw_sv){NULL, 0};
}

size_t jsonr_sanitize(char *out, jsonw_sv src)
{
	const char *s = src.p, *end = src.p + src.n;
	bool in_str = false;
	size_t n = 0;

	while (s < end) {
		unsigned char c = (unsigned char)*s;

		if (!in_str) {
			if (c == '"')
				in_str = true;
			out[n++] = *s++;
			continue;
		}
		if (c == '\\') {
			out[n++] = *s++;
			if (s < end)
				out[n++] = *s++;
			continue;
		}
		if (c == '"') {
			in_str = false;
			out[n++] = *s++;
			continue;
		}
		if (c < 0x20) {
			n += ostream_json_escape_ascii(out + n, c);
			s++;
			continue;
		}
		if (c < 0x80) {
			out[n++] = *s++;
			continue;
		}
		size_t len = ostream_utf8_len(s, (size_t)(end - s));

		if (len == 0) {
			memcpy(out + n, "\\ufffd", 6);
			n += 6;
			s++;
			continue;
		}
		memcpy(out + n, s, len);
		n += len;
		s += len;
	}
	memset(out + n, 0, JSONR_PAD);
	return n;
}

/* Appends code point cp as UTF-8. */
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

static uint32_t hex4(const char *p)
{
	return (uint32_t)(hexval((unsigned char)p[0]) << 12 | hexval((unsigned char)p[1]) << 8 |
			  hexval((unsigned char)p[2]) << 4 | hexval((unsigned char)p[3]));
}

size_t jsonr_unescape(char *out, jsonw_sv lit)
{
	const char *s = lit.p + 1, *end = lit.p + lit.n - 1;
	size_t n = 0;

	if (lit.n < 2)
		return 0;
	while (s < end) {
		if (*s != '\\') {
			out[n++] = *s++;
			continue;
		}
		if (s + 1 >= end)
			break;
		switch (s[1]) {
		case 'b': out[n++] = '\b'; break;
		case 'f': out[n++] = '\f'; break;
		case 'n': out[n++] = '\n'; break;
		case 'r': out[n++] = '\r'; break;
		case 't': out[n++] = '\t'; break;
		case 'u': {
			uint32_t cp;

			if (end - s < 6)
				return n;
			cp = hex4(s + 2);
			s += 6;
			if (cp >= 0xd800 && cp < 0xdc00 && end - s >= 6 && s[0] == '\\' && s[1] == 'u') {
				uint32_t lo = hex4(s + 2);

				if (lo >= 0xdc00 && lo < 0xe000) {
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
					s += 6;
				}
			}
			if (cp >= 0xd800 && cp < 0xe000)
				cp = 0xfffd;
			/* 6 escaped bytes never become more than 4. */
			n += put_utf8(out + n, cp);
			continue;
		}
		default: out[n++] = s[1]; break;
		}
		s += 2;
	}
	return n;
}

bool jsonr_parse_us_ns(jsonw_sv v, int64_t *ns)
{
	const char *p = v.p, *end, *ip_end;
	bool neg = false;
	uint64_t ip = 0, frac = 0;
	int nd = 0;

	if (p == NULL || v.n == 0)
		return false;
	end = v.p + v.n;
	if (*p == '-') {
		neg = true;
		p++;
	}
	if (p >= end || !is_digit((unsigned char)*p))
		return false;
	/* At most 15 integer digits: ip * 1000 + 999 stays far from 2^63. */
	ip_end = end - p > 15 ? p + 15 : end;
	while (p < ip_end && is_digit((unsigned char)*p))
		ip = ip * 10 + (uint64_t)(*p++ - '0');
	if (p < end && is_digit((unsigned char)*p))
		return false;
	if (p < end && *p == '.') {
		p++;
		while (p < end && is_digit((unsigned char)*p) && nd < 3) {
			frac = frac * 10 + (uint64_t)(*p++ - '0');
			nd++;
		}
		if (p < end && is_digit((unsigned char)*p)) {
			/* Round half up on the 4th decimal; ignore the rest. */
			frac += *p >= '5';
			while (p < end && is_digit((unsigned char)*p))
				p++;
		}
		for (; nd < 3; nd++)
			frac *= 10;
	}
	if (p < end && (*p | 0x20) == 'e') {
		/* Exponent form: rare; go through double. */
		char buf[64];
		double d;

		if (v.n >= sizeof(buf))
			return false;
		memcpy(buf, v.p, v.n);
		buf[v.n] = '\0';
		d = strtod(buf, NULL) * 1000.0;
		if (!(d > -9.2e18 && d < 9.2e18))
			return false;
		*ns = (int64_t)(d < 0 ? d - 0.5 : d + 0.5);
		return true;
	}
	if (p != end)
		return false;
	uint64_t r = ip * 1000 + frac;

	*ns = neg ? -(int64_t)r : (int64_t)r;
	return true;
}

bool jsonr_parse_int(jsonw_sv v, int64_t *out)
{
	const char *p = v.p, *end;
	bool neg = false;
	uint64_t x = 0;

	if (p == NULL || v.n == 0)
		return false;
	end = v.p + v.n;
	if (*p == '"') {
		if (v.n < 3 || end[-1] != '"')
			return false;
		p++;
		end--;
	}
	if (*p == '-') {
		neg = true;
		p++;
	}
	if (p >= end)
		return false;
	for (; p < end; p++) {
		if (!is_digit((unsigned char)*p))
			return false;
		if (x > ((uint64_t)INT64_MAX - 9) / 10)
			return false;
		x = x * 10 + (uint64_t)(*p - '0');
	}
	*out = neg ? -(int64_t)x : (int64_t)x;
	return true;
}
