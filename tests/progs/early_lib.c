/*
 * libtp_early.so: a library whose constructor starts processes before
 * main, linked into early_ctor. The loader runs the constructors of a
 * program's DT_NEEDED libraries before those of LD_PRELOAD objects that
 * come after them in initialisation order, so here the agent's hooks run
 * before the agent's own constructor (STYLE "never" rule 8). The
 * constructor runs system("echo early-child") and forks a child that
 * execs /bin/true, and checks both statuses.
 */
#include "internal.h"

int tp_early_status;

__attribute__((constructor)) static void tp_early_init(void)
{
	char *argv[] = {"true", NULL};
	pid_t pid;
	int st;

	st = system("echo early-child");
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		tp_die("early system");
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		tp_die("early fork");
	if (pid == 0) {
		execv("/bin/true", argv);
		_exit(TP_FAIL);
	}
	tp_expect_code(tp_wait(pid), 0, "early /bin/true");
	tp_early_status = 1;
}
