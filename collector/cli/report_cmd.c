/*
 * report_cmd.c - `forktrace report TRACE... -o REPORT.html`: the HTML
 * report of trace files. The files go through merge_inputs (the same
 * readers and pid mapping as `forktrace combine`) into the HTML sink, so
 * the page is the one `forktrace run --report` writes for a live run.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "say.h"
#include "merge.h"
#include "internal.h"
#include "spill.h"

static const char report_usage[] =
	"Usage: forktrace report [OPTIONS] TRACE... -o REPORT.html\n"
	"\n"
	"Write one self-contained HTML page that shows what a traced process\n"
	"tree did. Open it from disk in any browser: it needs no network, no\n"
	"server and no other file.\n"
	"\n"
	"TRACE is anything 'forktrace combine' reads: traces written by\n"
	"'forktrace run' (.json, .json.gz), Chrome trace event files of other\n"
	"tools (VizTracer, per-rank MPI traces), directories of them, agents'\n"
	"spill files, '-' for standard input. Several inputs are combined\n"
	"first, as 'forktrace combine' does.\n"
	"\n"
	"The page shows the command, host, start and wall time, process, thread,\n"
	"event and lost-event counts, the exit status and how many processes\n"
	"failed or were killed; a zoomable process timeline (one lane per\n"
	"process, children under their parent, exec images, failures marked,\n"
	"fork arrows); per process its argv, cwd, exit and threads with their\n"
	"regions and functions; sortable tables of programs, processes and\n"
	"regions/functions (calls, total, self, mean, max); concurrency over time\n"
	"and counters. It embeds aggregates, not the raw events: per thread the\n"
	"longest slices that fit a screen (all of them for short-lived\n"
	"processes), and exact statistics for everything.\n"
	"\n"
	"Options:\n"
	"  -o, --output FILE     where to write the page (required). Written to a\n"
	"                        temporary file first, renamed when complete;\n"
	"                        '-' is stdout. It must not be an input.\n"
	"      --include REGEX   keep only processes whose program or command line\n"
	"                        matches REGEX (POSIX extended), with all their\n"
	"                        slices, and in other processes the regions and\n"
	"                        functions that match. Repeatable (any matches).\n"
	"      --exclude REGEX   leave out processes whose program matches REGEX,\n"
	"                        and every region, function or counter whose name\n"
	"                        matches. Repeatable.\n"
	"      --pids RANGES     keep only these trace pids: a comma-separated list\n"
	"                        of N, N-M and N- (for per-rank traces whose pid is\n"
	"                        the rank: --pids 0-3).\n"
	"      --hosts LIST      keep only the processes of these hosts of a\n"
	"                        multi-host trace: names separated by commas\n"
	"                        (--hosts node1,node2).\n"
	"      --align           shift each input so that traces of different\n"
	"                        hosts line up (as 'forktrace combine --align').\n"
	"  -q, --quiet           no summary on stderr.\n"
	"  -h, --help            show this help.\n"
	"\n"
	"The filters decide what is written into the file; the page has the\n"
	"same filters to narrow it further.\n"
	"\n"
	"Exit status: 0 when the report was written, 1 when it could not be or an\n"
	"input could not be read whole (what was read is still reported), 2 for a\n"
	"usage error.\n"
	"\n"
	"Examples:\n"
	"  forktrace report build.json -o build.html\n"
	"  forktrace report rank*.json --pids 0-3 -o ranks.html\n"
	"  forktrace report trace.json.gz --exclude '^(sh|bash)$' -o r.html\n"
	"  forktrace run --report r.html -- make -j8   (the same page, live)\n";

/* What report's command line asks for. */
typedef struct report_args {
	report_opts ro; /* owned: report_opts_free */
	const char *output;
	bool align, quiet;
} report_args;

/* Reads report's options into a. Returns -1 to go on, or the exit status
 * (0 after --help, 1 when an option cannot be kept, 2 on a usage
 * error). */
