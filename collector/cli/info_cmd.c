/*
 * info_cmd.c - `forktrace info FILE...`: what a trace holds, read in one
 * streaming pass (info_read, combine/include/merge.h).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "say.h"
#include "merge.h"
#include "internal.h"
#include "spill.h"

/* Deeper process chains are printed at this indentation. */
#define MAX_INDENT 32
/* Thread names listed per process. */
#define MAX_THREAD_NAMES 6

static const char info_usage[] =
	"Usage: forktrace info [OPTIONS] FILE...\n"
	"\n"
	"Say what a trace file holds: where it comes from (forktrace run,\n"
	"forktrace combine, VizTracer, another tool), its events by kind (ph),\n"
	"the time span they cover, lost events, and its processes - as a tree\n"
	"with exit statuses when the trace has forktrace's process records,\n"
	"else as a list - with their threads.\n"
	"\n"
	"FILE is Chrome Trace Event JSON, plain or gzip (by content), in object\n"
	"or array form, a forktrace HDF5 trace, or anything 'forktrace combine'\n"
	"reads: a directory stands for the trace files in it (each shown), spill\n"
	"files for the one trace they make, '-' for standard input. A file is\n"
	"read in one pass, in a stream (a pipe or FIFO too).\n"
	"\n"
	"Exit status: 0 when every file was read to its end, 1 when a file is\n"
	"truncated, damaged or cannot be read, 2 for a usage error.\n"
	"\n"
	"Options:\n"
	"  -h, --help    show this help.\n"
	"\n"
	"Examples:\n"
	"  forktrace info trace.json\n"
	"  forktrace info result_*.json.gz\n";

static void print_ms(const char *label, int64_t ns)
{
	printf("%s%.3f ms", label, (double)ns / 1e6);
}

static void print_phases(const info_report *r)
{
	bool first = true;

	printf("  events:     %" PRIu64, r->events);
	for (int ph = 0; ph < 128; ph++) {
		if (r->by_phase[ph] == 0)
			continue;
		if (ph == 0)
			printf("%s(no ph) %" PRIu64, first ? " (" : ", ", r->by_phase[ph]);
		else
			printf("%s%c %" PRIu64, first ? " (" : ", ", ph, r->by_phase[ph]);
		first = false;
	}
	printf("%s\n", first ? "" : ")");
}

/* hosts: the trace is of several hosts: each process says its own. */
static void print_process(const info_process *p, unsigned depth, bool hosts)
{
	unsigned ind = depth < MAX_INDENT ? depth : MAX_INDENT;

	printf("  %*s%" PRId64, (int)(2 * ind), "", p->pid);
	if (p->host_pid != p->pid)
		printf(" (host pid %" PRId64 ")", p->host_pid);
	printf(" %s", p->name != NULL ? say_esc(p->name) : "?");
	if (hosts && p->host != NULL)
		printf(" on %s", say_esc(p->host));
	if (p->rank >= 0)
		printf(" rank %" PRId64, p->rank);
	if (p->has_record)
		printf(" [%s]", p->exit != NULL ? say_esc(p->exit) : "exit unknown");
	printf(", %" PRIu64 " events", p->events);
	if (p->lost_events > 0)
		printf(", %" PRIu64 " lost", p->lost_events);
	printf(", %zu thread%s", p->nthreads, p->nthreads == 1 ? "" : "s");
	for (size_t i = 0; i < p->nthreads && i < MAX_THREAD_NAMES; i++)
		printf("%s%s", i == 0 ? ": " : ", ",
		       p->thread_names[i] != NULL ? say_esc(p->thread_names[i]) : "(unnamed)");
	if (p->nthreads > MAX_THREAD_NAMES)
		printf(", ...");
	if (p->origin != NULL)
		printf(" (was %s)", say_esc(p->origin));
	printf("\n");
}

