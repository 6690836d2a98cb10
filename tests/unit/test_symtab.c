/*
 * test_symtab: function names for file addresses (combine/include/symtab.h).
 *
 * The fixtures (tests/unit/symtab/) hold known functions: C ones, a static
 * one that only .symtab names, a zero-size one written in assembly, and an
 * overloaded C++ one in a namespace. They come as a shared library, its
 * copy stripped to .dynsym, its copy stripped with its debuginfo in a
 * separate file found by .gnu_debuglink, and PIE and non-PIE executables.
 * Offsets are found the way the agent will find them: runtime address
 * minus dl_iterate_phdr's dlpi_addr of the module -- in this process for
 * the library (dlopen), in the executable itself for the executables.
 *
 * Usage: test_symtab LIB STRIPPED_LIB DEBUGLINK_LIB PIE_PROG NOPIE_PROG
 * FT_SYMTAB_BENCH=N sets the number of timed lookups (default 1000000).
 */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <link.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "symtab.h"

/* Checks that off in path resolves to want (NULL: to nothing). */
#define CHECK_NAME(s, path, off, want) check_name(s, path, off, want, __LINE__)

static void check_name(symtab *s, const char *path, uint64_t off, const char *want, int line)
{
	const char *got = symtab_lookup(s, path, off);
	bool ok = want == NULL ? got == NULL : got != NULL && strcmp(got, want) == 0;

	if (!ok)
		check_fail_at(__FILE__, line, "%s+%#" PRIx64 ": got %s, want %s", path, off,
			      got != NULL ? got : "NULL", want != NULL ? want : "NULL");
}

/* The functions every fixture has, by the name the executables print. */
struct fx_offs {
	uint64_t alpha, beta, gamma, hidden, nosize, after, sized, outer, inner, data;
	uint64_t twice_i, twice_d, main;
	bool has_main;
};

/* --- The shared library, in this process. --- */

struct find_mod {
	uintptr_t addr;
	uintptr_t bias;
	bool found;
};

/* Finds the module whose PT_LOAD segments hold addr, as the agent will. */
static int find_mod_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct find_mod *fm = data;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t start = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && fm->addr >= start && fm->addr < start + ph->p_memsz) {
			fm->bias = info->dlpi_addr;
			fm->found = true;
			return 1;
		}
	}
	return 0;
}

static uintptr_t sym_addr(void *h, const char *name)
{
	void *p = dlsym(h, name);

	if (p == NULL) {
		fprintf(stderr, "dlsym %s: %s\n", name, dlerror());
		exit(1);
	}
	return (uintptr_t)p;
}

/* dlopens lib and computes the fixture's offsets in it. */
static void *lib_offsets(const char *lib, struct fx_offs *o)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	void *(*static_addr)(void), *sa;
	struct find_mod fm = {0};

	if (h == NULL) {
		fprintf(stderr, "dlopen %s: %s\n", lib, dlerror());
		exit(1);
	}
	fm.addr = sym_addr(h, "symtab_fx_alpha");
	dl_iterate_phdr(find_mod_cb, &fm);
	if (!fm.found) {
		fprintf(stderr, "%s: not found by dl_iterate_phdr\n", lib);
		exit(1);
	}
	CHECK_MSG(fm.bias != 0, "a shared library is loaded with a bias");
	/* A function pointer from dlsym's void *, as POSIX allows. */
	sa = dlsym(h, "symtab_fx_static_addr");
	if (sa == NULL)
		exit(1);
	memcpy(&static_addr, &sa, sizeof(sa));
	o->alpha = sym_addr(h, "symtab_fx_alpha") - fm.bias;
	o->beta = sym_addr(h, "symtab_fx_beta") - fm.bias;
	o->gamma = sym_addr(h, "__symtab_fx_gamma") - fm.bias;
	o->hidden = (uintptr_t)static_addr() - fm.bias;
	o->nosize = sym_addr(h, "symtab_fx_nosize") - fm.bias;
	o->after = sym_addr(h, "symtab_fx_after") - fm.bias;
	o->sized = sym_addr(h, "_symtab_fx_sized") - fm.bias;
	o->outer = sym_addr(h, "symtab_fx_outer") - fm.bias;
	o->inner = sym_addr(h, "symtab_fx_inner") - fm.bias;
	o->data = sym_addr(h, "symtab_fx_data") - fm.bias;
	o->twice_i = sym_addr(h, "_ZN9symtab_ns5twiceEi") - fm.bias;
	o->twice_d = sym_addr(h, "_ZN9symtab_ns5twiceEd") - fm.bias;
	o->has_main = false;
	return h;
}

/* --- The executables report their own addresses. --- */

