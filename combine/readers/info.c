/*
 * info.c - what a trace file holds (merge.h, `forktrace info`): one
 * streaming pass with a sink that counts instead of writing. Memory grows
 * with the number of processes and threads only.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "merge.h"
#include "jsonr.h"
#include "reader.h"
#include "vec.h"

typedef struct info_sink {
	trace_sink base;
	info_report *rep;
	size_t cap;
	size_t last; /* index of the last process looked up */
	char *tmp;   /* unescaped strings */
	size_t tmp_cap;
	char *pad; /* args of an event made from a model, padded for jsonr */
	size_t pad_cap;
	/* What the reader counts of a file, counted here for a model. */
	uint64_t events;
	int64_t min_ts, max_ts;
	int err;
} info_sink;

static info_process *proc_of(info_sink *s, int64_t pid)
{
	info_report *rep = s->rep;
	info_process *p;

	if (s->last < rep->nprocs && rep->procs[s->last].pid == pid)
		return &rep->procs[s->last];
	/* Kept sorted by pid: binary search, insert in place. */
	size_t lo = 0, hi = rep->nprocs;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (rep->procs[mid].pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < rep->nprocs && rep->procs[lo].pid == pid) {
		s->last = lo;
		return &rep->procs[lo];
	}
	if (vec_grow(&rep->procs, &s->cap, rep->nprocs + 1, sizeof(*rep->procs), 16) < 0)
		return NULL;
	memmove(&rep->procs[lo + 1], &rep->procs[lo], (rep->nprocs - lo) * sizeof(*rep->procs));
	rep->nprocs++;
	p = &rep->procs[lo];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->host_pid = pid;
	p->parent = -1;
	p->rank = -1;
	s->last = lo;
	return p;
}

/* The string value of key in the object text obj, copied (NULL if absent). */
static char *str_dup(info_sink *s, strview obj, const char *key)
{
	strview v = jsonr_find_key(obj, key);
	char *out;
	size_t n;

	if (v.p == NULL || v.n < 2 || v.p[0] != '"')
		return NULL;
	out = malloc(v.n);
	if (out == NULL) {
		s->err = -ENOMEM;
		return NULL;
	}
	n = jsonr_unescape(out, v);
	out[n] = '\0';
	return out;
}

static size_t thread_of(info_sink *s, info_process *p, int64_t tid)
{
	size_t i;

	for (i = 0; i < p->nthreads; i++)
		if (p->tids[i] == tid)
			return i;
	int64_t *nt = realloc(p->tids, (i + 1) * sizeof(*nt));

	if (nt == NULL)
		goto oom;
	p->tids = nt;
	char **nn = realloc(p->thread_names, (i + 1) * sizeof(*nn));

	if (nn == NULL)
		goto oom;
	p->thread_names = nn;
	p->tids[i] = tid;
	p->thread_names[i] = NULL;
	p->nthreads++;
	return i;
oom:
	s->err = -ENOMEM;
	return SIZE_MAX;
}

static bool sv_eq(strview s, const char *lit)
{
	size_t n = strlen(lit);

	return s.p != NULL && s.n == n && !memcmp(s.p, lit, n);
}

/* forktrace_process args: the exit status as words. */
static char *exit_text(info_sink *s, strview args)
{
	strview ex = jsonr_find_key(args, "exit");
	char *kind = str_dup(s, ex, "kind"), *name, *out = NULL;
	int64_t v = 0;

	if (kind == NULL)
		return NULL;
	if (!strcmp(kind, "code") && jsonr_parse_int(jsonr_find_key(ex, "code"), &v)) {
		if (asprintf(&out, "exit %lld", (long long)v) < 0)
			out = NULL;
	} else if (!strcmp(kind, "host_lost")) {
		/* end_ns: when its host's part stopped coming. */
		if (!jsonr_parse_int(jsonr_find_key(args, "end_ns"), &v) || v < 0)
			out = strdup("host lost");
		else if (asprintf(&out, "host lost at %.3f ms", (double)v / 1e6) < 0)
			out = NULL;
	} else if (!strcmp(kind, "signal") && jsonr_parse_int(jsonr_find_key(ex, "signal"), &v)) {
		name = str_dup(s, ex, "name");
		if (asprintf(&out, "killed by signal %lld%s%s%s", (long long)v, name ? " (" : "",
			     name ? name : "", name ? ")" : "") < 0)
			out = NULL;
		free(name);
	} else {
		out = strdup(kind);
	}
	free(kind);
	return out;
}

