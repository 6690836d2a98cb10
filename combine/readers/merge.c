/*
 * merge.c - the merge (merge.h): inputs expanded, pids kept apart, --align
 * shifts computed, every input - a file, or a model - streamed into one
 * sink. A model's events get what the reader does to a file's (the pid
 * map, id namespaces, shifts: model_feed), so that a model is the input
 * the file events_write would write of it is, byte for byte; written as
 * its own trace (`forktrace run`), they go to the sink as they are.
 *
 * --align needs each input's anchor (or start time) before its first ts
 * is rewritten, and forktrace writes its anchor in otherData, after
 * traceEvents; a VizTracer file's start time is the smallest ts of events
 * that are not sorted. So --align reads every input twice: a first pass
 * that sends nothing anywhere and only notes the metadata and the time
 * span, then the real pass. Memory stays flat; the cost is time, and only
 * with --align.
 *
 * The run metadata of the inputs (host, command, exit status of
 * otherData.forktrace, parsed with jansson: a few small objects) goes to
 * the output's where it is unambiguous - one input, or all inputs say the
 * same - so that `forktrace report run.json` shows what `forktrace run
 * --report` showed; each input's is listed with it (sink_meta.input_runs).
 *
 * The other top-level keys of the inputs (file_info, viztracer_metadata,
 * systemTraceEvents, the members of another tool's otherData, ...) come
 * out after traceEvents, where the JSON sink calls back (sink_extra): each
 * key once with the value of the first input that has it, and the value
 * of every other input that differs in that input's object of
 * otherData.forktrace.inputs, as "top_level" (docs/TRACE_FORMAT.md). The
 * values go to an unlinked temporary file as the inputs stream past, so
 * memory stays flat however big they are; only the first value of each
 * key, when small, is also kept in memory, to compare the others with.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "merge.h"
#include "jsonr.h"
#include "htab.h"
#include "reader.h"
#include "vec.h"

/* ---- pid maps: int64 -> int64 ------------------------------------------ */

/*
 * An htab holds the map, each value with its top bit flipped: an htab
 * value is never 0, and only INT64_MIN would be. INT64_MIN is the value of
 * at most one key here (a pid of INT64_MIN kept as it is in the output),
 * which is held beside the table. A key is put once: the merge asks first.
 */
#define PIDMAP_FLIP ((uint64_t)1 << 63)

typedef struct pidmap {
	htab h;
	bool has_min; /* min_key maps to INT64_MIN */
	int64_t min_key;
} pidmap;

static inline bool pm_get(const pidmap *m, int64_t k, int64_t *v)
{
	uint64_t got = htab_get(&m->h, (uint64_t)k);

	if (got != 0) {
		*v = (int64_t)(got ^ PIDMAP_FLIP);
		return true;
	}
	if (m->has_min && m->min_key == k) {
		*v = INT64_MIN;
		return true;
	}
	return false;
}

static int pm_put(pidmap *m, int64_t k, int64_t v)
{
	if (v == INT64_MIN) {
		m->has_min = true;
		m->min_key = k;
		return 0;
	}
	return htab_set(&m->h, (uint64_t)k, (uint64_t)v ^ PIDMAP_FLIP);
}

/* How many keys are mapped. */
static size_t pm_count(const pidmap *m)
{
	return m->h.n + m->has_min;
}

static void pm_clear(pidmap *m)
{
	htab_clear(&m->h);
	m->has_min = false;
}

static void pm_free(pidmap *m)
{
	htab_free(&m->h);
	m->has_min = false;
}

/* ---- inputs ----------------------------------------------------------- */

typedef struct pathv {
	char **v;
	bool *in_dir; /* v[i] was found in a directory (reader_opts.regular_only) */
	size_t n, cap;
} pathv;

static int pathv_add(pathv *pv, char *p, bool in_dir)
{
	if (p == NULL)
		return -ENOMEM;
	if (pv->n == pv->cap) {
		size_t c = pv->cap, in_dir_cap = pv->cap;

		if (vec_grow(&pv->v, &c, pv->n + 1, sizeof(*pv->v), 16) < 0 ||
		    vec_grow(&pv->in_dir, &in_dir_cap, pv->n + 1, sizeof(*pv->in_dir), 16) < 0) {
			free(p);
			return -ENOMEM;
		}
		pv->cap = c;
	}
	pv->in_dir[pv->n] = in_dir;
	pv->v[pv->n++] = p;
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	/* Version order, so that result_9 comes before result_10. */
	return strverscmp(*(char *const *)a, *(char *const *)b);
}

/* Whether a directory entry is a trace file to combine: by its name, or
 * else by its first bytes. An entry named like a trace that is not a
 * regular file (a FIFO, a device) is taken too: its reading says that it
 * was not read. Other entries that are no regular files are left alone. */
static bool is_trace_file(const char *path, const char *name, bool regular)
{
	if (name[0] == '.')
		return false;
	if (fnmatch("*.json", name, 0) == 0 || fnmatch("*.gz", name, 0) == 0)
		return true;
	return regular && reader_sniff(path);
}

bool merge_dir_takes(const char *path, const char *name)
{
	return is_trace_file(path, name, true);
}

/* Adds path, or the trace files of the directory path, to pv. A
 * directory without trace files is added as itself, so that its
 * reading reports the problem. "-" is standard input, whatever is called
 * so in the working directory. */
