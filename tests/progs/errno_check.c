/*
 * errno_check [keep|clear]: makes hooked calls that fail and prints the
 * return value and errno of each, then makes hooked calls that succeed
 * with errno set to 1234 beforehand and prints errno after (a successful
 * call must leave it alone). The test compares the output traced and
 * untraced: any errno or return value the agent changes shows up as a
 * differing line.
 *
 * "clear" first empties the environment (clearenv), so system() and
 * popen() take the agent's own spawn paths (environ no longer carries
 * LD_PRELOAD), which must fail exactly like glibc's.
 *
 * fds 1000..1023 are never opened here: untraced every close or dup2 of
 * them fails with EBADF. Traced, the agent's socket lives there, and the
 * program must not be able to tell.
 */
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "internal.h"

/* Sentinel for "a successful call left errno alone". */
#define TP_ERRNO_MARK 1234

/* Prints the result of a call that should fail; errno is 0 before it, so
 * a value after it can only come from the call (or the agent). */
#define FAILING(label, expr)                                                                       \
	do {                                                                                       \
		long r_;                                                                           \
		int e_;                                                                            \
		errno = 0;                                                                         \
		r_ = (long)(expr);                                                                 \
		e_ = errno;                                                                        \
		printf("%-28s ret=%ld errno=%d\n", label, r_, e_);                                 \
	} while (0)

/* Prints errno after a call that should succeed (its result is checked by
 * the caller where it matters). */
#define SUCCEEDING(label, var, expr)                                                               \
	do {                                                                                       \
		int e_;                                                                            \
		errno = TP_ERRNO_MARK;                                                             \
		var = (expr);                                                                      \
		e_ = errno;                                                                        \
		printf("%-28s errno=%d\n", label, e_);                                             \
	} while (0)

extern char **environ;

static void failing_calls(void)
{
	char *argv[] = {"x", NULL};
	char *envp[] = {NULL};
	char label[32];
	siginfo_t si;
	pid_t pid = 0;
	int st, fd;

	FAILING("close(-1)", close(-1));
	for (fd = 1000; fd < 1024; fd++) {
		snprintf(label, sizeof(label), "close(%d)", fd);
		FAILING(label, close(fd));
	}
	for (fd = 1000; fd < 1024; fd++) {
		snprintf(label, sizeof(label), "dup2(%d,5)", fd);
		FAILING(label, dup2(fd, 5));
	}
	FAILING("dup2(-1,5)", dup2(-1, 5));
	FAILING("dup2(1,-1)", dup2(1, -1));
	FAILING("dup3(1,5,bad)", dup3(1, 5, 0x12345));
	FAILING("dup3(1,1,0)", dup3(1, 1, 0));
	FAILING("close_range(10,5)", close_range(10, 5, 0));
	FAILING("close_range(3,2000,bad)", close_range(3, 2000, 0x12340));
	FAILING("execv(/nonexistent)", execv("/nonexistent", argv));
	FAILING("execve(/nonexistent)", execve("/nonexistent", argv, envp));
	FAILING("execvp(no-such-cmd)", execvp("forktrace-no-such-cmd", argv));
	FAILING("execvpe(no-such-cmd)", execvpe("forktrace-no-such-cmd", argv, envp));
	FAILING("execl(/nonexistent)", execl("/nonexistent", "x", (char *)NULL));
	FAILING("execlp(no-such-cmd)", execlp("forktrace-no-such-cmd", "x", (char *)NULL));
	FAILING("execle(/nonexistent)", execle("/nonexistent", "x", (char *)NULL, envp));
	FAILING("execv(/)", execv("/", argv));
	FAILING("execveat(/nonexistent)", execveat(AT_FDCWD, "/nonexistent", argv, envp, 0));
	FAILING("fexecve(-1)", fexecve(-1, argv, envp));
	FAILING("waitpid(-1)", waitpid(-1, &st, 0));
	FAILING("waitpid(bad options)", waitpid(-1, &st, 0x4000000));
	FAILING("wait", wait(&st));
	FAILING("wait(NULL)", wait(NULL));
	FAILING("wait3", wait3(&st, 0, NULL));
	FAILING("wait4", wait4(-1, &st, 0, NULL));
	FAILING("waitid(P_ALL)", waitid(P_ALL, 0, &si, WEXITED));
	FAILING("waitid(P_PID,1)", waitid(P_PID, 1, &si, WEXITED | WNOHANG));
	FAILING("posix_spawn(missing)", posix_spawn(&pid, "/nonexistent", NULL, NULL, argv, envp));
	FAILING("posix_spawnp(missing)",
		posix_spawnp(&pid, "forktrace-no-such-cmd", NULL, NULL, argv, envp));
	FAILING("pthread_setname_np(long)",
		pthread_setname_np(pthread_self(), "a-thread-name-far-too-long"));
	FAILING("prctl(bad)", prctl(0x7fff1234, 0UL, 0UL, 0UL, 0UL));
	FAILING("prctl(PR_SET_NAME,bad ptr)", prctl(PR_SET_NAME, (unsigned long)8, 0UL, 0UL, 0UL));
	FAILING("system(NULL)", system(NULL));
	FAILING("popen(x)", popen("true", "x"));
	FAILING("popen(rw)", popen("true", "rw"));
	FAILING("popen(rx)", popen("true", "rx"));
	FAILING("popen(empty mode)", popen("true", ""));
}

