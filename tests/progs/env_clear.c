/*
 * env_clear: removes the tracer's variables from its own environment
 * (unsetenv LD_PRELOAD, unsetenv FORKTRACE_SOCK, then clearenv), then
 * starts children every way there is, each with the now empty environ:
 *   fork + execv   exit_with 31
 *   fork + execvp  true            (no PATH: glibc's default search path)
 *   fork + execl   exit_with 32
 *   vfork + execv  exit_with 33
 *   posix_spawnp   exit_with 34    (by its full path, envp = environ)
 *   system         "exit 35"
 *   popen          "echo popen-35; exit 36"
 * The agent read its settings in its constructor, so it must still put
 * itself and the socket into each child's environment: every child is
 * instrumented. Each status is checked.
 */
#include <spawn.h>

#include "internal.h"

extern char **environ;

static void expect(pid_t pid, int code, const char *who)
{
	if (pid < 0)
		tp_die(who);
	tp_expect_code(tp_wait(pid), code, who);
}

int main(void)
{
	char exit_with[PATH_MAX];
	char *a31[] = {"exit_with", "31", NULL};
	char *a33[] = {"exit_with", "33", NULL};
	char *a34[] = {"exit_with", "34", NULL};
	char *atrue[] = {"true", NULL};
	char line[64];
	FILE *fp;
	pid_t pid;
	int st;

	tp_sibling(exit_with, sizeof(exit_with), "exit_with");
	if (unsetenv("LD_PRELOAD") != 0 || unsetenv("FORKTRACE_SOCK") != 0 || clearenv() != 0)
		tp_die("clearing the environment");
	if (environ && environ[0])
		tp_die("environ is not empty");

	pid = fork();
	if (pid == 0) {
		execv(exit_with, a31);
		_exit(TP_FAIL);
	}
	expect(pid, 31, "execv");
	pid = fork();
	if (pid == 0) {
		execvp("true", atrue);
		_exit(TP_FAIL);
	}
	expect(pid, 0, "execvp");
	pid = fork();
	if (pid == 0) {
		execl(exit_with, "exit_with", "32", (char *)NULL);
		_exit(TP_FAIL);
	}
	expect(pid, 32, "execl");
	pid = vfork();
	if (pid == 0) {
		execv(exit_with, a33);
		_exit(TP_FAIL);
	}
	expect(pid, 33, "vfork+execv");
	if (posix_spawnp(&pid, exit_with, NULL, NULL, a34, environ) != 0)
		tp_die("posix_spawnp");
	expect(pid, 34, "posix_spawnp");
	st = system("exit 35");
	tp_expect_code(st, 35, "system");
	fp = popen("echo popen-35; exit 36", "r");
	if (!fp)
		tp_die("popen");
	if (!fgets(line, sizeof(line), fp))
		tp_die("reading popen");
	tp_expect_code(pclose(fp), 36, "pclose");
	printf("env_clear ok: %s", line);
	return 0;
}