static int expand(pathv *pv, const char *path)
{
	struct stat st;
	DIR *d;
	struct dirent *de;
	size_t first = pv->n;
	int err = 0;

	if (strcmp(path, "-") == 0 || stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return pathv_add(pv, strdup(path), false);
	d = opendir(path);
	if (d == NULL)
		return pathv_add(pv, strdup(path), false);
	while ((de = readdir(d)) != NULL) {
		char *full;
		struct stat fst;

		if (asprintf(&full, "%s%s%s", path, path[strlen(path) - 1] == '/' ? "" : "/",
			     de->d_name) < 0) {
			err = -ENOMEM;
			break;
		}
		if (stat(full, &fst) < 0 || S_ISDIR(fst.st_mode) ||
		    !is_trace_file(full, de->d_name, S_ISREG(fst.st_mode))) {
			free(full);
			continue;
		}
		err = pathv_add(pv, full, true);
		if (err < 0)
			break;
	}
	closedir(d);
	if (err < 0)
		return err;
	if (pv->n == first)
		return pathv_add(pv, strdup(path), false);
	qsort(pv->v + first, pv->n - first, sizeof(*pv->v), cmp_names);
	return 0;
}

static void pathv_free(pathv *pv)
{
	for (size_t i = 0; i < pv->n; i++)
		free(pv->v[i]);
	free(pv->v);
	free(pv->in_dir);
	memset(pv, 0, sizeof(*pv));
}

int merge_expand(const char *const *paths, size_t npaths, char ***out, bool **in_dir, size_t *nout)
{
	pathv pv = {0};
	int err = 0;

	for (size_t i = 0; i < npaths && err == 0; i++)
		err = expand(&pv, paths[i]);
	if (err < 0) {
		pathv_free(&pv);
		return err;
	}
	*out = pv.v;
	*in_dir = pv.in_dir;
	*nout = pv.n;
	return 0;
}

/* ---- top-level keys of the inputs ----------------------------------- */

/* First values up to TL_CACHE_ONE bytes are also kept in memory, up to
 * TL_CACHE_ALL in all: comparing with them costs no read. */
#define TL_CACHE_ONE (256u << 10)
#define TL_CACHE_ALL (4u << 20)
/* Read size for the spool. */
#define TL_IO (64u << 10)

typedef struct tl_key {
	char *name;        /* unescaped, owned */
	bool other;        /* a member of otherData */
	bool per_input;    /* an otherData that is not an object: never at the top */
	bool dtu;          /* displayTimeUnit */
	bool differ;       /* an input has another value */
	bool ms;           /* the first value is "ms" */
	uint64_t off, len; /* the first input's value, in the spool */
	char *cache;       /* a copy of it, or NULL; owned */
	size_t last;       /* 1 + the last input that had it */
} tl_key;

/* One input's value of a key, written in that input's object. */
typedef struct tl_val {
	size_t input, key;
	uint64_t off, len;
} tl_val;

typedef struct toplevel {
	tl_key *keys;
	size_t nkeys, keys_cap;
	htab by_name; /* tl_hash -> 1 + index into keys */
	tl_val *vals; /* in input order */
	size_t nvals, vals_cap;
	int fd; /* the spool: -1 until a value comes */
	uint64_t size;
	size_t cached;
	char *io; /* TL_IO bytes */
	size_t ninputs, cur;
	size_t dtu_inputs; /* inputs that state displayTimeUnit */
	int spool_err;     /* the spool's first failure (a full TMPDIR), or 0 */
	/* 1 + the last input that had an otherData object (members), or one
	 * that is not an object: a file with both keeps the first kind. */
	size_t od_members, od_other;
	sink_extra extra;
} toplevel;

static uint64_t tl_hash(const char *p, size_t n, bool other)
{
	uint64_t h = other ? 0x84222325cbf29ce4ull : 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static bool tl_is(const tl_key *k, strview name, bool other)
{
	return k->other == other && strlen(k->name) == name.n && !memcmp(k->name, name.p, name.n);
}

/* The key's index, or -1. */
static ssize_t tl_find(const toplevel *t, strview name, bool other)
{
	uint64_t h = tl_hash(name.p, name.n, other);
	size_t pos = htab_start(&t->by_name, h);
	uint64_t v;

	while ((v = htab_next(&t->by_name, h, &pos)) != 0)
		if (tl_is(&t->keys[v - 1], name, other))
			return (ssize_t)(v - 1);
	return -1;
}

/* A new key (name has no NUL): its index, or -ENOMEM. */
static ssize_t tl_add(toplevel *t, strview name, bool other)
{
	tl_key *key;

	if (htab_reserve(&t->by_name) < 0 ||
	    vec_grow(&t->keys, &t->keys_cap, t->nkeys + 1, sizeof(*t->keys), 8) < 0)
		return -ENOMEM;
	key = &t->keys[t->nkeys];
	memset(key, 0, sizeof(*key));
	key->name = strndup(name.p, name.n);
	if (key->name == NULL)
		return -ENOMEM;
	key->other = other;
	key->dtu = !other && !strcmp(key->name, "displayTimeUnit");
	key->per_input = !other && !strcmp(key->name, "otherData");
	htab_add(&t->by_name, tl_hash(name.p, name.n, other), t->nkeys + 1); /* reserved */
	return (ssize_t)t->nkeys++;
}

/* Appends v to the spool (made on first use: an unlinked file in TMPDIR);
 * *off is where it starts. Returns 0 or a negative errno. */
static int tl_spool(toplevel *t, strview v, uint64_t *off)
{
	size_t done = 0;

	if (t->fd < 0) {
		const char *dir = getenv("TMPDIR");
		char *path;

		if (dir == NULL || *dir == '\0')
			dir = "/tmp";
		t->fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
		if (t->fd < 0) {
			/* A file system without O_TMPFILE. */
			if (asprintf(&path, "%s/forktrace-combine-XXXXXX", dir) < 0)
				return -ENOMEM;
			t->fd = mkostemp(path, O_CLOEXEC);
			if (t->fd >= 0)
				unlink(path);
			free(path);
			if (t->fd < 0)
				return t->spool_err = -errno;
		}
	}
	/* At its offset: after a short write (a full disk) the file's
	 * position is no longer t->size. */
	while (done < v.n) {
		ssize_t k = pwrite(t->fd, v.p + done, v.n - done, (off_t)(t->size + done));

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return t->spool_err = -errno;
		done += (size_t)k;
	}
	*off = t->size;
	t->size += v.n;
	return 0;
}

/* Reads n bytes of the spool at off into p. Returns 0 or a negative errno. */
static int tl_read(const toplevel *t, uint64_t off, char *p, size_t n)
{
	while (n > 0) {
		ssize_t k = pread(t->fd, p, n, (off_t)off);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EIO;
		p += k;
		n -= (size_t)k;
		off += (uint64_t)k;
	}
	return 0;
}

/* Whether v is the key's first value: 1, 0, or a negative errno. */
static int tl_same(toplevel *t, const tl_key *key, strview v)
{
	if (key->len != v.n)
		return 0;
	if (key->cache != NULL)
		return !memcmp(key->cache, v.p, v.n);
	for (size_t at = 0; at < v.n; at += TL_IO) {
		size_t n = v.n - at < TL_IO ? v.n - at : TL_IO;
		int err = tl_read(t, key->off + at, t->io, n);

		if (err < 0)
			return err;
		if (memcmp(t->io, v.p + at, n) != 0)
			return 0;
	}
	return 1;
}

static int tl_add_val(toplevel *t, size_t k, uint64_t off, uint64_t len)
{
	if (vec_grow(&t->vals, &t->vals_cap, t->nvals + 1, sizeof(*t->vals), 16) < 0)
		return -ENOMEM;
	t->vals[t->nvals++] = (tl_val){t->cur, k, off, len};
	return 0;
}

/* reader_opts.top_key: one top-level key (or member of otherData) of the
 * input being read. */
static int on_top_key(void *ctx, strview name, bool other, strview v)
{
	toplevel *t = ctx;
	tl_key *key;
	ssize_t k;
	uint64_t off;
	int err, same;

	/* A name with NUL in it cannot be written back (jsonw_key). */
	if (memchr(name.p, '\0', name.n) != NULL)
		return 1;
	/* otherData twice in a file, an object and not: its "top_level"
	 * would have "otherData" twice. */
	if (other ? t->od_other == t->cur + 1
		  : (name.n == 9 && !memcmp(name.p, "otherData", 9) && t->od_members == t->cur + 1))
		return 1;
	if (other)
		t->od_members = t->cur + 1;
	else if (name.n == 9 && !memcmp(name.p, "otherData", 9))
		t->od_other = t->cur + 1;
	k = tl_find(t, name, other);
	if (k < 0) {
		k = tl_add(t, name, other);
		if (k < 0)
			return (int)k;
		key = &t->keys[k];
		err = tl_spool(t, v, &key->off);
		if (err < 0)
			return err;
		key->len = v.n;
		key->last = t->cur + 1;
		key->ms = v.n == 4 && !memcmp(v.p, "\"ms\"", 4);
		if (v.n <= TL_CACHE_ONE && t->cached + v.n <= TL_CACHE_ALL &&
		    (key->cache = malloc(v.n)) != NULL) {
			memcpy(key->cache, v.p, v.n);
			t->cached += v.n;
		}
		t->dtu_inputs += key->dtu;
		if (key->dtu || key->per_input)
			return tl_add_val(t, (size_t)k, key->off, key->len);
		return 0;
	}
	key = &t->keys[k];
	/* Twice in one file: JSON readers keep one; the first is kept. */
	if (key->last == t->cur + 1)
		return 1;
	key->last = t->cur + 1;
	t->dtu_inputs += key->dtu;
	same = tl_same(t, key, v);
	if (same < 0)
		return same;
	if (same && !key->dtu && !key->per_input)
		return 0;
	off = key->off;
	if (!same) {
		key->differ = true;
		err = tl_spool(t, v, &off);
		if (err < 0)
			return err;
	}
	return tl_add_val(t, (size_t)k, off, v.n);
}

/* Whether the inputs agree on displayTimeUnit (key): all say the same, or
 * those that say nothing (the format's default "ms") agree. */
static bool tl_dtu_agreed(const toplevel *t, const tl_key *key)
{
	return !key->differ && (t->dtu_inputs == t->ninputs || key->ms);
}

/* Writes a value of the spool with w (after its key). */
static void tl_put(toplevel *t, jsonw *w, const tl_key *key, uint64_t off, uint64_t len)
{
	if (key->cache != NULL && off == key->off) {
		jsonw_raw(w, (strview){key->cache, len});
		return;
	}
	for (uint64_t at = 0; at < len; at += TL_IO) {
		size_t n = len - at < TL_IO ? (size_t)(len - at) : TL_IO;
		int err = tl_read(t, off + at, t->io, n);

		if (err < 0) {
			ostream_fail(w->os, err);
			return;
		}
		if (at == 0)
			jsonw_raw(w, (strview){t->io, n});
		else
			ostream_write(w->os, t->io, n);
	}
}

/* Whether input value v goes into its input's object. */
static bool tl_val_kept(const toplevel *t, const tl_val *v)
{
	const tl_key *key = &t->keys[v->key];

	return !key->dtu || !tl_dtu_agreed(t, key);
}

/* The values of input i that go in its object: "top_level" with them,
 * those of otherData's members in "otherData" inside. */
static void tl_write_input(toplevel *t, jsonw *w, size_t i)
{
	size_t lo = 0, hi = t->nvals, n = 0, nother = 0;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->vals[mid].input < i)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (hi = lo; hi < t->nvals && t->vals[hi].input == i; hi++)
		if (tl_val_kept(t, &t->vals[hi])) {
			n++;
			nother += t->keys[t->vals[hi].key].other;
		}
	if (n == 0)
		return;
	jsonw_key(w, "top_level");
	jsonw_obj_begin(w);
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1 && nother == 0)
			break;
		if (pass == 1) {
			jsonw_key(w, "otherData");
			jsonw_obj_begin(w);
		}
		for (size_t j = lo; j < hi; j++) {
			const tl_val *v = &t->vals[j];
			const tl_key *key = &t->keys[v->key];

			if (key->other != (pass == 1) || !tl_val_kept(t, v))
				continue;
			jsonw_key(w, key->name);
			tl_put(t, w, key, v->off, v->len);
		}
		if (pass == 1)
			jsonw_obj_end(w);
	}
	jsonw_obj_end(w);
}

/* sink_extra.write (sink.h). */
static void tl_write(void *ctx, jsonw *w, enum sink_extra_place where, size_t input)
{
	toplevel *t = ctx;
	strview dtu_name = {"displayTimeUnit", 15};
	ssize_t dtu;

	if (where == SINK_EXTRA_INPUT) {
		tl_write_input(t, w, input);
		return;
	}
	if (where == SINK_EXTRA_TOP) {
		dtu = tl_find(t, dtu_name, false);
		if (dtu >= 0 && tl_dtu_agreed(t, &t->keys[dtu])) {
			jsonw_key(w, dtu_name.p);
			tl_put(t, w, &t->keys[dtu], t->keys[dtu].off, t->keys[dtu].len);
		} else {
			jsonw_kv_cstr(w, dtu_name.p, "ms");
		}
	}
	for (size_t k = 0; k < t->nkeys; k++) {
		const tl_key *key = &t->keys[k];

		if (key->other != (where == SINK_EXTRA_OTHER_DATA) || key->per_input || key->dtu)
			continue;
		jsonw_key(w, key->name);
		tl_put(t, w, key, key->off, key->len);
	}
}

/* The names of the keys whose inputs disagree ("otherData.x" for a member
 * of otherData), comma-separated, or NULL; owned by the caller. */
static char *tl_differ(const toplevel *t)
{
	char *s = NULL;
	size_t len = 0;

	for (size_t k = 0; k < t->nkeys; k++) {
		const tl_key *key = &t->keys[k];
		bool d = key->dtu ? !tl_dtu_agreed(t, key) : key->differ;
		size_t n = strlen(key->name) + 16;
		char *ns;

		if (!d)
			continue;
		if (len > 200) {
			if ((ns = realloc(s, len + 8)) == NULL)
				break;
			s = ns;
			len += (size_t)sprintf(s + len, ", ...");
			break;
		}
		if ((ns = realloc(s, len + n)) == NULL)
			break;
		s = ns;
		len += (size_t)sprintf(s + len, "%s%s%s", len ? ", " : "",
				       key->other ? "otherData." : "", key->name);
	}
	return s;
}

