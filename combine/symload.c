/*
 * symload.c - symtab.h's functions, forwarded to libforktrace-sym.so,
 * which is loaded on the first lookup (why: sym_module.h). Until then a
 * symtab is an empty shell: most traces never look a name up, and making
 * one must not load the module.
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "selfpath.h"
#include "sym_module.h"

struct symtab {
	symtab *impl; /* the module's, made on the first lookup */
};

static const struct ft_sym_api *sym_api;
static pthread_once_t sym_once = PTHREAD_ONCE_INIT;

/* Finds and loads the module once; says why on stderr when it cannot. */
static void sym_load(void)
{
	char path[PATH_MAX];
	const struct ft_sym_api *api;
	void *h;

	if (ft_beside_self(FT_SYM_MODULE_NAME, path, sizeof(path)) < 0) {
		fprintf(stderr, "forktrace: function names are missing: %s is neither next to "
				"the forktrace executable nor in ../lib/forktrace/ from it\n",
			FT_SYM_MODULE_NAME);
		return;
	}
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "forktrace: function names are missing: %s\n", dlerror());
		return;
	}
	api = dlsym(h, FT_SYM_API_SYMBOL);
	if (!api || api->size != sizeof(*api) || strcmp(api->version, FT_VERSION_STRING) != 0) {
		fprintf(stderr, "forktrace: function names are missing: %s is not the one of "
				"forktrace %s\n",
			path, FT_VERSION_STRING);
		dlclose(h);
		return;
	}
	/* Never closed: the names it returned live until symtab_free. */
	sym_api = api;
}

symtab *symtab_new(void)
{
	return calloc(1, sizeof(symtab));
}

void symtab_free(symtab *s)
{
	if (s == NULL)
		return;
	if (s->impl != NULL)
		sym_api->destroy(s->impl);
	free(s);
}

const char *symtab_lookup(symtab *s, const char *path, uint64_t off)
{
	if (s->impl == NULL) {
		pthread_once(&sym_once, sym_load);
		if (sym_api == NULL || (s->impl = sym_api->create()) == NULL)
			return NULL; /* the caller prints module+offset */
	}
	return sym_api->lookup(s->impl, path, off);
}
