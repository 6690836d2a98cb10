/*
 * The JSON writer and the trace-event core (jsonw.h).
 */
#include <errno.h>
#include <stdio.h>

#include "jsonw.h"

void jsonw_init(jsonw *w, ostream *os)
{
	memset(w, 0, sizeof(*w));
	w->os = os;
	w->no_comma = true;
}

/* Enters a nesting level whose first element (has_first: none written yet)
 * needs no comma. */
static void push(jsonw *w, bool has_first)
{
	if (w->depth >= JSONW_MAX_DEPTH) {
		ostream_fail(w->os, -EOVERFLOW);
		return;
	}
	w->depth++;
	w->no_comma = has_first;
}

static void pop(jsonw *w, char close)
{
	if (w->depth == 0) {
		ostream_fail(w->os, -EINVAL);
		return;
	}
	w->depth--;
	/* The array or object just closed is a value of its parent. */
	w->no_comma = w->depth == 0;
	ostream_putc(w->os, close);
}

void jsonw_obj_begin(jsonw *w)
{
	jsonw_sep(w);
	ostream_putc(w->os, '{');
	push(w, true);
}

void jsonw_obj_end(jsonw *w)
{
	pop(w, '}');
}

void jsonw_arr_begin(jsonw *w)
{
	jsonw_sep(w);
	ostream_putc(w->os, '[');
	push(w, true);
}

void jsonw_arr_end(jsonw *w)
{
	pop(w, ']');
}

void jsonw_key(jsonw *w, const char *key)
{
	jsonw_sep(w);
	ostream_json_cstr(w->os, key);
	ostream_putc(w->os, ':');
	w->no_comma = true;
}

void jsonw_str(jsonw *w, strview s)
{
	jsonw_sep(w);
	if (s.p == NULL)
		ostream_write(w->os, "null", 4);
	else
		ostream_json_str(w->os, s.p, s.n);
}

void jsonw_cstr(jsonw *w, const char *s)
{
	jsonw_sep(w);
	ostream_json_cstr(w->os, s);
}

void jsonw_u64(jsonw *w, uint64_t v)
{
	jsonw_sep(w);
	ostream_u64(w->os, v);
}

void jsonw_bool(jsonw *w, bool v)
{
	jsonw_sep(w);
	if (v)
		ostream_write(w->os, "true", 4);
	else
		ostream_write(w->os, "false", 5);
}

void jsonw_null(jsonw *w)
{
	jsonw_sep(w);
	ostream_write(w->os, "null", 4);
}

void jsonw_ts(jsonw *w, int64_t ns)
{
	jsonw_sep(w);
	ostream_ts(w->os, ns);
}

void jsonw_raw(jsonw *w, strview json)
{
	jsonw_sep(w);
	if (json.p == NULL || json.n == 0)
		ostream_write(w->os, "null", 4);
	else
		ostream_write(w->os, json.p, json.n);
}

void jsonw_strv(jsonw *w, const char *const *v)
{
	if (v == NULL) {
		jsonw_null(w);
		return;
	}
	jsonw_arr_begin(w);
	for (; *v != NULL; v++)
		jsonw_cstr(w, *v);
	jsonw_arr_end(w);
}

void jsonw_script_str(jsonw *w, strview s)
{
	jsonw_sep(w);
	if (s.p == NULL)
		ostream_write(w->os, "null", 4);
	else
		ostream_json_str_script(w->os, s.p, s.n);
}

void jsonw_f64(jsonw *w, double v)
{
	char buf[40];
	int n;

	if (v != v || v - v != 0) {
		jsonw_null(w);
		return;
	}
	jsonw_sep(w);
	n = snprintf(buf, sizeof(buf), "%.6g", v);
	ostream_write(w->os, buf, (size_t)n);
}

void jsonw_newline(jsonw *w)
{
	jsonw_sep(w);
	ostream_putc(w->os, '\n');
	w->no_comma = true;
}