static void tl_free(toplevel *t)
{
	for (size_t k = 0; k < t->nkeys; k++) {
		free(t->keys[k].name);
		free(t->keys[k].cache);
	}
	free(t->keys);
	htab_free(&t->by_name);
	free(t->vals);
	free(t->io);
	if (t->fd >= 0)
		close(t->fd);
}

/* ---- the combine -------------------------------------------------------- */

typedef struct cmb {
	trace_sink *sink;
	merge_result *res;
	merge_input *in; /* the input being read */
	size_t index;
	pidmap claimed;       /* out pid -> input index */
	pidmap file;          /* this input's pid -> out pid */
	pidmap ref_pids;      /* the reference input's, kept for its launchers */
	pidmap *pids;         /* the current input's: file or ref_pids */
	int64_t next_k;       /* next remap candidate: MERGE_REMAP_BASE + k */
	ostream aos;          /* args text of synthesized events */
	model_trace *model;   /* the output's run metadata; its arena holds runs' strings */
	sink_input_run *runs; /* per input, parallel to res->inputs */
	toplevel tl;          /* the inputs' other top-level keys */
	int err;
	const merge_opts *o;
	uint64_t done_before, total;
	/* The inputs, parallel to res->inputs once open_inputs made it. */
	pathv pv;                   /* their paths (a model's: its name) */
	const model_trace **models; /* a model input's model, else NULL */
	int *spool, *spool_err;     /* --align's copies of streams */
	const char **inputs;        /* meta.inputs, NULL-terminated */
	const char **methods;       /* meta.align_methods */
	int64_t *shifts;            /* meta.align_shift_ns */
	sink_meta meta;
	/* What the inputs say about the whole trace. */
	int64_t start, end;
	uint64_t lost;
	/* A multi-host run: its parts (model inputs with node.is_node) go
	 * onto the clock of the reference input (the head's: the first input
	 * that is no node's part), which is read before them (order). */
	size_t ref;              /* SIZE_MAX: none */
	size_t *order;           /* the inputs in the order they are read */
	model_clock_map *clocks; /* per input: a part's clock map */
	bool multi_host;         /* some input is a node's part */
	uint64_t sort_base;      /* processes of the models written so far */
	sink_host *hosts;        /* meta.hosts, in the order found */
	int64_t *host_launcher;  /* per host: the launcher's pid on the head */
	size_t nhosts, hosts_cap;
	/* Nested hops, per input: the part whose process launched it
	 * (SIZE_MAX: none), that process (out_pid in that part), its trace
	 * pid once that part was read (-1 before), and the input's host. */
	size_t *launched_in;
	int64_t *launch_src, *launch_out;
	size_t *part_host;
} cmb;

/* A pid nobody has: the next free one from MERGE_REMAP_BASE. */
static int64_t fresh_pid(cmb *c)
{
	int64_t v;

	while (pm_get(&c->claimed, MERGE_REMAP_BASE + c->next_k, &v))
		c->next_k++;
	return MERGE_REMAP_BASE + c->next_k++;
}

static void emit_meta(cmb *c, const char *name, int64_t pid, strview args)
{
	sink_event se = {
		.ev =
			{
				.ph = 'M',
				.name = strview_c(name),
				.pid = pid,
				.tid = pid,
				.ts_ns = JSONW_NO_TIME,
				.dur_ns = JSONW_NO_TIME,
				.args = args,
			},
	};
	int err;

	if (c->err != 0)
		return;
	err = c->sink->event(c->sink, &se);
	if (err < 0)
		c->err = err;
}

/*
 * Says where a remapped (or string) pid came from: a forktrace_origin
 * record ({"pid": original, "input": path}), a process label, and for a
 * string pid its name as the process name.
 */
static void emit_origin(cmb *c, int64_t out, int64_t pid, const char *name)
{
	jsonw w;
	char label[512];

	ostream_mem_reset(&c->aos);
	jsonw_init(&w, &c->aos);
	jsonw_obj_begin(&w);
	if (name != NULL)
		jsonw_kv_cstr(&w, "pid", name);
	else
		jsonw_kv_i64(&w, "pid", pid);
	jsonw_kv_cstr(&w, "input", c->in->path);
	jsonw_kv_u64(&w, "input_index", c->index);
	jsonw_obj_end(&w);
	if (ostream_error(&c->aos) == 0)
		emit_meta(c, "forktrace_origin", out, (strview){c->aos.buf, c->aos.len});

	if (name != NULL)
		snprintf(label, sizeof(label), "pid \"%s\" in %s", name, c->in->path);
	else
		snprintf(label, sizeof(label), "pid %lld in %s", (long long)pid, c->in->path);
	ostream_mem_reset(&c->aos);
	jsonw_init(&w, &c->aos);
	jsonw_obj_begin(&w);
	jsonw_kv_cstr(&w, "labels", label);
	jsonw_obj_end(&w);
	if (ostream_error(&c->aos) == 0)
		emit_meta(c, "process_labels", out, (strview){c->aos.buf, c->aos.len});

	if (name != NULL) {
		ostream_mem_reset(&c->aos);
		jsonw_init(&w, &c->aos);
		jsonw_obj_begin(&w);
		jsonw_kv_cstr(&w, "name", name);
		jsonw_obj_end(&w);
		if (ostream_error(&c->aos) == 0)
			emit_meta(c, "process_name", out, (strview){c->aos.buf, c->aos.len});
	}
}

/* reader_opts.map_pid: the pid to write for a pid of the current input. */
static int64_t map_pid(void *ctx, int64_t pid, const char *name)
{
	cmb *c = ctx;
	int64_t out, owner;

	if (name == NULL && pm_get(c->pids, pid, &out))
		return out;
	if (name == NULL && !pm_get(&c->claimed, pid, &owner)) {
		out = pid;
	} else {
		out = fresh_pid(c);
		if (name == NULL)
			c->in->remapped++;
		emit_origin(c, out, pid, name);
	}
	if (pm_put(&c->claimed, out, (int64_t)c->index) < 0 ||
	    (name == NULL && pm_put(c->pids, pid, out) < 0))
		c->err = -ENOMEM;
	c->in->pids++;
	return out;
}

/*
 * Keeps what the current input says about its run: host, command (argv,
 * argc strings) and exit status (has_st), NULL / false where it says
 * nothing. The exit status of a combined input is its run's only when the
 * combine that wrote it (origin) carried the run's command over (else it
 * is that combine's own 0 or 1). Returns 0 or -ENOMEM.
 */
static int keep_run(cmb *c, const char *host, const char *origin, const char *const *argv,
		    size_t argc, bool has_st, int64_t st)
{
	sink_input_run *run = &c->runs[c->index];

	if (host != NULL && (run->host = model_strdup(c->model, host)) == NULL)
		return -ENOMEM;
	if (argv != NULL && (run->command = model_strvdup(c->model, argv, argc)) == NULL)
		return -ENOMEM;
	if (has_st && st >= INT32_MIN && st <= INT32_MAX &&
	    (origin == NULL || strcmp(origin, "forktrace combine") != 0 || run->command != NULL)) {
		run->has_exit_status = true;
		run->exit_status = (int)st;
	}
	return 0;
}

static sink_host *add_host(cmb *c, const char *name, const char *role, int64_t launcher_pid);

/* A string member of o copied into the output model's arena; dflt
 * (static) when o has none. *err gets -ENOMEM. */
static const char *host_str(cmb *c, const json_t *o, const char *key, const char *dflt, int *err)
{
	const char *v = json_string_value(json_object_get(o, key)), *d;

	if (v == NULL)
		return dflt;
	d = model_strdup(c->model, v);
	if (d == NULL)
		*err = -ENOMEM;
	return d;
}

static int64_t host_i64(const json_t *o, const char *key, int64_t dflt)
{
	const json_t *v = json_object_get(o, key);

	return json_is_integer(v) ? json_integer_value(v) : dflt;
}

/* The hosts a multi-host trace file lists (otherData.forktrace.hosts):
 * kept as they are, their launchers' trace pids following the pid map.
 * Returns 0 or -ENOMEM. */
static int keep_hosts(cmb *c, const json_t *hosts)
{
	const json_t *o;
	size_t i;
	int err = 0;

	json_array_foreach(hosts, i, o)
	{
		sink_host *h;
		int64_t launcher;

		if (!json_is_object(o))
			continue;
		h = add_host(c, NULL, NULL, -1);
		if (h == NULL)
			return -ENOMEM;
		h->name = host_str(c, o, "name", "?", &err);
		h->role = host_str(c, o, "role", "node", &err);
		h->state = host_str(c, o, "state", "complete", &err);
		h->clock = host_str(c, o, "clock", "none", &err);
		h->anchor = json_is_true(json_object_get(o, "anchor"));
		h->why = host_str(c, o, "why", NULL, &err);
		h->where = host_str(c, o, "where", NULL, &err);
		h->launched_as = host_str(c, o, "launched_as", NULL, &err);
		h->processes = (uint64_t)host_i64(o, "processes", 0);
		h->offset_ns = host_i64(o, "offset_ns", 0);
		h->ref_ns = host_i64(o, "ref_ns", 0);
		h->err_ns = host_i64(o, "err_ns", -1);
		h->samples = (uint64_t)host_i64(o, "samples", 0);
		h->lost_ns = host_i64(o, "lost_ns", -1);
		h->drift = json_number_value(json_object_get(o, "drift_ppm")) * 1e-6;
		launcher = host_i64(o, "launcher", -1);
		if (launcher > 0 && !pm_get(c->pids, launcher, &h->launcher))
			h->launcher = -1;
		h->lost_ns += h->lost_ns >= 0 ? c->in->shift_ns : 0;
		if (err < 0)
			return err;
	}
	return 0;
}

