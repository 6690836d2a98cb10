/*
 * run_static: fork + execv of static_child 8, then posix_spawn of
 * static_child 9; checks both exit codes.
 */
#include <spawn.h>

#include "internal.h"

extern char **environ;

int main(void)
{
	char path[PATH_MAX];
	char *argv1[] = {"static_child", "8", NULL};
	char *argv2[] = {"static_child", "9", NULL};
	pid_t pid;
	int rc;

	tp_sibling(path, sizeof(path), "static_child");
	pid = fork();
	if (pid < 0)
		tp_die("fork");
	if (pid == 0) {
		execv(path, argv1);
		_exit(TP_FAIL);
	}
	tp_expect_code(tp_wait(pid), 8, "fork+exec static_child");
	rc = posix_spawn(&pid, path, NULL, NULL, argv2, environ);
	if (rc != 0) {
		errno = rc;
		tp_die("posix_spawn static_child");
	}
	tp_expect_code(tp_wait(pid), 9, "posix_spawn static_child");
	printf("run_static ok\n");
	return 0;
}
