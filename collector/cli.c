/*
 * cli.c - messages to the user.
 */
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>

#include "cli.h"

int cli_usage_error(const char *sub, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "forktrace %s: ", sub);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'forktrace %s --help' for more information.\n", sub);
	return CLI_EXIT_USAGE;
}

mode_t cli_umask(void)
{
	mode_t m = umask(022);

	umask(m);
	return m;
}

void cli_report_running(const model_trace *t, double timeout)
{
	size_t n = 0;

	for (size_t i = 0; i < t->nprocs; i++)
		n += t->procs[i]->exit_kind == MODEL_EXIT_RUNNING;
	if (!n)
		return;
	fprintf(stderr, "forktrace: %zu process%s still running after --wait-timeout %gs, "
			"marked running in the trace:", n, n == 1 ? "" : "es", timeout);
	size_t shown = 0;
	for (size_t i = 0; i < t->nprocs && shown < 10; i++) {
		const model_process *p = t->procs[i];
		if (p->exit_kind != MODEL_EXIT_RUNNING)
			continue;
		fprintf(stderr, " %lld (%s)", (long long)p->pid, model_process_name(p));
		shown++;
	}
	fprintf(stderr, "%s\n", n > shown ? " ..." : "");
}