/* reader_opts.run_meta: what the current input says about its run, in
 * its otherData.forktrace. */
static void on_run_meta(void *ctx, strview forktrace)
{
	cmb *c = ctx;
	json_t *o = json_loadb(forktrace.p, forktrace.n, JSON_ALLOW_NUL, NULL);
	const json_t *cmd, *st, *v;
	const char **argv = NULL;
	size_t i, argc = 0;
	int err;

	if (!json_is_object(o))
		goto out;
	cmd = json_object_get(o, "command");
	st = json_object_get(o, "exit_status");
	if (json_is_array(cmd)) {
		argv = calloc(json_array_size(cmd) + 1, sizeof(*argv));
		if (argv == NULL) {
			c->err = -ENOMEM;
			goto out;
		}
		json_array_foreach(cmd, i, v)
		{
			argv[i] = json_string_value(v);
			if (argv[i] == NULL)
				break;
		}
		argc = i;
		/* An argv with something else than strings is not one. */
		if (i != json_array_size(cmd)) {
			free(argv);
			argv = NULL;
		}
	}
	err = keep_run(c, json_string_value(json_object_get(o, "host")),
		       json_string_value(json_object_get(o, "origin")), argv, argc,
		       json_is_integer(st), json_is_integer(st) ? json_integer_value(st) : 0);
	if (err == 0)
		err = keep_hosts(c, json_object_get(o, "hosts"));
	if (err < 0)
		c->err = err;
	free(argv);
out:
	json_decref(o);
}

static bool same_argv(const char *const *a, const char *const *b)
{
	size_t i = 0;

	for (; a[i] != NULL && b[i] != NULL; i++)
		if (strcmp(a[i], b[i]) != 0)
			return false;
	return a[i] == NULL && b[i] == NULL;
}

/* The output's host, command and exit status: each one the inputs' when
 * every input says it and they all say the same. Returns whether the exit
 * status was. */
static bool agree(model_trace *m, const sink_input_run *runs, size_t n)
{
	bool host = n > 0, cmd = n > 0, st = n > 0;

	for (size_t i = 0; i < n; i++) {
		host = host && runs[i].host != NULL && strcmp(runs[i].host, runs[0].host) == 0;
		cmd = cmd && runs[i].command != NULL && same_argv(runs[i].command, runs[0].command);
		st = st && runs[i].has_exit_status && runs[i].exit_status == runs[0].exit_status;
	}
	if (host)
		m->host = runs[0].host;
	if (cmd)
		m->command = (const char **)runs[0].command;
	if (st)
		m->exit_status = runs[0].exit_status;
	return st;
}

static void on_progress(void *ctx, uint64_t file_bytes)
{
	cmb *c = ctx;

	if (c->o->progress != NULL)
		c->o->progress(c->o->progress_ctx, c->done_before + file_bytes, c->total);
}

/* A sink that forwards to another and stops at the first error of the
 * map (so that an allocation failure there ends the combine). */
typedef struct fwd_sink {
	trace_sink base;
	cmb *c;
} fwd_sink;

static int fwd_event(trace_sink *s, const sink_event *e)
{
	cmb *c = ((fwd_sink *)s)->c;

	if (c->err != 0)
		return c->err;
	return c->sink->event(c->sink, e);
}

/* ---- a model as an input ------------------------------------------------ */

/*
 * A model input of a combine: its events (events_emit) get what the
 * reader does to the events of a file (reader.c, emit): flow and async
 * ids into the input's namespace, pids through the pid map (the main
 * thread's tid and forktrace_process's args.parent follow), ts shifted
 * by --align; then they carry the text a file would hold (raw), so that
 * every sink writes them as it writes a file's. send false: --align's
 * first pass, which only notes the time span.
 */
typedef struct model_feed {
	trace_sink base;
	cmb *c;
	reader_info *inf;
	bool send;
	bool remap_ids;
	uint64_t id_input;
	int64_t shift_ns;
	ostream text; /* the event as a file holds it */
	ostream args; /* args with the parent remapped */
	char *pad;    /* args, padded for jsonr_find_key */
	size_t pad_cap;
	/* A node's part: its root process (pid in the part's events), which
	 * becomes a child of its launcher on the head (launcher: trace pid,
	 * -1: none; launcher_pid: the launcher's pid on the head), with an
	 * arrow (flow id root_flow) from the launcher at root_ts. */
	int64_t root;
	int64_t launcher, launcher_pid;
	int64_t root_ts;
	uint64_t root_flow;
	/* The text of slices without args up to their ts, by name, cat, pid
	 * and tid (NULL until the first). */
	struct feed_prefix *prefixes;
} model_feed;

/*
 * A slice's text up to its times: "\n{"ph":"X","name":...,"cat":...,
 * "pid":...,"tid":...,"ts":" as jsonw_event_begin writes it. A thread's
 * function slices repeat a few of these millions of times: formatting
 * its name and numbers each time was most of a combine of a spill file.
 * key holds the name's bytes and the cat's (compared, so that a slot
 * never answers for other text at the same address).
 */
#define FEED_PREFIX_SLOTS 256
#define FEED_PREFIX_MAX 512

typedef struct feed_prefix {
	char text[FEED_PREFIX_MAX];
	size_t len; /* 0: empty */
	char key[FEED_PREFIX_MAX];
	size_t name_n, cat_n;
	int64_t pid, tid;
} feed_prefix;

/* Copies ev's args into f->pad followed by JSONR_PAD zero bytes, as the
 * JSON scanner needs them. Returns 0 or -ENOMEM. */
static int feed_pad(model_feed *f, const jsonw_event *ev)
{
	if (f->pad_cap < ev->args.n + JSONR_PAD) {
		char *np = realloc(f->pad, ev->args.n + JSONR_PAD);

		if (np == NULL)
			return -ENOMEM;
		f->pad = np;
		f->pad_cap = ev->args.n + JSONR_PAD;
	}
	memcpy(f->pad, ev->args.p, ev->args.n);
	memset(f->pad + ev->args.n, 0, JSONR_PAD);
	return 0;
}

/*
 * Replaces the values of the integer members keys[0..n) of ev's args
 * (forktrace_process's) with vals[0..n), where they are; a member that
 * is not there stays missing. ev->args then points into f->args.
 * Returns 0 or a negative errno.
 */
static int feed_set_ints(model_feed *f, jsonw_event *ev, const char *const *keys,
			 const int64_t *vals, size_t n)
{
	char num[OSTREAM_NUM_MAX];
	strview at[4];
	const char *from, *end;
	size_t order[4], k = 0;

	if (feed_pad(f, ev) < 0)
		return -ENOMEM;
	end = f->pad + ev->args.n;
	for (size_t i = 0; i < n && i < 4; i++) {
		at[i] = jsonr_find_key((strview){f->pad, ev->args.n}, keys[i]);
		if (at[i].p == NULL)
			continue;
		/* By position in the text, for one pass over it. */
		size_t j = k++;
		while (j > 0 && at[order[j - 1]].p > at[i].p) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = i;
	}
	if (k == 0)
		return 0;
	ostream_mem_reset(&f->args);
	from = f->pad;
	for (size_t j = 0; j < k; j++) {
		strview v = at[order[j]];

		ostream_write(&f->args, from, (size_t)(v.p - from));
		ostream_write(&f->args, num, ostream_fmt_i64(num, vals[order[j]]));
		from = v.p + v.n;
	}
	ostream_write(&f->args, from, (size_t)(end - from));
	if (ostream_error(&f->args) != 0)
		return ostream_error(&f->args);
	ev->args = (strview){f->args.buf, f->args.len};
	return 0;
}

/* forktrace_process names its parent by trace pid: it follows the map;
 * a node's root names its launcher on the head (parent and ppid).
 * Returns 0 or a negative errno. */
static int feed_parent(model_feed *f, jsonw_event *ev, int64_t pid)
{
	static const char *const parent_keys[] = {"parent", "ppid"};
	int64_t parent, mapped, vals[2];
	strview pv;

	if (pid == f->root && f->launcher >= 0) {
		vals[0] = f->launcher;
		vals[1] = f->launcher_pid;
		return feed_set_ints(f, ev, parent_keys, vals, 2);
	}
	/* jsonr_find_key needs the padding: look at the value in a padded
	 * copy first. */
	if (feed_pad(f, ev) < 0)
		return -ENOMEM;
	pv = jsonr_find_key((strview){f->pad, ev->args.n}, "parent");
	if (!jsonr_parse_int(pv, &parent) || parent <= 0 ||
	    (mapped = map_pid(f->c, parent, NULL)) == parent)
		return 0;
	return feed_set_ints(f, ev, parent_keys, &mapped, 1);
}

/*
 * The arrow from a node's launcher on the head (its main thread) to the
 * node's root process (out: its trace pid), as write_flow draws a fork's:
 * named "remote", the flow id one the part's own arrows do not use.
 */
static void feed_remote_flow(model_feed *f, int64_t out)
{
	cmb *c = f->c;
	sink_event se = {
		.ev =
			{
				.ph = 's',
				.cat = strview_c("fork"),
				.name = strview_c("remote"),
				.pid = f->launcher,
				.tid = f->launcher,
				.ts_ns = f->root_ts,
				.dur_ns = JSONW_NO_TIME,
				.has_id = true,
				.id = f->root_flow,
			},
	};
	int err = c->sink->event(c->sink, &se);

	if (err == 0) {
		se.ev.ph = 'f';
		se.ev.bind_enclosing = true;
		se.ev.pid = out;
		se.ev.tid = out;
		err = c->sink->event(c->sink, &se);
	}
	if (err < 0 && c->err == 0)
		c->err = err;
}

/*
 * Writes ev into f->text as jsonw_event_write would, from a cached prefix,
 * when ev is a slice with both times and nothing after them (no args, id,
 * scope or binding point). False when it is not, or its prefix does not
 * fit a slot: the caller writes it whole then.
 */
