/*
 * critpath.c - the critical path of a trace (critpath.h, docs/INSIGHT.md).
 */
#include <errno.h>
#include <stdlib.h>

#include "critpath.h"

struct critpath {
	int64_t start_ns, end_ns;
	critpath_step *steps;
	size_t nsteps;
};

critpath *critpath_new(void)
{
	critpath *cp = calloc(1, sizeof(*cp));

	if (cp)
		cp->start_ns = cp->end_ns = -1;
	return cp;
}

void critpath_free(critpath *cp)
{
	if (!cp)
		return;
	free(cp->steps);
	free(cp);
}

int critpath_add_process(critpath *cp, int64_t pid, int64_t parent, int64_t start_ns,
			 int64_t end_ns, const char *name)
{
	(void)cp, (void)pid, (void)parent, (void)start_ns, (void)end_ns, (void)name;
	return 0;
}

int critpath_add_wait(critpath *cp, int64_t pid, int64_t child, int64_t ts_ns)
{
	(void)cp, (void)pid, (void)child, (void)ts_ns;
	return 0;
}

int critpath_compute(critpath *cp)
{
	(void)cp;
	return -ENOENT;
}

size_t critpath_steps(const critpath *cp, const critpath_step **out)
{
	*out = cp->steps;
	return cp->nsteps;
}

int64_t critpath_start_ns(const critpath *cp)
{
	return cp->start_ns;
}

int64_t critpath_end_ns(const critpath *cp)
{
	return cp->end_ns;
}
