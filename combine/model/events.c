/*
 * events (events.h, sink.h): a trace model turned into the Chrome trace
 * events docs/TRACE_FORMAT.md describes, sent one by one to a sink. Only
 * one event's args text is ever built in memory.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "forktrace/wire.h"
#include "events.h"
#include "h5.h"
#include "records.h"
#include "sink.h"

#ifndef FT_VERSION_STRING
#error "FT_VERSION_STRING must be defined by the build (combine/CMakeLists.txt)"
#endif

/* process_labels holds the command line shortened to this many characters. */
#define LABEL_CHARS 200
#define LABEL_ELLIPSIS "..."
/* Bytes of a label: at most 4 per character, plus the ellipsis. */
#define LABEL_BYTES (4 * LABEL_CHARS + 4)

static const char *const spawn_names[] = {
	[FT_SPAWN_FORK] = "fork",
	[FT_SPAWN_VFORK] = "vfork",
	[FT_SPAWN_POSIX_SPAWN] = "posix_spawn",
	[FT_SPAWN_POSIX_SPAWNP] = "posix_spawnp",
	[FT_SPAWN_SYSTEM] = "system",
	[FT_SPAWN_POPEN] = "popen",
};

typedef struct events_ctx {
	const model_trace *t;
	trace_sink *sink;
	const events_emit_opts *o; /* never NULL */
	ostream aos;               /* args text of the event being built */
	jsonw w;                   /* writes into aos */
	jsonw_event meta;          /* the metadata event meta_begin started */
	rec_ctx *rec;              /* in-process event records */
	uint64_t threads;
	int err; /* first error of the sink or of aos */
} events_ctx;

/* A time of the model on the trace's clock (events_emit_opts.clock). */
static int64_t trace_ns(const events_ctx *c, int64_t ns)
{
	return c->o->clock != NULL ? model_clock_apply(c->o->clock, ns) : ns;
}

/* Sends one event to the sink; after an error, nothing more. Its times
 * go onto the trace's clock here, where every event passes: both ends of
 * a slice, so that a drift stretches it as it stretched the clock. */
static void emit(events_ctx *c, const jsonw_event *ev)
{
	sink_event se = {.ev = *ev};
	int err;

	if (c->err != 0)
		return;
	if (c->o->clock != NULL && ev->ts_ns != JSONW_NO_TIME) {
		se.ev.ts_ns = model_clock_apply(c->o->clock, ev->ts_ns);
		if (ev->dur_ns != JSONW_NO_TIME && ev->dur_ns > 0)
			se.ev.dur_ns = model_clock_apply(c->o->clock, ev->ts_ns + ev->dur_ns) -
				       se.ev.ts_ns;
	}
	err = c->sink->event(c->sink, &se);
	if (err < 0)
		c->err = err;
}

/* Starts the args object of the next event: built with c->w. */
static void args_begin(events_ctx *c)
{
	ostream_mem_reset(&c->aos);
	jsonw_init(&c->w, &c->aos);
	jsonw_obj_begin(&c->w);
}

/* Ends it: the args text, valid until the next args_begin. */
static strview args_end(events_ctx *c)
{
	jsonw_obj_end(&c->w);
	if (ostream_error(&c->aos) != 0 && c->err == 0)
		c->err = ostream_error(&c->aos);
	return (strview){c->aos.buf, c->aos.len};
}

enum trace_format events_format_for_path(const char *path)
{
	size_t n;

	if (path == NULL)
		return TRACE_FORMAT_JSON;
	n = strlen(path);
	/* ".json.gz" ends in ".gz" too. */
	if (n >= 3 && strcasecmp(path + n - 3, ".gz") == 0)
		return TRACE_FORMAT_JSON_GZ;
	if ((n >= 3 && strcasecmp(path + n - 3, ".h5") == 0) ||
	    (n >= 5 && strcasecmp(path + n - 5, ".hdf5") == 0))
		return TRACE_FORMAT_H5;
	return TRACE_FORMAT_JSON;
}

/* The name of a spawn kind as the trace spells it, NULL if unknown. */
static const char *spawn_name(int kind)
{
	if (kind < 0 || (size_t)kind >= sizeof(spawn_names) / sizeof(spawn_names[0]))
		return NULL;
	return spawn_names[kind];
}

/* "SIGKILL" for 9; real-time and unknown signals get a made-up but
 * unambiguous name. buf has at least 32 bytes. */