static void prog_offsets(const char *prog, bool pie, struct fx_offs *o)
{
	struct {
		const char *name;
		uint64_t *off;
	} map[] = {
		{"symtab_fx_alpha", &o->alpha},
		{"symtab_fx_beta", &o->beta},
		{"symtab_fx_gamma", &o->gamma},
		{"symtab_fx_hidden", &o->hidden},
		{"symtab_fx_nosize", &o->nosize},
		{"symtab_fx_after", &o->after},
		{"symtab_fx_data", &o->data},
		{"_symtab_fx_sized", &o->sized},
		{"symtab_fx_outer", &o->outer},
		{"symtab_fx_inner", &o->inner},
		{"twice_i", &o->twice_i},
		{"twice_d", &o->twice_d},
		{"main", &o->main},
	};
	size_t nmap = sizeof(map) / sizeof(map[0]), seen = 0;
	uint64_t bias = UINT64_MAX;
	char name[64];
	uintmax_t addr;
	FILE *p = popen(prog, "r");

	if (p == NULL) {
		perror(prog);
		exit(1);
	}
	while (fscanf(p, "%63s %jx", name, &addr) == 2) {
		if (strcmp(name, "bias") == 0) {
			bias = addr;
			continue;
		}
		for (size_t i = 0; i < nmap; i++)
			if (strcmp(name, map[i].name) == 0) {
				*map[i].off = addr - bias;
				seen++;
			}
	}
	if (pclose(p) != 0 || bias == UINT64_MAX || seen != nmap) {
		fprintf(stderr, "%s: bad output (%zu of %zu addresses)\n", prog, seen, nmap);
		exit(1);
	}
	/* Proves the fixture is what its name says: a PIE is loaded at a
	 * bias, a non-PIE executable at its link address. */
	CHECK_MSG(pie ? bias != 0 : bias == 0, "%s: bias %#" PRIx64, prog, bias);
	o->has_main = true;
}

/* --- The checks. --- */

/* Everything a file with a full .symtab (or its debuginfo) must name. */
static void check_full(symtab *s, const char *path, const struct fx_offs *o)
{
	const char *a1, *a2;

	CHECK_NAME(s, path, o->alpha, "symtab_fx_alpha");
	CHECK_NAME(s, path, o->alpha + 8, "symtab_fx_alpha");
	CHECK_NAME(s, path, o->beta, "symtab_fx_beta");
	CHECK_NAME(s, path, o->beta + 8, "symtab_fx_beta");
	/* Of two names, the one without underscores. */
	CHECK_NAME(s, path, o->gamma, "symtab_fx_gamma");
	CHECK_NAME(s, path, o->gamma + 8, "symtab_fx_gamma");
	/* Only .symtab names a static function. */
	CHECK_NAME(s, path, o->hidden, "symtab_fx_hidden");
	CHECK_NAME(s, path, o->hidden + 8, "symtab_fx_hidden");
	/* Demangled, and the overloads told apart. */
	CHECK_NAME(s, path, o->twice_i, "symtab_ns::twice(int)");
	CHECK_NAME(s, path, o->twice_i + 8, "symtab_ns::twice(int)");
	CHECK_NAME(s, path, o->twice_d, "symtab_ns::twice(double)");
	CHECK_NAME(s, path, o->twice_d + 8, "symtab_ns::twice(double)");
	/* A zero-size symbol covers up to the next symbol, which starts
	 * right after its 33 bytes. */
	CHECK_NAME(s, path, o->nosize, "symtab_fx_nosize");
	CHECK_NAME(s, path, o->nosize + 16, "symtab_fx_nosize");
	CHECK_NAME(s, path, o->nosize + 32, "symtab_fx_nosize");
	CHECK_NAME(s, path, o->after, "symtab_fx_after");
	/* Of a sized and a zero-size name, the sized one, although the other
	 * has fewer underscores. */
	CHECK_NAME(s, path, o->sized, "_symtab_fx_sized");
	CHECK_NAME(s, path, o->sized + 4, "_symtab_fx_sized");
	/* Nested symbols: the inner one inside it, the outer one around. */
	CHECK_NAME(s, path, o->outer + 4, "symtab_fx_outer");
	CHECK_NAME(s, path, o->inner, "symtab_fx_inner");
	CHECK_NAME(s, path, o->inner + 7, "symtab_fx_inner");
	CHECK_NAME(s, path, o->inner + 8, "symtab_fx_outer");
	CHECK_NAME(s, path, o->outer + 32, "symtab_fx_outer");
	if (o->has_main)
		CHECK_NAME(s, path, o->main, "main");
	/* Data, the ELF header, and far past every section: no function. */
	CHECK_NAME(s, path, o->data, NULL);
	CHECK_NAME(s, path, o->data + 16, NULL);
	CHECK_NAME(s, path, 0, NULL);
	CHECK_NAME(s, path, o->data + ((uint64_t)1 << 32), NULL);
	CHECK_NAME(s, path, UINT64_MAX, NULL);

	/* The name is borrowed from the cache: the same pointer each time. */
	a1 = symtab_lookup(s, path, o->twice_i + 1);
	a2 = symtab_lookup(s, path, o->twice_i + 2);
	CHECK_MSG(a1 != NULL && a1 == a2 && a1 == symtab_lookup(s, path, o->twice_i + 1),
		  "%s: one stable name per function", path);
}

