/*
 * reader_h5.c - an HDF5 trace written by sink_h5.c turned back into sink
 * events (h5.h, docs/HDF5_LAYOUT.md), so `forktrace report`, `info` and
 * `combine` read .h5 files like JSON ones. Events come process by process
 * (the JSON trace does not promise an order either), H5R_BLOCK rows at a
 * time; only the strings table is read whole.
 */
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5_module.h"
#include "jsonr.h"

#define H5R_BLOCK 65536
/* Above this many bytes of args text in one block, read it event by event. */
#define H5R_MAX_BLOB_READ (64u << 20)

/* The columns the reader needs, in the order of the arrays below. */
enum {
	R_TS,
	R_DUR,
	R_NAME,
	R_CAT,
	R_TID,
	R_PH,
	R_SCOPE,
	R_FLAGS,
	R_ID,
	R_AOFF,
	R_ALEN,
	R_XOFF,
	R_XLEN,
	R_NCOLS
};

static const char *const rcol_names[R_NCOLS] = {
	"ts_ns", "dur_ns", "name_id",     "cat_id",      "tid",          "ph",          "scope",
	"flags", "id",     "args_offset", "args_length", "extra_offset", "extra_length"};

typedef struct h5r {
	hid_t file;
	/* Where the tables are: the root up to layout 2, metadata from 3
	 * (set by read_meta; closed by h5r_close when not the file). */
	hid_t tables;
	hid_t vlen_str;
	trace_sink *sink;
	char **strings; /* whole /strings, HDF5-allocated (vlen) */
	hsize_t nstrings;
	/* One block of rows. */
	int64_t *ts, *dur, *tid;
	uint32_t *name, *cat, *alen, *xlen;
	uint8_t *ph, *scope, *flags;
	uint64_t *id, *aoff, *xoff;
	char *blob;
	size_t blob_cap;
	char *check; /* a padded copy of extra keys being checked */
	size_t check_cap;
	ostream raw; /* an event rebuilt with its extra keys */
	int err;
} h5r;

static hid_t open_file(const char *path)
{
	hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), f;

	if (fapl < 0)
		return H5I_INVALID_HID;
	H5Pset_file_locking(fapl, false, true);
	f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
	H5Pclose(fapl);
	return f;
}

/* A scalar string attribute, malloc'd; NULL if absent or not a string. */
static char *attr_str(hid_t loc, const char *name)
{
	hid_t a, t, vt;
	char *v = NULL, *out = NULL;

	if (H5Aexists(loc, name) <= 0)
		return NULL;
	a = H5Aopen(loc, name, H5P_DEFAULT);
	if (a < 0)
		return NULL;
	t = H5Aget_type(a);
	if (t >= 0 && H5Tget_class(t) == H5T_STRING && H5Tis_variable_str(t) > 0) {
		vt = H5Tcopy(H5T_C_S1);
		H5Tset_size(vt, H5T_VARIABLE);
		H5Tset_cset(vt, H5T_CSET_UTF8);
		if (H5Aread(a, vt, &v) >= 0 && v != NULL) {
			out = strdup(v);
			H5free_memory(v);
		}
		H5Tclose(vt);
	}
	if (t >= 0)
		H5Tclose(t);
	H5Aclose(a);
	return out;
}

/* A scalar integer attribute; false if absent. */
static bool attr_i64(hid_t loc, const char *name, int64_t *out)
{
	hid_t a;
	bool ok;

	if (H5Aexists(loc, name) <= 0)
		return false;
	a = H5Aopen(loc, name, H5P_DEFAULT);
	if (a < 0)
		return false;
	ok = H5Aread(a, H5T_NATIVE_INT64, out) >= 0;
	H5Aclose(a);
	return ok;
}

