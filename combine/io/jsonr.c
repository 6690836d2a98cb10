/*
 * jsonr.c - the JSON scanner of the trace readers (see jsonr.h for why it
 * is hand-written and the buffer contract).
 *
 * Two scanners give the same results. The generic one (value_core) is a
 * small state machine for any JSON value; it is the reference and the only
 * one that reports errors. The event scanner (event_fast) handles the
 * common case, a flat object of keys and scalars, in a straight loop with
 * no nesting state, and hands nested values (args) to value_core; on
 * anything it does not accept it gives up and the event is scanned again
 * by value_core from its start, so errors, truncation and every odd case
 * keep the reference behaviour. The event scanner recognises an
 * interpreted key with its quotes and colon ('"pid":') in one 8-byte
 * compare, and parses the numbers of pid, tid, ts and dur as it passes
 * them (eight digits in three multiplies), so that the reader does not
 * walk them again. Both find the end of a string run (the bytes that are
 * not '"', '\\', controls or non-ASCII) and of a digit run 16 bytes at a
 * time with SSE2 (always there on x86_64), or 8 at a time with portable
 * word tricks; jsonr_select picks one for tests (FT_JSONR=generic, scalar
 * or sse2). Wider vectors (AVX2) would not help much: the strings of an
 * event are mostly shorter than 16 bytes, and the time goes into the
 * branches between tokens, not into the string scans.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "jsonr.h"
#include "ostream.h"
#include "vec.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define JSONR_FIRST_BYTE(m) ((unsigned)__builtin_clzll(m) >> 3)
#else
#define JSONR_FIRST_BYTE(m) ((unsigned)__builtin_ctzll(m) >> 3)
#endif

#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* Word tricks that need the first byte of a word to be its lowest. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define JSONR_LITTLE 0
#else
#define JSONR_LITTLE 1
#endif

/* The implementations jsonr_select chooses between. */
enum impl {
	IMPL_GENERIC, /* value_core only, 8-byte word scans: the reference */
	IMPL_SCALAR,  /* + the event scanner, 8-byte word scans */
	IMPL_SSE2,    /* + the event scanner, 16-byte SSE2 scans */
};

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

/*
 * The first byte at or after p that ends a run of plain string content.
 * The sentinel (a 0 byte at the end of the text) is such a byte, so there
 * is no bounds check; the word reads go up to 7 bytes past it.
 */
static ALWAYS_INLINE const char *str_stop_word(const char *p)
{
	uint64_t w, m;

	for (;;) {
		memcpy(&w, p, 8);
		m = str_special(w) & HIGHS;
		if (m != 0)
			return p + JSONR_FIRST_BYTE(m);
		p += 8;
	}
}

/* The first byte at or after p that is not a digit ('\0' stops it). */
static ALWAYS_INLINE const char *digits_word(const char *p)
{
	while (is_digit((unsigned char)*p))
		p++;
	return p;
}

#if defined(__SSE2__)
/* str_stop_word 16 bytes at a time (reads up to 15 bytes past the hit):
 * a signed compare with 0x20 flags controls and non-ASCII bytes at once. */
static ALWAYS_INLINE const char *str_stop_sse2(const char *p)
{
	const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\');
	const __m128i space = _mm_set1_epi8(0x20);

	for (;;) {
		__m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
		__m128i m = _mm_or_si128(
			_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, bslash)),
			_mm_cmplt_epi8(x, space));
		unsigned bits = (unsigned)_mm_movemask_epi8(m);

		if (bits != 0)
			return p + __builtin_ctz(bits);
		p += 16;
	}
}

/* The end of a run of plain string content in p..end, without reading
 * past end (jsonr_skip_value's text has no sentinel guarantee). */
static ALWAYS_INLINE const char *str_run_sse2(const char *p, const char *end)
{
	const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\');
	const __m128i space = _mm_set1_epi8(0x20);

	while (end - p >= 16) {
		__m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
		__m128i m = _mm_or_si128(
			_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, bslash)),
			_mm_cmplt_epi8(x, space));
		unsigned bits = (unsigned)_mm_movemask_epi8(m);

		if (bits != 0)
			return p + __builtin_ctz(bits);
		p += 16;
	}
	while (p < end && !byte_special((unsigned char)*p))
		p++;
	return p;
}

/* digits_word 16 bytes at a time: '0'..'9' + 0x50 are the only bytes that
 * land on -128..-119 as signed bytes. */
static ALWAYS_INLINE const char *digits_sse2(const char *p)
{
	const __m128i bias = _mm_set1_epi8(0x50), lim = _mm_set1_epi8(-118);

	for (;;) {
		__m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
		unsigned bits = (unsigned)_mm_movemask_epi8(
			_mm_cmplt_epi8(_mm_add_epi8(x, bias), lim));

		if (bits != 0xffffu)
			return p + __builtin_ctz(~bits);
		p += 16;
	}
}
#define JSONR_BEST IMPL_SSE2
#else
static ALWAYS_INLINE const char *str_stop_sse2(const char *p)
{
	return str_stop_word(p);
}

