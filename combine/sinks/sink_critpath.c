/*
 * sink_critpath.c - the sink in front of every output of the merge (and of
 * events_write) that computes the critical path (critpath.h) from the
 * events on their way: each forktrace_process (trace pid, host pid,
 * parent, start_ns, end_ns, name and interpreter, host) and each wait mark (the waiter's
 * trace pid, the child's host pid, ts), as the output gets them: pids
 * remapped, times on the trace's clock. At end, the path goes to the
 * output in sink_meta.critical_path. A live run, a combine and info of a
 * file thus compute it from the same events by one code path.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "critpath.h"
#include "jsonr.h"
#include "sink.h"

typedef struct cp_sink {
	trace_sink base;
	trace_sink *out; /* borrowed */
	critpath *cp;
	int64_t shift_ns;
	char *pad; /* an event's args, padded for the scanner */
	size_t pad_cap;
	char *name, *interp, *host; /* a process's, unescaped */
	size_t name_cap, interp_cap, host_cap;
	char *shown; /* "name (interpreter)", as process_name has it */
	size_t shown_cap;
} cp_sink;

static bool sv_is(strview v, const char *s)
{
	size_t n = strlen(s);

	return v.n == n && memcmp(v.p, s, n) == 0;
}

/* args copied with JSONR_PAD zero bytes after it; false on ENOMEM. */
static bool pad_args(cp_sink *t, strview args)
{
	if (t->pad_cap < args.n + JSONR_PAD) {
		char *np = realloc(t->pad, args.n + JSONR_PAD);

		if (np == NULL)
			return false;
		t->pad = np;
		t->pad_cap = args.n + JSONR_PAD;
	}
	memcpy(t->pad, args.p, args.n);
	memset(t->pad + args.n, 0, JSONR_PAD);
	return true;
}

/* The integer member key of the padded args (n bytes), else dflt. */
static int64_t arg_int(const cp_sink *t, size_t n, const char *key, int64_t dflt)
{
	int64_t v;

	if (!jsonr_parse_int(jsonr_find_key((strview){t->pad, n}, key), &v))
		return dflt;
	return v;
}

/* The string member key of the padded args (n bytes), unescaped into
 * *buf (grown as needed), NULL when it is not a string. */
static const char *arg_str(const cp_sink *t, size_t n, const char *key, char **buf, size_t *cap)
{
	strview v = jsonr_find_key((strview){t->pad, n}, key);
	size_t len;

	if (v.p == NULL || v.n < 2 || v.p[0] != '"')
		return NULL;
	if (*cap < v.n + 1) {
		char *nb = realloc(*buf, v.n + 1);

		if (nb == NULL)
			return NULL;
		*buf = nb;
		*cap = v.n + 1;
	}
	len = jsonr_unescape(*buf, v);
	(*buf)[len] = '\0';
	return *buf;
}

/* The name process_name shows: the script and its interpreter beside it
 * ("configure (sh)"), else the name alone. NULL on ENOMEM. */
static const char *shown_name(cp_sink *t, const char *name, const char *interp)
{
	size_t n;

	if (name == NULL || interp == NULL)
		return name;
	n = strlen(name) + strlen(interp) + 4;
	if (t->shown_cap < n) {
		char *nb = realloc(t->shown, n);

		if (nb == NULL)
			return NULL;
		t->shown = nb;
		t->shown_cap = n;
	}
	snprintf(t->shown, n, "%s (%s)", name, interp);
	return t->shown;
}

/* A time of the args on the trace's clock (-1 stays unknown). */
static int64_t shifted(const cp_sink *t, int64_t ns)
{
	return ns >= 0 ? ns + t->shift_ns : ns;
}

/* Notes what the critical path needs of e. Returns 0 or -ENOMEM. */
static inline int note(cp_sink *t, const jsonw_event *ev)
{
	/* The phase first: it rules out the slices, most of the events. */
	if ((ev->ph != 'M' && ev->ph != 'i') || ev->args.n < 2 || ev->args.p[0] != '{')
		return 0;
	if (ev->ph == 'M' && sv_is(ev->name, "forktrace_process")) {
		size_t n = ev->args.n;
		critpath_proc p;

		if (!pad_args(t, ev->args))
			return -ENOMEM;
		p = (critpath_proc){
			.pid = ev->pid,
			.host_pid = arg_int(t, n, "pid", ev->pid),
			.parent = arg_int(t, n, "parent", -1),
			.start_ns = shifted(t, arg_int(t, n, "start_ns", -1)),
			.end_ns = shifted(t, arg_int(t, n, "end_ns", -1)),
			.name = shown_name(
				t, arg_str(t, n, "name", &t->name, &t->name_cap),
				arg_str(t, n, "interpreter", &t->interp, &t->interp_cap)),
			.host = arg_str(t, n, "host", &t->host, &t->host_cap),
		};
		return critpath_add(t->cp, &p);
	}
	if (ev->ph == 'i' && sv_is(ev->name, "wait") && sv_is(ev->cat, "wait") &&
	    ev->ts_ns != JSONW_NO_TIME) {
		if (!pad_args(t, ev->args))
			return -ENOMEM;
		return critpath_add_wait(t->cp, ev->pid, arg_int(t, ev->args.n, "child", -1),
					 ev->ts_ns);
	}
	return 0;
}

static int cps_begin(trace_sink *s, const sink_meta *meta)
{
	cp_sink *t = (cp_sink *)s;

	return t->out->begin(t->out, meta);
}

static int cps_event(trace_sink *s, const sink_event *e)
{
	cp_sink *t = (cp_sink *)s;
	int err = note(t, &e->ev);

	if (err < 0)
		return err;
	return t->out->event(t->out, e);
}

static int cps_end(trace_sink *s, const sink_meta *meta)
{
	cp_sink *t = (cp_sink *)s;
	sink_meta m = *meta;
	int err;

	/* Nothing to walk (no process with its times) is no error: the
	 * trace has no critical path. */
	err = critpath_compute(t->cp);
	if (err == -ENOMEM)
		return err;
	m.critical_path = err == 0 ? t->cp : NULL;
	/* What the producer counted (events_emit) is the output's. */
	t->out->stats.threads = s->stats.threads;
	t->out->stats.corrupt_chunks = s->stats.corrupt_chunks;
	err = t->out->end(t->out, &m);
	s->stats = t->out->stats;
	return err;
}

static void cps_free(trace_sink *s)
{
	cp_sink *t = (cp_sink *)s;

	if (t == NULL)
		return;
	critpath_free(t->cp);
	free(t->pad);
	free(t->name);
	free(t->interp);
	free(t->host);
	free(t->shown);
	free(t);
}

trace_sink *sink_critpath_new(trace_sink *out, int *err)
{
	cp_sink *t = calloc(1, sizeof(*t));

	if (t == NULL || (t->cp = critpath_new()) == NULL) {
		free(t);
		*err = -ENOMEM;
		return NULL;
	}
	t->out = out;
	t->base.begin = cps_begin;
	t->base.event = cps_event;
	t->base.end = cps_end;
	t->base.free = cps_free;
	return &t->base;
}

void sink_critpath_shift(trace_sink *s, int64_t shift_ns)
{
	((cp_sink *)s)->shift_ns = shift_ns;
}
