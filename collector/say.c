/*
 * say.c - messages to the user.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "say.h"

int say_usage_error(const char *sub, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "forktrace %s: ", sub);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'forktrace %s --help' for more information.\n", sub);
	return SAY_EXIT_USAGE;
}

mode_t say_umask(void)
{
	mode_t m = umask(022);

	umask(m);
	return m;
}

int say_parse_uint(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	for (; *s >= '0' && *s <= '9'; s++) {
		unsigned d = (unsigned)(*s - '0');

		if (v > (max - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	if (*s)
		return -EINVAL;
	*out = v;
	return 0;
}

int say_parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "kmgt";
	const char *end = s, *u;
	unsigned shift = 0;
	char digits[32];
	uint64_t v;
	int rc;

	while (*end >= '0' && *end <= '9')
		end++;
	if (end == s || (size_t)(end - s) >= sizeof(digits))
		return end == s ? -EINVAL : -ERANGE;
	memcpy(digits, s, (size_t)(end - s));
	digits[end - s] = '\0';
	if (*end && (u = strchr(units, *end | 0x20)) != NULL) {
		shift = 10 * (unsigned)(u - units + 1);
		end++;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end)
		return -EINVAL;
	rc = say_parse_uint(digits, UINT64_MAX >> shift, &v);
	if (rc < 0)
		return rc;
	if (v == 0)
		return -EINVAL;
	*out = v << shift;
	return 0;
}

int say_parse_seconds(const char *s, double *out)
{
	char *end;
	double v;

	if (!strcasecmp(s, "inf") || !strcasecmp(s, "infinity")) {
		*out = -1;
		return 0;
	}
	/* Only a decimal number: strtod alone would also take blanks, a
	 * sign, hexadecimal, "nan" and trailing junk. */
	if (!((*s >= '0' && *s <= '9') || (*s == '.' && s[1] >= '0' && s[1] <= '9')) ||
	    strspn(s, "0123456789.eE+-") != strlen(s))
		return -EINVAL;
	v = strtod(s, &end);
	if (*end || v != v || v < 0)
		return -EINVAL;
	/* Past the clamp (or overflowing to HUGE_VAL): as good as forever,
	 * and still a timer libuv can hold in milliseconds. */
	*out = v > SAY_SECONDS_MAX ? SAY_SECONDS_MAX : v;
	return 0;
}

/* The code point of the UTF-8 sequence at p (n bytes left), and its
 * length in *len; -1 when it is not a valid, shortest sequence of a
 * scalar value. */
