/*
 * names.c - what people call the program an image runs (model.h,
 * model_image_name; docs/INSIGHT.md "Names"), and the launcher a rank came
 * from.
 *
 * An interpreter running a script is named after the script. The kernel
 * runs a `#!` script as its interpreter with argv [interpreter, its
 * optional argument, script path, the script's arguments], which is what
 * an explicit `python3 build.py` gives too: one rule for both. Each
 * interpreter's options are skipped as it parses them, so that the first
 * word left is the script; code on the command line (`sh -c`, `perl -e`)
 * or a script read from stdin leaves the interpreter's name.
 */
#include <stdbool.h>
#include <string.h>

#include "model.h"

enum interp_kind {
	INTERP_SHELL,
	INTERP_PERL,
	INTERP_PYTHON,
	INTERP_RUBY,
	INTERP_NODE,
	INTERP_TCL,
	INTERP_LUA,
	INTERP_PHP,
	INTERP_RSCRIPT,
	INTERP_AWK,
	INTERP_BUSYBOX,
	INTERP_ENV,
};

/* Interpreters by the basename of argv[0] without its version suffix
 * ("python3.11" is "python", "perl5.36" "perl"). */
static const struct {
	const char *name;
	enum interp_kind kind;
} interps[] = {
	{"sh", INTERP_SHELL},        {"bash", INTERP_SHELL},      {"dash", INTERP_SHELL},
	{"zsh", INTERP_SHELL},       {"ksh", INTERP_SHELL},       {"mksh", INTERP_SHELL},
	{"ash", INTERP_SHELL},       {"yash", INTERP_SHELL},      {"perl", INTERP_PERL},
	{"python", INTERP_PYTHON},   {"pypy", INTERP_PYTHON},     {"ruby", INTERP_RUBY},
	{"node", INTERP_NODE},       {"nodejs", INTERP_NODE},     {"tclsh", INTERP_TCL},
	{"wish", INTERP_TCL},        {"lua", INTERP_LUA},         {"luajit", INTERP_LUA},
	{"php", INTERP_PHP},         {"Rscript", INTERP_RSCRIPT}, {"awk", INTERP_AWK},
	{"gawk", INTERP_AWK},        {"mawk", INTERP_AWK},        {"nawk", INTERP_AWK},
	{"busybox", INTERP_BUSYBOX}, {"env", INTERP_ENV},
};

/* The part after the last '/', unless that is empty ("dir/"), in which case
 * the whole path says more than an empty name. */
static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (slash == NULL || slash[1] == '\0')
		return path;
	return slash + 1;
}

/* The interpreter argv[0] names, false when it names none. A login
 * shell's leading '-' ("-bash") is not part of the name. */
static bool interp_of(const char *arg0, enum interp_kind *kind)
{
	const char *b = base_name(arg0);
	size_t n;

	if (b[0] == '-')
		b++;
	n = strlen(b);
	while (n > 0 && ((b[n - 1] >= '0' && b[n - 1] <= '9') || b[n - 1] == '.'))
		n--;
	for (size_t i = 0; i < sizeof(interps) / sizeof(interps[0]); i++)
		if (strlen(interps[i].name) == n && memcmp(interps[i].name, b, n) == 0) {
			*kind = interps[i].kind;
			return true;
		}
	return false;
}

/* What a command line runs, found by skipping an interpreter's options. */
enum run_what {
	RUN_SCRIPT, /* argv[*at] is the script's path */
	RUN_MODULE, /* the module named at module (python -m) */
	RUN_NONE,   /* code on the command line, stdin, or nothing */
};

typedef struct scan {
	const char *const *argv;
	size_t argc;
	size_t at; /* the argument being looked at */
	const char *module;
} scan;

/* The option's value: the rest of the argument after position i, else
 * the next argument (consumed). NULL when there is none. */
static const char *opt_value(scan *s, const char *arg, size_t i)
{
	if (arg[i + 1] != '\0')
		return arg + i + 1;
	if (s->at + 1 < s->argc)
		return s->argv[++s->at];
	return NULL;
}

/* After the options: a script, or stdin ("-" or nothing left). */
static enum run_what first_operand(const scan *s)
{
	if (s->at >= s->argc || strcmp(s->argv[s->at], "-") == 0 || s->argv[s->at][0] == '\0')
		return RUN_NONE;
	return RUN_SCRIPT;
}

/*
 * sh, bash, dash, zsh, ksh: clusters of one-letter options after '-' or
 * '+'; c (code) and s (stdin) mean no script; o and O take the next
 * argument (set -o's and shopt's names); bash's long options (--rcfile
 * and --init-file take a value); "--" or "-" ends them.
 */
