/*
 * jsonr - the JSON scanner of the trace readers (and of the HDF5 module's
 * args). In combine/include/ because several folders of combine/ use it;
 * the collector does not (tests/layout checks it).
 *
 * Why hand-written (house rule 17): `forktrace combine` must read 1 GB/s of
 * JSON on one core in flat memory (64 MiB for 2 GB of input). The Debian
 * JSON libraries either build a tree of the whole document (jansson,
 * json-c: memory grows with the input, which rules them out for a 2 GB
 * file) or stream token by token through a callback per token (yajl),
 * which is far from the target; none finds event boundaries and a few keys
 * at the speed of the disk. This scanner validates one complete value (an
 * event) in a contiguous buffer: strings and digits are skipped 16 bytes
 * at a time (SSE2), only the keys forktrace interprets are located, and
 * the numbers of pid, tid, ts and dur are parsed on the way; everything
 * else is checked and left as text. Measured (docs/BENCHMARKS.md): the
 * whole combine, read + scan + write, at about 1.2 GB/s and 10.5 MiB peak
 * RSS on 1 and 2 GB of VizTracer JSON; the scan itself is about half the
 * time. It is fuzzed by tests/fuzz/fuzz_jsonr.c.
 *
 * Buffer contract: the text at p..end must be followed by at least
 * JSONR_PAD readable bytes, with end[0] == '\0' unless p..end holds one
 * complete value (the readers' buffers and sanitized copies are padded so).
 * The sentinel is what lets the hot loops run without a bounds check per
 * byte; the 8-byte string scan may read up to 7 bytes past a closing
 * quote, and the event scan (jsonr_value with keys) up to 15 bytes past
 * the byte that stops a 16-byte string or digit scan.
 */
#ifndef FT_COMBINE_JSONR_H
#define FT_COMBINE_JSONR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jsonw.h"

/* Bytes after the end of a scanned text that must be readable. */
#define JSONR_PAD 16
/* Deepest nesting accepted in an event (an array inside an object ... ). */
#define JSONR_MAX_DEPTH 64

/* The keys of an event forktrace interprets. */
enum jsonr_key {
	JSONR_K_PH,
	JSONR_K_NAME,
	JSONR_K_CAT,
	JSONR_K_PID,
	JSONR_K_TID,
	JSONR_K_TS,
	JSONR_K_DUR,
	JSONR_K_S,
	JSONR_K_ID,
	JSONR_K_BP,
	JSONR_K_ARGS,
	/* Flow and async ids that combine keeps apart per input. */
	JSONR_K_ID2,
	JSONR_K_BIND_ID,
	JSONR_K_COUNT
};

enum jsonr_status {
	JSONR_OK = 0,
	JSONR_MORE = 1, /* the value goes on past end: read more and retry */
	JSONR_ERR = -1, /* not valid JSON: see err_at / expected */
};

/*
 * What jsonr_value found. v[k] is the value text of key k at the first
 * level of the object (strings with their quotes), p == NULL when absent
 * (n is then meaningless); esc bit k: that string holds backslash
 * escapes. fix: a string holds bytes that are not valid JSON text
 * (invalid UTF-8, raw control characters): jsonr_sanitize makes a valid
 * copy.
 */
typedef struct jsonr_obj {
	strview v[JSONR_K_COUNT];
	uint32_t esc;
	bool fix;
	/* The value may hold an object with a key twice (a key of the event
	 * seen twice, keys written with escapes or unknown ones, a nested
	 * object of two members or more): jsonr_dedup tells and repairs. */
	bool dup;
	/* Bit k: num[k] holds the value of v[k], as jsonr_parse_int gives it
	 * for pid and tid and jsonr_parse_us_ns for ts and dur; the scanner
	 * parses plain numbers there as it passes them. Without the bit,
	 * parse v[k] (jsonr_obj_int / jsonr_obj_us_ns do either). */
	uint32_t has_num;
	int64_t num[JSONR_K_COUNT];
	const char *err_at;   /* JSONR_ERR: where */
	const char *expected; /* JSONR_ERR: what was expected there */
} jsonr_obj;

/* The pid or tid of an event: jsonr_parse_int of v[k], parsed already
 * when the scanner could. */
static inline bool jsonr_obj_int(const jsonr_obj *o, enum jsonr_key k, int64_t *out);
/* The ts or dur of an event in ns: jsonr_parse_us_ns of v[k], likewise. */
static inline bool jsonr_obj_us_ns(const jsonr_obj *o, enum jsonr_key k, int64_t *ns);

