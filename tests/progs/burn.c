/*
 * burn MS MIB [kill]: touches MIB MiB of memory, then spins until it has
 * used MS ms of user CPU time, prints what getrusage(RUSAGE_SELF) says it
 * used ("user_ns sys_ns maxrss_kb"), and exits 0 (or, with kill, dies of
 * SIGKILL: no exit call, so no agent's EXIT).
 * burn waitpid MS MIB [kill]: forks a child that execs burn MS MIB [kill]
 * and reaps it with waitpid.
 * burn orphan MS MIB: forks a child that execs burn MS MIB and exits at
 * once, leaving the child to the subreaper.
 * burn waitid MS MIB: as waitpid, but reaps the child with waitid, which
 * gives its caller no rusage.
 * burn waitid-fork MS MIB: forks a child that burns MS MIB itself (no exec:
 * it never speaks to the agent, so it sends no EXIT) and reaps it with
 * waitid.
 * burn ignored MS MIB, burn nocldwait MS MIB: ignores SIGCHLD (SIG_IGN;
 * SA_NOCLDWAIT with the default action), then forks a child that burns MS
 * MIB itself (no exec) and exits 3 (exit; _exit under nocldwait): the
 * kernel reaps it, nobody waits for it. The parent's waitpid returns
 * ECHILD once the child is gone.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* Where the spinning loop's sums go, so that it is not optimised away. */
static volatile unsigned long burn_sink;

static long long ns_of(struct timeval tv)
{
	return (long long)tv.tv_sec * 1000000000 + (long long)tv.tv_usec * 1000;
}

static int burn(long ms, long mib, int kill_self)
{
	struct rusage ru;
	size_t n = (size_t)mib << 20;
	char *mem = n ? malloc(n) : NULL;

	if (n && !mem)
		return 2;
	/* Every page written: resident, and page faults (system time). */
	for (size_t i = 0; i < n; i += 4096)
		mem[i] = (char)i;
	do {
		for (int i = 0; i < 100000; i++)
			burn_sink += (unsigned long)i * 7u;
		getrusage(RUSAGE_SELF, &ru);
	} while (ns_of(ru.ru_utime) < ms * 1000000LL);
	printf("%lld %lld %ld\n", ns_of(ru.ru_utime), ns_of(ru.ru_stime), ru.ru_maxrss);
	fflush(stdout);
	if (kill_self)
		raise(SIGKILL);
	free(mem);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && (strcmp(argv[1], "ignored") == 0 || strcmp(argv[1], "nocldwait") == 0)) {
		struct sigaction sa;
		int nocldwait = argv[1][0] == 'n';
		int status;
		pid_t pid;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = nocldwait ? SIG_DFL : SIG_IGN;
		sa.sa_flags = nocldwait ? SA_NOCLDWAIT : 0;
		if (sigaction(SIGCHLD, &sa, NULL) != 0)
			return 5;
		pid = fork();
		if (pid < 0)
			return 3;
		if (pid == 0) {
			int rc = burn(atol(argv[2]), atol(argv[3]), 0);

			if (nocldwait)
				_exit(rc ? rc : 3);
			exit(rc ? rc : 3);
		}
		return waitpid(pid, &status, 0) < 0 && errno == ECHILD ? 0 : 4;
	}
	if (argc >= 4 && strcmp(argv[1], "waitid-fork") == 0) {
		siginfo_t si;
		pid_t pid = fork();

		if (pid < 0)
			return 3;
		if (pid == 0)
			exit(burn(atol(argv[2]), atol(argv[3]), 0));
		return waitid(P_PID, (id_t)pid, &si, WEXITED) == 0 && si.si_pid == pid &&
				       si.si_code == CLD_EXITED && si.si_status == 0
			       ? 0
			       : 4;
	}
	if (argc >= 4 && (strcmp(argv[1], "waitpid") == 0 || strcmp(argv[1], "orphan") == 0 ||
			  strcmp(argv[1], "waitid") == 0)) {
		char *args[] = {"burn", argv[2], argv[3], argc > 4 ? argv[4] : NULL, NULL};
		int status;
		pid_t pid = fork();

		if (pid < 0)
			return 3;
		if (pid == 0) {
			execv("/proc/self/exe", args);
			_exit(127);
		}
		if (argv[1][0] == 'o')
			return 0;
		if (strcmp(argv[1], "waitid") == 0) {
			siginfo_t si;

			return waitid(P_PID, (id_t)pid, &si, WEXITED) == 0 && si.si_pid == pid ? 0
											       : 4;
		}
		if (waitpid(pid, &status, 0) != pid)
			return 4;
		return 0;
	}
	if (argc < 3)
		return 1;
	return burn(atol(argv[1]), atol(argv[2]), argc > 3 && strcmp(argv[3], "kill") == 0);
}