static enum run_what scan_shell(scan *s)
{
	for (; s->at < s->argc; s->at++) {
		const char *a = s->argv[s->at];
		size_t vals = 0;

		if (strcmp(a, "--") == 0 || strcmp(a, "-") == 0) {
			s->at++;
			break;
		}
		if (a[0] == '-' && a[1] == '-') {
			if (strcmp(a, "--rcfile") == 0 || strcmp(a, "--init-file") == 0)
				s->at++;
			continue;
		}
		if (a[0] != '-' && a[0] != '+')
			break;
		for (size_t i = 1; a[i] != '\0'; i++) {
			if (a[i] == 'c' || a[i] == 's')
				return RUN_NONE;
			if (a[i] == 'o' || a[i] == 'O')
				vals++;
		}
		s->at += vals;
	}
	return first_operand(s);
}

/*
 * perl: -e/-E code; -I, -M, -m take the rest of the argument or, alone,
 * the next one; -i, -x, -d, -D, -C, -V take the rest of it; -l and -0
 * take digits; the others are one-letter flags that cluster ("-lane").
 */
static enum run_what scan_perl(scan *s)
{
	for (; s->at < s->argc; s->at++) {
		const char *a = s->argv[s->at];

		if (strcmp(a, "--") == 0) {
			s->at++;
			break;
		}
		if (a[0] != '-' || a[1] == '\0')
			break;
		for (size_t i = 1; a[i] != '\0'; i++) {
			if (a[i] == 'e' || a[i] == 'E')
				return RUN_NONE;
			if (a[i] == 'I' || a[i] == 'M' || a[i] == 'm') {
				opt_value(s, a, i);
				break;
			}
			/* -l and -0 take digits and let the cluster go on. */
			if (a[i] == 'l' || a[i] == '0') {
				while (a[i + 1] >= '0' && a[i + 1] <= '9')
					i++;
				continue;
			}
			if (strchr("ixdDCV", a[i]) != NULL)
				break;
		}
	}
	return first_operand(s);
}

/*
 * python: -c code; -m module (the rest of the argument, or the next);
 * -W, -X (and python2's -Q) take a value likewise; the others are flags
 * that cluster ("-uB"); --check-hash-based-pycs takes the next argument;
 * "--" ends them.
 */
static enum run_what scan_python(scan *s)
{
	for (; s->at < s->argc; s->at++) {
		const char *a = s->argv[s->at];

		if (strcmp(a, "--") == 0) {
			s->at++;
			break;
		}
		if (a[0] != '-' || a[1] == '\0')
			break;
		if (a[1] == '-') {
			if (strcmp(a, "--check-hash-based-pycs") == 0)
				s->at++;
			continue;
		}
		for (size_t i = 1; a[i] != '\0'; i++) {
			if (a[i] == 'c')
				return RUN_NONE;
			if (a[i] == 'm') {
				s->module = opt_value(s, a, i);
				return s->module != NULL && s->module[0] != '\0' ? RUN_MODULE
										 : RUN_NONE;
			}
			if (a[i] == 'W' || a[i] == 'X' || a[i] == 'Q') {
				opt_value(s, a, i);
				break;
			}
		}
	}
	return first_operand(s);
}

/*
 * The interpreters whose options do not cluster much: code is code_opts,
 * options taking the next argument when alone are value_opts (each
 * "-X"), everything else that starts with '-' is one option; "--" ends
 * them. long_code and long_value likewise for whole words (node's
 * "--eval", tclsh's "-encoding").
 */
static enum run_what scan_simple(scan *s, const char *code_opts, const char *value_opts,
				 const char *const *long_code, const char *const *long_value)
{
	for (; s->at < s->argc; s->at++) {
		const char *a = s->argv[s->at];

		if (strcmp(a, "--") == 0) {
			s->at++;
			break;
		}
		bool word = false;

		if (a[0] != '-' || a[1] == '\0')
			break;
		for (size_t k = 0; long_code != NULL && long_code[k] != NULL; k++)
			if (strcmp(a, long_code[k]) == 0)
				return RUN_NONE;
		for (size_t k = 0; long_value != NULL && long_value[k] != NULL; k++)
			if (strcmp(a, long_value[k]) == 0)
				word = true;
		if (word) {
			s->at++;
			continue;
		}
		if (a[1] == '-')
			continue;
		if (strchr(code_opts, a[1]) != NULL)
			return RUN_NONE;
		if (a[2] == '\0' && strchr(value_opts, a[1]) != NULL)
			s->at++;
	}
	return first_operand(s);
}

/* awk runs a program file only with -f FILE (or --file FILE); its first
 * operand is otherwise the program's text. -F and -v take a value. */
static enum run_what scan_awk(scan *s)
{
	for (; s->at < s->argc; s->at++) {
		const char *a = s->argv[s->at];

		if (strcmp(a, "--") == 0 || a[0] != '-' || a[1] == '\0')
			return RUN_NONE;
		if (strcmp(a, "-f") == 0 || strcmp(a, "--file") == 0) {
			s->at++;
			return first_operand(s);
		}
		if (a[1] == 'f' && a[2] != '\0') {
			s->module = a + 2;
			return RUN_MODULE;
		}
		if (strncmp(a, "--file=", 7) == 0 && a[7] != '\0') {
			s->module = a + 7;
			return RUN_MODULE;
		}
		if (a[2] == '\0' && (a[1] == 'F' || a[1] == 'v' || a[1] == 'W'))
			s->at++;
	}
	return RUN_NONE;
}