static const char *signal_name(int sig, char *buf, size_t size)
{
	const char *abbr = sigabbrev_np(sig);

	if (abbr != NULL)
		snprintf(buf, size, "SIG%s", abbr);
	else if (sig >= SIGRTMIN && sig <= SIGRTMAX)
		snprintf(buf, size, "SIGRTMIN+%d", sig - SIGRTMIN);
	else
		snprintf(buf, size, "SIG%d", sig);
	return buf;
}

/* Room for a name as people read it: "dh_installman (perl)". */
#define DISPLAY_NAME_BYTES 512

/* The name of an image as the trace shows it (process_name, image
 * slices): the script and, beside it, its interpreter ("configure (sh)"),
 * else the program's name (model_image_name). In buf (DISPLAY_NAME_BYTES)
 * or borrowed from s; a script whose name does not fit in buf is shown
 * alone. */
static const char *display_name(const model_segment *s, char *buf)
{
	model_name n = model_image_name(s);
	int len;

	if (n.interp == NULL)
		return n.name;
	len = snprintf(buf, DISPLAY_NAME_BYTES, "%s (%s)", n.name, n.interp);
	return len > 0 && len < DISPLAY_NAME_BYTES ? buf : n.name;
}

static const model_segment *last_segment(const model_process *p)
{
	return p->nsegs > 0 ? &p->segs[p->nsegs - 1] : NULL;
}

/* The parent if it belongs to this trace, else NULL: a dangling or foreign
 * pointer must not send the writer into another model. */
static const model_process *parent_of(const model_trace *t, const model_process *p)
{
	const model_process *q = p->parent;

	if (q == NULL || q == p || q->index >= t->nprocs || t->procs[q->index] != q)
		return NULL;
	return q;
}

/* Trace tid of a thread: the main thread (tid == host pid, or unknown)
 * takes the process's trace pid, so that it stays distinct when the pid
 * was reused. */
static int64_t out_tid(const model_process *p, int64_t tid)
{
	if (tid <= 0 || tid == p->pid)
		return p->out_pid;
	return tid;
}

/* A label being built: bytes, characters so far, and where to cut if it
 * turns out too long. */
typedef struct label {
	char *buf;
	size_t len;
	size_t chars;
	size_t cut;
	bool truncated;
} label;

/* Appends one byte; false once the label is full. A character starts at
 * every byte that is not a UTF-8 continuation byte. */
static bool label_put(label *l, unsigned char c)
{
	if ((c & 0xc0) != 0x80) {
		if (l->chars == LABEL_CHARS - 3)
			l->cut = l->len;
		if (l->chars == LABEL_CHARS) {
			l->truncated = true;
			return false;
		}
		l->chars++;
	}
	if (l->len == LABEL_BYTES - 4) {
		/* Only garbage (runs of continuation bytes) gets here: cut
		 * at the last character start that leaves room. */
		l->cut = l->len - 3;
		while (l->cut > 0 && ((unsigned char)l->buf[l->cut] & 0xc0) == 0x80)
			l->cut--;
		l->truncated = true;
		return false;
	}
	l->buf[l->len++] = (char)c;
	return true;
}

/*
 * The command line of the last image joined with spaces, cut to
 * LABEL_CHARS characters (UTF-8 aware, so a cut never splits a character)
 * with "..." at the end when it was longer. Falls back to exe, then to the
 * program name. Returns the length written to buf (LABEL_BYTES bytes).
 */
static size_t make_label(const model_process *p, const char *name, char *buf)
{
	const model_segment *s = last_segment(p);
	const char *one[2] = {name, NULL};
	const char *const *v = one;
	label l = {.buf = buf};
	size_t i;

	if (s != NULL && s->argv != NULL && s->argv[0] != NULL)
		v = s->argv;
	else if (s != NULL && s->exe != NULL)
		one[0] = s->exe;
	for (i = 0; v[i] != NULL; i++) {
		const unsigned char *a = (const unsigned char *)v[i];

		if (i > 0 && !label_put(&l, ' '))
			break;
		for (; *a != '\0'; a++)
			if (!label_put(&l, *a))
				goto done;
	}
done:
	if (l.truncated) {
		memcpy(buf + l.cut, LABEL_ELLIPSIS, 3);
		l.len = l.cut + 3;
	}
	return l.len;
}