/* args of an event made from a model lie in no padded buffer (jsonr.h):
 * a padded copy of them, or {NULL, 0} when out of memory. */
static strview padded(info_sink *s, strview args)
{
	if (s->pad_cap < args.n + JSONR_PAD) {
		char *np = realloc(s->pad, args.n + JSONR_PAD);

		if (np == NULL)
			return (strview){NULL, 0};
		s->pad = np;
		s->pad_cap = args.n + JSONR_PAD;
	}
	memcpy(s->pad, args.p, args.n);
	memset(s->pad + args.n, 0, JSONR_PAD);
	return (strview){s->pad, args.n};
}

static int info_event(trace_sink *base, const sink_event *e)
{
	info_sink *s = (info_sink *)base;
	info_report *rep = s->rep;
	const jsonw_event *ev = &e->ev;
	strview args;
	info_process *p;
	int64_t v;

	s->events++;
	if (ev->ts_ns != JSONW_NO_TIME && ev->ph != 'M') {
		int64_t end = ev->ts_ns +
			      (ev->dur_ns != JSONW_NO_TIME && ev->dur_ns > 0 ? ev->dur_ns : 0);

		if (ev->ts_ns < s->min_ts)
			s->min_ts = ev->ts_ns;
		if (end > s->max_ts)
			s->max_ts = end;
	}
	rep->by_phase[(unsigned char)ev->ph & 127]++;
	p = proc_of(s, ev->pid);
	if (p == NULL)
		return -ENOMEM;
	p->events++;
	if (ev->ph != 'M' || ev->args.p == NULL) {
		if (ev->ph != 'M' && thread_of(s, p, ev->tid) == SIZE_MAX)
			return -ENOMEM;
		return s->err;
	}
	args = e->raw.p != NULL ? ev->args : padded(s, ev->args);
	if (args.p == NULL)
		return -ENOMEM;
	if (sv_eq(ev->name, "process_name")) {
		free(p->name);
		p->name = str_dup(s, args, "name");
	} else if (sv_eq(ev->name, "thread_name")) {
		size_t i = thread_of(s, p, ev->tid);

		if (i != SIZE_MAX) {
			free(p->thread_names[i]);
			p->thread_names[i] = str_dup(s, args, "name");
		}
	} else if (sv_eq(ev->name, "forktrace_process")) {
		p->has_record = true;
		if (jsonr_parse_int(jsonr_find_key(args, "pid"), &v))
			p->host_pid = v;
		if (jsonr_parse_int(jsonr_find_key(args, "parent"), &v))
			p->parent = v;
		if (jsonr_parse_int(jsonr_find_key(args, "lost_events"), &v) && v > 0) {
			p->lost_events = (uint64_t)v;
			rep->lost_in_processes = model_count_add(rep->lost_in_processes,
								 (uint64_t)v);
		}
		free(p->exit);
		p->exit = exit_text(s, args);
		if (p->name == NULL)
			p->name = str_dup(s, args, "name");
		free(p->host);
		p->host = str_dup(s, args, "host");
		if (jsonr_parse_int(jsonr_find_key(args, "rank"), &v) && v >= 0)
			p->rank = v;
	} else if (sv_eq(ev->name, "forktrace_origin")) {
		strview pid = jsonr_find_key(args, "pid");
		char *in = str_dup(s, args, "input");

		free(p->origin);
		if (asprintf(&p->origin, "pid %.*s in %s", (int)pid.n, pid.p ? pid.p : "?",
			     in ? in : "?") < 0)
			p->origin = NULL;
		free(in);
	}
	return s->err;
}