/* The "command" attribute (1-D vlen strings) into t's arena. */
static int read_command(hid_t f, h5r *r, model_trace *t)
{
	hid_t a, space;
	hssize_t n;
	char **v;
	int err = 0;

	if (H5Aexists(f, "command") <= 0)
		return 0;
	a = H5Aopen(f, "command", H5P_DEFAULT);
	if (a < 0)
		return -EIO;
	space = H5Aget_space(a);
	n = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
	if (n < 0 || n > 1 << 20) {
		err = -EIO;
		goto close;
	}
	v = calloc((size_t)n + 1, sizeof(*v));
	if (v == NULL) {
		err = -ENOMEM;
		goto close;
	}
	if (H5Aread(a, r->vlen_str, v) < 0) {
		err = -EIO;
	} else {
		t->command = model_strvdup(t, (const char *const *)v, (size_t)n);
		if (t->command == NULL)
			err = -ENOMEM;
		H5Dvlen_reclaim(r->vlen_str, space, H5P_DEFAULT, v);
	}
	free(v);
close:
	if (space >= 0)
		H5Sclose(space);
	H5Aclose(a);
	return err;
}

/* Checks the layout attributes and fills meta / processes. */
static int read_meta(h5r *r, model_trace *meta, uint64_t *processes)
{
	char *format = attr_str(r->file, "format");
	int64_t v = 0;
	int err = 0;

	if (format == NULL || strcmp(format, H5_LAYOUT_NAME) != 0 ||
	    !attr_i64(r->file, "format_version", &v) || v < 1 || v > H5_LAYOUT_VERSION) {
		free(format);
		return -EINVAL;
	}
	free(format);
	/* Layout 3 moved the tables under metadata; the run's attributes
	 * stayed on the root. */
	if (r->tables < 0) {
		if (v < 3)
			r->tables = r->file;
		else if ((r->tables = H5Gopen2(r->file, "metadata", H5P_DEFAULT)) < 0)
			return -EBADMSG;
	}
	if (processes != NULL && attr_i64(r->file, "processes", &v))
		*processes = (uint64_t)v;
	if (meta == NULL)
		return 0;
	{
		char *origin = attr_str(r->file, "origin");
		char *host = attr_str(r->file, "host");

		if (origin != NULL && origin[0] != '\0')
			meta->origin = model_strdup(meta, origin);
		if (host != NULL && host[0] != '\0')
			meta->host = model_strdup(meta, host);
		if ((origin != NULL && origin[0] != '\0' && meta->origin == NULL) ||
		    (host != NULL && host[0] != '\0' && meta->host == NULL))
			err = -ENOMEM;
		free(origin);
		free(host);
	}
	attr_i64(r->file, "anchor_monotonic_ns", &meta->anchor_mono_ns);
	attr_i64(r->file, "anchor_realtime_ns", &meta->anchor_real_ns);
	attr_i64(r->file, "start_ns", &meta->start_ns);
	attr_i64(r->file, "end_ns", &meta->end_ns);
	if (attr_i64(r->file, "exit_status", &v))
		meta->exit_status = (int)v;
	if (attr_i64(r->file, "lost_events", &v))
		meta->lost_events = (uint64_t)v;
	if (err == 0)
		err = read_command(r->file, r, meta);
	return err;
}

static int read_strings(h5r *r)
{
	hid_t d, space;
	hssize_t n;
	int err = -EIO;

	d = H5Dopen2(r->tables, "strings", H5P_DEFAULT);
	if (d < 0)
		return -EIO;
	space = H5Dget_space(d);
	n = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
	if (n < 1)
		goto close;
	r->strings = calloc((size_t)n, sizeof(*r->strings));
	if (r->strings == NULL) {
		err = -ENOMEM;
		goto close;
	}
	if (H5Dread(d, r->vlen_str, H5S_ALL, H5S_ALL, H5P_DEFAULT, r->strings) < 0)
		goto close;
	r->nstrings = (hsize_t)n;
	err = 0;
close:
	if (space >= 0)
		H5Sclose(space);
	H5Dclose(d);
	return err;
}

static void free_strings(h5r *r)
{
	hid_t space;
	hsize_t n = r->nstrings;

	if (r->strings == NULL)
		return;
	if (n > 0) {
		space = H5Screate_simple(1, &n, NULL);
		H5Dvlen_reclaim(r->vlen_str, space, H5P_DEFAULT, r->strings);
		H5Sclose(space);
	}
	free(r->strings);
	r->strings = NULL;
}

