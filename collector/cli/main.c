/*
 * main.c - the `forktrace` command: dispatches to a subcommand.
 */
#include <stdio.h>
#include <string.h>

#include "say.h"
#include "internal.h"

static const char usage[] =
	"Usage: forktrace COMMAND [OPTIONS] [ARGS...]\n"
	"\n"
	"Trace a whole tree of processes - a build, an MPI job, a Python pool,\n"
	"a shell script - and write one combined trace of every process in it.\n"
	"\n"
	"Commands:\n"
	"  run -- CMD...     run CMD with every descendant traced; write the trace\n"
	"  combine FILES... -o OUT\n"
	"                    merge trace files (VizTracer, Chrome JSON, forktrace)\n"
	"                    into one, in a stream\n"
	"  info FILE...      what a trace holds: origin, processes, events, time span\n"
	"  report FILES... -o OUT.html\n"
	"                    one self-contained HTML page of a trace: timeline,\n"
	"                    tables, filters (no network needed to view it)\n"
	"\n"
	"Run 'forktrace COMMAND --help' for the options of a command.\n"
	"\n"
	"Options:\n"
	"  -h, --help        show this help\n"
	"  -V, --version     show the version\n"
	"\n"
	"Example:\n"
	"  forktrace run -o build.json -- make -j8\n"
	"  then open build.json in https://ui.perfetto.dev or chrome://tracing.\n";

int main(int argc, char **argv)
{
	if (argc < 2) {
		fputs(usage, stderr);
		return SAY_EXIT_USAGE;
	}
	const char *sub = argv[1];
	if (!strcmp(sub, "-h") || !strcmp(sub, "--help") || !strcmp(sub, "help")) {
		fputs(usage, stdout);
		return 0;
	}
	if (!strcmp(sub, "-V") || !strcmp(sub, "--version")) {
		printf("forktrace %s\n", FT_VERSION_STRING);
		return 0;
	}
	if (!strcmp(sub, "run"))
		return run_main(argc - 1, argv + 1);
	/* Function names come from local files only (see run.c). */
	unsetenv("DEBUGINFOD_URLS");
	if (!strcmp(sub, "combine"))
		return combine_main(argc - 1, argv + 1);
	if (!strcmp(sub, "info"))
		return info_main(argc - 1, argv + 1);
	if (!strcmp(sub, "report"))
		return report_main(argc - 1, argv + 1);
	fprintf(stderr,
		"forktrace: unknown command '%s'\n"
		"Try 'forktrace --help' for the list of commands.\n",
		sub);
	return SAY_EXIT_USAGE;
}
