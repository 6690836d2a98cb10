/*
 * spawn: one posix_spawn (with a file action) of exit_with 4, and one
 * posix_spawnp (PATH search) of "sh -c 'exit 6'"; waits for both.
 */
#include <fcntl.h>
#include <spawn.h>

#include "internal.h"

extern char **environ;

int main(void)
{
	char path[PATH_MAX];
	char *argv1[] = {"exit_with", "4", NULL};
	char *argv2[] = {"sh", "-c", "exit 6", NULL};
	posix_spawn_file_actions_t fa;
	pid_t p1, p2;
	int rc;

	tp_sibling(path, sizeof(path), "exit_with");
	if (posix_spawn_file_actions_init(&fa) != 0 ||
	    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0) != 0)
		tp_die("posix_spawn_file_actions");
	rc = posix_spawn(&p1, path, &fa, NULL, argv1, environ);
	if (rc != 0) {
		errno = rc;
		tp_die("posix_spawn exit_with");
	}
	posix_spawn_file_actions_destroy(&fa);
	rc = posix_spawnp(&p2, "sh", NULL, NULL, argv2, environ);
	if (rc != 0) {
		errno = rc;
		tp_die("posix_spawnp sh");
	}
	tp_expect_code(tp_wait(p1), 4, "posix_spawn child");
	tp_expect_code(tp_wait(p2), 6, "posix_spawnp child");
	printf("spawn ok\n");
	return 0;
}
