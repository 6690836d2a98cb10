/*
 * bench_walk - the main thread's part of writing a trace, alone (not a
 * test): the agents' spill files are read into a model the way `forktrace
 * combine` reads them (spill_prepare), and its events are sent, N times,
 * into a sink that only counts them and sums their fields (so that
 * nothing is optimized away), through each path an event takes:
 *
 *   emit      events_emit straight into the counting sink
 *   critpath  events_emit through the critical path's sink (events_write)
 *   run       merge_inputs of the model as `forktrace run` writes it
 *   combine   merge_inputs of the model as `forktrace combine` writes it
 *   json      merge_inputs of the model as `forktrace run` writes it, into
 *             the JSON sink (the formatting and writes on its worker
 *             threads, as in a run) on /dev/null, or on FILE with -o (to
 *             compare the bytes of two builds): the sum is 0
 *
 * Prints ns per event of each (the best of the rounds) and the checksum,
 * which must be the same for every build that writes the same trace.
 *
 * Usage: bench_walk [-r ROUNDS] [-p PATH] [-c CHUNKS] [-o FILE] SPILL_FILE_OR_DIR...
 *   PATH: emit, critpath, run, combine, json or all (default all but json)
 *   CHUNKS: only the first CHUNKS record chunks of each thread (a part of
 *   a big trace, for callgrind)
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "merge.h"
#include "spill.h"

typedef struct count_sink {
	trace_sink base;
	uint64_t events;
	uint64_t sum;
} count_sink;

/* The length and the first byte: enough to see a name or an args text
 * change, cheap enough not to hide the walk. */
static inline uint64_t sv_sum(strview v)
{
	return v.n > 0 ? v.n * 257 + (unsigned char)v.p[0] : 0;
}

static int count_begin(trace_sink *s, const sink_meta *meta)
{
	(void)s;
	(void)meta;
	return 0;
}

static int count_event(trace_sink *s, const sink_event *e)
{
	count_sink *c = (count_sink *)s;
	const jsonw_event *ev = &e->ev;
	uint64_t h = (uint64_t)ev->ph + (uint64_t)ev->ts_ns + (uint64_t)ev->dur_ns * 3 +
		     (uint64_t)ev->pid + (uint64_t)ev->tid * 5 + sv_sum(ev->name) +
		     sv_sum(ev->cat) * 7 + sv_sum(ev->args) * 11;

	c->events++;
	c->sum = c->sum * 31 + h;
	s->stats.events++;
	return 0;
}

static int count_end(trace_sink *s, const sink_meta *meta)
{
	(void)s;
	(void)meta;
	return 0;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The model as a run writes it into the JSON sink on out (NULL:
 * /dev/null); its events counted in c. Returns 0 or a negative errno. */
static int json_pass(spill_inputs *sp, const char *out, count_sink *c)
{
	merge_opts o = {.model_as_trace = true};
	merge_source src = {.model = sp->model, .name = sp->name};
	merge_result res;
	trace_sink *s;
	int fd, err;

	fd = open(out != NULL ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	s = sink_json_new(fd, -1, &err);
	if (s != NULL) {
		err = merge_inputs(&src, 1, &o, s, &res);
		c->events = res.out.events;
		merge_result_free(&res);
		s->free(s);
	}
	close(fd);
	return err;
}

/* One pass of path over the model m into c (json: into out). Returns 0
 * or a negative errno. */
static int one_pass(const char *path, spill_inputs *sp, count_sink *c, const char *out)
{
	trace_sink *s = &c->base;
	sink_meta meta = {.model = sp->model, .processes = sp->model->nprocs};
	merge_result res;
	int err;

	if (strcmp(path, "emit") == 0)
		return events_emit(sp->model, s);
	if (strcmp(path, "json") == 0)
		return json_pass(sp, out, c);
	if (strcmp(path, "critpath") == 0) {
		trace_sink *cps = sink_critpath_new(s, &err);

		if (cps == NULL)
			return err;
		err = cps->begin(cps, &meta);
		if (err == 0)
			err = events_emit(sp->model, cps);
		if (err == 0)
			err = cps->end(cps, &meta);
		cps->free(cps);
		return err;
	}
	if (strcmp(path, "run") == 0 || strcmp(path, "combine") == 0) {
		merge_opts o = {.model_as_trace = strcmp(path, "run") == 0};
		merge_source src = {.model = sp->model, .name = sp->name};

		err = merge_inputs(&src, 1, &o, s, &res);
		merge_result_free(&res);
		return err;
	}
	return -EINVAL;
}

/* Cuts every thread's records after its first n chunks. */
static void keep_chunks(model_trace *t, long n)
{
	for (size_t i = 0; i < t->nprocs; i++) {
		for (size_t j = 0; j < t->procs[i]->nthreads; j++) {
			model_thread *th = &t->procs[i]->threads[j];
			model_chunk *ch = th->chunks;

			if (n == 0) {
				th->chunks = th->chunks_last = NULL;
				continue;
			}
			for (long k = 1; ch != NULL && k < n; k++)
				ch = ch->next;
			if (ch != NULL) {
				ch->next = NULL;
				th->chunks_last = ch;
			}
		}
	}
}

int main(int argc, char **argv)
{
	static const char *const all[] = {"emit", "critpath", "run", "combine", NULL};
	const char *one[2] = {NULL, NULL};
	const char *const *paths = all;
	const char *out = NULL;
	int rounds = 3, opt;
	long chunks = -1;
	spill_inputs sp;
	int err;

	while ((opt = getopt(argc, argv, "r:p:c:o:")) != -1) {
		if (opt == 'c') {
			chunks = atol(optarg);
		} else if (opt == 'o') {
			out = optarg;
		} else if (opt == 'r') {
			rounds = atoi(optarg);
		} else if (opt == 'p') {
			one[0] = optarg;
			paths = strcmp(optarg, "all") == 0 ? all : one;
		} else {
			fprintf(stderr,
				"usage: bench_walk [-r ROUNDS] [-p PATH] [-c CHUNKS] [-o FILE] "
				"SPILL...\n");
			return 2;
		}
	}
	if (optind >= argc || rounds < 1) {
		fprintf(stderr,
			"usage: bench_walk [-r ROUNDS] [-p PATH] [-c CHUNKS] [-o FILE] SPILL...\n");
		return 2;
	}
	err = spill_prepare((const char *const *)argv + optind, (size_t)(argc - optind), &sp);
	if (err < 0 || sp.model == NULL) {
		fprintf(stderr, "bench_walk: no spill files read (%s)\n", strerror(-err));
		spill_release(&sp);
		return 1;
	}
	if (chunks >= 0)
		keep_chunks(sp.model, chunks);
	for (size_t k = 0; paths[k] != NULL; k++) {
		double best = 0;
		count_sink c;

		for (int r = 0; r < rounds; r++) {
			double t0;

			c = (count_sink){.base = {.begin = count_begin,
						  .event = count_event,
						  .end = count_end}};
			t0 = now();
			err = one_pass(paths[k], &sp, &c, out);
			t0 = now() - t0;
			if (err < 0) {
				fprintf(stderr, "bench_walk: %s: %s\n", paths[k], strerror(-err));
				spill_release(&sp);
				return 1;
			}
			if (r == 0 || t0 < best)
				best = t0;
		}
		printf("%-8s %10" PRIu64
		       " events  %7.2f ns/event  %6.2f M events/s  sum %016" PRIx64 "\n",
		       paths[k], c.events, best * 1e9 / (double)(c.events ? c.events : 1),
		       (double)c.events / best / 1e6, c.sum);
	}
	spill_release(&sp);
	return 0;
}
