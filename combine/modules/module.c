/*
 * module.c - where the files installed with forktrace are, and loading the
 * modules among them on demand (module.h).
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "module.h"

int module_beside_self(const char *name, char *out, size_t cap)
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

const void *module_load(const char *name, const char *symbol, size_t size, const char *what)
{
	char path[PATH_MAX];
	const struct module_head *api;
	void *h;

	if (module_beside_self(name, path, sizeof(path)) < 0) {
		fprintf(stderr,
			"forktrace: %s: %s is neither next to the forktrace executable "
			"nor in ../lib/forktrace/ from it\n",
			what, name);
		return NULL;
	}
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "forktrace: %s: %s\n", what, dlerror());
		return NULL;
	}
	api = dlsym(h, symbol);
	if (!api || api->size != size || strcmp(api->version, FT_VERSION_STRING) != 0) {
		fprintf(stderr, "forktrace: %s: %s is not the one of forktrace %s\n", what, path,
			FT_VERSION_STRING);
		dlclose(h);
		return NULL;
	}
	return api;
}
