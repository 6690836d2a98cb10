/*
 * bench_report.c - the HTML sink fed directly, without a reader.
 *
 *   bench_report check OUT.html
 *       unit test: self time of nested slices in pre-order (sorted), in
 *       post-order (VizTracer-like: parent after its children) and as B/E
 *       pairs, read back from the page's embedded JSON. Exit 0 or 1.
 *   bench_report bench OUT.html [PROCS] [EVENTS]
 *       a synthetic trace (default 10,000 processes, 10,000,000 events:
 *       a process tree, images, nested function slices, counters) written
 *       as a report; prints the time and size for docs/BENCHMARKS.md.
 *   bench_report json OUT.json [PROCS] [EVENTS]
 *       the same trace as Chrome JSON, for timing `forktrace report` on
 *       it end to end.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sink.h"

static int send(trace_sink *s, char ph, const char *name, const char *cat, int64_t pid, int64_t tid,
		int64_t ts, int64_t dur, const char *args)
{
	sink_event e = {.ev = {
				.ph = ph,
				.name = strview_c(name),
				.cat = strview_c(cat),
				.pid = pid,
				.tid = tid,
				.ts_ns = ts,
				.dur_ns = dur,
				.args = strview_c(args),
			}};

	return s->event(s, &e);
}

static double clock_s(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The JSON the page embeds, parsed. */
static json_t *page_data(const char *path)
{
	FILE *f = fopen(path, "r");
	static char buf[1 << 22];
	size_t n;
	char *a, *b;

	if (f == NULL)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	a = strstr(buf, "id=\"ft-data\">");
	if (a == NULL)
		return NULL;
	a += strlen("id=\"ft-data\">");
	b = strstr(a, "</script>");
	if (b == NULL)
		return NULL;
	return json_loadb(a, (size_t)(b - a), 0, NULL);
}

/* name -> [calls, total, self, max] from data.overall. */
static int overall(json_t *d, const char *name, int64_t out[4])
{
	json_t *names = json_object_get(d, "names"), *ov = json_object_get(d, "overall");

	for (size_t k = 0; k + 5 < json_array_size(ov) + 0; k += 6) {
		size_t id = (size_t)json_integer_value(json_array_get(ov, k));

		if (strcmp(json_string_value(json_array_get(names, id)), name) != 0)
			continue;
		for (int i = 0; i < 4; i++)
			out[i] = json_integer_value(json_array_get(ov, k + 1 + (size_t)i));
		return 0;
	}
	return -1;
}

static int expect(json_t *d, const char *name, int64_t calls, int64_t total, int64_t self)
{
	int64_t v[4];

	if (overall(d, name, v) < 0) {
		fprintf(stderr, "FAIL: no overall row for %s\n", name);
		return 1;
	}
	if (v[0] != calls || v[1] != total || v[2] != self) {
		fprintf(stderr,
			"FAIL: %s: calls %lld total %lld self %lld, expected %lld %lld %lld\n",
			name, (long long)v[0], (long long)v[1], (long long)v[2], (long long)calls,
			(long long)total, (long long)self);
		return 1;
	}
	return 0;
}

static int check(const char *out)
{
	int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644), err, bad = 0;
	sink_meta meta = {0};
	trace_sink *s = sink_html_new(fd, NULL, &err);
	json_t *d;

	if (s == NULL)
		return 1;
	s->begin(s, &meta);
	/* pid 1, pre-order: main [0,100) { a [10,40) { b [20,30) }, a [50,60) } */
	send(s, 'X', "main", "f", 1, 1, 0, 100, NULL);
	send(s, 'X', "a", "f", 1, 1, 10, 30, NULL);
	send(s, 'X', "b", "f", 1, 1, 20, 10, NULL);
	send(s, 'X', "a", "f", 1, 1, 50, 10, NULL);
	send(s, 'X', "top", "f", 1, 1, 200, 5, NULL);
	/* pid 2, the same tree in post-order (names suffixed 2). */
	send(s, 'X', "b2", "f", 2, 2, 20, 10, NULL);
	send(s, 'X', "a2", "f", 2, 2, 10, 30, NULL);
	send(s, 'X', "a2", "f", 2, 2, 50, 10, NULL);
	send(s, 'X', "main2", "f", 2, 2, 0, 100, NULL);
	/* pid 3, B/E pairs: r [0,50) { q [5,15) q [20,30) } */
	send(s, 'B', "r", "f", 3, 3, 0, JSONW_NO_TIME, NULL);
	send(s, 'B', "q", "f", 3, 3, 5, JSONW_NO_TIME, NULL);
	send(s, 'E', "", "f", 3, 3, 15, JSONW_NO_TIME, NULL);
	send(s, 'B', "q", "f", 3, 3, 20, JSONW_NO_TIME, NULL);
	send(s, 'E', "", "f", 3, 3, 30, JSONW_NO_TIME, NULL);
	send(s, 'E', "", "f", 3, 3, 50, JSONW_NO_TIME, NULL);
	err = s->end(s, &meta);
	s->free(s);
	close(fd);
	if (err < 0) {
		fprintf(stderr, "FAIL: end: %s\n", strerror(-err));
		return 1;
	}
	d = page_data(out);
	if (d == NULL) {
		fprintf(stderr, "FAIL: no parsable data in %s\n", out);
		return 1;
	}
	bad |= expect(d, "main", 1, 100, 60);
	bad |= expect(d, "a", 2, 40, 30);
	bad |= expect(d, "b", 1, 10, 10);
	bad |= expect(d, "top", 1, 5, 5);
	bad |= expect(d, "main2", 1, 100, 60);
	bad |= expect(d, "a2", 2, 40, 30);
	bad |= expect(d, "b2", 1, 10, 10);
	bad |= expect(d, "r", 1, 50, 30);
	bad |= expect(d, "q", 2, 20, 20);
	json_decref(d);
	if (!bad)
		printf("PASS: self time in pre-order, post-order and B/E\n");
	return bad;
}

