/*
 * sink_json.c - the Chrome Trace Event JSON writer (object form), plain or
 * gzip, as a sink: every event is written as it arrives; otherData, which
 * holds counts known only at the end, is written after traceEvents.
 *
 * Most events of a trace with function tracing are slices without args
 * (ph 'X': function calls and regions): for them only the two times
 * differ from one to the next of the same name and thread, so the text up
 * to "ts": is made once per (name, cat, pid, tid) and registered with the
 * stream as a prefix, and the event goes into the stream as the prefix's
 * id and its two times (ostream_x): the formatting happens on the
 * stream's worker threads, into the very bytes jsonw_event_write writes.
 * Only events made from the model are deferred: a file's event (raw) is
 * copied as its text. A slice that names its template (sink_event.tmpl:
 * a run's function calls) finds its prefix by that number alone; others
 * by their bytes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "critpath.h"
#include "sink.h"

/* The slices' prefixes by content: direct-mapped, a slot per hash. */
#define XCACHE_SLOTS 1024u
/* Prefix text kept in the stream before it is all forgotten (the cache
 * is emptied with it): what bounds the memory of ever new names. */
#define XCACHE_TEXT_MAX (1024u * 1024u)

/* The slices' prefixes by template: direct-mapped, a slot per tmpl. */
#define TCACHE_BITS 10
#define TCACHE_SLOTS (1u << TCACHE_BITS)

/* A prefix by template (sink_event.tmpl): valid when the cache's epoch. */
typedef struct tslot {
	uint64_t tmpl;
	uint32_t prefix;
	uint32_t epoch;
} tslot;

/* A prefix by what makes its text: name and cat bytes (copied: a region's
 * name points into bytes that are reused), whether cat is there, pid, tid. */
typedef struct xslot {
	uint64_t hash;
	char *key; /* owned: name bytes then cat bytes */
	size_t key_cap;
	size_t name_n, cat_n;
	int64_t pid, tid;
	uint32_t prefix;
	uint32_t epoch; /* valid when the cache's epoch */
	bool has_cat;
} xslot;

typedef struct json_sink {
	trace_sink base;
	ostream os;
	jsonw w;
	xslot *xcache;  /* XCACHE_SLOTS, made on first use */
	uint32_t epoch; /* 0: nothing cached yet */
	ostream text;   /* a prefix being made */
	tslot tcache[TCACHE_SLOTS];
} json_sink;

