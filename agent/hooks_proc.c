/*
 * Process-level hooks: fork, the wait family, the exit paths (including
 * return from main, through on_exit), system, popen and pclose; and what a
 * fork child, or a raw clone child (agent_same_process), drops of its
 * parent's agent (agent_fork_child).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

void agent_fork_child(pid_t parent_pid, uint64_t boot_before)
{
	/* The lock word was copied locked: nobody else exists to release it. */
	__atomic_store_n(&agent_g.lockword, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&agent_g.fork_tid, 0, __ATOMIC_RELAXED);
	agent_g.start_ticks = agent_fork_start_ticks(boot_before);
	agent_g.pid = (pid_t)agent_syscall0(SYS_getpid);
	agent_g.ppid = parent_pid;
	agent_g.lost = 0;
	agent_g.exit_sent = 0;
	agent_g.reconnected = 0;
	agent_g.ack_wait = 0;
	agent_g.introduced = 0;
	/* Each reset below writes only when there is something to reset:
	 * every page a fork child writes costs it a copy-on-write fault, and
	 * most fork children only exec. */
	agent_threads_reset();
	agent_popen_reset();
	agent_ev_fork_child();
	agent_table_fork_child();
	agent_defer_fork_child();
	/* Close the parent's connection without ever writing on it. */
	if (agent_g.fd >= 0)
		agent_syscall(SYS_close, agent_g.fd); /* errno untouched */
	agent_g.fd = -1;
	/*
	 * Connect only when there is something to say. Most fork children
	 * exec at once, and the new image introduces itself; a connection
	 * here would double the per-process cost of a build for nothing
	 * (the parent's FORK and WAIT records already tell when the child
	 * started and how it ended).
	 */
	agent_g.forked = 1;
	agent_g.pending_connect = 1;
}

/*
 * fork: every agent lock is taken with all signals blocked, so the child
 * never inherits a lock held by a thread that does not exist there; both
 * sides release it. The child drops the parent's connection and opens its
 * own (agent_fork_child); the parent reports FORK, still holding the
 * lock. Preserves errno.
 *
 * Until the child execs, every page the parent writes is one it copies,
 * and what the parent does before it waits delays a child that runs on
 * its CPU (as 1999 of 2000 did in the benchmark's loop, bpftrace): after
 * fork the parent writes agent_g's page and its stack, not its TLS. The
 * lock holder is told by agent_g.fork_tid (agent_nested), not by the TLS
 * nesting guard.
 */
AGENT_EXPORT pid_t fork(void)
{
	agent_fork_fn f = AGENT_REAL(fork);
	sigset_t all, old;
	pid_t parent, pid;
	uint64_t ts, boot;
	int err;

	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	if (agent_bypass()) {
		/*
		 * A signal handler that interrupted the agent on this thread
		 * forks: the child inherits a send in progress on the parent's
		 * connection, which it must never finish there (STYLE: never
		 * write on the parent's socket). The child drops the
		 * connection (the interrupted send then fails and is counted)
		 * and goes on untraced; the parent is untouched.
		 */
		bool inside = agent_nested() && !agent_t_in_vfork &&
			      __atomic_load_n(&agent_g.active, __ATOMIC_RELAXED);

		pid = f();
		if (pid == 0 && inside) {
			agent_g.reconnected = 1;
			__atomic_store_n(&agent_g.fd, -1, __ATOMIC_RELAXED);
			__atomic_store_n(&agent_g.active, 0, __ATOMIC_RELAXED);
		}
		return pid;
	}
	/* A raw clone child that shares our memory: a fork it makes is
	 * recorded by no one, as a vfork child's (agent_same_process). */
	if (!agent_silent_fork_child() && !agent_same_process())
		return f();
	agent_ev_flush_self();
	agent_resolve_all();
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	agent_lock();
	__atomic_store_n(&agent_g.fork_tid, agent_tid(), __ATOMIC_RELAXED);
	/* Mapped once here, the header is every child's to claim a slot
	 * for the image it execs. */
	agent_table_need_header();
	parent = agent_g.pid;
	/* FORK carries the time before the child exists, so the collector
	 * can order it before anything the child says or its end. */
	ts = agent_now();
	boot = agent_boot_now();
	pid = f();
	if (pid == 0) {
		/* Fork succeeded: errno is as it was. The child reaches
		 * neither errno nor pthread_sigmask: each lives on a page of
		 * libc's text that, like every page of a file mapping, fork
		 * left unmapped in the child, to be faulted in on first use. */
		agent_fork_child(parent, boot);
		(void)agent_raw_sigmask(SIG_SETMASK, &old, NULL);
		return 0;
	}
	err = errno;
	{
		unsigned char frame[AGENT_SMALL_FRAME];

		agent_write_locked(frame, enc_fork(frame, sizeof(frame), ts, agent_tid(),
						   FT_SPAWN_FORK, pid, pid < 0 ? err : 0));
	}
	__atomic_store_n(&agent_g.fork_tid, 0, __ATOMIC_RELAXED);
	agent_unlock();
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	agent_errno_restore(err);
	return pid;
}