/* Reads rows [start, start + n) of dataset name in g into buf. */
static int read_rows(hid_t g, const char *name, hid_t mtype, hsize_t start, hsize_t n, void *buf)
{
	hid_t d, fspace, mspace;
	int err = -EIO;

	d = H5Dopen2(g, name, H5P_DEFAULT);
	if (d < 0)
		return -EIO;
	fspace = H5Dget_space(d);
	if (fspace < 0)
		goto close_d;
	mspace = H5Screate_simple(1, &n, NULL);
	if (mspace < 0)
		goto close_f;
	if (H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &start, NULL, &n, NULL) >= 0 &&
	    H5Dread(d, mtype, mspace, fspace, H5P_DEFAULT, buf) >= 0)
		err = 0;
	H5Sclose(mspace);
close_f:
	H5Sclose(fspace);
close_d:
	H5Dclose(d);
	return err;
}

static hsize_t dset_len(hid_t g, const char *name)
{
	hid_t d = H5Dopen2(g, name, H5P_DEFAULT), space;
	hssize_t n = -1;

	if (d < 0)
		return 0;
	space = H5Dget_space(d);
	if (space >= 0) {
		n = H5Sget_simple_extent_npoints(space);
		H5Sclose(space);
	}
	H5Dclose(d);
	return n > 0 ? (hsize_t)n : 0;
}

/* Bytes [off, off + len) of the args dataset into r->blob. */
static int read_blob(h5r *r, hid_t g, hsize_t blob_size, uint64_t off, uint64_t len)
{
	if (off > blob_size || len > blob_size - off)
		return -EBADMSG;
	if (len + 1 > r->blob_cap) {
		char *nb = realloc(r->blob, len + 1);

		if (nb == NULL)
			return -ENOMEM;
		r->blob = nb;
		r->blob_cap = len + 1;
	}
	if (len == 0)
		return 0;
	return read_rows(g, "args", H5T_NATIVE_UINT8, off, len, r->blob);
}

static strview string_at(h5r *r, uint32_t id, bool *bad)
{
	if (id >= r->nstrings || r->strings[id] == NULL) {
		*bad = true;
		return (strview){"", 0};
	}
	return strview_c(r->strings[id]);
}

/*
 * The event with the extra keys put back, as the raw text of e. The extra
 * text is checked with jsonr, the scanner that split it off in the sink,
 * so that whatever it kept (integers beyond int64, any escape) comes back
 * byte for byte. It is copied first: jsonr wants padding after the text.
 */
static void rebuild_raw(h5r *r, sink_event *e, strview extra)
{
	const char *next, *end;
	jsonr_obj o;
	jsonw w;

	/* Only a valid, non-empty object is merged: a corrupt file must not
	 * make the JSON output invalid. */
	if (extra.n < 3 || extra.p[0] != '{')
		return;
	if (extra.n + JSONR_PAD > r->check_cap) {
		char *nc = realloc(r->check, extra.n + JSONR_PAD);

		if (nc == NULL)
			return;
		r->check = nc;
		r->check_cap = extra.n + JSONR_PAD;
	}
	memcpy(r->check, extra.p, extra.n);
	memset(r->check + extra.n, 0, JSONR_PAD);
	end = r->check + extra.n;
	if (jsonr_value(r->check, end, &next, &o, false) != JSONR_OK || o.fix || next != end ||
	    end[-1] != '}')
		return;
	ostream_mem_reset(&r->raw);
	jsonw_init(&w, &r->raw);
	jsonw_event_begin(&w, &e->ev);
	ostream_putc(&r->raw, ',');
	ostream_write(&r->raw, extra.p + 1, extra.n - 2);
	jsonw_event_end(&w);
	if (ostream_error(&r->raw) == 0) {
		const char *p = r->raw.buf;
		size_t n = r->raw.len;

		while (n > 0 && (*p == '\n' || *p == ',')) {
			p++;
			n--;
		}
		e->raw = (strview){p, n};
	}
}

