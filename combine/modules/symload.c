/*
 * symload.c - symtab.h's functions, forwarded to libforktrace-sym.so,
 * which is loaded on the first lookup (why: sym_module.h). Until then a
 * symtab is an empty shell: most traces never look a name up, and making
 * one must not load the module.
 */
#include <pthread.h>
#include <stdlib.h>

#include "module.h"
#include "sym_module.h"

struct symtab {
	symtab *impl; /* the module's, made on the first lookup */
};

static const struct sym_module_api *sym_api;
static pthread_once_t sym_once = PTHREAD_ONCE_INIT;

/* Loads the module once; says why on stderr when it cannot. Never
 * closed: the names it returned live until symtab_free. */
static void sym_load(void)
{
	sym_api = module_load(SYM_MODULE_NAME, SYM_MODULE_SYMBOL, sizeof(*sym_api),
			      "function names are missing");
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
