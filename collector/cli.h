/*
 * cli.h - what the `forktrace` command says to its user (cli_). The only
 * place, with the subcommands' own usage texts, that prints: modules below
 * return codes.
 */
#ifndef FT_COLLECTOR_CLI_H
#define FT_COLLECTOR_CLI_H

#include <sys/types.h>

#include "model.h"

/* parse_opts of a subcommand returns this after printing --help. */
#define CLI_EXIT_OK_DONE (-1)
/* Exit code of a usage error. */
#define CLI_EXIT_USAGE 2

/* Prints "forktrace SUB: MESSAGE" and a hint to --help; returns
 * CLI_EXIT_USAGE. */
int cli_usage_error(const char *sub, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The process umask, read without changing it for good. */
mode_t cli_umask(void);

/* After --wait-timeout: names the processes that were still running. */
void cli_report_running(const model_trace *t, double timeout);

#endif