static ALWAYS_INLINE const char *digits_sse2(const char *p)
{
	return digits_word(p);
}

static ALWAYS_INLINE const char *str_run_sse2(const char *p, const char *end)
{
	while (p < end && !byte_special((unsigned char)*p))
		p++;
	return p;
}
#define JSONR_BEST IMPL_SCALAR
#endif

static ALWAYS_INLINE const char *str_stop(const char *p, int impl)
{
	return impl == IMPL_SSE2 ? str_stop_sse2(p) : str_stop_word(p);
}

static ALWAYS_INLINE const char *digits(const char *p, int impl)
{
	return impl == IMPL_SSE2 ? digits_sse2(p) : digits_word(p);
}

/* The implementation in use: -1 until the first scan reads FT_JSONR. */
static int jsonr_impl = -1;

static int impl_by_name(const char *name)
{
	if (name == NULL || *name == '\0' || !strcmp(name, "best"))
		return JSONR_BEST;
	if (!strcmp(name, "generic"))
		return IMPL_GENERIC;
	if (!strcmp(name, "scalar"))
		return IMPL_SCALAR;
	if (!strcmp(name, "sse2") && JSONR_BEST == IMPL_SSE2)
		return IMPL_SSE2;
	return -1;
}

int jsonr_select(const char *name)
{
	int impl = impl_by_name(name);

	if (impl < 0)
		return -EINVAL;
	__atomic_store_n(&jsonr_impl, impl, __ATOMIC_RELAXED);
	return 0;
}

/* The implementation to use; the first call honours FT_JSONR (an unknown
 * name there means the best one). */
static inline int impl_get(void)
{
	int impl = __atomic_load_n(&jsonr_impl, __ATOMIC_RELAXED);

	if (__builtin_expect(impl < 0, 0)) {
		impl = impl_by_name(getenv("FT_JSONR"));
		if (impl < 0)
			impl = JSONR_BEST;
		__atomic_store_n(&jsonr_impl, impl, __ATOMIC_RELAXED);
	}
	return impl;
}

/* String flags. */
#define SF_ESC 1u
#define SF_FIX 2u

/*
 * Scans string content from p (after the opening quote, or at any byte
 * inside the string) to the closing quote. Returns a pointer to the
 * closing quote, or NULL with *st set to JSONR_MORE (the text ends first)
 * or JSONR_ERR (*err_at: a bad escape).
 */
