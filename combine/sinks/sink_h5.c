/*
 * sink_h5.c - the HDF5 writer as a sink (layout: docs/HDF5_LAYOUT.md).
 *
 * Events arrive interleaved across processes. Each process buffers its
 * rows column by column, one chunk of its extendable, chunked datasets at
 * a time. A full chunk goes to the writer's ordered pipeline (opipe.h) as
 * a job: any thread shuffles and deflates each column into exactly the
 * bytes HDF5's own shuffle and deflate filters would store (stock readers
 * need no plugin), and the thread that owns the file (HDF5 is not
 * thread-safe) writes them whole with H5Dwrite_chunk, in order. A column
 * chunk of zeros (args and ids of events that have none) is not stored at
 * all: HDF5 reads an unallocated chunk as the fill value, 0. Rows that do
 * not fill an aligned chunk (a budget flush) go through H5Dwrite and
 * HDF5's filters, as do the args text, the region times and the strings.
 *
 * All buffers (event rows, args text, region times) count against one
 * budget, H5W_BUDGET: past it the largest buffers are written out and
 * freed until half of it is left, so memory stays flat whatever the
 * number of events or processes; the pipeline holds at most a few chunks
 * besides (h5w_max_jobs). What is kept for the whole run is per
 * process, per thread and per name: the process records, thread names,
 * the open B slices of each thread, the region names, and the interned
 * strings (themselves capped, H5W_INTERN_MAX: past it new strings get an
 * id each without deduplication).
 *
 * Regions are written per process as its events are. Which rank<N> group
 * a process belongs to is known only at the end (whether the trace has
 * ranks at all: the first process may be mpirun, without one), so the
 * rank groups are made at the end from what is on disk: a hard link to
 * the process's regions when a group has one process with regions, a
 * copy of its processes' times otherwise.
 *
 * Two kinds of JSON are read here, by two parsers. The args of metadata
 * events (process and thread names, forktrace_process records) are parsed
 * with jansson, like the HTML report's; the args of every other event are
 * stored as text, unparsed. A raw input event is split into the keys the
 * columns hold and the others with jsonr, the readers' event scanner,
 * because the others must be kept byte for byte (numbers beyond int64 or
 * double, escapes) and jansson gives values, not their text.
 */
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <inttypes.h>
#include <isa-l/igzip_lib.h>
#include <jansson.h>
#include <libdeflate.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "critpath.h"
#include "h5_module.h"
#include "htab.h"
#include "jsonr.h"
#include "opipe.h"
#include "vec.h"

/* Rows per chunk of the event datasets of a busy process, which buffers
 * one chunk before handing it to the pipeline. Larger chunks deflate
 * better (the shuffled timestamps of 22.7 M calls: 4 Ki rows 7.2 MB per
 * 4 M rows, 64 Ki 6.2 MB, 256 Ki 5.8 MB) but cost a process's buffer 67
 * bytes a row and each job JOB_ROW_BYTES, so the budget sets the chunk
 * (max_chunk_for: 16 Ki rows at H5W_BUDGET). docs/OUTPUT.md, "h5". */
#define H5W_CHUNK_ROWS 65536
/* Bytes of args text buffered per process before a write. */
#define H5W_FLUSH_BLOB (4u << 20)
#define H5W_BLOB_CHUNK (64u * 1024u)
/* Region times per chunk and per write. */
#define H5W_REGION_CHUNK 4096
#define H5W_REGION_FLUSH 16384
/* Strings per chunk of /strings and per write. */
#define H5W_STRING_CHUNK 4096
/* All buffers together, the jobs' included (at most half of it); past
 * it the largest buffers of processes are written out. With HDF5 and the
 * rest of the collector it stays within the 32 MiB that --max-memory
 * keeps for writers (docs/OUTPUT.md, "mem"): chunks of 16 Ki rows. */
#define H5W_BUDGET (16u << 20)
/* Bytes of interned strings (with their table) kept for deduplication. */
#define H5W_INTERN_MAX (8u << 20)
/* Deepest B nesting per thread matched into regions. */
#define H5W_MAX_STACK 4096
/* The deflate level when the caller gives none: ISA-L's level 2 (below). */
#define H5W_DEFAULT_LEVEL 2
/* Most of HDF5's metadata cache, in bytes of the entries on disk. */
#define H5W_MDC_MAX (2u << 20)
/* "No string": id 0 of /strings is "" and stands for an absent name/cat. */
#define H5W_NO_STRING 0

/* The event columns: name, file type, memory type, bytes per row. */
enum {
	C_TS,
	C_DUR,
	C_NAME,
	C_CAT,
	C_TID,
	C_PH,
	C_SCOPE,
	C_FLAGS,
	C_ID,
	C_ARGS_OFF,
	C_ARGS_LEN,
	C_EXTRA_OFF,
	C_EXTRA_LEN,
	NCOLS
};

enum h5w_kind { K_I64, K_U64, K_U32, K_U8 };

static const struct {
	const char *name;
	enum h5w_kind kind;
	size_t size;
} cols[NCOLS] = {
	[C_TS] = {"ts_ns", K_I64, 8},
	[C_DUR] = {"dur_ns", K_I64, 8},
	[C_NAME] = {"name_id", K_U32, 4},
	[C_CAT] = {"cat_id", K_U32, 4},
	[C_TID] = {"tid", K_I64, 8},
	[C_PH] = {"ph", K_U8, 1},
	[C_SCOPE] = {"scope", K_U8, 1},
	[C_FLAGS] = {"flags", K_U8, 1},
	[C_ID] = {"id", K_U64, 8},
	[C_ARGS_OFF] = {"args_offset", K_U64, 8},
	[C_ARGS_LEN] = {"args_length", K_U32, 4},
	[C_EXTRA_OFF] = {"extra_offset", K_U64, 8},
	[C_EXTRA_LEN] = {"extra_length", K_U32, 4},
};

#define ROW_BYTES (8 + 8 + 4 + 4 + 8 + 1 + 1 + 1 + 8 + 8 + 4 + 8 + 4)
/* What a job holds a row: its columns, one column shuffled (8 bytes),
 * and room for the deflated columns (16 bytes: a chunk of trace columns
 * takes 2-3; a column that does not fit is stored as HDF5 stores what
 * deflate cannot shrink). */
#define JOB_OUT_ROW 16
#define JOB_ROW_BYTES (ROW_BYTES + 8 + JOB_OUT_ROW)

static hid_t file_type(enum h5w_kind k)
{
	switch (k) {
	case K_I64:
		return H5T_STD_I64LE;
	case K_U64:
		return H5T_STD_U64LE;
	case K_U32:
		return H5T_STD_U32LE;
	default:
		return H5T_STD_U8LE;
	}
}

static hid_t mem_type(enum h5w_kind k)
{
	switch (k) {
	case K_I64:
		return H5T_NATIVE_INT64;
	case K_U64:
		return H5T_NATIVE_UINT64;
	case K_U32:
		return H5T_NATIVE_UINT32;
	default:
		return H5T_NATIVE_UINT8;
	}
}

/* An entry of a string table (interned strings, region names): the
 * value and a NUL-terminated copy of the string, in one allocation. */
typedef struct h5w_str {
	uint32_t val;
	uint32_t len;
	char s[];
} h5w_str;

/* The entry of the n bytes at s (hash h) in m (h5w_str entries), or
 * NULL. */
static const h5w_str *smap_find(const htab *m, const char *s, size_t n, uint64_t h)
{
	size_t pos = htab_start(m, h);
	uint64_t v;

	while ((v = htab_next(m, h, &pos)) != 0) {
		const h5w_str *e = (const h5w_str *)(uintptr_t)v;

		if (e->len == n && memcmp(e->s, s, n) == 0)
			return e;
	}
	return NULL;
}

/* The value of the n bytes at s (hash h) in m, or UINT32_MAX. */
static uint32_t smap_get(const htab *m, const char *s, size_t n, uint64_t h)
{
	const h5w_str *e = smap_find(m, s, n, h);

	return e != NULL ? e->val : UINT32_MAX;
}

/* Inserts a copy of s; returns the entry (owned by m) or NULL. */
static const h5w_str *smap_add(htab *m, const char *s, size_t n, uint64_t h, uint32_t val)
{
	h5w_str *e = malloc(sizeof(*e) + n + 1);

	if (e == NULL)
		return NULL;
	e->val = val;
	e->len = (uint32_t)n;
	memcpy(e->s, s, n);
	e->s[n] = '\0';
	if (htab_add(m, h, (uintptr_t)e) < 0) {
		free(e);
		return NULL;
	}
	return e;
}

/* Inserts a copy of s; returns the copy (owned by m) or NULL. */
static const char *smap_put(htab *m, const char *s, size_t n, uint64_t h, uint32_t val)
{
	const h5w_str *e = smap_add(m, s, n, h, val);

	return e != NULL ? e->s : NULL;
}

static void smap_free(htab *m)
{
	size_t pos = 0;
	uint64_t v;

	while (htab_each(m, &pos, NULL, &v))
		free((h5w_str *)(uintptr_t)v);
	htab_free(m);
}

/* Start and end times of one region name in one process. */
typedef struct h5w_region {
	char *name;
	int64_t *starts, *ends;
	size_t n, cap;
	uint64_t written;
} h5w_region;

typedef struct h5w_open {
	int64_t ts;
	uint32_t region; /* H5W_NOT_REGION: a B that is no region */
} h5w_open;

#define H5W_NOT_REGION UINT32_MAX

typedef struct h5w_thread {
	int64_t tid;
	char *name;
	int64_t sort_index; /* -1: none */
	h5w_open *stack;    /* open B slices, innermost last */
	size_t depth, cap;
	uint64_t too_deep; /* B beyond H5W_MAX_STACK, not matched */
} h5w_thread;

typedef struct h5w_proc {
	int64_t pid; /* trace pid */
	/* The record: from forktrace_process, else what was seen. */
	bool has_record;
	int64_t host_pid, ppid, parent;
	uint64_t start_ticks;
	char *name, *argv, *exe, *cwd, *spawn, *exit_kind, *labels;
	char *host, *rank_var;
	int64_t rank, local_rank; /* -1: none */
	int64_t rank_group;       /* N of the rank<N> holding its regions, -1 */
	char *interpreter, *launcher;
	char *ru_source; /* NULL: no resource use known */
	model_rusage ru; /* -1 each: unknown */
	int32_t exit_code, exit_signal;
	bool instrumented;
	uint64_t images, lost_events;
	int64_t start_ns, end_ns;
	int64_t sort_index;
	int64_t seen_min, seen_max; /* span of the event times */

	/* Buffered rows, column by column, and the args text. Rows written
	 * count those handed to the pipeline; extent is what the column
	 * datasets hold so far (all the same length). */
	void *col[NCOLS];
	size_t n, cap;
	char *blob;
	size_t blob_len, blob_cap;
	uint64_t rows_written, blob_written, extent;
	size_t chunk; /* rows per chunk of the column datasets, 0: none yet */
	bool have_group, have_dsets, have_args;

	h5w_thread *threads;
	size_t nthreads, threads_cap;
	htab tids; /* tid -> index + 1 in threads */
	uint32_t last_thread;

	h5w_region *regions;
	size_t nregions, regions_cap;
	htab region_ids; /* name -> index in regions (h5w_str) */
	bool have_regions_group;

	size_t mem; /* bytes of buffers counted against the budget */
} h5w_proc;

typedef struct h5w_job h5w_job;

/* The last few names interned, by where their bytes are (the walk hands
 * the same few names over and over), checked against their text. */
#define H5W_NAME_CACHE 64

typedef struct h5w_name_slot {
	const char *p; /* the caller's bytes last seen */
	size_t n;
	const h5w_str *e; /* the interned copy (owned by interned) */
} h5w_name_slot;

typedef struct h5_sink {
	trace_sink base;
	hid_t file, meta_grp, events_grp, strings;
	/* The column datasets of one process, open (done writes chunk after
	 * chunk of the same process), or NULL. */
	h5w_proc *open_proc;
	hid_t open_dsets[NCOLS];
	/* Full chunks to compress and write, in order, and the jobs not in
	 * flight, kept for the next chunks (pool_lock: released on any
	 * thread). */
	opipe *pipe;
	pthread_mutex_t pool_lock;
	h5w_job *pool;
	size_t npool, njobs;
	size_t job_mem; /* bytes of every job (estimated at its allocation) */
	hid_t vlen_str; /* variable-length UTF-8 string type */
	hid_t bool_type;
	unsigned level;
	char *path; /* to stat the size at the end */
	int fd;     /* -1, or the borrowed fd (fstat at the end) */

	h5w_proc **procs;
	size_t nprocs, procs_cap;
	htab pids; /* pid -> index + 1 in procs */
	uint32_t last_proc;

	/* Interning: ids are rows of /strings. */
	htab interned; /* string -> its id (h5w_str) */
	h5w_name_slot name_cache[H5W_NAME_CACHE];
	size_t intern_mem;
	uint32_t next_id;
	/* Strings with an id, not yet written (pointers into interned, or
	 * owned copies past H5W_INTERN_MAX, freed after the write). */
	const char **pending;
	bool *pending_owned;
	size_t npending;
	uint64_t strings_written;

	/* A padded copy of the raw event being split (jsonr's buffer
	 * contract), and the extra members found in it. */
	char *scratch;
	size_t scratch_cap;
	strview *extra;
	size_t extra_cap;

	size_t mem;
	size_t budget;    /* H5W_BUDGET unless sink_h5_set_budget */
	size_t max_chunk; /* rows per chunk at most (max_chunk_for) */
	uint64_t events;
	int err;
} h5_sink;

/* ---- HDF5 helpers. Each returns 0 or -EIO. */