/*
 * Checks that p..end starts with one complete JSON value and sets *next
 * past it. When keys is true and the value is an object, fills o->v with
 * its interpreted keys. Returns a jsonr_status. Borrows everything.
 */
int jsonr_value(const char *p, const char *end, const char **next, jsonr_obj *o, bool keys);

/*
 * Skips a value of any size across buffers (top-level keys forktrace does
 * not keep: file_info, systemTraceEvents, ...). Resumable: state starts
 * zeroed; each call consumes what it can of p..end and returns 1 when the
 * value ended (*next past it), 0 when all bytes were consumed and more
 * are needed, -1 on a byte that cannot start a value.
 */
typedef struct jsonr_skip {
	uint64_t depth;
	bool started, in_str, esc, scalar;
} jsonr_skip;
int jsonr_skip_value(jsonr_skip *s, const char *p, const char *end, const char **next);

/*
 * The value of key at the first level of the object text obj (complete and
 * valid, as jsonr_value left it), or {NULL, 0}.
 */
strview jsonr_find_key(strview obj, const char *key);
/* jsonr_find_key of each of keys[0..nkeys) in one pass over obj: out[i]
 * is the value of keys[i] (the first, as jsonr_find_key finds it), or
 * {NULL, 0}. For objects read for many of their keys. */
void jsonr_find_keys(strview obj, const char *const *keys, size_t nkeys, strview *out);

/*
 * Copies the complete, valid-structure value text src into out (at least
 * jsonr_sanitize_size(src.n) bytes) with every invalid UTF-8 byte in its
 * strings replaced by \ufffd and raw control characters escaped. Returns
 * the length. out gets JSONR_PAD zero bytes after the text.
 */
size_t jsonr_sanitize(char *out, strview src);
static inline size_t jsonr_sanitize_size(size_t n)
{
	return 6 * n + JSONR_PAD;
}

/*
 * Duplicate keys: JSON parsers keep the last value of a key written twice
 * in one object, and so does a viewer; forktrace's scanner read the
 * event's keys the same way, but copied the text with both. jsonr_dedup
 * copies the complete, valid value src into out (src.n + JSONR_PAD bytes)
 * with, in every object at any depth, each member whose key (compared
 * unescaped) comes again later in that object left out, and keys written
 * with escapes they do not need ("p\u0069d") written plainly (so that the
 * scanner reads them as the key they are); the rest of the text is as it
 * was but whitespace between tokens. Returns the length (out gets
 * JSONR_PAD zero bytes after it), 0 when there was nothing to change (out
 * is then undefined), or (size_t)-1 when out of memory. *dup: whether a
 * key was met twice (the rest is no repair: the same JSON).
 */
size_t jsonr_dedup(char *out, strview src, bool *dup);

/*
 * The content of the JSON string literal lit (with quotes), unescaped into
 * out (lit.n bytes suffice), as UTF-8 (lone surrogates become U+FFFD).
 * Returns the content length.
 */
size_t jsonr_unescape(char *out, strview lit);

/*
 * Picks the scanner implementation; all give the same results, and any
 * test can run on another with FT_JSONR set: "generic" (the reference
 * state machine alone), "scalar" (+ the event fast path, 8-byte word
 * scans), "sse2" (+ 16-byte SSE2 scans, the default on x86_64), or
 * "best"/NULL. Without a call, the first scan reads the environment
 * variable FT_JSONR (an unknown name there means the best). Returns 0 or
 * -EINVAL (unknown, or not available on this machine).
 */
int jsonr_select(const char *name);

/* A JSON number in microseconds (as ts and dur are) in ns: exact for up to
 * 3 decimals, rounded to the nearest ns beyond. false if v is not a number
 * or out of range. */
bool jsonr_parse_us_ns(strview v, int64_t *ns);

/* An integer: a JSON number without fraction, or a string of decimal
 * digits ("123"). false otherwise. */
bool jsonr_parse_int(strview v, int64_t *out);

static inline bool jsonr_obj_int(const jsonr_obj *o, enum jsonr_key k, int64_t *out)
{
	if (o->has_num >> k & 1) {
		*out = o->num[k];
		return true;
	}
	return jsonr_parse_int(o->v[k], out);
}

static inline bool jsonr_obj_us_ns(const jsonr_obj *o, enum jsonr_key k, int64_t *ns)
{
	if (o->has_num >> k & 1) {
		*ns = o->num[k];
		return true;
	}
	return jsonr_parse_us_ns(o->v[k], ns);
}

#endif /* FT_COMBINE_JSONR_H */
