/*
 * sym_module.c - what libforktrace-sym.so exports (sym_module.h).
 */
#include "sym_module.h"

__attribute__((visibility("default"))) const struct sym_module_api forktrace_sym_api = {
	.head = {sizeof(struct sym_module_api), FT_VERSION_STRING},
	.create = symtab_new,
	.destroy = symtab_free,
	.lookup = symtab_lookup,
};