static hid_t make_dset(hid_t loc, const char *name, hid_t ftype, hsize_t chunk, unsigned level,
		       bool shuffle)
{
	hsize_t dims = 0, maxdims = H5S_UNLIMITED;
	hid_t space, dcpl, d = H5I_INVALID_HID;

	space = H5Screate_simple(1, &dims, &maxdims);
	if (space < 0)
		return H5I_INVALID_HID;
	dcpl = H5Pcreate(H5P_DATASET_CREATE);
	if (dcpl < 0)
		goto close_space;
	if (H5Pset_chunk(dcpl, 1, &chunk) < 0)
		goto close_dcpl;
	/* Shuffle first: the bytes of similar integers group, and deflate
	 * finds them (timestamps compress several times better). */
	if (shuffle && H5Pset_shuffle(dcpl) < 0)
		goto close_dcpl;
	if (H5Pset_deflate(dcpl, level) < 0)
		goto close_dcpl;
	d = H5Dcreate2(loc, name, ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
close_dcpl:
	H5Pclose(dcpl);
close_space:
	H5Sclose(space);
	return d;
}

/*
 * The chunk of a dataset whose first write has n elements: n rounded up to
 * a power of two, between min and max. A process that ends with a few
 * events gets small chunks (a whole chunk is filled, compressed and
 * written even for one row: with thousands of short processes that was
 * most of the time and of the file); a busy one gets max-sized chunks,
 * which its FLUSH-sized writes fill exactly.
 */
static hsize_t chunk_for(uint64_t n, hsize_t min, hsize_t max)
{
	hsize_t c = min;

	while (c < n && c < max)
		c *= 2;
	return c;
}

/* Appends n elements of buf (memory type mtype) to the 1-D dataset d
 * which has old elements. */
static int append_to(hid_t d, hid_t mtype, hsize_t old, hsize_t n, const void *buf)
{
	hsize_t size = old + n;
	hid_t fspace, mspace;
	int err = -EIO;

	if (n == 0)
		return 0;
	if (H5Dset_extent(d, &size) < 0)
		return -EIO;
	fspace = H5Dget_space(d);
	if (fspace < 0)
		return -EIO;
	mspace = H5Screate_simple(1, &n, NULL);
	if (mspace < 0)
		goto close_fspace;
	if (H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &old, NULL, &n, NULL) < 0)
		goto close_mspace;
	if (H5Dwrite(d, mtype, mspace, fspace, H5P_DEFAULT, buf) < 0)
		goto close_mspace;
	err = 0;
close_mspace:
	H5Sclose(mspace);
close_fspace:
	H5Sclose(fspace);
	return err;
}

/* Opens loc/name and appends to it. */
static int append_named(hid_t loc, const char *name, hid_t mtype, hsize_t old, hsize_t n,
			const void *buf)
{
	hid_t d;
	int err;

	if (n == 0)
		return 0;
	d = H5Dopen2(loc, name, H5P_DEFAULT);
	if (d < 0)
		return -EIO;
	err = append_to(d, mtype, old, n, buf);
	if (H5Dclose(d) < 0 && err == 0)
		err = -EIO;
	return err;
}

static int attr_write(hid_t loc, const char *name, hid_t ftype, hid_t mtype, hid_t space,
		      const void *buf)
{
	hid_t a;
	int err = 0;

	if (H5Aexists(loc, name) > 0)
		H5Adelete(loc, name);
	a = H5Acreate2(loc, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT);
	if (a < 0)
		return -EIO;
	if (H5Awrite(a, mtype, buf) < 0)
		err = -EIO;
	if (H5Aclose(a) < 0 && err == 0)
		err = -EIO;
	return err;
}

static int attr_i64(hid_t loc, const char *name, int64_t v)
{
	hid_t space = H5Screate(H5S_SCALAR);
	int err;

	if (space < 0)
		return -EIO;
	err = attr_write(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, space, &v);
	H5Sclose(space);
	return err;
}

static int attr_u64(hid_t loc, const char *name, uint64_t v)
{
	hid_t space = H5Screate(H5S_SCALAR);
	int err;

	if (space < 0)
		return -EIO;
	err = attr_write(loc, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, space, &v);
	H5Sclose(space);
	return err;
}

static int attr_str(h5_sink *hs, hid_t loc, const char *name, const char *v)
{
	hid_t space = H5Screate(H5S_SCALAR);
	const char *s = v != NULL ? v : "";
	int err;

	if (space < 0)
		return -EIO;
	err = attr_write(loc, name, hs->vlen_str, hs->vlen_str, space, &s);
	H5Sclose(space);
	return err;
}

