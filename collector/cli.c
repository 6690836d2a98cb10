/*
 * cli.c - messages to the user.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "cli.h"

int cli_usage_error(const char *sub, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "forktrace %s: ", sub);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'forktrace %s --help' for more information.\n", sub);
	return CLI_EXIT_USAGE;
}

mode_t cli_umask(void)
{
	mode_t m = umask(022);

	umask(m);
	return m;
}

int cli_parse_uint(const char *s, uint64_t max, uint64_t *out)
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

int cli_parse_size(const char *s, uint64_t *out)
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
	rc = cli_parse_uint(digits, UINT64_MAX >> shift, &v);
	if (rc < 0)
		return rc;
	if (v == 0)
		return -EINVAL;
	*out = v << shift;
	return 0;
}

int cli_parse_seconds(const char *s, double *out)
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
	*out = v > CLI_SECONDS_MAX ? CLI_SECONDS_MAX : v;
	return 0;
}

void cli_report_running(const model_trace *t, const char *why)
{
	size_t n = 0;

	for (size_t i = 0; i < t->nprocs; i++)
		n += t->procs[i]->exit_kind == MODEL_EXIT_RUNNING;
	if (!n)
		return;
	fprintf(stderr, "forktrace: %zu process%s still running %s, marked running in the "
			"trace:", n, n == 1 ? "" : "es", why);
	size_t shown = 0;
	for (size_t i = 0; i < t->nprocs && shown < 10; i++) {
		const model_process *p = t->procs[i];
		if (p->exit_kind != MODEL_EXIT_RUNNING)
			continue;
		fprintf(stderr, " %lld (%s)", (long long)p->pid, model_process_name(p));
		shown++;
	}
	fprintf(stderr, "%s\n", n > shown ? " ..." : "");
}
