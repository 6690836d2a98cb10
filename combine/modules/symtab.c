/*
 * Function names for addresses, from ELF symbol tables read with libdwfl
 * (symtab.h).
 *
 * Each file is read once: libdwfl finds its best symbol table (.symtab of
 * the file, else .symtab of its separate debuginfo, else .dynsym), and the
 * function symbols are copied into a sorted array so that the file and its
 * debuginfo can be closed at once -- a trace can name hundreds of modules,
 * and keeping each one's Dwfl open would hold as many descriptors and
 * mappings. Lookups binary-search that array once per distinct address;
 * a per-file hash of the addresses already asked for answers the rest.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <elfutils/libdwfl.h>
#include <gelf.h>

#include "htab.h"
#include "regfile.h"
#include "symtab.h"

/*
 * libstdc++'s demangler, abi::__cxa_demangle from <cxxabi.h>, which a C
 * file cannot include; it has C linkage. Returns a malloc'd string and sets
 * *status to 0, or returns NULL with *status -1 (no memory), -2 (not a
 * mangled name) or -3 (bad argument).
 */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

/* One function: [start, end) in st_value space. */
struct sym_func {
	uint64_t start;
	uint64_t end;
	uint64_t cover;  /* the largest end of this entry and all before it */
	const char *raw; /* the symbol's name, in the file's name arena */
	char *name;      /* raw, or the demangled name (owned); NULL until asked */
};

/* Slots of a file's address cache when it is first needed. */
#define ADDR_CACHE_MIN 256u

/* Slots of the file table when it is first needed. */
#define FILE_TABLE_MIN 16u

/* What a file's address cache holds for an address without a function
 * (an htab value is never 0). */
static const char no_function[1];

/* Files of the latest lookups kept for a quick path comparison. */
#define RECENT_FILES 4

/* The multiplier of hash_path. */
#define HASH_MULT 0x9E3779B97F4A7C15ull

/* A file read once. funcs == NULL (nfuncs 0) both for a file that could not
 * be read and for one without function symbols: either way nothing is
 * found there, and it is never read again. */
struct sym_file {
	char *path; /* owned */
	size_t path_len;
	struct sym_func *funcs; /* owned, sorted by start, starts distinct */
	size_t nfuncs;
	char *names; /* owned: every raw name, NUL-terminated */
	/* The answers already given: offset -> name, or no_function. */
	htab cache;
};

struct symtab {
	htab files; /* hash_path -> struct sym_file * (owned) */
	/* The files of the latest lookups, most recent first: a trace's
	 * addresses come in runs from a few modules (the program, libc, a
	 * library), and comparing a path with a few recent ones costs less
	 * than hashing it. */
	struct sym_file *recent[RECENT_FILES];
};

/* A symbol while a file is being read: names are borrowed from libdwfl
 * until dwfl_end. */
struct sym_raw {
	uint64_t start;
	uint64_t size;
	uint64_t sec_end; /* end of the symbol's section, 0 if unknown */
	const char *name;
	size_t name_len;
	unsigned rank; /* lower is preferred among aliases (see sym_rank) */
	unsigned underscores;
};

/* Whether dir/sub/name is absent or a regular file. */
static bool candidate_safe(const char *dir, size_t dlen, const char *sub, const char *name)
{
	char path[4096];
	struct stat st;
	int n = snprintf(path, sizeof(path), "%.*s%s%s%s", (int)dlen, dir, dlen ? "/" : "", sub,
			 name);

	if (n < 0 || (size_t)n >= sizeof(path))
		return false;
	return stat(path, &st) < 0 ? errno == ENOENT || errno == ENOTDIR : S_ISREG(st.st_mode);
}

