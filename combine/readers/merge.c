/*
 * merge.c - the merge of trace files (merge.h): inputs expanded, pids kept
 * apart, --align shifts computed, every input streamed into one sink.
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
#include "reader.h"

/* ---- pid maps: open addressing, int64 -> int64 ----------------------- */

#define PIDMAP_EMPTY INT64_MIN

typedef struct pidmap {
	int64_t *keys, *vals;
	size_t cap, n; /* cap: a power of two */
} pidmap;

static size_t pm_slot(const pidmap *m, int64_t k)
{
	uint64_t h = (uint64_t)k * 0x9e3779b97f4a7c15ull;

	return (size_t)(h >> 17) & (m->cap - 1);
}

static bool pm_get(const pidmap *m, int64_t k, int64_t *v)
{
	if (m->cap == 0)
		return false;
	for (size_t i = pm_slot(m, k);; i = (i + 1) & (m->cap - 1)) {
		if (m->keys[i] == PIDMAP_EMPTY)
			return false;
		if (m->keys[i] == k) {
			*v = m->vals[i];
			return true;
		}
	}
}

static int pm_put(pidmap *m, int64_t k, int64_t v)
{
	if ((m->n + 1) * 2 > m->cap) {
		pidmap g = {.cap = m->cap ? m->cap * 2 : 64};

		g.keys = malloc(g.cap * sizeof(*g.keys));
		g.vals = malloc(g.cap * sizeof(*g.vals));
		if (g.keys == NULL || g.vals == NULL) {
			free(g.keys);
			free(g.vals);
			return -ENOMEM;
		}
		for (size_t i = 0; i < g.cap; i++)
			g.keys[i] = PIDMAP_EMPTY;
		for (size_t i = 0; i < m->cap; i++)
			if (m->keys[i] != PIDMAP_EMPTY)
				pm_put(&g, m->keys[i], m->vals[i]);
		free(m->keys);
		free(m->vals);
		*m = g;
	}
	for (size_t i = pm_slot(m, k);; i = (i + 1) & (m->cap - 1)) {
		if (m->keys[i] == PIDMAP_EMPTY) {
			m->keys[i] = k;
			m->vals[i] = v;
			m->n++;
			return 0;
		}
		if (m->keys[i] == k) {
			m->vals[i] = v;
			return 0;
		}
	}
}

static void pm_clear(pidmap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		m->keys[i] = PIDMAP_EMPTY;
	m->n = 0;
}

static void pm_free(pidmap *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
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
		size_t c = pv->cap ? pv->cap * 2 : 16;
		char **nv = realloc(pv->v, c * sizeof(*nv));
		bool *nd = nv != NULL ? realloc(pv->in_dir, c * sizeof(*nd)) : NULL;

		if (nv != NULL)
			pv->v = nv;
		if (nd == NULL) {
			free(p);
			return -ENOMEM;
		}
		pv->in_dir = nd;
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

int merge_expand(const char *const *paths, size_t npaths, char ***out, bool **in_dir,
		   size_t *nout)
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
	size_t *slots; /* a hash of the names: 1 + index into keys; 0: free */
	size_t nslots;
	tl_val *vals;  /* in input order */
	size_t nvals, vals_cap;
	int fd;        /* the spool: -1 until a value comes */
	uint64_t size;
	size_t cached;
	char *io;      /* TL_IO bytes */
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
	size_t mask = t->nslots - 1;

	if (t->nslots == 0)
		return -1;
	for (size_t i = tl_hash(name.p, name.n, other) & mask;; i = (i + 1) & mask) {
		if (t->slots[i] == 0)
			return -1;
		if (tl_is(&t->keys[t->slots[i] - 1], name, other))
			return (ssize_t)(t->slots[i] - 1);
	}
}

static void tl_slot(toplevel *t, size_t k)
{
	const tl_key *key = &t->keys[k];
	size_t i = tl_hash(key->name, strlen(key->name), key->other) & (t->nslots - 1);

	while (t->slots[i] != 0)
		i = (i + 1) & (t->nslots - 1);
	t->slots[i] = k + 1;
}

