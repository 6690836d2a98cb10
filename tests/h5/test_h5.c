/*
 * Tests of the HDF5 sink and reader (combine/include/h5.h).
 *
 *   test_h5 unit DIR        edge cases of args and extra keys (DIR/args.h5,
 *                           DIR/args_rt.json, for check_h5.py); a model
 *                           written as JSON and as HDF5, the HDF5 read
 *                           back to JSON must be the
 *                           same bytes; a synthetic interleaved stream
 *                           (DIR/synth.json, DIR/synth.h5, DIR/synth_rt.json)
 *                           written under a tiny memory budget, for
 *                           check_h5.py to compare.
 *   test_h5 chunks DIR NAME full chunks through the writer's pipeline
 *                           (DIR/NAME.json, DIR/NAME.h5: test_chunks).
 *   test_h5 to-json IN OUT  reads IN (HDF5) and writes it as JSON to OUT.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "critpath.h"
#include "h5.h"
#include "events.h"
#include "model.h"
#include "sink.h"

static void slurp(const char *path, char **buf, size_t *len)
{
	FILE *f = fopen(path, "rb");
	long n;

	MUST(f != NULL);
	MUST(fseek(f, 0, SEEK_END) == 0);
	n = ftell(f);
	MUST(n >= 0);
	rewind(f);
	*buf = malloc((size_t)n + 1);
	MUST(*buf != NULL);
	MUST(fread(*buf, 1, (size_t)n, f) == (size_t)n);
	fclose(f);
	*len = (size_t)n;
}

static int cmp_line(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/* Splits text (NUL-terminated in place) into sorted lines. */
static char **sorted_lines(char *text, size_t len, size_t *n)
{
	char **v = malloc((len + 1) * sizeof(*v));
	char *p = text;

	MUST(v != NULL);
	*n = 0;
	text[len] = '\0';
	for (;;) {
		char *nl = strchr(p, '\n');

		v[(*n)++] = p;
		if (nl == NULL)
			break;
		*nl = '\0';
		p = nl + 1;
	}
	qsort(v, *n, sizeof(*v), cmp_line);
	return v;
}

static bool same_lines(char *a, size_t na, char *b, size_t nb)
{
	size_t ka, kb;
	char **la = sorted_lines(a, na, &ka), **lb = sorted_lines(b, nb, &kb);
	bool same = ka == kb;

	for (size_t i = 0; same && i < ka; i++)
		same = strcmp(la[i], lb[i]) == 0;
	free(la);
	free(lb);
	return same;
}

/* Reads in (HDF5) with reader_h5_read and writes JSON to out. */
static int h5_to_json(const char *in, const char *out)
{
	model_trace *meta = model_new();
	sink_meta sm = {0};
	trace_sink *s, *cps;
	int fd, err;

	MUST(meta != NULL);
	fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		perror(out);
		return -errno;
	}
	err = reader_h5_meta(in, meta, &sm.processes);
	if (err == 0) {
		sm.model = meta;
		s = sink_json_new(fd, -1, &err);
		/* In front of it, as in front of every output of the merge. */
		if (s != NULL && (cps = sink_critpath_new(s, &err)) != NULL) {
			err = cps->begin(cps, &sm);
			if (err == 0)
				err = reader_h5_read(in, cps, NULL);
			if (err == 0)
				err = cps->end(cps, &sm);
			cps->free(cps);
		}
		if (s != NULL)
			s->free(s);
	}
	close(fd);
	model_free(meta);
	return err;
}