/*
 * find_debuginfo: dwfl_standard_find_debuginfo, unless a file it would
 * open by name in the module's own directory is not a regular file.
 * libdwfl opens those candidates with a blocking open(2), and the module
 * path, its directory and the .gnu_debuglink name inside it all come from
 * the traced program: a FIFO there would hang the trace writing, a device
 * would be opened. So separate debuginfo is looked for only when the
 * candidates in that directory (DIR/LINK, DIR/.debug/LINK, with no link
 * also DIR/.debug/BASE) are absent or regular files, and the link is a
 * plain file name (one with '/' could lead anywhere); under
 * /usr/lib/debug (the system's) and by build-id it is looked for as
 * always. A file swapped in after this check is the one case left.
 */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			  const char *file_name, const char *debuglink, GElf_Word crc,
			  char **debuginfo_file_name)
{
	const char *slash = file_name != NULL ? strrchr(file_name, '/') : NULL;
	const char *bname = slash != NULL ? slash + 1 : file_name;
	size_t dlen = slash != NULL ? (size_t)(slash - file_name) : 0;
	char dflt[512];

	if (file_name == NULL)
		return -1;
	if (slash == file_name)
		dlen = 1; /* a module in / */
	if (debuglink != NULL && strchr(debuglink, '/') != NULL)
		return -1;
	if (debuglink == NULL) {
		int n = snprintf(dflt, sizeof(dflt), "%s.debug", bname);

		if (n < 0 || (size_t)n >= sizeof(dflt) ||
		    !candidate_safe(file_name, dlen, ".debug/", bname))
			return -1;
		debuglink = dflt;
	}
	if (!candidate_safe(file_name, dlen, "", debuglink) ||
	    !candidate_safe(file_name, dlen, ".debug/", debuglink))
		return -1;
	return dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name, debuglink, crc,
					    debuginfo_file_name);
}

/* The callbacks of a Dwfl that reads files offline. The ELF file itself is
 * handed to dwfl_report_elf, so find_elf only matters for files libdwfl
 * looks up by build-id; find_debuginfo looks for separate debuginfo by
 * build-id and .gnu_debuglink in the default path
 * (":.debug:/usr/lib/debug"). */
static const Dwfl_Callbacks symtab_dwfl_callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = find_debuginfo,
	.section_address = dwfl_offline_section_address,
};

symtab *symtab_new(void)
{
	symtab *s = calloc(1, sizeof(symtab));

	if (s != NULL)
		s->files.first = FILE_TABLE_MIN;
	return s;
}

static void file_free(struct sym_file *f)
{
	if (f == NULL)
		return;
	for (size_t i = 0; i < f->nfuncs; i++)
		if (f->funcs[i].name != f->funcs[i].raw)
			free(f->funcs[i].name);
	free(f->funcs);
	free(f->names);
	htab_free(&f->cache);
	free(f->path);
	free(f);
}

void symtab_free(symtab *s)
{
	if (s == NULL)
		return;
	size_t pos = 0;
	uint64_t f;

	while (htab_each(&s->files, &pos, NULL, &f))
		file_free((struct sym_file *)(uintptr_t)f);
	htab_free(&s->files);
	free(s);
}

/* Hashes the n bytes of a path eight at a time: a byte-at-a-time hash of
 * a long path costs more than the rest of a lookup. */
static uint64_t hash_path(const char *p, size_t n)
{
	uint64_t h = n * HASH_MULT, w;

	for (; n >= 8; p += 8, n -= 8) {
		memcpy(&w, p, 8);
		h = (h ^ w) * HASH_MULT;
		h ^= h >> 29;
	}
	w = 0;
	memcpy(&w, p, n);
	h = (h ^ w) * HASH_MULT;
	return h ^ (h >> 32);
}

/* Preference among aliases at one address, lower first: a global name is
 * the one a program's author wrote and exported, weak ones are usually
 * aliases of it, locals are the compiler's or linker's. */
static unsigned sym_rank(const GElf_Sym *sym)
{
	switch (GELF_ST_BIND(sym->st_info)) {
	case STB_GLOBAL:
	case STB_GNU_UNIQUE:
		return 0;
	case STB_WEAK:
		return 1;
	default:
		return 2;
	}
}

/* Sorts by address, and at one address puts the preferred alias first:
 * sized (its extent is known), then fewer leading underscores (the name a
 * person calls: glibc exports "getpid" as a weak alias of the global
 * "__getpid"), then by rank, then the shorter name, then byte order, so
 * the choice never depends on the order of the symbol table. */