/* A 1-D array attribute of n strings (NULL entries written as ""). */
static int attr_strv(h5_sink *hs, hid_t loc, const char *name, const char *const *v, size_t n)
{
	hsize_t dims = n;
	const char **copy;
	hid_t space;
	int err = -EIO;

	copy = calloc(n ? n : 1, sizeof(*copy));
	if (copy == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		copy[i] = v[i] != NULL ? v[i] : "";
	space = H5Screate_simple(1, &dims, NULL);
	if (space >= 0) {
		err = attr_write(loc, name, hs->vlen_str, hs->vlen_str, space, copy);
		H5Sclose(space);
	}
	free(copy);
	return err;
}

static int attr_i64v(hid_t loc, const char *name, const int64_t *v, size_t n)
{
	hsize_t dims = n;
	hid_t space = H5Screate_simple(1, &dims, NULL);
	int err;

	if (space < 0)
		return -EIO;
	err = attr_write(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, space, v);
	H5Sclose(space);
	return err;
}

/* ---- strings */

static int flush_strings(h5_sink *hs)
{
	int err;

	if (hs->npending == 0)
		return 0;
	err = append_to(hs->strings, hs->vlen_str, hs->strings_written, hs->npending, hs->pending);
	for (size_t i = 0; i < hs->npending; i++)
		if (hs->pending_owned[i])
			free((char *)hs->pending[i]);
	hs->strings_written += hs->npending;
	hs->npending = 0;
	return err;
}

/* Gives str (owned: a copy past the intern cap) the next id. */
static int add_pending(h5_sink *hs, const char *str, bool owned)
{
	int err;

	if (hs->npending == H5W_STRING_CHUNK) {
		err = flush_strings(hs);
		if (err < 0) {
			if (owned)
				free((char *)str);
			return err;
		}
	}
	hs->pending[hs->npending] = str;
	hs->pending_owned[hs->npending] = owned;
	hs->npending++;
	return 0;
}

/* The id of string s in /strings, or UINT32_MAX on error (hs->err set).
 * Absent strings (p == NULL) are H5W_NO_STRING. */
static uint32_t intern(h5_sink *hs, strview s)
{
	uint64_t h;
	uint32_t id;
	const char *copy;
	int err;

	const h5w_str *e;
	h5w_name_slot *slot;

	if (s.p == NULL)
		return H5W_NO_STRING;
	/* Where the bytes are only picks the slot: a hit is the same text
	 * (the caller's buffers are reused for other names). */
	slot = &hs->name_cache[((uintptr_t)s.p >> 3 ^ (uintptr_t)s.p >> 11 ^ s.n) % H5W_NAME_CACHE];
	if (slot->p == s.p && slot->n == s.n && memcmp(slot->e->s, s.p, s.n) == 0)
		return slot->e->val;
	h = htab_hash_bytes(s.p, s.n);
	e = smap_find(&hs->interned, s.p, s.n, h);
	if (e != NULL) {
		*slot = (h5w_name_slot){s.p, s.n, e};
		return e->val;
	}
	if (hs->next_id == UINT32_MAX - 1 || s.n > UINT32_MAX) {
		hs->err = -EOVERFLOW;
		return UINT32_MAX;
	}
	id = hs->next_id;
	if (hs->intern_mem < H5W_INTERN_MAX) {
		e = smap_add(&hs->interned, s.p, s.n, h, id);
		if (e == NULL)
			goto nomem;
		copy = e->s;
		*slot = (h5w_name_slot){s.p, s.n, e};
		hs->intern_mem += s.n + 1 + 32;
		err = add_pending(hs, copy, false);
	} else {
		char *own = strndup(s.p, s.n);

		if (own == NULL)
			goto nomem;
		err = add_pending(hs, own, true);
	}
	if (err < 0) {
		hs->err = err;
		return UINT32_MAX;
	}
	hs->next_id++;
	return id;
nomem:
	hs->err = -ENOMEM;
	return UINT32_MAX;
}

/* ---- processes */

static h5w_proc *proc_get(h5_sink *hs, int64_t pid)
{
	uint32_t i;
	h5w_proc *p;

	if (hs->nprocs > 0 && hs->procs[hs->last_proc]->pid == pid)
		return hs->procs[hs->last_proc];
	i = (uint32_t)htab_get(&hs->pids, (uint64_t)pid);
	if (i != 0) {
		hs->last_proc = i - 1;
		return hs->procs[i - 1];
	}
	if (vec_grow(&hs->procs, &hs->procs_cap, hs->nprocs + 1, sizeof(*hs->procs), 64) < 0)
		return NULL;
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return NULL;
	p->pid = pid;
	p->host_pid = pid;
	p->ppid = -1;
	p->parent = -1;
	p->start_ns = -1;
	p->end_ns = -1;
	p->sort_index = -1;
	p->rank = -1;
	p->local_rank = -1;
	p->rank_group = -1;
	p->ru = (model_rusage){-1, -1, -1, -1, -1, -1, -1, -1, -1};
	p->exit_code = -1;
	p->seen_min = INT64_MAX;
	p->seen_max = INT64_MIN;
	if (htab_add(&hs->pids, (uint64_t)pid, hs->nprocs + 1) < 0) {
		free(p);
		return NULL;
	}
	hs->last_proc = (uint32_t)hs->nprocs;
	hs->procs[hs->nprocs++] = p;
	return p;
}

static void proc_free(h5w_proc *p)
{
	for (int c = 0; c < NCOLS; c++)
		free(p->col[c]);
	free(p->blob);
	for (size_t i = 0; i < p->nthreads; i++) {
		free(p->threads[i].name);
		free(p->threads[i].stack);
	}
	free(p->threads);
	htab_free(&p->tids);
	for (size_t i = 0; i < p->nregions; i++) {
		free(p->regions[i].starts);
		free(p->regions[i].ends);
	}
	free(p->regions);
	smap_free(&p->region_ids); /* owns the region names */
	free(p->name);
	free(p->argv);
	free(p->exe);
	free(p->cwd);
	free(p->spawn);
	free(p->exit_kind);
	free(p->labels);
	free(p->host);
	free(p->rank_var);
	free(p->interpreter);
	free(p->launcher);
	free(p->ru_source);
	free(p);
}

static h5w_thread *thread_get(h5w_proc *p, int64_t tid)
{
	uint32_t i;
	h5w_thread *t;

	if (p->nthreads > 0 && p->threads[p->last_thread].tid == tid)
		return &p->threads[p->last_thread];
	i = (uint32_t)htab_get(&p->tids, (uint64_t)tid);
	if (i != 0) {
		p->last_thread = i - 1;
		return &p->threads[i - 1];
	}
	if (vec_grow(&p->threads, &p->threads_cap, p->nthreads + 1, sizeof(*p->threads), 4) < 0)
		return NULL;
	if (htab_add(&p->tids, (uint64_t)tid, p->nthreads + 1) < 0)
		return NULL;
	t = &p->threads[p->nthreads];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	t->sort_index = -1;
	p->last_thread = (uint32_t)p->nthreads++;
	return t;
}

static int proc_group_name(const h5w_proc *p, char *buf, size_t size)
{
	int n = snprintf(buf, size, "%" PRId64, p->pid);

	return n > 0 && (size_t)n < size ? 0 : -EINVAL;
}

/* Opens (creating on first use) the group /events/<pid>. */
static hid_t proc_group(h5_sink *hs, h5w_proc *p)
{
	char name[32];
	hid_t g;

	if (proc_group_name(p, name, sizeof(name)) < 0)
		return H5I_INVALID_HID;
	if (p->have_group)
		return H5Gopen2(hs->events_grp, name, H5P_DEFAULT);
	g = H5Gcreate2(hs->events_grp, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	if (g >= 0)
		p->have_group = true;
	return g;
}

/* ---- regions */

/*
 * An HDF5 link name for a region name: '/' cannot be in one, and "." or
 * ".." would not name a new group, so '/', '%' and a leading '.' are
 * percent-encoded (and "" is "%00"); the real name is the group's "name"
 * attribute. Returns a malloc'd string or NULL.
 */
static char *region_link_name(const char *name)
{
	size_t n = strlen(name), k = 0;
	char *out = malloc(3 * n + 4);

	if (out == NULL)
		return NULL;
	if (n == 0) {
		memcpy(out, "%00", 4);
		return out;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];

		if (c == '/' || c == '%' || (i == 0 && c == '.')) {
			snprintf(out + k, 4, "%%%02X", c);
			k += 3;
		} else {
			out[k++] = (char)c;
		}
	}
	out[k] = '\0';
	return out;
}

/* Creates the group link under rg for the region called name, with its
 * name attribute and empty time datasets chunked for a first write of n;
 * returns it open, or H5I_INVALID_HID. */
static hid_t new_region_group(h5_sink *hs, hid_t rg, const char *link, const char *name, uint64_t n)
{
	hid_t grp = H5Gcreate2(rg, link, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), d;

	if (grp < 0)
		return H5I_INVALID_HID;
	if (attr_str(hs, grp, "name", name) < 0)
		goto fail;
	for (int i = 0; i < 2; i++) {
		d = make_dset(grp, i == 0 ? "start_times" : "end_times", H5T_STD_I64LE,
			      chunk_for(n, 64, H5W_REGION_CHUNK), hs->level, true);
		if (d < 0)
			goto fail;
		H5Dclose(d);
	}
	return grp;
fail:
	H5Gclose(grp);
	return H5I_INVALID_HID;
}

static int region_flush(h5_sink *hs, h5w_proc *p, hid_t pg, h5w_region *r, bool release)
{
	hid_t rg, grp;
	char *link;
	int err = 0;

	if (r->n > 0) {
		if (!p->have_regions_group) {
			rg = H5Gcreate2(pg, "regions", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
			if (rg >= 0)
				p->have_regions_group = true;
		} else {
			rg = H5Gopen2(pg, "regions", H5P_DEFAULT);
		}
		if (rg < 0)
			return -EIO;
		link = region_link_name(r->name);
		if (link == NULL) {
			H5Gclose(rg);
			return -ENOMEM;
		}
		if (r->written == 0)
			grp = new_region_group(hs, rg, link, r->name, r->n);
		else
			grp = H5Gopen2(rg, link, H5P_DEFAULT);
		err = grp < 0 ? -EIO : 0;
		free(link);
		if (err == 0)
			err = append_named(grp, "start_times", H5T_NATIVE_INT64, r->written, r->n,
					   r->starts);
		if (err == 0)
			err = append_named(grp, "end_times", H5T_NATIVE_INT64, r->written, r->n,
					   r->ends);
		if (grp >= 0)
			H5Gclose(grp);
		H5Gclose(rg);
		if (err < 0)
			return err;
		r->written += r->n;
		r->n = 0;
	}
	if (release && r->cap > 0) {
		size_t bytes = r->cap * 2 * sizeof(int64_t);

		free(r->starts);
		free(r->ends);
		r->starts = r->ends = NULL;
		r->cap = 0;
		p->mem -= bytes;
		hs->mem -= bytes;
	}
	return 0;
}

/* The region of this name in p, created on first use; NULL on error. */
static h5w_region *region_get(h5w_proc *p, strview name, uint32_t *index)
{
	const char *s = name.p != NULL ? name.p : "";
	size_t n = name.p != NULL ? name.n : 0;
	uint64_t h = htab_hash_bytes(s, n);
	uint32_t i = smap_get(&p->region_ids, s, n, h);
	h5w_region *r;

	if (i != UINT32_MAX) {
		*index = i;
		return &p->regions[i];
	}
	if (vec_grow(&p->regions, &p->regions_cap, p->nregions + 1, sizeof(*p->regions), 8) < 0)
		return NULL;
	r = &p->regions[p->nregions];
	memset(r, 0, sizeof(*r));
	r->name = (char *)smap_put(&p->region_ids, s, n, h, (uint32_t)p->nregions);
	if (r->name == NULL)
		return NULL;
	*index = (uint32_t)p->nregions++;
	return r;
}

/* Records one region occurrence [start, end]. */
static int region_add(h5_sink *hs, h5w_proc *p, uint32_t index, int64_t start, int64_t end)
{
	h5w_region *r = &p->regions[index];

	if (r->n == r->cap) {
		size_t ncap = r->cap, ends_cap = r->cap;

		if (r->n >= H5W_REGION_FLUSH) {
			hid_t pg = proc_group(hs, p);
			int err;

			if (pg < 0)
				return -EIO;
			err = region_flush(hs, p, pg, r, false);
			H5Gclose(pg);
			if (err < 0)
				return err;
		} else {
			if (vec_grow(&r->starts, &ncap, r->n + 1, sizeof(*r->starts), 4) < 0 ||
			    vec_grow(&r->ends, &ends_cap, r->n + 1, sizeof(*r->ends), 4) < 0)
				return -ENOMEM;
			p->mem += (ncap - r->cap) * 2 * sizeof(int64_t);
			hs->mem += (ncap - r->cap) * 2 * sizeof(int64_t);
			r->cap = ncap;
		}
	}
	r->starts[r->n] = start;
	r->ends[r->n] = end;
	r->n++;
	return 0;
}

/*
 * Whether a slice is a region: every slice but the calls of instrumented
 * functions (category "function"). Those are the events' business: as
 * regions they cost more than all the event columns together (22.7 M
 * calls of scripts/bench/calls.c: 68 MB of region times in a 129 MB file)
 * and no region view draws millions of calls.
 */
static bool is_region(const jsonw_event *ev)
{
	return !(ev->cat.p != NULL && ev->cat.n == 8 && memcmp(ev->cat.p, "function", 8) == 0);
}

/* X slices and B/E pairs (matched per thread, innermost first) that are
 * regions (is_region) become region occurrences. */
static int track_region(h5_sink *hs, h5w_proc *p, const jsonw_event *ev)
{
	h5w_thread *t;
	uint32_t idx;

	if (ev->ts_ns == JSONW_NO_TIME)
		return 0;
	switch (ev->ph) {
	case 'X': {
		int64_t dur = ev->dur_ns != JSONW_NO_TIME && ev->dur_ns > 0 ? ev->dur_ns : 0;

		if (!is_region(ev))
			return 0;
		if (region_get(p, ev->name, &idx) == NULL)
			return -ENOMEM;
		return region_add(hs, p, idx, ev->ts_ns, ev->ts_ns + dur);
	}
	case 'B':
		t = thread_get(p, ev->tid);
		if (t == NULL)
			return -ENOMEM;
		if (t->depth >= H5W_MAX_STACK) {
			t->too_deep++;
			return 0;
		}
		/* A B that is no region still opens a level, which its E
		 * closes without an occurrence. */
		idx = H5W_NOT_REGION;
		if (is_region(ev) && region_get(p, ev->name, &idx) == NULL)
			return -ENOMEM;
		if (vec_grow(&t->stack, &t->cap, t->depth + 1, sizeof(*t->stack), 8) < 0)
			return -ENOMEM;
		t->stack[t->depth++] = (h5w_open){ev->ts_ns, idx};
		return 0;
	case 'E':
		t = thread_get(p, ev->tid);
		if (t == NULL)
			return -ENOMEM;
		if (t->too_deep > 0) {
			t->too_deep--;
			return 0;
		}
		if (t->depth == 0)
			return 0; /* an E without its B: nothing to pair */
		t->depth--;
		if (t->stack[t->depth].region == H5W_NOT_REGION)
			return 0;
		return region_add(hs, p, t->stack[t->depth].region, t->stack[t->depth].ts,
				  ev->ts_ns);
	default:
		return 0;
	}
}

/* ---- deflate: what HDF5's deflate filter stores, made by faster encoders */

/*
 * The encoder of one job: HDF5's deflate filter stores a zlib stream
 * (compress2), which any DEFLATE encoder can make. Levels 1 to 3 are
 * ISA-L's (igzip: on shuffled trace columns 4-5 times zlib's speed at a
 * better ratio than zlib -4 gave on 4 Ki-row chunks); 4 to 9 libdeflate's
 * (several times zlib's speed, no worse a ratio). docs/OUTPUT.md, "h5".
 */
typedef struct h5w_deflate {
	unsigned level;
	unsigned char *isal_buf; /* ISA-L's hash tables for its level */
	size_t isal_size;
	struct libdeflate_compressor *ld;
} h5w_deflate;

static size_t isal_level_size(unsigned level)
{
	return level == 1   ? ISAL_DEF_LVL1_DEFAULT
	       : level == 2 ? ISAL_DEF_LVL2_DEFAULT
			    : ISAL_DEF_LVL3_DEFAULT;
}

static int deflate_init(h5w_deflate *z, unsigned level)
{
	z->level = level;
	if (level <= 3) {
		z->isal_size = isal_level_size(level);
		z->isal_buf = malloc(z->isal_size);
		return z->isal_buf != NULL ? 0 : -ENOMEM;
	}
	z->ld = libdeflate_alloc_compressor((int)level);
	return z->ld != NULL ? 0 : -ENOMEM;
}

static void deflate_fini(h5w_deflate *z)
{
	free(z->isal_buf);
	if (z->ld != NULL)
		libdeflate_free_compressor(z->ld);
}

/* in[0..n) as one zlib stream into out[0..cap): its length, or 0 when it
 * does not fit (HDF5's filter then stores the chunk unfiltered). */
static size_t deflate_zlib(h5w_deflate *z, const void *in, size_t n, void *out, size_t cap)
{
	struct isal_zstream st;

	if (z->ld != NULL)
		return libdeflate_zlib_compress(z->ld, in, n, out, cap);
	if (n > UINT32_MAX || cap > UINT32_MAX)
		return 0;
	isal_deflate_stateless_init(&st);
	st.level = z->level;
	st.level_buf = z->isal_buf;
	st.level_buf_size = (uint32_t)z->isal_size;
	st.gzip_flag = IGZIP_ZLIB;
	st.flush = NO_FLUSH;
	st.end_of_stream = 1;
	st.next_in = (uint8_t *)(uintptr_t)in;
	st.avail_in = (uint32_t)n;
	st.next_out = out;
	st.avail_out = (uint32_t)cap;
	if (isal_deflate_stateless(&st) != COMP_OK)
		return 0;
	return st.total_out;
}

/* The 8 x 8 bytes x[row] (byte col of row: bits 8 col ..) transposed in
 * place (the recursive swap of 4 x 4, 2 x 2 and 1 x 1 blocks). */
static void transpose8x8(uint64_t x[8])
{
	uint64_t t;

	for (int k = 0; k < 4; k++) {
		t = ((x[k] >> 32) ^ x[k + 4]) & 0x00000000FFFFFFFFull;
		x[k] ^= t << 32;
		x[k + 4] ^= t;
	}
	for (int k = 0; k < 8; k += (k & 1) ? 3 : 1) {
		t = ((x[k] >> 16) ^ x[k + 2]) & 0x0000FFFF0000FFFFull;
		x[k] ^= t << 16;
		x[k + 2] ^= t;
	}
	for (int k = 0; k < 8; k += 2) {
		t = ((x[k] >> 8) ^ x[k + 1]) & 0x00FF00FF00FF00FFull;
		x[k] ^= t << 8;
		x[k + 1] ^= t;
	}
}

/* Two 4 x 4 byte matrices side by side (the low and high halves of
 * x[0..4)) transposed in place. */
static void transpose4x4x2(uint64_t x[4])
{
	uint64_t t;

	for (int k = 0; k < 2; k++) {
		t = ((x[k] >> 16) ^ x[k + 2]) & 0x0000FFFF0000FFFFull;
		x[k] ^= t << 16;
		x[k + 2] ^= t;
	}
	for (int k = 0; k < 4; k += 2) {
		t = ((x[k] >> 8) ^ x[k + 1]) & 0x00FF00FF00FF00FFull;
		x[k] ^= t << 8;
		x[k + 1] ^= t;
	}
}

/*
 * HDF5's shuffle filter: byte b of element i goes to b * chunk + i, the
 * elements past n (the end of a last, partial chunk) as zeros, as a
 * chunk's unwritten rows are. Eight elements at a time as a byte matrix
 * transposed in registers (a byte at a time took twice as long).
 */
static void shuffle_chunk(unsigned char *out, const void *in, size_t n, size_t chunk, size_t size)
{
	const unsigned char *src = in;
	size_t i = 0;

	if (size == 8) {
		for (; i + 8 <= n; i += 8) {
			uint64_t x[8];

			memcpy(x, src + 8 * i, sizeof(x));
			transpose8x8(x);
			for (size_t b = 0; b < 8; b++)
				memcpy(out + b * chunk + i, &x[b], 8);
		}
	} else if (size == 4) {
		for (; i + 8 <= n; i += 8) {
			uint32_t w[8];
			uint64_t x[4];

			memcpy(w, src + 4 * i, sizeof(w));
			for (size_t k = 0; k < 4; k++)
				x[k] = (uint64_t)w[k] | (uint64_t)w[k + 4] << 32;
			transpose4x4x2(x);
			for (size_t b = 0; b < 4; b++) {
				uint32_t lo = (uint32_t)x[b], hi = (uint32_t)(x[b] >> 32);

				memcpy(out + b * chunk + i, &lo, 4);
				memcpy(out + b * chunk + i + 4, &hi, 4);
			}
		}
	}
	for (; i < n; i++)
		for (size_t b = 0; b < size; b++)
			out[b * chunk + i] = src[i * size + b];
	for (size_t b = 0; b < size; b++)
		memset(out + b * chunk + n, 0, chunk - n);
}

/* Whether the n bytes at p are all 0; stops at the first 256 that are
 * not (most columns that are not all zeros say so at once). */
static bool all_zero(const void *p, size_t n)
{
	const unsigned char *s = p;
	uint64_t acc = 0, w;
	size_t i = 0;

	while (i + 256 <= n) {
		for (size_t end = i + 256; i < end; i += 8) {
			memcpy(&w, s + i, 8);
			acc |= w;
		}
		if (acc != 0)
			return false;
	}
	for (; i < n; i++)
		acc |= s[i];
	return acc == 0;
}

/* ---- chunk jobs */

/*
 * One chunk of a process's event rows on its way to the file (see the
 * top of this file). The walk fills the columns' buffers, which the job
 * takes whole (the process gets the job's empty ones); work (any thread)
 * makes each column's stored chunk; done (the file's thread) writes them.
 */
struct h5w_job {
	h5w_job *next; /* in the pool */
	h5w_proc *p;
	uint64_t first_row; /* a multiple of chunk */
	size_t rows;        /* rows filled, <= chunk */
	size_t chunk;       /* rows per chunk of p's datasets */
	void *col[NCOLS];   /* cap rows each */
	size_t cap;
	unsigned char *scratch; /* one column shuffled, chunk rows */
	size_t scratch_cap;
	unsigned char *out; /* the deflated chunks, back to back */
	size_t out_cap;
	/* Each column's stored chunk: out_len bytes at out + out_off, or in
	 * its own buffer (in_col: shuffled, not deflated); out_len 0: all
	 * zeros, not stored. mask: HDF5's filter mask, the filters skipped. */
	size_t out_off[NCOLS], out_len[NCOLS];
	bool in_col[NCOLS];
	uint32_t mask[NCOLS];
	size_t mem; /* counted in hs->job_mem */
	h5w_deflate z;
};

/* Jobs in flight at most: with two threads, one for each and one more,
 * so that the walk fills the next chunk while the others are compressed;
 * fixed whatever the number of threads, so that the chunks (sized by
 * it: max_chunk_for) are the same on every machine. */
#define H5W_MAX_JOBS 3

static size_t h5w_max_jobs(void)
{
	unsigned t = opipe_threads();

	return t + 1 < H5W_MAX_JOBS ? t + 1 : H5W_MAX_JOBS;
}

/* The largest chunk (a power of two, 64 to H5W_CHUNK_ROWS rows) whose
 * jobs, in flight and the one being filled, take at most half of
 * budget. */
static size_t max_chunk_for(size_t budget)
{
	size_t c = H5W_CHUNK_ROWS;

	while (c > 64 && (H5W_MAX_JOBS + 1) * c * JOB_ROW_BYTES > budget / 2)
		c /= 2;
	return c;
}

static int grow_bytes(void *bufp, size_t *cap, size_t need)
{
	void **buf = bufp, *b;

	if (need <= *cap)
		return 0;
	b = realloc(*buf, need);
	if (b == NULL)
		return -ENOMEM;
	*buf = b;
	*cap = need;
	return 0;
}

/* Shuffles and deflates each column of j (any thread; allocates
 * nothing: job_fit sized the buffers). */
static int job_work(void *ctx, void *job)
{
	h5w_job *j = job;
	size_t used = 0;

	(void)ctx;
	for (int c = 0; c < NCOLS; c++) {
		size_t size = cols[c].size, raw = j->chunk * size, n;

		j->out_len[c] = 0;
		j->in_col[c] = false;
		j->mask[c] = 0;
		if (all_zero(j->col[c], j->rows * size))
			continue;
		/* Shuffle comes first in the pipeline of columns wider than a
		 * byte (make_dset); it is HDF5's filter 0 there, deflate 1. */
		shuffle_chunk(j->scratch, j->col[c], j->rows, j->chunk, size);
		n = deflate_zlib(&j->z, j->scratch, raw, j->out + used,
				 j->out_cap - used < raw ? j->out_cap - used : raw);
		if (n == 0) {
			/* No smaller deflated (or no room left): stored
			 * without deflate, as HDF5 stores a chunk its
			 * optional deflate filter cannot shrink. */
			memcpy(j->col[c], j->scratch, raw);
			j->in_col[c] = true;
			j->out_len[c] = raw;
			j->mask[c] = size > 1 ? 2u : 1u;
			continue;
		}
		j->out_off[c] = used;
		j->out_len[c] = n;
		used += n;
	}
	return 0;
}

static void close_open_dsets(h5_sink *hs)
{
	if (hs->open_proc == NULL)
		return;
	for (int c = 0; c < NCOLS; c++)
		if (hs->open_dsets[c] >= 0)
			H5Dclose(hs->open_dsets[c]);
	hs->open_proc = NULL;
}

/* p's column datasets, open in hs->open_dsets (the file's thread only:
 * any other process's are closed first). */
static int open_dsets(h5_sink *hs, h5w_proc *p)
{
	hid_t pg;
	int err = 0;

	if (hs->open_proc == p)
		return 0;
	close_open_dsets(hs);
	pg = proc_group(hs, p);
	if (pg < 0)
		return -EIO;
	for (int c = 0; c < NCOLS; c++) {
		hs->open_dsets[c] = H5Dopen2(pg, cols[c].name, H5P_DEFAULT);
		if (hs->open_dsets[c] < 0)
			err = -EIO;
	}
	hs->open_proc = p;
	if (H5Gclose(pg) < 0 && err == 0)
		err = -EIO;
	if (err < 0)
		close_open_dsets(hs);
	return err;
}

/* Makes p's column datasets (open, from open_dsets) rows long, when they
 * are shorter. */
static int extend_dsets(h5_sink *hs, h5w_proc *p, uint64_t rows)
{
	hsize_t size = rows;

	if (rows <= p->extent)
		return 0;
	for (int c = 0; c < NCOLS; c++)
		if (H5Dset_extent(hs->open_dsets[c], &size) < 0)
			return -EIO;
	p->extent = rows;
	return 0;
}

/* Writes j's stored chunks (the file's thread, in order). */
static int job_done(void *ctx, void *job)
{
	h5_sink *hs = ctx;
	h5w_job *j = job;
	hsize_t offset = j->first_row;
	int err = open_dsets(hs, j->p);

	if (err == 0)
		err = extend_dsets(hs, j->p, j->first_row + j->rows);
	for (int c = 0; c < NCOLS && err == 0; c++)
		if (j->out_len[c] > 0 &&
		    H5Dwrite_chunk(hs->open_dsets[c], H5P_DEFAULT, j->mask[c], &offset,
				   j->out_len[c],
				   j->in_col[c] ? j->col[c] : (void *)(j->out + j->out_off[c])) < 0)
			err = -EIO;
	return err;
}

static void job_free(h5w_job *j)
{
	for (int c = 0; c < NCOLS; c++)
		free(j->col[c]);
	free(j->scratch);
	free(j->out);
	deflate_fini(&j->z);
	free(j);
}

/* Back to the pool (any thread); the pool keeps what the next chunks
 * will need. */
static void job_release(void *ctx, void *job)
{
	h5_sink *hs = ctx;
	h5w_job *j = job;

	pthread_mutex_lock(&hs->pool_lock);
	j->next = hs->pool;
	hs->pool = j;
	hs->npool++;
	pthread_mutex_unlock(&hs->pool_lock);
}

/* A job from the pool, or a new one; NULL on -ENOMEM. */
static h5w_job *job_get(h5_sink *hs)
{
	h5w_job *j;

	pthread_mutex_lock(&hs->pool_lock);
	j = hs->pool;
	if (j != NULL) {
		hs->pool = j->next;
		hs->npool--;
	}
	pthread_mutex_unlock(&hs->pool_lock);
	if (j != NULL)
		return j;
	j = calloc(1, sizeof(*j));
	if (j == NULL)
		return NULL;
	if (deflate_init(&j->z, hs->level) < 0) {
		deflate_fini(&j->z);
		free(j);
		return NULL;
	}
	hs->njobs++;
	return j;
}

/*
 * Sizes j's buffers for its chunk (the file's thread, before submitting:
 * work allocates nothing), its columns at least a chunk (a column stored
 * undeflated takes a chunk), and counts them in hs->job_mem.
 */
static int job_fit(h5_sink *hs, h5w_job *j)
{
	size_t mem;

	if (j->cap < j->chunk) {
		for (int c = 0; c < NCOLS; c++) {
			void *b = realloc(j->col[c], j->chunk * cols[c].size);

			if (b == NULL)
				return -ENOMEM;
			j->col[c] = b;
		}
		j->cap = j->chunk;
	}
	if (grow_bytes(&j->scratch, &j->scratch_cap, j->chunk * 8) < 0 ||
	    grow_bytes(&j->out, &j->out_cap, j->chunk * JOB_OUT_ROW) < 0)
		return -ENOMEM;
	mem = j->cap * ROW_BYTES + j->scratch_cap + j->out_cap;
	hs->job_mem += mem - j->mem;
	j->mem = mem;
	return 0;
}

/*
 * Hands p's buffered rows, chunk-aligned and at most one chunk, to the
 * pipeline: the job takes the buffers and p gets the job's (empty, or of
 * an earlier chunk). Returns 0 or a negative errno (the pipe's first).
 */
static int submit_rows(h5_sink *hs, h5w_proc *p)
{
	h5w_job *j = job_get(hs);
	size_t cap;
	int err;

	if (j == NULL)
		return -ENOMEM;
	j->p = p;
	j->first_row = p->rows_written;
	j->rows = p->n;
	j->chunk = p->chunk;
	for (int c = 0; c < NCOLS; c++) {
		void *t = j->col[c];

		j->col[c] = p->col[c];
		p->col[c] = t;
	}
	cap = j->cap;
	j->cap = p->cap;
	p->mem -= (p->cap - cap) * ROW_BYTES;
	hs->mem -= (p->cap - cap) * ROW_BYTES;
	p->cap = cap;
	p->rows_written += p->n;
	p->n = 0;
	err = job_fit(hs, j);
	if (err < 0) {
		job_release(hs, j);
		return err;
	}
	return opipe_submit(hs->pipe, j);
}

/* ---- event rows */

/* Creates p's args dataset, chunked for its first write. */
static int make_args_dset(h5_sink *hs, h5w_proc *p, hid_t pg)
{
	hid_t d;

	if (p->have_args)
		return 0;
	d = make_dset(pg, "args", H5T_STD_U8LE, chunk_for(p->blob_len, 1024, H5W_BLOB_CHUNK),
		      hs->level, false);
	if (d < 0)
		return -EIO;
	H5Dclose(d);
	p->have_args = true;
	return 0;
}

/* Creates p's column datasets, chunked for a first write of rows, and
 * its args (every process with events has one, empty or not). */
static int make_column_dsets(h5_sink *hs, h5w_proc *p, hid_t pg, size_t rows)
{
	p->chunk = (size_t)chunk_for(rows, 64, hs->max_chunk);
	for (int c = 0; c < NCOLS; c++) {
		hid_t d = make_dset(pg, cols[c].name, file_type(cols[c].kind), p->chunk, hs->level,
				    cols[c].size > 1);
		if (d < 0)
			return -EIO;
		H5Dclose(d);
	}
	p->have_dsets = true;
	return make_args_dset(hs, p, pg);
}

/*
 * Writes out p's buffered rows. A whole chunk, aligned, or the last rows
 * of the trace (final) from a chunk's start, go to the pipeline; other
 * rows (a budget flush's) are appended through HDF5's own filters.
 */
static int flush_rows(h5_sink *hs, h5w_proc *p, hid_t pg, bool final)
{
	hsize_t old = p->rows_written, n = p->n;
	int err = 0;

	if (p->n == 0)
		return 0;
	if (!p->have_dsets) {
		err = make_column_dsets(hs, p, pg, p->n);
		if (err < 0)
			return err;
	}
	if (p->rows_written % p->chunk == 0 && (p->n == p->chunk || final))
		return submit_rows(hs, p);
	err = open_dsets(hs, p);
	if (err == 0)
		err = extend_dsets(hs, p, old + n);
	for (int c = 0; c < NCOLS && err == 0; c++) {
		hid_t d = hs->open_dsets[c], fspace = H5Dget_space(d), mspace;

		if (fspace < 0)
			return -EIO;
		mspace = H5Screate_simple(1, &n, NULL);
		err = -EIO;
		if (mspace >= 0 &&
		    H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &old, NULL, &n, NULL) >= 0 &&
		    H5Dwrite(d, mem_type(cols[c].kind), mspace, fspace, H5P_DEFAULT, p->col[c]) >=
			    0)
			err = 0;
		if (mspace >= 0)
			H5Sclose(mspace);
		H5Sclose(fspace);
	}
	if (err < 0)
		return err;
	p->rows_written += p->n;
	p->n = 0;
	return 0;
}

/* Writes out p's buffered args text. */
static int flush_blob(h5_sink *hs, h5w_proc *p, hid_t pg)
{
	int err;

	if (p->blob_len == 0)
		return 0;
	err = make_args_dset(hs, p, pg);
	if (err == 0)
		err = append_named(pg, "args", H5T_NATIVE_UINT8, p->blob_written, p->blob_len,
				   p->blob);
	if (err < 0)
		return err;
	p->blob_written += p->blob_len;
	p->blob_len = 0;
	return 0;
}

/* Writes out p's args text alone (the rows wait for their chunk). */
static int flush_proc_blob(h5_sink *hs, h5w_proc *p)
{
	hid_t pg = proc_group(hs, p);
	int err;

	if (pg < 0)
		return -EIO;
	err = flush_blob(hs, p, pg);
	if (H5Gclose(pg) < 0 && err == 0)
		err = -EIO;
	return err;
}

/* Writes out p's buffered rows, args text and region times; release also
 * frees the buffers (a budget flush, the end), else they are kept for
 * the next rows; final: the trace ends (its last rows fill no chunk). */
static int flush_proc(h5_sink *hs, h5w_proc *p, bool release, bool final)
{
	hid_t pg;
	int err;

	pg = proc_group(hs, p);
	if (pg < 0)
		return -EIO;
	err = flush_rows(hs, p, pg, final);
	if (err == 0)
		err = flush_blob(hs, p, pg);
	for (size_t i = 0; i < p->nregions && err == 0; i++)
		err = region_flush(hs, p, pg, &p->regions[i], release);
	if (H5Gclose(pg) < 0 && err == 0)
		err = -EIO;
	if (err == 0 && release) {
		size_t bytes = p->cap * ROW_BYTES + p->blob_cap;

		for (int c = 0; c < NCOLS; c++) {
			free(p->col[c]);
			p->col[c] = NULL;
		}
		free(p->blob);
		p->blob = NULL;
		p->cap = 0;
		p->blob_cap = 0;
		p->mem -= bytes;
		hs->mem -= bytes;
	}
	return err;
}

static int cmp_mem_desc(const void *a, const void *b)
{
	const h5w_proc *x = *(h5w_proc *const *)a, *y = *(h5w_proc *const *)b;

	return x->mem < y->mem ? 1 : x->mem > y->mem ? -1 : 0;
}

/*
 * Over budget: write out and free the largest buffers until half the
 * budget is left. One sort per round, and a round frees at least half the
 * budget, so the cost stays linear in the input.
 */
static int enforce_budget(h5_sink *hs)
{
	h5w_proc **order;
	size_t n = 0;
	int err = 0;

	if (hs->mem + hs->job_mem <= hs->budget)
		return 0;
	order = malloc(hs->nprocs * sizeof(*order));
	if (order == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < hs->nprocs; i++)
		if (hs->procs[i]->mem > 0)
			order[n++] = hs->procs[i];
	qsort(order, n, sizeof(*order), cmp_mem_desc);
	for (size_t i = 0; i < n && hs->mem + hs->job_mem > hs->budget / 2 && err == 0; i++)
		err = flush_proc(hs, order[i], true, false);
	free(order);
	return err;
}

/* Room for one more row of p: its chunk goes out first when it is full
 * (before its datasets exist, a chunk is max_chunk rows). */
static int reserve_row(h5_sink *hs, h5w_proc *p)
{
	size_t ncap, left;

	left = p->chunk > 0 ? p->chunk - (size_t)(p->rows_written % p->chunk) : hs->max_chunk;
	if (p->n >= left) {
		hid_t pg = proc_group(hs, p);
		int err;

		if (pg < 0)
			return -EIO;
		err = flush_rows(hs, p, pg, false);
		if (H5Gclose(pg) < 0 && err == 0)
			err = -EIO;
		if (err < 0)
			return err;
	}
	if (p->n < p->cap)
		return 0;
	for (int c = 0; c < NCOLS; c++) {
		ncap = p->cap; /* every column has the same capacity */
		if (vec_grow(&p->col[c], &ncap, p->n + 1, cols[c].size, 8) < 0)
			return -ENOMEM;
	}
	p->mem += (ncap - p->cap) * ROW_BYTES;
	hs->mem += (ncap - p->cap) * ROW_BYTES;
	p->cap = ncap;
	return 0;
}

/* Appends text to p's args text; *off gets its offset in the dataset. */
static int blob_put(h5_sink *hs, h5w_proc *p, const char *s, size_t n, uint64_t *off)
{
	if (p->blob_len > 0 && p->blob_len + n > H5W_FLUSH_BLOB) {
		int err = flush_proc_blob(hs, p);

		if (err < 0)
			return err;
	}
	if (p->blob_len + n > p->blob_cap) {
		size_t old_cap = p->blob_cap;

		if (vec_grow(&p->blob, &p->blob_cap, p->blob_len + n, 1, 256) < 0)
			return -ENOMEM;
		p->mem += p->blob_cap - old_cap;
		hs->mem += p->blob_cap - old_cap;
	}
	memcpy(p->blob + p->blob_len, s, n);
	*off = p->blob_written + p->blob_len;
	p->blob_len += n;
	return 0;
}

/* Whether the key text k (quotes included) names one of the columns. */
static bool known_key(strview k)
{
	static const char *const keys[] = {"ph",  "name", "cat", "pid", "tid", "ts",
					   "dur", "s",    "id",  "bp",  "args"};
	char buf[32];
	strview name = {k.p + 1, k.n - 2};

	/* An escaped key ("p\u0068") is compared unescaped; no column name
	 * takes more than 26 bytes even fully escaped. */
	if (memchr(name.p, '\\', name.n) != NULL) {
		if (k.n > sizeof(buf))
			return false;
		name = (strview){buf, jsonr_unescape(buf, k)};
	}
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (name.n == strlen(keys[i]) && memcmp(name.p, keys[i], name.n) == 0)
			return true;
	return false;
}

/* Past the blanks at p; the NUL after the scratch copy stops it. */
static const char *skip_blanks(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	return p;
}

/* Past the one complete, valid value at p, which must end by end; NULL
 * if there is none. */
static const char *scan_value(const char *p, const char *end)
{
	jsonr_obj o;
	const char *next;

	if (jsonr_value(p, end, &next, &o, false) != JSONR_OK || o.fix || next > end)
		return NULL;
	return next;
}

/* Appends the member (key text, value text) to hs->extra. */
static int extra_add(h5_sink *hs, size_t *n, strview key, strview val)
{
	if (vec_grow(&hs->extra, &hs->extra_cap, *n + 2, sizeof(*hs->extra), 16) < 0)
		return -ENOMEM;
	hs->extra[(*n)++] = key;
	hs->extra[(*n)++] = val;
	return 0;
}

/* Whether the n bytes at k (a key without escapes) name a column. */
static bool known_plain_key(const char *k, size_t n)
{
	switch (n) {
	case 1:
		return k[0] == 's';
	case 2:
		return memcmp(k, "ph", 2) == 0 || memcmp(k, "ts", 2) == 0 ||
		       memcmp(k, "id", 2) == 0 || memcmp(k, "bp", 2) == 0;
	case 3:
		return memcmp(k, "cat", 3) == 0 || memcmp(k, "pid", 3) == 0 ||
		       memcmp(k, "tid", 3) == 0 || memcmp(k, "dur", 3) == 0;
	case 4:
		return memcmp(k, "name", 4) == 0 || memcmp(k, "args", 4) == 0;
	default:
		return false;
	}
}

static const char *skip_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* Past the string whose opening quote is at p (escapes skipped), or NULL
 * at end. */
static const char *skip_string(const char *p, const char *end)
{
	for (p++; p < end; p++) {
		if (*p == '\\')
			p++;
		else if (*p == '"')
			return p + 1;
	}
	return NULL;
}

/* Past the object or array at p, brackets matched outside strings, or
 * NULL at end. */
static const char *skip_nested(const char *p, const char *end)
{
	size_t depth = 0;

	while (p < end) {
		char c = *p;

		if (c == '"') {
			p = skip_string(p, end);
			if (p == NULL)
				return NULL;
			continue;
		}
		if (c == '{' || c == '[') {
			depth++;
		} else if (c == '}' || c == ']') {
			if (--depth == 0)
				return p + 1;
		}
		p++;
	}
	return NULL;
}

/*
 * Whether raw has no member that the columns do not hold, told by one
 * quick pass (events made from a model, and most files' events, name
 * only ph, name, cat, pid, tid, ts, dur, args...). A key with an escape
 * or any shape the pass does not follow answers false, and split_raw
 * decides. Sound: when raw is one valid object, the pass sees exactly its
 * members' keys (strings end at their first unescaped quote, nested
 * values at their matching bracket, numbers and literals at the next
 * comma, brace or blank); when it is not, split_raw keeps nothing either.
 */
static bool only_known_keys(strview raw)
{
	const char *p = raw.p, *end = raw.p + raw.n, *k;

	p = skip_ws(p, end);
	if (p == end || *p != '{')
		return false;
	for (p = skip_ws(p + 1, end); p < end; p = skip_ws(p + 1, end)) {
		if (*p != '"')
			return false;
		k = ++p;
		while (p < end && *p != '"' && *p != '\\')
			p++;
		if (p == end || *p != '"' || !known_plain_key(k, (size_t)(p - k)))
			return false;
		p = skip_ws(p + 1, end);
		if (p == end || *p != ':')
			return false;
		p = skip_ws(p + 1, end);
		if (p == end)
			return false;
		if (*p == '"')
			p = skip_string(p, end);
		else if (*p == '{' || *p == '[')
			p = skip_nested(p, end);
		else
			while (p < end && *p != ',' && *p != '}' && *p != ' ' && *p != '\t' &&
			       *p != '\n' && *p != '\r')
				p++;
		if (p == NULL)
			return false;
		p = skip_ws(p, end);
		if (p == end)
			return false;
		if (*p == '}')
			return true;
		if (*p != ',')
			return false;
	}
	return false;
}

/*
 * The members of the raw event text whose keys no column holds, as key
 * and value texts (slices of hs->scratch) in hs->extra[0..*n), two entries
 * a member, in their order, duplicates included. The text is copied first:
 * jsonr wants JSONR_PAD readable bytes after it and a NUL at its end.
 * Returns 0, with *n = 0 when raw is not one valid object (none of its
 * members is kept then), or -ENOMEM.
 */
static int split_raw(h5_sink *hs, strview raw, size_t *n)
{
	const char *p, *end, *k, *ke, *v, *ve;
	int err;

	*n = 0;
	if (only_known_keys(raw))
		return 0;
	if (vec_grow(&hs->scratch, &hs->scratch_cap, raw.n + JSONR_PAD, 1, 1024) < 0)
		return -ENOMEM;
	memcpy(hs->scratch, raw.p, raw.n);
	memset(hs->scratch + raw.n, 0, JSONR_PAD);
	end = hs->scratch + raw.n;
	p = skip_blanks(hs->scratch);
	if (*p != '{')
		return 0;
	p = skip_blanks(p + 1);
	while (*p != '}') {
		k = p;
		if (*k != '"' || (ke = scan_value(k, end)) == NULL)
			goto invalid;
		p = skip_blanks(ke);
		if (*p != ':')
			goto invalid;
		v = skip_blanks(p + 1);
		ve = scan_value(v, end);
		if (ve == NULL)
			goto invalid;
		if (!known_key((strview){k, (size_t)(ke - k)})) {
			err = extra_add(hs, n, (strview){k, (size_t)(ke - k)},
					(strview){v, (size_t)(ve - v)});
			if (err < 0)
				return err;
		}
		p = skip_blanks(ve);
		if (*p == ',')
			p = skip_blanks(p + 1);
		else if (*p != '}')
			goto invalid;
		else
			break;
		if (*p == '}')
			goto invalid; /* a trailing comma */
	}
	if (p >= end || skip_blanks(p + 1) != end)
		goto invalid;
	return 0;
invalid:
	*n = 0;
	return 0;
}

/*
 * The keys of a raw input event that the columns do not hold (Chrome's
 * tts, tdur, sf, stack, VizTracer's own...), as one JSON object text
 * appended to the args text, so a round trip loses nothing: each key and
 * value byte for byte as in the input. Nothing is written when there are
 * none or raw is not a valid object.
 */
static int put_extra(h5_sink *hs, h5w_proc *p, strview raw, uint64_t *off, uint32_t *len)
{
	uint64_t start = 0, o;
	size_t total = 0, n;
	int err;

	*off = 0;
	*len = 0;
	err = split_raw(hs, raw, &n);
	if (err < 0 || n == 0)
		return err;
	/* Keep the pieces contiguous: flush first if they may not fit. */
	if (p->blob_len + raw.n + 2 > H5W_FLUSH_BLOB && p->blob_len > 0) {
		err = flush_proc_blob(hs, p);
		if (err < 0)
			return err;
	}
	for (size_t i = 0; i < n; i += 2) {
		strview k = hs->extra[i], v = hs->extra[i + 1];

		err = blob_put(hs, p, total == 0 ? "{" : ",", 1, &o);
		if (err == 0 && total == 0)
			start = o;
		if (err == 0)
			err = blob_put(hs, p, k.p, k.n, &o);
		if (err == 0)
			err = blob_put(hs, p, ":", 1, &o);
		if (err == 0)
			err = blob_put(hs, p, v.p, v.n, &o);
		if (err < 0)
			return err;
		total += 2 + k.n + v.n;
	}
	err = blob_put(hs, p, "}", 1, &o);
	if (err < 0)
		return err;
	*off = start;
	*len = (uint32_t)(total + 1);
	return 0;
}

/* ---- metadata events: the process and thread tables, from args parsed
 * with jansson */

/* A copy of the string member key of obj, NULL if it is no string (or on
 * allocation failure). A string holding \u0000 ends there, as the C
 * strings of the tables do. */
static char *get_str(const json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));

	return s != NULL ? strdup(s) : NULL;
}