static int report_parse(int argc, char **argv, report_args *a)
{
	enum { OPT_ALIGN = 256 };
	static const struct option longopts[] = {
		{"output", required_argument, NULL, 'o'},
		{"include", required_argument, NULL, REPORT_OPT_INCLUDE},
		{"exclude", required_argument, NULL, REPORT_OPT_EXCLUDE},
		{"pids", required_argument, NULL, REPORT_OPT_PIDS},
		{"hosts", required_argument, NULL, REPORT_OPT_HOSTS},
		{"align", no_argument, NULL, OPT_ALIGN},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":o:qh", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			a->output = optarg;
			break;
		case REPORT_OPT_INCLUDE:
		case REPORT_OPT_EXCLUDE:
		case REPORT_OPT_PIDS:
		case REPORT_OPT_HOSTS:
			if (report_opt(&a->ro, c, optarg) < 0)
				return 1;
			break;
		case OPT_ALIGN:
			a->align = true;
			break;
		case 'q':
			a->quiet = true;
			break;
		case 'h':
			fputs(report_usage, stdout);
			return 0;
		case ':':
			return say_usage_error("report", "option '%s' needs a value",
					       argv[optind - 1]);
		default:
			return say_usage_error("report", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (a->output == NULL)
		return say_usage_error("report", "no output file: give one with -o REPORT.html");
	if (optind >= argc)
		return say_usage_error("report", "no input trace files");
	return -1;
}

/* What a report that was written says on stderr: the inputs that could
 * not be read whole, and unless quiet the summary. */
static void report_summary(const merge_result *res, const report_args *a)
{
	for (size_t i = 0; i < res->ninputs; i++)
		if (res->inputs[i].error != NULL)
			fprintf(stderr,
				"forktrace: %s: %s (what was read before is in the report)\n",
				say_esc(res->inputs[i].path), say_esc(res->inputs[i].error));
	if (!a->quiet)
		fprintf(stderr,
			"forktrace: report of %zu file%s, %llu events, %llu processes "
			"written to %s (%llu bytes)\n",
			res->ninputs, res->ninputs == 1 ? "" : "s", (unsigned long long)res->events,
			(unsigned long long)res->processes, say_esc(a->output),
			(unsigned long long)res->out.bytes);
}

int report_main(int argc, char **argv)
{
	report_args a = {0};
	spill_inputs sp = {0};
	merge_opts co = {0};
	merge_result res = {0};
	out_file rf = {.fd = -1};
	const char *output;
	trace_sink *sink;
	htmlw_opts ho;
	int err, code;

	code = report_parse(argc, argv, &a);
	if (code >= 0)
		goto out;
	co.align = a.align;
	code = report_check(&a.ro, "report");
	if (code == 0)
		code = out_check_paths("report", &a.output, 1, (const char *const *)argv + optind,
				       (size_t)(argc - optind));
	if (code != 0)
		goto out;
	output = a.output;
	code = 1;
	if (out_file_open(&rf, output, "report", false) < 0)
		goto out;
	ho = (htmlw_opts){a.ro.include, a.ro.exclude, a.ro.pids, a.ro.hosts};
	sink = sink_html_new(rf.fd, &ho, &err);
	if (sink == NULL) {
		fprintf(stderr, "forktrace: cannot write '%s': %s\n", output, strerror(-err));
		goto abort_file;
	}
	/* Agents' spill files become one more input, as in combine. */
	err = spill_prepare((const char *const *)argv + optind, (size_t)(argc - optind), &sp);
	if (err == 0)
		err = merge_inputs(sp.src, sp.nsrc, &co, sink, &res);
	sink->free(sink);
	spill_note_merged(&sp, &res);
	if (err == 0)
		err = out_file_commit(&rf);
	if (err < 0) {
		if (res.spool_error < 0)
			out_spool_error(res.spool_error);
		else
			fprintf(stderr, "forktrace: cannot write the report to '%s': %s\n", output,
				strerror(-err));
		goto free_res;
	}
	report_summary(&res, &a);
	code = res.problems > 0 || sp.problems > 0 ? 1 : 0;
free_res:
	merge_result_free(&res);
	spill_release(&sp);
abort_file:
	out_file_abort(&rf);
out:
	report_opts_free(&a.ro);
	return code;
}