static model_trace *make_model(void)
{
	static const char *const cmd[] = {"/bin/sh", "-c", "make -j4 && ./a/b", NULL};
	static const char *const av1[] = {"sh", "-c", "x", NULL};
	static const char *const av2[] = {"/usr/bin/caf\xc3\xa9", "--name=a/b%c", NULL};
	model_trace *t = model_new();
	model_process *p, *q, *r;
	model_segment *s;
	model_thread *th;
	model_mark *m;

	MUST(t != NULL);
	t->host = model_strdup(t, "host-1");
	t->command = model_strvdup(t, cmd, 3);
	t->origin = model_strdup(t, "forktrace run");
	t->anchor_mono_ns = 1000;
	t->anchor_real_ns = 1700000000000000000;
	t->start_ns = 1000000;
	t->end_ns = 9000000;
	t->exit_status = 3;
	t->lost_events = 7;

	MUST(p = model_add_process(t, 100));
	p->start_ns = 1000000;
	p->end_ns = 9000000;
	p->exit_kind = MODEL_EXIT_CODE;
	p->exit_value = 3;
	MUST(s = model_add_segment(t, p));
	s->start_ns = 1000000;
	s->end_ns = 9000000;
	s->argv = model_strvdup(t, av1, 3);
	s->argc = 3;
	s->exe = model_strdup(t, "/bin/sh");
	s->instrumented = true;
	MUST(th = model_add_thread(t, p, 101));
	th->name = model_strdup(t, "worker/1");
	MUST(m = model_add_mark(t, p));
	m->ts_ns = 2000000;
	m->dur_ns = 5000;
	m->tid = 101;
	m->name = model_strdup(t, "system");
	m->cat = model_strdup(t, "shell");
	m->args_json = model_strdup(t, "{\"cmd\":\"ls \\\"x\\\"\",\"status\":0}");

	MUST(q = model_add_process(t, 200));
	q->parent = p;
	q->ppid = 100;
	q->start_ns = 1500000;
	q->end_ns = 8000000;
	q->spawn_ns = 1400000;
	q->spawn_tid = 100;
	q->exit_kind = MODEL_EXIT_SIGNAL;
	q->exit_value = 9;
	q->lost_events = 7;
	MUST(s = model_add_segment(t, q));
	s->start_ns = 1500000;
	s->end_ns = 3000000;
	s->instrumented = true;
	MUST(s = model_add_segment(t, q));
	s->start_ns = 3000000;
	s->argv = model_strvdup(t, av2, 2);
	s->argc = 2;
	s->exe = model_strdup(t, "/usr/bin/caf\xc3\xa9");

	MUST(r = model_add_process(t, 300));
	r->parent = q;
	r->ppid = 200;
	r->exit_kind = MODEL_EXIT_RUNNING;
	return t;
}

/* A model written as JSON directly and through HDF5 gives the same bytes:
 * the reader brings back every event, field and metadata value. */
static void test_model_round_trip(const char *dir)
{
	char pj[4096], ph[4096], prt[4096];
	model_trace *t = make_model();
	char *a, *b;
	size_t na, nb;
	events_stats st;
	bool same;
	int fd;

	snprintf(pj, sizeof(pj), "%s/model.json", dir);
	snprintf(ph, sizeof(ph), "%s/model.h5", dir);
	snprintf(prt, sizeof(prt), "%s/model_rt.json", dir);
	MUST((fd = open(pj, O_WRONLY | O_CREAT | O_TRUNC, 0644)) >= 0);
	MUST(events_write(t, fd, TRACE_FORMAT_JSON, NULL, NULL) == 0);
	close(fd);
	CHECK(events_format_for_path(ph) == TRACE_FORMAT_H5);
	CHECK(events_format_for_path("x.HDF5") == TRACE_FORMAT_H5);
	MUST((fd = open(ph, O_WRONLY | O_CREAT | O_TRUNC, 0644)) >= 0);
	MUST(events_write(t, fd, events_format_for_path(ph), NULL, &st) == 0);
	close(fd);
	CHECK(st.events > 20 && st.bytes > 0);
	CHECK(reader_h5_is(ph) == 1);
	CHECK(reader_h5_is(pj) == 0);
	CHECK_INT(reader_h5_is("/nonexistent/x.h5"), ==, -ENOENT);
	MUST(h5_to_json(ph, prt) == 0);
	slurp(pj, &a, &na);
	slurp(prt, &b, &nb);
	/* The same lines: the reader emits process by process, where the
	 * merge wrote a child's flow start next to the child. */
	same = same_lines(a, na, b, nb);
	CHECK_MSG(same, "round trip differs: diff %s %s", pj, prt);
	free(a);
	free(b);
	/* A JSON file is not an HDF5 trace. */
	CHECK(reader_h5_read(pj, NULL, NULL) == -EINVAL);
	model_free(t);
}

