/*
 * orphan_burst MODE N: creates N children and returns at once, without
 * waiting, so that they end as orphans that forktrace (the subreaper)
 * reaps, typically before it has read the parent's records of their
 * creation. Child i (from 0) exits with code 10 + i:
 *   fork   the child _exits at once
 *   exec   the fork child execs exit_with (an image that speaks)
 *   vfork  likewise from vfork
 *   spawn  posix_spawn of exit_with
 * Prints "child PID" for each child, the ground truth a test compares the
 * trace with.
 */
#include <spawn.h>

#include "internal.h"

extern char **environ;

int main(int argc, char **argv)
{
	char exit_with[PATH_MAX], code[16];
	int n;

	if (argc != 3)
		tp_die("usage: orphan_burst fork|exec|vfork|spawn N");
	n = atoi(argv[2]);
	tp_sibling(exit_with, sizeof(exit_with), "exit_with");
	for (int i = 0; i < n; i++) {
		char *cargv[] = {(char *)"exit_with", code, NULL};
		pid_t pid;

		snprintf(code, sizeof(code), "%d", 10 + i);
		if (strcmp(argv[1], "spawn") == 0) {
			int rc = posix_spawn(&pid, exit_with, NULL, NULL, cargv, environ);

			if (rc != 0) {
				errno = rc;
				tp_die("posix_spawn");
			}
		} else if (strcmp(argv[1], "vfork") == 0) {
			pid = vfork();
			if (pid == 0) {
				execv(exit_with, cargv);
				_exit(TP_FAIL);
			}
		} else {
			pid = fork();
			if (pid == 0) {
				if (strcmp(argv[1], "exec") == 0) {
					execv(exit_with, cargv);
					_exit(TP_FAIL);
				}
				_exit(10 + i);
			}
		}
		if (pid < 0)
			tp_die("fork");
		printf("child %d\n", (int)pid);
	}
	return 0;
}