/* Wait hooks record even when reached from a signal handler inside the
 * agent (a SIGCHLD handler that reaps): the child's end may be known from
 * nothing else. Only an inactive agent or a vfork child passes through. */
static bool agent_wait_bypass(void)
{
	return !__atomic_load_n(&agent_g.active, __ATOMIC_RELAXED) || agent_t_in_vfork;
}

/* Report a reaped child: exits and deaths only, not stops/continues,
 * with ru, what wait4 said the child used (NULL: not known). Nested in
 * the agent (agent_nested: a signal handler interrupted it, or fork's
 * atfork handlers run inside the fork hook; either may hold the send
 * lock), the record is queued for the next unlock to send. Signal-safe.
 * Preserves errno. */
static void agent_emit_wait(pid_t child, int status, const struct rusage *ru)
{
	int err = errno;
	struct enc_rusage eru;

	if (!WIFEXITED(status) && !WIFSIGNALED(status))
		return;
	if (ru)
		enc_rusage_from(&eru, ru);
	if (agent_nested()) {
		agent_defer_wait(agent_now(), child, status, ru ? &eru : NULL);
	} else {
		unsigned char frame[AGENT_RU_FRAME];

		agent_emit_frame(frame, enc_wait(frame, sizeof(frame), agent_now(), agent_tid(),
						 child, status, ru ? &eru : NULL));
	}
	errno = err;
}

/*
 * wait, waitpid and wait3 are wait4 with fewer arguments (glibc makes
 * each of them the one wait4 system call, a cancellation point alike):
 * the hooks call the real wait4 with a rusage of their own, so that WAIT
 * tells what the child used at no cost of another call.
 */
AGENT_EXPORT pid_t wait(int *status)
{
	agent_wait4_fn w4 = AGENT_REAL(wait4);
	struct rusage ru;
	int local;
	pid_t ret;

	if (agent_wait_bypass() || !w4)
		return AGENT_REAL(wait)(status);
	ret = w4(-1, status ? status : &local, 0, &ru);
	if (ret > 0)
		agent_emit_wait(ret, status ? *status : local, &ru);
	return ret;
}

AGENT_EXPORT pid_t waitpid(pid_t pid, int *status, int options)
{
	agent_wait4_fn w4 = AGENT_REAL(wait4);
	struct rusage ru;
	int local;
	pid_t ret;

	if (agent_wait_bypass() || !w4)
		return AGENT_REAL(waitpid)(pid, status, options);
	ret = w4(pid, status ? status : &local, options, &ru);
	if (ret > 0)
		agent_emit_wait(ret, status ? *status : local, &ru);
	return ret;
}

