/*
 * sink_json.c - the Chrome Trace Event JSON writer (object form), plain or
 * gzip, as a sink: every event is written as it arrives; otherData, which
 * holds counts known only at the end, is written after traceEvents.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "critpath.h"
#include "sink.h"

typedef struct json_sink {
	trace_sink base;
	ostream os;
	jsonw w;
} json_sink;

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

	/* One event a line: diffable, and greppable by pid. */
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
