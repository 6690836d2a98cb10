/*
 * selfpath.c - where the files installed with forktrace are (selfpath.h).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "selfpath.h"

int ft_beside_self(const char *name, char *out, size_t cap)
{
	static const char *const dirs[] = {"", "../lib/forktrace/"};
	char self[PATH_MAX], cand[PATH_MAX], real[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n <= 0)
		return -ENOENT;
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0';
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		if ((size_t)snprintf(cand, sizeof(cand), "%s/%s%s", self, dirs[i], name) <
			    sizeof(cand) &&
		    realpath(cand, real) && access(real, R_OK) == 0 &&
		    (size_t)snprintf(out, cap, "%s", real) < cap)
			return 0;
	}
	return -ENOENT;
}