/* The library stripped to .dynsym: exported functions only. */
static void check_dynsym(symtab *s, const char *path, const struct fx_offs *o)
{
	CHECK_NAME(s, path, o->alpha, "symtab_fx_alpha");
	CHECK_NAME(s, path, o->beta + 8, "symtab_fx_beta");
	CHECK_NAME(s, path, o->gamma + 8, "symtab_fx_gamma");
	CHECK_NAME(s, path, o->twice_i + 8, "symtab_ns::twice(int)");
	CHECK_NAME(s, path, o->twice_d, "symtab_ns::twice(double)");
	CHECK_NAME(s, path, o->nosize + 16, "symtab_fx_nosize");
	CHECK_NAME(s, path, o->sized + 4, "_symtab_fx_sized");
	CHECK_NAME(s, path, o->inner + 8, "symtab_fx_outer");
	CHECK_NAME(s, path, o->hidden, NULL);
	CHECK_NAME(s, path, o->data, NULL);
}

/* Every address of [from, to) in order, then the known ones again: the
 * address cache grows many times over and must still answer right. */
static void check_many(symtab *s, const char *path, const struct fx_offs *o, uint64_t from,
		       uint64_t to)
{
	size_t named = 0;

	for (uint64_t off = from; off < to; off++)
		named += symtab_lookup(s, path, off) != NULL;
	CHECK_MSG(named > 0, "%s: no name in [%#" PRIx64 ", %#" PRIx64 ")", path, from, to);
	check_full(s, path, o);
}

/* Unreadable paths give NULL, and a failure is cached: a file that
 * appears at the path later is not read by the same symtab. A file read
 * once is not read again either: removing it changes nothing. */
static void check_failures(const char *lib, const struct fx_offs *o)
{
	char dir[] = "/tmp/test_symtab.XXXXXX", path[sizeof(dir) + 16], junk[sizeof(dir) + 16];
	char cmd[1024];
	symtab *s = symtab_new(), *s2 = symtab_new();
	FILE *f;

	if (s == NULL || s2 == NULL || mkdtemp(dir) == NULL) {
		perror("setup");
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/lib.so", dir);
	snprintf(junk, sizeof(junk), "%s/junk", dir);

	CHECK_NAME(s, "/nonexistent/libnothing.so", 0x1000, NULL);
	CHECK_NAME(s, "/dev/null", 0, NULL);
	CHECK_NAME(s, "/", 0, NULL);
	CHECK_NAME(s, "", 0, NULL);
	f = fopen(junk, "w");
	if (f == NULL || fputs("not an ELF file\n", f) < 0 || fclose(f) != 0) {
		perror(junk);
		exit(1);
	}
	CHECK_NAME(s, junk, 0, NULL);

	CHECK_NAME(s, path, o->alpha, NULL);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", lib, path);
	if (system(cmd) != 0) {
		fprintf(stderr, "%s failed\n", cmd);
		exit(1);
	}
	CHECK_NAME(s, path, o->beta, NULL);
	CHECK_NAME(s2, path, o->alpha, "symtab_fx_alpha");

	if (unlink(path) != 0 || unlink(junk) != 0 || rmdir(dir) != 0) {
		perror(dir);
		exit(1);
	}
	CHECK_NAME(s2, path, o->beta, "symtab_fx_beta");
	CHECK_NAME(s2, path, o->twice_d, "symtab_ns::twice(double)");

	/* Many files: the file table grows and keeps what it held. */
	for (int i = 0; i < 100; i++) {
		snprintf(junk, sizeof(junk), "/nonexistent/%d", i);
		CHECK_NAME(s2, junk, 0, NULL);
	}
	CHECK_NAME(s2, path, o->hidden, "symtab_fx_hidden");
	CHECK_NAME(s2, path, o->alpha, "symtab_fx_alpha");

	symtab_free(s2);
	symtab_free(s);
	symtab_free(NULL);
}

/* --- Speed. --- */

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Cached lookups of the fixture's functions: in one file, as runs of one
 * module's addresses are, and alternating between two files. */
static void bench(const char *lib, const char *prog, const struct fx_offs *lo,
		  const struct fx_offs *po, long n)
{
	const uint64_t loffs[8] = {lo->alpha,       lo->beta,       lo->hidden + 4, lo->twice_i,
				   lo->twice_d + 8, lo->nosize + 3, lo->after,      lo->alpha + 2};
	const uint64_t poffs[8] = {po->alpha,       po->beta,       po->hidden + 4, po->twice_i,
				   po->twice_d + 8, po->nosize + 3, po->after,      po->main};
	symtab *s = symtab_new();
	size_t sum = 0;
	double t0, t1, t2;

	if (s == NULL)
		exit(1);
	t0 = now_ns();
	sum += strlen(symtab_lookup(s, lib, lo->alpha));
	sum += strlen(symtab_lookup(s, prog, po->alpha));
	t1 = now_ns();
	printf("symtab: first lookups (2 files read): %.0f us\n", (t1 - t0) / 1e3);

	t0 = now_ns();
	for (long i = 0; i < n; i++)
		sum += (size_t)(uintptr_t)symtab_lookup(s, lib, loffs[i & 7]);
	t1 = now_ns();
	for (long i = 0; i < n; i++) {
		if (i & 1)
			sum += (size_t)(uintptr_t)symtab_lookup(s, prog, poffs[i & 7]);
		else
			sum += (size_t)(uintptr_t)symtab_lookup(s, lib, loffs[i & 7]);
	}
	t2 = now_ns();
	printf("symtab: %ld cached lookups: %.1f ns/lookup in one file, "
	       "%.1f ns/lookup alternating two files (checksum %zx)\n",
	       n, (t1 - t0) / (double)n, (t2 - t1) / (double)n, sum);
	symtab_free(s);
}

/* Reading big real files and resolving many distinct addresses in them
 * (each goes through the binary search once). Only with FT_SYMTAB_BENCH. */
struct big_file {
	const char *want;
	char path[512];
	uint64_t size;
};

static int find_big_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct big_file *b = data;

	(void)size;
	if (strstr(info->dlpi_name, b->want) == NULL)
		return 0;
	snprintf(b->path, sizeof(b->path), "%s", info->dlpi_name);
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_LOAD &&
		    info->dlpi_phdr[i].p_vaddr + info->dlpi_phdr[i].p_memsz > b->size)
			b->size = info->dlpi_phdr[i].p_vaddr + info->dlpi_phdr[i].p_memsz;
	return 1;
}