static int sym_raw_cmp(const void *pa, const void *pb)
{
	const struct sym_raw *a = pa, *b = pb;

	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	if ((a->size == 0) != (b->size == 0))
		return a->size != 0 ? -1 : 1;
	if (a->underscores != b->underscores)
		return a->underscores < b->underscores ? -1 : 1;
	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	if (a->name_len != b->name_len)
		return a->name_len < b->name_len ? -1 : 1;
	return strcmp(a->name, b->name);
}

/* The end (in module addresses) of section shndx of elf, or 0 if unknown.
 * Bounds zero-size symbols, which otherwise would run on over the gap to
 * the next section's first function. */
static uint64_t section_end(Elf *elf, GElf_Word shndx, Dwarf_Addr bias)
{
	Elf_Scn *scn = elf != NULL ? elf_getscn(elf, shndx) : NULL;
	GElf_Shdr shdr;

	if (scn == NULL || gelf_getshdr(scn, &shdr) == NULL)
		return 0;
	return shdr.sh_addr + shdr.sh_size + bias;
}

/* Whether a symbol table entry is a function defined in this file (not an
 * import, not in a non-allocated section). */
static bool sym_is_func(const GElf_Sym *sym, GElf_Word shndx, const char *name)
{
	unsigned type = GELF_ST_TYPE(sym->st_info);

	if (name == NULL || name[0] == '\0')
		return false;
	if (type != STT_FUNC && type != STT_GNU_IFUNC)
		return false;
	return shndx != SHN_UNDEF && shndx != SHN_ABS && shndx != SHN_COMMON &&
	       shndx != (GElf_Word)-1;
}

/* Collects the function symbols of mod into *out (malloc'd, caller owns;
 * names borrowed from mod). Returns the count (0 with *out NULL when there
 * is none) or -ENOMEM. */
static long collect_syms(Dwfl_Module *mod, struct sym_raw **out)
{
	int nsyms = dwfl_module_getsymtab(mod);
	struct sym_raw *raw;
	long n = 0;

	*out = NULL;
	if (nsyms <= 0)
		return 0;
	raw = malloc((size_t)nsyms * sizeof(*raw));
	if (raw == NULL)
		return -ENOMEM;
	for (int i = 0; i < nsyms; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		Elf *elf = NULL;
		Dwarf_Addr bias = 0;
		const char *name = dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, &elf,
							   &bias);
		struct sym_raw *r = &raw[n];

		if (!sym_is_func(&sym, shndx, name))
			continue;
		r->start = addr;
		r->size = sym.st_size;
		r->sec_end = section_end(elf, shndx, bias);
		r->name = name;
		r->name_len = strlen(name);
		r->rank = sym_rank(&sym);
		r->underscores = (unsigned)strspn(name, "_");
		n++;
	}
	if (n == 0) {
		free(raw);
		raw = NULL;
	}
	*out = raw;
	return n;
}

/* The end of raw[i] once aliases are gone: its own size, or for a zero-size
 * symbol the next function's start bounded by its section, and at least
 * one byte so that the symbol's own address always finds it. */
static uint64_t sym_end(const struct sym_raw *r, const struct sym_raw *next)
{
	uint64_t end = next != NULL ? next->start : 0; /* 0: unknown */

	if (r->size != 0)
		return r->start + r->size < r->start ? UINT64_MAX : r->start + r->size;
	if (r->sec_end != 0 && (end == 0 || r->sec_end < end))
		end = r->sec_end;
	return end > r->start ? end : r->start + 1;
}

/*
 * Turns the n collected symbols (sorted) into f->funcs and f->names, one
 * entry per address, copying the names because libdwfl's go away with the
 * Dwfl. Returns 0 or -ENOMEM (f unchanged).
 */