/* A new key (name has no NUL): its index, or -ENOMEM. */
static ssize_t tl_add(toplevel *t, strview name, bool other)
{
	tl_key *key;

	if ((t->nkeys + 1) * 2 > t->nslots) {
		size_t n = t->nslots ? t->nslots * 2 : 16;
		size_t *ns = calloc(n, sizeof(*ns));

		if (ns == NULL)
			return -ENOMEM;
		free(t->slots);
		t->slots = ns;
		t->nslots = n;
		for (size_t k = 0; k < t->nkeys; k++)
			tl_slot(t, k);
	}
	if (t->nkeys == t->keys_cap) {
		size_t n = t->keys_cap ? t->keys_cap * 2 : 8;
		tl_key *nk = realloc(t->keys, n * sizeof(*nk));

		if (nk == NULL)
			return -ENOMEM;
		t->keys = nk;
		t->keys_cap = n;
	}
	key = &t->keys[t->nkeys];
	memset(key, 0, sizeof(*key));
	key->name = strndup(name.p, name.n);
	if (key->name == NULL)
		return -ENOMEM;
	key->other = other;
	key->dtu = !other && !strcmp(key->name, "displayTimeUnit");
	key->per_input = !other && !strcmp(key->name, "otherData");
	tl_slot(t, t->nkeys);
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
	if (t->nvals == t->vals_cap) {
		size_t n = t->vals_cap ? t->vals_cap * 2 : 16;
		tl_val *nv = realloc(t->vals, n * sizeof(*nv));

		if (nv == NULL)
			return -ENOMEM;
		t->vals = nv;
		t->vals_cap = n;
	}
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
	free(t->slots);
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
	pidmap claimed;	   /* out pid -> input index */
	pidmap file;	   /* this input's pid -> out pid */
	int64_t next_k;	   /* next remap candidate: MERGE_REMAP_BASE + k */
	ostream aos;	   /* args text of synthesized events */
	model_trace *model;   /* the output's run metadata; its arena holds runs' strings */
	sink_input_run *runs; /* per input, parallel to res->inputs */
	toplevel tl;	      /* the inputs' other top-level keys */
	int err;
	const merge_opts *o;
	uint64_t done_before, total;
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
	    .ev = {
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

	if (name == NULL && pm_get(&c->file, pid, &out))
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
	    (name == NULL && pm_put(&c->file, pid, out) < 0))
		c->err = -ENOMEM;
	c->in->pids++;
	return out;
}

/*
 * reader_opts.run_meta: what the current input says about its run. The
 * exit status of a combined input is its run's only when the combine that
 * wrote it carried the run's command over (else it is that combine's own
 * 0 or 1).
 */
static void on_run_meta(void *ctx, strview forktrace)
{
	cmb *c = ctx;
	sink_input_run *run = &c->runs[c->index];
	json_t *o = json_loadb(forktrace.p, forktrace.n, JSON_ALLOW_NUL, NULL);
	const json_t *cmd, *st, *v;
	const char *host, *origin, **argv;
	size_t i;

	if (!json_is_object(o))
		goto out;
	host = json_string_value(json_object_get(o, "host"));
	origin = json_string_value(json_object_get(o, "origin"));
	cmd = json_object_get(o, "command");
	st = json_object_get(o, "exit_status");
	if (host != NULL && (run->host = model_strdup(c->model, host)) == NULL)
		goto nomem;
	if (json_is_array(cmd)) {
		argv = calloc(json_array_size(cmd) + 1, sizeof(*argv));
		if (argv == NULL)
			goto nomem;
		json_array_foreach(cmd, i, v) {
			argv[i] = json_string_value(v);
			if (argv[i] == NULL)
				break;
		}
		/* An argv with something else than strings is not one. */
		if (i == json_array_size(cmd)) {
			run->command = model_strvdup(c->model, argv, i);
			if (run->command == NULL) {
				free(argv);
				goto nomem;
			}
		}
		free(argv);
	}
	if (json_is_integer(st) && json_integer_value(st) >= INT32_MIN &&
	    json_integer_value(st) <= INT32_MAX &&
	    (origin == NULL || strcmp(origin, "forktrace combine") != 0 || run->command != NULL)) {
		run->has_exit_status = true;
		run->exit_status = (int)json_integer_value(st);
	}
	goto out;
nomem:
	c->err = -ENOMEM;
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
	in->truncated = inf->truncated;
	in->error_offset = inf->error_offset;
	memcpy(in->origin, inf->origin, sizeof(in->origin));
	if (inf->error[0] != '\0')
		in->error = strdup(inf->error);
}

