/*
 * jsonw - the JSON writer (jsonw_) that events.c writes trace events with
 * and that the sinks write their output with, and JSON string escaping for
 * code outside combine/ that builds small JSON texts itself (the
 * collector's mark args, model_mark.args_json), so that forktrace has one
 * definition of how a JSON string is written: the same as the trace
 * writer's (ostream_json_str).
 */
#ifndef FT_COMBINE_JSONW_H
#define FT_COMBINE_JSONW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ostream.h"
#include "strview.h"

/*
 * Writes the n bytes at s as a complete JSON string literal, quotes
 * included, into out (cap bytes; not NUL-terminated). The bytes need not
 * be valid UTF-8: malformed bytes become \ufffd, so the result is always
 * valid JSON and UTF-8. When the literal does not fit, its content is cut
 * before the first character (or escape) that does not fit and the
 * closing quote is still written. Returns the bytes written: at least 2,
 * or 0 (nothing written) when cap < 2. Borrows out and s for the call.
 */
size_t jsonw_escape(char *out, size_t cap, const char *s, size_t n);

/* A time field that is not written (metadata events have no ts). */
#define JSONW_NO_TIME INT64_MIN

/* How deep jsonw_obj_begin/jsonw_arr_begin may nest. */
#define JSONW_MAX_DEPTH 64

/*
 * A JSON writer on an ostream: tracks nesting so that commas come out
 * right, and counts the trace events written. Errors go to the ostream
 * (sticky, see ostream.h); nesting deeper than JSONW_MAX_DEPTH or closing
 * more than was opened records -EOVERFLOW / -EINVAL there.
 */
typedef struct jsonw {
	ostream *os;     /* borrowed */
	uint64_t events; /* trace events begun with jsonw_event_begin */
	unsigned depth;
	/* The next value needs no comma: it is the first of its array or
	 * object, follows a key or jsonw_newline, or is at the top level. */
	bool no_comma;
} jsonw;

/* Starts writing on os (borrowed for the writer's life). */
void jsonw_init(jsonw *w, ostream *os);

/* Values. Each writes the comma it needs when inside an array or after
 * jsonw_key. Strings are escaped with ostream_json_str (always valid
 * UTF-8 out); jsonw_str with p == NULL and jsonw_cstr(NULL) write null. */
void jsonw_obj_begin(jsonw *w);
void jsonw_obj_end(jsonw *w);
void jsonw_arr_begin(jsonw *w);
void jsonw_arr_end(jsonw *w);
void jsonw_key(jsonw *w, const char *key);
void jsonw_str(jsonw *w, strview s);
void jsonw_cstr(jsonw *w, const char *s);
static inline void jsonw_i64(jsonw *w, int64_t v);
void jsonw_u64(jsonw *w, uint64_t v);
void jsonw_bool(jsonw *w, bool v);
void jsonw_null(jsonw *w);
/* A time in ns written as microseconds with three decimals. */
void jsonw_ts(jsonw *w, int64_t ns);
/* A value given as JSON text, copied verbatim (the caller vouches that it
 * is one complete, valid JSON value). */
void jsonw_raw(jsonw *w, strview json);
/* A NULL-terminated string array as a JSON array; NULL writes null. */
void jsonw_strv(jsonw *w, const char *const *v);
/* A string with ostream_json_str_script: safe inside an HTML <script>
 * element. p == NULL writes null. */
void jsonw_script_str(jsonw *w, strview s);
/* A double with six significant digits (printf's %.6g), or null when it
 * is not finite (JSON has no NaN or infinity). */
void jsonw_f64(jsonw *w, double v);
/* Starts the next value on a new line: writes the comma it needs, then a
 * newline. Keeps long arrays readable at one byte per line. */
void jsonw_newline(jsonw *w);

/* Writes the comma a new value needs: none after a key, none for the
 * first element of an array or object, none at the top level, one
 * otherwise. Every value writer starts with it. */
static inline void jsonw_sep(jsonw *w)
{
	if (w->no_comma)
		w->no_comma = w->depth == 0;
	else
		ostream_putc(w->os, ',');
}

/* Inline: the report writes its page data as millions of small numbers. */
static inline void jsonw_i64(jsonw *w, int64_t v)
{
	jsonw_sep(w);
	ostream_i64(w->os, v);
}

/* Key + value shorthands for the common fields. */
void jsonw_kv_i64(jsonw *w, const char *key, int64_t v);
void jsonw_kv_u64(jsonw *w, const char *key, uint64_t v);
void jsonw_kv_cstr(jsonw *w, const char *key, const char *s);
void jsonw_kv_bool(jsonw *w, const char *key, bool v);

/*
 * One Chrome trace event. Which fields are written:
 *   ph        always ('X', 'i', 'M', 's', 'f', 'B', 'E', 'C', ...)
 *   name      always (p == NULL writes "")
 *   cat       when cat.p != NULL
 *   pid, tid  always
 *   ts, dur   when not JSONW_NO_TIME (ns in, microseconds out)
 *   s         when scope != 0 (instants: 't', 'p', 'g')
 *   id        when has_id (flows, async events)
 *   bp        "e" when bind_enclosing (flow ends)
 *   args      when args.p != NULL: JSON object text, copied verbatim
 */
typedef struct jsonw_event {
	char ph;
	char scope;
	bool has_id;
	bool bind_enclosing;
	strview name;
	strview cat;
	int64_t pid;
	int64_t tid;
	int64_t ts_ns;
	int64_t dur_ns;
	uint64_t id;
	strview args;
} jsonw_event;

/*
 * The event-writing core. jsonw_event_begin writes the separator and every
 * field of ev as one open JSON object, and counts the event; more fields
 * can follow with jsonw_key + a value (e.g. "args" built with
 * jsonw_obj_begin ... jsonw_obj_end, or unknown keys of a passthrough
 * event as jsonw_raw); jsonw_event_end closes it. Call inside an array
 * (traceEvents). ev is borrowed for the call.
 */
void jsonw_event_begin(jsonw *w, const jsonw_event *ev);
void jsonw_event_end(jsonw *w);

/* jsonw_event_begin + jsonw_event_end: one event, args (if any) raw. */
void jsonw_event_write(jsonw *w, const jsonw_event *ev);

#endif /* FT_COMBINE_JSONW_H */