/* Emits rows [start, start + n) of the process group g. */
static int emit_block(h5r *r, hid_t g, int64_t pid, hsize_t start, hsize_t n, hsize_t blob_size)
{
	void *bufs[R_NCOLS] = {r->ts,    r->dur, r->name, r->cat,  r->tid,  r->ph,  r->scope,
			       r->flags, r->id,  r->aoff, r->alen, r->xoff, r->xlen};
	const hid_t types[R_NCOLS] = {H5T_NATIVE_INT64,  H5T_NATIVE_INT64,  H5T_NATIVE_UINT32,
				      H5T_NATIVE_UINT32, H5T_NATIVE_INT64,  H5T_NATIVE_UINT8,
				      H5T_NATIVE_UINT8,  H5T_NATIVE_UINT8,  H5T_NATIVE_UINT64,
				      H5T_NATIVE_UINT64, H5T_NATIVE_UINT32, H5T_NATIVE_UINT64,
				      H5T_NATIVE_UINT32};
	uint64_t lo = UINT64_MAX, hi = 0;
	bool whole, bad = false;
	int err;

	for (int c = 0; c < R_NCOLS; c++) {
		err = read_rows(g, rcol_names[c], types[c], start, n, bufs[c]);
		if (err < 0)
			return err;
	}
	for (hsize_t i = 0; i < n; i++) {
		if (r->alen[i] > 0) {
			lo = r->aoff[i] < lo ? r->aoff[i] : lo;
			hi = r->aoff[i] + r->alen[i] > hi ? r->aoff[i] + r->alen[i] : hi;
		}
		if (r->xlen[i] > 0) {
			lo = r->xoff[i] < lo ? r->xoff[i] : lo;
			hi = r->xoff[i] + r->xlen[i] > hi ? r->xoff[i] + r->xlen[i] : hi;
		}
	}
	/* The args of a block are usually one contiguous range: one read. */
	whole = lo < hi && hi - lo <= H5R_MAX_BLOB_READ;
	if (whole) {
		err = read_blob(r, g, blob_size, lo, hi - lo);
		if (err < 0)
			return err;
	}
	for (hsize_t i = 0; i < n; i++) {
		sink_event e = {
			.ev =
				{
					.ph = (char)r->ph[i],
					.scope = (char)r->scope[i],
					.has_id = (r->flags[i] & 1) != 0,
					.bind_enclosing = (r->flags[i] & 2) != 0,
					.name = string_at(r, r->name[i], &bad),
					.pid = pid,
					.tid = r->tid[i],
					.ts_ns = r->ts[i],
					.dur_ns = r->dur[i] == -1 ? JSONW_NO_TIME : r->dur[i],
					.id = r->id[i],
				},
		};
		uint64_t base = lo;

		if (r->cat[i] != 0)
			e.ev.cat = string_at(r, r->cat[i], &bad);
		if (bad)
			return -EBADMSG;
		if (!whole && (r->alen[i] > 0 || r->xlen[i] > 0)) {
			/* Both pieces of this event only. */
			uint64_t a0 = r->alen[i] ? r->aoff[i] : r->xoff[i];
			uint64_t a1 = r->xlen[i] ? r->xoff[i] + r->xlen[i]
						 : r->aoff[i] + r->alen[i];

			if (r->alen[i] && r->xlen[i] && r->xoff[i] < r->aoff[i])
				return -EBADMSG;
			if (a1 < a0)
				return -EBADMSG;
			err = read_blob(r, g, blob_size, a0, a1 - a0);
			if (err < 0)
				return err;
			base = a0;
		}
		if (r->alen[i] > 0)
			e.ev.args = (strview){r->blob + (r->aoff[i] - base), r->alen[i]};
		if (r->xlen[i] > 0)
			rebuild_raw(r, &e, (strview){r->blob + (r->xoff[i] - base), r->xlen[i]});
		err = r->sink->event(r->sink, &e);
		if (err < 0)
			return err;
	}
	return 0;
}

static herr_t read_group(hid_t events, const char *name, const H5L_info_t *info, void *ctx)
{
	h5r *r = ctx;
	hid_t g;
	int64_t pid;
	hsize_t rows, blob_size;
	int err = 0;

	(void)info;
	g = H5Gopen2(events, name, H5P_DEFAULT);
	if (g < 0) {
		r->err = -EIO;
		return -1;
	}
	if (!attr_i64(g, "pid", &pid)) {
		char *end;

		pid = strtoll(name, &end, 10);
		if (*end != '\0')
			err = -EBADMSG;
	}
	rows = dset_len(g, "ts_ns");
	blob_size = dset_len(g, "args");
	for (int c = 1; c < R_NCOLS && err == 0; c++)
		if (dset_len(g, rcol_names[c]) != rows)
			err = -EBADMSG;
	for (hsize_t at = 0; at < rows && err == 0; at += H5R_BLOCK)
		err = emit_block(r, g, pid, at, rows - at < H5R_BLOCK ? rows - at : H5R_BLOCK,
				 blob_size);
	H5Gclose(g);
	if (err < 0) {
		r->err = err;
		return -1;
	}
	return 0;
}