/* --align's first pass: the shift of every input. A stream was copied
 * (spool[i] >= 0), or could not be (spool_err[i] < 0: not read). */
static int compute_shifts(merge_result *res, const merge_opts *o, const bool *in_dir,
			  const int *spool, const int *spool_err)
{
	reader_info *infos = calloc(res->ninputs, sizeof(*infos));
	bool have_ref = false;
	int64_t ref_off = 0, target = 0;
	bool have_target = false;
	int err = 0;

	if (infos == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < res->ninputs && err == 0; i++) {
		reader_opts ro = {.chunk = o->chunk, .regular_only = in_dir[i],
				  .use_fd = spool[i] >= 0, .fd = spool[i]};

		infos[i].min_ts = INT64_MAX;
		infos[i].max_ts = INT64_MIN;
		if (spool_err[i] == 0)
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

int merge_files(const char *const *paths, size_t npaths, const merge_opts *o,
		  trace_sink *sink, merge_result *res)
{
	static const merge_opts defaults;
	pathv pv = {0};
	cmb c = {.sink = sink, .res = res, .tl = {.fd = -1}};
	fwd_sink fwd = {.base = {.event = fwd_event}, .c = &c};
	const char **inputs = NULL, **methods = NULL;
	int64_t *shifts = NULL;
	int *spool = NULL, *spool_err = NULL;
	model_trace *model = NULL;
	sink_meta meta = {0};
	int64_t start = INT64_MAX, end = INT64_MIN;
	uint64_t lost = 0;
	int err = 0;

	memset(res, 0, sizeof(*res));
	if (o == NULL)
		o = &defaults;
	c.o = o;
	for (size_t i = 0; i < npaths && err == 0; i++)
		err = expand(&pv, paths[i]);
	if (err < 0)
		goto fail_paths;
	spool = calloc(pv.n + 1, sizeof(*spool));
	spool_err = calloc(pv.n + 1, sizeof(*spool_err));
	if (spool == NULL || spool_err == NULL) {
		err = -ENOMEM;
		goto fail_paths;
	}
	for (size_t i = 0; i < pv.n; i++)
		spool[i] = -1;
	res->inputs = calloc(pv.n ? pv.n : 1, sizeof(*res->inputs));
	inputs = calloc(pv.n + 1, sizeof(*inputs));
	methods = calloc(pv.n + 1, sizeof(*methods));
	shifts = calloc(pv.n + 1, sizeof(*shifts));
	model = model_new();
	c.runs = calloc(pv.n + 1, sizeof(*c.runs));
	c.model = model;
	if (res->inputs == NULL || inputs == NULL || methods == NULL || shifts == NULL ||
	    model == NULL || c.runs == NULL || (c.tl.io = malloc(TL_IO)) == NULL) {
		err = -ENOMEM;
		goto fail_alloc;
	}
	res->ninputs = pv.n;
	for (size_t i = 0; i < pv.n; i++) {
		struct stat st;

		res->inputs[i].path = pv.v[i];
		pv.v[i] = NULL;
		inputs[i] = res->inputs[i].path;
		if (strcmp(inputs[i], "-") != 0 && stat(inputs[i], &st) == 0 && S_ISREG(st.st_mode))
			c.total += (uint64_t)st.st_size;
		/* --align reads each input twice; a stream (a pipe, a FIFO,
		 * stdin) can be read once: it is copied first. */
		if (o->align && !pv.in_dir[i] && reader_is_stream(inputs[i])) {
			spool[i] = reader_spool(inputs[i]);
			if (spool[i] < 0) {
				spool_err[i] = spool[i];
				spool[i] = -1;
			}
		}
	}
	if (o->align) {
		err = compute_shifts(res, o, pv.in_dir, spool, spool_err);
		if (err < 0)
			goto fail_alloc;
		for (size_t i = 0; i < pv.n; i++) {
			methods[i] = res->inputs[i].align;
			shifts[i] = res->inputs[i].shift_ns;
		}
	}
	err = ostream_open_mem(&c.aos);
	if (err < 0)
		goto fail_alloc;

	model->origin = model_strdup(model, "forktrace combine");
	model->anchor_mono_ns = -1;
	model->anchor_real_ns = -1;
	model->start_ns = -1;
	model->end_ns = -1;
	meta.model = model;
	meta.inputs = inputs;
	meta.align_methods = o->align ? methods : NULL;
	meta.align_shift_ns = o->align ? shifts : NULL;
	meta.input_runs = c.runs;
	c.tl.ninputs = res->ninputs;
	c.tl.extra = (sink_extra){.write = tl_write, .ctx = &c.tl};
	meta.extra = &c.tl.extra;
	err = sink->begin(sink, &meta);
	if (err < 0)
		goto fail_aos;

	for (size_t i = 0; i < res->ninputs; i++) {
		merge_input *in = &res->inputs[i];
		reader_opts ro = {
		    .shift_ns = in->shift_ns,
		    .map_pid = map_pid,
		    .map_ctx = &c,
		    .progress = on_progress,
		    .progress_ctx = &c,
		    .chunk = o->chunk,
		    .run_meta = on_run_meta,
		    .run_meta_ctx = &c,
		    /* One input has nobody to collide with: its ids stay. */
		    .remap_ids = res->ninputs > 1,
		    .id_input = i,
		    .top_key = on_top_key,
		    .top_key_ctx = &c.tl,
		    .regular_only = pv.in_dir[i],
		    .use_fd = spool[i] >= 0,
		    .fd = spool[i],
		};
		reader_info inf;

		c.in = in;
		c.index = i;
		c.tl.cur = i;
		pm_clear(&c.file);
		if (spool_err[i] < 0) {
			memset(&inf, 0, sizeof(inf));
			inf.min_ts = INT64_MAX;
			inf.max_ts = INT64_MIN;
			inf.lost_events = -1;
			snprintf(inf.error, sizeof(inf.error),
				 "cannot keep a copy of it for --align: %s", strerror(-spool_err[i]));
		} else {
			err = reader_read(in->path, &ro, &fwd.base, &inf);
		}
		if (err == 0 && c.err != 0)
			err = c.err;
		fill_input(in, &inf);
		c.done_before += inf.file_bytes;
		if (err < 0)
			goto fail_aos;
		res->events += in->events;
		res->bytes += in->bytes;
		res->remapped += in->remapped;
		if (in->error != NULL || in->truncated || in->utf8_fixed > 0 ||
		    in->dup_fixed > 0 || in->skipped_keys > 0)
			res->problems++;
		if (inf.min_ts <= inf.max_ts) {
			start = inf.min_ts < start ? inf.min_ts : start;
			end = inf.max_ts > end ? inf.max_ts : end;
		}
		if (inf.lost_events > 0)
			lost = model_count_add(lost, (uint64_t)inf.lost_events);
		if (inf.has_anchor && model->anchor_real_ns < 0) {
			model->anchor_mono_ns = inf.anchor_mono_ns - in->shift_ns;
			model->anchor_real_ns = inf.anchor_real_ns;
		}
	}
	res->processes = c.claimed.n;
	if (start <= end) {
		model->start_ns = start;
		model->end_ns = end;
	}
	model->lost_events = lost;
	model->exit_status = res->problems > 0 ? 1 : 0;
	meta.exit_status_known = agree(model, c.runs, res->ninputs);
	meta.processes = res->processes;
	res->differ = tl_differ(&c.tl);
	err = sink->end(sink, &meta);
	res->out = sink->stats;
	res->out.processes = res->processes;
fail_aos:
	res->spool_error = c.tl.spool_err;
	ostream_finish(&c.aos);
fail_alloc:
	tl_free(&c.tl);
	free(c.runs);
	model_free(model);
	free(shifts);
	free(methods);
	free(inputs);
fail_paths:
	for (size_t i = 0; spool != NULL && i < pv.n; i++)
		if (spool[i] >= 0)
			close(spool[i]);
	free(spool);
	free(spool_err);
	pathv_free(&pv);
	pm_free(&c.claimed);
	pm_free(&c.file);
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