static int build_funcs(struct sym_file *f, const struct sym_raw *raw, size_t n)
{
	struct sym_func *funcs;
	size_t nf = 0, arena = 0;
	char *names, *p;
	uint64_t cover = 0;

	/* Keep only the first (preferred) symbol at each address. */
	for (size_t i = 0; i < n; i++)
		if (i == 0 || raw[i].start != raw[i - 1].start)
			arena += raw[i].name_len + 1;
	names = malloc(arena);
	if (names == NULL)
		goto fail_names;
	funcs = malloc(n * sizeof(*funcs));
	if (funcs == NULL)
		goto fail_funcs;

	p = names;
	for (size_t i = 0; i < n; i++) {
		const struct sym_raw *next = NULL;
		struct sym_func *fn;

		if (i > 0 && raw[i].start == raw[i - 1].start)
			continue;
		for (size_t j = i + 1; j < n && next == NULL; j++)
			if (raw[j].start != raw[i].start)
				next = &raw[j];
		fn = &funcs[nf++];
		fn->start = raw[i].start;
		fn->end = sym_end(&raw[i], next);
		cover = fn->end > cover ? fn->end : cover;
		fn->cover = cover;
		memcpy(p, raw[i].name, raw[i].name_len + 1);
		fn->raw = p;
		fn->name = NULL;
		p += raw[i].name_len + 1;
	}
	/* Aliases left unused entries at the end; a failure to shrink only
	 * keeps them. */
	if (nf < n) {
		struct sym_func *shrunk = realloc(funcs, nf * sizeof(*funcs));

		if (shrunk != NULL)
			funcs = shrunk;
	}
	f->funcs = funcs;
	f->nfuncs = nf;
	f->names = names;
	return 0;

fail_funcs:
	free(names);
fail_names:
	return -ENOMEM;
}

/*
 * Reads the function symbols of f->path. On failure f keeps no functions,
 * which is the cached failure. Returns 0, -ENOEXEC when the file cannot be
 * opened, is not a regular file or is not ELF, or -ENOMEM.
 *
 * The path comes from a traced program (a MODULE frame), which may have
 * put a FIFO, a device or a directory there: libdwfl gets the fd of a
 * regular file (regfile_open), never the path to open.
 *
 * The module is reported at base 0 with p_vaddr added, so its addresses
 * are st_value addresses whatever its type: ET_EXEC files sit at their
 * link addresses anyway, and for ET_DYN (PIE, shared objects, also
 * prelinked ones) libdwfl's bias is then 0.
 */
static int file_load(struct sym_file *f)
{
	struct sym_raw *raw = NULL;
	Dwfl_Module *mod;
	Dwfl *dwfl;
	long n;
	int err, fd;
	char magic[SELFMAG];

	fd = regfile_open(f->path);
	if (fd < 0)
		return -ENOEXEC;
	/* An ELF file or nothing: libdwfl would try to decompress anything
	 * else (gzip, bzip2, xz, zstd) into memory, a bomb's whole output. */
	if (pread(fd, magic, SELFMAG, 0) != SELFMAG || memcmp(magic, ELFMAG, SELFMAG) != 0) {
		close(fd);
		return -ENOEXEC;
	}
	dwfl = dwfl_begin(&symtab_dwfl_callbacks);
	if (dwfl == NULL) {
		err = -ENOMEM;
		goto fail_begin;
	}
	dwfl_report_begin(dwfl);
	/* On success the module owns fd (closed by dwfl_end); not on failure. */
	mod = dwfl_report_elf(dwfl, f->path, f->path, fd, 0, true);
	if (mod != NULL)
		fd = -1;
	if (dwfl_report_end(dwfl, NULL, NULL) != 0 || mod == NULL) {
		err = -ENOEXEC;
		goto fail_report;
	}
	n = collect_syms(mod, &raw);
	if (n < 0) {
		err = (int)n;
		goto fail_collect;
	}
	if (n > 0) {
		qsort(raw, (size_t)n, sizeof(*raw), sym_raw_cmp);
		err = build_funcs(f, raw, (size_t)n);
		if (err < 0)
			goto fail_build;
	}
	free(raw);
	dwfl_end(dwfl);
	return 0;

fail_build:
	free(raw);
fail_collect:
fail_report:
	dwfl_end(dwfl);
fail_begin:
	if (fd >= 0)
		close(fd);
	return err;
}