static void set_str(char **dst, char *s)
{
	if (s == NULL)
		return;
	free(*dst);
	*dst = s;
}

/* *out = the integer member key of obj; unchanged if it is absent or no
 * integer (1.5, 1e3, "12"). */
static void get_i64(const json_t *obj, const char *key, int64_t *out)
{
	const json_t *v = json_object_get(obj, key);

	if (json_is_integer(v))
		*out = (int64_t)json_integer_value(v);
}

/* argv as one string, arguments joined by single spaces (elements that
 * are no strings skipped). */
static char *join_argv(const json_t *arr)
{
	size_t len = 0, i;
	char *out = NULL;
	const json_t *v;

	if (!json_is_array(arr))
		return NULL;
	json_array_foreach(arr, i, v)
	{
		size_t n = json_string_length(v);
		char *grown;

		if (!json_is_string(v))
			continue;
		grown = realloc(out, len + n + 2);
		if (grown == NULL)
			break;
		out = grown;
		if (len > 0)
			out[len++] = ' ';
		memcpy(out + len, json_string_value(v), n);
		len += n;
		out[len] = '\0';
	}
	return out != NULL ? out : strdup("");
}

/* The "rusage" member of forktrace_process args (docs/TRACE_FORMAT.md)
 * into p: its source, and each count that is an integer. */