/* Both sinks get each event. */
typedef struct two_sinks {
	trace_sink *a, *b;
} two_sinks;

static void emit2(two_sinks *t, const sink_event *e)
{
	MUST(t->a->event(t->a, e) == 0);
	MUST(t->b->event(t->b, e) == 0);
}

static uint64_t rng = 88172645463325252ULL;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

#define SYN_PROCS 40
#define SYN_ROUNDS 60000

/*
 * A stream as `forktrace combine` hands it over: processes interleaved
 * event by event, nested B/E on several threads, X slices, instants with
 * args, counters, flows with ids, raw events with keys forktrace does not
 * know, names that HDF5 link names cannot hold as they are. Written to a
 * JSON sink and to an HDF5 sink with a 1 MiB budget (so buffers of all
 * processes are flushed many times); check_h5.py compares them.
 */
static void test_synthetic(const char *dir)
{
	static const char *const names[] = {"compute", "io/read",     "%done",          ".hidden",
					    "",        "caf\xc3\xa9", "step \"quoted\""};
	char pj[4096], ph[4096], prt[4096];
	model_trace *meta = model_new();
	sink_meta sm = {0};
	int depth[SYN_PROCS][2] = {{0}};
	int64_t now = 1000000;
	size_t peak = 0;
	ostream raw;
	two_sinks t;
	int fd, err;

	MUST(meta != NULL);
	meta->origin = "forktrace combine";
	meta->host = "synth";
	sm.model = meta;
	sm.processes = SYN_PROCS;
	snprintf(pj, sizeof(pj), "%s/synth.json", dir);
	snprintf(ph, sizeof(ph), "%s/synth.h5", dir);
	snprintf(prt, sizeof(prt), "%s/synth_rt.json", dir);
	MUST((fd = open(pj, O_WRONLY | O_CREAT | O_TRUNC, 0644)) >= 0);
	MUST((t.a = sink_json_new(fd, -1, &err)) != NULL);
	MUST((t.b = sink_h5_new(ph, NULL, &err)) != NULL);
	sink_h5_set_budget(t.b, 1 << 20);
	MUST(ostream_open_mem(&raw) == 0);
	MUST(t.a->begin(t.a, &sm) == 0 && t.b->begin(t.b, &sm) == 0);

	for (int p = 0; p < SYN_PROCS; p++) {
		char args[64];
		sink_event e = {.ev = {.ph = 'M',
				       .name = strview_c("process_name"),
				       .pid = 5000 + p,
				       .tid = 5000 + p,
				       .ts_ns = JSONW_NO_TIME,
				       .dur_ns = JSONW_NO_TIME}};

		snprintf(args, sizeof(args), "{\"name\":\"proc%d\"}", p);
		e.ev.args = strview_c(args);
		emit2(&t, &e);
	}
	for (int i = 0; i < SYN_ROUNDS; i++) {
		uint64_t r = next_rand();
		int p = (int)(r % SYN_PROCS), th = (int)((r >> 8) & 1);
		const char *name = names[(r >> 12) % 7];
		char args[96];
		sink_event e = {.ev = {.pid = 5000 + p,
				       .tid = th ? 9000 + p : 5000 + p,
				       .ts_ns = now,
				       .dur_ns = JSONW_NO_TIME}};
		jsonw w;

		now += 1 + (int64_t)((r >> 20) % 1000);
		e.ev.name = strview_c(name);
		switch ((r >> 16) % 8) {
		case 0:
		case 1:
			if (depth[p][th] < 5) {
				e.ev.ph = 'B';
				/* Calls of instrumented functions are no regions,
				 * but their E closes them all the same. */
				if ((r >> 31) & 1)
					e.ev.cat = strview_c("function");
				depth[p][th]++;
				break;
			}
			/* fall through */
		case 2:
		case 3:
			if (depth[p][th] == 0)
				continue;
			e.ev.ph = 'E';
			e.ev.name = (strview){NULL, 0};
			depth[p][th]--;
			break;
		case 4:
			e.ev.ph = 'X';
			e.ev.dur_ns = (int64_t)((r >> 24) % 5000);
			e.ev.cat = strview_c((r >> 31) & 1 ? "function" : "user");
			break;
		case 5:
			e.ev.ph = 'i';
			e.ev.scope = 't';
			snprintf(args, sizeof(args), "{\"i\":%d,\"s\":\"\\u00e9\\n\"}", i);
			e.ev.args = strview_c(args);
			break;
		case 6:
			e.ev.ph = 'C';
			e.ev.name = strview_c("memory");
			snprintf(args, sizeof(args), "{\"rss\":%d}", (int)(r >> 40));
			e.ev.args = strview_c(args);
			break;
		default:
			e.ev.ph = (r >> 30) & 1 ? 's' : 'f';
			e.ev.has_id = true;
			e.ev.id = r >> 32;
			e.ev.bind_enclosing = e.ev.ph == 'f';
			e.ev.cat = strview_c("fork");
			break;
		}
		if ((r >> 50) % 5 == 0) {
			/* A raw event, as read from a file, with keys forktrace
			 * does not know. */
			ostream_mem_reset(&raw);
			jsonw_init(&w, &raw);
			jsonw_event_begin(&w, &e.ev);
			ostream_puts(&raw, ",\"tts\":12.5,\"sf\":{\"a\":[1,\"x\"]}");
			jsonw_event_end(&w);
			e.raw = (strview){raw.buf + 1, raw.len - 1};
		}
		emit2(&t, &e);
		if (sink_h5_buffered(t.b) > peak)
			peak = sink_h5_buffered(t.b);
	}
	MUST(t.a->end(t.a, &sm) == 0);
	MUST(t.b->end(t.b, &sm) == 0);
	/* Bounded: after each event, never above the budget. */
	CHECK(peak <= 1 << 20);
	t.a->free(t.a);
	t.b->free(t.b);
	close(fd);
	ostream_finish(&raw);
	MUST(h5_to_json(ph, prt) == 0);
	meta->origin = NULL;
	meta->host = NULL;
	model_free(meta);
}

