/*
 * fork_fail: fork() and vfork() that fail with EAGAIN, as under ulimit -u
 * or a pids cgroup: RLIMIT_NPROC 0 (root is exempt from it, so as root
 * the program first becomes nobody; the agent's channel is open by then).
 * Then popen() fails the same way (glibc gives ENOMEM; system() returns
 * the status of a shell that exited 127 instead of failing).
 * Prints "fork failed: ERRNO" for each and exits 0.
 */
#include <sys/resource.h>

#include "internal.h"

int main(void)
{
	struct rlimit rl = {0, 0};
	pid_t pid;

	if (geteuid() == 0 &&
	    (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0))
		tp_die("setresuid nobody");
	if (setrlimit(RLIMIT_NPROC, &rl) < 0)
		tp_die("setrlimit RLIMIT_NPROC");
	pid = fork();
	if (pid == 0)
		_exit(0);
	if (pid > 0 || errno != EAGAIN)
		tp_die("fork did not fail with EAGAIN");
	printf("fork failed: %d\n", errno);
	pid = vfork();
	if (pid == 0)
		_exit(0);
	if (pid > 0 || errno != EAGAIN)
		tp_die("vfork did not fail with EAGAIN");
	printf("vfork failed: %d\n", errno);
	if (popen("true", "r") != NULL)
		tp_die("popen did not fail");
	printf("popen failed: %d\n", errno);
	return 0;
}