static int alloc_block(h5r *r)
{
	r->ts = malloc(H5R_BLOCK * sizeof(*r->ts));
	r->dur = malloc(H5R_BLOCK * sizeof(*r->dur));
	r->tid = malloc(H5R_BLOCK * sizeof(*r->tid));
	r->name = malloc(H5R_BLOCK * sizeof(*r->name));
	r->cat = malloc(H5R_BLOCK * sizeof(*r->cat));
	r->alen = malloc(H5R_BLOCK * sizeof(*r->alen));
	r->xlen = malloc(H5R_BLOCK * sizeof(*r->xlen));
	r->ph = malloc(H5R_BLOCK);
	r->scope = malloc(H5R_BLOCK);
	r->flags = malloc(H5R_BLOCK);
	r->id = malloc(H5R_BLOCK * sizeof(*r->id));
	r->aoff = malloc(H5R_BLOCK * sizeof(*r->aoff));
	r->xoff = malloc(H5R_BLOCK * sizeof(*r->xoff));
	if (!r->ts || !r->dur || !r->tid || !r->name || !r->cat || !r->alen || !r->xlen || !r->ph ||
	    !r->scope || !r->flags || !r->id || !r->aoff || !r->xoff)
		return -ENOMEM;
	return ostream_open_mem(&r->raw);
}

static void free_block(h5r *r)
{
	free(r->ts);
	free(r->dur);
	free(r->tid);
	free(r->name);
	free(r->cat);
	free(r->alen);
	free(r->xlen);
	free(r->ph);
	free(r->scope);
	free(r->flags);
	free(r->id);
	free(r->aoff);
	free(r->xoff);
	free(r->blob);
	free(r->check);
	if (r->raw.buf != NULL)
		ostream_finish(&r->raw);
}

/* Opens path (its signature checked by h5load.c); r->file and
 * r->vlen_str to close. */
static int h5r_open(h5r *r, const char *path)
{
	r->file = r->tables = r->vlen_str = H5I_INVALID_HID;
	H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
	r->vlen_str = H5Tcopy(H5T_C_S1);
	if (r->vlen_str < 0 || H5Tset_size(r->vlen_str, H5T_VARIABLE) < 0 ||
	    H5Tset_cset(r->vlen_str, H5T_CSET_UTF8) < 0)
		return -EIO;
	r->file = open_file(path);
	return r->file < 0 ? -EIO : 0;
}

static void h5r_close(h5r *r)
{
	if (r->tables >= 0 && r->tables != r->file)
		H5Gclose(r->tables);
	if (r->file >= 0)
		H5Fclose(r->file);
	if (r->vlen_str >= 0)
		H5Tclose(r->vlen_str);
}

int h5r_meta(const char *path, model_trace *meta, uint64_t *processes)
{
	h5r r = {0};
	int err = h5r_open(&r, path);

	if (err == 0)
		err = read_meta(&r, meta, processes);
	h5r_close(&r);
	return err;
}

/* A /hosts row as the reader takes it (the writer's fields, by name). */
typedef struct h5r_hrow {
	char *name, *role, *state, *clock;
	uint64_t processes;
	int64_t offset_ns, ref_ns;
	double drift_ppm;
	int64_t err_ns;
	uint64_t samples;
	int64_t lost_ns;
	char *why, *where;
	int64_t launcher;
	char *launched_as;
} h5r_hrow;

static hid_t h5r_hosts_type(hid_t str)
{
	hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(h5r_hrow));

	if (t < 0)
		return t;
#define M(field, type) H5Tinsert(t, #field, HOFFSET(h5r_hrow, field), type)
	M(name, str);
	M(role, str);
	M(state, str);
	M(clock, str);
	M(processes, H5T_NATIVE_UINT64);
	M(offset_ns, H5T_NATIVE_INT64);
	M(ref_ns, H5T_NATIVE_INT64);
	M(drift_ppm, H5T_NATIVE_DOUBLE);
	M(err_ns, H5T_NATIVE_INT64);
	M(samples, H5T_NATIVE_UINT64);
	M(lost_ns, H5T_NATIVE_INT64);
	M(why, str);
	M(where, str);
	M(launcher, H5T_NATIVE_INT64);
	M(launched_as, str);