/* One X slice [ts, ts + dur] of category cat into both sinks. */
static void slice2(two_sinks *t, int64_t pid, const char *name, const char *cat, int64_t ts,
		   int64_t dur)
{
	sink_event e = {.ev = {.ph = 'X',
			       .name = strview_c(name),
			       .cat = strview_c(cat),
			       .pid = pid,
			       .tid = pid,
			       .ts_ns = ts,
			       .dur_ns = dur}};

	emit2(t, &e);
}

#define RANKS_MANY 70000

/*
 * Processes with ranks, as under mpirun: 10 has none (the launcher), 11 is
 * rank 1, 12 and its child 13 (which inherited the rank) rank 0, 14 is
 * rank 2 with no region. 13 has more times of one region than the sink
 * copies at once, and its events come interleaved with 12's. Written as
 * JSON and HDF5 (DIR/ranks.json, DIR/ranks.h5) with the critical path
 * of the tree, whose steps go to DIR/ranks_cp.txt ("none" when there is
 * none) for check_h5.py to compare with the table.
 */
static void test_ranks(const char *dir)
{
	static const struct {
		int64_t pid, parent, rank;
		const char *name;
		int regions;
	} procs[] = {
		{10, -1, -1, "mpirun", 3}, {11, 10, 1, "solver", 5},
		{12, 10, 0, "solver", 4},  {13, 12, 0, "helper", RANKS_MANY},
		{14, 10, 2, "idle", 0},
	};
	const size_t nprocs = sizeof(procs) / sizeof(procs[0]);
	char pj[4096], ph[4096], pc[4096], args[512];
	model_trace *meta = model_new();
	sink_meta sm = {0};
	critpath *cp = critpath_new();
	const critpath_step *steps;
	two_sinks t;
	FILE *f;
	int fd, err;

	MUST(meta != NULL && cp != NULL);
	meta->origin = "forktrace run";
	meta->host = "ranks";
	sm.model = meta;
	sm.processes = nprocs;
	snprintf(pj, sizeof(pj), "%s/ranks.json", dir);
	snprintf(ph, sizeof(ph), "%s/ranks.h5", dir);
	snprintf(pc, sizeof(pc), "%s/ranks_cp.txt", dir);
	MUST((fd = open(pj, O_WRONLY | O_CREAT | O_TRUNC, 0644)) >= 0);
	MUST((t.a = sink_json_new(fd, -1, &err)) != NULL);
	MUST((t.b = sink_h5_new(ph, NULL, &err)) != NULL);
	sink_h5_set_budget(t.b, 1 << 20);
	MUST(t.a->begin(t.a, &sm) == 0 && t.b->begin(t.b, &sm) == 0);
	for (size_t i = 0; i < nprocs; i++) {
		int64_t start = 1000000 * (int64_t)(i + 1), end = 900000000 - 1000 * (int64_t)i;
		int n = snprintf(args, sizeof(args),
				 "{\"pid\":%" PRId64 ",\"parent\":%" PRId64
				 ",\"name\":\"%s\",\"start_ns\":%" PRId64 ",\"end_ns\":%" PRId64,
				 procs[i].pid + 1000, procs[i].parent, procs[i].name, start, end);
		sink_event e = {.ev = {.ph = 'M',
				       .name = strview_c("forktrace_process"),
				       .pid = procs[i].pid,
				       .tid = procs[i].pid,
				       .ts_ns = JSONW_NO_TIME,
				       .dur_ns = JSONW_NO_TIME}};

		if (procs[i].rank >= 0)
			n += snprintf(
				args + n, sizeof(args) - (size_t)n,
				",\"rank\":%" PRId64 ",\"local_rank\":%" PRId64
				",\"rank_var\":\"OMPI_COMM_WORLD_RANK\",\"launcher\":\"Open MPI\"",
				procs[i].rank, procs[i].rank);
		if (procs[i].pid == 11)
			n += snprintf(
				args + n, sizeof(args) - (size_t)n,
				",\"interpreter\":\"python3\",\"rusage\":{\"source\":\"wait\","
				"\"user_ns\":1200000,\"sys_ns\":300000,\"maxrss_kb\":2048,"
				"\"minflt\":10,\"majflt\":1,\"nvcsw\":5,\"nivcsw\":2,"
				"\"inblock\":8,\"oublock\":16}");
		snprintf(args + n, sizeof(args) - (size_t)n, "}");
		e.ev.args = strview_c(args);
		emit2(&t, &e);
		MUST(critpath_add_process(cp, procs[i].pid, procs[i].parent, start, end,
					  procs[i].name) == 0);
	}
	for (size_t i = 0; i < nprocs; i++) {
		int64_t ts = 2000000 * (int64_t)(i + 1);

		/* 14 has no slice at all: its rank group has no regions. */
		if (procs[i].regions > 0)
			slice2(&t, procs[i].pid, procs[i].name, "process", ts, 800000000);
		for (int k = 0; k < procs[i].regions; k++) {
			slice2(&t, procs[i].pid, "step", "region", ts + 10 * k, 5 + k % 3);
			slice2(&t, procs[i].pid, "work", "function", ts + 10 * k + 1, 2);
			/* 12 and 13 interleaved: 12's regions come first. */
			if (procs[i].pid == 12 && k == 1)
				slice2(&t, 13, "early", "region", 1, 2);
		}
	}
	if (critpath_compute(cp) == 0)
		sm.critical_path = cp;
	MUST((f = fopen(pc, "w")) != NULL);
	if (sm.critical_path == NULL)
		fprintf(f, "none\n");
	else
		fprintf(f, "%" PRId64 " %" PRId64 "\n", critpath_start_ns(cp), critpath_end_ns(cp));
	for (size_t i = 0, n = critpath_steps(cp, &steps); sm.critical_path && i < n; i++)
		fprintf(f, "%" PRId64 " %" PRId64 " %" PRId64 " %s\n", steps[i].pid,
			steps[i].start_ns, steps[i].end_ns, steps[i].name);
	fclose(f);
	MUST(t.a->end(t.a, &sm) == 0);
	MUST(t.b->end(t.b, &sm) == 0);
	t.a->free(t.a);
	t.b->free(t.b);
	close(fd);
	critpath_free(cp);
	meta->origin = NULL;
	meta->host = NULL;
	model_free(meta);
}