static void read_rusage(h5w_proc *p, const json_t *ru)
{
	if (!json_is_object(ru))
		return;
	set_str(&p->ru_source, get_str(ru, "source"));
	get_i64(ru, "user_ns", &p->ru.user_ns);
	get_i64(ru, "sys_ns", &p->ru.sys_ns);
	get_i64(ru, "maxrss_kb", &p->ru.maxrss_kb);
	get_i64(ru, "minflt", &p->ru.minflt);
	get_i64(ru, "majflt", &p->ru.majflt);
	get_i64(ru, "nvcsw", &p->ru.nvcsw);
	get_i64(ru, "nivcsw", &p->ru.nivcsw);
	get_i64(ru, "inblock", &p->ru.inblock);
	get_i64(ru, "oublock", &p->ru.oublock);
}

/* forktrace_process args (docs/TRACE_FORMAT.md) into p's record. */
static void read_process_record(h5w_proc *p, const json_t *a)
{
	const json_t *ex;
	int64_t i;

	p->has_record = true;
	get_i64(a, "pid", &p->host_pid);
	get_i64(a, "ppid", &p->ppid);
	get_i64(a, "parent", &p->parent);
	i = 0;
	get_i64(a, "start_ticks", &i);
	p->start_ticks = (uint64_t)i;
	get_i64(a, "start_ns", &p->start_ns);
	get_i64(a, "end_ns", &p->end_ns);
	set_str(&p->name, get_str(a, "name"));
	set_str(&p->exe, get_str(a, "exe"));
	set_str(&p->cwd, get_str(a, "cwd"));
	set_str(&p->spawn, get_str(a, "spawn"));
	set_str(&p->argv, join_argv(json_object_get(a, "argv")));
	set_str(&p->host, get_str(a, "host"));
	set_str(&p->rank_var, get_str(a, "rank_var"));
	get_i64(a, "rank", &p->rank);
	get_i64(a, "local_rank", &p->local_rank);
	set_str(&p->interpreter, get_str(a, "interpreter"));
	set_str(&p->launcher, get_str(a, "launcher"));
	read_rusage(p, json_object_get(a, "rusage"));
	ex = json_object_get(a, "exit");
	if (json_is_object(ex)) {
		set_str(&p->exit_kind, get_str(ex, "kind"));
		i = -1;
		get_i64(ex, "code", &i);
		p->exit_code = (int32_t)i;
		i = 0;
		get_i64(ex, "signal", &i);
		p->exit_signal = (int32_t)i;
	}
	p->instrumented = json_is_true(json_object_get(a, "instrumented"));
	i = 0;
	get_i64(a, "images", &i);
	p->images = (uint64_t)i;
	i = 0;
	get_i64(a, "lost_events", &i);
	p->lost_events = i > 0 ? (uint64_t)i : 0;
}

