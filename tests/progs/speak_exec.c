/*
 * speak_exec N: N fork children, each records an instant (so that it
 * connects to pass its event buffers: its HELLO travels on a socket)
 * and then execs exit_with 10+i (whose image speaks in the process
 * table). The parent waits for each. Prints "child PID" for each.
 */
#include <forktrace.h>

#include "internal.h"

int main(int argc, char **argv)
{
	char ew[PATH_MAX], code[16];
	int n = argc > 1 ? atoi(argv[1]) : 1;

	tp_sibling(ew, sizeof(ew), "exit_with");
	for (int i = 0; i < n; i++) {
		char *cargv[] = {(char *)"exit_with", code, NULL};
		pid_t pid;

		snprintf(code, sizeof(code), "%d", 10 + i);
		pid = fork();
		if (pid < 0)
			tp_die("fork");
		if (pid == 0) {
			ft_instant("before-exec");
			execv(ew, cargv);
			_exit(TP_FAIL);
		}
		printf("child %d\n", (int)pid);
		tp_expect_code(tp_wait(pid), 10 + i, "child");
	}
	return 0;
}