/* A metadata event of the process, args left open for the caller. */
static void meta_begin(events_ctx *c, const char *name, int64_t pid, int64_t tid)
{
	c->meta = (jsonw_event){
		.ph = 'M',
		.name = strview_c(name),
		.pid = pid,
		.tid = tid,
		.ts_ns = JSONW_NO_TIME,
		.dur_ns = JSONW_NO_TIME,
	};
	args_begin(c);
}

static void meta_end(events_ctx *c)
{
	c->meta.args = args_end(c);
	emit(c, &c->meta);
}

/* The "exit" object of forktrace_process and of the last image. */
static void write_exit(jsonw *w, const model_process *p)
{
	char buf[32];

	jsonw_obj_begin(w);
	switch (p->exit_kind) {
	case MODEL_EXIT_CODE:
		jsonw_kv_cstr(w, "kind", "code");
		jsonw_kv_i64(w, "code", p->exit_value);
		break;
	case MODEL_EXIT_SIGNAL:
		jsonw_kv_cstr(w, "kind", "signal");
		jsonw_kv_i64(w, "signal", p->exit_value);
		jsonw_kv_cstr(w, "name", signal_name(p->exit_value, buf, sizeof(buf)));
		break;
	case MODEL_EXIT_RUNNING:
		jsonw_kv_cstr(w, "kind", "running");
		break;
	case MODEL_EXIT_HOST_LOST:
		/* When is end_ns: when its host's part stopped coming. */
		jsonw_kv_cstr(w, "kind", "host_lost");
		break;
	case MODEL_EXIT_UNKNOWN:
	default:
		jsonw_kv_cstr(w, "kind", "unknown");
		break;
	}
	jsonw_obj_end(w);
}

static bool any_instrumented(const model_process *p)
{
	size_t i;

	for (i = 0; i < p->nsegs; i++)
		if (p->segs[i].instrumented)
			return true;
	return false;
}

/* The host a process ran on: its own, else the trace's. */
static const char *process_host(const model_trace *t, const model_process *p)
{
	return p->host != NULL ? p->host : t->host;
}

/* Room for the labels before the command line: "rank N, " and a host
 * name (at most 255 bytes) and its ", ". */
#define LABEL_PREFIX_BYTES 320

/*
 * process_labels: the command line, after the process's rank ("rank 3")
 * and, in a trace of several hosts, its host, as Chrome's comma-separated
 * labels, so that a viewer shows which rank and host a track is.
 */
static size_t make_labels(events_ctx *c, const model_process *p, const char *name, char *buf)
{
	const char *host = process_host(c->t, p);
	size_t n = 0;

	if (p->rank >= 0)
		n += (size_t)snprintf(buf, 32, "rank %lld, ", (long long)p->rank);
	if (c->o->label_host && host != NULL)
		n += (size_t)snprintf(buf + n, LABEL_PREFIX_BYTES - n, "%.255s, ", host);
	return n + make_label(p, name, buf + n);
}

/* forktrace_process's "rusage": what the process itself used and where
 * the figure came from (docs/TRACE_FORMAT.md); nothing when unknown. */
static void write_rusage(jsonw *w, const model_process *p)
{
	const model_rusage *r = &p->ru;
	const char *source = model_ru_source_name(p->ru_source);

	if (source == NULL)
		return;
	jsonw_key(w, "rusage");
	jsonw_obj_begin(w);
	jsonw_kv_cstr(w, "source", source);
	jsonw_kv_i64(w, "user_ns", r->user_ns);
	jsonw_kv_i64(w, "sys_ns", r->sys_ns);
	jsonw_kv_i64(w, "maxrss_kb", r->maxrss_kb);
	jsonw_kv_i64(w, "minflt", r->minflt);
	jsonw_kv_i64(w, "majflt", r->majflt);
	jsonw_kv_i64(w, "nvcsw", r->nvcsw);
	jsonw_kv_i64(w, "nivcsw", r->nivcsw);
	jsonw_kv_i64(w, "inblock", r->inblock);
	jsonw_kv_i64(w, "oublock", r->oublock);
	jsonw_obj_end(w);
}

/* The process's CPU times and peak resident set at the end of image i,
 * cumulative over its images: its EXEC's figure, or for the last image
 * the process's own. False when unknown. */
