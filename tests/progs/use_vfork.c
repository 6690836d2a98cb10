/*
 * use_vfork: vfork + execv of exit_with 21, then vfork + _exit(22) without
 * exec; checks both statuses.
 */
#include "internal.h"

int main(void)
{
	char path[PATH_MAX];
	char *argv[] = {"exit_with", "21", NULL};
	pid_t pid;

	tp_sibling(path, sizeof(path), "exit_with");
	pid = vfork();
	if (pid < 0)
		tp_die("vfork");
	if (pid == 0) {
		execv(path, argv);
		_exit(TP_FAIL);
	}
	tp_expect_code(tp_wait(pid), 21, "vfork+exec child");

	pid = vfork();
	if (pid < 0)
		tp_die("vfork");
	if (pid == 0)
		_exit(22);
	tp_expect_code(tp_wait(pid), 22, "vfork+_exit child");
	printf("vfork ok\n");
	return 0;
}
