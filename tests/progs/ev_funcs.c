/*
 * -finstrument-functions under test (tests/e2e/test_events.py): calls
 * across the executable (C and C++), a shared library it links (ev_lib)
 * and one it dlopens (ev_plugin), whose names the trace must show.
 *
 *   ev_funcs calls N    each of c_leaf, lib_add, plugin_mul and
 *                       evns::Widget::poke(int) is called N times
 *   ev_funcs recurse D  recurse() nests D calls deep
 *   ev_funcs named N LEN
 *                       inside one region "all", N regions whose name is
 *                       LEN bytes ("n" then LEN - 1 times "x"), each
 *                       around a call of c_leaf: about LEN bytes of
 *                       records per call, so that a few seconds of
 *                       tracing hold tens of megabytes of records
 *                       (tests/e2e/test_memory.py)
 */
#include <dlfcn.h>
#include <forktrace.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int lib_add(int a, int b);
int cpp_poke(int v);

int c_leaf(int x);
int c_leaf(int x)
{
	return x * 3 + 1;
}

long recurse(long d);
long recurse(long d)
{
	return d <= 1 ? 1 : 1 + recurse(d - 1);
}

int main(int argc, char **argv)
{
	long n = argc >= 3 ? atol(argv[2]) : 0;

	if (argc == 3 && !strcmp(argv[1], "recurse")) {
		printf("depth %ld\n", recurse(n));
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "named")) {
		size_t len = (size_t)atol(argv[3]);
		char *name = malloc(len + 1);
		long sum = 0;

		if (!name || len == 0)
			return 2;
		memset(name, 'x', len);
		name[0] = 'n';
		name[len] = '\0';
		ft_region_begin("all");
		for (long i = 0; i < n; i++) {
			ft_region_begin(name);
			sum += c_leaf((int)i);
			ft_region_end();
		}
		ft_region_end();
		printf("sum %ld\n", sum);
		free(name);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "calls")) {
		char path[4096];
		const char *slash;
		int (*mul)(int, int);
		void *h;
		long sum = 0;

		/* The plugin lies next to this program. */
		if (!realpath("/proc/self/exe", path) || !(slash = strrchr(path, '/')))
			return 3;
		snprintf(path + (slash - path), sizeof(path) - (size_t)(slash - path),
			 "/libev_plugin.so");
		h = dlopen(path, RTLD_NOW);
		if (!h) {
			fprintf(stderr, "dlopen: %s\n", dlerror());
			return 4;
		}
		mul = (int (*)(int, int))dlsym(h, "plugin_mul");
		for (long i = 0; i < n; i++)
			sum += c_leaf((int)i) + lib_add((int)i, 1) + mul((int)i, 2) +
			       cpp_poke((int)i);
		printf("sum %ld\n", sum);
		dlclose(h);
		return 0;
	}
	fprintf(stderr, "usage: ev_funcs calls N | recurse D | named N LEN\n");
	return 2;
}