AGENT_EXPORT pid_t wait3(int *status, int options, struct rusage *ru)
{
	agent_wait4_fn w4 = AGENT_REAL(wait4);
	struct rusage own;
	struct rusage *r = ru ? ru : &own;
	int local;
	pid_t ret;

	if (agent_wait_bypass() || !w4)
		return AGENT_REAL(wait3)(status, options, ru);
	ret = w4(-1, status ? status : &local, options, r);
	if (ret > 0)
		agent_emit_wait(ret, status ? *status : local, r);
	return ret;
}

AGENT_EXPORT pid_t wait4(pid_t pid, int *status, int options, struct rusage *ru)
{
	agent_wait4_fn f = AGENT_REAL(wait4);
	struct rusage own;
	struct rusage *r = ru ? ru : &own;
	int local;
	pid_t ret;

	if (agent_wait_bypass())
		return f(pid, status, options, ru);
	ret = f(pid, status ? status : &local, options, r);
	if (ret > 0)
		agent_emit_wait(ret, status ? *status : local, r);
	return ret;
}

/* The raw wait status of a waitid exit or death; -1 for other events. */
static int agent_siginfo_status(const siginfo_t *si)
{
	switch (si->si_code) {
	case CLD_EXITED:
		return (si->si_status & 0xff) << 8;
	case CLD_KILLED:
		return si->si_status & 0x7f;
	case CLD_DUMPED:
		return (si->si_status & 0x7f) | 0x80;
	default:
		return -1;
	}
}

/*
 * waitid reports a siginfo: convert exits and deaths to the raw status
 * waitpid would have given. WNOWAIT leaves the child unreaped: skip.
 * libc's waitid gives no rusage (the kernel gives one only through the
 * system call's fifth argument), and the raw call with one would not be
 * the cancellation point the caller's waitid is. So a waitid for exits
 * only first looks with the caller's own waitid and WNOWAIT (the
 * cancellation point, blocking as the caller's would), then reaps the
 * zombie it found with wait4 and WNOHANG, which does not block: WAIT
 * tells what the child used, as a waitpid's does (a fork child that never
 * spoke sends no EXIT: this is its only figure). If another thread reaped
 * that child in between, the look starts again, as the caller's waitid
 * would have gone on to another child. A waitid that also asks for stops
 * or continues is passed through (looking would not consume such an
 * event), as is one under a seccomp filter (which may forbid wait4) or
 * one whose wait4 fails otherwise: its children have their own EXIT's
 * figure. Signal-safe.
 */
AGENT_EXPORT int waitid(idtype_t idtype, id_t id, siginfo_t *info, int options)
{
	agent_waitid_fn f = AGENT_REAL(waitid);
	siginfo_t local;
	siginfo_t *si = info ? info : &local;
	struct rusage ru;
	int ret, status, raw;
	long reaped;

	if (agent_wait_bypass())
		return f(idtype, id, info, options);
	if (!info)
		memset(&local, 0, sizeof(local));
	if ((options & (WNOWAIT | WSTOPPED | WCONTINUED)) ||
	    __atomic_load_n(&agent_g.seccomp, __ATOMIC_RELAXED)) {
pass_through:
		ret = f(idtype, id, si, options);
		if (ret != 0 || si->si_pid == 0 || (options & WNOWAIT))
			return ret;
		status = agent_siginfo_status(si);
		if (status >= 0)
			agent_emit_wait(si->si_pid, status, NULL);
		return ret;
	}
	for (;;) {
		ret = f(idtype, id, si, options | WNOWAIT);
		if (ret != 0 || si->si_pid == 0)
			return ret;
		reaped = agent_syscall(SYS_wait4, si->si_pid, &raw,
				       WNOHANG | __WALL | (options & __WNOTHREAD), &ru);
		if (reaped == si->si_pid)
			break;
		if (reaped != 0 && reaped != -ECHILD)
			goto pass_through;
	}
	status = agent_siginfo_status(si);
	if (status >= 0)
		agent_emit_wait(si->si_pid, status, &ru);
	return ret;
}