/*
 * json: the same synthetic trace written as Chrome JSON instead, so that
 * `forktrace report TRACE.json` can be timed end to end (reader included).
 */
static int bench(const char *out, long nprocs, long nevents, bool as_json)
{
	static const char *fn[] = {"parse",      "lex",      "optimize", "emit",
				   "read_input", "solve",    "reduce",   "write_output",
				   "hash",       "compress", "alloc",    "sort"};
	static const char *progs[] = {"make", "sh", "cc1", "as", "ld", "python3", "solver"};
	int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644), err;
	model_trace mt = {.host = "bench", .origin = "bench_report", .start_ns = 0, .end_ns = -1};
	sink_meta meta = {.model = &mt, .processes = (uint64_t)nprocs};
	trace_sink *s = as_json ? sink_json_new(fd, -1, &err) : sink_html_new(fd, NULL, &err);
	long per = nevents / nprocs, sent = 0;
	char args[1024];
	double t, cpu;

	if (s == NULL)
		return 1;
	t = clock_s(CLOCK_MONOTONIC);
	cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID);
	s->begin(s, &meta);
	for (long i = 0; i < nprocs; i++) {
		int64_t pid = 1000 + i, parent = i == 0 ? -1 : 1000 + (i - 1) / 8;
		int64_t start = i * 200000, life = 50000000 + (i % 97) * 1000000;
		const char *prog = progs[i == 0 ? 0 : 1 + i % 6];
		int64_t ts = start + 1000;
		long k = 6;

		snprintf(
			args, sizeof(args),
			"{\"pid\":%lld,\"ppid\":%lld,\"parent\":%lld,\"name\":\"%s\",\"exe\":\"/usr/bin/%s\","
			"\"argv\":[\"%s\",\"-c\",\"file%ld.c\"],\"cwd\":\"/src\",\"start_ns\":%lld,"
			"\"end_ns\":%lld,\"exit\":{\"kind\":\"code\",\"code\":%d},\"instrumented\":true,"
			"\"rusage\":{\"source\":\"wait\",\"user_ns\":%lld,\"sys_ns\":%lld,"
			"\"maxrss_kb\":%ld,\"minflt\":%ld,\"majflt\":%ld,\"nvcsw\":%ld,\"nivcsw\":%ld,"
			"\"inblock\":%ld,\"oublock\":%ld}}",
			(long long)pid, (long long)parent, (long long)parent, prog, prog, prog, i,
			(long long)start, (long long)(start + life), i % 500 == 7 ? 1 : 0,
			(long long)(life * 9 / 10 + i), (long long)(life / 20 + i),
			20000 + i * 13 % 900000, 3000 + i, i % 3, 40 + i % 17, 5 + i % 11,
			i % 5 * 8, 16 + i % 64);
		send(s, 'M', "forktrace_process", NULL, pid, pid, JSONW_NO_TIME, JSONW_NO_TIME,
		     args);
		send(s, 'M', "thread_name", NULL, pid, pid, JSONW_NO_TIME, JSONW_NO_TIME,
		     "{\"name\":\"main\"}");
		send(s, 'X', prog, "process", pid, pid, start, life, "{\"image\":0}");
		if (i > 0) {
			send(s, 's', "fork", "fork", parent, parent, start, JSONW_NO_TIME, NULL);
			send(s, 'f', "fork", "fork", pid, pid, start, JSONW_NO_TIME, NULL);
		}
		send(s, 'C', "memory", NULL, pid, pid, start, JSONW_NO_TIME, "{\"rss\":1000}");
		/* Nested calls in post-order: 3 leaves then their parent. */
		while (k + 4 <= per) {
			int64_t d = 1000 + (k * 37) % 5000;

			for (int j = 0; j < 3; j++)
				send(s, 'X', fn[(k + (long)j) % 12], "f", pid, pid,
				     ts + j * (d + 10), d, NULL);
			send(s, 'X', fn[k % 5], "f", pid, pid, ts, 3 * (d + 10), NULL);
			ts += 3 * (d + 10) + 100;
			k += 4;
		}
		sent += k;
		if (s->event == NULL)
			break;
	}
	err = s->end(s, &meta);
	t = clock_s(CLOCK_MONOTONIC) - t;
	cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - cpu;
	/* CPU time beside wall time: what a test can hold to a bar on a busy machine. */
	printf("bench: %ld processes, %ld events, %s %s written in %.2f s, %.2f MB, %.2f s CPU\n",
	       nprocs, sent, as_json ? "trace" : "report", out, t, (double)s->stats.bytes / 1e6,
	       cpu);
	s->free(s);
	close(fd);
	return err < 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "check") == 0)
		return check(argv[2]);
	if (argc >= 3 && strcmp(argv[1], "bench") == 0)
		return bench(argv[2], argc > 3 ? atol(argv[3]) : 10000,
			     argc > 4 ? atol(argv[4]) : 10000000, false);
	if (argc >= 3 && strcmp(argv[1], "json") == 0)
		return bench(argv[2], argc > 3 ? atol(argv[3]) : 10000,
			     argc > 4 ? atol(argv[4]) : 10000000, true);
	fprintf(stderr, "usage: bench_report check|bench OUT.html [PROCS] [EVENTS]\n");
	return 2;
}