/* A copy of a string (NULL in, NULL out); *err gets -ENOMEM. */
static char *dup_or_null(const char *v, int *err)
{
	char *d;

	if (v == NULL)
		return NULL;
	d = strdup(v);
	if (d == NULL)
		*err = -ENOMEM;
	return d;
}

/* Adds a host to rep; returns it (zeroed) or NULL on ENOMEM. */
static info_host *add_host(info_report *rep)
{
	info_host *h = realloc(rep->hosts, (rep->nhosts + 1) * sizeof(*h));

	if (h == NULL)
		return NULL;
	rep->hosts = h;
	h = &rep->hosts[rep->nhosts++];
	memset(h, 0, sizeof(*h));
	h->err_ns = -1;
	h->lost_ns = -1;
	return h;
}

static int64_t obj_i64(const json_t *o, const char *key, int64_t dflt)
{
	const json_t *v = json_object_get(o, key);

	return json_is_integer(v) ? json_integer_value(v) : dflt;
}

/* reader_opts.run_meta: the hosts otherData.forktrace lists. */
static void info_run_meta(void *ctx, strview forktrace)
{
	info_sink *s = ctx;
	json_t *o = json_loadb(forktrace.p, forktrace.n, JSON_ALLOW_NUL, NULL);
	const json_t *hosts = json_object_get(o, "hosts"), *ho;
	size_t i;
	int err = 0;

	json_array_foreach(hosts, i, ho)
	{
		info_host *h;

		if (!json_is_object(ho))
			continue;
		h = add_host(s->rep);
		if (h == NULL) {
			err = -ENOMEM;
			break;
		}
		h->name = dup_or_null(json_string_value(json_object_get(ho, "name")), &err);
		h->role = dup_or_null(json_string_value(json_object_get(ho, "role")), &err);
		h->state = dup_or_null(json_string_value(json_object_get(ho, "state")), &err);
		h->clock = dup_or_null(json_string_value(json_object_get(ho, "clock")), &err);
		h->why = dup_or_null(json_string_value(json_object_get(ho, "why")), &err);
		h->where = dup_or_null(json_string_value(json_object_get(ho, "where")), &err);
		h->processes = (uint64_t)obj_i64(ho, "processes", 0);
		h->samples = (uint64_t)obj_i64(ho, "samples", 0);
		h->offset_ns = obj_i64(ho, "offset_ns", 0);
		h->err_ns = obj_i64(ho, "err_ns", -1);
		h->lost_ns = obj_i64(ho, "lost_ns", -1);
		h->drift_ppm = json_number_value(json_object_get(ho, "drift_ppm"));
		h->anchor = json_is_true(json_object_get(ho, "anchor"));
	}
	if (err < 0)
		s->err = err;
	json_decref(o);
}

/* The info sink's end for a model: the hosts the merge found. */
static int info_model_end(trace_sink *base, const sink_meta *meta)
{
	info_sink *s = (info_sink *)base;
	int err = 0;

	for (size_t i = 0; i < meta->nhosts && err == 0; i++) {
		const sink_host *mh = &meta->hosts[i];
		info_host *h = add_host(s->rep);

		if (h == NULL)
			return -ENOMEM;
		h->name = dup_or_null(mh->name, &err);
		h->role = dup_or_null(mh->role, &err);
		h->state = dup_or_null(mh->state, &err);
		h->clock = dup_or_null(mh->clock, &err);
		h->why = dup_or_null(mh->why, &err);
		h->where = dup_or_null(mh->where, &err);
		h->processes = mh->processes;
		h->samples = mh->samples;
		h->offset_ns = mh->offset_ns;
		h->err_ns = mh->err_ns;
		h->lost_ns = mh->lost_ns;
		h->drift_ppm = mh->drift * 1e6;
		h->anchor = mh->anchor;
	}
	return err;
}