static const info_process *find(const info_report *r, int64_t pid)
{
	size_t lo = 0, hi = r->nprocs;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (r->procs[mid].pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < r->nprocs && r->procs[lo].pid == pid ? &r->procs[lo] : NULL;
}

/*
 * The processes as a tree (parents from forktrace_process records),
 * depth-first with an explicit stack: a fork chain can be thousands deep.
 * Children are found by a scan per process: info is not a hot path, and
 * traces with forktrace records have at most tens of thousands.
 */
static int print_tree(const info_report *r)
{
	size_t n = r->nprocs, top = 0;
	size_t *stack = malloc((n + 1) * sizeof(*stack));
	unsigned *depth = malloc((n + 1) * sizeof(*depth));
	bool *seen = calloc(n + 1, sizeof(*seen));

	if (stack == NULL || depth == NULL || seen == NULL) {
		free(stack);
		free(depth);
		free(seen);
		return -1;
	}
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = n; i-- > 0;) {
			const info_process *p = &r->procs[i];
			bool root = p->parent < 0 || find(r, p->parent) == NULL;

			if (seen[i] || (pass == 0 && !root))
				continue;
			stack[top] = i;
			depth[top++] = 0;
			/* Pushed backwards: popped in pid order. */
			seen[i] = true;
		}
		while (top > 0) {
			size_t q = stack[--top];
			unsigned d = depth[top];

			print_process(&r->procs[q], d, r->nhosts > 0);
			for (size_t j = n; j-- > 0;)
				if (!seen[j] && r->procs[j].parent == r->procs[q].pid) {
					seen[j] = true;
					stack[top] = j;
					depth[top++] = d + 1;
				}
		}
	}
	free(stack);
	free(depth);
	free(seen);
	return 0;
}

/*
 * The hosts of a multi-host trace, one line each: its processes, how its
 * clock was put on the trace's (offset, drift, error bound, samples),
 * and whether its part is whole (lost: when; missing: why and where its
 * part went).
 */
static void print_hosts(const info_report *r)
{
	printf("  hosts:      %zu\n", r->nhosts);
	for (size_t i = 0; i < r->nhosts; i++) {
		const info_host *h = &r->hosts[i];
		const char *state = h->state != NULL ? h->state : "?";

		printf("    %s%s: ", h->name != NULL ? say_esc(h->name) : "?",
		       h->role != NULL && !strcmp(h->role, "head") ? " (head)" : "");
		if (!strcmp(state, "missing")) {
			printf("missing, %s", h->why != NULL ? say_esc(h->why) : "no part");
			if (h->where != NULL)
				printf("; its part went to %s", say_esc(h->where));
			printf("\n");
			continue;
		}
		printf("%" PRIu64 " process%s, ", h->processes, h->processes == 1 ? "" : "es");
		if (h->clock != NULL && !strcmp(h->clock, "not aligned"))
			printf("not aligned: no head in this trace; %s",
			       h->anchor ? "realtime anchor available" : "no realtime anchor");
		else
			printf("clock %s", h->clock != NULL ? say_esc(h->clock) : "?");
		if (h->clock != NULL && strcmp(h->clock, "reference") != 0 &&
		    strcmp(h->clock, "none") != 0 && strcmp(h->clock, "not aligned") != 0)
			printf(" (offset %+.6f s, drift %+.3f ppm", (double)h->offset_ns / 1e9,
			       h->drift_ppm);
		if (h->clock != NULL && !strcmp(h->clock, "measured"))
			printf(", error bound %.1f us, %" PRIu64 " sample%s)",
			       (double)h->err_ns / 1e3, h->samples, h->samples == 1 ? "" : "s");
		else if (h->clock != NULL && strcmp(h->clock, "reference") != 0 &&
			 strcmp(h->clock, "none") != 0 && strcmp(h->clock, "not aligned") != 0)
			printf(", error bound unknown)");
		if (!strcmp(state, "lost"))
			print_ms(", lost at ", h->lost_ns);
		else if (!strcmp(state, "incomplete"))
			print_ms(", incomplete: the head stopped waiting for it at ", h->lost_ns);
		else
			printf(", %s", say_esc(state));
		printf("\n");
	}
}

/* What path holds; name is what to call it; in_dir as info_read's. */
/* What the trace at path (or, when m is not NULL, the trace of model m)
 * holds, under name. */
