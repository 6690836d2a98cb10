/*
 * orphan: the root forks A; A forks B and exits 0 at once. B waits until it
 * has been re-parented (its parent A is gone), sleeps 0.3 s, creates the
 * file "orphan.done" in the current directory and exits 7. The root only
 * waits for A, so B outlives both A and the root: only a tracer that waits
 * for orphans (a subreaper) sees B's end.
 */
#include <fcntl.h>
#include <time.h>

#include "internal.h"

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int main(void)
{
	pid_t a = fork();

	if (a < 0)
		tp_die("fork A");
	if (a == 0) {
		pid_t self = getpid();
		pid_t b = fork();

		if (b < 0)
			tp_die("fork B");
		if (b == 0) {
			int fd, i;

			for (i = 0; getppid() == self; i++) {
				if (i > 10000)
					tp_die("orphan: never re-parented");
				sleep_ms(1);
			}
			sleep_ms(300);
			fd = open("orphan.done", O_WRONLY | O_CREAT | O_TRUNC, 0644);
			if (fd >= 0)
				close(fd);
			exit(7);
		}
		exit(0);
	}
	tp_expect_code(tp_wait(a), 0, "A");
	printf("orphan parent done\n");
	return 0;
}