/*
 * The M events that name processes and threads. Their args are parsed with
 * jansson (JSON_ALLOW_NUL: a name with \u0000 is cut there, not refused;
 * nesting deeper than JSON_PARSER_MAX_DEPTH is refused by jansson before
 * it recurses further). Args jansson refuses - malformed, an integer
 * beyond int64, a lone surrogate escape - are stored as they are and
 * otherwise ignored.
 */
static int read_meta_event(h5w_proc *p, const jsonw_event *ev)
{
	json_t *a;
	h5w_thread *t;
	int64_t i;
	int err = 0;

	if (ev->name.p == NULL || ev->args.p == NULL)
		return 0;
#define IS(lit) (ev->name.n == sizeof(lit) - 1 && memcmp(ev->name.p, lit, ev->name.n) == 0)
	if (!IS("forktrace_process") && !IS("process_name") && !IS("process_labels") &&
	    !IS("process_sort_index") && !IS("thread_name") && !IS("thread_sort_index"))
		return 0;
	a = json_loadb(ev->args.p, ev->args.n, JSON_ALLOW_NUL, NULL);
	if (!json_is_object(a))
		goto out;
	if (IS("forktrace_process")) {
		read_process_record(p, a);
	} else if (IS("process_name")) {
		if (!p->has_record)
			set_str(&p->name, get_str(a, "name"));
	} else if (IS("process_labels")) {
		set_str(&p->labels, get_str(a, "labels"));
	} else if (IS("process_sort_index")) {
		get_i64(a, "sort_index", &p->sort_index);
	} else {
		t = thread_get(p, ev->tid);
		if (t == NULL) {
			err = -ENOMEM;
			goto out;
		}
		if (IS("thread_name")) {
			set_str(&t->name, get_str(a, "name"));
		} else {
			i = -1;
			get_i64(a, "sort_index", &i);
			t->sort_index = i;
		}
	}
#undef IS
out:
	json_decref(a);
	return err;
}

/* ---- the sink */

static int h5w_begin(trace_sink *s, const sink_meta *meta)
{
	(void)s;
	(void)meta;
	return 0;
}

/* The first errno a failed HDF5 call met since the last sink was
 * opened (HDF5 itself answers only "failed": -EIO here). */
static int h5w_sys_errno;

/* HDF5's system-call errors say "..., errno = N, error message = ..."
 * (HSYS_GOTO_ERROR; its source says other projects read that format):
 * the first such N on the stack. */
static herr_t find_sys_errno(unsigned n, const H5E_error2_t *e, void *arg)
{
	const char *p = e->desc != NULL ? strstr(e->desc, "errno = ") : NULL;
	int v = p != NULL ? atoi(p + 8) : 0;

	(void)n;
	if (v <= 0)
		return 0;
	*(int *)arg = v;
	return 1; /* stop the walk */
}

/* HDF5 calls this when one of its API calls fails, with the error stack
 * still whole: a full disk must be told as ENOSPC (or EDQUOT, EFBIG), not
 * as an input/output error. Prints nothing (house rule 6). */
static herr_t on_h5_error(hid_t estack, void *data)
{
	(void)data;
	if (h5w_sys_errno == 0)
		H5Ewalk2(estack, H5E_WALK_UPWARD, find_sys_errno, &h5w_sys_errno);
	return 0;
}

/* err, or the errno behind it when it is HDF5's -EIO. */
static int sys_err(int err)
{
	return err == -EIO && h5w_sys_errno != 0 ? -h5w_sys_errno : err;
}

static int h5w_event(trace_sink *s, const sink_event *e)
{
	h5_sink *hs = (h5_sink *)s;
	const jsonw_event *ev = &e->ev;
	uint32_t name_id, cat_id, extra_len = 0;
	uint64_t args_off = 0, extra_off = 0;
	size_t args_len = 0, r;
	h5w_proc *p;
	int err;

	if (hs->err != 0)
		return hs->err;
	p = proc_get(hs, ev->pid);
	if (p == NULL)
		return hs->err = -ENOMEM;
	name_id = intern(hs, ev->name.p != NULL ? ev->name : strview_c(""));
	cat_id = intern(hs, ev->cat);
	if (hs->err != 0)
		return hs->err;
	err = reserve_row(hs, p);
	if (err == 0 && ev->args.p != NULL && ev->args.n > 0) {
		if (ev->args.n > UINT32_MAX)
			err = -EOVERFLOW;
		else
			err = blob_put(hs, p, ev->args.p, ev->args.n, &args_off);
		args_len = ev->args.n;
	}
	if (err == 0 && e->raw.p != NULL)
		err = put_extra(hs, p, e->raw, &extra_off, &extra_len);
	if (err < 0)
		return hs->err = sys_err(err);

	r = p->n++;
	((int64_t *)p->col[C_TS])[r] = ev->ts_ns;
	((int64_t *)p->col[C_DUR])[r] = ev->dur_ns == JSONW_NO_TIME ? -1 : ev->dur_ns;
	((uint32_t *)p->col[C_NAME])[r] = name_id;
	((uint32_t *)p->col[C_CAT])[r] = cat_id;
	((int64_t *)p->col[C_TID])[r] = ev->tid;
	((uint8_t *)p->col[C_PH])[r] = (uint8_t)ev->ph;
	((uint8_t *)p->col[C_SCOPE])[r] = (uint8_t)ev->scope;
	((uint8_t *)p->col[C_FLAGS])[r] = (uint8_t)((ev->has_id ? 1 : 0) |
						    (ev->bind_enclosing ? 2 : 0));
	((uint64_t *)p->col[C_ID])[r] = ev->has_id ? ev->id : 0;
	((uint64_t *)p->col[C_ARGS_OFF])[r] = args_off;
	((uint32_t *)p->col[C_ARGS_LEN])[r] = (uint32_t)args_len;
	((uint64_t *)p->col[C_EXTRA_OFF])[r] = extra_off;
	((uint32_t *)p->col[C_EXTRA_LEN])[r] = extra_len;
	hs->events++;

	if (ev->ph == 'M') {
		err = read_meta_event(p, ev);
	} else {
		if (ev->ts_ns != JSONW_NO_TIME) {
			int64_t end = ev->ts_ns;

			if (ev->dur_ns != JSONW_NO_TIME && ev->dur_ns > 0)
				end += ev->dur_ns;
			if (ev->ts_ns < p->seen_min)
				p->seen_min = ev->ts_ns;
			if (end > p->seen_max)
				p->seen_max = end;
		}
		if (thread_get(p, ev->tid) == NULL)
			err = -ENOMEM;
		if (err == 0)
			err = track_region(hs, p, ev);
	}
	if (err == 0)
		err = enforce_budget(hs);
	if (err < 0)
		hs->err = err = sys_err(err);
	return err;
}

/* One row of /processes in memory. */
typedef struct h5w_prow {
	int64_t pid, host_pid, ppid, parent;
	uint64_t start_ticks;
	const char *name, *argv, *exe, *cwd, *spawn, *labels;
	int64_t start_ns, end_ns;
	const char *exit_kind;
	int32_t exit_code, exit_signal;
	uint8_t instrumented;
	uint64_t images, lost_events, events;
	int64_t sort_index;
	const char *host, *rank_var;
	int64_t rank, local_rank;
	int64_t rank_group;
	const char *interpreter, *launcher;
	const char *rusage_source;
	model_rusage ru;
} h5w_prow;

/* One row of /hosts (sink_host). */
typedef struct h5w_hrow {
	const char *name, *role, *state, *clock;
	uint64_t processes;
	int64_t offset_ns, ref_ns;
	double drift_ppm;
	int64_t err_ns;
	uint64_t samples;
	int64_t lost_ns;
	const char *why, *where;
	int64_t launcher;
	const char *launched_as;
} h5w_hrow;

typedef struct h5w_trow {
	int64_t pid, tid;
	const char *name;
	int64_t sort_index;
} h5w_trow;

#define TABLE_BLOCK 4096

static const char *or_empty(const char *s)
{
	return s != NULL ? s : "";
}

static hid_t processes_type(h5_sink *hs)
{
	hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(h5w_prow));

	if (t < 0)
		return t;
#define M(field, type) H5Tinsert(t, #field, HOFFSET(h5w_prow, field), type)
	M(pid, H5T_NATIVE_INT64);
	M(host_pid, H5T_NATIVE_INT64);
	M(ppid, H5T_NATIVE_INT64);
	M(parent, H5T_NATIVE_INT64);
	M(start_ticks, H5T_NATIVE_UINT64);
	M(name, hs->vlen_str);
	M(argv, hs->vlen_str);
	M(exe, hs->vlen_str);
	M(cwd, hs->vlen_str);
	M(spawn, hs->vlen_str);
	M(labels, hs->vlen_str);
	M(start_ns, H5T_NATIVE_INT64);
	M(end_ns, H5T_NATIVE_INT64);
	M(exit_kind, hs->vlen_str);
	M(exit_code, H5T_NATIVE_INT32);
	M(exit_signal, H5T_NATIVE_INT32);
	M(instrumented, hs->bool_type);
	M(images, H5T_NATIVE_UINT64);
	M(lost_events, H5T_NATIVE_UINT64);
	M(events, H5T_NATIVE_UINT64);
	M(sort_index, H5T_NATIVE_INT64);
	M(host, hs->vlen_str);
	M(rank, H5T_NATIVE_INT64);
	M(local_rank, H5T_NATIVE_INT64);
	M(rank_var, hs->vlen_str);
	M(rank_group, H5T_NATIVE_INT64);
	M(interpreter, hs->vlen_str);
	M(launcher, hs->vlen_str);
	M(rusage_source, hs->vlen_str);
#undef M
#define M(field) H5Tinsert(t, #field, HOFFSET(h5w_prow, ru.field), H5T_NATIVE_INT64)
	M(user_ns);
	M(sys_ns);
	M(maxrss_kb);
	M(minflt);
	M(majflt);
	M(nvcsw);
	M(nivcsw);
	M(inblock);
	M(oublock);
#undef M
	return t;
}

static hid_t hosts_type(h5_sink *hs)
{
	hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(h5w_hrow));

	if (t < 0)
		return t;
#define M(field, type) H5Tinsert(t, #field, HOFFSET(h5w_hrow, field), type)
	M(name, hs->vlen_str);
	M(role, hs->vlen_str);
	M(state, hs->vlen_str);
	M(clock, hs->vlen_str);
	M(processes, H5T_NATIVE_UINT64);
	M(offset_ns, H5T_NATIVE_INT64);
	M(ref_ns, H5T_NATIVE_INT64);
	M(drift_ppm, H5T_NATIVE_DOUBLE);
	M(err_ns, H5T_NATIVE_INT64);
	M(samples, H5T_NATIVE_UINT64);
	M(lost_ns, H5T_NATIVE_INT64);
	M(why, hs->vlen_str);
	M(where, hs->vlen_str);
	M(launcher, H5T_NATIVE_INT64);
	M(launched_as, hs->vlen_str);
#undef M
	return t;
}

static hid_t threads_type(h5_sink *hs)
{
	hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(h5w_trow));

	if (t < 0)
		return t;
	H5Tinsert(t, "pid", HOFFSET(h5w_trow, pid), H5T_NATIVE_INT64);
	H5Tinsert(t, "tid", HOFFSET(h5w_trow, tid), H5T_NATIVE_INT64);
	H5Tinsert(t, "name", HOFFSET(h5w_trow, name), hs->vlen_str);
	H5Tinsert(t, "sort_index", HOFFSET(h5w_trow, sort_index), H5T_NATIVE_INT64);
	return t;
}

/* Creates a table dataset of compound type mtype (stored packed). */
static hid_t make_table(h5_sink *hs, const char *name, hid_t mtype, hsize_t chunk)
{
	hid_t ftype = H5Tcopy(mtype), d;

	if (ftype < 0)
		return H5I_INVALID_HID;
	if (H5Tpack(ftype) < 0) {
		H5Tclose(ftype);
		return H5I_INVALID_HID;
	}
	d = make_dset(hs->meta_grp, name, ftype, chunk, hs->level, false);
	H5Tclose(ftype);
	return d;
}

static void fill_prow(h5w_prow *row, const h5w_proc *p)
{
	*row = (h5w_prow){
		.pid = p->pid,
		.host_pid = p->host_pid,
		.ppid = p->ppid,
		.parent = p->parent,
		.start_ticks = p->start_ticks,
		.name = or_empty(p->name),
		.argv = or_empty(p->argv),
		.exe = or_empty(p->exe),
		.cwd = or_empty(p->cwd),
		.spawn = or_empty(p->spawn),
		.labels = or_empty(p->labels),
		.start_ns = p->start_ns,
		.end_ns = p->end_ns,
		.exit_kind = p->exit_kind != NULL ? p->exit_kind : "unknown",
		.exit_code = p->exit_code,
		.exit_signal = p->exit_signal,
		.instrumented = p->instrumented,
		.images = p->images,
		.lost_events = p->lost_events,
		.events = p->rows_written + p->n,
		.sort_index = p->sort_index,
		.host = or_empty(p->host),
		.rank = p->rank,
		.local_rank = p->local_rank,
		.rank_var = or_empty(p->rank_var),
		.rank_group = p->rank_group,
		.interpreter = or_empty(p->interpreter),
		.launcher = or_empty(p->launcher),
		.rusage_source = or_empty(p->ru_source),
		.ru = p->ru,
	};
	/* A process without a forktrace record (VizTracer): its span is
	 * what its events cover. */
	if (!p->has_record && p->seen_min <= p->seen_max) {
		row->start_ns = p->seen_min;
		row->end_ns = p->seen_max;
	}
}

