/*
 * vfork_exec: three vfork children, each waited for:
 *   1. execv("/nope") fails (ENOENT); the child _exits 127
 *   2. execv of static_child 7 (an image the agent cannot enter)
 *   3. execv of exit_with 5 (an instrumented image)
 * A vfork child records nothing itself: what the trace knows of its exec
 * comes from its parent.
 */
#include "internal.h"

static void child_run(const char *path, char *const argv[], int code)
{
	pid_t pid = vfork();

	if (pid < 0)
		tp_die("vfork");
	if (pid == 0) {
		execv(path, argv);
		_exit(127);
	}
	tp_expect_code(tp_wait(pid), code, path);
}

int main(void)
{
	char stat[PATH_MAX], ew[PATH_MAX];
	char *nope_argv[] = {(char *)"nope", (char *)"x", NULL};
	char *stat_argv[] = {(char *)"static_child", (char *)"7", NULL};
	char *ew_argv[] = {(char *)"exit_with", (char *)"5", NULL};

	tp_sibling(stat, sizeof(stat), "static_child");
	tp_sibling(ew, sizeof(ew), "exit_with");
	child_run("/nope", nope_argv, 127);
	child_run(stat, stat_argv, 7);
	child_run(ew, ew_argv, 5);
	printf("vfork_exec ok\n");
	return 0;
}
