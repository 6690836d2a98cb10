/*
 * module - where the files installed with forktrace are (module_beside_self),
 * and loading the modules among them on demand (module_load).
 */
#ifndef FT_COMBINE_MODULE_H
#define FT_COMBINE_MODULE_H

#include <stddef.h>

/*
 * The canonical path of file `name` shipped with the forktrace executable:
 * next to it (the build tree), or in ../lib/forktrace/ from it (an
 * installed $prefix/bin/forktrace), into out (cap bytes). Returns 0, or
 * -ENOENT when neither exists readable.
 */
int module_beside_self(const char *name, char *out, size_t cap);

/* How every module's exported API struct begins: its size and the version
 * of the build that made it. */
struct module_head {
	size_t size;
	const char *version;
};

/*
 * Loads the module file `name` shipped with forktrace (module_beside_self) and
 * returns its API, the struct exported as `symbol`, which must begin with
 * a struct module_head of `size` and this build's version. Otherwise
 * returns NULL, after one line on stderr, "forktrace: <what>: <why>". The
 * module is never unloaded. Not thread-safe: callers load
 * once (pthread_once).
 */
const void *module_load(const char *name, const char *symbol, size_t size, const char *what);

#endif /* FT_COMBINE_MODULE_H */
