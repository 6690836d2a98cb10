/*
 * A buffered output stream on a file descriptor, plain or gzip, with the
 * formatting the JSON writers need (escaped strings, integers, timestamps)
 * done by hand because it is the hot path of writing tens of millions of
 * events: no printf, no per-call allocation.
 *
 * A stream on a file is an ordered pipeline (opipe.h, docs/OUTPUT.md): the
 * caller fills a block of OSTREAM_BLOCK bytes, with text and with deferred
 * slices (ostream_x: a registered prefix and two times, 32 bytes instead
 * of a hundred); a full block goes to the worker threads, which expand the
 * deferred slices into the same bytes the text writers would have written
 * (and compress the block for gzip: gzblock.h), and it is written to the
 * fd in order. At most OSTREAM_INFLIGHT blocks are in the pipeline beside
 * the one being filled, so the memory is bounded: see ostream_open. With
 * FORKTRACE_THREADS=1 the same steps run on the caller's thread and the
 * bytes are the same.
 *
 * Errors are sticky: the first failure (write, deflate, allocation) is
 * kept, later writes are dropped, and ostream_finish returns it. Writers
 * can therefore format a whole event without checking each call and look
 * at ostream_error() once in a while to stop early. A write error found by
 * the pipeline shows in ostream_error() a few blocks later than it
 * happened (when the next block is handed over), and always in
 * ostream_finish.
 *
 * The stream is used by one thread (the pipeline's threads see only the
 * blocks handed to them). Used only inside combine/.
 */
#ifndef FT_COMBINE_OSTREAM_H
#define FT_COMBINE_OSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The first size of a memory stream's buffer (it grows as needed). */
#define OSTREAM_BUF_SIZE (256u * 1024u)

/* A file stream's block: the expanded bytes of one block never exceed it.
 * Large enough that write() and the gzip blocks' dictionaries (32 KiB
 * each) cost little per byte. */
#define OSTREAM_BLOCK (1024u * 1024u)

/* Blocks in the pipeline at most, besides the one being filled. */
#define OSTREAM_INFLIGHT 4u

/* The longest text ostream_i64/u64/ts can produce ("-9223372036854775.808"). */
#define OSTREAM_NUM_MAX 24

/* What a deferred slice adds to its prefix at most: ts, ',"dur":', dur, '}'. */
#define OSTREAM_X_TAIL (2u * OSTREAM_NUM_MAX + 8u)

/* The longest prefix ostream_prefix takes. */
#define OSTREAM_PREFIX_MAX (16u * 1024u)

/* ostream_prefix's answer when it cannot register the text. */
#define OSTREAM_NO_PREFIX UINT32_MAX

/* A deferred slice in a block: prefix text, then ts, ',"dur":', dur, '}'. */
typedef struct ostream_xrec {
	const char *prefix; /* in the stream's prefix store: stable while in flight */
	uint32_t plen;
	uint32_t at; /* its place in the block's text */
	int64_t ts_ns;
	int64_t dur_ns;
} ostream_xrec;

/* A registered prefix, as the filling thread looks it up. */
typedef struct ostream_ptext {
	const char *p;
	uint32_t n;
} ostream_ptext;

struct ostream_pipe;
struct ostream_store;

typedef struct ostream {
	char *buf; /* owned: the block being filled (or a memory stream's text) */
	size_t len;
	size_t cap;       /* buf's room, less what the block's deferred slices may take */
	ostream_xrec *xs; /* the block's deferred slices (none in memory streams) */
	size_t nx, xcap;
	ostream_ptext *ptexts; /* registered prefixes by id */
	size_t nptexts, ptexts_cap;
	size_t prefix_bytes;         /* their text, since the last ostream_prefix_reset */
	int fd;                      /* borrowed: never closed here */
	int err;                     /* first error, 0 or negative errno */
	uint64_t bytes_in;           /* bytes given to the stream (before gzip) */
	uint64_t bytes_out;          /* bytes written to fd */
	struct ostream_pipe *pipe;   /* owned; NULL for a memory stream */
	struct ostream_store *store; /* owned: prefix text, made on first use */
} ostream;

/*
 * Opens a stream on fd (borrowed until ostream_finish). gzip_level < 0
 * writes plain bytes; 0 means the default (no worse than zlib's level 6);
 * 1..9 gzip at that level (gzblock.h). Returns 0, -ENOMEM, or -EINVAL for
 * a level above 9. On failure nothing needs to be released.
 *
 * Memory: OSTREAM_INFLIGHT + 1 blocks at most, each OSTREAM_BLOCK of text,
 * up to OSTREAM_BLOCK of expanded bytes when it holds deferred slices, a
 * third of that for the slices, and gzblock_bound(OSTREAM_BLOCK) for gzip;
 * for gzip also one encoder per thread and 32 KiB per block in flight.
 * About 11 MiB plain, 16 MiB gzip, plus the prefixes (ostream_prefix).
 */
int ostream_open(ostream *o, int fd, int gzip_level);

/*
 * A stream into memory (no fd): the buffer grows as needed; its text is
 * o->buf[0..o->len). For building small JSON texts (event args) with the
 * same writers. ostream_mem_reset empties it; ostream_finish frees it.
 */
static inline int ostream_open_mem(ostream *o)
{
	return ostream_open(o, -1, -1);
}

static inline void ostream_mem_reset(ostream *o)
{
	o->len = 0;
	o->err = 0;
}

/*
 * Flushes what is buffered, ends the gzip member, and releases the
 * stream's memory (always, even on error; fd stays open). Returns the first
 * error the stream saw, or 0.
 */
int ostream_finish(ostream *o);

/* Records err (negative errno) unless an earlier error is already kept. */
void ostream_fail(ostream *o, int err);