/* Mixes 64 bits (murmur3's finalizer). */
static inline uint64_t mix64(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

static uint64_t xhash(const jsonw_event *ev)
{
	uint64_t h = (uint64_t)ev->pid * 0x9e3779b97f4a7c15ull;
	const char *p = ev->name.p;
	size_t n = p != NULL ? ev->name.n : 0;

	h ^= mix64((uint64_t)ev->tid + n);
	while (n >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		h = (h ^ v) * 0x100000001b3ull;
		h ^= h >> 29;
		p += 8;
		n -= 8;
	}
	if (n > 0) {
		uint64_t v = 0;

		memcpy(&v, p, n);
		h = (h ^ v) * 0x100000001b3ull;
	}
	if (ev->cat.p != NULL) {
		uint64_t v = 0;

		memcpy(&v, ev->cat.p, ev->cat.n < 8 ? ev->cat.n : 8);
		h ^= mix64(v + ev->cat.n + 1);
	}
	return mix64(h);
}

static bool xslot_match(const xslot *x, uint64_t hash, const jsonw_event *ev)
{
	size_t name_n = ev->name.p != NULL ? ev->name.n : 0;

	if (x->hash != hash || x->pid != ev->pid || x->tid != ev->tid || x->name_n != name_n ||
	    x->has_cat != (ev->cat.p != NULL))
		return false;
	if (name_n > 0 && memcmp(x->key, ev->name.p, name_n) != 0)
		return false;
	if (!x->has_cat)
		return true;
	return x->cat_n == ev->cat.n &&
	       (ev->cat.n == 0 || memcmp(x->key + name_n, ev->cat.p, ev->cat.n) == 0);
}

/*
 * Registers the prefix of slices like ev: what json_event writes for it
 * up to and with `"ts":`, after a comma (never the first event). Returns
 * the prefix id, or OSTREAM_NO_PREFIX (the event is then written as text).
 */
static uint32_t xprefix_make(json_sink *js, const jsonw_event *ev)
{
	jsonw_event pe = *ev;
	jsonw w;

	pe.ts_ns = JSONW_NO_TIME;
	pe.dur_ns = JSONW_NO_TIME;
	/* Inside traceEvents, after an element. */
	ostream_mem_reset(&js->text);
	jsonw_init(&w, &js->text);
	w.depth = 1;
	w.no_comma = false;
	ostream_putc(&js->text, '\n');
	jsonw_event_write(&w, &pe);
	if (ostream_error(&js->text) != 0 || js->text.len < 2)
		return OSTREAM_NO_PREFIX;
	/* Drop the closing brace, add the time's key. */
	js->text.len--;
	ostream_write(&js->text, ",\"ts\":", 6);
	if (ostream_error(&js->text) != 0)
		return OSTREAM_NO_PREFIX;
	return ostream_prefix(&js->os, js->text.buf, js->text.len);
}

/* The prefix id of slices like ev, from the cache or made now. */
static uint32_t xprefix(json_sink *js, const jsonw_event *ev)
{
	uint64_t hash = xhash(ev);
	xslot *x;
	size_t name_n = ev->name.p != NULL ? ev->name.n : 0;
	size_t cat_n = ev->cat.p != NULL ? ev->cat.n : 0;

	if (js->xcache == NULL) {
		if (ostream_open_mem(&js->text) < 0)
			return OSTREAM_NO_PREFIX;
		js->xcache = calloc(XCACHE_SLOTS, sizeof(*js->xcache));
		if (js->xcache == NULL) {
			ostream_finish(&js->text);
			return OSTREAM_NO_PREFIX;
		}
		js->epoch = 1;
	}
	x = &js->xcache[hash & (XCACHE_SLOTS - 1)];
	if (x->epoch == js->epoch && xslot_match(x, hash, ev))
		return x->prefix;
	if (ostream_prefix_bytes(&js->os) > XCACHE_TEXT_MAX) {
		/* Forget every prefix: slots of older epochs are stale. */
		ostream_prefix_reset(&js->os);
		js->epoch++;
	}
	if (x->key_cap < name_n + cat_n) {
		char *k = realloc(x->key, name_n + cat_n);

		if (k == NULL)
			return OSTREAM_NO_PREFIX;
		x->key = k;
		x->key_cap = name_n + cat_n;
	}
	x->epoch = 0;
	x->prefix = xprefix_make(js, ev);
	if (x->prefix == OSTREAM_NO_PREFIX)
		return OSTREAM_NO_PREFIX;
	if (name_n > 0)
		memcpy(x->key, ev->name.p, name_n);
	if (cat_n > 0)
		memcpy(x->key + name_n, ev->cat.p, cat_n);
	x->hash = hash;
	x->name_n = name_n;
	x->cat_n = cat_n;
	x->has_cat = ev->cat.p != NULL;
	x->pid = ev->pid;
	x->tid = ev->tid;
	x->epoch = js->epoch;
	return x->prefix;
}

/* The slot of template tmpl. */
static inline tslot *tslot_of(json_sink *js, uint64_t tmpl)
{
	return &js->tcache[(tmpl * 0x9e3779b97f4a7c15ull) >> (64 - TCACHE_BITS)];
}

/*
 * The prefix id of slices of template tmpl (not 0), like ev, which is
 * deferrable: made by content (once for every tmpl of the same text) and
 * kept under tmpl, so that the next slice of it needs only a compare of
 * the number (json_event), where the content's key hashes and compares the
 * name's bytes. Forgotten with the content cache's epoch.
 */
static uint32_t xprefix_tmpl(json_sink *js, uint64_t tmpl, const jsonw_event *ev)
{
	tslot *t = tslot_of(js, tmpl);
	uint32_t id;

	id = xprefix(js, ev);
	if (id != OSTREAM_NO_PREFIX) {
		t->tmpl = tmpl;
		t->prefix = id;
		t->epoch = js->epoch;
	}
	return id;
}

/* A slice made from the model (a file's event is copied as its text) that
 * the stream can format later: 'X' with both times and nothing else, after
 * the first event (which has no comma before it). */
static inline bool x_deferrable(const json_sink *js, const sink_event *e)
{
	const jsonw_event *ev = &e->ev;

	return e->raw.p == NULL && ev->ph == 'X' && (ev->args.p == NULL || ev->args.n == 0) &&
	       !ev->has_id && ev->scope == 0 && !ev->bind_enclosing && ev->ts_ns != JSONW_NO_TIME &&
	       ev->dur_ns != JSONW_NO_TIME && !js->w.no_comma;
}

static int json_begin(trace_sink *s, const sink_meta *meta)
{
	json_sink *js = (json_sink *)s;

	jsonw_obj_begin(&js->w);
	/* A combine's inputs may say another; it is written at the end then. */
	if (meta->extra == NULL)
		jsonw_kv_cstr(&js->w, "displayTimeUnit", "ms");
	jsonw_key(&js->w, "traceEvents");
	jsonw_arr_begin(&js->w);
	return ostream_error(&js->os);
}

static int json_event(trace_sink *s, const sink_event *e)
{
	json_sink *js = (json_sink *)s;

	/* A slice of a template whose first slice was deferred: it is
	 * deferrable too (sink.h: the same fields but for its times), once
	 * it has both times. */
	if (e->tmpl != 0) {
		const tslot *t = tslot_of(js, e->tmpl);

		if (t->tmpl == e->tmpl && t->epoch == js->epoch && e->ev.ts_ns != JSONW_NO_TIME &&
		    e->ev.dur_ns != JSONW_NO_TIME) {
			ostream_x(&js->os, t->prefix, e->ev.ts_ns, e->ev.dur_ns);
			js->w.events++;
			return ostream_error(&js->os);
		}
	}
	/* One event a line: diffable, and greppable by pid. */
	if (x_deferrable(js, e)) {
		uint32_t id = e->tmpl != 0 ? xprefix_tmpl(js, e->tmpl, &e->ev)
					   : xprefix(js, &e->ev);

		if (id != OSTREAM_NO_PREFIX) {
			ostream_x(&js->os, id, e->ev.ts_ns, e->ev.dur_ns);
			js->w.events++;
			return ostream_error(&js->os);
		}
	}
	ostream_putc(&js->os, '\n');
	if (e->raw.p != NULL) {
		js->w.events++;
		jsonw_raw(&js->w, e->raw);
	} else {
		jsonw_event_write(&js->w, &e->ev);
	}
	return ostream_error(&js->os);
}

/* What an input of a combine says about its run: only the keys it has. */
static void write_input_run(jsonw *w, const sink_input_run *run)
{
	if (run->host != NULL)
		jsonw_kv_cstr(w, "host", run->host);
	if (run->command != NULL) {
		jsonw_key(w, "command");
		jsonw_strv(w, run->command);
	}
	if (run->has_exit_status)
		jsonw_kv_i64(w, "exit_status", run->exit_status);
}

/* otherData.forktrace.hosts (docs/TRACE_FORMAT.md, "Multi-host runs"). */
static void write_hosts(jsonw *w, const sink_meta *meta)
{
	jsonw_key(w, "hosts");
	jsonw_arr_begin(w);
	for (size_t i = 0; i < meta->nhosts; i++) {
		const sink_host *h = &meta->hosts[i];

		jsonw_obj_begin(w);
		jsonw_kv_cstr(w, "name", h->name);
		jsonw_kv_cstr(w, "role", h->role);
		jsonw_kv_cstr(w, "state", h->state);
		jsonw_kv_u64(w, "processes", h->processes);
		jsonw_kv_cstr(w, "clock", h->clock);
		/* What a part not aligned (no head) could be placed by. */
		if (h->clock && !strcmp(h->clock, "not aligned"))
			jsonw_kv_bool(w, "anchor", h->anchor);
		jsonw_kv_i64(w, "offset_ns", h->offset_ns);
		jsonw_kv_i64(w, "ref_ns", h->ref_ns);
		jsonw_key(w, "drift_ppm");
		jsonw_f64(w, h->drift * 1e6);
		jsonw_kv_i64(w, "err_ns", h->err_ns);
		jsonw_kv_u64(w, "samples", h->samples);
		if (h->lost_ns >= 0)
			jsonw_kv_i64(w, "lost_ns", h->lost_ns);
		if (h->why != NULL)
			jsonw_kv_cstr(w, "why", h->why);
		if (h->where != NULL)
			jsonw_kv_cstr(w, "where", h->where);
		jsonw_kv_i64(w, "launcher", h->launcher);
		if (h->launched_as != NULL)
			jsonw_kv_cstr(w, "launched_as", h->launched_as);
		jsonw_obj_end(w);
	}
	jsonw_arr_end(w);
}

/* otherData.forktrace.critical_path (docs/TRACE_FORMAT.md, "Critical
 * path"): its span and its steps in time order. */
static void write_critical_path(jsonw *w, const critpath *cp)
{
	const critpath_step *st;
	size_t n = critpath_steps(cp, &st);

	jsonw_key(w, "critical_path");
	jsonw_obj_begin(w);
	jsonw_kv_i64(w, "start_ns", critpath_start_ns(cp));
	jsonw_kv_i64(w, "end_ns", critpath_end_ns(cp));
	jsonw_key(w, "steps");
	jsonw_arr_begin(w);
	for (size_t i = 0; i < n; i++) {
		jsonw_obj_begin(w);
		jsonw_kv_i64(w, "pid", st[i].pid);
		jsonw_kv_cstr(w, "name", st[i].name);
		jsonw_kv_i64(w, "start_ns", st[i].start_ns);
		jsonw_kv_i64(w, "end_ns", st[i].end_ns);
		jsonw_obj_end(w);
	}
	jsonw_arr_end(w);
	jsonw_obj_end(w);
}

static void write_other_data(jsonw *w, const sink_meta *meta)
{
	const model_trace *t = meta->model;

	jsonw_key(w, "otherData");
	jsonw_obj_begin(w);
	jsonw_key(w, "forktrace");
	jsonw_obj_begin(w);
	jsonw_kv_cstr(w, "version", FT_VERSION_STRING);
	jsonw_kv_cstr(w, "origin", t->origin);
	jsonw_kv_cstr(w, "host", t->host);
	jsonw_key(w, "command");
	jsonw_strv(w, t->command);
	jsonw_key(w, "anchor");
	jsonw_obj_begin(w);
	jsonw_kv_i64(w, "monotonic_ns", t->anchor_mono_ns);
	jsonw_kv_i64(w, "realtime_ns", t->anchor_real_ns);
	jsonw_obj_end(w);
	jsonw_kv_i64(w, "start_ns", t->start_ns);
	jsonw_kv_i64(w, "end_ns", t->end_ns);
	jsonw_kv_i64(w, "exit_status", t->exit_status);
	jsonw_kv_u64(w, "processes", meta->processes);
	jsonw_kv_u64(w, "lost_events", t->lost_events);
	if (meta->nhosts > 0)
		write_hosts(w, meta);
	if (meta->critical_path != NULL)
		write_critical_path(w, meta->critical_path);
	if (meta->inputs != NULL) {
		jsonw_key(w, "inputs");
		jsonw_arr_begin(w);
		for (size_t i = 0; meta->inputs[i] != NULL; i++) {
			jsonw_obj_begin(w);
			jsonw_kv_cstr(w, "path", meta->inputs[i]);
			if (meta->input_runs != NULL)
				write_input_run(w, &meta->input_runs[i]);
			if (meta->align_methods != NULL) {
				jsonw_kv_cstr(w, "align", meta->align_methods[i]);
				jsonw_kv_i64(w, "shift_ns", meta->align_shift_ns[i]);
			}
			if (meta->extra != NULL)
				meta->extra->write(meta->extra->ctx, w, SINK_EXTRA_INPUT, i);
			jsonw_obj_end(w);
		}
		jsonw_arr_end(w);
	}
	jsonw_obj_end(w);
	if (meta->extra != NULL)
		meta->extra->write(meta->extra->ctx, w, SINK_EXTRA_OTHER_DATA, 0);
	jsonw_obj_end(w);
}

static int json_end(trace_sink *s, const sink_meta *meta)
{
	json_sink *js = (json_sink *)s;
	int err;

	ostream_putc(&js->os, '\n');
	jsonw_arr_end(&js->w);
	if (meta->extra != NULL)
		meta->extra->write(meta->extra->ctx, &js->w, SINK_EXTRA_TOP, 0);
	write_other_data(&js->w, meta);
	jsonw_obj_end(&js->w);
	ostream_putc(&js->os, '\n');
	err = ostream_finish(&js->os);
	js->base.stats.events = js->w.events;
	js->base.stats.bytes = ostream_bytes(&js->os);
	return err;
}

static void json_free(trace_sink *s)
{
	json_sink *js = (json_sink *)s;

	if (js == NULL)
		return;
	ostream_finish(&js->os); /* no-op after json_end */
	if (js->xcache != NULL) {
		for (size_t i = 0; i < XCACHE_SLOTS; i++)
			free(js->xcache[i].key);
		free(js->xcache);
		ostream_finish(&js->text);
	}
	free(js);
}

trace_sink *sink_json_new(int fd, int gzip_level, int *err)
{
	json_sink *js = calloc(1, sizeof(*js));

	if (js == NULL) {
		*err = -ENOMEM;
		return NULL;
	}
	*err = ostream_open(&js->os, fd, gzip_level);
	if (*err < 0) {
		free(js);
		return NULL;
	}
	jsonw_init(&js->w, &js->os);
	js->base.begin = json_begin;
	js->base.event = json_event;
	js->base.end = json_end;
	js->base.free = json_free;
	return &js->base;
}