/* EXIT goes out once per process image, whichever path comes first. */
static void agent_emit_exit(int code)
{
	if (!agent_bypass() && !agent_silent_fork_child() && !agent_same_process())
		return; /* a raw clone child that shares our memory */
	agent_ev_flush_self();
	if (agent_bypass() || __atomic_exchange_n(&agent_g.exit_sent, 1, __ATOMIC_RELAXED))
		return;
	/* A fork child that never spoke: its parent's WAIT tells its end,
	 * unless its parent has the kernel reap it (SIGCHLD ignored or
	 * SA_NOCLDWAIT at fork): then nobody would, and it speaks as an
	 * image that exec'd does. */
	if (agent_silent_fork_child() && !agent_exit_unwaited())
		return;
	/* What the process used, and what the descendants it reaped used:
	 * its reaper's figure less the second is its own (docs/INSIGHT.md,
	 * "Resource use per process"). */
	unsigned char frame[AGENT_RU_FRAME];
	struct enc_rusage self, children;
	bool has_self = agent_rusage(RUSAGE_SELF, &self) == 0;
	bool has_children = agent_rusage(RUSAGE_CHILDREN, &children) == 0;

	agent_emit_frame(frame, enc_exit(frame, sizeof(frame), agent_now(), agent_tid(), code,
					 has_self ? &self : NULL, has_children ? &children : NULL));
	agent_await_ack();
}

AGENT_EXPORT void exit(int code)
{
	agent_exit_fn f = AGENT_REAL(exit);

	agent_emit_exit(code);
	if (f)
		f(code);
	agent_syscall(SYS_exit_group, code);
	__builtin_unreachable();
}

AGENT_EXPORT void _exit(int code)
{
	agent__exit_fn f = AGENT_REAL(_exit);

	agent_emit_exit(code);
	if (f)
		f(code);
	agent_syscall(SYS_exit_group, code);
	__builtin_unreachable();
}

AGENT_EXPORT void _Exit(int code)
{
	agent__Exit_fn f = AGENT_REAL(_Exit);

	agent_emit_exit(code);
	if (f)
		f(code);
	agent_syscall(SYS_exit_group, code);
	__builtin_unreachable();
}

/* A return from main calls exit() inside libc, past our hook. Both run
 * the on_exit handlers, with the status: one handler sees both, where
 * wrapping main through __libc_start_main took every image a dlsym. It
 * runs after the program's own atexit handlers (registered later), so
 * events they record are flushed too. */
static void agent_on_exit(int code, void *arg)
{
	(void)arg;
	agent_emit_exit(code);
}

void agent_exit_watch(void)
{
	on_exit(agent_on_exit, NULL);
}

/*
 * system() and popen(): glibc spawns /bin/sh with `environ` through an
 * internal posix_spawn we cannot hook. When environ still carries
 * LD_PRELOAD (with us) and FORKTRACE_SOCK, the real function is used as is.
 * When it does not (the program unsetenv'd them), the call is done here
 * with posix_spawn and a merged envp instead: editing environ behind the
 * program's back would be visible to it and racy with other threads.
 */
static const char agent_shell[] = "/bin/sh";

/*
 * The shell's argv as this libc's own system() and popen() give it:
 * glibc 2.38 put "--" before the command (a command starting with '-'),
 * older ones did not. The program may see it (ps, $0 handling), and the
 * agent spawns the shell itself whenever it merges the environment,
 * which is every time since the program's environ no longer carries the
 * agent's variables. Asked once.
 */
static void agent_shell_argv(char *argv[5], const char *cmd)
{
	static int dashes = -1;
	int d = __atomic_load_n(&dashes, __ATOMIC_RELAXED);

	if (d < 0) {
		const char *(*ver)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT,
									"gnu_get_libc_version");
		const char *v = ver ? ver() : NULL;
		unsigned major = 0, minor = 0;

		while (v && *v >= '0' && *v <= '9')
			major = major * 10 + (unsigned)(*v++ - '0');
		if (v && *v == '.')
			for (v++; *v >= '0' && *v <= '9'; v++)
				minor = minor * 10 + (unsigned)(*v - '0');
		/* Not glibc: POSIX's sh -c -- is the safe reading. */
		d = !v || major > 2 || (major == 2 && minor >= 38);
		__atomic_store_n(&dashes, d, __ATOMIC_RELAXED);
	}
	argv[0] = (char *)"sh";
	argv[1] = (char *)"-c";
	argv[2] = d ? (char *)"--" : (char *)cmd;
	argv[3] = d ? (char *)cmd : NULL;
	argv[4] = NULL;
}

