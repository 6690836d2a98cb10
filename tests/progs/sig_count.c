/*
 * sig_count: counts the SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCONT and
 * SIGUSR1 it receives (SIGTSTP keeps its default: it stops). Creates
 * "ready" in the current directory, then rewrites "counts" ("INT=n TERM=n
 * HUP=n QUIT=n CONT=n USR1=n") each time a count changes, until the file "done" appears (at
 * most 20 s), and exits 0 (TP_FAIL on the timeout).
 */
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include "internal.h"

static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCONT, SIGUSR1};
static const char *const names[] = {"INT", "TERM", "HUP", "QUIT", "CONT", "USR1"};
#define NSIGS 6
static volatile sig_atomic_t counts[NSIGS];

static void on_sig(int sig)
{
	for (int i = 0; i < NSIGS; i++)
		if (sigs[i] == sig)
			counts[i]++;
}

static void write_counts(void)
{
	char buf[256];
	int n = 0;
	FILE *f = fopen("counts.tmp", "w");

	for (int i = 0; i < NSIGS; i++)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, "%s%s=%d", i ? " " : "", names[i],
			      (int)counts[i]);
	if (!f)
		tp_die("counts.tmp");
	fprintf(f, "%s\n", buf);
	fclose(f);
	if (rename("counts.tmp", "counts") < 0)
		tp_die("rename counts");
}

int main(void)
{
	struct sigaction sa;
	int seen[NSIGS] = {0};
	int fd;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sig;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	for (int i = 0; i < NSIGS; i++)
		if (sigaction(sigs[i], &sa, NULL) < 0)
			tp_die("sigaction");
	write_counts();
	fd = open("ready", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		tp_die("create ready");
	close(fd);
	for (int ticks = 0; ticks < 4000; ticks++) {
		struct timespec ts = {0, 5000000};
		bool changed = false;

		for (int i = 0; i < NSIGS; i++) {
			if (counts[i] != seen[i]) {
				seen[i] = counts[i];
				changed = true;
			}
		}
		if (changed)
			write_counts();
		if (access("done", F_OK) == 0) {
			write_counts();
			return 0;
		}
		nanosleep(&ts, NULL);
	}
	fprintf(stderr, "sig_count: no 'done' in 20 s\n");
	return TP_FAIL;
}
