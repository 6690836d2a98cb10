/*
 * Write speed of the HDF5 sink against the JSON sink on the same events
 * (not a test): N events over P processes, interleaved as a combine hands
 * them over (B/E pairs, X slices, instants with args), sent to one sink.
 * Prints the time, events/s, output size and peak RSS of the process, so
 * run it once per sink.
 *
 * Usage: bench_h5 json|h5 [N] [P] [OUT] [LEVEL]
 *   defaults: 1000000 events, 8 processes, /tmp/bench_h5.{json,h5}, the
 *   sink's default deflate level
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "h5.h"
#include "sink.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	static const char *const names[] = {"read_config",      "compute", "wait",
					    "write \"output\"", "parse",   "io/flush"};
	bool h5 = argc > 1 && strcmp(argv[1], "h5") == 0;
	uint64_t n = argc > 2 ? strtoull(argv[2], NULL, 10) : 1000000;
	int procs = argc > 3 ? atoi(argv[3]) : 8;
	const char *out = argc > 4 ? argv[4] : h5 ? "/tmp/bench_h5.h5" : "/tmp/bench_h5.json";
	events_opts opts = {.gzip_level = argc > 5 ? atoi(argv[5]) : 0};
	model_trace *t = model_new();
	sink_meta meta = {.model = t, .processes = (uint64_t)procs};
	int depth[4096] = {0};
	uint64_t x = 88172645463325252ULL, i;
	struct rusage ru;
	trace_sink *s;
	char args[64];
	int fd = -1, err;
	double t0, dt;

	if (t == NULL || procs < 1 || procs > 4096)
		return 2;
	t->origin = "bench";
	if (h5) {
		s = sink_h5_new(out, &opts, &err);
	} else {
		fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		s = fd >= 0 ? sink_json_new(fd, -1, &err) : NULL;
	}
	if (s == NULL) {
		fprintf(stderr, "bench_h5: %s: cannot create\n", out);
		return 1;
	}
	t0 = now();
	err = s->begin(s, &meta);
	for (i = 0; i < n && err == 0; i++) {
		int p;
		sink_event e = {.ev = {.dur_ns = JSONW_NO_TIME}};

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p = (int)(x % (uint64_t)procs);
		e.ev.pid = 10000 + p;
		e.ev.tid = 10000 + p;
		e.ev.ts_ns = 1000000000 + (int64_t)i * 1000;
		e.ev.name = strview_c(names[(x >> 20) % 6]);
		e.ev.cat = strview_c("user");
		switch ((x >> 32) % 4) {
		case 0:
			e.ev.ph = 'X';
			e.ev.dur_ns = 733 + (int64_t)(x % 100);
			break;
		case 1:
			e.ev.ph = 'i';
			e.ev.scope = 't';
			snprintf(args, sizeof(args), "{\"bytes\":%" PRIu64 ",\"path\":\"/tmp/x\"}",
				 x >> 44);
			e.ev.args = strview_c(args);
			break;
		default:
			e.ev.ph = depth[p] < 8 && ((x >> 40) & 1) ? 'B' : depth[p] > 0 ? 'E' : 'B';
			depth[p] += e.ev.ph == 'B' ? 1 : -1;
			break;
		}
		err = s->event(s, &e);
	}
	if (err == 0)
		err = s->end(s, &meta);
	dt = now() - t0;
	getrusage(RUSAGE_SELF, &ru);
	printf("%-4s %8" PRIu64 " events, %3d processes: %.3f s, %5.2f M events/s, %7.1f MB, "
	       "peak RSS %ld MiB\n",
	       h5 ? "h5" : "json", s->stats.events, procs, dt, (double)s->stats.events / dt / 1e6,
	       (double)s->stats.bytes / 1e6, ru.ru_maxrss / 1024);
	s->free(s);
	if (fd >= 0)
		close(fd);
	t->origin = NULL;
	model_free(t);
	if (err < 0)
		fprintf(stderr, "bench_h5: %s\n", strerror(-err));
	return err < 0;
}