/* The first error so far, 0 if none. */
static inline int ostream_error(const ostream *o)
{
	return o->err;
}

/* Bytes written to the fd so far (compressed size for gzip). Complete only
 * after ostream_finish. */
static inline uint64_t ostream_bytes(const ostream *o)
{
	return o->bytes_out;
}

/* Hands the block over to the pipeline (a memory stream: makes room).
 * Returns ostream_error(). Callers normally do not need it. */
int ostream_drain(ostream *o);

/* Slow path of ostream_write: the bytes do not fit in what is left. */
void ostream_write_slow(ostream *o, const void *p, size_t n);

/* Appends n bytes (borrowed for the call). */
static inline void ostream_write(ostream *o, const void *p, size_t n)
{
	if (n <= o->cap - o->len) {
		memcpy(o->buf + o->len, p, n);
		o->len += n;
		return;
	}
	ostream_write_slow(o, p, n);
}

static inline void ostream_putc(ostream *o, char c)
{
	if (o->len == o->cap)
		ostream_drain(o);
	o->buf[o->len++] = c;
}

/* Appends a NUL-terminated string as is (no quoting). */
static inline void ostream_puts(ostream *o, const char *s)
{
	ostream_write(o, s, strlen(s));
}

/*
 * Appends a JSON string literal (with the quotes) for the n bytes at s.
 * The bytes are taken as UTF-8 but need not be valid: argv and paths are
 * whatever the kernel gave. '"', '\\' and control characters are escaped,
 * and every byte that is not part of a well-formed UTF-8 sequence becomes
 * \ufffd, so the output is always valid JSON and valid UTF-8.
 */
void ostream_json_str(ostream *o, const char *s, size_t n);

/* The pieces of ostream_json_str, shared with jsonw_escape: the length of
 * the well-formed UTF-8 sequence at s (n >= 1 bytes, s[0] >= 0x80) or 0
 * if there is none; whether an ASCII byte must be escaped ('"', '\\',
 * controls); and its escape written to out (6 bytes), returning 2 or 6. */
size_t ostream_utf8_len(const char *s, size_t n);
bool ostream_json_needs_escape(unsigned char c);
size_t ostream_json_escape_ascii(char *out, unsigned char c);

/* ostream_json_str for a NUL-terminated string; NULL writes null. */
void ostream_json_cstr(ostream *o, const char *s);

/*
 * ostream_json_str for text inside an HTML <script> element (the report's
 * page data): '<', '>' and '&' become \u003c, \u003e, \u0026, so no
 * "</script>" or "<!--" can appear, and U+2028/U+2029 become escapes.
 */
void ostream_json_str_script(ostream *o, const char *s, size_t n);

/* Appends a decimal integer. */
void ostream_u64(ostream *o, uint64_t v);
void ostream_i64(ostream *o, int64_t v);

/*
 * Appends a time given in nanoseconds as microseconds with exactly three
 * decimals, the unit of Chrome trace events: 1234567 -> 1234.567,
 * -1 -> -0.001, 0 -> 0.000.
 */
void ostream_ts(ostream *o, int64_t ns);

/*
 * Registers text (n bytes, copied) as a prefix of deferred slices and
 * returns its id for ostream_x; ids count from 0 up. The text stays
 * stored until the blocks that use it are written. OSTREAM_NO_PREFIX when
 * n > OSTREAM_PREFIX_MAX or memory runs out (the caller writes text
 * instead; no error is recorded). A memory stream takes prefixes too.
 */
uint32_t ostream_prefix(ostream *o, const char *text, size_t n);

/* Forgets every prefix (their ids may be given again): what bounds the
 * memory of a writer that meets ever new prefixes. */
void ostream_prefix_reset(ostream *o);

/* The bytes of prefix text registered since the last reset. */
static inline size_t ostream_prefix_bytes(const ostream *o)
{
	return o->prefix_bytes;
}

/* Slow path of ostream_x: a new block, or a memory stream. */
void ostream_x_slow(ostream *o, uint32_t prefix, int64_t ts_ns, int64_t dur_ns);

/*
 * Appends a slice whose text is prefix's text, then ts_ns as ostream_ts,
 * ',"dur":', dur_ns as ostream_ts and '}', without formatting it now: a
 * worker expands it when the block is written. prefix: an id
 * ostream_prefix gave since the last reset.
 */
static inline void ostream_x(ostream *o, uint32_t prefix, int64_t ts_ns, int64_t dur_ns)
{
	const ostream_ptext *t = &o->ptexts[prefix];
	size_t need = t->n + OSTREAM_X_TAIL;

	if (o->nx < o->xcap && need <= o->cap - o->len) {
		ostream_xrec *r = &o->xs[o->nx++];

		r->prefix = t->p;
		r->plen = t->n;
		r->at = (uint32_t)o->len;
		r->ts_ns = ts_ns;
		r->dur_ns = dur_ns;
		o->cap -= need;
		return;
	}
	ostream_x_slow(o, prefix, ts_ns, dur_ns);
}

/* Expands one deferred slice into out (at least r->plen + OSTREAM_X_TAIL
 * bytes); returns the length. */
size_t ostream_x_expand(char *out, const ostream_xrec *r);

/* Formats into out (at least OSTREAM_NUM_MAX bytes, not NUL-terminated) and
 * returns the length. The building blocks of the functions above, exposed
 * for tests and for writers that format into their own buffers. */
size_t ostream_fmt_u64(char *out, uint64_t v);
size_t ostream_fmt_i64(char *out, int64_t v);
size_t ostream_fmt_ts(char *out, int64_t ns);

#endif /* FT_COMBINE_OSTREAM_H */