static bool segment_ru_end(const model_process *p, size_t i, model_rusage *out)
{
	const model_segment *s = &p->segs[i];

	if (s->end_user_ns >= 0 && s->end_sys_ns >= 0) {
		out->user_ns = s->end_user_ns;
		out->sys_ns = s->end_sys_ns;
		out->maxrss_kb = s->end_maxrss_kb;
		return true;
	}
	if (i + 1 == p->nsegs && p->ru_source != MODEL_RU_NONE && p->ru.user_ns >= 0 &&
	    p->ru.sys_ns >= 0) {
		*out = p->ru;
		return true;
	}
	return false;
}

/* user + system of r (both known, so at least 0), at most INT64_MAX:
 * the figures come from agents and files, which may claim anything. */
static int64_t ru_cpu_ns(const model_rusage *r)
{
	return r->user_ns > INT64_MAX - r->sys_ns ? INT64_MAX : r->user_ns + r->sys_ns;
}

/* CPU time (user + system) of image i: its end less the previous
 * image's (nothing before the first); -1 when either is unknown. */
static int64_t segment_cpu_ns(const model_process *p, size_t i)
{
	model_rusage end, before = {.user_ns = 0, .sys_ns = 0};
	int64_t a, b;

	if (!segment_ru_end(p, i, &end) || (i > 0 && !segment_ru_end(p, i - 1, &before)))
		return -1;
	a = ru_cpu_ns(&end);
	b = ru_cpu_ns(&before);
	return a > b ? a - b : 0;
}

/* The four process-level metadata events. */
static void write_process_meta(events_ctx *c, const model_process *p, const char *name,
			       uint64_t sort_index)
{
	const model_process *parent = parent_of(c->t, p);
	const model_segment *last = last_segment(p);
	model_name names = last != NULL ? model_image_name(last) : (model_name){"?", NULL};
	jsonw *w = &c->w;
	char lbuf[LABEL_PREFIX_BYTES + LABEL_BYTES];
	size_t llen;

	meta_begin(c, "process_name", p->out_pid, p->out_pid);
	jsonw_kv_cstr(w, "name", name);
	meta_end(c);

	llen = make_labels(c, p, name, lbuf);
	meta_begin(c, "process_labels", p->out_pid, p->out_pid);
	jsonw_key(w, "labels");
	jsonw_str(w, (strview){lbuf, llen});
	meta_end(c);

	meta_begin(c, "process_sort_index", p->out_pid, p->out_pid);
	jsonw_kv_u64(w, "sort_index", c->o->sort_base + sort_index);
	meta_end(c);

	meta_begin(c, "forktrace_process", p->out_pid, p->out_pid);
	jsonw_kv_i64(w, "pid", p->pid);
	jsonw_kv_i64(w, "ppid", p->ppid);
	jsonw_kv_i64(w, "parent", parent != NULL ? parent->out_pid : -1);
	jsonw_kv_u64(w, "start_ticks", p->start_ticks);
	/* The script by itself, its interpreter apart: what per-program
	 * totals group by. */
	jsonw_kv_cstr(w, "name", names.name);
	if (names.interp != NULL)
		jsonw_kv_cstr(w, "interpreter", names.interp);
	jsonw_kv_cstr(w, "exe", last != NULL ? last->exe : NULL);
	jsonw_key(w, "argv");
	jsonw_strv(w, last != NULL ? last->argv : NULL);
	jsonw_kv_cstr(w, "cwd", last != NULL ? last->cwd : NULL);
	jsonw_kv_i64(w, "start_ns", trace_ns(c, p->start_ns));
	jsonw_kv_i64(w, "end_ns", trace_ns(c, p->end_ns));
	jsonw_kv_cstr(w, "spawn", p->spawn_ns >= 0 ? spawn_name(p->spawn_kind) : NULL);
	jsonw_key(w, "exit");
	write_exit(w, p);
	jsonw_kv_bool(w, "instrumented", any_instrumented(p));
	jsonw_kv_u64(w, "images", p->nsegs);
	jsonw_kv_u64(w, "lost_events", p->lost_events);
	jsonw_kv_cstr(w, "host", process_host(c->t, p));
	if (p->rank >= 0) {
		jsonw_kv_i64(w, "rank", p->rank);
		jsonw_kv_cstr(w, "rank_var", p->rank_var);
		if (model_launcher_name(p->rank_var) != NULL)
			jsonw_kv_cstr(w, "launcher", model_launcher_name(p->rank_var));
	}
	if (p->local_rank >= 0)
		jsonw_kv_i64(w, "local_rank", p->local_rank);
	write_rusage(w, p);
	meta_end(c);
}

