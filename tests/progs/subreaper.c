/*
 * subreaper: becomes a child subreaper (as tini, systemd --user or a
 * build sandbox do), forks A; A forks B and exits at once; B waits until
 * it has been reparented to us, sleeps 50 ms (so that forktrace reads
 * A's record of B before our wait for B) and exits 7. We wait for A
 * (exit 0) and then for B, which is now ours to reap. Prints "child
 * PID" for B.
 */
#include <sys/prctl.h>
#include <time.h>

#include "internal.h"

int main(void)
{
	int fds[2];
	pid_t a, b;

	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
		tp_die("PR_SET_CHILD_SUBREAPER");
	if (pipe(fds) != 0)
		tp_die("pipe");
	a = fork();
	if (a < 0)
		tp_die("fork A");
	if (a == 0) {
		pid_t self = getpid();

		b = fork();
		if (b < 0)
			tp_die("fork B");
		if (b == 0) {
			struct timespec ms = {0, 1000000};

			for (int i = 0; getppid() == self; i++) {
				if (i > 10000)
					tp_die("B: never reparented");
				nanosleep(&ms, NULL);
			}
			ms.tv_nsec = 50000000;
			nanosleep(&ms, NULL);
			_exit(7);
		}
		if (write(fds[1], &b, sizeof(b)) != (ssize_t)sizeof(b))
			tp_die("write");
		_exit(0);
	}
	if (read(fds[0], &b, sizeof(b)) != (ssize_t)sizeof(b))
		tp_die("read");
	printf("child %d\n", (int)b);
	tp_expect_code(tp_wait(a), 0, "A");
	tp_expect_code(tp_wait(b), 7, "B");
	return 0;
}
