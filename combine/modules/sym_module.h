/*
 * sym_module.h - symbol lookup (symtab.c) lives in a module of its own,
 * libforktrace-sym.so, loaded with dlopen the first time a name is looked
 * up (symload.c). It needs elfutils' libdw and libelf, and libstdc++ for
 * its demangler; linked into the forktrace binary, they cost every run,
 * combine and report 0.5 ms of loading (docs/BENCHMARKS.md, "The
 * collector's fixed costs"),
 * though only traces with in-process function events look a name up.
 *
 * The module exports one symbol, FT_SYM_API_SYMBOL, a struct ft_sym_api:
 * symtab.h's functions, on the module's own symtab.
 *
 * Internal to combine/.
 */
#ifndef FT_COMBINE_SYM_MODULE_H
#define FT_COMBINE_SYM_MODULE_H

#include "selfpath.h"
#include "symtab.h"

#define FT_SYM_MODULE_NAME "libforktrace-sym.so"
#define FT_SYM_API_SYMBOL "forktrace_sym_api"

struct ft_sym_api {
	/* sizeof(struct ft_sym_api) and the version of the build that made
	 * the module: a module of another build is refused. */
	struct ft_module_head head;
	symtab *(*create)(void);
	void (*destroy)(symtab *s);
	const char *(*lookup)(symtab *s, const char *path, uint64_t off);
};

#endif /* FT_COMBINE_SYM_MODULE_H */