static bool feed_slice_text(model_feed *f, const jsonw_event *ev)
{
	uint64_t h;
	feed_prefix *x;
	size_t key_n;

	if (ev->ph != 'X' || (ev->args.p != NULL && ev->args.n > 0) || ev->has_id ||
	    ev->scope != 0 || ev->bind_enclosing || ev->ts_ns == JSONW_NO_TIME ||
	    ev->dur_ns == JSONW_NO_TIME || ev->name.p == NULL || ev->cat.p == NULL)
		return false;
	key_n = ev->name.n + ev->cat.n;
	if (key_n > FEED_PREFIX_MAX)
		return false;
	if (f->prefixes == NULL) {
		f->prefixes = calloc(FEED_PREFIX_SLOTS, sizeof(*f->prefixes));
		if (f->prefixes == NULL)
			return false;
	}
	h = ((uint64_t)(uintptr_t)ev->name.p ^ (uint64_t)ev->pid * 31 ^ (uint64_t)ev->tid) *
	    0x9e3779b97f4a7c15ull;
	x = &f->prefixes[h >> 56];
	if (x->len == 0 || x->pid != ev->pid || x->tid != ev->tid || x->name_n != ev->name.n ||
	    x->cat_n != ev->cat.n || memcmp(x->key, ev->name.p, ev->name.n) != 0 ||
	    memcmp(x->key + ev->name.n, ev->cat.p, ev->cat.n) != 0) {
		/* The prefix as jsonw_event_begin writes it: the event
		 * without its times, then the key of the first. */
		jsonw_event head = *ev;
		ostream o;
		jsonw w;

		x->len = 0;
		if (ostream_open_mem(&o) < 0)
			return false;
		head.ts_ns = JSONW_NO_TIME;
		head.dur_ns = JSONW_NO_TIME;
		jsonw_init(&w, &o);
		jsonw_event_begin(&w, &head);
		ostream_write(&o, ",\"ts\":", 6);
		if (ostream_error(&o) == 0 && o.len <= FEED_PREFIX_MAX) {
			memcpy(x->text, o.buf, o.len);
			x->len = o.len;
			memcpy(x->key, ev->name.p, ev->name.n);
			memcpy(x->key + ev->name.n, ev->cat.p, ev->cat.n);
			x->name_n = ev->name.n;
			x->cat_n = ev->cat.n;
			x->pid = ev->pid;
			x->tid = ev->tid;
		}
		ostream_finish(&o);
		if (x->len == 0)
			return false;
	}
	ostream_write(&f->text, x->text, x->len);
	ostream_ts(&f->text, ev->ts_ns);
	ostream_write(&f->text, ",\"dur\":", 7);
	ostream_ts(&f->text, ev->dur_ns);
	ostream_putc(&f->text, '}');
	return true;
}

static int feed_event(trace_sink *s, const sink_event *e)
{
	model_feed *f = (model_feed *)s;
	cmb *c = f->c;
	sink_event se = {.ev = e->ev};
	jsonw_event *ev = &se.ev;
	int64_t pid = ev->pid, out;
	jsonw w;
	int err;

	bool remote_flow = false;

	if (f->send) {
		if (f->remap_ids && ev->has_id && reader_pairs_by_id(ev->ph) &&
		    ev->id <= (uint64_t)INT64_MAX)
			ev->id ^= f->id_input << READER_ID_SHIFT;
		out = map_pid(c, pid, NULL);
		if (out != pid) {
			ev->pid = out;
			/* The main thread carries the pid as its tid. */
			if (ev->tid == pid)
				ev->tid = out;
		}
		if (ev->ph == 'M' && ev->args.n > 0 && ev->args.p[0] == '{' && ev->name.n == 17 &&
		    memcmp(ev->name.p, "forktrace_process", 17) == 0) {
			err = feed_parent(f, ev, pid);
			if (err < 0)
				return err;
			remote_flow = pid == f->root && f->launcher >= 0;
		}
	}
	if (ev->ts_ns != JSONW_NO_TIME) {
		ev->ts_ns += f->shift_ns;
		if (ev->ph != 'M') {
			int64_t end = ev->ts_ns + (ev->dur_ns != JSONW_NO_TIME && ev->dur_ns > 0
							   ? ev->dur_ns
							   : 0);

			if (ev->ts_ns < f->inf->min_ts)
				f->inf->min_ts = ev->ts_ns;
			if (end > f->inf->max_ts)
				f->inf->max_ts = end;
		}
	}
	f->inf->events++;
	if (!f->send)
		return 0;
	ostream_mem_reset(&f->text);
	if (!feed_slice_text(f, ev)) {
		jsonw_init(&w, &f->text);
		jsonw_event_write(&w, ev);
	}
	if (ostream_error(&f->text) != 0)
		return ostream_error(&f->text);
	/* A file's event starts at its brace: without the newline that
	 * jsonw_event_write puts first. */
	se.raw = (strview){f->text.buf + 1, f->text.len - 1};
	f->inf->bytes += se.raw.n;
	if (c->err != 0)
		return c->err;
	err = c->sink->event(c->sink, &se);
	if (err == 0 && remote_flow) {
		feed_remote_flow(f, ev->pid);
		err = c->err;
	}
	return err;
}

/* The length of a NULL-terminated argv (NULL: 0). */
static size_t argv_len(const char *const *v)
{
	size_t n = 0;

	while (v != NULL && v[n] != NULL)
		n++;
	return n;
}

void reader_info_of_model(const model_trace *m, reader_info *inf)
{
	memset(inf, 0, sizeof(*inf));
	inf->min_ts = INT64_MAX;
	inf->max_ts = INT64_MIN;
	inf->lost_events = -1;
	/* As the reader takes them from otherData.forktrace. */
	if (m->origin != NULL && strlen(m->origin) + 2 < sizeof(inf->origin))
		snprintf(inf->origin, sizeof(inf->origin), "%s", m->origin);
	else
		snprintf(inf->origin, sizeof(inf->origin), "forktrace");
	if (m->anchor_real_ns > 0) {
		inf->has_anchor = true;
		inf->anchor_mono_ns = m->anchor_mono_ns;
		inf->anchor_real_ns = m->anchor_real_ns;
	}
	if (m->lost_events <= MODEL_COUNT_MAX)
		inf->lost_events = (int64_t)m->lost_events;
}

/* Whether input i is a node's part of a multi-host run. */
static bool is_part(const cmb *c, size_t i)
{
	return c->models[i] != NULL && c->models[i]->node.is_node;
}

/* A node part's root process: the first the node collector added (the
 * command it started), when nobody is its parent in the part. */
static const model_process *part_root(const model_trace *m)
{
	if (m->nprocs == 0 || m->procs[0]->parent != NULL)
		return NULL;
	return m->procs[0];
}

/*
 * The trace pid of the process pid of the head (the reference input) that
 * launched a node, -1 when it is not in the trace. Of the processes the
 * head had with that pid (pid reuse), the last one started by at (trace
 * clock; -1: any).
 */
static int64_t launcher_out(cmb *c, int64_t pid, int64_t at)
{
	const model_trace *ref;
	const model_process *best = NULL;
	int64_t out;

	if (pid <= 0 || c->ref == SIZE_MAX)
		return -1;
	ref = c->models[c->ref];
	if (ref == NULL)
		return pm_get(&c->ref_pids, pid, &out) ? out : -1;
	for (size_t k = 0; k < ref->nprocs; k++) {
		const model_process *p = ref->procs[k];

		if (p->pid != pid)
			continue;
		if (best == NULL || (p->start_ns > best->start_ns && (at < 0 || p->start_ns <= at)))
			best = p;
	}
	if (best == NULL)
		return -1;
	/* The head written as its own trace keeps its pids. */
	if (c->o->model_as_trace && c->ref == 0)
		return best->out_pid;
	return pm_get(&c->ref_pids, best->out_pid, &out) ? out : -1;
}

/* Sets up f for the root of node part i (m): its launcher on the head,
 * the time of its start on the trace's clock, the id of its arrow. */
static void feed_part_root(cmb *c, size_t i, const model_trace *m, model_feed *f)
{
	const model_process *root = part_root(m);
	int64_t start;

	if (root == NULL)
		return;
	start = root->nsegs > 0 && root->segs[0].start_ns >= 0 ? root->segs[0].start_ns
							       : root->start_ns;
	start = model_clock_apply(&c->clocks[i], start);
	f->root = root->out_pid;
	f->launcher_pid = m->node.launcher_pid;
	f->launcher = m->node.launched_by_node ? c->launch_out[i]
					       : launcher_out(c, m->node.launcher_pid, start);
	f->root_ts = start >= 0 ? start + f->shift_ns : JSONW_NO_TIME;
	f->root_flow = ((uint64_t)root->index + 1) ^ (i << READER_ID_SHIFT);
	if (f->root_ts == JSONW_NO_TIME)
		f->launcher = -1;
}

/* The head written as its own trace among node parts: its pids are taken
 * before theirs, as they are. */
static int claim_own_pids(cmb *c, const model_trace *m)
{
	for (size_t k = 0; k < m->nprocs; k++)
		if (pm_put(&c->claimed, m->procs[k]->out_pid, 0) < 0)
			return -ENOMEM;
	return 0;
}

/*
 * Reads model input i as reader_read reads a file: inf is filled as for
 * a file of the model (events_write puts its run metadata in
 * otherData.forktrace, and displayTimeUnit), and the model's events go to
 * c->sink through the model feed (send false: --align's first pass: only
 * inf). With model_as_trace, the first model's events go to the sink as
 * they are. A node's part goes onto the head's clock, its root under its
 * launcher. Returns 0 or the first negative errno of the sink or of the
 * feed.
 */
