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
#include "critpath.h"
#include "jsonr.h"
#include "reader.h"
#include "htab.h"
#include "vec.h"

typedef struct info_sink {
	trace_sink base;
	info_report *rep;
	size_t cap;
	size_t last; /* index of the last process looked up */
	htab pids;   /* pid -> index + 1 in rep->procs */
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
	uint64_t i;

	if (s->last < rep->nprocs && rep->procs[s->last].pid == pid)
		return &rep->procs[s->last];
	/* In the order first seen, found by a table (pid -> index + 1);
	 * sorted by pid once at the end (sort_procs). */
	i = htab_get(&s->pids, (uint64_t)pid);
	if (i != 0) {
		s->last = (size_t)(i - 1);
		return &rep->procs[s->last];
	}
	if (vec_grow(&rep->procs, &s->cap, rep->nprocs + 1, sizeof(*rep->procs), 16) < 0 ||
	    htab_set(&s->pids, (uint64_t)pid, rep->nprocs + 1) < 0)
		return NULL;
	p = &rep->procs[rep->nprocs];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->host_pid = pid;
	p->parent = -1;
	p->rank = -1;
	p->start_ns = -1;
	p->end_ns = -1;
	p->user_ns = -1;
	p->sys_ns = -1;
	p->maxrss_kb = -1;
	s->last = rep->nprocs++;
	return p;
}

static int cmp_pid(const void *a, const void *b)
{
	const info_process *x = a, *y = b;

	return (x->pid > y->pid) - (x->pid < y->pid);
}

