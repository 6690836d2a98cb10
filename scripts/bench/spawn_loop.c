/*
 * spawn_loop N MODE: starts N children of /bin/true one after the other
 * and waits for each. MODE "fork" uses fork + execve, "spawn" uses
 * posix_spawn. The benchmark for the per-process cost of tracing.
 *
 * Built static (cc -O2 -static), no agent can enter the loop itself; then
 * each CHILD_ENV_NAME=value in its environment becomes NAME=value in the
 * children's, to measure what a preloaded library costs the child image
 * alone, e.g.
 *   CHILD_ENV_LD_PRELOAD=$PWD/build/bin/libforktrace-agent.so \
 *   FORKTRACE_SOCK=/tmp/s.sock ./spawn_loop 2000 spawn
 * Without such variables the children get this environment as it is.
 *
 * On exit it prints the loop's own wall time to stderr ("spawn_loop: N
 * children in T ns"): the per-process cost without a tracer's fixed
 * start and end (scripts/bench/run.py reports both).
 */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHILD_ENV_PREFIX "CHILD_ENV_"

extern char **environ;

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 2000;
	int spawn = argc > 2 && strcmp(argv[2], "spawn") == 0;
	char *child_argv[] = {"/bin/true", NULL};
	char *renamed[512], **env = environ;
	struct timespec t0, t1;
	size_t plen = strlen(CHILD_ENV_PREFIX);
	int k = 0, any = 0;

	for (char **e = environ; *e && k < 511; e++) {
		int child = strncmp(*e, CHILD_ENV_PREFIX, plen) == 0;

		any |= child;
		renamed[k++] = child ? *e + plen : *e;
	}
	renamed[k] = NULL;
	if (any)
		env = renamed;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < n; i++) {
		pid_t pid;
		int st;

		if (spawn) {
			if (posix_spawn(&pid, "/bin/true", NULL, NULL, child_argv, env) != 0)
				return 1;
		} else {
			pid = fork();
			if (pid < 0)
				return 1;
			if (pid == 0) {
				execve("/bin/true", child_argv, env);
				_exit(127);
			}
		}
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	fprintf(stderr, "spawn_loop: %d children in %lld ns\n", n,
		(long long)(t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec));
	return 0;
}