static void bench_big(const char *want, long n)
{
	struct big_file b = {.want = want};
	symtab *s = symtab_new();
	uint64_t x = 88172645463325252ull;
	size_t named = 0;
	double t0, t1, t2;

	dl_iterate_phdr(find_big_cb, &b);
	if (b.path[0] == '\0' || s == NULL)
		return;
	t0 = now_ns();
	symtab_lookup(s, b.path, 0);
	t1 = now_ns();
	for (long i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		named += symtab_lookup(s, b.path, x % b.size) != NULL;
	}
	t2 = now_ns();
	printf("symtab: %s: read in %.1f ms; %ld random lookups (mostly distinct, %zu named): "
	       "%.1f ns/lookup\n",
	       b.path, (t1 - t0) / 1e6, n, named, (t2 - t1) / (double)n);
	symtab_free(s);
}

int main(int argc, char **argv)
{
	struct fx_offs lo, pie, nopie;
	const char *bench_env = getenv("FT_SYMTAB_BENCH");
	long n = bench_env != NULL ? atol(bench_env) : 1000000;
	symtab *s;
	void *h;

	if (argc != 6) {
		fprintf(stderr, "usage: %s LIB STRIPPED_LIB DEBUGLINK_LIB PIE_PROG NOPIE_PROG\n",
			argv[0]);
		return 2;
	}
	h = lib_offsets(argv[1], &lo);
	prog_offsets(argv[4], true, &pie);
	prog_offsets(argv[5], false, &nopie);

	s = symtab_new();
	if (s == NULL)
		return 1;
	check_full(s, argv[1], &lo);
	check_dynsym(s, argv[2], &lo);
	check_full(s, argv[3], &lo);
	check_full(s, argv[4], &pie);
	check_full(s, argv[5], &nopie);
	/* Back to files already read, after others. */
	check_full(s, argv[1], &lo);
	check_dynsym(s, argv[2], &lo);
	check_many(s, argv[1], &lo, lo.alpha > 4096 ? lo.alpha - 4096 : 0, lo.after + 4096);
	symtab_free(s);

	check_failures(argv[1], &lo);

	if (n > 0)
		bench(argv[1], argv[4], &lo, &pie, n);
	if (bench_env != NULL && n > 0) {
		bench_big("libc.so", n / 10);
		bench_big("libstdc++", n / 10);
	}
	dlclose(h);
	return check_done("test_symtab");
}