/* One M event with args text a into s. */
static void meta_event(trace_sink *s, const char *name, int64_t pid, int64_t tid, const char *a)
{
	sink_event e = {.ev = {.ph = 'M',
			       .name = strview_c(name),
			       .pid = pid,
			       .tid = tid,
			       .ts_ns = JSONW_NO_TIME,
			       .dur_ns = JSONW_NO_TIME,
			       .args = strview_c(a)}};

	MUST(s->event(s, &e) == 0);
}

/* One instant of pid 6 as read from a file: raw is its whole text. */
static void raw_event(trace_sink *s, int64_t ts_us, const char *raw)
{
	sink_event e = {.ev = {.ph = 'i',
			       .scope = 't',
			       .name = strview_c("r"),
			       .pid = 6,
			       .tid = 6,
			       .ts_ns = ts_us * 1000,
			       .dur_ns = JSONW_NO_TIME},
			.raw = strview_c(raw)};

	MUST(s->event(s, &e) == 0);
}

/*
 * The args of metadata events (parsed with jansson) and the extra keys of
 * raw events (split with jsonr) on edge cases: written to DIR/args.h5 and
 * read back to DIR/args_rt.json, which check_h5.py inspects (the processes
 * and threads tables, the extra text byte for byte, the round trip).
 */
