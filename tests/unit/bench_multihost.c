/*
 * Write-speed benchmark of a multi-host run's merge (not a test): a head's
 * model and K nodes' parts, each one process with N marks (half instants,
 * half slices), written as JSON through merge_inputs as `forktrace run`
 * writes them. The head's events go out as they are; each part's through
 * the pid map, the id namespaces and its clock map (measured samples,
 * drift): the cost per event of a part against the head's is what the
 * multi-host merge adds.
 *
 * Usage: bench_multihost [N] [K] [OUTDIR]   (defaults: 1000000, 2, /tmp)
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "merge.h"
#include "model.h"
#include "sink.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One process (pid 4242, on every host) with n marks; a node's part with
 * clock samples every 2 s when node is set. */
static model_trace *build(size_t n, const char *host, bool node)
{
	static const char *const av[] = {"/usr/bin/bench", "--flag", "value", NULL};
	model_trace *t = model_new();
	model_process *p;
	model_segment *s;
	const char *names[2];

	if (t == NULL || (p = model_add_process(t, 4242)) == NULL ||
	    (s = model_add_segment(t, p)) == NULL)
		exit(1);
	t->host = model_strdup(t, host);
	t->origin = model_strdup(t, "forktrace run");
	t->start_ns = 1000000000;
	t->end_ns = t->start_ns + (int64_t)n * 1000 + 1000;
	p->start_ns = t->start_ns;
	s->start_ns = t->start_ns;
	s->argv = model_strvdup(t, av, 3);
	s->argc = 3;
	s->instrumented = true;
	names[0] = model_strdup(t, "compute");
	names[1] = model_strdup(t, "wait");
	for (size_t i = 0; i < n; i++) {
		model_mark *m = model_add_mark(t, p);

		if (m == NULL)
			exit(1);
		m->ts_ns = t->start_ns + (int64_t)i * 1000;
		m->dur_ns = (i & 1) ? 733 : -1;
		m->tid = 4242;
		m->name = names[i & 1];
		m->cat = names[0];
	}
	if (node) {
		t->node.is_node = true;
		t->node.launcher_pid = 4242;
		for (int64_t k = 0; k <= t->end_ns / 2000000000 + 1; k++)
			if (model_add_clock_sample(t, k * 2000000000, 1000000000000 + k * 100000,
						   20000) < 0)
				exit(1);
	}
	return t;
}

static double run(const merge_source *src, size_t n, const char *path, events_stats *st)
{
	merge_opts o = {.model_as_trace = true};
	merge_result res;
	trace_sink *s;
	double t0;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644), err;

	if (fd < 0) {
		perror(path);
		exit(1);
	}
	t0 = now();
	s = sink_json_new(fd, -1, &err);
	if (s == NULL || (err = merge_inputs(src, n, &o, s, &res)) < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(-err));
		exit(1);
	}
	*st = res.out;
	merge_result_free(&res);
	s->free(s);
	close(fd);
	unlink(path);
	return now() - t0;
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
	size_t k = argc > 2 ? strtoull(argv[2], NULL, 10) : 2;
	const char *dir = argc > 3 ? argv[3] : "/tmp";
	merge_source *src = calloc(k + 1, sizeof(*src));
	char path[4096], name[32];
	events_stats st;
	double alone, all;

	if (src == NULL)
		return 1;
	snprintf(path, sizeof(path), "%s/bench_multihost.json", dir);
	src[0] = (merge_source){.model = build(n, "head", false), .name = "head"};
	for (size_t i = 1; i <= k; i++) {
		snprintf(name, sizeof(name), "node%zu", i);
		src[i] = (merge_source){.model = build(n, name, true), .name = strdup(name)};
	}
	alone = run(src, 1, path, &st);
	printf("head alone:      %8" PRIu64 " events, %6.1f MB in %.3f s: %5.2f M events/s\n",
	       st.events, (double)st.bytes / 1e6, alone, (double)st.events / alone / 1e6);
	all = run(src, k + 1, path, &st);
	printf("head + %zu parts: %8" PRIu64 " events, %6.1f MB in %.3f s: %5.2f M events/s; "
	       "a part's event costs %.2fx a head's\n",
	       k, st.events, (double)st.bytes / 1e6, all, (double)st.events / all / 1e6,
	       (all - alone) / (double)k / alone);
	for (size_t i = 0; i <= k; i++) {
		if (i > 0)
			free((char *)src[i].name);
		model_free((model_trace *)src[i].model);
	}
	free(src);
	return 0;
}