static int write_processes(h5_sink *hs)
{
	h5w_prow *rows;
	hid_t mtype, d;
	uint64_t done = 0;
	int err = -EIO;

	rows = malloc(TABLE_BLOCK * sizeof(*rows));
	if (rows == NULL)
		return -ENOMEM;
	mtype = processes_type(hs);
	if (mtype < 0)
		goto free_rows;
	d = make_table(hs, "processes", mtype, 256);
	if (d < 0)
		goto close_type;
	err = 0;
	while (done < hs->nprocs && err == 0) {
		size_t k = 0;

		for (; k < TABLE_BLOCK && done + k < hs->nprocs; k++)
			fill_prow(&rows[k], hs->procs[done + k]);
		err = append_to(d, mtype, done, k, rows);
		done += k;
	}
	if (H5Dclose(d) < 0 && err == 0)
		err = -EIO;
close_type:
	H5Tclose(mtype);
free_rows:
	free(rows);
	return err;
}

/* /hosts: the hosts of a multi-host trace (none: no table). */
static int write_hosts(h5_sink *hs, const sink_meta *meta)
{
	h5w_hrow *rows;
	hid_t mtype, d;
	int err = -EIO;

	if (meta == NULL || meta->nhosts == 0)
		return 0;
	rows = calloc(meta->nhosts, sizeof(*rows));
	if (rows == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < meta->nhosts; i++) {
		const sink_host *h = &meta->hosts[i];

		rows[i] = (h5w_hrow){
			.name = or_empty(h->name),
			.role = or_empty(h->role),
			.state = or_empty(h->state),
			.clock = or_empty(h->clock),
			.processes = h->processes,
			.offset_ns = h->offset_ns,
			.ref_ns = h->ref_ns,
			.drift_ppm = h->drift * 1e6,
			.err_ns = h->err_ns,
			.samples = h->samples,
			.lost_ns = h->lost_ns,
			.why = or_empty(h->why),
			.where = or_empty(h->where),
			.launcher = h->launcher,
			.launched_as = or_empty(h->launched_as),
		};
	}
	mtype = hosts_type(hs);
	if (mtype < 0)
		goto free_rows;
	d = make_table(hs, "hosts", mtype, 64);
	if (d < 0)
		goto close_type;
	err = append_to(d, mtype, 0, meta->nhosts, rows);
	if (H5Dclose(d) < 0 && err == 0)
		err = -EIO;
close_type:
	H5Tclose(mtype);
free_rows:
	free(rows);
	return err;
}

static int write_threads(h5_sink *hs)
{
	h5w_trow *rows;
	hid_t mtype, d;
	uint64_t done = 0;
	size_t k = 0;
	int err = -EIO;

	rows = malloc(TABLE_BLOCK * sizeof(*rows));
	if (rows == NULL)
		return -ENOMEM;
	mtype = threads_type(hs);
	if (mtype < 0)
		goto free_rows;
	d = make_table(hs, "threads", mtype, 1024);
	if (d < 0)
		goto close_type;
	err = 0;
	for (size_t i = 0; i < hs->nprocs && err == 0; i++) {
		const h5w_proc *p = hs->procs[i];

		for (size_t j = 0; j < p->nthreads && err == 0; j++) {
			rows[k++] = (h5w_trow){p->pid, p->threads[j].tid,
					       or_empty(p->threads[j].name),
					       p->threads[j].sort_index};
			if (k == TABLE_BLOCK) {
				err = append_to(d, mtype, done, k, rows);
				done += k;
				k = 0;
			}
		}
	}
	if (err == 0)
		err = append_to(d, mtype, done, k, rows);
	if (H5Dclose(d) < 0 && err == 0)
		err = -EIO;
close_type:
	H5Tclose(mtype);
free_rows:
	free(rows);
	return err;
}

/* ---- rank<N> groups: the view scope-profiler's reader opens */

/* Region times copied per read and write when a rank's regions merge. */
#define H5W_COPY_BLOCK 65536

/* Reads elements [start, start + n) of the int64 dataset loc/name. */
static int read_i64(hid_t loc, const char *name, hsize_t start, hsize_t n, int64_t *buf)
{
	hid_t d, fspace, mspace;
	int err = -EIO;

	d = H5Dopen2(loc, name, H5P_DEFAULT);
	if (d < 0)
		return -EIO;
	fspace = H5Dget_space(d);
	if (fspace < 0)
		goto close_d;
	mspace = H5Screate_simple(1, &n, NULL);
	if (mspace < 0)
		goto close_fspace;
	if (H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &start, NULL, &n, NULL) >= 0 &&
	    H5Dread(d, H5T_NATIVE_INT64, mspace, fspace, H5P_DEFAULT, buf) >= 0)
		err = 0;
	H5Sclose(mspace);
close_fspace:
	H5Sclose(fspace);
close_d:
	H5Dclose(d);
	return err;
}

/* Elements of the dataset loc/name, or -EIO. */
static int64_t dset_len(hid_t loc, const char *name)
{
	hid_t d = H5Dopen2(loc, name, H5P_DEFAULT), space;
	hssize_t n = -1;

	if (d < 0)
		return -EIO;
	space = H5Dget_space(d);
	if (space >= 0) {
		n = H5Sget_simple_extent_npoints(space);
		H5Sclose(space);
	}
	H5Dclose(d);
	return n >= 0 ? (int64_t)n : -EIO;
}

/* Appends the times of region r, written under src (a process's regions
 * group), to the region of the same name under dst (a rank's), which is
 * created on first use. buf holds H5W_COPY_BLOCK times. */
static int copy_region(h5_sink *hs, hid_t dst, hid_t src, const h5w_region *r, int64_t *buf)
{
	char *link = region_link_name(r->name);
	hid_t sg, dg;
	int64_t old;
	int err = -EIO;

	if (link == NULL)
		return -ENOMEM;
	sg = H5Gopen2(src, link, H5P_DEFAULT);
	if (sg < 0)
		goto free_link;
	if (H5Lexists(dst, link, H5P_DEFAULT) > 0)
		dg = H5Gopen2(dst, link, H5P_DEFAULT);
	else
		dg = new_region_group(hs, dst, link, r->name, r->written);
	if (dg < 0)
		goto close_sg;
	old = dset_len(dg, "start_times");
	err = old < 0 ? (int)old : 0;
	for (uint64_t at = 0; at < r->written && err == 0; at += H5W_COPY_BLOCK) {
		hsize_t n = r->written - at < H5W_COPY_BLOCK ? r->written - at : H5W_COPY_BLOCK;

		for (int i = 0; i < 2 && err == 0; i++) {
			const char *name = i == 0 ? "start_times" : "end_times";

			err = read_i64(sg, name, at, n, buf);
			if (err == 0)
				err = append_named(dg, name, H5T_NATIVE_INT64, (hsize_t)old + at, n,
						   buf);
		}
	}
	H5Gclose(dg);
close_sg:
	H5Gclose(sg);
free_link:
	free(link);
	return err;
}

/* The regions of the k > 1 processes ps, concatenated per name in the
 * order of ps, into the new group regions under g. */