static int read_model(cmb *c, size_t i, bool send, reader_info *inf)
{
	const model_trace *m = c->models[i];
	model_feed f = {
		.base = {.event = feed_event},
		.c = c,
		.inf = inf,
		.send = send,
		.remap_ids = c->res->ninputs > 1,
		.id_input = i,
		.shift_ns = send ? c->res->inputs[i].shift_ns : 0,
		.root = INT64_MIN,
		.launcher = -1,
	};
	events_emit_opts eo = {
		.clock = is_part(c, i) ? &c->clocks[i] : NULL,
		.label_host = c->multi_host,
		.sort_base = c->sort_base,
	};
	int err;

	reader_info_of_model(m, inf);
	if (send)
		c->sort_base += m->nprocs;
	if (c->o->model_as_trace && i == 0) {
		err = c->res->ninputs > 1 ? claim_own_pids(c, m) : 0;
		if (err == 0)
			err = events_emit_with(m, c->sink, &eo);
		return err;
	}
	if (send && is_part(c, i))
		feed_part_root(c, i, m, &f);
	if (send) {
		err = on_top_key(&c->tl, (strview){"displayTimeUnit", 15}, false,
				 (strview){"\"ms\"", 4});
		if (err < 0)
			return err;
		err = keep_run(c, m->host, m->origin, m->command, argv_len(m->command), true,
			       m->exit_status);
		if (err < 0)
			return err;
	}
	err = ostream_open_mem(&f.text);
	if (err == 0)
		err = ostream_open_mem(&f.args);
	if (err == 0)
		err = events_emit_with(m, &f.base, &eo);
	if (send)
		c->res->inputs[i].corrupt_chunks = f.base.stats.corrupt_chunks;
	ostream_finish(&f.text);
	ostream_finish(&f.args);
	free(f.pad);
	free(f.prefixes);
	return err;
}

/* ---- the hosts of a multi-host run ---------------------------------------- */

/* Appends a host (zeroed but for the unknowns); NULL on ENOMEM. */
static sink_host *add_host(cmb *c, const char *name, const char *role, int64_t launcher_pid)
{
	sink_host *h;
	int64_t *hl;

	if (vec_grow(&c->hosts, &c->hosts_cap, c->nhosts + 1, sizeof(*c->hosts), 4) < 0)
		return NULL;
	/* host_launcher grows with hosts: the same capacity. */
	hl = realloc(c->host_launcher, c->hosts_cap * sizeof(*hl));
	if (hl == NULL)
		return NULL;
	c->host_launcher = hl;
	hl[c->nhosts] = launcher_pid;
	h = &c->hosts[c->nhosts++];
	*h = (sink_host){.name = name,
			 .role = role,
			 .state = "complete",
			 .clock = "none",
			 .err_ns = -1,
			 .lost_ns = -1,
			 .launcher = -1};
	return h;
}

/*
 * The reference clock's realtime anchor (the head's): the offset
 * realtime - monotonic, for the parts that have no clock samples. A file
 * says it after its events: it is read once more for it (not a stream).
 * Returns whether there is one.
 */
static bool ref_anchor(cmb *c, int64_t *off)
{
	reader_info inf;
	size_t r = c->ref;

	if (r == SIZE_MAX)
		return false;
	if (c->models[r] != NULL) {
		reader_info_of_model(c->models[r], &inf);
	} else {
		reader_opts ro = {.chunk = c->o->chunk,
				  .regular_only = c->pv.in_dir[r],
				  .use_fd = c->spool[r] >= 0,
				  .fd = c->spool[r]};

		memset(&inf, 0, sizeof(inf));
		if (c->spool_err[r] < 0 || (c->spool[r] < 0 && reader_is_stream(c->inputs[r])) ||
		    reader_read(c->inputs[r], &ro, NULL, &inf) < 0)
			return false;
	}
	if (!inf.has_anchor)
		return false;
	*off = inf.anchor_real_ns - inf.anchor_mono_ns;
	return true;
}

/* Does p carry the "remote launch" mark of a launch to dest? */
static bool marked_launch(const model_process *p, const char *dest)
{
	for (size_t k = 0; k < p->nmarks; k++) {
		const model_mark *mk = &p->marks[k];
		json_t *o;
		bool same;

		if (mk->name == NULL || strcmp(mk->name, "remote launch") != 0 ||
		    mk->args_json == NULL)
			continue;
		o = json_loads(mk->args_json, 0, NULL);
		same = json_is_string(json_object_get(o, "host")) &&
		       strcmp(json_string_value(json_object_get(o, "host")), dest) == 0;
		json_decref(o);
		if (same)
			return true;
	}
	return false;
}

/*
 * The process of part m that launched a node as pid to dest: of m's
 * processes with that pid started by at (its clock, -1: any), the last,
 * when it marked the launch itself (it exec'd ssh) or a child of it did
 * (it spawned ssh). NULL: none.
 */
static const model_process *part_launcher(const model_trace *m, int64_t pid, const char *dest,
					  int64_t at)
{
	const model_process *best = NULL;

	for (size_t k = 0; k < m->nprocs; k++) {
		const model_process *p = m->procs[k];

		if (p->pid == pid && (at < 0 || p->start_ns <= at) &&
		    (best == NULL || p->start_ns > best->start_ns))
			best = p;
	}
	if (best == NULL || marked_launch(best, dest))
		return best;
	for (size_t k = 0; k < m->nprocs; k++)
		if (m->procs[k]->parent == best && marked_launch(m->procs[k], dest))
			return best;
	return NULL;
}

/*
 * Nested hops: for each part whose launcher ran on another node, the
 * part that launched it (the only one with that launch, by the time its
 * root started on the trace's clock), and how deep it is in the chain of
 * launches (parts are read after the part that launched them).
 */
static void plan_nested(cmb *c, size_t *depth)
{
	size_t n = c->res->ninputs;

	for (size_t i = 0; i < n; i++) {
		const model_trace *m = c->models[i];
		const model_process *root = m != NULL ? part_root(m) : NULL;
		size_t found = SIZE_MAX, nfound = 0;
		const model_process *src = NULL;
		int64_t at;

		if (!is_part(c, i) || !m->node.launched_by_node || m->node.launcher_pid < 0 ||
		    m->node.launched_as == NULL || root == NULL)
			continue;
		at = model_clock_apply(&c->clocks[i], root->start_ns);
		for (size_t j = 0; j < n; j++) {
			const model_process *p;
			int64_t at_j = -1;

			if (j == i || !is_part(c, j))
				continue;
			/* The root's start on part j's clock, by the inverse of
			 * j's map (near enough: drift is tiny). */
			if (at >= 0)
				at_j = at - (model_clock_apply(&c->clocks[j], at) - at);
			p = part_launcher(c->models[j], m->node.launcher_pid, m->node.launched_as,
					  at_j);
			if (p != NULL) {
				found = j;
				src = p;
				nfound++;
			}
		}
		/* Two parts with that launch: it is not known which. */
		if (nfound == 1) {
			c->launched_in[i] = found;
			c->launch_src[i] = src->out_pid;
		}
	}
	for (size_t i = 0; i < n; i++) {
		size_t d = 0;

		for (size_t j = c->launched_in[i]; j != SIZE_MAX && d <= n; j = c->launched_in[j])
			d++;
		/* A loop of launches cannot be: none of them is followed. */
		if (d > n) {
			c->launched_in[i] = SIZE_MAX;
			d = 0;
		}
		depth[i] = d;
	}
}

/*
 * Each node part's clock map (model_clock_fit: measured; else by the
 * realtime anchors, as --align lines up traces), the reference input,
 * and the hosts of the model inputs: the head, each part, and the hosts
 * the head's model says are missing. Returns 0 or -ENOMEM.
 */
static int plan_hosts(cmb *c)
{
	size_t n = c->res->ninputs, k = 0;
	bool have_anchor = false, anchor_read = false;
	int64_t ref_off = 0;
	size_t *depth = calloc(n + 1, sizeof(*depth));

	if (depth == NULL)
		return -ENOMEM;
	c->ref = SIZE_MAX;
	for (size_t i = 0; i < n; i++) {
		c->multi_host = c->multi_host || is_part(c, i);
		if (c->ref == SIZE_MAX && !is_part(c, i))
			c->ref = i;
	}
	/* The reference first, then the rest, the parts last: a part's
	 * root needs its launcher's trace pid. */
	if (c->ref != SIZE_MAX)
		c->order[k++] = c->ref;
	for (size_t i = 0; i < n; i++)
		if (i != c->ref && !is_part(c, i))
			c->order[k++] = i;
	for (size_t i = 0; i < n; i++) {
		const model_trace *m = c->models[i];
		model_clock_map *map = &c->clocks[i];
		sink_host *h;

		if (m == NULL)
			continue;
		if (m->node.is_node) {
			model_clock_fit(m, map);
			if (strcmp(map->method, "realtime anchor") == 0) {
				if (!anchor_read) {
					have_anchor = ref_anchor(c, &ref_off);
					anchor_read = true;
				}
				if (have_anchor)
					map->offset_ns = (m->anchor_real_ns - m->anchor_mono_ns) -
							 ref_off;
				else
					map->method = "none";
			}
			/* A part alone, or with other parts only: no head's
			 * clock to put it on. */
			if (c->ref == SIZE_MAX && strcmp(map->method, "measured") != 0) {
				map->method = "not aligned";
				map->offset_ns = 0;
			}
			/* A nested hop's launcher is found among the parts. */
			h = add_host(c, m->host != NULL ? m->host : "?", "node",
				     m->node.launched_by_node ? -1 : m->node.launcher_pid);
			if (h == NULL)
				goto fail_nomem;
			c->part_host[i] = c->nhosts - 1;
			h->processes = m->nprocs;
			h->clock = map->method;
			h->offset_ns = map->offset_ns;
			h->ref_ns = map->ref_ns;
			h->drift = map->drift;
			h->err_ns = map->err_ns;
			h->samples = map->nsamples;
			h->launched_as = m->node.launched_as;
			h->anchor = m->anchor_real_ns > 0;
			if (m->node.lost_ns >= 0) {
				h->state = m->node.cut ? "incomplete" : "lost";
				h->lost_ns = model_clock_apply(map, m->node.lost_ns);
			}
			continue;
		}
		if (!c->multi_host && m->nmissing == 0)
			continue;
		h = add_host(c, m->host != NULL ? m->host : "?", "head", -1);
		if (h == NULL)
			goto fail_nomem;
		h->processes = m->nprocs;
		h->clock = "reference";
		h->err_ns = 0;
		for (size_t j = 0; j < m->nmissing; j++) {
			const model_missing_host *mh = &m->missing[j];

			h = add_host(c, mh->host != NULL ? mh->host : "?", "node",
				     mh->launcher_pid);
			if (h == NULL)
				goto fail_nomem;
			h->state = "missing";
			h->why = mh->why;
			h->where = mh->where;
			h->launched_as = mh->host;
		}
	}
	/* The parts last, each after the part that launched it. */
	plan_nested(c, depth);
	for (size_t d = 0, placed = k; placed < n && d <= n; d++)
		for (size_t i = 0; i < n; i++)
			if (i != c->ref && is_part(c, i) && depth[i] == d) {
				c->order[k++] = i;
				placed++;
			}
	c->meta.hosts = c->hosts;
	c->meta.nhosts = c->nhosts;
	free(depth);
	return 0;

fail_nomem:
	free(depth);
	return -ENOMEM;
}

