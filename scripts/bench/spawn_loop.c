/*
 * spawn_loop N MODE: starts N children of /bin/true one after the other
 * and waits for each. MODE "fork" uses fork + execv, "spawn" uses
 * posix_spawn. The benchmark for the per-process cost of tracing.
 */
#include <spawn.h>
#include <stdio.h>
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

	for (int i = 0; i < n; i++) {
		pid_t pid;
		int st;

		if (spawn) {
			if (posix_spawn(&pid, "/bin/true", NULL, NULL, child_argv, environ) != 0)
				return 1;
		} else {
			pid = fork();
			if (pid < 0)
				return 1;
			if (pid == 0) {
				execv("/bin/true", child_argv);
				_exit(127);
			}
		}
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			return 1;
	}
	return 0;
}