static int merge_regions(h5_sink *hs, hid_t g, h5w_proc *const *ps, size_t k)
{
	int64_t *buf = malloc(H5W_COPY_BLOCK * sizeof(*buf));
	char path[48];
	hid_t rg, src;
	int err = 0;

	if (buf == NULL)
		return -ENOMEM;
	rg = H5Gcreate2(g, "regions", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	if (rg < 0) {
		free(buf);
		return -EIO;
	}
	for (size_t i = 0; i < k && err == 0; i++) {
		const h5w_proc *p = ps[i];

		if (!p->have_regions_group)
			continue;
		snprintf(path, sizeof(path), "%" PRId64 "/regions", p->pid);
		src = H5Gopen2(hs->events_grp, path, H5P_DEFAULT);
		if (src < 0) {
			err = -EIO;
			break;
		}
		for (size_t j = 0; j < p->nregions && err == 0; j++)
			if (p->regions[j].written > 0)
				err = copy_region(hs, rg, src, &p->regions[j], buf);
		H5Gclose(src);
	}
	if (H5Gclose(rg) < 0 && err == 0)
		err = -EIO;
	free(buf);
	return err;
}

/*
 * The group rank<rank> of the k processes ps (in trace order), with
 * attributes rank and pids, and their regions: when only one of them has
 * regions, a hard link to its metadata/events/<pid>/regions (one group
 * under two names, nothing copied); when several have, their times
 * concatenated per name.
 */
static int write_rank_group(h5_sink *hs, int64_t rank, h5w_proc *const *ps, size_t k)
{
	int64_t *pids = malloc(k * sizeof(*pids));
	const h5w_proc *one = NULL;
	char name[32], path[48];
	size_t with = 0;
	hid_t g;
	int err = -EIO;

	if (pids == NULL)
		return -ENOMEM;
	snprintf(name, sizeof(name), "rank%" PRId64, rank);
	g = H5Gcreate2(hs->file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	if (g < 0)
		goto free_pids;
	for (size_t i = 0; i < k; i++) {
		pids[i] = ps[i]->pid;
		ps[i]->rank_group = rank;
		if (ps[i]->have_regions_group) {
			with++;
			one = ps[i];
		}
	}
	err = attr_i64(g, "rank", rank);
	if (err == 0)
		err = attr_i64v(g, "pids", pids, k);
	if (err == 0 && with == 1) {
		snprintf(path, sizeof(path), "%" PRId64 "/regions", one->pid);
		if (H5Lcreate_hard(hs->events_grp, path, g, "regions", H5P_DEFAULT, H5P_DEFAULT) <
		    0)
			err = -EIO;
	} else if (err == 0 && with > 1) {
		err = merge_regions(hs, g, ps, k);
	}
	if (H5Gclose(g) < 0 && err == 0)
		err = -EIO;
free_pids:
	free(pids);
	return err;
}

typedef struct h5w_ranked {
	int64_t rank;
	size_t index;
	h5w_proc *p;
} h5w_ranked;

static int cmp_ranked(const void *a, const void *b)
{
	const h5w_ranked *x = a, *y = b;

	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

/*
 * The rank<N> groups (docs/HDF5_LAYOUT.md): when any process has a rank,
 * one group per rank with the processes of that rank (the others are in
 * none); else one group per process, rank<i> for the i-th row of
 * metadata/processes. Sets each process's rank_group; *by_rank says
 * which rule held.
 */
static int write_rank_groups(h5_sink *hs, bool *by_rank)
{
	h5w_ranked *v;
	h5w_proc **ps;
	size_t n = 0;
	int err = 0;

	*by_rank = false;
	for (size_t i = 0; i < hs->nprocs && !*by_rank; i++)
		*by_rank = hs->procs[i]->rank >= 0;
	if (!*by_rank) {
		for (size_t i = 0; i < hs->nprocs && err == 0; i++)
			err = write_rank_group(hs, (int64_t)i, &hs->procs[i], 1);
		return err;
	}
	v = malloc(hs->nprocs * sizeof(*v));
	ps = malloc(hs->nprocs * sizeof(*ps));
	if (v == NULL || ps == NULL) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < hs->nprocs; i++)
		if (hs->procs[i]->rank >= 0)
			v[n++] = (h5w_ranked){hs->procs[i]->rank, i, hs->procs[i]};
	qsort(v, n, sizeof(*v), cmp_ranked);
	for (size_t i = 0, j; i < n && err == 0; i = j) {
		for (j = i; j < n && v[j].rank == v[i].rank; j++)
			ps[j - i] = v[j].p;
		err = write_rank_group(hs, v[i].rank, ps, j - i);
	}
out:
	free(v);
	free(ps);
	return err;
}

/* One row of metadata/critical_path. */
typedef struct h5w_crow {
	int64_t pid;
	const char *name;
	int64_t start_ns, end_ns;
} h5w_crow;

/* metadata/critical_path: the steps of the merge's critical path, in time
 * order, with its span as attributes start_ns and end_ns; no table when
 * the trace has none. */
static int write_critical_path(h5_sink *hs, const sink_meta *meta)
{
	const critpath_step *steps;
	h5w_crow *rows;
	hid_t mtype, d;
	size_t n;
	int err = -EIO;

	if (meta == NULL || meta->critical_path == NULL)
		return 0;
	n = critpath_steps(meta->critical_path, &steps);
	rows = calloc(n ? n : 1, sizeof(*rows));
	if (rows == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		rows[i] = (h5w_crow){steps[i].pid, or_empty(steps[i].name), steps[i].start_ns,
				     steps[i].end_ns};
	mtype = H5Tcreate(H5T_COMPOUND, sizeof(h5w_crow));
	if (mtype < 0)
		goto free_rows;
	if (H5Tinsert(mtype, "pid", HOFFSET(h5w_crow, pid), H5T_NATIVE_INT64) < 0 ||
	    H5Tinsert(mtype, "name", HOFFSET(h5w_crow, name), hs->vlen_str) < 0 ||
	    H5Tinsert(mtype, "start_ns", HOFFSET(h5w_crow, start_ns), H5T_NATIVE_INT64) < 0 ||
	    H5Tinsert(mtype, "end_ns", HOFFSET(h5w_crow, end_ns), H5T_NATIVE_INT64) < 0)
		goto close_type;
	d = make_table(hs, "critical_path", mtype, 256);
	if (d < 0)
		goto close_type;
	err = append_to(d, mtype, 0, n, rows);
	if (err == 0)
		err = attr_i64(d, "start_ns", critpath_start_ns(meta->critical_path));
	if (err == 0)
		err = attr_i64(d, "end_ns", critpath_end_ns(meta->critical_path));
	if (H5Dclose(d) < 0 && err == 0)
		err = -EIO;
close_type:
	H5Tclose(mtype);
free_rows:
	free(rows);
	return err;
}

/* t's command as one string, arguments joined by single spaces; NULL
 * when none (or on allocation failure). */
static char *join_command(const model_trace *t)
{
	size_t len = 1;
	char *out;

	if (t == NULL || t->command == NULL)
		return NULL;
	for (size_t i = 0; t->command[i] != NULL; i++)
		len += strlen(t->command[i]) + 1;
	out = malloc(len);
	if (out == NULL)
		return NULL;
	out[0] = '\0';
	for (size_t i = 0, k = 0; t->command[i] != NULL; i++) {
		size_t n = strlen(t->command[i]);

		if (i > 0)
			out[k++] = ' ';
		memcpy(out + k, t->command[i], n + 1);
		k += n;
	}
	return out;
}

/*
 * The run's attributes on loc: on the root, as every layout had them; on
 * metadata, plain (scalars and strings only, command joined by spaces,
 * no arrays) for readers that take its attributes as one dict, like
 * scope-profiler's, with "hostname" as scope-profiler names the host.
 */
static int write_run_attrs(h5_sink *hs, hid_t loc, const sink_meta *meta, bool plain, bool by_rank)
{
	const model_trace *t = meta != NULL ? meta->model : NULL;
	size_t ncmd = 0, nin = 0;
	int err = 0;

	err = attr_str(hs, loc, "format", H5_LAYOUT_NAME);
	if (err == 0)
		err = attr_i64(loc, "format_version", H5_LAYOUT_VERSION);
	if (err == 0)
		err = attr_str(hs, loc, "version", FT_VERSION_STRING);
	if (err == 0)
		err = attr_str(hs, loc, "origin", t != NULL ? t->origin : NULL);
	if (err == 0)
		err = attr_str(hs, loc, "host", t != NULL ? t->host : NULL);
	if (err == 0 && plain)
		err = attr_str(hs, loc, "hostname", t != NULL ? t->host : NULL);
	if (err == 0)
		err = attr_str(hs, loc, "rank_groups", by_rank ? "rank" : "process");
	if (t != NULL && t->command != NULL)
		while (t->command[ncmd] != NULL)
			ncmd++;
	/* No command (a combine) is no attribute, not an empty list. */
	if (err == 0 && t != NULL && t->command != NULL) {
		if (plain) {
			char *joined = join_command(t);

			err = joined != NULL ? attr_str(hs, loc, "command", joined) : -ENOMEM;
			free(joined);
		} else {
			err = attr_strv(hs, loc, "command", t->command, ncmd);
		}
	}
	if (err == 0)
		err = attr_i64(loc, "anchor_monotonic_ns", t != NULL ? t->anchor_mono_ns : -1);
	if (err == 0)
		err = attr_i64(loc, "anchor_realtime_ns", t != NULL ? t->anchor_real_ns : -1);
	if (err == 0)
		err = attr_i64(loc, "start_ns", t != NULL ? t->start_ns : -1);
	if (err == 0)
		err = attr_i64(loc, "end_ns", t != NULL ? t->end_ns : -1);
	if (err == 0)
		err = attr_i64(loc, "exit_status", t != NULL ? t->exit_status : 0);
	if (err == 0)
		err = attr_u64(loc, "processes",
			       meta != NULL && meta->processes > 0 ? meta->processes : hs->nprocs);
	if (err == 0)
		err = attr_u64(loc, "lost_events", t != NULL ? t->lost_events : 0);
	if (err == 0)
		err = attr_u64(loc, "events", hs->events);
	if (err == 0 && !plain && meta != NULL && meta->inputs != NULL) {
		while (meta->inputs[nin] != NULL)
			nin++;
		err = attr_strv(hs, loc, "inputs", meta->inputs, nin);
		if (err == 0 && meta->align_methods != NULL)
			err = attr_strv(hs, loc, "align_methods", meta->align_methods, nin);
		if (err == 0 && meta->align_shift_ns != NULL)
			err = attr_i64v(loc, "align_shift_ns", meta->align_shift_ns, nin);
	}
	return err;
}

/* Per process group: its trace pid and event count, for readers. */
static int write_group_attrs(h5_sink *hs, h5w_proc *p)
{
	hid_t g = proc_group(hs, p);
	int err;

	if (g < 0)
		return -EIO;
	err = attr_i64(g, "pid", p->pid);
	if (err == 0)
		err = attr_u64(g, "events", p->rows_written);
	if (H5Gclose(g) < 0 && err == 0)
		err = -EIO;
	return err;
}

static void close_file(h5_sink *hs)
{
	close_open_dsets(hs);
	if (hs->strings >= 0)
		H5Dclose(hs->strings);
	if (hs->events_grp >= 0)
		H5Gclose(hs->events_grp);
	if (hs->meta_grp >= 0)
		H5Gclose(hs->meta_grp);
	if (hs->file >= 0)
		H5Fclose(hs->file);
	hs->strings = hs->events_grp = hs->meta_grp = hs->file = H5I_INVALID_HID;
}

static int h5w_end(trace_sink *s, const sink_meta *meta)
{
	h5_sink *hs = (h5_sink *)s;
	bool by_rank = false;
	struct stat st;
	int err = hs->err;

	for (size_t i = 0; i < hs->nprocs && err == 0; i++) {
		err = flush_proc(hs, hs->procs[i], true, true);
		if (err == 0)
			err = write_group_attrs(hs, hs->procs[i]);
	}
	if (hs->pipe != NULL) {
		int perr = opipe_finish(hs->pipe);

		if (err == 0)
			err = perr;
	}
	close_open_dsets(hs);
	if (err == 0)
		err = flush_strings(hs);
	if (err == 0)
		err = write_rank_groups(hs, &by_rank);
	if (err == 0)
		err = write_processes(hs);
	if (err == 0)
		err = write_threads(hs);
	if (err == 0)
		err = write_hosts(hs, meta);
	if (err == 0)
		err = write_critical_path(hs, meta);
	if (err == 0)
		err = write_run_attrs(hs, hs->file, meta, false, by_rank);
	if (err == 0)
		err = write_run_attrs(hs, hs->meta_grp, meta, true, by_rank);
	if (err == 0 && H5Fflush(hs->file, H5F_SCOPE_GLOBAL) < 0)
		err = -EIO;
	close_file(hs);
	hs->base.stats.events = hs->events;
	if ((hs->fd >= 0 ? fstat(hs->fd, &st) : stat(hs->path, &st)) == 0)
		hs->base.stats.bytes = (uint64_t)st.st_size;
	if (err < 0)
		hs->err = err = sys_err(err);
	return err;
}

static void h5w_free(trace_sink *s)
{
	h5_sink *hs = (h5_sink *)s;

	if (hs == NULL)
		return;
	/* The jobs still in flight (an error stopped the trace) are written
	 * or released before the file closes. */
	opipe_free(hs->pipe);
	close_file(hs);
	while (hs->pool != NULL) {
		h5w_job *j = hs->pool;

		hs->pool = j->next;
		job_free(j);
	}
	pthread_mutex_destroy(&hs->pool_lock);
	for (size_t i = 0; i < hs->npending; i++)
		if (hs->pending_owned[i])
			free((char *)hs->pending[i]);
	free(hs->pending);
	free(hs->pending_owned);
	for (size_t i = 0; i < hs->nprocs; i++)
		proc_free(hs->procs[i]);
	free(hs->procs);
	htab_free(&hs->pids);
	smap_free(&hs->interned);
	free(hs->scratch);
	free(hs->extra);
	if (hs->vlen_str >= 0)
		H5Tclose(hs->vlen_str);
	if (hs->bool_type >= 0)
		H5Tclose(hs->bool_type);
	free(hs->path);
	free(hs);
}

/* The bool h5py writes and reads as numpy bool: an int8 enum. */
static hid_t make_bool_type(void)
{
	hid_t t = H5Tenum_create(H5T_NATIVE_INT8);
	int8_t f = 0, v = 1;

	if (t < 0)
		return t;
	if (H5Tenum_insert(t, "FALSE", &f) < 0 || H5Tenum_insert(t, "TRUE", &v) < 0) {
		H5Tclose(t);
		return H5I_INVALID_HID;
	}
	return t;
}

/* Creates the file at path (an existing file is truncated) with the
 * groups and datasets that exist from the start. */
static int open_file(h5_sink *hs)
{
	hid_t fapl, gcpl;
	int err = -EIO;

	fapl = H5Pcreate(H5P_FILE_ACCESS);
	if (fapl < 0)
		return -EIO;
	/* No flock: the file is ours alone, and locks fail on some network
	 * file systems. */
	H5Pset_file_locking(fapl, false, true);
	/* The 1.10 file format: its chunk index for extendable datasets
	 * (extensible array) costs far less per dataset than the 1.8
	 * B-tree, which matters with a dozen datasets per process. HDF5
	 * 1.10 and later (h5py, h5dump of Debian 12) read it. */
	H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110);
	/* HDF5's metadata cache counts entries by their size on disk, but
	 * holds them decoded, several times larger: with its default 32 MiB
	 * (thousands of processes, a dozen datasets each) it grew past
	 * 400 MiB of heap. 2 MiB of disk size keeps it near 30, at no
	 * cost in speed (docs/BENCHMARKS.md). */
	{
		H5AC_cache_config_t mdc = {.version = H5AC__CURR_CACHE_CONFIG_VERSION};

		if (H5Pget_mdc_config(fapl, &mdc) >= 0) {
			mdc.set_initial_size = true;
			mdc.initial_size = 1u << 20;
			mdc.min_size = 1u << 20;
			mdc.max_size = H5W_MDC_MAX;
			H5Pset_mdc_config(fapl, &mdc);
		}
	}
	hs->file = H5Fcreate(hs->path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
	H5Pclose(fapl);
	if (hs->file < 0)
		return -EIO;
	/* At the top only rank<N> groups and "metadata", which holds
	 * forktrace's own tables: scope-profiler's reader takes every other
	 * top-level object for a rank. */
	hs->meta_grp = H5Gcreate2(hs->file, "metadata", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	if (hs->meta_grp < 0)
		return -EIO;
	/* Track creation order, so readers list processes in the order
	 * they came (the process tree's, for a live run). */
	gcpl = H5Pcreate(H5P_GROUP_CREATE);
	if (gcpl < 0)
		return -EIO;
	if (H5Pset_link_creation_order(gcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED) >= 0)
		hs->events_grp = H5Gcreate2(hs->meta_grp, "events", H5P_DEFAULT, gcpl, H5P_DEFAULT);
	H5Pclose(gcpl);
	if (hs->events_grp < 0)
		return -EIO;
	hs->strings = make_dset(hs->meta_grp, "strings", hs->vlen_str, H5W_STRING_CHUNK, hs->level,
				false);
	if (hs->strings < 0)
		return -EIO;
	/* Id 0: "", the absent name or category. */
	err = add_pending(hs, "", false);
	hs->next_id = 1;
	return err;
}

/* Chunks are written by the thread that owns the file: HDF5 is not
 * thread-safe. */
static const opipe_ops h5w_pipe_ops = {
	.work = job_work,
	.done = job_done,
	.release = job_release,
	.done_on_submitter = true,
};

static trace_sink *h5_new(char *path, int fd, const events_opts *opts, int *err)
{
	h5_sink *hs = calloc(1, sizeof(*hs));

	if (hs == NULL) {
		free(path);
		*err = -ENOMEM;
		return NULL;
	}
	hs->path = path;
	hs->fd = fd;
	hs->budget = H5W_BUDGET;
	hs->max_chunk = max_chunk_for(hs->budget);
	pthread_mutex_init(&hs->pool_lock, NULL);
	hs->file = hs->meta_grp = hs->events_grp = hs->strings = H5I_INVALID_HID;
	hs->vlen_str = hs->bool_type = H5I_INVALID_HID;
	hs->level = opts != NULL && opts->gzip_level >= 1 && opts->gzip_level <= 9
			    ? (unsigned)opts->gzip_level
			    : H5W_DEFAULT_LEVEL;
	*err = -ENOMEM;
	if (path == NULL)
		goto fail;
	hs->pipe = opipe_new(&h5w_pipe_ops, hs, h5w_max_jobs());
	if (hs->pipe == NULL)
		goto fail;
	hs->pending = malloc(H5W_STRING_CHUNK * sizeof(*hs->pending));
	hs->pending_owned = malloc(H5W_STRING_CHUNK * sizeof(*hs->pending_owned));
	if (hs->pending == NULL || hs->pending_owned == NULL)
		goto fail;
	/* Modules do not print (house rule 6): HDF5's own error stack
	 * printing goes off; failures come back as -EIO, or as the errno
	 * of the system call that failed under it. */
	H5Eset_auto2(H5E_DEFAULT, on_h5_error, NULL);
	h5w_sys_errno = 0;
	/* HDF5 keeps freed blocks on free lists without limit by default;
	 * bound them (a process-wide setting) so memory stays flat. */
	H5set_free_list_limits(1 << 20, 1 << 18, 1 << 20, 1 << 18, 1 << 20, 1 << 18);
	*err = -EIO;
	hs->vlen_str = H5Tcopy(H5T_C_S1);
	if (hs->vlen_str < 0 || H5Tset_size(hs->vlen_str, H5T_VARIABLE) < 0 ||
	    H5Tset_cset(hs->vlen_str, H5T_CSET_UTF8) < 0)
		goto fail;
	hs->bool_type = make_bool_type();
	if (hs->bool_type < 0)
		goto fail;
	*err = open_file(hs);
	if (*err < 0)
		goto fail;
	hs->base.begin = h5w_begin;
	hs->base.event = h5w_event;
	hs->base.end = h5w_end;
	hs->base.free = h5w_free;
	return &hs->base;
fail:
	*err = sys_err(*err);
	h5w_free(&hs->base);
	return NULL;
}

trace_sink *h5w_sink_new(const char *path, const events_opts *opts, int *err)
{
	int fd;

	/* Create it ourselves first: HDF5 says only "unable to create",
	 * open(2) says why (EACCES, ENOENT, EISDIR). */
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		*err = -errno;
		return NULL;
	}
	close(fd);
	return h5_new(strdup(path), -1, opts, err);
}

trace_sink *h5w_sink_new_fd(int fd, const events_opts *opts, int *err)
{
	struct stat st;
	char path[64];

	if (fstat(fd, &st) < 0) {
		*err = -errno;
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {
		*err = -ESPIPE;
		return NULL;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return h5_new(strdup(path), fd, opts, err);
}

void h5w_set_budget(trace_sink *s, size_t bytes)
{
	h5_sink *hs = (h5_sink *)s;

	hs->budget = bytes;
	hs->max_chunk = max_chunk_for(bytes);
}

size_t h5w_buffered(const trace_sink *s)
{
	const h5_sink *hs = (const h5_sink *)s;

	return hs->mem + hs->job_mem;
}
