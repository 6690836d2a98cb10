/*
 * Known C functions for test_symtab (fixture.h). Each loops so that it is
 * well over 8 bytes long at -O0.
 */
#include "fixture.h"

int symtab_fx_data[64] = {1};

/* Static: in .symtab (and a separate debuginfo's), never in .dynsym. */
static int symtab_fx_hidden(int x)
{
	int s = 0;

	for (int i = 0; i < x; i++)
		s += i * x + symtab_fx_data[i & 63];
	return s;
}

int symtab_fx_alpha(int x)
{
	int s = 1;

	for (int i = 0; i < x; i++)
		s = s * 3 + i;
	return s;
}

int symtab_fx_beta(int x)
{
	return symtab_fx_hidden(x) + symtab_fx_alpha(x);
}

int __symtab_fx_gamma(int x)
{
	int s = 7;

	for (int i = 0; i < x; i++)
		s = s * 5 - i;
	return s;
}

int symtab_fx_gamma(int x) __attribute__((weak, alias("__symtab_fx_gamma")));

void *symtab_fx_static_addr(void)
{
	return (void *)symtab_fx_hidden;
}

/* Last in the file: -O0 keeps top-level order, so this follows the C
 * functions above. */
__asm__(".text\n"
	".globl symtab_fx_nosize\n"
	".type symtab_fx_nosize, %function\n"
	"symtab_fx_nosize:\n"
	".rept 32\n"
	"nop\n"
	".endr\n"
	"ret\n"
	".globl symtab_fx_after\n"
	".type symtab_fx_after, %function\n"
	"symtab_fx_after:\n"
	"ret\n"
	".size symtab_fx_after, .-symtab_fx_after\n"
	".globl _symtab_fx_sized\n"
	".type _symtab_fx_sized, %function\n"
	".globl symtab_fx_label\n"
	".type symtab_fx_label, %function\n"
	"_symtab_fx_sized:\n"
	"symtab_fx_label:\n"
	".rept 7\n"
	"nop\n"
	".endr\n"
	"ret\n"
	".size _symtab_fx_sized, .-_symtab_fx_sized\n"
	".globl symtab_fx_outer\n"
	".type symtab_fx_outer, %function\n"
	"symtab_fx_outer:\n"
	".rept 8\n"
	"nop\n"
	".endr\n"
	".globl symtab_fx_inner\n"
	".type symtab_fx_inner, %function\n"
	"symtab_fx_inner:\n"
	".rept 8\n"
	"nop\n"
	".endr\n"
	".size symtab_fx_inner, .-symtab_fx_inner\n"
	".rept 16\n"
	"nop\n"
	".endr\n"
	"ret\n"
	".size symtab_fx_outer, .-symtab_fx_outer\n");
