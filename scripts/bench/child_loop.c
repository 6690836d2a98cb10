/*
 * child_loop N MODE: like spawn_loop, but only the children are traced.
 * Build it static (cc -O2 -static) so no agent can enter the parent;
 * each CHILD_ENV_NAME=value in its environment becomes NAME=value in the
 * children's. Measures what a preloaded library costs in the child image
 * alone, e.g.
 *   CHILD_ENV_LD_PRELOAD=$PWD/build/bin/libforktrace-agent.so \
 *   FORKTRACE_SOCK=/tmp/s.sock ./child_loop 2000 spawn
 */
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 2000;
	int spawn = argc > 2 && strcmp(argv[2], "spawn") == 0;
	char *child_argv[] = { "/bin/true", NULL };
	char *env[512];
	int k = 0;

	for (char **e = environ; *e && k < 511; e++)
		env[k++] = strncmp(*e, "CHILD_ENV_", 10) == 0 ? *e + 10 : *e;
	env[k] = NULL;
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
	return 0;
}
