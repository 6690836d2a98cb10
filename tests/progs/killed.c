/*
 * killed: two children die from signals and the parent carries on.
 *  - child 1 names a thread "doomed-thr", forks and reaps a grandchild
 *    (exit 0), then kills itself with SIGKILL. What it recorded before
 *    (the thread name, the wait) must survive its death.
 *  - child 2 writes through a null pointer: SIGSEGV.
 * The parent checks both statuses and prints a line after them.
 */
#include <pthread.h>
#include <stdint.h>

#include "internal.h"

static void *thread_main(void *arg)
{
	(void)arg;
	if (pthread_setname_np(pthread_self(), "doomed-thr") != 0)
		tp_die("pthread_setname_np");
	return NULL;
}

static void doomed_child(void)
{
	pthread_t th;
	pid_t g;

	if (pthread_create(&th, NULL, thread_main, NULL) != 0)
		tp_die("pthread_create");
	pthread_join(th, NULL);
	g = fork();
	if (g < 0)
		tp_die("fork grandchild");
	if (g == 0)
		_exit(0);
	tp_expect_code(tp_wait(g), 0, "grandchild");
	kill(getpid(), SIGKILL);
	_exit(TP_FAIL);
}

static void segv_child(void)
{
	/* The address is read from a volatile so the compiler cannot turn the
	 * store into a trap instruction (SIGILL): this must be a real fault. */
	volatile uintptr_t addr = 0;

	*(volatile int *)addr = 1;
	_exit(TP_FAIL);
}

int main(void)
{
	pid_t c1, c2;

	tp_no_core();
	c1 = fork();
	if (c1 < 0)
		tp_die("fork");
	if (c1 == 0)
		doomed_child();
	tp_expect_signal(tp_wait(c1), SIGKILL, "SIGKILL child");

	c2 = fork();
	if (c2 < 0)
		tp_die("fork");
	if (c2 == 0)
		segv_child();
	tp_expect_signal(tp_wait(c2), SIGSEGV, "SIGSEGV child");
	printf("killed ok: parent continues\n");
	return 0;
}
