/*
 * The executable fixture of test_symtab: prints its load bias (the main
 * program's dlpi_addr, 0 for a non-PIE executable) and the runtime
 * addresses of its known functions, one "name 0xaddr" per line.
 */
#include <link.h>
#include <stdint.h>
#include <stdio.h>

#include "fixture.h"

/* symtab_ns::twice(int) and symtab_ns::twice(double), named from C. */
int symtab_twice_i(int x) __asm__("_ZN9symtab_ns5twiceEi");
double symtab_twice_d(double x) __asm__("_ZN9symtab_ns5twiceEd");

/* dl_iterate_phdr reports the main program first. */
static int main_bias(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	*(uintptr_t *)data = info->dlpi_addr;
	return 1;
}

static void print(const char *name, const void *addr)
{
	printf("%s %#jx\n", name, (uintmax_t)(uintptr_t)addr);
}

int main(void)
{
	uintptr_t bias = 0;

	dl_iterate_phdr(main_bias, &bias);
	printf("bias %#jx\n", (uintmax_t)bias);
	print("symtab_fx_alpha", (void *)symtab_fx_alpha);
	print("symtab_fx_beta", (void *)symtab_fx_beta);
	print("symtab_fx_gamma", (void *)symtab_fx_gamma);
	print("symtab_fx_hidden", symtab_fx_static_addr());
	print("symtab_fx_nosize", (void *)symtab_fx_nosize);
	print("symtab_fx_after", (void *)symtab_fx_after);
	print("_symtab_fx_sized", (void *)_symtab_fx_sized);
	print("symtab_fx_outer", (void *)symtab_fx_outer);
	print("symtab_fx_inner", (void *)symtab_fx_inner);
	print("symtab_fx_data", (void *)symtab_fx_data);
	print("twice_i", (void *)symtab_twice_i);
	print("twice_d", (void *)symtab_twice_d);
	print("main", (void *)main);
	return 0;
}