int info_read(const char *path, bool in_dir, info_report *rep)
{
	info_sink s = {.base = {.event = info_event}, .rep = rep};
	reader_opts ro = {.regular_only = in_dir, .run_meta = info_run_meta, .run_meta_ctx = &s};
	reader_info inf;
	int err;

	memset(rep, 0, sizeof(*rep));
	rep->path = strdup(path);
	if (rep->path == NULL)
		return -ENOMEM;
	err = reader_read(path, &ro, &s.base, &inf);
	free(s.tmp);
	free(s.pad);
	if (err == 0 && s.err < 0)
		err = s.err;
	if (err < 0)
		return err;
	rep->events = inf.events;
	rep->bytes = inf.bytes;
	rep->file_bytes = inf.file_bytes;
	rep->gzip = inf.gzip;
	rep->hdf5 = inf.hdf5;
	rep->array_form = inf.array_form;
	rep->min_ts = inf.min_ts;
	rep->max_ts = inf.max_ts;
	memcpy(rep->origin, inf.origin, sizeof(rep->origin));
	if (rep->origin[0] == '\0')
		snprintf(rep->origin, sizeof(rep->origin), "other");
	rep->viztracer_overflow = inf.viztracer_overflow;
	rep->lost_events = inf.lost_events;
	rep->skipped_keys = inf.skipped_keys;
	memcpy(rep->skipped, inf.skipped, sizeof(rep->skipped));
	rep->utf8_fixed = inf.utf8_fixed;
	rep->dup_fixed = inf.dup_fixed;
	rep->truncated = inf.truncated;
	if (inf.error[0] != '\0') {
		rep->error = strdup(inf.error);
		if (rep->error == NULL)
			return -ENOMEM;
	}
	return 0;
}

static int info_nop_begin(trace_sink *s, const sink_meta *meta)
{
	(void)s;
	(void)meta;
	return 0;
}

/*
 * info_read of the file events_write would write of m: the model goes
 * through the merge as the only input, into this sink and, to count the
 * file's bytes, into the JSON sink writing to /dev/null.
 */
int info_read_model(const model_trace *m, const char *name, info_report *rep)
{
	info_sink s = {
		.base = {.begin = info_nop_begin, .event = info_event, .end = info_model_end},
		.rep = rep,
		.min_ts = INT64_MAX,
		.max_ts = INT64_MIN,
	};
	merge_source src = {.model = m, .name = name};
	merge_opts o = {.model_as_trace = true};
	merge_result res;
	events_stats js = {0};
	reader_info inf;
	trace_sink *json, *tee = NULL;
	int fd, err;

	memset(rep, 0, sizeof(*rep));
	rep->path = strdup(name);
	if (rep->path == NULL)
		return -ENOMEM;
	fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	json = sink_json_new(fd, -1, &err);
	if (json != NULL)
		tee = sink_tee_new(&s.base, json, &err);
	if (tee != NULL) {
		err = merge_inputs(&src, 1, &o, tee, &res);
		if (err == 0)
			err = sink_tee_result(tee, 0, NULL);
		if (err == 0)
			err = sink_tee_result(tee, 1, &js);
		merge_result_free(&res);
		tee->free(tee);
	}
	close(fd);
	free(s.tmp);
	free(s.pad);
	if (err < 0)
		return err;
	reader_info_of_model(m, &inf);
	rep->events = s.events;
	rep->bytes = js.bytes;
	rep->file_bytes = js.bytes;
	rep->min_ts = s.min_ts;
	rep->max_ts = s.max_ts;
	memcpy(rep->origin, inf.origin, sizeof(rep->origin));
	rep->lost_events = inf.lost_events;
	return 0;
}

void info_free(info_report *rep)
{
	if (rep == NULL)
		return;
	for (size_t i = 0; i < rep->nprocs; i++) {
		info_process *p = &rep->procs[i];

		free(p->name);
		free(p->exit);
		free(p->origin);
		free(p->host);
		for (size_t j = 0; j < p->nthreads; j++)
			free(p->thread_names[j]);
		free(p->thread_names);
		free(p->tids);
	}
	free(rep->procs);
	for (size_t i = 0; i < rep->nhosts; i++) {
		info_host *h = &rep->hosts[i];

		free(h->name);
		free(h->role);
		free(h->state);
		free(h->clock);
		free(h->why);
		free(h->where);
	}
	free(rep->hosts);
	free(rep->error);
	free(rep->path);
	memset(rep, 0, sizeof(*rep));
}