static void write_thread_meta(events_ctx *c, const model_process *p, int64_t tid, const char *name,
			      uint64_t sort_index)
{
	meta_begin(c, "thread_name", p->out_pid, tid);
	jsonw_kv_cstr(&c->w, "name", name);
	meta_end(c);
	meta_begin(c, "thread_sort_index", p->out_pid, tid);
	jsonw_kv_u64(&c->w, "sort_index", sort_index);
	meta_end(c);
	c->threads++;
}

/*
 * Every thread gets a name and a sort index, the main thread (tid == host
 * pid) first and always, even when no thread record says so, because the
 * image slices live on it. It is named after the program unless the
 * program named it (ft_thread_name, pthread_setname_np, PR_SET_NAME);
 * other unnamed threads too, as Linux names a new thread after its
 * creator.
 */
static void write_threads(events_ctx *c, const model_process *p, const char *name)
{
	const char *main_name = name;
	uint64_t k = 1;
	size_t i;

	for (i = 0; i < p->nthreads; i++)
		if (out_tid(p, p->threads[i].tid) == p->out_pid && p->threads[i].name != NULL)
			main_name = p->threads[i].name;
	write_thread_meta(c, p, p->out_pid, main_name, 0);
	for (i = 0; i < p->nthreads; i++) {
		const model_thread *th = &p->threads[i];

		if (out_tid(p, th->tid) == p->out_pid)
			continue;
		write_thread_meta(c, p, th->tid, th->name != NULL ? th->name : name, k++);
	}
}

/* When image i started: its own record, else where the previous image (or
 * the process) began or ended, else the start of the trace. */
static int64_t segment_start(const model_trace *t, const model_process *p, size_t i)
{
	if (p->segs[i].start_ns >= 0)
		return p->segs[i].start_ns;
	if (i > 0 && p->segs[i - 1].end_ns >= 0)
		return p->segs[i - 1].end_ns;
	if (i == 0 && p->start_ns >= 0)
		return p->start_ns;
	return t->start_ns;
}

/* One X slice per image, on the main thread. */
static void write_segments(events_ctx *c, const model_process *p)
{
	const model_trace *t = c->t;
	jsonw *w = &c->w;
	char nbuf[DISPLAY_NAME_BYTES + 32], dbuf[DISPLAY_NAME_BYTES];
	size_t i;

	for (i = 0; i < p->nsegs; i++) {
		const model_segment *s = &p->segs[i];
		const char *name = display_name(s, dbuf);
		int64_t start = segment_start(t, p, i);
		int64_t end = s->end_ns >= 0 ? s->end_ns : p->end_ns >= 0 ? p->end_ns : t->end_ns;
		jsonw_event ev = {
			.ph = 'X',
			.cat = strview_c("process"),
			.name = strview_c(name),
			.pid = p->out_pid,
			.tid = p->out_pid,
			.ts_ns = start,
			.dur_ns = end > start ? end - start : 0,
		};

		if (!s->instrumented) {
			int n = snprintf(nbuf, sizeof(nbuf), "%s (not instrumented)", name);

			/* A name too long for nbuf is written whole,
			 * without the suffix: the args still say it. */
			if (n > 0 && (size_t)n < sizeof(nbuf))
				ev.name = (strview){nbuf, (size_t)n};
		}
		args_begin(c);
		jsonw_kv_u64(w, "image", i);
		jsonw_kv_cstr(w, "exe", s->exe);
		jsonw_key(w, "argv");
		jsonw_strv(w, s->argv);
		jsonw_kv_cstr(w, "cwd", s->cwd);
		jsonw_kv_bool(w, "instrumented", s->instrumented);
		if (s->argv_truncated)
			jsonw_kv_bool(w, "argv_truncated", true);
		int64_t cpu = segment_cpu_ns(p, i);
		if (cpu >= 0)
			jsonw_kv_i64(w, "cpu_ns", cpu);
		if (i + 1 == p->nsegs) {
			jsonw_key(w, "exit");
			write_exit(w, p);
		}
		ev.args = args_end(c);
		emit(c, &ev);
	}
}

/*
 * The process's counter tracks "cpu" (user_ms, sys_ms: cumulative) and
 * "rss" (peak_mib) at the end of each image where getrusage's figure is
 * known, so that a viewer shows where a process's CPU and memory went.
 */
