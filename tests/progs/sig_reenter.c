/*
 * sig_reenter chld|alrm: hooked functions called from signal handlers while
 * the main thread is inside the agent (forking, waiting, reporting).
 *
 * chld: a SIGCHLD handler reaps with waitpid(-1, WNOHANG) in a loop and
 *   also calls close() on a bad fd and dup2() onto a bad fd, while the main
 *   thread forks 300 children and never waits for them itself. Child i:
 *   i % 3 == 0 execs exit_with (i % 100), i % 3 == 1 _exits (i % 128)
 *   without exec, i % 3 == 2 kills itself with SIGTERM (a silent fork child:
 *   only its parent's wait can tell the trace how it ended). Every 60 forks
 *   the main thread also runs system("exit 7"), which blocks SIGCHLD while
 *   its shell runs, and names itself after each fork (one more record
 *   the handler can interrupt). The handler records each pid and status;
 *   main checks all of them and prints a summary.
 *
 * alrm: a 1 ms interval timer whose SIGALRM handler dup2()s a pipe onto fds
 *   of its own and closes them, and also dup2()s it onto every open fd in
 *   1000..1100 that is not its own (the agent's socket lives there: the
 *   agent must move it, from inside a signal handler that may have
 *   interrupted the agent itself) and closes it again. The main thread
 *   forks 300 children (_exit(i % 128)) and waits for each.
 *
 * A deadlock hangs the program (the test's timeout catches it).
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/time.h>

#include "internal.h"

#define NCHILD 300

static pid_t pids[NCHILD];
/* What the SIGCHLD handler reaped, in order; matched to pids[] by main
 * afterwards (a child may be reaped before fork() returned its pid). */
static pid_t reaped_pid[NCHILD + 1];
static int reaped_st[NCHILD + 1];
static volatile sig_atomic_t reaped;
static int pipefd[2];
static volatile sig_atomic_t ticks;

/* Signal-safe: a linear search, no locks. */
static void on_chld(int sig)
{
	int saved = errno;
	int st, i;
	pid_t pid;

	(void)sig;
	close(-1);
	dup2(-1, 1000);
	(void)getpid();
	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		i = reaped;
		if (i > NCHILD)
			_exit(TP_FAIL); /* more children than we made */
		reaped_pid[i] = pid;
		reaped_st[i] = st;
		reaped = i + 1;
	}
	errno = saved;
}

static int chld_child(int i, const char *exit_with)
{
	char code[8];
	char *argv[] = {"exit_with", code, NULL};

	if (i % 3 == 0) {
		snprintf(code, sizeof(code), "%d", i % 100);
		execv(exit_with, argv);
		_exit(TP_FAIL);
	}
	if (i % 3 == 1)
		_exit(i % 128);
	kill(getpid(), SIGTERM);
	_exit(TP_FAIL);
}

static int run_chld(void)
{
	char exit_with[PATH_MAX];
	struct sigaction sa;
	sigset_t chld, old;
	int i, bad = 0, sys_ok = 0;

	tp_sibling(exit_with, sizeof(exit_with), "exit_with");
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_chld;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGCHLD, &sa, NULL) < 0)
		tp_die("sigaction");
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	for (i = 0; i < NCHILD; i++) {
		/* SIGCHLD stays unblocked: the handler must be able to land
		 * while this thread is inside the agent (its FORK record, the
		 * thread name below). */
		pid_t pid = fork();

		if (pid < 0)
			tp_die("fork");
		if (pid == 0)
			chld_child(i, exit_with);
		pids[i] = pid;
		if (pthread_setname_np(pthread_self(), i % 2 ? "forker-odd" : "forker-even") != 0)
			tp_die("pthread_setname_np");
		if (i % 60 == 59) {
			int st = system("exit 7");

			if (WIFEXITED(st) && WEXITSTATUS(st) == 7)
				sys_ok++;
			else
				fprintf(stderr, "system: status 0x%x\n", st);
		}
	}
	sigprocmask(SIG_BLOCK, &chld, &old);
	while (reaped < NCHILD)
		sigsuspend(&old);
	sigprocmask(SIG_SETMASK, &old, NULL);
	for (i = 0; i < NCHILD; i++) {
		int j, st = -1;

		for (j = 0; j < reaped; j++)
			if (reaped_pid[j] == pids[i])
				st = reaped_st[j];
		int ok = i % 3 == 0   ? WIFEXITED(st) && WEXITSTATUS(st) == i % 100
			 : i % 3 == 1 ? WIFEXITED(st) && WEXITSTATUS(st) == i % 128
				      : WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM;
		if (!ok) {
			fprintf(stderr, "child %d: status 0x%x\n", i, st);
			bad++;
		}
	}
	if (bad)
		return TP_FAIL;
	printf("sig_reenter chld: %d children reaped in the handler, %d system() ok\n", NCHILD,
	       sys_ok);
	return 0;
}

/* Signal-safe: fcntl, dup2 and close only. */
static void on_alrm(int sig)
{
	int saved = errno;
	int fd;

	(void)sig;
	ticks++;
	if (dup2(pipefd[0], 50) != 50 || dup3(pipefd[1], 51, O_CLOEXEC) != 51)
		_exit(TP_FAIL);
	close(50);
	close(51);
	for (fd = 1000; fd <= 1100; fd++) {
		if (fd == pipefd[0] || fd == pipefd[1] || fcntl(fd, F_GETFD) < 0)
			continue;
		if (dup2(pipefd[0], fd) != fd)
			_exit(TP_FAIL);
		close(fd);
	}
	errno = saved;
}

static int run_alrm(void)
{
	struct itimerval it = {{0, 1000}, {0, 1000}};
	struct sigaction sa;
	int i;

	if (pipe(pipefd) < 0)
		tp_die("pipe");
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alrm;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGALRM, &sa, NULL) < 0)
		tp_die("sigaction");
	if (setitimer(ITIMER_REAL, &it, NULL) < 0)
		tp_die("setitimer");
	for (i = 0; i < NCHILD; i++) {
		pid_t pid = fork();

		if (pid < 0)
			tp_die("fork");
		if (pid == 0)
			_exit(i % 128);
		tp_expect_code(tp_wait(pid), i % 128, "child");
	}
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_REAL, &it, NULL);
	if (ticks < 5) {
		fprintf(stderr, "sig_reenter alrm: only %d timer ticks\n", (int)ticks);
		return TP_FAIL;
	}
	printf("sig_reenter alrm: %d children\n", NCHILD);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "chld") == 0)
		return run_chld();
	if (argc == 2 && strcmp(argv[1], "alrm") == 0)
		return run_alrm();
	fprintf(stderr, "usage: sig_reenter chld|alrm\n");
	return TP_FAIL;
}
