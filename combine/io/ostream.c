/*
 * Buffered, optionally gzip-compressed output with hand-written JSON
 * formatting (ostream.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include <zlib.h>

#include "ostream.h"
#include "vec.h"

/* Deflate output is written in chunks of this size. */
#define OSTREAM_ZBUF_SIZE (256u * 1024u)

void ostream_fail(ostream *o, int err)
{
	if (o->err == 0)
		o->err = err;
}

int ostream_open(ostream *o, int fd, int gzip_level)
{
	z_stream *z = NULL;
	int zret;

	memset(o, 0, sizeof(*o));
	o->fd = fd;
	if (gzip_level > 9)
		return -EINVAL;
	o->buf = malloc(OSTREAM_BUF_SIZE);
	if (o->buf == NULL)
		goto fail_buf;
	o->cap = OSTREAM_BUF_SIZE;
	if (gzip_level < 0)
		return 0;

	z = calloc(1, sizeof(*z));
	if (z == NULL)
		goto fail_z;
	o->zbuf = malloc(OSTREAM_ZBUF_SIZE);
	if (o->zbuf == NULL)
		goto fail_zbuf;
	/* windowBits 15 + 16 asks zlib for a gzip header and trailer instead
	 * of the zlib wrapper, so the output is a .gz file gunzip reads. */
	zret = deflateInit2(z, gzip_level == 0 ? 6 : gzip_level, Z_DEFLATED, 15 + 16, 8,
			    Z_DEFAULT_STRATEGY);
	if (zret != Z_OK)
		goto fail_init;
	o->z = z;
	return 0;

fail_init:
	free(o->zbuf);
	o->zbuf = NULL;
fail_zbuf:
	free(z);
fail_z:
	free(o->buf);
	o->buf = NULL;
fail_buf:
	o->cap = 0;
	return -ENOMEM;
}

/* Writes all n bytes, retrying after signals and short writes (pipes,
 * sockets, full disks report progress piecemeal). */
static int write_all(ostream *o, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(o->fd, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (w == 0)
			return -EIO;
		p += w;
		n -= (size_t)w;
		o->bytes_out += (uint64_t)w;
	}
	return 0;
}

/* Runs deflate over what is pending in z with the given flush mode and
 * writes every output chunk. */
static int deflate_out(ostream *o, int flush)
{
	z_stream *z = o->z;
	int zret, err;

	do {
		z->next_out = (Bytef *)o->zbuf;
		z->avail_out = OSTREAM_ZBUF_SIZE;
		zret = deflate(z, flush);
		if (zret == Z_STREAM_ERROR)
			return -EIO;
		err = write_all(o, o->zbuf, OSTREAM_ZBUF_SIZE - z->avail_out);
		if (err < 0)
			return err;
	} while (z->avail_out == 0 || (flush == Z_FINISH && zret != Z_STREAM_END));
	return 0;
}

int ostream_drain(ostream *o)
{
	size_t n = o->len;
	int err;

	if (o->fd < 0 && o->z == NULL) {
		/* A memory stream: make room instead of writing out. */
		if (o->err || vec_grow(&o->buf, &o->cap, o->cap + 1, 1, OSTREAM_BUF_SIZE) < 0) {
			ostream_fail(o, -ENOMEM);
			o->len = 0; /* keep the writers' room promise; content is lost */
			return o->err;
		}
		return 0;
	}

	/* The buffer is emptied even after an error, so the inline writers
	 * always find room; what they write then is dropped. */
	o->len = 0;
	if (o->err != 0 || n == 0)
		return o->err;
	o->bytes_in += n;
	if (o->z == NULL) {
		err = write_all(o, o->buf, n);
	} else {
		z_stream *z = o->z;

		z->next_in = (Bytef *)o->buf;
		z->avail_in = (uInt)n;
		err = deflate_out(o, Z_NO_FLUSH);
	}
	if (err < 0)
		ostream_fail(o, err);
	return o->err;
}