static void test_args(const char *dir)
{
	static const char *const malformed[] = {"{\"name\":\"a\",}",         "{\"name\" \"a\"}",
						"{\"name\":\"a\"",           "{\"name\":\"\\x\"}",
						"{\"name\":\"a\",\"n\":01}", "{\"name\":\"a\"} x",
						"{\"name\":\"\\u12\"}",      "[\"a\"]"};
	char ph[4096], prt[4096], *deep;
	model_trace *meta = model_new();
	sink_meta sm = {0};
	trace_sink *s;
	size_t n = 0;
	int err;

	MUST(meta != NULL);
	meta->origin = "forktrace combine";
	sm.model = meta;
	snprintf(ph, sizeof(ph), "%s/args.h5", dir);
	snprintf(prt, sizeof(prt), "%s/args_rt.json", dir);
	MUST((s = sink_h5_new(ph, NULL, &err)) != NULL);
	MUST(s->begin(s, &sm) == 0);
	/* int64 range, a surrogate pair, escapes, a NUL in a string, values
	 * that are no integers. */
	meta_event(s, "forktrace_process", 1, 1,
		   "{\"pid\":-9223372036854775808,\"ppid\":9223372036854775807,\"start_ticks\":5,"
		   "\"name\":\"\\ud83d\\ude00\\n\",\"exe\":\"/bin/\\u0078\",\"argv\":[\"a\","
		   "\"b\\u0041\",5,\"c\\u0000d\"],\"exit\":{\"kind\":\"signal\",\"code\":-1,"
		   "\"signal\":9},\"instrumented\":true,\"images\":2,\"lost_events\":3,"
		   "\"start_ns\":10,\"end_ns\":1.5}");
	/* jansson refuses the whole object for an integer beyond int64 or a
	 * lone surrogate: the name is not taken. */
	meta_event(s, "process_name", 2, 2, "{\"name\":\"big\",\"n\":99999999999999999999}");
	meta_event(s, "process_name", 3, 3, "{\"name\":\"\\udcff\"}");
	/* Nesting: 100 levels are fine, past jansson's limit the args are
	 * refused (without recursing that deep). */
	deep = malloc(2 * 100000 + 64);
	MUST(deep != NULL);
	n = (size_t)sprintf(deep, "{\"name\":\"deep\",\"x\":");
	memset(deep + n, '[', 100);
	memset(deep + n + 100, ']', 100);
	strcpy(deep + n + 200, "}");
	meta_event(s, "process_name", 4, 4, deep);
	n = (size_t)sprintf(deep, "{\"name\":\"deeper\",\"x\":");
	memset(deep + n, '[', 100000);
	memset(deep + n + 100000, ']', 100000);
	strcpy(deep + n + 200000, "}");
	meta_event(s, "thread_name", 4, 44, deep);
	free(deep);
	meta_event(s, "process_labels", 5, 5, "{\"labels\":\"lab\\u0000el\"}");
	meta_event(s, "process_sort_index", 5, 5, "{\"sort_index\":1.5}");
	meta_event(s, "thread_name", 5, 55, "{\"n\\u0061me\":\"escaped key\"}");
	meta_event(s, "thread_sort_index", 5, 55, "{\"sort_index\":\"3\"}");
	for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++)
		meta_event(s, "process_name", 10 + (int64_t)i, 10 + (int64_t)i, malformed[i]);

	meta_event(s, "process_name", 6, 6, "{\"name\":\"raw\"}");
	/* Extra keys kept byte for byte: an escaped column name is a column,
	 * blanks around the colon go. */
	raw_event(s, 1,
		  "{\"ph\":\"i\",\"name\":\"r\",\"pid\":6,\"tid\":6,\"ts\":1,\"s\":\"t\","
		  "\"p\\u0068\":\"i\",\"big\":99999999999999999999,\"lone\":\"\\udcff\","
		  "\"deep\":[[[[1]]]],\"tts\" : 1.50 ,\"k\\u00e9\":{\"a\":null}}");
	/* Not one valid object: no extra keys at all. */
	raw_event(s, 2, "{\"ph\":\"i\",\"name\":\"r\",\"pid\":6,\"tid\":6,\"ts\":2,\"x\":1,}");
	raw_event(s, 3, "{\"ph\":\"i\",\"name\":\"r\",\"pid\":6,\"tid\":6,\"ts\":3,\"x\":01}");
	raw_event(s, 4, "{\"ph\":\"i\",\"name\":\"r\",\"pid\":6,\"tid\":6,\"ts\":4,\"x\":1} 2");
	raw_event(s, 5,
		  "{\"ph\":\"i\",\"name\":\"r\",\"pid\":6,\"tid\":6,\"ts\":5,\"x\":\"\x01\"}");
	raw_event(s, 6, "{\"ph\":\"i\",\"name\":\"r\",\"pid\":6,\"tid\":6,\"ts\":6,\"x\":1");
	/* Only columns: nothing extra. */
	raw_event(s, 7, "{\"ph\":\"i\",\"name\":\"r\",\"pid\":6,\"tid\":6,\"ts\":7,\"s\":\"t\"}");
	MUST(s->end(s, &sm) == 0);
	s->free(s);
	MUST(h5_to_json(ph, prt) == 0);
	meta->origin = NULL;
	model_free(meta);
}

