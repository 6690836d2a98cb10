/*
 * Known functions for test_symtab (tests/unit/test_symtab.c), built -O0 -g
 * into a shared library and into PIE and non-PIE executables.
 */
#ifndef FT_TESTS_SYMTAB_FIXTURE_H
#define FT_TESTS_SYMTAB_FIXTURE_H

#ifdef __cplusplus
extern "C" {
#endif

/* Exported C functions, longer than the 8 bytes the test probes into. */
int symtab_fx_alpha(int x);
int symtab_fx_beta(int x);
/* One function under two names: the global __symtab_fx_gamma and its weak
 * alias symtab_fx_gamma, the name a lookup must give. */
int __symtab_fx_gamma(int x);
int symtab_fx_gamma(int x);
/* The address of a static function, which only .symtab names. */
void *symtab_fx_static_addr(void);
/* A function symbol without a size (hand-written assembly, no .size): 32
 * nops and a ret, followed at once by symtab_fx_after (1 byte, sized). */
void symtab_fx_nosize(void);
void symtab_fx_after(void);
/* Next, an 8-byte function with two names: the sized _symtab_fx_sized
 * and the zero-size symtab_fx_label; the sized one must be chosen. */
void _symtab_fx_sized(void);
void symtab_fx_label(void);
/* Then symtab_fx_outer (33 bytes) with symtab_fx_inner (8 bytes) inside
 * it at offset 8: nested symbols, as hand-written assembly has. */
void symtab_fx_outer(void);
void symtab_fx_inner(void);
/* Data: an address that is in no function. */
extern int symtab_fx_data[64];

#ifdef __cplusplus
}
#endif

#endif /* FT_TESTS_SYMTAB_FIXTURE_H */
