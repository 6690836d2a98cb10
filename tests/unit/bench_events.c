/*
 * Write-speed benchmark of events_write (not a test): one process with N
 * marks (half instants, half slices, a few with args), written as plain
 * JSON and as gzip at levels 1 and 6.
 *
 * Usage: bench_events [N] [OUTDIR]   (defaults: 1000000, /tmp)
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "events.h"
#include "model.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Size of the plain JSON, to give the gzip runs' speed in JSON bytes too. */
static uint64_t json_bytes;

static void run(const model_trace *t, const char *dir, const char *name, int level)
{
	char path[4096];
	events_opts opts = {.gzip_level = level};
	events_stats st;
	double t0, dt;
	int fd, err;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		perror(path);
		exit(1);
	}
	t0 = now();
	err = events_write(t, fd, events_format_for_path(path), &opts, &st);
	close(fd);
	dt = now() - t0;
	if (err < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(-err));
		exit(1);
	}
	if (level == 0)
		json_bytes = st.bytes;
	printf("%-14s level %d: %8" PRIu64 " events, %6.1f MB in %.3f s: %5.2f M events/s, "
	       "%6.1f MB/s JSON, %6.1f MB/s written\n",
	       name, level, st.events, (double)st.bytes / 1e6, dt, (double)st.events / dt / 1e6,
	       (double)json_bytes / dt / 1e6, (double)st.bytes / dt / 1e6);
	unlink(path);
}

int main(int argc, char **argv)
{
	static const char *const av[] = {"/usr/bin/bench", "--flag", "value", NULL};
	size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
	const char *dir = argc > 2 ? argv[2] : "/tmp";
	model_trace *t = model_new();
	model_process *p;
	model_segment *s;
	const char *names[4], *cat, *args;
	size_t i;

	if (t == NULL || (p = model_add_process(t, 4242)) == NULL ||
	    (s = model_add_segment(t, p)) == NULL)
		return 1;
	t->start_ns = 1000000000;
	t->end_ns = t->start_ns + (int64_t)n * 1000 + 1000;
	p->start_ns = t->start_ns;
	s->start_ns = t->start_ns;
	s->argv = model_strvdup(t, av, 3);
	s->argc = 3;
	s->instrumented = true;
	names[0] = model_strdup(t, "read_config");
	names[1] = model_strdup(t, "compute");
	names[2] = model_strdup(t, "wait");
	names[3] = model_strdup(t, "write \"output\"");
	cat = model_strdup(t, "user");
	args = model_strdup(t, "{\"bytes\":4096,\"path\":\"/tmp/x\"}");
	for (i = 0; i < n; i++) {
		model_mark *m = model_add_mark(t, p);

		if (m == NULL)
			return 1;
		m->ts_ns = t->start_ns + (int64_t)i * 1000 + (int64_t)(i % 7);
		m->dur_ns = (i & 1) ? 733 + (int64_t)(i % 100) : -1;
		m->tid = 4242 + (int64_t)(i % 4);
		m->name = names[i % 4];
		m->cat = cat;
		m->args_json = (i % 8 == 0) ? args : NULL;
	}
	run(t, dir, "bench.json", 0);
	run(t, dir, "bench.json.gz", 1);
	run(t, dir, "bench.json.gz", 6);
	model_free(t);
	return 0;
}
