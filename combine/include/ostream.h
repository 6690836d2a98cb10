/*
 * A buffered output stream on a file descriptor, plain or gzip, with the
 * formatting the JSON writers need (escaped strings, integers, timestamps)
 * done by hand because it is the hot path of writing tens of millions of
 * events: no printf, no per-call allocation.
 *
 * Errors are sticky: the first failure (write, deflate, allocation) is
 * kept, later writes are dropped, and ostream_finish returns it. Writers
 * can therefore format a whole event without checking each call and look
 * at ostream_error() once in a while to stop early.
 *
 * Used only inside combine/.
 */
#ifndef FT_COMBINE_OSTREAM_H
#define FT_COMBINE_OSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Size of the (uncompressed) buffer: big enough that write() and deflate()
 * are called rarely. */
#define OSTREAM_BUF_SIZE (256u * 1024u)

/* The longest text ostream_i64/u64/ts can produce ("-9223372036854775.808"). */
#define OSTREAM_NUM_MAX 24

typedef struct ostream {
	char *buf; /* owned: OSTREAM_BUF_SIZE bytes */
	size_t len;
	size_t cap;
	int fd;             /* borrowed: never closed here */
	int err;            /* first error, 0 or negative errno */
	uint64_t bytes_in;  /* bytes given to the stream (before gzip) */
	uint64_t bytes_out; /* bytes written to fd */
	void *z;            /* owned z_stream when gzip, else NULL */
	char *zbuf;         /* owned deflate output buffer when gzip */
} ostream;

/*
 * Opens a stream on fd (borrowed until ostream_finish). gzip_level < 0
 * writes plain bytes; 0 means zlib's level 6; 1..9 gzip at that level.
 * Returns 0, -ENOMEM, or -EINVAL for a level above 9. On failure nothing
 * needs to be released.
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

/* Empties the buffer into the fd (through deflate when gzip). Returns
 * ostream_error(). Callers normally do not need it. */
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

/* Formats into out (at least OSTREAM_NUM_MAX bytes, not NUL-terminated) and
 * returns the length. The building blocks of the functions above, exposed
 * for tests and for writers that format into their own buffers. */
size_t ostream_fmt_u64(char *out, uint64_t v);
size_t ostream_fmt_i64(char *out, int64_t v);
size_t ostream_fmt_ts(char *out, int64_t ns);

#endif /* FT_COMBINE_OSTREAM_H */