/* system(3) as POSIX describes it: SIGINT/SIGQUIT ignored and SIGCHLD
 * blocked in the caller while the shell runs. */
static int agent_own_system(const char *cmd, char **envp)
{
	agent_posix_spawn_fn spawn = AGENT_REAL(posix_spawn);
	agent_waitpid_fn wpid = AGENT_REAL(waitpid);
	char *argv[5];
	struct sigaction ign, oint, oquit;
	sigset_t chld, omask, def;
	posix_spawnattr_t attr;
	pid_t pid;
	int status, ret;

	agent_shell_argv(argv, cmd);
	memset(&ign, 0, sizeof(ign));
	ign.sa_handler = SIG_IGN;
	sigemptyset(&ign.sa_mask);
	sigaction(SIGINT, &ign, &oint);
	sigaction(SIGQUIT, &ign, &oquit);
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, &omask);

	sigemptyset(&def);
	if (oint.sa_handler != SIG_IGN)
		sigaddset(&def, SIGINT);
	if (oquit.sa_handler != SIG_IGN)
		sigaddset(&def, SIGQUIT);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setsigmask(&attr, &omask);
	posix_spawnattr_setsigdefault(&attr, &def);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
	ret = spawn(&pid, agent_shell, NULL, &attr, argv, envp);
	/* Past the kernel's limit only with the agent's variables: the
	 * shell runs as it would untraced, without the agent. */
	if (ret == E2BIG && envp != environ)
		ret = spawn(&pid, agent_shell, NULL, &attr, argv, environ);
	posix_spawnattr_destroy(&attr);
	if (ret == 0) {
		while (wpid(pid, &status, 0) < 0) {
			if (errno != EINTR) {
				status = -1;
				break;
			}
		}
	} else {
		status = 127 << 8;
	}

	sigaction(SIGINT, &oint, NULL);
	sigaction(SIGQUIT, &oquit, NULL);
	sigprocmask(SIG_SETMASK, &omask, NULL);
	if (ret != 0)
		errno = ret;
	return status;
}

AGENT_EXPORT int system(const char *cmd)
{
	agent_system_fn f = AGENT_REAL(system);
	struct agent_env env;
	bool record;
	int ret, err;

	if (!cmd || agent_t_in_vfork || agent_nested() || !agent_env_ready())
		return f(cmd);
	record = !agent_bypass();
	if (record && !agent_silent_fork_child() && !agent_same_process())
		record = false; /* a raw clone child that shares our memory */
	if (record)
		agent_ev_flush_self();
	if (record)
		AGENT_EMIT(enc_shell(agent_buf, AGENT_BUF_SIZE, 0, agent_now(), agent_tid(),
				     FT_SPAWN_SYSTEM, cmd, 0));
	agent_env_merge(&env, environ, NULL);
	if (env.envp == environ)
		ret = f(cmd);
	else
		ret = agent_own_system(cmd, env.envp);
	err = errno;
	agent_env_release(&env);
	if (record && !agent_bypass()) {
		/* -1: no shell could be started (fork failed): say why. */
		if (ret == -1)
			AGENT_EMIT(enc_shell_fail(agent_buf, AGENT_BUF_SIZE, agent_now(),
						  agent_tid(), FT_SPAWN_SYSTEM, cmd, ret, err));
		else
			AGENT_EMIT(enc_shell(agent_buf, AGENT_BUF_SIZE, 1, agent_now(), agent_tid(),
					     FT_SPAWN_SYSTEM, cmd, ret));
	}
	errno = err;
	return ret;
}

