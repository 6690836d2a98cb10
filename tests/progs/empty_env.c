/*
 * empty_env: forks a child that execs env_child 12 with an empty envp
 * (execve(path, argv, (char *[]){NULL})) and checks it exits 12.
 */
#include "internal.h"

int main(void)
{
	char path[PATH_MAX];
	char *argv[] = {"env_child", "12", NULL};
	char *envp[] = {NULL};
	pid_t pid;

	tp_sibling(path, sizeof(path), "env_child");
	pid = fork();
	if (pid < 0)
		tp_die("fork");
	if (pid == 0) {
		execve(path, argv, envp);
		_exit(TP_FAIL);
	}
	tp_expect_code(tp_wait(pid), 12, "env_child");
	printf("empty_env ok\n");
	return 0;
}
