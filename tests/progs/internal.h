/*
 * Helpers shared by the end-to-end test programs. Every program checks its
 * own work and exits 100 (with a message on stderr) when something the test
 * relies on did not happen, so a broken program can never look like a
 * broken tracer or, worse, like a pass.
 */
#ifndef FT_TESTS_PROGS_INTERNAL_H
#define FT_TESTS_PROGS_INTERNAL_H

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* Exit code of a test program that found itself misbehaving. */
#define TP_FAIL 100

/* Prints what failed (with errno when it is set) and exits TP_FAIL. */
static inline void tp_die(const char *what)
{
	int e = errno;

	if (e)
		fprintf(stderr, "%s: %s\n", what, strerror(e));
	else
		fprintf(stderr, "%s\n", what);
	exit(TP_FAIL);
}

/*
 * Fills buf with the path of the program called name that sits in the same
 * directory as this one. The tests pass only the programs directory, so the
 * programs find each other this way rather than through PATH.
 */
static inline void tp_sibling(char *buf, size_t len, const char *name)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n < 0)
		tp_die("readlink /proc/self/exe");
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (!slash)
		tp_die("no directory in /proc/self/exe");
	*slash = '\0';
	if ((size_t)snprintf(buf, len, "%s/%s", self, name) >= len)
		tp_die("sibling path too long");
}

/* Waits for pid (retrying on EINTR) and returns its raw wait status. */
static inline int tp_wait(pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) < 0) {
		if (errno != EINTR)
			tp_die("waitpid");
	}
	return st;
}

/* Dies unless the wait status st says "exited with code". */
static inline void tp_expect_code(int st, int code, const char *who)
{
	if (!WIFEXITED(st) || WEXITSTATUS(st) != code) {
		fprintf(stderr, "%s: wait status 0x%x, expected exit code %d\n", who, st, code);
		exit(TP_FAIL);
	}
}

/* Dies unless the wait status st says "killed by signal sig". */
static inline void tp_expect_signal(int st, int sig, const char *who)
{
	if (!WIFSIGNALED(st) || WTERMSIG(st) != sig) {
		fprintf(stderr, "%s: wait status 0x%x, expected signal %d\n", who, st, sig);
		exit(TP_FAIL);
	}
}

/* Turns core dumps off, so that a test crashing a child on purpose does not
 * spend time (and disk) writing a core. */
static inline void tp_no_core(void)
{
	struct rlimit rl = {0, 0};

	if (setrlimit(RLIMIT_CORE, &rl) < 0)
		tp_die("setrlimit RLIMIT_CORE");
}

#endif /* FT_TESTS_PROGS_INTERNAL_H */