void ostream_write_slow(ostream *o, const void *p, size_t n)
{
	const char *s = p;

	while (n > 0) {
		size_t room = o->cap - o->len;
		size_t k = n < room ? n : room;

		memcpy(o->buf + o->len, s, k);
		o->len += k;
		s += k;
		n -= k;
		if (n > 0)
			ostream_drain(o);
	}
}

int ostream_finish(ostream *o)
{
	int err;

	if (o->buf != NULL && o->fd >= 0)
		ostream_drain(o);
	if (o->z != NULL) {
		if (o->err == 0) {
			z_stream *z = o->z;

			z->next_in = NULL;
			z->avail_in = 0;
			err = deflate_out(o, Z_FINISH);
			if (err < 0)
				ostream_fail(o, err);
		}
		deflateEnd(o->z);
		free(o->z);
		o->z = NULL;
	}
	free(o->zbuf);
	o->zbuf = NULL;
	free(o->buf);
	o->buf = NULL;
	o->cap = 0;
	o->len = 0;
	return o->err;
}

/* Two ASCII digits for each value 0..99: halves the divisions. */
static const char digits2[201] = "00010203040506070809"
				 "10111213141516171819"
				 "20212223242526272829"
				 "30313233343536373839"
				 "40414243444546474849"
				 "50515253545556575859"
				 "60616263646566676869"
				 "70717273747576777879"
				 "80818283848586878889"
				 "90919293949596979899";

static unsigned count_digits(uint64_t v)
{
	unsigned n = 1;

	for (;;) {
		if (v < 10)
			return n;
		if (v < 100)
			return n + 1;
		if (v < 1000)
			return n + 2;
		if (v < 10000)
			return n + 3;
		v /= 10000;
		n += 4;
	}
}

size_t ostream_fmt_u64(char *out, uint64_t v)
{
	unsigned n = count_digits(v);
	char *p = out + n;

	while (v >= 100) {
		unsigned r = (unsigned)(v % 100);

		v /= 100;
		p -= 2;
		memcpy(p, digits2 + 2 * r, 2);
	}
	if (v >= 10) {
		p -= 2;
		memcpy(p, digits2 + 2 * v, 2);
	} else {
		*--p = (char)('0' + v);
	}
	return n;
}

/* The magnitude of v as unsigned, correct for INT64_MIN too. */
static uint64_t magnitude(int64_t v)
{
	return v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
}

size_t ostream_fmt_i64(char *out, int64_t v)
{
	if (v >= 0)
		return ostream_fmt_u64(out, (uint64_t)v);
	out[0] = '-';
	return 1 + ostream_fmt_u64(out + 1, magnitude(v));
}

size_t ostream_fmt_ts(char *out, int64_t ns)
{
	uint64_t m = magnitude(ns);
	unsigned frac = (unsigned)(m % 1000);
	size_t n = 0;

	if (ns < 0)
		out[n++] = '-';
	n += ostream_fmt_u64(out + n, m / 1000);
	out[n++] = '.';
	out[n++] = (char)('0' + frac / 100);
	memcpy(out + n, digits2 + 2 * (frac % 100), 2);
	return n + 2;
}

/* Makes room for OSTREAM_NUM_MAX bytes and returns where they go. */
static char *num_room(ostream *o)
{
	if (o->cap - o->len < OSTREAM_NUM_MAX)
		ostream_drain(o);
	return o->buf + o->len;
}

void ostream_u64(ostream *o, uint64_t v)
{
	o->len += ostream_fmt_u64(num_room(o), v);
}

void ostream_i64(ostream *o, int64_t v)
{
	o->len += ostream_fmt_i64(num_room(o), v);
}

void ostream_ts(ostream *o, int64_t ns)
{
	o->len += ostream_fmt_ts(num_room(o), ns);
}

/*
 * What to do with each byte inside a JSON string: 0 copy as is, 1 a
 * control character or '"' or '\\' to escape, 2 a byte >= 0x80 that starts
 * (or pretends to start) a multi-byte UTF-8 sequence.
 */
