/*
 * bad_exec: two execs that fail, and the process carries on.
 *  - execvp of a program that exists nowhere on PATH: ENOENT;
 *  - execv of ./not-executable.sh, a file without execute permission
 *    (created here, in the current directory): EACCES.
 * It checks that errno is what libc would report (the agent must preserve
 * errno), then exits 0.
 */
#include <fcntl.h>

#include "internal.h"

int main(void)
{
	char *argv1[] = {"forktrace-no-such-program-xyz", "arg", NULL};
	char *argv2[] = {"not-executable.sh", NULL};
	int fd;

	execvp("forktrace-no-such-program-xyz", argv1);
	if (errno != ENOENT)
		tp_die("execvp: errno is not ENOENT");

	fd = open("not-executable.sh", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		tp_die("create not-executable.sh");
	if (write(fd, "#!/bin/sh\nexit 0\n", 17) != 17)
		tp_die("write not-executable.sh");
	close(fd);
	execv("./not-executable.sh", argv2);
	if (errno != EACCES)
		tp_die("execv: errno is not EACCES");
	printf("bad_exec ok: still running\n");
	return 0;
}