static int show(const char *path, bool in_dir, const model_trace *m, const char *name)
{
	info_report r;
	bool records = false;
	size_t threads = 0;
	int err = m != NULL ? info_read_model(m, name, &r) : info_read(path, in_dir, &r);

	if (err < 0) {
		fprintf(stderr, "forktrace: %s: out of memory\n", say_esc(name));
		info_free(&r);
		return 1;
	}
	for (size_t i = 0; i < r.nprocs; i++) {
		records |= r.procs[i].has_record;
		threads += r.procs[i].nthreads;
	}
	printf("%s: %s", say_esc(name),
	       r.events == 0 && r.error != NULL ? "unreadable"
	       : r.hdf5                         ? "forktrace HDF5 trace"
						: "Chrome trace JSON");
	if (r.hdf5)
		printf(", %" PRIu64 " bytes of JSON events", r.bytes);
	else
		printf(" (%s form%s), %" PRIu64 " bytes", r.array_form ? "array" : "object",
		       r.gzip ? ", gzip" : "", r.bytes);
	if (r.gzip)
		printf(" (%" PRIu64 " compressed)", r.file_bytes);
	printf("\n  origin:     %s\n", say_esc(r.origin));
	print_phases(&r);
	if (r.min_ts <= r.max_ts) {
		print_ms("  time span:  ", r.min_ts);
		print_ms(" to ", r.max_ts);
		print_ms(" (", r.max_ts - r.min_ts);
		printf(")\n");
	}
	printf("  processes:  %zu, threads: %zu\n", r.nprocs, threads);
	if (r.lost_events > 0 || r.lost_in_processes > 0)
		printf("  lost:       %" PRId64 " events\n",
		       r.lost_events > 0 ? r.lost_events : (int64_t)r.lost_in_processes);
	else if (r.lost_events == 0)
		printf("  lost:       none\n");
	else if (r.viztracer_overflow)
		printf("  lost:       VizTracer's buffer overflowed: the earliest events are lost\n");
	else
		printf("  lost:       not recorded by this tool\n");
	if (r.nhosts > 0)
		print_hosts(&r);
	if (r.skipped_keys > 0)
		printf("  not read:   %" PRIu64 " top-level key%s (%s)\n", r.skipped_keys,
		       r.skipped_keys == 1 ? "" : "s", say_esc(r.skipped));
	if (r.utf8_fixed > 0)
		printf("  repaired:   %" PRIu64 " events with invalid UTF-8\n", r.utf8_fixed);
	if (r.dup_fixed > 0)
		printf("  repaired:   %" PRIu64 " events with a key twice in an object (the "
		       "last value counts)\n",
		       r.dup_fixed);
	if (r.error != NULL)
		printf("  problem:    %s%s\n", say_esc(r.error),
		       r.truncated ? " (truncated file)" : "");
	printf("  %s:\n", records ? "process tree (pid name [exit])" : "processes");
	if (records)
		print_tree(&r);
	else
		for (size_t i = 0; i < r.nprocs; i++)
			print_process(&r.procs[i], 0, r.nhosts > 0);
	if (r.error != NULL)
		fprintf(stderr, "forktrace: %s: %s\n", say_esc(name), say_esc(r.error));
	err = r.error != NULL || r.utf8_fixed > 0 || r.dup_fixed > 0;
	info_free(&r);
	return err;
}

int info_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c, code = 0;
	spill_inputs sp;
	const char **paths = NULL;
	char **files = NULL;
	bool *in_dir = NULL;
	size_t npaths = 0, nfiles = 0;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (c == 'h') {
			fputs(info_usage, stdout);
			return 0;
		}
		return say_usage_error("info", "unknown option '%s'", argv[optind - 1]);
	}
	if (optind >= argc)
		return say_usage_error("info", "no trace file given");
	/* The inputs combine and report read, the same way: directories,
	 * spill files (one trace of them all, the last input), "-" for
	 * standard input. */
	if (spill_prepare((const char *const *)argv + optind, (size_t)(argc - optind), &sp) < 0 ||
	    (paths = calloc(sp.nsrc + 1, sizeof(*paths))) == NULL) {
		fprintf(stderr, "forktrace: out of memory\n");
		spill_release(&sp);
		return 1;
	}
	for (size_t i = 0; i < sp.nsrc; i++)
		if (sp.src[i].model == NULL)
			paths[npaths++] = sp.src[i].path;
	if (merge_expand(paths, npaths, &files, &in_dir, &nfiles) < 0) {
		fprintf(stderr, "forktrace: out of memory\n");
		free(paths);
		spill_release(&sp);
		return 1;
	}
	for (size_t i = 0; i < nfiles; i++) {
		if (i > 0)
			printf("\n");
		code |= show(files[i], in_dir[i], NULL, files[i]);
		free(files[i]);
	}
	/* Each node-output file is one host's part: a model of its own. */
	for (size_t i = 0; i < sp.nnodes; i++) {
		if (nfiles > 0 || i > 0)
			printf("\n");
		code |= show(NULL, false, sp.nodes[i].model, sp.nodes[i].path);
	}
	if (sp.model != NULL) {
		char spills[64];

		snprintf(spills, sizeof(spills), "%zu spill file%s", sp.nspill,
			 sp.nspill == 1 ? "" : "s");
		if (nfiles > 0 || sp.nnodes > 0)
			printf("\n");
		code |= show(NULL, false, sp.model, spills);
	}
	free(files);
	free(in_dir);
	free(paths);
	code |= sp.problems > 0;
	spill_release(&sp);
	return code;
}
