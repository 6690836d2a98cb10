/*
 * combine_cmd.c - `forktrace combine [OPTIONS] FILES... -o OUT`: the
 * command line around merge_inputs (combine/include/merge.h).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "say.h"
#include "merge.h"
#include "internal.h"
#include "spill.h"
#include "events.h"

#define PROGRESS_INTERVAL_NS 200000000LL

static const char combine_usage[] =
	"Usage: forktrace combine [OPTIONS] FILES... -o OUT\n"
	"\n"
	"Merge trace files into one trace: the per-process files of VizTracer\n"
	"(--pid_suffix), Chrome Trace Event JSON written by any tool, traces\n"
	"written by 'forktrace run' or by an earlier combine. Every event of\n"
	"every file is kept as it was written, whatever its kind; the files are\n"
	"read once, in a stream, so memory stays small however big they are.\n"
	"\n"
	"FILES are trace files (JSON, plain or gzip-compressed: recognised by\n"
	"their content, not their name; object form with traceEvents, or a bare\n"
	"array of events) or directories, which stand for every *.json,\n"
	"*.json.gz and *.gz file in them and every other file that holds a\n"
	"trace, in name order (result_9 before result_10). '-' is standard\n"
	"input; a FIFO, a pipe or a device is read once, as a stream (an HDF5\n"
	"trace from one is copied to $TMPDIR first). In a directory only\n"
	"regular files are read: a FIFO or device named like a trace there is\n"
	"reported, not opened.\n"
	"\n"
	"Processes stay apart: when a pid appears in two files (two hosts, two\n"
	"runs, a reused pid), the later one is given an unused pid (4194304 and\n"
	"up) and a forktrace_origin record that keeps its original pid and file.\n"
	"So do flow arrows and async slices: each file's ids are rewritten into a\n"
	"range of their own, so that two files' arrows never pair up.\n"
	"\n"
	"Other top-level keys of the files (file_info, viztracer_metadata, ...)\n"
	"are kept in the JSON output: once when the files agree; else the first\n"
	"file's, and each other file's in its entry of otherData.forktrace.inputs.\n"
	"\n"
	"A file that cannot be read to its end does not stop the others: a\n"
	"truncated file (its writer was killed) keeps every complete event; a\n"
	"file that is not a trace, corrupt gzip, an empty file, too deep nesting\n"
	"or a syntax error is reported with the byte where it went wrong, and\n"
	"what was read before that is kept. Invalid UTF-8 is replaced by U+FFFD\n"
	"so that the output stays valid JSON.\n"
	"\n"
	"Exit status: 0 when every file was combined whole, 1 when a file was\n"
	"skipped, cut short or repaired, or a top-level key could not be kept\n"
	"(or the output cannot be written), 2 for a usage error.\n"
	"\n"
	"Options:\n"
	"  -o, --output OUT     where to write the combined trace (required). The\n"
	"                       format follows the name: .json, .json.gz (gzip),\n"
	"                       or .h5 (HDF5) where built in. Written to a\n"
	"                       temporary file first, renamed when complete;\n"
	"                       '-' is stdout (JSON), a FIFO or device is\n"
	"                       written in place. It must not be an input.\n"
	"      --level N        compression level, 1 (fast) to 9 (small): gzip\n"
	"                       for .gz (default 6), deflate for .h5 (default 2).\n"
	"      --align          shift each file's timestamps so that traces of\n"
	"                       different hosts line up: by the file's realtime\n"
	"                       anchor when it has one (forktrace's\n"
	"                       otherData.forktrace.anchor, VizTracer's\n"
	"                       baseTimeNanoseconds), else so that it starts with\n"
	"                       the first file. Reads every file twice.\n"
	"  -q, --quiet          no progress and no summary on stderr (problems\n"
	"                       with files are still reported).\n"
	"  -h, --help           show this help.\n"
	"\n"
	"Examples:\n"
	"  forktrace combine viztracer_out/ -o all.json\n"
	"  forktrace combine result_*.json.gz -o all.json.gz --level 1\n"
	"  forktrace combine --align host1.json host2.json -o cluster.json\n"
	"  forktrace info all.json\n";

typedef struct progress {
	bool on, shown;
	int64_t last_ns;
} progress;

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void progress_cb(void *ctx, uint64_t done, uint64_t total)
{
	progress *p = ctx;
	int64_t t = now_ns();

	if (!p->on || t - p->last_ns < PROGRESS_INTERVAL_NS)
		return;
	p->last_ns = t;
	p->shown = true;
	fprintf(stderr, "\r\033[Kforktrace: combining: %" PRIu64 " of %" PRIu64 " MB (%d%%)",
		done >> 20, total >> 20, total ? (int)(done * 100 / total) : 0);
}

/* One line per input that was not combined whole. */
static void report_inputs(const merge_result *res, bool quiet, bool align)
{
	for (size_t i = 0; i < res->ninputs; i++) {
		const merge_input *in = &res->inputs[i];

		if (in->truncated)
			fprintf(stderr, "forktrace: warning: %s: %s (salvaged)\n",
				say_esc(in->path),
				in->error != NULL ? say_esc(in->error) : "truncated");
		else if (in->error != NULL)
			fprintf(stderr, "forktrace: %s: %s%s\n", say_esc(in->path),
				say_esc(in->error),
				in->events > 0 ? "; the events before it were kept" : "; skipped");
		if (in->utf8_fixed > 0)
			fprintf(stderr,
				"forktrace: warning: %s: byte %" PRIu64 ": %" PRIu64
				" event%s with invalid UTF-8 or raw control characters; "
				"replaced by U+FFFD\n",
				say_esc(in->path), in->utf8_offset, in->utf8_fixed,
				in->utf8_fixed == 1 ? "" : "s");
		if (in->dup_fixed > 0)
			fprintf(stderr,
				"forktrace: warning: %s: byte %" PRIu64 ": %" PRIu64
				" event%s with a key twice in one object; the last value "
				"of each was kept (as JSON parsers read it), the others left "
				"out\n",
				say_esc(in->path), in->dup_offset, in->dup_fixed,
				in->dup_fixed == 1 ? "" : "s");
		if (in->skipped_keys > 0)
			fprintf(stderr,
				"forktrace: warning: %s: top-level key%s not kept (larger "
				"than 16 MiB, not valid JSON, or twice in the file): %s\n",
				say_esc(in->path), in->skipped_keys == 1 ? "" : "s",
				say_esc(in->skipped));
		if (align && !quiet && in->align != NULL)
			fprintf(stderr, "forktrace: %s: aligned by %s, shifted by %+.6f s\n",
				say_esc(in->path), in->align, (double)in->shift_ns / 1e9);
	}
}