/* The name to show for fn: demangled once if it is a C++ name. Only "_Z"
 * names are given to the demangler, which would otherwise read a C
 * function called "i" as the type name "int". When demangling fails the
 * symbol's own name is shown. */
static const char *func_name(struct sym_func *fn)
{
	int status = 0;
	char *d;

	if (fn->name != NULL)
		return fn->name;
	fn->name = (char *)fn->raw;
	if (fn->raw[0] == '_' && fn->raw[1] == 'Z') {
		d = __cxa_demangle(fn->raw, NULL, NULL, &status);
		if (d != NULL && status == 0)
			fn->name = d;
		else
			free(d);
	}
	return fn->name;
}

/* The function of f containing off, or NULL. Overlapping symbols (a
 * function symbol inside another, as hand-written assembly has) are
 * handled by walking back while an earlier entry may still reach off;
 * without overlaps that walk stops at once. */
static struct sym_func *file_search(struct sym_file *f, uint64_t off)
{
	size_t lo = 0, hi = f->nfuncs;

	/* The first entry starting after off. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->funcs[mid].start <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i > 0 && f->funcs[i - 1].cover > off; i--)
		if (off < f->funcs[i - 1].end)
			return &f->funcs[i - 1];
	return NULL;
}

static const char *file_lookup(struct sym_file *f, uint64_t off)
{
	struct sym_func *fn;
	const char *name;
	uint64_t known;

	if (f->nfuncs == 0)
		return NULL;
	known = htab_get(&f->cache, off);
	if (known != 0) {
		name = (const char *)(uintptr_t)known;
		return name != no_function ? name : NULL;
	}
	fn = file_search(f, off);
	name = fn != NULL ? func_name(fn) : NULL;
	/* Without room the answer is still right, only not remembered. */
	htab_add(&f->cache, off, (uintptr_t)(name != NULL ? name : no_function));
	return name;
}

/* The file at path (hash h) in the file table, or NULL. */
static struct sym_file *files_find(const symtab *s, const char *path, size_t len, uint64_t h)
{
	size_t pos = htab_start(&s->files, h);
	uint64_t v;

	while ((v = htab_next(&s->files, h, &pos)) != 0) {
		struct sym_file *f = (struct sym_file *)(uintptr_t)v;

		if (f->path_len == len && memcmp(f->path, path, len) == 0)
			return f;
	}
	return NULL;
}

/* The file at path, read now if it is new. NULL only on allocation
 * failure (nothing is cached then, so a later lookup tries again). */
static struct sym_file *files_get(symtab *s, const char *path)
{
	size_t len = strlen(path);
	uint64_t h = hash_path(path, len);
	struct sym_file *f = files_find(s, path, len, h);

	if (f != NULL)
		return f;
	if (htab_reserve(&s->files) < 0)
		goto fail_reserve;
	f = calloc(1, sizeof(*f));
	if (f == NULL)
		goto fail_file;
	f->path = strdup(path);
	if (f->path == NULL)
		goto fail_path;
	f->path_len = len;
	f->cache.first = ADDR_CACHE_MIN;
	/* A file that cannot be read stays in the table with no functions:
	 * the failure is the cached answer. */
	if (file_load(f) == -ENOMEM)
		goto fail_load;
	htab_add(&s->files, h, (uintptr_t)f); /* reserved above */
	return f;

fail_load:
	free(f->path);
fail_path:
	free(f);
fail_file:
fail_reserve:
	return NULL;
}

const char *symtab_lookup(symtab *s, const char *path, uint64_t off)
{
	struct sym_file *f = NULL;
	size_t i;

	for (i = 0; i < RECENT_FILES && s->recent[i] != NULL; i++)
		if (strcmp(s->recent[i]->path, path) == 0) {
			f = s->recent[i];
			break;
		}
	if (f == NULL) {
		f = files_get(s, path);
		if (f == NULL)
			return NULL;
		/* The least recent file, if all are taken, makes room. */
		if (i == RECENT_FILES)
			i--;
	}
	memmove(&s->recent[1], &s->recent[0], i * sizeof(s->recent[0]));
	s->recent[0] = f;
	return file_lookup(f, off);
}
