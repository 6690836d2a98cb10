/*
 * close_all range|loop: closes every fd above 2, either with
 * close_range(3, ~0U, 0) or with a close() loop up to RLIMIT_NOFILE, as
 * daemons and shells do. Then it names a thread "after-close" and forks a
 * child that execs /bin/true. Both only reach the trace if the agent kept
 * its connection to the collector through the massacre.
 */
#include <pthread.h>

#include "internal.h"

static void *thread_main(void *arg)
{
	(void)arg;
	if (pthread_setname_np(pthread_self(), "after-close") != 0)
		tp_die("pthread_setname_np");
	return NULL;
}

int main(int argc, char **argv)
{
	char *targv[] = {"true", NULL};
	pthread_t th;
	pid_t pid;

	if (argc != 2) {
		fprintf(stderr, "usage: close_all range|loop\n");
		return TP_FAIL;
	}
	if (strcmp(argv[1], "range") == 0) {
		if (close_range(3, ~0U, 0) != 0)
			tp_die("close_range");
	} else if (strcmp(argv[1], "loop") == 0) {
		struct rlimit rl;
		long fd, max;

		if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
			tp_die("getrlimit");
		max = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 1048576 ? 1048576
									    : (long)rl.rlim_cur;
		for (fd = 3; fd < max; fd++)
			close((int)fd);
	} else {
		fprintf(stderr, "close_all: unknown mode %s\n", argv[1]);
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
	printf("close_all ok\n");
	return 0;
}