#define CHUNK_EVENTS 140000

/*
 * Full chunks as the pipeline writes them (sink_h5.c): one busy process
 * (CHUNK_EVENTS events: eight whole 16 Ki-row chunks and a last, partial
 * one) and a small one, written as JSON (DIR/NAME.json) and as HDF5
 * (DIR/NAME.h5) at the default budget. The busy process's first chunk
 * is flows with random 64-bit ids (a column deflate cannot shrink), some
 * with args; its later chunks have neither (all-zero columns); raw events with
 * and without extra keys go through the quick key scan. check_h5.py
 * compares the files, runs this with FORKTRACE_THREADS=1 and 2 and
 * expects the same datasets.
 */
static void test_chunks(const char *dir, const char *name)
{
	char pj[4096], ph[4096], args[64], text[256];
	model_trace *meta = model_new();
	sink_meta sm = {0};
	int64_t now = 5000000;
	two_sinks t;
	int fd, err;

	MUST(meta != NULL);
	meta->origin = "forktrace combine";
	meta->host = "chunks";
	sm.model = meta;
	sm.processes = 2;
	snprintf(pj, sizeof(pj), "%s/%s.json", dir, name);
	snprintf(ph, sizeof(ph), "%s/%s.h5", dir, name);
	MUST((fd = open(pj, O_WRONLY | O_CREAT | O_TRUNC, 0644)) >= 0);
	MUST((t.a = sink_json_new(fd, -1, &err)) != NULL);
	MUST((t.b = sink_h5_new(ph, NULL, &err)) != NULL);
	MUST(t.a->begin(t.a, &sm) == 0 && t.b->begin(t.b, &sm) == 0);
	rng = 0x9e3779b97f4a7c15ULL;
	for (int i = 0; i < CHUNK_EVENTS + 70; i++) {
		uint64_t r = next_rand();
		bool small = i >= CHUNK_EVENTS;
		sink_event e = {.ev = {.ph = 'X',
				       .name = strview_c((r & 3) == 0 ? "fib" : "leaf"),
				       .cat = strview_c("function"),
				       .pid = small ? 7001 : 7000,
				       .tid = small ? 7001 : 7000,
				       .ts_ns = now,
				       .dur_ns = (int64_t)((r >> 8) % 100000)}};
		jsonw w;

		now += 1 + (int64_t)((r >> 30) % 700);
		if (i < 16384) {
			e.ev.ph = (r >> 43) & 1 ? 's' : 'f';
			e.ev.cat = strview_c("fork");
			e.ev.dur_ns = JSONW_NO_TIME;
			e.ev.has_id = true;
			e.ev.id = next_rand();
			e.ev.bind_enclosing = e.ev.ph == 'f';
			if ((r >> 40) % 3 == 1) {
				snprintf(args, sizeof(args), "{\"n\":%d}", i);
				e.ev.args = strview_c(args);
			}
		}
		if (i % 1000 == 500) {
			/* As a file holds it: with a key no column holds, or
			 * with blanks and only columns' keys. */
			ostream o;

			MUST(ostream_open_mem(&o) == 0);
			jsonw_init(&w, &o);
			jsonw_event_begin(&w, &e.ev);
			ostream_puts(&o, (i / 1000) & 1 ? ",\"tts\":1" : "");
			jsonw_event_end(&w);
			MUST(o.len < sizeof(text) && o.buf[1] == '{');
			if ((i / 1000) & 1) {
				memcpy(text, o.buf + 1, o.len - 1);
				e.raw = (strview){text, o.len - 1};
			} else {
				memcpy(text, "{ ", 2);
				memcpy(text + 2, o.buf + 2, o.len - 2);
				e.raw = (strview){text, o.len};
			}
			ostream_finish(&o);
		}
		emit2(&t, &e);
	}
	MUST(t.a->end(t.a, &sm) == 0);
	MUST(t.b->end(t.b, &sm) == 0);
	t.a->free(t.a);
	t.b->free(t.b);
	close(fd);
	meta->origin = NULL;
	meta->host = NULL;
	model_free(meta);
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "to-json") == 0) {
		int err = h5_to_json(argv[2], argv[3]);

		if (err < 0)
			fprintf(stderr, "test_h5: %s: %s\n", argv[2], strerror(-err));
		return err < 0;
	}
	if (argc == 4 && strcmp(argv[1], "chunks") == 0) {
		test_chunks(argv[2], argv[3]);
		return check_done("test_h5");
	}
	if (argc != 3 || strcmp(argv[1], "unit") != 0) {
		fprintf(stderr, "usage: test_h5 unit DIR | test_h5 chunks DIR NAME | "
				"test_h5 to-json IN.h5 OUT.json\n");
		return 2;
	}
	test_args(argv[2]);
	test_model_round_trip(argv[2]);
	test_synthetic(argv[2]);
	test_ranks(argv[2]);
	return check_done("test_h5");
}
