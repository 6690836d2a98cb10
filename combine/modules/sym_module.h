/*
 * sym_module.h - symbol lookup (symtab.c) lives in a module of its own,
 * libforktrace-sym.so, loaded with dlopen the first time a name is looked
 * up (symload.c). It needs elfutils' libdw and libelf, and libstdc++ for
 * its demangler; linked into the forktrace binary, they cost every run,
 * combine and report 0.5 ms of loading (docs/BENCHMARKS.md, "The
 * collector's fixed costs"),
 * though only traces with in-process function events look a name up.
 *
 * The module exports one symbol, SYM_MODULE_SYMBOL, a struct sym_module_api:
 * symtab.h's functions, on the module's own symtab.
 *
 * Private to combine/modules/.
 */
#ifndef FT_COMBINE_SYM_MODULE_H
#define FT_COMBINE_SYM_MODULE_H

#include "module.h"
#include "symtab.h"

#define SYM_MODULE_NAME "libforktrace-sym.so"
#define SYM_MODULE_SYMBOL "forktrace_sym_api"

struct sym_module_api {
	/* sizeof(struct sym_module_api) and the version of the build that made
	 * the module: a module of another build is refused. */
	struct module_head head;
	symtab *(*create)(void);
	void (*destroy)(symtab *s);
	const char *(*lookup)(symtab *s, const char *path, uint64_t off);
};

#endif /* FT_COMBINE_SYM_MODULE_H */
