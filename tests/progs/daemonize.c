/*
 * daemonize PIDFILE: the classic double fork. The root forks A; A calls
 * setsid and forks B; A exits 0. B redirects stdin/out/err to /dev/null
 * (so it does not hold the caller's pipes), writes its pid to PIDFILE and
 * execs "sleep 30". The root waits for A and exits 0.
 */
#include <fcntl.h>

#include "internal.h"

int main(int argc, char **argv)
{
	pid_t a;

	if (argc != 2) {
		fprintf(stderr, "usage: daemonize PIDFILE\n");
		return TP_FAIL;
	}
	a = fork();
	if (a < 0)
		tp_die("fork");
	if (a == 0) {
		pid_t b;

		if (setsid() < 0)
			tp_die("setsid");
		b = fork();
		if (b < 0)
			tp_die("fork");
		if (b == 0) {
			char *sargv[] = {"sleep", "30", NULL};
			FILE *f;
			int fd = open("/dev/null", O_RDWR);

			if (fd < 0)
				tp_die("open /dev/null");
			dup2(fd, 0);
			dup2(fd, 1);
			dup2(fd, 2);
			if (fd > 2)
				close(fd);
			f = fopen(argv[1], "w");
			if (!f)
				_exit(TP_FAIL);
			fprintf(f, "%d\n", (int)getpid());
			fclose(f);
			execv("/bin/sleep", sargv);
			_exit(TP_FAIL);
		}
		_exit(0);
	}
	tp_expect_code(tp_wait(a), 0, "A");
	printf("daemonize: parent done\n");
	return 0;
}