static ALWAYS_INLINE const char *str_scan(const char *p, const char *end, unsigned *flags, int *st,
					  const char **err_at, int impl)
{
	for (;;) {
		unsigned char c;

		p = str_stop(p, impl);
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
static ALWAYS_INLINE const char *num_scan(const char *p, const char **err_at, int impl)
{
	const char *s;

	if (*p == '-')
		p++;
	if (*p == '0') {
		p++;
	} else {
		s = p;
		p = digits(p, impl);
		if (p == s) {
			*err_at = p;
			return NULL;
		}
	}
	if (*p == '.') {
		s = ++p;
		p = digits(p, impl);
		if (p == s) {
			*err_at = p;
			return NULL;
		}
	}
	if ((*p | 0x20) == 'e') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		s = p;
		p = digits(p, impl);
		if (p == s) {
			*err_at = p;
			return NULL;
		}
	}
	return p;
}

/* The 4 bytes at k as a number, first byte lowest (the same on every
 * byte order, so that key texts compare with key4("..") constants). */
static ALWAYS_INLINE uint32_t key4(const char *k)
{
	const unsigned char *u = (const unsigned char *)k;

	return (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
}

#define K2(a, b) ((uint32_t)(a) | (uint32_t)(b) << 8)
#define K3(a, b, c) (K2(a, b) | (uint32_t)(c) << 16)
#define K4(a, b, c, d) (K3(a, b, c) | (uint32_t)(d) << 24)

/* Which interpreted key the key text k[0..n) is, or -1. Reads 4 bytes at
 * k (the closing quote and the padding make that safe). */
static ALWAYS_INLINE int key_id(const char *k, size_t n)
{
	uint32_t w = key4(k);

	switch (n) {
	case 1:
		return (w & 0xff) == 's' ? JSONR_K_S : -1;
	case 2:
		/* clang-format off */
		switch (w & 0xffff) {
		case K2('p', 'h'): return JSONR_K_PH;
		case K2('t', 's'): return JSONR_K_TS;
		case K2('i', 'd'): return JSONR_K_ID;
		case K2('b', 'p'): return JSONR_K_BP;
		default: return -1;
		}
		/* clang-format on */
	case 3:
		/* clang-format off */
		switch (w & 0xffffff) {
		case K3('p', 'i', 'd'): return JSONR_K_PID;
		case K3('t', 'i', 'd'): return JSONR_K_TID;
		case K3('c', 'a', 't'): return JSONR_K_CAT;
		case K3('d', 'u', 'r'): return JSONR_K_DUR;
		case K3('i', 'd', '2'): return JSONR_K_ID2;
		default: return -1;
		}
		/* clang-format on */
	case 4:
		if (w == K4('n', 'a', 'm', 'e'))
			return JSONR_K_NAME;
		if (w == K4('a', 'r', 'g', 's'))
			return JSONR_K_ARGS;
		return -1;
	case 7:
		return memcmp(k, "bind_id", 7) == 0 ? JSONR_K_BIND_ID : -1;
	default:
		return -1;
	}
}

#define SKIP_WS(p)                                                                                 \
	do {                                                                                       \
		while (is_ws((unsigned char)*(p)))                                                 \
			(p)++;                                                                     \
	} while (0)

/* SKIP_WS for where whitespace is rare: one compare when there is none. */
#define SKIP_WS_RARE(p)                                                                            \
	do {                                                                                       \
		if (__builtin_expect((unsigned char)*(p) <= ' ', 0))                               \
			SKIP_WS(p);                                                                \
	} while (0)

/*
 * The generic scanner: jsonr_value without its reset of o (v, esc, fix
 * and err_at are only ever set here), nesting limited to max_depth levels.
 */
/* Keys of one object compared with each other while scanning. */
#define DUP_KEYS 8

static int value_core(const char *p, const char *end, const char **next, jsonr_obj *o, bool keys,
		      unsigned max_depth, int impl)
{
	char stack[JSONR_MAX_DEPTH];
	/* The first DUP_KEYS keys of each open object, to tell a key met
	 * twice; an object with more (or with keys written with escapes) is
	 * left to jsonr_dedup. Not initialised: nkeys counts what is set. */
	strview seen[JSONR_MAX_DEPTH][DUP_KEYS];
	unsigned char nkeys[JSONR_MAX_DEPTH];
	unsigned depth = 0;
	int cur = -1, st = JSONR_ERR;
	const char *vstart = NULL, *q;
	unsigned flags;

value:
	SKIP_WS(p);
	switch (*p) {
	case '{':
		if (depth == max_depth) {
			o->expected = "at most 64 levels of nesting";
			goto fail;
		}
		nkeys[depth] = 0;
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
		if (depth == max_depth) {
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
		q = str_scan(p + 1, end, &flags, &st, &o->err_at, impl);
		if (q == NULL) {
			if (st == JSONR_ERR) {
				o->expected =
					"a valid escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)";
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
		q = num_scan(p, &o->err_at, impl);
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
	q = str_scan(p + 1, end, &flags, &st, &o->err_at, impl);
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
	if (!o->dup) {
		strview k = {p + 1, (size_t)(q - p - 1)};
		unsigned d = depth - 1;

		if ((flags & (SF_ESC | SF_FIX)) || nkeys[d] == DUP_KEYS)
			o->dup = true;
		for (unsigned i = 0; i < nkeys[d] && !o->dup; i++)
			o->dup = seen[d][i].n == k.n && !memcmp(seen[d][i].p, k.p, k.n);
		if (nkeys[d] < DUP_KEYS)
			seen[d][nkeys[d]++] = k;
	}
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
		o->v[cur] = (strview){vstart, (size_t)(p - vstart)};
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

/* Whether the 8 bytes of w (first byte lowest) are all ASCII digits. */
static inline bool eight_digits(uint64_t w)
{
	return !(((w + 0x4646464646464646ull) | (w - 0x3030303030303030ull)) & HIGHS);
}

/* Their value, the first byte most significant (three multiplies for
 * eight digits instead of eight; the classic SWAR conversion). */
static inline uint32_t eight_digits_value(uint64_t w)
{
	w = (w & 0x0f0f0f0f0f0f0f0full) * 2561 >> 8;
	w = (w & 0x00ff00ff00ff00ffull) * 6553601 >> 16;
	return (uint32_t)((w & 0x0000ffff0000ffffull) * 42949672960001ull >> 32);
}

/* The bytes a..h as a word, a lowest: a key's text compares with one
 * load. */
#define W8(a, b, c, d, e, f, g, h)                                                                 \
	((uint64_t)(a) | (uint64_t)(b) << 8 | (uint64_t)(c) << 16 | (uint64_t)(d) << 24 |          \
	 (uint64_t)(e) << 32 | (uint64_t)(f) << 40 | (uint64_t)(g) << 48 | (uint64_t)(h) << 56)
#define M(n) (~0ull >> (64 - 8 * (n)))

/*
 * The id of the key at p (p[0] == '"') when it is one of the interpreted
 * ones written plainly, '"pid":' and so on, with *len its length quote to
 * colon; else -1. One load and one compare where the general path scans
 * the string, looks the key up and checks the colon. Little-endian words.
 */
static ALWAYS_INLINE int key_fast(const char *p, size_t *len)
{
	uint64_t w;

	memcpy(&w, p, 8);
#define KEY(n, id, a, b, c, d, e, f, g)                                                            \
	do {                                                                                       \
		if ((w & M(n)) == W8(a, b, c, d, e, f, g, 0)) {                                    \
			*len = (n);                                                                \
			return (id);                                                               \
		}                                                                                  \
	} while (0)
	switch (p[1]) {
	case 'p':
		KEY(6, JSONR_K_PID, '"', 'p', 'i', 'd', '"', ':', 0);
		KEY(5, JSONR_K_PH, '"', 'p', 'h', '"', ':', 0, 0);
		return -1;
	case 't':
		KEY(6, JSONR_K_TID, '"', 't', 'i', 'd', '"', ':', 0);
		KEY(5, JSONR_K_TS, '"', 't', 's', '"', ':', 0, 0);
		return -1;
	case 'c':
		KEY(6, JSONR_K_CAT, '"', 'c', 'a', 't', '"', ':', 0);
		return -1;
	case 'd':
		KEY(6, JSONR_K_DUR, '"', 'd', 'u', 'r', '"', ':', 0);
		return -1;
	case 'n':
		KEY(7, JSONR_K_NAME, '"', 'n', 'a', 'm', 'e', '"', ':');
		return -1;
	case 'a':
		KEY(7, JSONR_K_ARGS, '"', 'a', 'r', 'g', 's', '"', ':');
		return -1;
	case 's':
		KEY(4, JSONR_K_S, '"', 's', '"', ':', 0, 0, 0);
		return -1;
	case 'i':
		KEY(5, JSONR_K_ID, '"', 'i', 'd', '"', ':', 0, 0);
		KEY(6, JSONR_K_ID2, '"', 'i', 'd', '2', '"', ':', 0);
		return -1;
	case 'b':
		KEY(5, JSONR_K_BP, '"', 'b', 'p', '"', ':', 0, 0);
		return -1;
	default:
		return -1;
	}
#undef KEY
}

/* Keys whose numbers the event scanner parses. */
#define NUM_INT_KEYS (1u << JSONR_K_PID | 1u << JSONR_K_TID)
#define NUM_US_KEYS (1u << JSONR_K_TS | 1u << JSONR_K_DUR)

/* The value of the n (1..8) digits at p, reading 8 bytes (the padding
 * makes that safe): the digits shifted to the top of the word, the bytes
 * below become leading zeros. */
static ALWAYS_INLINE uint64_t dec8(const char *p, size_t n)
{
	uint64_t w;

	memcpy(&w, p, 8);
	return eight_digits_value(w << (8 * (8 - n)));
}

/* The value of the n (1..16) digits at p. */
static ALWAYS_INLINE uint64_t dec16(const char *p, size_t n)
{
	if (n <= 8)
		return dec8(p, n);
	return dec8(p, n - 8) * 100000000u + dec8(p + n - 8, 8);
}

/*
 * num_scan for the value of key k (-1: none) in the event scanner; for
 * pid, tid, ts and dur it also parses the number into o->num (with the
 * has_num bit) exactly as jsonr_parse_int / jsonr_parse_us_ns would, when
 * it has a plain form (no exponent, at most 15 integer digits). Each
 * occurrence of a key clears what an earlier one left.
 */
static ALWAYS_INLINE const char *num_scan_parse(const char *p, int k, jsonr_obj *o, uint32_t *has,
						int impl)
{
	const char *s = p + (*p == '-'), *ie, *fe;
	uint64_t x;

	if (*s == '0') {
		ie = s + 1;
	} else {
		ie = digits(s, impl);
		if (ie == s)
			return NULL;
	}
	fe = ie;
	if (*ie == '.') {
		fe = digits(ie + 1, impl);
		if (fe == ie + 1)
			return NULL;
	}
	if (k < 0)
		goto tail;
	if (!JSONR_LITTLE || (*fe | 0x20) == 'e' || ie - s > 15)
		goto tail;
	if ((1u << k) & NUM_US_KEYS) {
		x = dec16(s, (size_t)(ie - s)) * 1000;
		if (fe > ie) {
			size_t nf = (size_t)(fe - ie - 1);

			if (nf >= 3)
				x += dec8(ie + 1, 3) + (nf > 3 && ie[4] >= '5');
			else
				x += dec8(ie + 1, nf) * (nf == 1 ? 100 : 10);
		}
	} else if (((1u << k) & NUM_INT_KEYS) && fe == ie) {
		x = dec16(s, (size_t)(ie - s));
	} else {
		goto tail;
	}
	o->num[k] = s > p ? -(int64_t)x : (int64_t)x;
	*has |= 1u << k;
	return fe;
tail:
	/* The exponent, if any, the long way. */
	return (*fe | 0x20) == 'e' ? num_scan(p, &o->err_at, impl) : fe;
}

/*
 * The event scanner: value_core(keys = true) for an object at p (*p ==
 * '{'), as one loop over its keys. Returns JSONR_OK with exactly what
 * value_core would have found, or JSONR_MORE for "not sure, ask
 * value_core" (an error, the end of the text, a nested value value_core
 * rejects); o is then partly filled and must be reset.
 */
_Static_assert(JSONR_K_COUNT <= 31, "bit 31 of event_fast's key bits is for other keys");

static ALWAYS_INLINE int event_fast(const char *p, const char *end, const char **next, jsonr_obj *o,
				    int impl)
{
	const char *q, *vstart;
	unsigned flags;
	uint32_t has = 0; /* o->has_num, in a register until the end */
	/* Bit k for each interpreted key k met, bit 31 for any other key
	 * (written with escapes too), ORed into seen and added into sum: a
	 * key met twice, or two other keys (that may be one), make the sum
	 * exceed the OR. One OR and one add a key. */
	uint32_t seen = 0;
	uint64_t sum = 0;
	bool dup = false;
	int k, st;

	p++;
	SKIP_WS_RARE(p);
	if (*p == '}')
		goto close;
	for (;;) {
		if (JSONR_LITTLE) {
			size_t len;

			/* The closing quote must be before end. */
			k = key_fast(p, &len);
			if (__builtin_expect(k >= 0, 1) && p + len - 2 < end) {
				p += len;
				goto value;
			}
		}
		if (*p != '"')
			return JSONR_MORE;
		q = str_stop(p + 1, impl);
		if (__builtin_expect(*q == '"' && q < end, 1)) {
			k = key_id(p + 1, (size_t)(q - p - 1));
		} else {
			/* An escape, a control or non-ASCII byte: the full scan
			 * from there. A key with escapes is never interpreted. */
			flags = 0;
			q = str_scan(q, end, &flags, &st, &o->err_at, impl);
			if (q == NULL)
				return JSONR_MORE;
			if (flags & SF_FIX)
				o->fix = true;
			k = flags & SF_ESC ? -1 : key_id(p + 1, (size_t)(q - p - 1));
			/* "p\u0069d" may be "pid", or another key; two keys
			 * that differ in invalid UTF-8 become one when it is
			 * repaired. */
			dup |= (flags & (SF_ESC | SF_FIX)) != 0;
		}
		p = q + 1;
		SKIP_WS_RARE(p);
		if (*p != ':')
			return JSONR_MORE;
		p++;
value:
		SKIP_WS_RARE(p);
		vstart = p;
		/* What an earlier occurrence of the key parsed is stale (k =
		 * -1 clears an unused bit). */
		uint32_t bit = 1u << (k & 31);

		has &= ~bit;
		seen |= bit;
		sum += bit;
		/* Numbers first: a jump table costs more. */
		if (is_digit((unsigned char)*p))
			goto number;
		switch (*p) {
		case '"':
			q = str_stop(p + 1, impl);
			if (__builtin_expect(!(*q == '"' && q < end), 0)) {
				flags = 0;
				q = str_scan(q, end, &flags, &st, &o->err_at, impl);
				if (q == NULL)
					return JSONR_MORE;
				if (flags & SF_FIX)
					o->fix = true;
				if (k >= 0 && (flags & SF_ESC))
					o->esc |= 1u << k;
			}
			p = q + 1;
			break;
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
number:
			p = num_scan_parse(p, k, o, &has, impl);
			/* A number that reaches the end may go on. */
			if (p == NULL || p >= end)
				return JSONR_MORE;
			break;
		case '{':
		case '[': {
			/* The event's object is the first level of nesting. */
			jsonr_obj sub;
			const char *after;

			/* Not p's address: p stays in a register. */
			sub.fix = false;
			sub.dup = false;
			if (value_core(p, end, &after, &sub, false, JSONR_MAX_DEPTH - 1, impl) !=
			    JSONR_OK)
				return JSONR_MORE;
			if (sub.fix)
				o->fix = true;
			dup |= sub.dup;
			p = after;
			break;
		}
		case 't':
			if (memcmp(p, "true", 4) != 0)
				return JSONR_MORE;
			p += 4;
			break;
		case 'f':
			if (memcmp(p, "false", 5) != 0)
				return JSONR_MORE;
			p += 5;
			break;
		case 'n':
			if (memcmp(p, "null", 4) != 0)
				return JSONR_MORE;
			p += 4;
			break;
		default:
			return JSONR_MORE;
		}
		if (k >= 0)
			o->v[k] = (strview){vstart, (size_t)(p - vstart)};
		SKIP_WS_RARE(p);
		if (*p == ',') {
			p++;
			SKIP_WS_RARE(p);
			continue;
		}
		if (*p == '}')
			goto close;
		return JSONR_MORE;
	}
close:
	p++;
	if (p > end)
		return JSONR_MORE;
	*next = p;
	o->has_num = has;
	o->dup = dup || sum != seen;
	return JSONR_OK;
}

static int event_fast_word(const char *p, const char *end, const char **next, jsonr_obj *o)
{
	return event_fast(p, end, next, o, IMPL_SCALAR);
}

static int event_fast_sse2(const char *p, const char *end, const char **next, jsonr_obj *o)
{
	return event_fast(p, end, next, o, IMPL_SSE2);
}

static void obj_reset(jsonr_obj *o)
{
	/* A loop, not memset: gcc makes the 208 bytes of v a rep stos,
	 * whose start-up cost is a tenth of the scan of a typical event.
	 * Only p: n means nothing while p is NULL (jsonr.h). */
#pragma GCC unroll 16
	for (int k = 0; k < JSONR_K_COUNT; k++)
		o->v[k].p = NULL;
	o->esc = 0;
	o->fix = false;
	o->dup = false;
	o->has_num = 0;
	o->err_at = NULL;
	o->expected = NULL;
}

int jsonr_value(const char *p, const char *end, const char **next, jsonr_obj *o, bool keys)
{
	int impl = impl_get();

	/* 16-byte reads only for events (the readers' padded buffers); other
	 * values (args, metadata) keep the 8-byte reads of the contract. */
	if (!keys && impl == IMPL_SSE2)
		impl = IMPL_SCALAR;
	obj_reset(o);
	if (keys && *p == '{' && impl != IMPL_GENERIC) {
		int st = impl == IMPL_SSE2 ? event_fast_sse2(p, end, next, o)
					   : event_fast_word(p, end, next, o);

		if (__builtin_expect(st == JSONR_OK, 1))
			return st;
		obj_reset(o);
	}
	return value_core(p, end, next, o, keys, JSONR_MAX_DEPTH, impl);
}

int jsonr_skip_value(jsonr_skip *s, const char *p, const char *end, const char **next)
{
	int impl = impl_get();

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
			if (impl == IMPL_SSE2)
				p = str_run_sse2(p, end);
			else
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

void jsonr_find_keys(strview obj, const char *const *keys, size_t nkeys, strview *out)
{
	const char *p = obj.p, *end, *q;
	size_t missing = nkeys;
	jsonr_obj o;
	unsigned flags;
	int st, impl = impl_get() == IMPL_GENERIC ? IMPL_GENERIC : IMPL_SCALAR;

	for (size_t i = 0; i < nkeys; i++)
		out[i] = (strview){NULL, 0};
	if (p == NULL || obj.n < 2 || *p != '{')
		return;
	end = obj.p + obj.n;
	p++;
	/* Until every key is found: the rest of the object cannot change
	 * what a key's first occurrence gave. */
	while (missing > 0) {
		size_t which = nkeys;

		SKIP_WS(p);
		if (p >= end || *p != '"')
			break;
		flags = 0;
		q = str_scan(p + 1, end, &flags, &st, &o.err_at, impl);
		if (q == NULL)
			break;
		for (size_t i = 0; !(flags & SF_ESC) && i < nkeys; i++)
			if (out[i].p == NULL && strlen(keys[i]) == (size_t)(q - p - 1) &&
			    !memcmp(p + 1, keys[i], (size_t)(q - p - 1))) {
				which = i;
				break;
			}
		p = q + 1;
		SKIP_WS(p);
		if (*p != ':')
			break;
		p++;
		SKIP_WS(p);
		if (jsonr_value(p, end, &q, &o, false) != JSONR_OK)
			break;
		if (which < nkeys) {
			out[which] = (strview){p, (size_t)(q - p)};
			missing--;
		}
		p = q;
		SKIP_WS(p);
		if (p >= end || *p != ',')
			break;
		p++;
	}
}

strview jsonr_find_key(strview obj, const char *key)
{
	strview v;

	jsonr_find_keys(obj, &key, 1, &v);
	return v;
}

size_t jsonr_sanitize(char *out, strview src)
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

size_t jsonr_unescape(char *out, strview lit)
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
		/* clang-format off */
		case 'b': out[n++] = '\b'; break;
		case 'f': out[n++] = '\f'; break;
		case 'n': out[n++] = '\n'; break;
		case 'r': out[n++] = '\r'; break;
		case 't': out[n++] = '\t'; break;
		/* clang-format on */
		case 'u': {
			uint32_t cp;

			if (end - s < 6)
				return n;
			cp = hex4(s + 2);
			s += 6;
			if (cp >= 0xd800 && cp < 0xdc00 && end - s >= 6 && s[0] == '\\' &&
			    s[1] == 'u') {
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
		default:
			out[n++] = s[1];
			break;
		}
		s += 2;
	}
	return n;
}

bool jsonr_parse_us_ns(strview v, int64_t *ns)
{
	const char *p = v.p, *end, *s;
	bool neg = false;
	uint64_t ip = 0, frac = 0;
	unsigned d;
	int nd = 0;

	if (p == NULL || v.n == 0)
		return false;
	end = v.p + v.n;
	if (*p == '-') {
		neg = true;
		p++;
	}
	/* At most 15 integer digits: ip * 1000 + 999 stays far from 2^63 (a
	 * longer run wraps ip harmlessly: it is refused). */
	s = p;
	while (JSONR_LITTLE && end - p >= 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		if (!eight_digits(w))
			break;
		ip = ip * 100000000u + eight_digits_value(w);
		p += 8;
	}
	while (p < end && (d = (unsigned)((unsigned char)*p - '0')) < 10u) {
		ip = ip * 10 + d;
		p++;
	}
	if (p == s || p - s > 15)
		return false;
	if (p < end && *p == '.') {
		p++;
		while (p < end && (d = (unsigned)((unsigned char)*p - '0')) < 10u && nd < 3) {
			frac = frac * 10 + d;
			p++;
			nd++;
		}
		if (p < end && is_digit((unsigned char)*p)) {
			/* Round half up on the 4th decimal; ignore the rest. */
			frac += *p >= '5';
			while (p < end && is_digit((unsigned char)*p))
				p++;
		}
		frac *= nd == 0 ? 1000 : nd == 1 ? 100 : nd == 2 ? 10 : 1;
	}
	if (p < end && (*p | 0x20) == 'e') {
		/* Exponent form: rare; go through double. */
		char buf[64];
		double x;

		if (v.n >= sizeof(buf))
			return false;
		memcpy(buf, v.p, v.n);
		buf[v.n] = '\0';
		x = strtod(buf, NULL) * 1000.0;
		if (!(x > -9.2e18 && x < 9.2e18))
			return false;
		*ns = (int64_t)(x < 0 ? x - 0.5 : x + 0.5);
		return true;
	}
	if (p != end)
		return false;
	uint64_t r = ip * 1000 + frac;

	*ns = neg ? -(int64_t)r : (int64_t)r;
	return true;
}

bool jsonr_parse_int(strview v, int64_t *out)
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
	if (end - p <= 18) {
		/* The common case: 18 digits cannot reach the overflow check. */
		for (; p < end; p++) {
			unsigned d = (unsigned)((unsigned char)*p - '0');

			if (d >= 10u)
				return false;
			x = x * 10 + d;
		}
	}
	for (; p < end; p++) {
		if (!is_digit((unsigned char)*p))
			return false;
		/* Exact: INT64_MAX itself (a saturated count) parses. */
		if (x > ((uint64_t)INT64_MAX - (uint64_t)(*p - '0')) / 10)
			return false;
		x = x * 10 + (uint64_t)(*p - '0');
	}
	*out = neg ? -(int64_t)x : (int64_t)x;
	return true;
}

/* ---- duplicate keys ------------------------------------------------- */

/* One member of an object being deduplicated. */
typedef struct dd_member {
	const char *key, *kend; /* the key literal, quotes included */
	const char *val;        /* its value */
	char *name;             /* the key unescaped (in dd.names) */
	size_t name_n, index;
	bool keep;
	bool plain; /* written with escapes that it does not need */
} dd_member;

typedef struct dd {
	char *out; /* NULL: only find whether there is a duplicate */
	size_t n;
	bool found; /* something to change */
	bool dup;   /* of which a key twice */
	bool nomem;
} dd;

static const char *dd_ws(const char *p)
{
	while (is_ws((unsigned char)*p))
		p++;
	return p;
}

/* The end of the string literal at p (its opening quote), in valid
 * JSON: the first quote after it that an even run of backslashes
 * precedes. Found with rawmemchr: a byte-by-byte walk made this pass cost
 * more than the scan it follows on traces with large strings (VizTracer's
 * file_info holds source files). */
static const char *dd_str_end(const char *p)
{
	const char *q = p + 1;

	for (;;) {
		const char *b;

		q = rawmemchr(q, '"');
		for (b = q; b > p + 1 && b[-1] == '\\'; b--)
			;
		if (((q - b) & 1) == 0)
			return q + 1;
		q++;
	}
}

static void dd_put(dd *d, const char *p, size_t n)
{
	if (d->out != NULL)
		memcpy(d->out + d->n, p, n);
	d->n += n;
}

static int dd_cmp(const void *a, const void *b)
{
	const dd_member *x = *(const dd_member *const *)a, *y = *(const dd_member *const *)b;
	size_t n = x->name_n < y->name_n ? x->name_n : y->name_n;
	int c = memcmp(x->name, y->name, n);

	if (c != 0)
		return c;
	if (x->name_n != y->name_n)
		return x->name_n < y->name_n ? -1 : 1;
	return x->index < y->index ? -1 : 1;
}

static const char *dd_value(dd *d, const char *p, unsigned depth);

/* Whether a key's content can be written between quotes as it is: no
 * control character, quote or backslash (UTF-8 is fine: it was valid). */
static bool plain_name(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == '"' || s[i] == '\\' || s[i] == 0x7f)
			return false;
	return true;
}

/* The end of the valid value at p, not looked into. */
static const char *dd_skip(const char *p)
{
	unsigned lvl = 0;
	const char *q;

	if (*p == '"')
		return dd_str_end(p);
	if (*p != '{' && *p != '[') {
		for (q = p;
		     *q != ',' && *q != '}' && *q != ']' && !is_ws((unsigned char)*q) && *q != '\0';
		     q++)
			;
		return q;
	}
	for (q = p;; q++) {
		if (*q == '"')
			q = dd_str_end(q) - 1;
		else if (*q == '{' || *q == '[')
			lvl++;
		else if ((*q == '}' || *q == ']') && --lvl == 0)
			return q + 1;
	}
}

/* An object at p ('{'): its members whose key comes again later are left
 * out (the last one counts, as in JSON parsers). Members are sorted by
 * name to find them: linear-logarithmic however many there are. */
static const char *dd_object(dd *d, const char *p, unsigned depth)
{
	dd_member *m = NULL, **by = NULL;
	char *names = NULL;
	size_t n = 0, cap = 0, used = 0, ncap = 0;
	const char *q = dd_ws(p + 1);
	bool first = true, escaped = false;

	while (*q != '}') {
		const char *kend = dd_str_end(q);

		if (vec_grow(&m, &cap, n + 1, sizeof(*m), 16) < 0)
			goto nomem;
		m[n] = (dd_member){.key = q, .kend = kend, .index = n, .keep = true};
		q = dd_ws(dd_ws(kend) + 1);
		m[n].val = q;
		n++;
		/* Finding: look inside; writing: only find the end (the value
		 * is written, and looked inside, below). */
		q = d->out == NULL ? dd_value(d, q, depth + 1) : dd_skip(q);
		if (q == NULL)
			goto nomem;
		q = dd_ws(q);
		if (*q == ',')
			q = dd_ws(q + 1);
	}
	for (size_t i = 0; i < n && !escaped; i++)
		escaped = memchr(m[i].key, '\\', (size_t)(m[i].kend - m[i].key)) != NULL;
	if (n > 1 || escaped) {
		/* Names unescaped, into one buffer (offsets first: it moves). */
		for (size_t i = 0; i < n; i++)
			ncap += (size_t)(m[i].kend - m[i].key);
		names = malloc(ncap + 1);
		by = malloc(n * sizeof(*by));
		if (names == NULL || by == NULL)
			goto nomem;
		for (size_t i = 0; i < n; i++) {
			m[i].name = names + used;
			m[i].name_n = jsonr_unescape(
				names + used, (strview){m[i].key, (size_t)(m[i].kend - m[i].key)});
			used += m[i].name_n;
			by[i] = &m[i];
		}
		/* A key written with escapes ("p\\u0069d") is written plainly
		 * when it can be: the scanner then reads it as what it is. */
		for (size_t i = 0; i < n; i++)
			if (memchr(m[i].key, '\\', (size_t)(m[i].kend - m[i].key)) != NULL &&
			    plain_name(m[i].name, m[i].name_n)) {
				m[i].plain = true;
				d->found = true;
			}
		qsort(by, n, sizeof(*by), dd_cmp);
		for (size_t i = 0; i + 1 < n; i++)
			if (by[i]->name_n == by[i + 1]->name_n &&
			    !memcmp(by[i]->name, by[i + 1]->name, by[i]->name_n)) {
				by[i]->keep = false;
				d->found = true;
				d->dup = true;
			}
	}
	dd_put(d, "{", 1);
	for (size_t i = 0; i < n && d->out != NULL; i++) {
		if (!m[i].keep)
			continue;
		if (!first)
			dd_put(d, ",", 1);
		first = false;
		if (m[i].plain) {
			dd_put(d, "\"", 1);
			dd_put(d, m[i].name, m[i].name_n);
			dd_put(d, "\"", 1);
		} else {
			dd_put(d, m[i].key, (size_t)(m[i].kend - m[i].key));
		}
		dd_put(d, ":", 1);
		dd_value(d, m[i].val, depth + 1);
	}
	dd_put(d, "}", 1);
	free(by);
	free(names);
	free(m);
	return q + 1;
nomem:
	d->nomem = true;
	free(by);
	free(names);
	free(m);
	return NULL;
}

/* Copies (or, with d->out NULL, measures) the valid value at p; returns
 * where it ends. */
static const char *dd_value(dd *d, const char *p, unsigned depth)
{
	const char *q;

	if (p == NULL || d->nomem)
		return NULL;
	if (*p == '{')
		return dd_object(d, p, depth);
	if (*p == '[') {
		bool first = true;

		dd_put(d, "[", 1);
		q = dd_ws(p + 1);
		while (*q != ']') {
			if (!first)
				dd_put(d, ",", 1);
			first = false;
			q = dd_value(d, q, depth + 1);
			if (q == NULL)
				return NULL;
			q = dd_ws(q);
			if (*q == ',')
				q = dd_ws(q + 1);
		}
		dd_put(d, "]", 1);
		return q + 1;
	}
	if (*p == '"')
		q = dd_str_end(p);
	else
		for (q = p;
		     *q != ',' && *q != '}' && *q != ']' && !is_ws((unsigned char)*q) && *q != '\0';
		     q++)
			;
	dd_put(d, p, (size_t)(q - p));
	return q;
}

size_t jsonr_dedup(char *out, strview src, bool *dup)
{
	dd d = {.out = NULL};

	/* A pass that only looks (the scanner's hint may be a false alarm:
	 * an object of many keys), then one that writes. */
	dd_value(&d, dd_ws(src.p), 0);
	if (d.nomem)
		return (size_t)-1;
	*dup = d.dup;
	if (!d.found)
		return 0;
	d = (dd){.out = out};
	dd_value(&d, dd_ws(src.p), 0);
	if (d.nomem)
		return (size_t)-1;
	memset(out + d.n, 0, JSONR_PAD);
	return d.n;
}
