/*
 * early_ctor: linked with libtp_early.so, whose constructor starts two
 * processes before main (see early_lib.c). main checks that it ran, then
 * forks and execs /bin/true once more, now with the agent set up.
 */
#include "internal.h"

extern int tp_early_status;

int main(void)
{
	char *argv[] = {"true", NULL};
	pid_t pid;

	if (tp_early_status != 1) {
		fprintf(stderr, "early_ctor: the library constructor did not run\n");
		return TP_FAIL;
	}
	printf("early_ctor main\n");
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		tp_die("fork");
	if (pid == 0) {
		execv("/bin/true", argv);
		_exit(TP_FAIL);
	}
	tp_expect_code(tp_wait(pid), 0, "/bin/true");
	return 0;
}
