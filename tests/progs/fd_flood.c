/*
 * fd_flood dup2|rawclose: takes over every fd number from 3 to 1100, where
 * the agent keeps its socket (at 1000 or above), then names a thread and
 * forks a child that execs a program. The thread name and the fork only
 * reach the trace if the agent kept a working connection.
 *
 * dup2: dup2(1, fd) for every fd in 3..1100 (the agent must move its
 *   socket out of the way each time), writes a line through fd 1050, then
 *   closes them all again with close(). The child execs /bin/echo.
 * rawclose: syscall(SYS_close, fd) for every fd in 3..1100, behind the
 *   agent's back (its close hook never sees it); the agent must notice and
 *   reconnect. The child execs /bin/true.
 *
 * The soft RLIMIT_NOFILE is raised to cover 1100 when the hard one allows,
 * so that the agent has room to move to; the test skips otherwise.
 */
#include <pthread.h>
#include <sys/syscall.h>

#include "internal.h"

#define TP_FLOOD_LAST 1100

static const char *thread_name;

static void *thread_main(void *arg)
{
	(void)arg;
	if (pthread_setname_np(pthread_self(), thread_name) != 0)
		tp_die("pthread_setname_np");
	return NULL;
}

static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		tp_die("getrlimit");
	if (rl.rlim_cur >= 2048)
		return;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 2048) {
		fprintf(stderr, "fd_flood: hard RLIMIT_NOFILE %lu < 2048\n",
			(unsigned long)rl.rlim_max);
		exit(77);
	}
	rl.rlim_cur = 2048;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		tp_die("setrlimit");
}

int main(int argc, char **argv)
{
	static const char line[] = "written through fd 1050\n";
	char *eargv[] = {"echo", "echo-child", NULL};
	char *targv[] = {"true", NULL};
	pthread_t th;
	pid_t pid;
	int fd, dup_mode;

	if (argc != 2 || (strcmp(argv[1], "dup2") != 0 && strcmp(argv[1], "rawclose") != 0)) {
		fprintf(stderr, "usage: fd_flood dup2|rawclose\n");
		return TP_FAIL;
	}
	dup_mode = strcmp(argv[1], "dup2") == 0;
	raise_nofile();
	if (dup_mode) {
		for (fd = 3; fd <= TP_FLOOD_LAST; fd++)
			if (dup2(1, fd) != fd)
				tp_die("dup2");
		fflush(stdout);
		if (write(1050, line, sizeof(line) - 1) != (ssize_t)sizeof(line) - 1)
			tp_die("write 1050");
		for (fd = 3; fd <= TP_FLOOD_LAST; fd++)
			if (close(fd) != 0)
				tp_die("close");
		thread_name = "after-dup2";
	} else {
		for (fd = 3; fd <= TP_FLOOD_LAST; fd++)
			syscall(SYS_close, fd);
		thread_name = "after-rawclose";
	}
	if (pthread_create(&th, NULL, thread_main, NULL) != 0)
		tp_die("pthread_create");
	pthread_join(th, NULL);
	pid = fork();
	if (pid < 0)
		tp_die("fork");
	if (pid == 0) {
		if (dup_mode)
			execv("/bin/echo", eargv);
		else
			execv("/bin/true", targv);
		_exit(TP_FAIL);
	}
	tp_expect_code(tp_wait(pid), 0, "child");
	printf("fd_flood %s ok\n", argv[1]);
	return 0;
}