static const unsigned char byte_class[256] = {
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x00 */
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x10 */
	0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x20 '"' */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x30 */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x40 */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, /* 0x50 '\\' */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x60 */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x70 */
	2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0x80 */
	2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0x90 */
	2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xa0 */
	2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xb0 */
	2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xc0 */
	2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xd0 */
	2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xe0 */
	2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xf0 */
};

size_t ostream_utf8_len(const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	unsigned char c = s[0];
	unsigned char lo = 0x80, hi = 0xbf;
	size_t len, i;

	/* Unicode's table of well-formed sequences: no overlong forms, no
	 * surrogates, nothing above U+10FFFF. */
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
	} else {
		return 0;
	}
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

bool ostream_json_needs_escape(unsigned char c)
{
	return byte_class[c] == 1;
}

size_t ostream_json_escape_ascii(char *out, unsigned char c)
{
	static const char hex[] = "0123456789abcdef";
	char short_form = 0;

	switch (c) {
	case '"':
		short_form = '"';
		break;
	case '\\':
		short_form = '\\';
		break;
	case '\b':
		short_form = 'b';
		break;
	case '\f':
		short_form = 'f';
		break;
	case '\n':
		short_form = 'n';
		break;
	case '\r':
		short_form = 'r';
		break;
	case '\t':
		short_form = 't';
		break;
	default:
		break;
	}
	out[0] = '\\';
	if (short_form != 0) {
		out[1] = short_form;
		return 2;
	}
	memcpy(out + 1, "u00", 3);
	out[4] = hex[c >> 4];
	out[5] = hex[c & 15];
	return 6;
}

void ostream_json_str(ostream *o, const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0, run = 0;

	ostream_putc(o, '"');
	/* Copy runs of plain bytes in one go; stop only at bytes that need
	 * a decision. */
	while (i < n) {
		size_t len;

		if (byte_class[s[i]] == 0) {
			i++;
			continue;
		}
		ostream_write(o, s + run, i - run);
		if (byte_class[s[i]] == 1) {
			char e[6];

			ostream_write(o, e, ostream_json_escape_ascii(e, s[i]));
			run = ++i;
			continue;
		}
		len = ostream_utf8_len(str + i, n - i);
		if (len == 0) {
			ostream_write(o, "\\ufffd", 6);
			run = ++i;
			continue;
		}
		/* Valid sequence: becomes part of the next run. */
		run = i;
		i += len;
	}
	ostream_write(o, s + run, i - run);
	ostream_putc(o, '"');
}

void ostream_json_cstr(ostream *o, const char *s)
{
	if (s == NULL) {
		ostream_write(o, "null", 4);
		return;
	}
	ostream_json_str(o, s, strlen(s));
}

/*
 * A JSON string literal that is safe inside a <script> element: besides
 * JSON's own escapes, '<', '>' and '&' become \u003c, \u003e, \u0026 (no
 * "</script>" or "<!--" can appear), U+2028/U+2029 become escapes, and
 * malformed UTF-8 becomes \ufffd.
 */
void ostream_json_str_script(ostream *os, const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;

	ostream_putc(os, '"');
	while (i < n) {
		unsigned char c = s[i];

		if (c < 0x80) {
			if (ostream_json_needs_escape(c)) {
				char e[6];

				ostream_write(os, e, ostream_json_escape_ascii(e, c));
			} else if (c == '<' || c == '>' || c == '&') {
				static const char hex[] = "0123456789abcdef";
				char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};

				ostream_write(os, e, 6);
			} else {
				ostream_putc(os, (char)c);
			}
			i++;
			continue;
		}
		size_t len = ostream_utf8_len(str + i, n - i);

		if (len == 0) {
			ostream_write(os, "\\ufffd", 6);
			i++;
		} else if (len == 3 && c == 0xe2 && s[i + 1] == 0x80 && (s[i + 2] & 0xfe) == 0xa8) {
			ostream_write(os, s[i + 2] == 0xa8 ? "\\u2028" : "\\u2029", 6);
			i += 3;
		} else {
			ostream_write(os, str + i, len);
			i += len;
		}
	}
	ostream_putc(os, '"');
}
