/*
 * Symbol lookup: function addresses (recorded by the agent for code built
 * with -finstrument-functions) to function names, through elfutils.
 *
 * A symtab is a cache of per-file symbol tables. The first lookup in a
 * file reads its function symbols once with libdwfl (.symtab of the file
 * or of its separate debuginfo -- build-id under /usr/lib/debug/.build-id,
 * or .gnu_debuglink -- else .dynsym) into a sorted array, and closes the
 * file again. Every address asked for is then remembered per file, so the
 * millions of lookups of the few distinct addresses of a trace cost a
 * hash probe each.
 *
 * Not thread-safe: one symtab per thread, or a lock around it.
 * Used only inside combine/.
 */
#ifndef FT_COMBINE_SYMTAB_H
#define FT_COMBINE_SYMTAB_H

#include <stdint.h>

typedef struct symtab symtab;

/* A cache of per-file symbol tables, empty. The caller owns it (free with
 * symtab_free). NULL on allocation failure. */
symtab *symtab_new(void);

/* Frees s, every table it read and every name it returned. NULL is a
 * no-op. */
void symtab_free(symtab *s);

/*
 * The function containing file address off of the ELF file at path
 * (borrowed for the call; the cache keeps its own copy).
 *
 * off is the runtime address minus the module's load bias as
 * dl_iterate_phdr's dlpi_addr gives it: for a non-PIE executable the
 * runtime address itself, for PIE executables and shared objects the
 * address in st_value space.
 *
 * Function symbols only (STT_FUNC, STT_GNU_IFUNC). A symbol covers
 * [st_value, st_value + st_size); a symbol of size 0 covers up to the next
 * function symbol, at most to the end of its section. Of aliases (several
 * symbols at one address) the name is chosen by: sized, fewer leading
 * underscores ("getpid" over "__getpid"), global over weak over local,
 * shorter, then byte order.
 *
 * Returns the name, demangled when it is a C++ name ("ns::f(int)"), C
 * names unchanged; borrowed until symtab_free(s). Returns NULL when no
 * function covers off (the caller then prints module+offset), when the
 * file cannot be read or is not ELF (cached as a failure: never retried,
 * even if the file appears later), or on allocation failure.
 *
 * Each file is opened once, keyed by path: a file replaced on disk after
 * its first lookup is not read again.
 */
const char *symtab_lookup(symtab *s, const char *path, uint64_t off);

#endif /* FT_COMBINE_SYMTAB_H */