/* Whether host a is listed before b: the head first, then by name. */
static bool host_before(const sink_host *a, const sink_host *b)
{
	bool ha = strcmp(a->role, "head") == 0, hb = strcmp(b->role, "head") == 0;

	if (ha != hb)
		return ha;
	return strverscmp(a->name, b->name) < 0;
}

/* The hosts as the output says them: each launcher's trace pid, the head
 * first (a file's hosts come in its run metadata, after its events). */
static int finish_hosts(cmb *c)
{
	size_t k;

	bool head = false;

	for (size_t i = 0; i < c->nhosts; i++) {
		if (c->hosts[i].launcher < 0 && c->host_launcher[i] > 0)
			c->hosts[i].launcher = launcher_out(c, c->host_launcher[i], -1);
		head = head || strcmp(c->hosts[i].role, "head") == 0;
	}
	/* Parts combined with the head's trace file: the file is the head. */
	if (!head && c->multi_host && c->ref != SIZE_MAX) {
		const char *name = c->runs[c->ref].host;
		sink_host *h = add_host(c, name != NULL ? name : "?", "head", -1);

		if (h == NULL)
			return -ENOMEM;
		h->processes = c->res->inputs[c->ref].pids;
		h->clock = "reference";
		h->err_ns = 0;
	}
	if (c->nhosts == 0)
		return 0;
	/* Insertion sort (a few hosts, stable): heads, then by name. */
	for (size_t i = 1; i < c->nhosts; i++) {
		sink_host h = c->hosts[i];

		for (k = i; k > 0 && host_before(&h, &c->hosts[k - 1]); k--)
			c->hosts[k] = c->hosts[k - 1];
		c->hosts[k] = h;
	}
	c->meta.hosts = c->hosts;
	c->meta.nhosts = c->nhosts;
	return 0;
}

/* ---- the merge, step by step -------------------------------------------- */

static void fill_input(merge_input *in, const reader_info *inf)
{
	in->events = inf->events;
	in->bytes = inf->bytes;
	in->file_bytes = inf->file_bytes;
	in->utf8_fixed = inf->utf8_fixed;
	in->utf8_offset = inf->utf8_offset;
	in->dup_fixed = inf->dup_fixed;
	in->dup_offset = inf->dup_offset;
	in->skipped_keys = inf->skipped_keys;
	memcpy(in->skipped, inf->skipped, sizeof(in->skipped));
	in->gzip = inf->gzip;
	in->hdf5 = inf->hdf5;
	in->array_form = inf->array_form;
	in->viztracer_overflow = inf->viztracer_overflow;
	in->lost_events = inf->lost_events;
	in->truncated = inf->truncated;
	in->error_offset = inf->error_offset;
	memcpy(in->origin, inf->origin, sizeof(in->origin));
	if (inf->error[0] != '\0')
		in->error = strdup(inf->error);
}

/* --align's first pass: the shift of every input. A stream was copied
 * (spool[i] >= 0), or could not be (spool_err[i] < 0: not read). */
static int compute_shifts(cmb *c)
{
	merge_result *res = c->res;
	reader_info *infos = calloc(res->ninputs, sizeof(*infos));
	bool have_ref = false;
	int64_t ref_off = 0, target = 0;
	bool have_target = false;
	int err = 0;

	if (infos == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < res->ninputs && err == 0; i++) {
		reader_opts ro = {.chunk = c->o->chunk,
				  .regular_only = c->pv.in_dir[i],
				  .use_fd = c->spool[i] >= 0,
				  .fd = c->spool[i]};

		infos[i].min_ts = INT64_MAX;
		infos[i].max_ts = INT64_MIN;
		if (c->models[i] != NULL)
			err = read_model(c, i, false, &infos[i]);
		else if (c->spool_err[i] == 0)
			err = reader_read(res->inputs[i].path, &ro, NULL, &infos[i]);
	}
	if (err < 0)
		goto out;
	/* The first input with an anchor is the reference clock. */
	for (size_t i = 0; i < res->ninputs; i++) {
		const reader_info *inf = &infos[i];

		if (!inf->has_anchor)
			continue;
		if (!have_ref) {
			have_ref = true;
			ref_off = inf->anchor_real_ns - inf->anchor_mono_ns;
		}
		res->inputs[i].align = "realtime anchor";
		res->inputs[i].shift_ns = (inf->anchor_real_ns - inf->anchor_mono_ns) - ref_off;
	}
	/* The others start where the first input (with times) starts. */
	for (size_t i = 0; i < res->ninputs && !have_target; i++)
		if (infos[i].min_ts <= infos[i].max_ts) {
			target = infos[i].min_ts + res->inputs[i].shift_ns;
			have_target = true;
		}
	for (size_t i = 0; i < res->ninputs; i++) {
		if (res->inputs[i].align != NULL)
			continue;
		res->inputs[i].align = "start time";
		if (have_target && infos[i].min_ts <= infos[i].max_ts)
			res->inputs[i].shift_ns = target - infos[i].min_ts;
	}
out:
	free(infos);
	return err;
}

/* Adds source s to the inputs: a path expanded (a directory stands for
 * its traces), or a model under its name. */
static int add_source(cmb *c, const merge_source *s)
{
	size_t first = c->pv.n;
	const model_trace **nm;
	int err;

	if (s->model != NULL)
		err = pathv_add(&c->pv, strdup(s->name != NULL ? s->name : "model"), false);
	else if (s->in_dir)
		err = pathv_add(&c->pv, strdup(s->path), true);
	else
		err = expand(&c->pv, s->path);
	if (err < 0)
		return err;
	nm = realloc(c->models, (c->pv.n ? c->pv.n : 1) * sizeof(*nm));
	if (nm == NULL)
		return -ENOMEM;
	c->models = nm;
	for (size_t i = first; i < c->pv.n; i++)
		nm[i] = s->model;
	return 0;
}

/* The inputs of src[0..n) in res->inputs, with what reading them takes:
 * the sizes for progress, copies of streams that --align reads twice. */
static int open_inputs(cmb *c, const merge_source *src, size_t n)
{
	merge_result *res = c->res;
	size_t ni;
	int err = 0;

	for (size_t i = 0; i < n && err == 0; i++)
		err = add_source(c, &src[i]);
	if (err < 0)
		return err;
	ni = c->pv.n;
	c->spool = calloc(ni + 1, sizeof(*c->spool));
	c->spool_err = calloc(ni + 1, sizeof(*c->spool_err));
	if (c->spool == NULL || c->spool_err == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < ni; i++)
		c->spool[i] = -1;
	res->inputs = calloc(ni ? ni : 1, sizeof(*res->inputs));
	c->inputs = calloc(ni + 1, sizeof(*c->inputs));
	c->methods = calloc(ni + 1, sizeof(*c->methods));
	c->shifts = calloc(ni + 1, sizeof(*c->shifts));
	c->model = model_new();
	c->runs = calloc(ni + 1, sizeof(*c->runs));
	c->order = calloc(ni + 1, sizeof(*c->order));
	c->clocks = calloc(ni + 1, sizeof(*c->clocks));
	c->launched_in = calloc(ni + 1, sizeof(*c->launched_in));
	c->launch_src = calloc(ni + 1, sizeof(*c->launch_src));
	c->launch_out = calloc(ni + 1, sizeof(*c->launch_out));
	c->part_host = calloc(ni + 1, sizeof(*c->part_host));
	if (res->inputs == NULL || c->inputs == NULL || c->methods == NULL || c->shifts == NULL ||
	    c->model == NULL || c->runs == NULL || c->order == NULL || c->clocks == NULL ||
	    c->launched_in == NULL || c->launch_src == NULL || c->launch_out == NULL ||
	    c->part_host == NULL || (c->tl.io = malloc(TL_IO)) == NULL)
		return -ENOMEM;
	for (size_t i = 0; i <= ni; i++) {
		c->launched_in[i] = SIZE_MAX;
		c->launch_out[i] = -1;
		c->part_host[i] = SIZE_MAX;
	}
	res->ninputs = ni;
	for (size_t i = 0; i < ni; i++) {
		const char *path;
		struct stat st;

		res->inputs[i].path = c->pv.v[i];
		c->pv.v[i] = NULL;
		path = c->inputs[i] = res->inputs[i].path;
		if (c->models[i] != NULL)
			continue;
		if (strcmp(path, "-") != 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode))
			c->total += (uint64_t)st.st_size;
		/* --align reads each input twice; a stream (a pipe, a FIFO,
		 * stdin) can be read once: it is copied first. */
		if (c->o->align && !c->pv.in_dir[i] && reader_is_stream(path)) {
			c->spool[i] = reader_spool(path);
			if (c->spool[i] < 0) {
				c->spool_err[i] = c->spool[i];
				c->spool[i] = -1;
			}
		}
	}
	return ostream_open_mem(&c->aos);
}