#undef M
	return t;
}

/* A string of a /hosts row in arena's arena: "" is none where none is
 * NULL. Sets *err to -ENOMEM. */
static const char *host_str(model_trace *arena, const char *s, bool empty_is_null, int *err)
{
	const char *d;

	if (s == NULL || (empty_is_null && s[0] == '\0'))
		return NULL;
	d = model_strdup(arena, s);
	if (d == NULL)
		*err = -ENOMEM;
	return d;
}

int h5r_hosts(const char *path, model_trace *arena, sink_host **hosts, size_t *n)
{
	h5r r = {0};
	h5r_hrow *rows = NULL;
	hid_t d = H5I_INVALID_HID, space = H5I_INVALID_HID, mtype = H5I_INVALID_HID;
	hssize_t count;
	int err = h5r_open(&r, path);

	*hosts = NULL;
	*n = 0;
	if (err == 0)
		err = read_meta(&r, NULL, NULL);
	/* Layout 1, or a trace of one host: no table. */
	if (err < 0 || H5Lexists(r.tables, "hosts", H5P_DEFAULT) <= 0)
		goto close;
	err = -EIO;
	d = H5Dopen2(r.tables, "hosts", H5P_DEFAULT);
	space = d >= 0 ? H5Dget_space(d) : H5I_INVALID_HID;
	count = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
	mtype = h5r_hosts_type(r.vlen_str);
	if (count < 0 || mtype < 0)
		goto close;
	err = 0;
	if (count == 0)
		goto close;
	rows = calloc((size_t)count, sizeof(*rows));
	*hosts = calloc((size_t)count, sizeof(**hosts));
	if (rows == NULL || *hosts == NULL) {
		err = -ENOMEM;
		goto close;
	}
	if (H5Dread(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows) < 0) {
		err = -EIO;
		goto close;
	}
	for (hssize_t i = 0; i < count; i++) {
		const h5r_hrow *row = &rows[i];

		(*hosts)[i] = (sink_host){
			.name = host_str(arena, row->name, false, &err),
			.role = host_str(arena, row->role, false, &err),
			.state = host_str(arena, row->state, false, &err),
			.clock = host_str(arena, row->clock, false, &err),
			.processes = row->processes,
			.offset_ns = row->offset_ns,
			.ref_ns = row->ref_ns,
			.drift = row->drift_ppm * 1e-6,
			.err_ns = row->err_ns,
			.samples = row->samples,
			.lost_ns = row->lost_ns,
			.why = host_str(arena, row->why, true, &err),
			.where = host_str(arena, row->where, true, &err),
			.launcher = row->launcher,
			.launched_as = host_str(arena, row->launched_as, true, &err),
		};
	}
	H5Dvlen_reclaim(mtype, space, H5P_DEFAULT, rows);
	if (err == 0)
		*n = (size_t)count;
close:
	if (err < 0 || *n == 0) {
		free(*hosts);
		*hosts = NULL;
	}
	free(rows);
	if (mtype >= 0)
		H5Tclose(mtype);
	if (space >= 0)
		H5Sclose(space);
	if (d >= 0)
		H5Dclose(d);
	h5r_close(&r);
	return err;
}

int h5r_read(const char *path, trace_sink *sink, model_trace *meta)
{
	h5r r = {.sink = sink};
	hid_t events;
	int err = h5r_open(&r, path);

	if (err == 0)
		err = read_meta(&r, meta, NULL);
	if (err == 0)
		err = read_strings(&r);
	if (err == 0)
		err = alloc_block(&r);
	if (err == 0) {
		events = H5Gopen2(r.tables, "events", H5P_DEFAULT);
		if (events < 0) {
			err = -EIO;
		} else {
			/* In the order the writer created them (the process
			 * tree's for a live run), not by name. */
			if (H5Literate(events, H5_INDEX_CRT_ORDER, H5_ITER_INC, NULL, read_group,
				       &r) < 0)
				err = r.err != 0 ? r.err : -EIO;
			H5Gclose(events);
		}
	}
	free_block(&r);
	free_strings(&r);
	h5r_close(&r);
	return err;
}