/* The string value of key in the object text obj, copied (NULL if absent). */
static char *str_val(info_sink *s, strview v)
{
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

static char *str_dup(info_sink *s, strview obj, const char *key)
{
	return str_val(s, jsonr_find_key(obj, key));
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

/* forktrace_process args: the exit status (ex, its "exit") as words;
 * end_ns: its "end_ns". */
static char *exit_text(info_sink *s, strview ex, strview end_ns)
{
	char *kind = str_dup(s, ex, "kind"), *name, *out = NULL;
	int64_t v = 0;

	if (kind == NULL)
		return NULL;
	if (!strcmp(kind, "code") && jsonr_parse_int(jsonr_find_key(ex, "code"), &v)) {
		if (asprintf(&out, "exit %lld", (long long)v) < 0)
			out = NULL;
	} else if (!strcmp(kind, "host_lost")) {
		/* end_ns: when its host's part stopped coming. */
		if (!jsonr_parse_int(end_ns, &v) || v < 0)
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

/* forktrace_process args' "exit" (ex): how the process ended, as a kind
 * and a value. */
static void exit_kind(info_sink *s, info_process *p, strview ex)
{
	static const struct {
		const char *kind;
		enum info_exit e;
		const char *value;
	} kinds[] = {
		{"code", INFO_EXIT_CODE, "code"},         {"signal", INFO_EXIT_SIGNAL, "signal"},
		{"unknown", INFO_EXIT_UNKNOWN, NULL},     {"running", INFO_EXIT_RUNNING, NULL},
		{"host_lost", INFO_EXIT_HOST_LOST, NULL},
	};
	char *kind = str_dup(s, ex, "kind");

	p->exit_kind = INFO_EXIT_NONE;
	p->exit_value = 0;
	for (size_t i = 0; kind != NULL && i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		if (strcmp(kind, kinds[i].kind) != 0)
			continue;
		/* A code or a signal without its number says nothing. */
		if (kinds[i].value == NULL ||
		    jsonr_parse_int(jsonr_find_key(ex, kinds[i].value), &p->exit_value))
			p->exit_kind = kinds[i].e;
		break;
	}
	free(kind);
	p->exit_signame[0] = '\0';
	if (p->exit_kind == INFO_EXIT_SIGNAL) {
		char *name = str_dup(s, ex, "name");

		if (name != NULL)
			snprintf(p->exit_signame, sizeof(p->exit_signame), "%s", name);
		free(name);
	}
}

/* forktrace_process args "rusage" (docs/INSIGHT.md): its source, CPU
 * times and peak RSS; what is absent or negative stays unknown. */
static void rusage_of(info_process *p, strview ru)
{
	strview src;
	int64_t v;

	if (ru.p == NULL || ru.n < 2 || ru.p[0] != '{')
		return;
	src = jsonr_find_key(ru, "source");
	if (src.p != NULL && src.n >= 2 && src.p[0] == '"' && src.n - 2 < sizeof(p->ru_source)) {
		memcpy(p->ru_source, src.p + 1, src.n - 2);
		p->ru_source[src.n - 2] = '\0';
	} else {
		snprintf(p->ru_source, sizeof(p->ru_source), "?");
	}
	if (jsonr_parse_int(jsonr_find_key(ru, "user_ns"), &v) && v >= 0)
		p->user_ns = v;
	if (jsonr_parse_int(jsonr_find_key(ru, "sys_ns"), &v) && v >= 0)
		p->sys_ns = v;
	if (jsonr_parse_int(jsonr_find_key(ru, "maxrss_kb"), &v) && v >= 0)
		p->maxrss_kb = v;
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

/* The keys of forktrace_process args info reads, found in one pass. */
enum rec_key {
	REC_PID,
	REC_PARENT,
	REC_LOST,
	REC_EXIT,
	REC_NAME,
	REC_INTERP,
	REC_LAUNCHER,
	REC_HOST,
	REC_RANK,
	REC_START,
	REC_END,
	REC_RUSAGE,
	REC_NKEYS
};

static const char *const rec_keys[REC_NKEYS] = {
	[REC_PID] = "pid",           [REC_PARENT] = "parent", [REC_LOST] = "lost_events",
	[REC_EXIT] = "exit",         [REC_NAME] = "name",     [REC_INTERP] = "interpreter",
	[REC_LAUNCHER] = "launcher", [REC_HOST] = "host",     [REC_RANK] = "rank",
	[REC_START] = "start_ns",    [REC_END] = "end_ns",    [REC_RUSAGE] = "rusage",
};

/* A forktrace_process record (docs/TRACE_FORMAT.md) into p. */
static void process_record(info_sink *s, info_process *p, strview args)
{
	strview v[REC_NKEYS];
	int64_t n;

	jsonr_find_keys(args, rec_keys, REC_NKEYS, v);
	p->has_record = true;
	if (jsonr_parse_int(v[REC_PID], &n))
		p->host_pid = n;
	if (jsonr_parse_int(v[REC_PARENT], &n))
		p->parent = n;
	if (jsonr_parse_int(v[REC_LOST], &n) && n > 0) {
		p->lost_events = (uint64_t)n;
		s->rep->lost_in_processes = model_count_add(s->rep->lost_in_processes, (uint64_t)n);
	}
	free(p->exit);
	p->exit = exit_text(s, v[REC_EXIT], v[REC_END]);
	exit_kind(s, p, v[REC_EXIT]);
	free(p->prog);
	p->prog = str_val(s, v[REC_NAME]);
	if (p->name == NULL && p->prog != NULL && (p->name = strdup(p->prog)) == NULL)
		s->err = -ENOMEM;
	free(p->interp);
	p->interp = str_val(s, v[REC_INTERP]);
	free(p->launcher);
	p->launcher = str_val(s, v[REC_LAUNCHER]);
	free(p->host);
	p->host = str_val(s, v[REC_HOST]);
	if (jsonr_parse_int(v[REC_RANK], &n) && n >= 0)
		p->rank = n;
	if (jsonr_parse_int(v[REC_START], &n) && n >= 0)
		p->start_ns = n;
	if (jsonr_parse_int(v[REC_END], &n) && n >= 0)
		p->end_ns = n;
	rusage_of(p, v[REC_RUSAGE]);
}

static int info_event(trace_sink *base, const sink_event *e)
{
	info_sink *s = (info_sink *)base;
	info_report *rep = s->rep;
	const jsonw_event *ev = &e->ev;
	strview args;
	info_process *p;

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
		process_record(s, p, args);
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

/* A NULL-terminated copy of argv (NULL in, NULL out); *err gets -ENOMEM. */
static char **strv_dup(const char *const *argv, int *err)
{
	size_t n = 0;
	char **out;

	if (argv == NULL)
		return NULL;
	while (argv[n] != NULL)
		n++;
	out = calloc(n + 1, sizeof(*out));
	if (out == NULL) {
		*err = -ENOMEM;
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		out[i] = dup_or_null(argv[i], err);
	return out;
}

/* The critical path of meta, copied: its steps outlive the merge. */
static int keep_path(info_report *rep, const struct critpath *cp)
{
	const critpath_step *steps;
	size_t n = critpath_steps(cp, &steps);
	int err = 0;

	if (n == 0)
		return 0;
	rep->steps = calloc(n, sizeof(*rep->steps));
	if (rep->steps == NULL)
		return -ENOMEM;
	rep->nsteps = n;
	for (size_t i = 0; i < n; i++) {
		rep->steps[i].pid = steps[i].pid;
		rep->steps[i].name = dup_or_null(steps[i].name, &err);
		rep->steps[i].start_ns = steps[i].start_ns;
		rep->steps[i].end_ns = steps[i].end_ns;
	}
	rep->has_path = true;
	rep->path_start_ns = critpath_start_ns(cp);
	rep->path_end_ns = critpath_end_ns(cp);
	return err;
}

/*
 * The info sink's end: what the merge knows once every event went past -
 * the hosts, the traced command and its exit status (the input's, or the
 * model's when it is written as its own trace) and the critical path.
 */
static int info_end(trace_sink *base, const sink_meta *meta)
{
	info_sink *s = (info_sink *)base;
	info_report *rep = s->rep;
	const model_trace *m = meta->model;
	int err = 0;

	for (size_t i = 0; i < meta->nhosts && err == 0; i++) {
		const sink_host *mh = &meta->hosts[i];
		info_host *h = add_host(rep);

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
	if (meta->inputs != NULL && meta->input_runs != NULL) {
		const sink_input_run *run = &meta->input_runs[0];

		rep->command = strv_dup(run->command, &err);
		rep->has_exit_status = run->has_exit_status;
		rep->exit_status = run->exit_status;
	} else if (m != NULL) {
		rep->command = strv_dup(m->command, &err);
		rep->has_exit_status = m->origin != NULL && !strcmp(m->origin, "forktrace run");
		rep->exit_status = m->exit_status;
	}
	if (err == 0 && meta->critical_path != NULL)
		err = keep_path(rep, meta->critical_path);
	return err;
}

static int info_begin(trace_sink *s, const sink_meta *meta)
{
	(void)s;
	(void)meta;
	return 0;
}

/*
 * Streams one input (a file or a model) through the merge into the info
 * sink, as `forktrace combine` would read it, so that what info says (the
 * critical path above all) is what a combine of that input writes. A
 * model goes to the JSON sink writing to /dev/null too, to count the
 * bytes of the file events_write would write of it.
 */
static int info_merge(const merge_source *src, info_report *rep)
{
	info_sink s = {
		.base = {.begin = info_begin, .event = info_event, .end = info_end},
		.rep = rep,
		.min_ts = INT64_MAX,
		.max_ts = INT64_MIN,
	};
	merge_opts o = {.model_as_trace = src->model != NULL};
	merge_result res = {0};
	events_stats js = {0};
	reader_info inf;
	trace_sink *json = NULL, *tee = NULL, *out = &s.base;
	int fd = -1, err = 0;

	memset(rep, 0, sizeof(*rep));
	rep->lost_events = -1;
	rep->path = strdup(src->model != NULL ? src->name : src->path);
	if (rep->path == NULL)
		return -ENOMEM;
	if (src->model != NULL) {
		fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		json = sink_json_new(fd, -1, &err);
		if (json != NULL)
			tee = sink_tee_new(&s.base, json, &err);
		if (tee == NULL) {
			close(fd);
			return err;
		}
		out = tee;
	}
	err = merge_inputs(src, 1, &o, out, &res);
	if (err == 0 && tee != NULL)
		err = sink_tee_result(tee, 0, NULL);
	if (err == 0 && tee != NULL)
		err = sink_tee_result(tee, 1, &js);
	if (tee != NULL)
		tee->free(tee);
	if (fd >= 0)
		close(fd);
	free(s.tmp);
	free(s.pad);
	htab_free(&s.pids);
	if (rep->nprocs > 1)
		qsort(rep->procs, rep->nprocs, sizeof(*rep->procs), cmp_pid);
	if (err == 0 && s.err < 0)
		err = s.err;
	if (err == 0 && res.ninputs > 0) {
		const merge_input *in = &res.inputs[0];

		rep->events = s.events;
		rep->bytes = in->bytes;
		rep->file_bytes = in->file_bytes;
		rep->gzip = in->gzip;
		rep->hdf5 = in->hdf5;
		rep->array_form = in->array_form;
		memcpy(rep->origin, in->origin, sizeof(rep->origin));
		rep->viztracer_overflow = in->viztracer_overflow;
		rep->lost_events = in->lost_events;
		rep->skipped_keys = in->skipped_keys;
		memcpy(rep->skipped, in->skipped, sizeof(rep->skipped));
		rep->utf8_fixed = in->utf8_fixed;
		rep->dup_fixed = in->dup_fixed;
		rep->truncated = in->truncated;
		if (in->error != NULL && (rep->error = strdup(in->error)) == NULL)
			err = -ENOMEM;
	}
	if (err == 0 && src->model != NULL) {
		reader_info_of_model(src->model, &inf);
		rep->bytes = js.bytes;
		rep->file_bytes = js.bytes;
		memcpy(rep->origin, inf.origin, sizeof(rep->origin));
		rep->lost_events = inf.lost_events;
	}
	rep->min_ts = s.min_ts;
	rep->max_ts = s.max_ts;
	if (rep->origin[0] == '\0')
		snprintf(rep->origin, sizeof(rep->origin), "other");
	merge_result_free(&res);
	return err;
}

int info_read(const char *path, bool in_dir, info_report *rep)
{
	merge_source src = {.path = path, .name = path, .in_dir = in_dir};

	return info_merge(&src, rep);
}

int info_read_model(const model_trace *m, const char *name, info_report *rep)
{
	merge_source src = {.model = m, .name = name};

	return info_merge(&src, rep);
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
		free(p->prog);
		free(p->interp);
		free(p->launcher);
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
	for (char **a = rep->command; a != NULL && *a != NULL; a++)
		free(*a);
	free(rep->command);
	for (size_t i = 0; i < rep->nsteps; i++)
		free(rep->steps[i].name);
	free(rep->steps);
	free(rep->error);
	free(rep->path);
	memset(rep, 0, sizeof(*rep));
}
