/*
 * libFuzzer target: the trace reader (combine/reader.c, combine/jsonr.c) on
 * arbitrary bytes. The input is combined twice (so the second copy's pids
 * collide and are remapped) into the JSON sink, and the output must be
 * valid JSON and valid UTF-8, checked by a small strict validator written
 * independently of jsonr. Byte 0 picks the read size (tiny sizes put every
 * token across a read boundary) and --align; the rest is the file.
 * Crashes, leaks, UB, or an invalid output are bugs.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "combine.h"

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

		v->p++;
		ws(v);
		if (v->p < v->end && *v->p == close) {
			v->p++;
			return true;
		}
		for (;;) {
			if (obj) {
				ws(v);
				if (v->p >= v->end || *v->p != '"' || !string(v))
					return false;
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t chunks[] = {0, 1, 2, 3, 5, 8, 17, 64};
	int in = memfd_create("in", 0), out = memfd_create("out", 0), err;
	char path[64];
	const char *paths[2];
	combine_opts o = {0};
	combine_result res;
	trace_sink *s;
	unsigned char *buf;
	off_t n;

	if (size < 1 || in < 0 || out < 0)
		goto out;
	o.chunk = chunks[data[0] & 7];
	o.align = data[0] & 8;
	if (write(in, data + 1, size - 1) != (ssize_t)(size - 1))
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", in);
	paths[0] = paths[1] = path;
	s = sink_json_new(out, -1, &err);
	if (s == NULL)
		abort();
	err = combine_files(paths, 2, &o, s, &res);
	s->free(s);
	if (err != 0)
		abort();
	combine_result_free(&res);
	n = lseek(out, 0, SEEK_END);
	buf = malloc((size_t)n + 1);
	if (buf == NULL || pread(out, buf, (size_t)n, 0) != n)
		abort();
	{
		val v = {buf, buf + n};

		if (!value(&v, 0))
			abort(); /* the output is not valid JSON / UTF-8 */
		ws(&v);
		if (v.p != v.end)
			abort();
	}
	free(buf);
out:
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return 0;
}