static void write_ru_counters(events_ctx *c, const model_process *p)
{
	jsonw *w = &c->w;

	for (size_t i = 0; i < p->nsegs; i++) {
		const model_segment *s = &p->segs[i];
		int64_t end = s->end_ns >= 0 ? s->end_ns : p->end_ns;
		model_rusage ru;
		jsonw_event ev = {
			.ph = 'C',
			.cat = strview_c("rusage"),
			.pid = p->out_pid,
			.tid = p->out_pid,
			.ts_ns = end,
			.dur_ns = JSONW_NO_TIME,
		};

		if (end < 0 || !segment_ru_end(p, i, &ru))
			continue;
		ev.name = strview_c("cpu");
		args_begin(c);
		jsonw_key(w, "user_ms");
		jsonw_f64(w, (double)ru.user_ns / 1e6);
		jsonw_key(w, "sys_ms");
		jsonw_f64(w, (double)ru.sys_ns / 1e6);
		ev.args = args_end(c);
		emit(c, &ev);
		if (ru.maxrss_kb < 0)
			continue;
		ev.name = strview_c("rss");
		args_begin(c);
		jsonw_key(w, "peak_mib");
		jsonw_f64(w, (double)ru.maxrss_kb / 1024.0);
		ev.args = args_end(c);
		emit(c, &ev);
	}
}

/*
 * The fork/spawn arrow: a flow start in the parent on the thread that
 * created the child, a flow end bound to the child's first image slice.
 * The id is the child's index: unique in the trace, one arrow per child.
 */
static void write_flow(events_ctx *c, const model_process *p)
{
	const model_process *parent = parent_of(c->t, p);
	const char *kind = spawn_name(p->spawn_kind);
	int64_t end_ts;
	jsonw_event ev;

	if (p->spawn_ns < 0 || parent == NULL)
		return;
	if (kind == NULL)
		kind = "spawn";
	if (p->nsegs > 0 && p->segs[0].start_ns >= 0)
		end_ts = p->segs[0].start_ns;
	else if (p->start_ns >= 0)
		end_ts = p->start_ns;
	else
		end_ts = p->spawn_ns;

	ev = (jsonw_event){
		.ph = 's',
		.cat = strview_c("fork"),
		.name = strview_c(kind),
		.pid = parent->out_pid,
		.tid = out_tid(parent, p->spawn_tid),
		.ts_ns = p->spawn_ns,
		.dur_ns = JSONW_NO_TIME,
		.has_id = true,
		.id = (uint64_t)p->index + 1,
	};
	emit(c, &ev);
	ev.ph = 'f';
	ev.bind_enclosing = true;
	ev.pid = p->out_pid;
	ev.tid = p->out_pid;
	ev.ts_ns = end_ts;
	emit(c, &ev);
}

static void write_marks(events_ctx *c, const model_process *p)
{
	size_t i;

	for (i = 0; i < p->nmarks; i++) {
		const model_mark *m = &p->marks[i];
		jsonw_event ev = {
			.ph = m->dur_ns < 0 ? 'i' : 'X',
			.scope = m->dur_ns < 0 ? 't' : 0,
			.name = strview_c(m->name),
			.cat = strview_c(m->cat),
			.pid = p->out_pid,
			.tid = out_tid(p, m->tid),
			.ts_ns = m->ts_ns,
			.dur_ns = m->dur_ns < 0 ? JSONW_NO_TIME : m->dur_ns,
			.args = strview_c(m->args_json),
		};

		emit(c, &ev);
	}
}

/* Losses are shown where they are hard to miss: a process-wide instant at
 * the end of the process. */
static void write_loss(events_ctx *c, const model_process *p)
{
	jsonw_event ev = {
		.ph = 'i',
		.scope = 'p',
		.cat = strview_c("forktrace.loss"),
		.name = strview_c("lost events"),
		.pid = p->out_pid,
		.tid = p->out_pid,
		.dur_ns = JSONW_NO_TIME,
	};

	if (p->lost_events == 0)
		return;
	ev.ts_ns = p->end_ns >= 0 ? p->end_ns : p->start_ns >= 0 ? p->start_ns : c->t->end_ns;
	args_begin(c);
	jsonw_kv_u64(&c->w, "count", p->lost_events);
	ev.args = args_end(c);
	emit(c, &ev);
}

