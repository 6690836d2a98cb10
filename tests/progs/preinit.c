/*
 * preinit: a .preinit_array function (run by the loader before the
 * constructor of any shared object, the agent's included) forks a child
 * that execs exit_with 41, and waits for it with waitpid: hooks called
 * before anything of the agent is set up (STYLE "never" rule 8). Only
 * raw write(2) for output: stdio is not meant for this early. main then
 * forks a child that execs exit_with 42.
 */
#include "internal.h"

static int tp_preinit_done;

static void tp_run(int code)
{
	char path[PATH_MAX];
	char arg[8];
	char *argv[] = {"exit_with", arg, NULL};
	pid_t pid;
	int st;

	tp_sibling(path, sizeof(path), "exit_with");
	snprintf(arg, sizeof(arg), "%d", code);
	pid = fork();
	if (pid < 0)
		_exit(TP_FAIL);
	if (pid == 0) {
		execv(path, argv);
		_exit(TP_FAIL);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			_exit(TP_FAIL);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != code)
		_exit(TP_FAIL);
}

static void tp_preinit(int argc, char **argv, char **envp)
{
	static const char msg[] = "preinit ran\n";

	(void)argc;
	(void)argv;
	(void)envp;
	tp_run(41);
	if (write(1, msg, sizeof(msg) - 1) < 0)
		_exit(TP_FAIL);
	tp_preinit_done = 1;
}

__attribute__((section(".preinit_array"), used)) static void (*tp_preinit_fn)(int, char **,
									      char **) = tp_preinit;

int main(void)
{
	if (!tp_preinit_done) {
		fprintf(stderr, "preinit: the .preinit_array function did not run\n");
		return TP_FAIL;
	}
	tp_run(42);
	printf("preinit main\n");
	return 0;
}
