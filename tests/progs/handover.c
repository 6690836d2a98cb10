/*
 * handover MODE PATH [MODE PATH]...: starts PATH (with no arguments) once
 * per pair and prints "pid MODE ticks PATH" for each child, ticks being
 * field 22 (starttime) of the child's /proc/<pid>/stat, read while the
 * child is a zombie (waitid WNOWAIT) so it is the kernel's own value.
 * Every child must exit 0. MODE is how the child starts:
 *   fork     fork + execv
 *   forkp    fork + execvp ($PATH search for a bare name)
 *   spawn    posix_spawn
 *   spawnp   posix_spawnp ($PATH search for a bare name)
 *   spawnfa  posix_spawn with a file action (/dev/null on stdin)
 * For the agent's hand-over of start time and exe to a new image
 * (tests/e2e/test_progs.py exe_handover).
 */
#include <fcntl.h>
#include <spawn.h>

#include "internal.h"

extern char **environ;

/* Field 22 of /proc/<pid>/stat; comm may hold spaces and ')'. */
static unsigned long long start_ticks(pid_t pid)
{
	char path[64], buf[1024];
	unsigned long long v = 0;
	ssize_t n;
	char *p;
	int fd, field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		tp_die(path);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		tp_die("read stat");
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (!p)
		tp_die("stat without ')'");
	for (field = 2, p++; field < 22 && *p; p++)
		if (*p == ' ')
			field++;
	while (*p >= '0' && *p <= '9')
		v = v * 10 + (unsigned long long)(*p++ - '0');
	return v;
}

static pid_t start(const char *mode, const char *path)
{
	char *argv[] = {(char *)path, NULL};
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int rc;

	if (strcmp(mode, "fork") == 0 || strcmp(mode, "forkp") == 0) {
		pid = fork();
		if (pid < 0)
			tp_die("fork");
		if (pid == 0) {
			if (mode[4] == 'p')
				execvp(path, argv);
			else
				execv(path, argv);
			_exit(TP_FAIL);
		}
		return pid;
	}
	if (strcmp(mode, "spawn") == 0)
		rc = posix_spawn(&pid, path, NULL, NULL, argv, environ);
	else if (strcmp(mode, "spawnp") == 0)
		rc = posix_spawnp(&pid, path, NULL, NULL, argv, environ);
	else if (strcmp(mode, "spawnfa") == 0) {
		if (posix_spawn_file_actions_init(&fa) != 0 ||
		    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0) != 0)
			tp_die("posix_spawn_file_actions");
		rc = posix_spawn(&pid, path, &fa, NULL, argv, environ);
		posix_spawn_file_actions_destroy(&fa);
	} else {
		fprintf(stderr, "unknown mode %s\n", mode);
		exit(TP_FAIL);
	}
	if (rc != 0) {
		errno = rc;
		tp_die(path);
	}
	return pid;
}

int main(int argc, char **argv)
{
	if (argc < 3 || argc % 2 == 0) {
		fprintf(stderr, "usage: handover MODE PATH [MODE PATH]...\n");
		return TP_FAIL;
	}
	for (int i = 1; i + 1 < argc; i += 2) {
		pid_t pid = start(argv[i], argv[i + 1]);
		siginfo_t si;

		memset(&si, 0, sizeof(si));
		while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) < 0)
			if (errno != EINTR)
				tp_die("waitid");
		unsigned long long ticks = start_ticks(pid);
		tp_expect_code(tp_wait(pid), 0, argv[i + 1]);
		printf("%d %s %llu %s\n", (int)pid, argv[i], ticks, argv[i + 1]);
	}
	return 0;
}
