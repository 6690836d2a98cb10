/*
 * report_opts.c - what `forktrace run --report` and `forktrace report`
 * share: the report options (--include, --exclude, --pids, --hosts).
 */
#include <errno.h>
#include <stdlib.h>

#include "say.h"
#include "internal.h"
#include "sink.h"

static int push(const char ***v, size_t *n, const char *s)
{
	const char **q = realloc(*v, (*n + 2) * sizeof(*q));

	if (q == NULL)
		return -ENOMEM;
	q[(*n)++] = s;
	q[*n] = NULL;
	*v = q;
	return 0;
}

int report_opt(report_opts *ro, int opt, const char *arg)
{
	switch (opt) {
	case REPORT_OPT_INCLUDE:
		return push(&ro->include, &ro->ninclude, arg);
	case REPORT_OPT_EXCLUDE:
		return push(&ro->exclude, &ro->nexclude, arg);
	case REPORT_OPT_PIDS:
		ro->pids = arg;
		return 0;
	case REPORT_OPT_HOSTS:
		ro->hosts = arg;
		return 0;
	default:
		return -EINVAL;
	}
}

int report_check(const report_opts *ro, const char *sub)
{
	htmlw_opts ho = {ro->include, ro->exclude, ro->pids, ro->hosts};
	char msg[512];

	if (htmlw_check_opts(&ho, msg, sizeof(msg)) < 0)
		return say_usage_error(sub, "%s", msg);
	return 0;
}

void report_opts_free(report_opts *ro)
{
	free(ro->include);
	free(ro->exclude);
	ro->include = ro->exclude = NULL;
	ro->ninclude = ro->nexclude = 0;
}