/* env's options and NAME=value assignments before the command it runs;
 * -u and -C take a value. false when no command follows. */
static bool skip_env(scan *s)
{
	for (; s->at < s->argc; s->at++) {
		const char *a = s->argv[s->at];

		if (strcmp(a, "--") == 0) {
			s->at++;
			break;
		}
		if (a[0] == '-' && a[1] != '\0') {
			if (strcmp(a, "-u") == 0 || strcmp(a, "-C") == 0 ||
			    strcmp(a, "--unset") == 0 || strcmp(a, "--chdir") == 0)
				s->at++;
			continue;
		}
		if (strchr(a, '=') == NULL)
			break;
	}
	return s->at < s->argc;
}

static enum run_what scan_interp(scan *s, enum interp_kind kind)
{
	static const char *const node_code[] = {"--eval", "--print", NULL};
	static const char *const node_value[] = {"--require",
						 "--loader",
						 "--experimental-loader",
						 "--import",
						 "--input-type",
						 "--conditions",
						 "--title",
						 NULL};
	static const char *const rscript_code[] = {NULL};

	switch (kind) {
	case INTERP_SHELL:
		return scan_shell(s);
	case INTERP_PERL:
		return scan_perl(s);
	case INTERP_PYTHON:
		return scan_python(s);
	case INTERP_RUBY:
		return scan_simple(s, "e", "IrCEF", NULL, NULL);
	case INTERP_NODE:
		return scan_simple(s, "ep", "rC", node_code, node_value);
	case INTERP_TCL:
		return scan_simple(s, "", "", NULL, (const char *const[]){"-encoding", NULL});
	case INTERP_LUA:
		return scan_simple(s, "e", "l", NULL, NULL);
	case INTERP_PHP:
		if (s->at < s->argc && strcmp(s->argv[s->at], "-f") == 0) {
			s->at++;
			return first_operand(s);
		}
		return scan_simple(s, "rBRE", "cdzF", NULL, NULL);
	case INTERP_RSCRIPT:
		return scan_simple(s, "e", "", rscript_code, NULL);
	case INTERP_AWK:
		return scan_awk(s);
	case INTERP_BUSYBOX:
	case INTERP_ENV:
		break;
	}
	return RUN_NONE;
}

/*
 * The name of argv[0..argc) as model_image_name gives it. depth bounds
 * the commands that run commands (busybox APPLET, env CMD) to one level
 * each.
 */
static model_name name_argv(const char *const *argv, size_t argc, int depth)
{
	model_name n = {base_name(argv[0]), NULL};
	enum interp_kind kind;
	scan s = {.argv = argv, .argc = argc, .at = 1};

	if (!interp_of(argv[0], &kind))
		return n;
	if (kind == INTERP_BUSYBOX || kind == INTERP_ENV) {
		model_name inner;

		if (depth > 2 || (kind == INTERP_BUSYBOX ? argc < 2 : !skip_env(&s)))
			return n;
		inner = name_argv(argv + s.at, argc - s.at, depth + 1);
		/* busybox sh script: the script, run by the applet; busybox
		 * ls: ls. env runs what it names: only a script it leads to
		 * (#!/usr/bin/env python3) names it. */
		if (kind == INTERP_BUSYBOX || inner.interp != NULL)
			return inner;
		return n;
	}
	if (n.name[0] == '-')
		n.name++;
	switch (scan_interp(&s, kind)) {
	case RUN_SCRIPT:
		n.interp = n.name;
		n.name = base_name(argv[s.at]);
		break;
	case RUN_MODULE:
		n.interp = n.name;
		n.name = kind == INTERP_AWK ? base_name(s.module) : s.module;
		break;
	case RUN_NONE:
		break;
	}
	return n;
}

model_name model_image_name(const model_segment *s)
{
	model_name n = {"?", NULL};

	if (s->argv != NULL && s->argv[0] != NULL && s->argv[0][0] != '\0') {
		size_t argc = 0;

		while (s->argv[argc] != NULL)
			argc++;
		return name_argv(s->argv, argc, 0);
	}
	if (s->exe != NULL && s->exe[0] != '\0')
		n.name = base_name(s->exe);
	return n;
}

const char *model_launcher_name(const char *rank_var)
{
	static const struct {
		const char *var, *launcher;
	} launchers[] = {
		{"OMPI_COMM_WORLD_RANK", "Open MPI"},
		{"OMPI_COMM_WORLD_LOCAL_RANK", "Open MPI"},
		{"PMIX_RANK", "PMIx"},
		{"PMI_RANK", "MPICH/PMI"},
		{"SLURM_PROCID", "Slurm"},
		{"SLURM_LOCALID", "Slurm"},
		{"RANK", "torchrun"},
		{"LOCAL_RANK", "torchrun"},
	};

	if (rank_var == NULL)
		return NULL;
	for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++)
		if (strcmp(rank_var, launchers[i].var) == 0)
			return launchers[i].launcher;
	return NULL;
}