/* The functions, regions, instants and counters each thread recorded. */
static void write_records(events_ctx *c, const model_process *p)
{
	for (size_t i = 0; i < p->nthreads && c->err == 0; i++) {
		const model_thread *th = &p->threads[i];
		int64_t end = th->end_ns >= 0  ? th->end_ns
			      : p->end_ns >= 0 ? p->end_ns
					       : c->t->end_ns;
		int err;

		if (th->chunks == NULL)
			continue;
		err = rec_write_thread(c->rec, p, th, p->out_pid, out_tid(p, th->tid), end, c->sink,
				       c->o->clock);
		if (err < 0 && c->err == 0)
			c->err = err;
	}
}

static void write_process(events_ctx *c, const model_process *p, uint64_t sort_index)
{
	const model_segment *last = last_segment(p);
	char dbuf[DISPLAY_NAME_BYTES];
	const char *name = last != NULL ? display_name(last, dbuf) : "?";

	write_process_meta(c, p, name, sort_index);
	write_threads(c, p, name);
	write_segments(c, p);
	write_ru_counters(c, p);
	write_flow(c, p);
	write_marks(c, p);
	write_records(c, p);
	write_loss(c, p);
}

/* Sort key of a process among its siblings: start time (unknown last),
 * then pid, then position in the model, so the order is total. */
typedef struct order_key {
	int64_t start;
	int64_t pid;
	uint32_t index;
} order_key;