static void succeeding_calls(void)
{
	char *targv[] = {"true", NULL};
	pid_t pid, got;
	FILE *fp;
	char buf[64];
	int ret, st, fd;

	fflush(stdout); /* the fork child must not print our buffer twice */
	SUCCEEDING("fork", pid, fork());
	if (pid == 0)
		_exit(3);
	if (pid < 0)
		tp_die("fork");
	SUCCEEDING("waitpid(pid)", got, waitpid(pid, &st, 0));
	if (got != pid)
		tp_die("waitpid");
	tp_expect_code(st, 3, "fork child");
	printf("fork child status=0x%x\n", st);

	pid = vfork();
	if (pid == 0)
		_exit(4);
	SUCCEEDING("wait", got, wait(&st));
	if (got != pid)
		tp_die("wait");
	tp_expect_code(st, 4, "vfork child");

	fd = open("/dev/null", O_RDONLY);
	if (fd < 0)
		tp_die("open /dev/null");
	SUCCEEDING("close(fd)", ret, close(fd));
	if (ret != 0)
		tp_die("close");
	SUCCEEDING("dup2(1,7)", ret, dup2(1, 7));
	if (ret != 7)
		tp_die("dup2");
	SUCCEEDING("dup3(1,8,O_CLOEXEC)", ret, dup3(1, 8, O_CLOEXEC));
	if (ret != 8)
		tp_die("dup3");
	SUCCEEDING("close_range(7,8)", ret, close_range(7, 8, 0));
	if (ret != 0)
		tp_die("close_range");

	SUCCEEDING("posix_spawn(/bin/true)", ret,
		   posix_spawn(&pid, "/bin/true", NULL, NULL, targv, environ));
	if (ret != 0)
		tp_die("posix_spawn");
	SUCCEEDING("waitid", ret, waitid(P_PID, (id_t)pid, &(siginfo_t){0}, WEXITED));
	if (ret != 0)
		tp_die("waitid");

	SUCCEEDING("system(exit 5)", ret, system("exit 5"));
	printf("system status=0x%x\n", ret);
	SUCCEEDING("popen(r)", fp, popen("echo popen-line", "r"));
	if (!fp)
		tp_die("popen");
	if (!fgets(buf, sizeof(buf), fp))
		tp_die("read popen");
	printf("popen read: %s", buf);
	SUCCEEDING("pclose", ret, pclose(fp));
	printf("pclose status=0x%x\n", ret);
	/* glibc takes the mode letters in any order. */
	SUCCEEDING("popen(er)", fp, popen("exit 6", "er"));
	if (!fp)
		tp_die("popen er");
	SUCCEEDING("pclose(er)", ret, pclose(fp));
	printf("pclose(er) status=0x%x\n", ret);

	SUCCEEDING("pthread_setname_np", ret, pthread_setname_np(pthread_self(), "errno-main"));
	if (ret != 0)
		tp_die("pthread_setname_np");
	SUCCEEDING("prctl(PR_SET_NAME)", ret,
		   prctl(PR_SET_NAME, (unsigned long)"errno-prctl", 0UL, 0UL, 0UL));
	if (ret != 0)
		tp_die("prctl");
}

int main(int argc, char **argv)
{
	if (argc != 2 || (strcmp(argv[1], "keep") != 0 && strcmp(argv[1], "clear") != 0)) {
		fprintf(stderr, "usage: errno_check keep|clear\n");
		return TP_FAIL;
	}
	if (strcmp(argv[1], "clear") == 0 && clearenv() != 0)
		tp_die("clearenv");
	failing_calls();
	succeeding_calls();
	printf("errno_check done\n");
	return 0;
}
