/*
 * fork_true: the smallest interesting tree, for the trace format check:
 * fork, the child execs /bin/true, the parent waits and exits 0.
 */
#include "internal.h"

int main(void)
{
	char *argv[] = {"true", NULL};
	pid_t pid = fork();

	if (pid < 0)
		tp_die("fork");
	if (pid == 0) {
		execv("/bin/true", argv);
		_exit(TP_FAIL);
	}
	tp_expect_code(tp_wait(pid), 0, "/bin/true");
	return 0;
}
