/*
 * term_wait: creates the file "started" in the current directory and waits
 * (at most 20 s) for SIGTERM. Its handler creates the file "got-term", puts
 * back the default disposition and raises SIGTERM again, so the process
 * dies from the signal. Exits 100 if no signal came.
 */
#include <fcntl.h>
#include <time.h>

#include "internal.h"

static void on_term(int sig)
{
	int fd = open("got-term", O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd >= 0)
		close(fd);
	signal(sig, SIG_DFL);
	raise(sig);
}

int main(void)
{
	struct sigaction sa;
	struct timespec ts = {20, 0};
	int fd;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_term;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGTERM, &sa, NULL) < 0)
		tp_die("sigaction");
	fd = open("started", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		tp_die("create started");
	close(fd);
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	fprintf(stderr, "term_wait: no SIGTERM in 20 s\n");
	return TP_FAIL;
}