/* Open popen streams: FILE* -> command (for SHELL_END) and, for streams
 * opened by agent_own_popen, the child to reap. Guarded by the send lock. */
#define AGENT_POPEN_MAX 64
#define AGENT_POPEN_CMD 256

struct agent_popen {
	FILE *fp;
	int fd;
	pid_t pid; /* ours to reap; 0 = glibc's stream */
	char cmd[AGENT_POPEN_CMD];
};

AGENT_DATA static struct agent_popen agent_popens[AGENT_POPEN_MAX];

void agent_popen_reset(void)
{
	/* The child inherits the streams; glibc's pclose still works on
	 * them, ours would wait for a child that is not its own. Only used
	 * slots are cleared: see agent_threads_reset. */
	if (agent_g.popens_used) {
		memset(agent_popens, 0, (size_t)agent_g.popens_used * sizeof(agent_popens[0]));
		agent_g.popens_used = 0;
	}
}

/* Returns the slot index or -1 when the table is full. Caller holds the
 * send lock. */
static int agent_popen_slot(void)
{
	int i;

	for (i = 0; i < AGENT_POPEN_MAX; i++) {
		if (!agent_popens[i].fp) {
			if (i >= agent_g.popens_used)
				agent_g.popens_used = i + 1;
			return i;
		}
	}
	return -1;
}

/* Parses a popen mode as glibc does: the letters r, w and e in any order,
 * exactly one of r and w. False (the call fails with EINVAL) otherwise. */
static bool agent_popen_mode(const char *mode, bool *rd, bool *cloexec)
{
	bool r = false, w = false;

	*cloexec = false;
	for (; *mode; mode++) {
		if (*mode == 'r')
			r = true;
		else if (*mode == 'w')
			w = true;
		else if (*mode == 'e')
			*cloexec = true;
		else
			return false;
	}
	*rd = r;
	return r != w;
}

static FILE *agent_own_popen(const char *cmd, const char *mode, char **envp, pid_t *pidp)
{
	agent_posix_spawn_fn spawn = AGENT_REAL(posix_spawn);
	agent_close_fn cl = AGENT_REAL(close);
	char *argv[5];
	posix_spawn_file_actions_t fa;
	bool rd, cloexec;
	int p[2], mine, theirs, ret, i;
	FILE *fp;

	if (!agent_popen_mode(mode, &rd, &cloexec)) {
		errno = EINVAL;
		return NULL;
	}
	agent_shell_argv(argv, cmd);
	if (agent_sys_pipe2(p, O_CLOEXEC) < 0)
		return NULL;
	mine = rd ? p[0] : p[1];
	theirs = rd ? p[1] : p[0];
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, theirs, rd ? 1 : 0);
	/* POSIX: the child must not keep other popen streams open. */
	agent_t_guard++;
	agent_lock();
	for (i = 0; i < AGENT_POPEN_MAX; i++)
		if (agent_popens[i].fp && agent_popens[i].fp != (FILE *)-1)
			posix_spawn_file_actions_addclose(&fa, agent_popens[i].fd);
	agent_unlock();
	agent_t_guard--;
	ret = spawn(pidp, agent_shell, &fa, NULL, argv, envp);
	if (ret == E2BIG && envp != environ) /* as agent_own_system */
		ret = spawn(pidp, agent_shell, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	cl(theirs);
	if (ret != 0) {
		cl(mine);
		errno = ret;
		return NULL;
	}
	if (!cloexec)
		agent_sys_fcntl(mine, F_SETFD, 0);
	fp = fdopen(mine, rd ? "r" : "w");
	if (!fp) {
		int err = errno;

		cl(mine);
		while (AGENT_REAL(waitpid)(*pidp, NULL, 0) < 0 && errno == EINTR)
			;
		errno = err;
	}
	return fp;
}

