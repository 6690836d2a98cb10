/*
 * env_child CODE: run with an empty environment (execve with envp {NULL}, or
 * env -i). Names a thread "envchild-thr", forks a child that execs
 * /bin/true with the environment it inherited, waits for it and exits CODE.
 * The thread name only reaches the trace if the agent was re-injected into
 * this image; /bin/true is instrumented only if the re-injected variables
 * survived into this image's environment.
 */
#include <pthread.h>

#include "internal.h"

static void *thread_main(void *arg)
{
	(void)arg;
	if (pthread_setname_np(pthread_self(), "envchild-thr") != 0)
		tp_die("pthread_setname_np");
	return NULL;
}

int main(int argc, char **argv)
{
	char *targv[] = {"true", NULL};
	pthread_t th;
	pid_t pid;

	if (argc != 2) {
		fprintf(stderr, "usage: env_child CODE\n");
		return TP_FAIL;
	}
	if (pthread_create(&th, NULL, thread_main, NULL) != 0)
		tp_die("pthread_create");
	pthread_join(th, NULL);
	pid = fork();
	if (pid < 0)
		tp_die("fork");
	if (pid == 0) {
		execv("/bin/true", targv);
		_exit(TP_FAIL);
	}
	tp_expect_code(tp_wait(pid), 0, "/bin/true");
	return (int)strtol(argv[1], NULL, 10);
}
