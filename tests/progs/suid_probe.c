/*
 * suid_probe launch PATH | setuid: for the setuid test.
 *
 * This program is linked against libforktrace-agent.so itself (DT_NEEDED
 * with an absolute RUNPATH), so the agent is loaded even into a setuid
 * image, where the loader ignores LD_PRELOAD: what keeps the agent from
 * acting there is its own AT_SECURE check (STYLE "never" rule 12).
 *
 * launch PATH: forks a child that execs PATH setuid (a setuid-root copy
 *   of this program), waits and exits with its code.
 * setuid: must run with a real uid that is not 0 and effective uid 0 (it
 *   exits 100 otherwise, so a broken setup cannot pass). Forks a child
 *   that drops the privileges for good and execs /bin/true, waits, and
 *   exits 0.
 */
#include <sys/auxv.h>

#include "internal.h"

static int launch(const char *path)
{
	char *argv[] = {"suid_probe", "setuid", NULL};
	pid_t pid = fork();
	int st;

	if (pid < 0)
		tp_die("fork");
	if (pid == 0) {
		execv(path, argv);
		_exit(TP_FAIL);
	}
	st = tp_wait(pid);
	if (!WIFEXITED(st))
		tp_die("setuid child did not exit");
	return WEXITSTATUS(st);
}

static int setuid_mode(void)
{
	char *argv[] = {"true", NULL};
	pid_t pid;

	if (getuid() == 0 || geteuid() != 0 || getauxval(AT_SECURE) != 1) {
		fprintf(stderr, "suid_probe: uid %d euid %d AT_SECURE %lu: not a setuid-root run\n",
			(int)getuid(), (int)geteuid(), getauxval(AT_SECURE));
		return TP_FAIL;
	}
	pid = fork();
	if (pid < 0)
		tp_die("fork");
	if (pid == 0) {
		if (setresuid(getuid(), getuid(), getuid()) != 0)
			_exit(TP_FAIL);
		execv("/bin/true", argv);
		_exit(TP_FAIL);
	}
	tp_expect_code(tp_wait(pid), 0, "/bin/true");
	printf("suid_probe setuid ok\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "launch") == 0)
		return launch(argv[2]);
	if (argc == 2 && strcmp(argv[1], "setuid") == 0)
		return setuid_mode();
	fprintf(stderr, "usage: suid_probe launch PATH | suid_probe setuid\n");
	return TP_FAIL;
}