void jsonw_kv_i64(jsonw *w, const char *key, int64_t v)
{
	jsonw_key(w, key);
	jsonw_i64(w, v);
}

void jsonw_kv_u64(jsonw *w, const char *key, uint64_t v)
{
	jsonw_key(w, key);
	jsonw_u64(w, v);
}

void jsonw_kv_cstr(jsonw *w, const char *key, const char *s)
{
	jsonw_key(w, key);
	jsonw_cstr(w, s);
}

void jsonw_kv_bool(jsonw *w, const char *key, bool v)
{
	jsonw_key(w, key);
	jsonw_bool(w, v);
}

/*
 * The hot path: a few fixed keys written as literals, numbers formatted in
 * place, no per-field bookkeeping. One event per line keeps the output
 * greppable and diffable at a cost of one byte.
 */
void jsonw_event_begin(jsonw *w, const jsonw_event *ev)
{
	ostream *o = w->os;
	char ph[9] = {'\n', '{', '"', 'p', 'h', '"', ':', '"', ev->ph};

	jsonw_sep(w);
	ostream_write(o, ph, sizeof(ph));
	ostream_write(o, "\",\"name\":", 9);
	if (ev->name.p != NULL)
		ostream_json_str(o, ev->name.p, ev->name.n);
	else
		ostream_write(o, "\"\"", 2);
	if (ev->cat.p != NULL) {
		ostream_write(o, ",\"cat\":", 7);
		ostream_json_str(o, ev->cat.p, ev->cat.n);
	}
	ostream_write(o, ",\"pid\":", 7);
	ostream_i64(o, ev->pid);
	ostream_write(o, ",\"tid\":", 7);
	ostream_i64(o, ev->tid);
	if (ev->ts_ns != JSONW_NO_TIME) {
		ostream_write(o, ",\"ts\":", 6);
		ostream_ts(o, ev->ts_ns);
	}
	if (ev->dur_ns != JSONW_NO_TIME) {
		ostream_write(o, ",\"dur\":", 7);
		ostream_ts(o, ev->dur_ns);
	}
	if (ev->scope != 0) {
		char s[8] = {',', '"', 's', '"', ':', '"', ev->scope, '"'};

		ostream_write(o, s, sizeof(s));
	}
	if (ev->has_id) {
		ostream_write(o, ",\"id\":", 6);
		ostream_u64(o, ev->id);
	}
	if (ev->bind_enclosing)
		ostream_write(o, ",\"bp\":\"e\"", 9);
	if (ev->args.p != NULL && ev->args.n > 0) {
		ostream_write(o, ",\"args\":", 8);
		ostream_write(o, ev->args.p, ev->args.n);
	}
	/* The object is open and already has fields: the next key needs a
	 * comma. */
	push(w, false);
	w->events++;
}

void jsonw_event_end(jsonw *w)
{
	pop(w, '}');
}

void jsonw_event_write(jsonw *w, const jsonw_event *ev)
{
	jsonw_event_begin(w, ev);
	jsonw_event_end(w);
}

size_t jsonw_escape(char *out, size_t cap, const char *s, size_t n)
{
	size_t len = 0, i = 0;

	if (cap < 2)
		return 0;
	cap--; /* the closing quote always fits */
	out[len++] = '"';
	while (i < n) {
		unsigned char c = (unsigned char)s[i];
		const char *piece = s + i;
		size_t plen = 1, adv = 1;
		char e[6];

		if (c >= 0x80) {
			adv = ostream_utf8_len(s + i, n - i);
			plen = adv;
			if (adv == 0) {
				piece = "\\ufffd";
				plen = 6;
				adv = 1;
			}
		} else if (ostream_json_needs_escape(c)) {
			plen = ostream_json_escape_ascii(e, c);
			piece = e;
		}
		if (plen > cap - len)
			break;
		memcpy(out + len, piece, plen);
		len += plen;
		i += adv;
	}
	out[len++] = '"';
	return len;
}