static int order_cmp(const void *a, const void *b)
{
	const order_key *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

/* keys: every process by start time (unknown last), then pid, then
 * index. */
static void sort_by_start(const model_trace *t, order_key *keys)
{
	size_t n = t->nprocs, i;

	for (i = 0; i < n; i++) {
		const model_process *p = t->procs[i];

		keys[i].start = p->start_ns >= 0 ? p->start_ns : INT64_MAX;
		keys[i].pid = p->pid;
		keys[i].index = (uint32_t)i;
	}
	qsort(keys, n, sizeof(*keys), order_cmp);
}

/* Children lists in one array (first[q]..first[q+1] are q's), filled in
 * the order of keys so each list comes out sorted. first has nprocs + 1
 * zeroed entries; kids and fill (scratch) nprocs. */
static void child_lists(const model_trace *t, const order_key *keys, uint32_t *first,
			uint32_t *kids, uint32_t *fill)
{
	size_t n = t->nprocs, i;

	for (i = 0; i < n; i++) {
		const model_process *q = parent_of(t, t->procs[i]);

		if (q != NULL)
			first[q->index + 1]++;
	}
	for (i = 0; i < n; i++)
		first[i + 1] += first[i];
	memcpy(fill, first, n * sizeof(*fill));
	for (i = 0; i < n; i++) {
		const model_process *q = parent_of(t, t->procs[keys[i].index]);

		if (q != NULL)
			kids[fill[q->index]++] = keys[i].index;
	}
}

/* The depth-first walk that fills order, with stack and seen (nprocs
 * entries, seen zeroed) as scratch. */
static void walk_tree(const model_trace *t, const order_key *keys, const uint32_t *first,
		      const uint32_t *kids, uint32_t *stack, bool *seen, uint32_t *order)
{
	size_t n = t->nprocs, i, k = 0, top;

	/* Two passes over the sorted processes: real roots, then whatever
	 * a cycle left unreached. */
	for (int pass = 0; pass < 2; pass++) {
		for (i = 0; i < n; i++) {
			uint32_t r = keys[i].index;

			if (seen[r] || (pass == 0 && parent_of(t, t->procs[r]) != NULL))
				continue;
			top = 0;
			stack[top++] = r;
			seen[r] = true;
			while (top > 0) {
				uint32_t q = stack[--top];
				uint32_t j;

				order[k++] = q;
				/* Reversed, so the earliest child pops first. */
				for (j = first[q + 1]; j > first[q]; j--) {
					uint32_t ch = kids[j - 1];

					if (seen[ch])
						continue;
					seen[ch] = true;
					stack[top++] = ch;
				}
			}
		}
	}
}

/*
 * The depth-first order of the process tree: roots by start time, each
 * followed by its children by start time, recursively. Iterative with an
 * explicit stack, since a chain of forks can be 10,000 deep. Processes on
 * a parent cycle (a broken model) are not reachable from a root; they are
 * taken as roots afterwards, so every process is written exactly once.
 * Fills order (nprocs indices). Returns 0 or -ENOMEM.
 */
static int tree_order(const model_trace *t, uint32_t *order)
{
	size_t n = t->nprocs;
	order_key *keys = NULL;
	uint32_t *first = NULL, *kids = NULL, *fill = NULL, *stack = NULL;
	bool *seen = NULL;
	int err = -ENOMEM;

	if (n == 0)
		return 0;
	keys = malloc(n * sizeof(*keys));
	if (keys == NULL)
		goto out;
	first = calloc(n + 1, sizeof(*first));
	if (first == NULL)
		goto out;
	kids = malloc(n * sizeof(*kids));
	if (kids == NULL)
		goto out;
	fill = malloc(n * sizeof(*fill));
	if (fill == NULL)
		goto out;
	stack = malloc(n * sizeof(*stack));
	if (stack == NULL)
		goto out;
	seen = calloc(n, sizeof(*seen));
	if (seen == NULL)
		goto out;

	sort_by_start(t, keys);
	child_lists(t, keys, first, kids, fill);
	walk_tree(t, keys, first, kids, stack, seen, order);
	err = 0;
out:
	free(seen);
	free(stack);
	free(fill);
	free(kids);
	free(first);
	free(keys);
	return err;
}

int events_emit(const model_trace *t, trace_sink *s)
{
	return events_emit_with(t, s, NULL);
}

int events_emit_with(const model_trace *t, trace_sink *s, const events_emit_opts *o)
{
	static const events_emit_opts defaults;
	uint32_t *order;
	events_ctx c = {.t = t, .sink = s, .o = o != NULL ? o : &defaults};
	int err;

	order = malloc((t->nprocs > 0 ? t->nprocs : 1) * sizeof(*order));
	if (order == NULL)
		return -ENOMEM;
	err = tree_order(t, order);
	if (err < 0)
		goto free_order;
	c.rec = rec_ctx_new(t, &err);
	if (c.rec == NULL)
		goto free_order;
	err = ostream_open_mem(&c.aos);
	if (err < 0)
		goto free_rec;
	for (size_t i = 0; i < t->nprocs && c.err == 0; i++)
		write_process(&c, t->procs[order[i]], i);
	s->stats.threads = c.threads;
	s->stats.corrupt_chunks = rec_ctx_stats(c.rec)->corrupt_chunks;
	ostream_finish(&c.aos);
	err = c.err;
free_rec:
	rec_ctx_free(c.rec);
free_order:
	free(order);
	return err;
}

trace_sink *events_sink_for(enum trace_format fmt, int fd, const events_opts *opts, int *err)
{
	switch (fmt) {
	case TRACE_FORMAT_JSON:
		return sink_json_new(fd, -1, err);
	case TRACE_FORMAT_JSON_GZ:
		return sink_json_new(fd, opts != NULL ? opts->gzip_level : 0, err);
	case TRACE_FORMAT_H5:
		/* HDF5 writes by path: it reopens fd's file (sink_h5_new_fd). */
		return sink_h5_new_fd(fd, opts, err);
	default:
		*err = -EINVAL;
		return NULL;
	}
}

/* The whole model t through s: begin, events_emit, end, through the
 * critical path's sink as the merge writes it. Consumes s. */
static int events_write_sink(const model_trace *t, trace_sink *s, events_stats *stats)
{
	sink_meta meta = {.model = t, .processes = t->nprocs};
	trace_sink *cps;
	int err;

	cps = sink_critpath_new(s, &err);
	if (cps == NULL) {
		s->free(s);
		return err;
	}
	err = cps->begin(cps, &meta);
	if (err == 0)
		err = events_emit(t, cps);
	if (err == 0)
		err = cps->end(cps, &meta);
	if (stats != NULL) {
		*stats = s->stats;
		stats->processes = t->nprocs;
	}
	cps->free(cps);
	s->free(s);
	return err;
}

int events_write(const model_trace *t, int fd, enum trace_format fmt, const events_opts *opts,
		 events_stats *stats)
{
	trace_sink *s;
	int err = 0;

	if (stats != NULL)
		memset(stats, 0, sizeof(*stats));
	if (t == NULL || fd < 0)
		return -EINVAL;
	s = events_sink_for(fmt, fd, opts, &err);
	if (s == NULL)
		return err;
	return events_write_sink(t, s, stats);
}