static int32_t utf8_next(const unsigned char *p, size_t n, size_t *len)
{
	int32_t cp;
	size_t k;

	if (p[0] < 0xc2 || p[0] > 0xf4)
		return -1;
	k = p[0] < 0xe0 ? 2 : p[0] < 0xf0 ? 3 : 4;
	if (n < k)
		return -1;
	cp = p[0] & (0x7f >> k);
	for (size_t i = 1; i < k; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return -1;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((k == 3 && cp < 0x800) || (k == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return -1;
	*len = k;
	return cp;
}

/* Characters a terminal or a reader takes for something else than text. */
static bool invisible_control(int32_t cp)
{
	return (cp >= 0x80 && cp <= 0x9f) || cp == 0x061c || cp == 0x200e || cp == 0x200f ||
	       (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

const char *say_esc_n(const char *s, size_t n)
{
	static char *ring[SAY_ESC_RING];
	static unsigned next;
	const unsigned char *p = (const unsigned char *)s;
	char *out, *o;
	size_t i = 0;

	if (s == NULL)
		return "(null)";
	/* At most 6 bytes out for each byte in (\uHHHH for two). */
	if (n > (SIZE_MAX - 1) / 6 || (out = malloc(6 * n + 1)) == NULL)
		return "(?)";
	free(ring[next]);
	ring[next] = out;
	next = (next + 1) % SAY_ESC_RING;
	o = out;
	while (i < n) {
		size_t len = 1;
		int32_t cp;

		if (p[i] >= 0x20 && p[i] < 0x7f) {
			*o++ = (char)p[i++];
			continue;
		}
		if (p[i] < 0x80) {
			if (p[i] == '\n' || p[i] == '\r' || p[i] == '\t') {
				*o++ = '\\';
				*o++ = p[i] == '\n' ? 'n' : p[i] == '\r' ? 'r' : 't';
			} else {
				o += sprintf(o, "\\x%02x", p[i]);
			}
			i++;
			continue;
		}
		cp = utf8_next(p + i, n - i, &len);
		if (cp < 0) {
			o += sprintf(o, "\\x%02x", p[i]);
			len = 1;
		} else if (invisible_control(cp)) {
			o += sprintf(o, "\\u%04x", (unsigned)cp);
		} else {
			memcpy(o, p + i, len);
			o += len;
		}
		i += len;
	}
	*o = '\0';
	return out;
}

char *say_json_str(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), i = 0;
	char *out, *o;

	/* At most 6 bytes out for each byte in, the quotes and the NUL. */
	if (n > (SIZE_MAX - 3) / 6 || (out = malloc(6 * n + 3)) == NULL)
		return NULL;
	o = out;
	*o++ = '"';
	while (i < n) {
		size_t len = 1;
		int32_t cp;

		if (p[i] >= 0x20 && p[i] < 0x7f) {
			if (p[i] == '"' || p[i] == '\\')
				*o++ = '\\';
			*o++ = (char)p[i++];
			continue;
		}
		if (p[i] < 0x80) {
			o += sprintf(o, "\\u%04x", p[i++]);
			continue;
		}
		cp = utf8_next(p + i, n - i, &len);
		if (cp < 0) {
			/* JSON holds Unicode only: a byte that is none of it
			 * becomes U+FFFD, as the readers repair it. */
			o += sprintf(o, "\\ufffd");
			len = 1;
		} else if (invisible_control(cp)) {
			o += sprintf(o, "\\u%04x", (unsigned)cp);
		} else {
			memcpy(o, p + i, len);
			o += len;
		}
		i += len;
	}
	*o++ = '"';
	*o = '\0';
	return out;
}

const char *say_esc(const char *s)
{
	return s != NULL ? say_esc_n(s, strlen(s)) : "(null)";
}

static char *fmt_slot(void)
{
	static char ring[SAY_FMT_RING][32];
	static unsigned next;
	char *out = ring[next];

	next = (next + 1) % SAY_FMT_RING;
	return out;
}

/* v (>= 0, < 999.5) with three significant digits, no trailing zeros. */
static void fmt3(char *out, size_t size, double v, const char *unit)
{
	int prec = v >= 99.95 ? 0 : v >= 9.995 ? 1 : 2;
	char *e;

	snprintf(out, size, "%.*f", prec, v);
	e = out + strlen(out);
	if (prec > 0) {
		while (e[-1] == '0')
			*--e = '\0';
		if (e[-1] == '.')
			*--e = '\0';
	}
	snprintf(e, size - (size_t)(e - out), " %s", unit);
}

const char *say_duration(int64_t ns)
{
	static const struct {
		double scale;
		const char *unit;
	} units[] = {{1e3, "us"}, {1e6, "ms"}, {1e9, "s"}};
	char *out = fmt_slot();
	const size_t size = 32;

	if (ns < 0)
		return "?";
	if (ns < 1000) {
		snprintf(out, size, "%d ns", (int)ns);
		return out;
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		double v = (double)ns / units[i].scale;

		if (v < 999.5 && (i < 2 || v < 59.95)) {
			fmt3(out, size, v, units[i].unit);
			return out;
		}
	}
	int64_t s = (ns + 500000000) / 1000000000;

	if (s < 3600)
		snprintf(out, size, "%d min %d s", (int)(s / 60), (int)(s % 60));
	else
		snprintf(out, size, "%lld h %02d min", (long long)(s / 3600), (int)(s % 3600 / 60));
	return out;
}

const char *say_size_kib(int64_t kib)
{
	static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
	char *out = fmt_slot();
	double v = (double)kib;
	size_t i = 0;

	if (kib < 0)
		return "?";
	while (v >= 999.5 && i + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		i++;
	}
	if (i == 0)
		snprintf(out, 32, "%lld KiB", (long long)kib);
	else
		fmt3(out, 32, v, units[i]);
	return out;
}

const char *say_count(uint64_t n)
{
	char digits[24], *out = fmt_slot(), *o = out;
	int len = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)n);

	for (int i = 0; i < len; i++) {
		if (i > 0 && (len - i) % 3 == 0)
			*o++ = ',';
		*o++ = digits[i];
	}
	*o = '\0';
	return out;
}

bool say_limit_take(say_limit *l, int64_t source)
{
	size_t i = (size_t)((uint64_t)source * 0x9e3779b97f4a7c15ull >> 56) % SAY_LIMIT_SOURCES;
	size_t slot = SAY_LIMIT_SOURCES;

	/* Open addressing; when the table is full, a source has no count of
	 * its own and is only held to SAY_LIMIT_ALL. */
	for (size_t k = 0; k < SAY_LIMIT_SOURCES; k++, i = (i + 1) % SAY_LIMIT_SOURCES) {
		if (l->pid[i] == source + 1 || l->pid[i] == 0) {
			l->pid[i] = source + 1;
			slot = i;
			break;
		}
	}
	if (slot < SAY_LIMIT_SOURCES && l->count[slot] < UINT32_MAX)
		l->count[slot]++;
	if (l->shown < SAY_LIMIT_ALL &&
	    (slot == SAY_LIMIT_SOURCES || l->count[slot] <= SAY_LIMIT_EACH)) {
		l->shown++;
		return true;
	}
	if (slot == SAY_LIMIT_SOURCES || !l->hid[slot])
		l->hidden_sources++;
	if (slot < SAY_LIMIT_SOURCES)
		l->hid[slot] = true;
	l->hidden++;
	return false;
}

void say_limit_end(say_limit *l, const char *what, const char *unit)
{
	size_t n = strlen(unit);

	if (l->hidden > 0)
		fprintf(stderr, "forktrace: warning: %s: %llu more not shown (from %llu %s%s)\n",
			what, (unsigned long long)l->hidden, (unsigned long long)l->hidden_sources,
			unit,
			l->hidden_sources == 1        ? ""
			: n > 0 && unit[n - 1] == 's' ? "es"
						      : "s");
	memset(l, 0, sizeof(*l));
}

size_t say_count_exits(const model_trace *t, enum model_exit_kind kind)
{
	size_t n = 0;

	for (size_t i = 0; i < t->nprocs; i++)
		n += t->procs[i]->exit_kind == kind;
	return n;
}

void say_report_running(const model_trace *t, const char *why)
{
	size_t n = 0;

	for (size_t i = 0; i < t->nprocs; i++)
		n += t->procs[i]->exit_kind == MODEL_EXIT_RUNNING;
	if (!n)
		return;
	fprintf(stderr,
		"forktrace: %zu process%s still running %s, marked running in the "
		"trace:",
		n, n == 1 ? "" : "es", why);
	size_t shown = 0;
	for (size_t i = 0; i < t->nprocs && shown < 10; i++) {
		const model_process *p = t->procs[i];
		if (p->exit_kind != MODEL_EXIT_RUNNING)
			continue;
		fprintf(stderr, " %lld (%s)", (long long)p->pid, say_esc(model_process_name(p)));
		shown++;
	}
	fprintf(stderr, "%s\n", n > shown ? " ..." : "");
}