AGENT_EXPORT FILE *popen(const char *cmd, const char *mode)
{
	agent_popen_fn f = AGENT_REAL(popen);
	struct agent_env env;
	pid_t pid = 0;
	FILE *fp;
	int err, slot;
	size_t n;

	if (!cmd || !mode || agent_t_in_vfork || agent_nested() || !agent_env_ready())
		return f(cmd, mode);
	/* A raw clone child that shares our memory must not take a slot of
	 * our popen table. */
	if (!agent_bypass() && !agent_silent_fork_child() && !agent_same_process())
		return f(cmd, mode);
	if (!agent_bypass())
		agent_ev_flush_self();
	agent_env_merge(&env, environ, NULL);
	agent_t_guard++;
	agent_lock();
	slot = agent_popen_slot();
	if (slot >= 0)
		agent_popens[slot].fp = (FILE *)-1; /* reserved */
	agent_unlock();
	agent_t_guard--;
	/* SHELL_BEGIN carries the time before the shell exists, so the
	 * collector can tell the shell started inside this call. */
	uint64_t ts = agent_now();
	if (env.envp != environ && slot >= 0)
		fp = agent_own_popen(cmd, mode, env.envp, &pid);
	else
		fp = f(cmd, mode);
	err = errno;
	agent_env_release(&env);
	if (slot >= 0) {
		agent_t_guard++;
		agent_lock();
		agent_popens[slot].fp = fp;
		if (fp) {
			agent_popens[slot].fd = fileno(fp);
			agent_popens[slot].pid = pid;
			n = strlen(cmd);
			if (n >= AGENT_POPEN_CMD)
				n = AGENT_POPEN_CMD - 1;
			memcpy(agent_popens[slot].cmd, cmd, n);
			agent_popens[slot].cmd[n] = '\0';
		}
		agent_unlock();
		agent_t_guard--;
	}
	if (!agent_bypass()) {
		AGENT_EMIT(enc_shell(agent_buf, AGENT_BUF_SIZE, 0, ts, agent_tid(), FT_SPAWN_POPEN,
				     cmd, 0));
		/* A popen that failed (fork failed, no pipe, a bad mode) is a
		 * call that ended at once, with why. */
		if (!fp)
			AGENT_EMIT(enc_shell_fail(agent_buf, AGENT_BUF_SIZE, agent_now(),
						  agent_tid(), FT_SPAWN_POPEN, cmd, -1, err));
	}
	errno = err;
	return fp;
}

AGENT_EXPORT int pclose(FILE *fp)
{
	agent_pclose_fn f = AGENT_REAL(pclose);
	struct agent_popen ent;
	int i, ret, err;

	ent.fp = NULL;
	if (!fp || agent_t_in_vfork || agent_nested())
		return f(fp);
	agent_t_guard++;
	agent_lock();
	for (i = 0; i < AGENT_POPEN_MAX; i++) {
		if (agent_popens[i].fp == fp) {
			ent = agent_popens[i];
			agent_popens[i].fp = NULL;
			break;
		}
	}
	agent_unlock();
	agent_t_guard--;
	if (ent.fp && ent.pid > 0) {
		/* Our own popen stream: close it, then reap its shell. */
		int status = -1;

		fclose(fp);
		while ((ret = AGENT_REAL(waitpid)(ent.pid, &status, 0)) < 0 && errno == EINTR)
			;
		ret = ret < 0 ? -1 : status;
	} else {
		ret = f(fp);
	}
	err = errno;
	if (ent.fp && !agent_bypass() && ret == -1)
		AGENT_EMIT(enc_shell_fail(agent_buf, AGENT_BUF_SIZE, agent_now(), agent_tid(),
					  FT_SPAWN_POPEN, ent.cmd, ret, err));
	else if (ent.fp && !agent_bypass())
		AGENT_EMIT(enc_shell(agent_buf, AGENT_BUF_SIZE, 1, agent_now(), agent_tid(),
				     FT_SPAWN_POPEN, ent.cmd, ret));
	errno = err;
	return ret;
}