/* What combine's command line asks for. */
typedef struct combine_args {
	const char *output;
	int level; /* 0: the format's own default */
	bool align, quiet;
} combine_args;

/* Reads combine's options into a. Returns -1 to go on, or the exit
 * status (0 after --help, 2 on a usage error). */
static int combine_parse(int argc, char **argv, combine_args *a)
{
	enum { OPT_LEVEL = 256, OPT_ALIGN };
	static const struct option longopts[] = {
		{"output", required_argument, NULL, 'o'},
		{"level", required_argument, NULL, OPT_LEVEL},
		{"align", no_argument, NULL, OPT_ALIGN},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:qh", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			a->output = optarg;
			break;
		case OPT_LEVEL: {
			uint64_t l;

			if (say_parse_uint(optarg, 9, &l) < 0 || l < 1)
				return say_usage_error("combine", "--level takes 1 to 9, got '%s'",
						       optarg);
			a->level = (int)l;
			break;
		}
		case OPT_ALIGN:
			a->align = true;
			break;
		case 'q':
			a->quiet = true;
			break;
		case 'h':
			fputs(combine_usage, stdout);
			return 0;
		case ':':
			return say_usage_error("combine", "option '%s' needs a value",
					       argv[optind - 1]);
		default:
			return say_usage_error("combine", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (a->output == NULL)
		return say_usage_error("combine", "no output file: give one with -o OUT");
	if (optind >= argc)
		return say_usage_error("combine", "no input files");
	return -1;
}

/* What a combine that wrote its output says on stderr: the inputs'
 * problems, the spill files read, top-level keys that differ, and unless
 * quiet the summary. */
static void combine_summary(const merge_result *res, const spill_inputs *sp, const combine_args *a)
{
	report_inputs(res, a->quiet, a->align);
	if (sp->nspill && !a->quiet)
		fprintf(stderr, "forktrace: read %zu spill file%s as one more input\n", sp->nspill,
			sp->nspill == 1 ? "" : "s");
	/* Nothing is lost (docs/TRACE_FORMAT.md), but a viewer sees one value. */
	if (res->differ != NULL && events_format_for_path(a->output) != TRACE_FORMAT_H5)
		fprintf(stderr,
			"forktrace: warning: the inputs differ in top-level %s: the "
			"output has the first input's; the others are in their entries of "
			"otherData.forktrace.inputs, under \"top_level\"\n",
			say_esc(res->differ));
	if (!a->quiet)
		fprintf(stderr,
			"forktrace: combined %zu file%s, %" PRIu64 " events, %" PRIu64
			" processes (%" PRIu64 " pids remapped) into %s\n",
			res->ninputs, res->ninputs == 1 ? "" : "s", res->events, res->processes,
			res->remapped, say_esc(a->output));
}

int combine_main(int argc, char **argv)
{
	combine_args a = {0};
	const char *output;
	int err, code;
	merge_opts co = {0};
	merge_result res = {0};
	spill_inputs sp;
	events_opts mo;
	out_file rf;
	trace_sink *sink;
	progress prog = {0};

	code = combine_parse(argc, argv, &a);
	if (code >= 0)
		return code;
	co.align = a.align;
	code = out_check_paths("combine", &a.output, 1, (const char *const *)argv + optind,
			       (size_t)(argc - optind));
	if (code)
		return code;
	output = a.output;

	if (out_file_open(&rf, output, "trace", events_format_for_path(output) == TRACE_FORMAT_H5) <
	    0)
		return 1;
	mo.gzip_level = a.level;
	err = events_format_for_path(output) == TRACE_FORMAT_H5 ? out_file_name(&rf) : 0;
	sink = err < 0 ? NULL : events_sink_for(events_format_for_path(output), rf.fd, &mo, &err);
	if (sink == NULL) {
		fprintf(stderr, "forktrace: cannot write '%s': %s\n", output, strerror(-err));
		out_file_abort(&rf);
		return 1;
	}
	prog.on = !a.quiet && isatty(STDERR_FILENO);
	prog.last_ns = now_ns();
	co.progress = progress_cb;
	co.progress_ctx = &prog;
	/* Agents' spill files become one more input: the model they make. */
	err = spill_prepare((const char *const *)argv + optind, (size_t)(argc - optind), &sp);
	if (err == 0)
		err = merge_inputs(sp.src, sp.nsrc, &co, sink, &res);
	sink->free(sink);
	if (prog.shown)
		fputs("\r\033[K", stderr);
	spill_note_merged(&sp, &res);
	if (err == 0)
		err = out_file_commit(&rf);
	if (err < 0) {
		if (res.spool_error < 0)
			out_spool_error(res.spool_error);
		else
			fprintf(stderr, "forktrace: cannot write the trace to '%s': %s\n", output,
				strerror(-err));
		out_file_abort(&rf);
		merge_result_free(&res);
		spill_release(&sp);
		return 1;
	}
	combine_summary(&res, &sp, &a);
	code = res.problems > 0 || sp.problems > 0 ? 1 : 0;
	merge_result_free(&res);
	spill_release(&sp);
	return code;
}
