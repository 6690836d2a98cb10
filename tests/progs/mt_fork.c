/*
 * mt_fork: four threads call, in a tight loop, functions the agent hooks or
 * guards (getpid, close, open, pthread_setname_np, waitpid(-1, WNOHANG),
 * sched_yield) while the main thread forks 1000 times. Each child _exits at
 * once with i % 128; the main thread waits for each one. A busy thread's
 * waitpid(-1) may reap a child first; the main thread then sees ECHILD and
 * the busy thread checks that status instead. A deadlock in the agent's fork
 * handling hangs this program (the test's timeout catches it).
 */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "internal.h"

#define NFORKS 1000
#define NBUSY 4

static atomic_int stop;
static atomic_int stolen;
static atomic_int bad;

static void *busy_main(void *arg)
{
	char name[16];
	long n = (long)arg;

	snprintf(name, sizeof(name), "busy-%ld", n);
	while (!atomic_load(&stop)) {
		int st, fd;
		pid_t pid;

		(void)getpid();
		close(-1);
		fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd >= 0)
			close(fd);
		pthread_setname_np(pthread_self(), name);
		pid = waitpid(-1, &st, WNOHANG);
		if (pid > 0) {
			/* A child exits with a code in 0..127; nothing kills them. */
			if (!WIFEXITED(st))
				atomic_fetch_add(&bad, 1);
			atomic_fetch_add(&stolen, 1);
		}
		sched_yield();
	}
	return NULL;
}

int main(void)
{
	pthread_t th[NBUSY];
	long i;

	for (i = 0; i < NBUSY; i++) {
		if (pthread_create(&th[i], NULL, busy_main, (void *)i) != 0)
			tp_die("pthread_create");
	}
	for (i = 0; i < NFORKS; i++) {
		pid_t pid = fork();
		int st;

		if (pid < 0)
			tp_die("fork");
		if (pid == 0)
			_exit((int)(i % 128));
		if (waitpid(pid, &st, 0) < 0) {
			if (errno != ECHILD)
				tp_die("waitpid");
			continue; /* reaped by a busy thread */
		}
		if (!WIFEXITED(st) || WEXITSTATUS(st) != i % 128) {
			fprintf(stderr, "mt_fork: child %ld: status 0x%x\n", i, st);
			atomic_fetch_add(&bad, 1);
		}
	}
	atomic_store(&stop, 1);
	for (i = 0; i < NBUSY; i++)
		pthread_join(th[i], NULL);
	if (atomic_load(&bad)) {
		fprintf(stderr, "mt_fork: %d children ended wrongly\n", atomic_load(&bad));
		return TP_FAIL;
	}
	printf("mt_fork ok: %d forks\n", NFORKS);
	return 0;
}