/* --align: each input's shift, in res->inputs and in the output's meta. */
static int align_inputs(cmb *c)
{
	int err = compute_shifts(c);

	if (err < 0)
		return err;
	for (size_t i = 0; i < c->res->ninputs; i++) {
		merge_input *in = &c->res->inputs[i];

		/* A node's part is on its head's clock: it moves with it. */
		if (is_part(c, i) && c->ref != SIZE_MAX) {
			in->align = c->clocks[i].method;
			in->shift_ns = c->res->inputs[c->ref].shift_ns;
		}
		c->methods[i] = in->align;
		c->shifts[i] = in->shift_ns;
	}
	return 0;
}

/* The output's metadata as far as it is known before the events, and the
 * sink's begin. A model written as its own trace has its own. */
static int begin_output(cmb *c)
{
	model_trace *model = c->model;
	sink_meta *meta = &c->meta;

	if (c->o->model_as_trace) {
		meta->model = c->models[0];
		/* With node parts: as many as the models have, until the end
		 * says how many were written. */
		meta->processes = 0;
		for (size_t i = 0; i < c->res->ninputs; i++)
			meta->processes += c->models[i]->nprocs;
		return c->sink->begin(c->sink, meta);
	}
	model->origin = model_strdup(model, "forktrace combine");
	model->anchor_mono_ns = -1;
	model->anchor_real_ns = -1;
	model->start_ns = -1;
	model->end_ns = -1;
	meta->model = model;
	meta->inputs = c->inputs;
	meta->align_methods = c->o->align ? c->methods : NULL;
	meta->align_shift_ns = c->o->align ? c->shifts : NULL;
	meta->input_runs = c->runs;
	c->tl.ninputs = c->res->ninputs;
	c->tl.extra = (sink_extra){.write = tl_write, .ctx = &c->tl};
	meta->extra = &c->tl.extra;
	return c->sink->begin(c->sink, meta);
}

/* Streams input i into the sink and adds what it says to the output's
 * metadata. Returns 0, or the output's negative errno. */
static int merge_one(cmb *c, size_t i)
{
	merge_result *res = c->res;
	merge_input *in = &res->inputs[i];
	fwd_sink fwd = {.base = {.event = fwd_event}, .c = c};
	reader_opts ro = {
		.shift_ns = in->shift_ns,
		.map_pid = map_pid,
		.map_ctx = c,
		.progress = on_progress,
		.progress_ctx = c,
		.chunk = c->o->chunk,
		.run_meta = on_run_meta,
		.run_meta_ctx = c,
		/* One input has nobody to collide with: its ids stay. */
		.remap_ids = res->ninputs > 1,
		.id_input = i,
		.top_key = on_top_key,
		.top_key_ctx = &c->tl,
		.regular_only = c->pv.in_dir[i],
		.use_fd = c->spool[i] >= 0,
		.fd = c->spool[i],
	};
	reader_info inf;
	int err = 0;

	c->in = in;
	c->index = i;
	c->tl.cur = i;
	sink_critpath_shift(c->sink, in->shift_ns);
	pm_clear(&c->file);
	c->pids = i == c->ref ? &c->ref_pids : &c->file;
	if (c->models[i] != NULL) {
		err = read_model(c, i, true, &inf);
	} else if (c->spool_err[i] < 0) {
		memset(&inf, 0, sizeof(inf));
		inf.min_ts = INT64_MAX;
		inf.max_ts = INT64_MIN;
		inf.lost_events = -1;
		snprintf(inf.error, sizeof(inf.error), "cannot keep a copy of it for --align: %s",
			 strerror(-c->spool_err[i]));
	} else {
		err = reader_read(in->path, &ro, &fwd.base, &inf);
	}
	if (err == 0 && c->err != 0)
		err = c->err;
	/* The parts this one launched (read after it) go under their
	 * launcher's trace pid, and their hosts name it. */
	for (size_t j = 0; err == 0 && j < res->ninputs; j++) {
		int64_t out;

		if (c->launched_in[j] != i || !pm_get(&c->file, c->launch_src[j], &out))
			continue;
		c->launch_out[j] = out;
		if (c->part_host[j] != SIZE_MAX)
			c->hosts[c->part_host[j]].launcher = out;
	}
	fill_input(in, &inf);
	c->done_before += inf.file_bytes;
	if (err < 0)
		return err;
	res->events += in->events;
	res->bytes += in->bytes;
	res->remapped += in->remapped;
	if (in->error != NULL || in->truncated || in->utf8_fixed > 0 || in->dup_fixed > 0 ||
	    in->skipped_keys > 0)
		res->problems++;
	if (inf.min_ts <= inf.max_ts) {
		c->start = inf.min_ts < c->start ? inf.min_ts : c->start;
		c->end = inf.max_ts > c->end ? inf.max_ts : c->end;
	}
	if (inf.lost_events > 0)
		c->lost = model_count_add(c->lost, (uint64_t)inf.lost_events);
	if (inf.has_anchor && c->model->anchor_real_ns < 0) {
		c->model->anchor_mono_ns = inf.anchor_mono_ns - in->shift_ns;
		c->model->anchor_real_ns = inf.anchor_real_ns;
	}
	return 0;
}

/* The output's metadata known once every input was read, and the sink's
 * end. */
static int end_output(cmb *c)
{
	merge_result *res = c->res;
	model_trace *model = c->model;
	int err;

	err = finish_hosts(c);
	if (err < 0)
		return err;
	if (c->o->model_as_trace) {
		res->processes = res->ninputs > 1 ? pm_count(&c->claimed) : c->models[0]->nprocs;
		c->meta.processes = res->processes;
	} else {
		res->processes = pm_count(&c->claimed);
		if (c->start <= c->end) {
			model->start_ns = c->start;
			model->end_ns = c->end;
		}
		model->lost_events = c->lost;
		model->exit_status = res->problems > 0 ? 1 : 0;
		c->meta.exit_status_known = agree(model, c->runs, res->ninputs);
		c->meta.processes = res->processes;
		res->differ = tl_differ(&c->tl);
	}
	err = c->sink->end(c->sink, &c->meta);
	res->out = c->sink->stats;
	res->out.processes = res->processes;
	return err;
}

static void close_inputs(cmb *c)
{
	ostream_finish(&c->aos);
	tl_free(&c->tl);
	free(c->runs);
	model_free(c->model);
	free(c->shifts);
	free(c->methods);
	free(c->inputs);
	for (size_t i = 0; c->spool != NULL && i < c->pv.n; i++)
		if (c->spool[i] >= 0)
			close(c->spool[i]);
	free(c->spool);
	free(c->spool_err);
	pathv_free(&c->pv);
	free(c->models);
	free(c->order);
	free(c->clocks);
	free(c->launched_in);
	free(c->launch_src);
	free(c->launch_out);
	free(c->part_host);
	free(c->hosts);
	free(c->host_launcher);
	pm_free(&c->claimed);
	pm_free(&c->file);
	pm_free(&c->ref_pids);
}

/* model_as_trace takes one model, or the head's model of a multi-host run
 * followed by its nodes' parts. */
static bool own_trace_sources(const merge_source *src, size_t n)
{
	if (n == 0 || src[0].model == NULL)
		return false;
	/* A node's part alone (a node-output file) is its own trace too. */
	if (n > 1 && src[0].model->node.is_node)
		return false;
	for (size_t i = 1; i < n; i++)
		if (src[i].model == NULL || !src[i].model->node.is_node)
			return false;
	return true;
}

int merge_inputs(const merge_source *src, size_t n, const merge_opts *o, trace_sink *sink,
		 merge_result *res)
{
	static const merge_opts defaults;
	cmb c = {.sink = sink, .res = res, .tl = {.fd = -1}, .start = INT64_MAX, .end = INT64_MIN};
	int err;

	memset(res, 0, sizeof(*res));
	c.o = o != NULL ? o : &defaults;
	c.pids = &c.file;
	if (c.o->model_as_trace && !own_trace_sources(src, n))
		return -EINVAL;
	/* Every event goes to the output through the critical path's sink,
	 * whichever way it came. */
	c.sink = sink_critpath_new(sink, &err);
	if (c.sink == NULL)
		return err;
	err = open_inputs(&c, src, n);
	if (err == 0)
		err = plan_hosts(&c);
	if (err == 0 && c.o->align)
		err = align_inputs(&c);
	if (err == 0)
		err = begin_output(&c);
	for (size_t k = 0; k < res->ninputs && err == 0; k++)
		err = merge_one(&c, c.order[k]);
	if (err == 0)
		err = end_output(&c);
	res->spool_error = c.tl.spool_err;
	close_inputs(&c);
	c.sink->free(c.sink);
	return err;
}

int merge_files(const char *const *paths, size_t npaths, const merge_opts *o, trace_sink *sink,
		merge_result *res)
{
	merge_source *src = calloc(npaths ? npaths : 1, sizeof(*src));
	int err;

	if (src == NULL) {
		memset(res, 0, sizeof(*res));
		return -ENOMEM;
	}
	for (size_t i = 0; i < npaths; i++)
		src[i].path = paths[i];
	err = merge_inputs(src, npaths, o, sink, res);
	free(src);
	return err;
}

void merge_result_free(merge_result *res)
{
	if (res == NULL)
		return;
	for (size_t i = 0; i < res->ninputs; i++) {
		free(res->inputs[i].path);
		free(res->inputs[i].error);
	}
	free(res->inputs);
	free(res->differ);
	memset(res, 0, sizeof(*res));
}
