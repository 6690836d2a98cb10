/*
 * Exec family and posix_spawn. glibc's execv/execvp/execl* reach execve
 * through internal symbols, so each entry point is hooked and funnelled into
 * agent_exec(), which merges the environment, sends EXEC (written before the
 * call), calls the real function and reports EXEC_FAIL if it returns.
 *
 * In a vfork child (agent_t_in_vfork) nothing is recorded: only the
 * environment is merged, from the stack and precomputed strings.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "internal.h"

/* execl* argument vectors up to this size live on the stack. */
#define AGENT_EXECL_STACK 256

static size_t agent_argc(char *const *argv)
{
	size_t n = 0;

	while (argv && argv[n])
		n++;
	return n;
}

/* Send EXEC with what the image used (its CPU is what EXEC's RUSAGE
 * less the previous image's); if argv does not fit the buffer, send a
 * prefix of it (also when it does not fit a table slot and no connection
 * may be made). */
static void agent_emit_exec(unsigned kind, const char *path, char *const *argv)
{
	size_t argc = agent_argc(argv);
	struct enc_rusage ru;
	bool has_ru = agent_rusage(RUSAGE_SELF, &ru) == 0;
	ssize_t n;

	agent_t_guard++;
	agent_lock();
	for (;;) {
		n = enc_exec(agent_buf, AGENT_BUF_SIZE, agent_now(), agent_tid(), kind, path,
			     (const char *const *)argv, argc, has_ru ? &ru : NULL);
		if ((n != -ENOBUFS && !agent_frame_needs_cut(n)) || argc == 0)
			break;
		argc /= 2;
	}
	agent_write_locked(agent_buf, n);
	agent_unlock();
	agent_t_guard--;
}

/* fexecve has no path: name the file behind the fd. */
static const char *agent_fd_path(int fd, char *buf, size_t cap)
{
	char link[32] = "/proc/self/fd/";
	ssize_t n;

	/* No snprintf: this may run in the child of a multithreaded fork. */
	*agent_utoa(link + sizeof("/proc/self/fd/") - 1, (unsigned)fd) = '\0';
	n = agent_sys_readlink(link, buf, cap - 1);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

/*
 * FORKTRACE_EXEC_TS for the image that exec(kind, dirfd, path, flags)
 * starts, into buf (AGENT_EXEC_TS_SIZE bytes): the call's time ns, ticks
 * and boot_before (agent_env_exec_ts), the process-table slot claimed
 * here for the image, and the exe's name. Returns buf, or NULL when the
 * image will not load the agent (agent_exec_target): nothing to hand
 * over. A slot of an exec that then fails stays empty. Signal-safe.
 */
static const char *agent_exec_handover(char *buf, uint64_t ns, uint64_t ticks, uint64_t boot_before,
				       bool self, unsigned kind, int dirfd, const char *path,
				       int flags, bool cwd_known)
{
	size_t off = agent_env_exec_ts(buf, ns, ticks, boot_before, self);
	uint32_t idx;

	if (!agent_exec_target(kind, dirfd, path, flags, cwd_known, buf + off,
			       AGENT_EXEC_TS_SIZE - off - AGENT_EXEC_TS_SLOT))
		return NULL;
	if (agent_table_claim_for(&idx) == 0)
		agent_env_exec_ts_slot(buf, off, idx);
	return buf;
}

/* The real exec call of kind with envp. */
static int agent_exec_real(unsigned kind, int dirfd, const char *path, char *const argv[],
			   char *const envp[], int flags)
{
	static char *const empty[] = {NULL};

	if (!envp)
		envp = empty;
	switch (kind) {
	case FT_EXEC_EXECVP:
	case FT_EXEC_EXECVPE:
	case FT_EXEC_EXECLP: {
		agent_execvpe_fn f = AGENT_REAL(execvpe);

		return f ? f(path, argv, envp) : (errno = ENOSYS, -1);
	}
	case FT_EXEC_FEXECVE: {
		agent_fexecve_fn f = AGENT_REAL(fexecve);

		return f ? f(dirfd, argv, envp) : (errno = ENOSYS, -1);
	}
	case FT_EXEC_EXECVEAT: {
		agent_execveat_fn f = AGENT_REAL(execveat);

		return f ? f(dirfd, path, argv, envp, flags) : (errno = ENOSYS, -1);
	}
	default: {
		agent_execve_fn f = AGENT_REAL(execve);

		return f ? f(path, argv, envp) : (errno = ENOSYS, -1);
	}
	}
}

/*
 * Under a seccomp filter the new image may not open the table: it
 * inherits our fd on it (agent_env_merge names it in FORKTRACE_TABLE_FD).
 * Returns the fd made inheritable for the exec or spawn, or -1 (no
 * filter, nothing to do). Signal-safe.
 */
static int agent_table_fd_pass(void)
{
	int fd = agent_g.table_keep ? agent_table_kept_fd() : -1;

	if (fd >= 0)
		agent_syscall(SYS_fcntl, fd, F_SETFD, 0);
	return fd;
}

/* After the exec failed, or the spawn: close-on-exec again. */
static void agent_table_fd_unpass(int fd)
{
	if (fd >= 0)
		agent_syscall(SYS_fcntl, fd, F_SETFD, FD_CLOEXEC);
}

/*
 * The common exec path. dirfd/flags only for execveat, fd (in dirfd) and
 * fdpath (PATH_MAX bytes, to name the file) only for fexecve: the other
 * calls keep that buffer off their stack, since every stack page a fork
 * child touches costs it a page fault. Preserves the real call's errno.
 */
static int agent_exec_plain(unsigned kind, int dirfd, const char *path, char *const argv[],
			    char *const envp[], int flags, char *fdpath)
{
	struct agent_env env;
	char exec_ts[AGENT_EXEC_TS_SIZE];
	const char *extra = NULL;
	bool record = !agent_bypass();
	int ret, err, table_fd;

	/* A raw clone child that shares our memory records nothing. */
	if (record && !agent_silent_fork_child() && !agent_same_process())
		record = false;
	if (record)
		agent_ev_flush_self();
	/* A silent fork child whose new image will say HELLO itself need not
	 * connect just to announce the exec: it hands the new image the time
	 * of the call instead, with its start time and the exe's name, which
	 * the image then need not read from /proc. */
	if (record && agent_silent_fork_child()) {
		extra = agent_exec_handover(exec_ts, agent_now(), agent_g.start_ticks, 0, true,
					    kind, dirfd, path, flags, true);
		record = extra == NULL;
	} else if (agent_t_in_vfork && __atomic_load_n(&agent_g.active, __ATOMIC_RELAXED)) {
		/* A vfork child records nothing (it shares our memory), but
		 * its image is handed the same: its start time follows from
		 * the boot time vfork began at, as a posix_spawn child's does.
		 * It writes its stack and the table's shared header, and at
		 * most maps that header for the parent, whose memory it is. */
		extra = agent_exec_handover(exec_ts, agent_now(), 0, agent_vfork_boot_before(),
					    false, kind, dirfd, path, flags, true);
	}
	agent_env_merge(&env, envp, extra);
	table_fd = agent_table_fd_pass();
	if (kind == FT_EXEC_FEXECVE && record)
		path = agent_fd_path(dirfd, fdpath, PATH_MAX);
	if (record)
		agent_emit_exec(kind, path, argv);
	if (agent_t_in_vfork)
		agent_vfork_note_exec(agent_now(), path, argv);

	ret = agent_exec_real(kind, dirfd, path, argv, env.envp, flags);
	if (ret < 0 && errno == E2BIG && env.envp != envp && !(!envp && !*env.envp)) {
		/* The agent's variables took the exec past the kernel's limit
		 * on argv and envp: untraced, it would have run. It runs as
		 * it would untraced, with the caller's envp, and without the
		 * agent: the trace shows it from the EXEC record, not
		 * instrumented. A silent fork child announces it now (a vfork
		 * child's parent does, from its note). */
		if (!record && extra && !agent_t_in_vfork && !agent_bypass()) {
			record = true;
			agent_emit_exec(kind,
					kind == FT_EXEC_FEXECVE
						? agent_fd_path(dirfd, fdpath, PATH_MAX)
						: path,
					argv);
		}
		ret = agent_exec_real(kind, dirfd, path, argv, envp, flags);
	}

	err = errno;
	if (agent_t_in_vfork)
		agent_vfork_note_fail(err);
	agent_table_fd_unpass(table_fd);
	agent_env_release(&env);
	if ((record || extra) && !agent_bypass())
		AGENT_EMIT(enc_exec_fail(agent_buf, AGENT_BUF_SIZE, agent_now(), agent_tid(), err,
					 path));
	errno = err;
	return ret;
}

/* REMOTE for launch r of launcher (child > 0: the process that runs ssh
 * is that child of this one). */
static void agent_emit_remote(const struct agent_remote *r, pid_t launcher, pid_t child)
{
	AGENT_EMIT(enc_remote(agent_buf, AGENT_BUF_SIZE, agent_now(), agent_tid(), launcher, child,
			      r->dest, agent_g.remote_path, r->flags));
}

/* May this process send a record now (see agent_exec_plain)? */
static bool agent_may_record(void)
{
	return !agent_bypass() && (agent_silent_fork_child() || agent_same_process());
}

/*
 * An exec of ssh (or rsh...) while launches are followed: the exec of
 * the rewritten argv, announced with REMOTE first (by the parent, for a
 * vfork child). The caller's argv is not written, so a caller that tries
 * the next path after a failed exec (execvp's own walk of $PATH is
 * inside the real call) passes it again as it was. Apart from
 * agent_exec_plain so that the exec path of every other program keeps
 * its frame. Preserves the real call's errno.
 */
static __attribute__((noinline)) int agent_exec_remote(unsigned kind, int dirfd, const char *path,
						       char *const argv[], char *const envp[],
						       int flags, char *fdpath)
{
	struct agent_remote r;
	pid_t self = agent_sys_getpid();
	bool vfork_child = agent_t_in_vfork != 0;
	int ret, err;

	if (!agent_env_ready() || !agent_remote_rewrite(&r, argv, self))
		return agent_exec_plain(kind, dirfd, path, argv, envp, flags, fdpath);
	if (vfork_child) {
		if (!agent_vfork_note_remote(&r, self)) {
			agent_remote_release(&r);
			return agent_exec_plain(kind, dirfd, path, argv, envp, flags, fdpath);
		}
	} else if (agent_may_record()) {
		agent_emit_remote(&r, self, 0);
	}
	ret = agent_exec_plain(kind, dirfd, path, r.argv ? r.argv : argv, envp, flags, fdpath);
	err = errno;
	if (vfork_child)
		agent_vfork_note_remote(NULL, self);
	agent_remote_release(&r);
	errno = err;
	return ret;
}

/* The exec hooks' common entry: ssh and its kin when launches are
 * followed, every other program as it is. */
static int agent_exec(unsigned kind, int dirfd, const char *path, char *const argv[],
		      char *const envp[], int flags, char *fdpath)
{
	if (agent_remote_armed() && path && agent_remote_is_rsh(path))
		return agent_exec_remote(kind, dirfd, path, argv, envp, flags, fdpath);
	return agent_exec_plain(kind, dirfd, path, argv, envp, flags, fdpath);
}

AGENT_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	return agent_exec(FT_EXEC_EXECVE, -1, path, argv, envp, 0, NULL);
}

AGENT_EXPORT int execv(const char *path, char *const argv[])
{
	return agent_exec(FT_EXEC_EXECV, -1, path, argv, environ, 0, NULL);
}

AGENT_EXPORT int execvp(const char *file, char *const argv[])
{
	return agent_exec(FT_EXEC_EXECVP, -1, file, argv, environ, 0, NULL);
}

AGENT_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	return agent_exec(FT_EXEC_EXECVPE, -1, file, argv, envp, 0, NULL);
}

AGENT_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	char fdpath[PATH_MAX];

	return agent_exec(FT_EXEC_FEXECVE, fd, NULL, argv, envp, 0, fdpath);
}

AGENT_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
			  int flags)
{
	return agent_exec(FT_EXEC_EXECVEAT, dirfd, path, argv, envp, flags, NULL);
}

/*
 * execl, execlp, execle: gather the variadic list into a vector on the
 * stack, or in an mmap for very long lists (no malloc: we may be in a vfork
 * child), then take the common path.
 */
static int agent_execl(unsigned kind, const char *path, const char *arg0, va_list ap)
{
	char *stackv[AGENT_EXECL_STACK];
	char **argv = stackv;
	char *const *envp = environ;
	size_t n = 1, i, maplen = 0;
	va_list cp;
	int ret, err;

	va_copy(cp, ap);
	if (arg0)
		while (va_arg(cp, char *))
			n++;
	va_end(cp);
	if (n + 1 > AGENT_EXECL_STACK) {
		maplen = (n + 1) * sizeof(char *);
		argv = agent_sys_mmap(NULL, maplen, PROT_READ | PROT_WRITE,
				      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (argv == MAP_FAILED) {
			errno = ENOMEM;
			return -1;
		}
	}
	argv[0] = (char *)arg0;
	for (i = 1; arg0 && i < n; i++)
		argv[i] = va_arg(ap, char *);
	argv[n] = NULL;
	if (arg0)
		(void)va_arg(ap, char *); /* the terminating NULL */
	if (kind == FT_EXEC_EXECLE)
		envp = va_arg(ap, char *const *);
	ret = agent_exec(kind, -1, path, argv, envp, 0, NULL);
	err = errno;
	if (maplen)
		agent_sys_munmap(argv, maplen);
	errno = err;
	return ret;
}

AGENT_EXPORT int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	int ret;

	va_start(ap, arg);
	ret = agent_execl(FT_EXEC_EXECL, path, arg, ap);
	va_end(ap);
	return ret;
}

AGENT_EXPORT int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	int ret;

	va_start(ap, arg);
	ret = agent_execl(FT_EXEC_EXECLP, file, arg, ap);
	va_end(ap);
	return ret;
}

AGENT_EXPORT int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	int ret;

	va_start(ap, arg);
	ret = agent_execl(FT_EXEC_EXECLE, path, arg, ap);
	va_end(ap);
	return ret;
}

/* Send SPAWN; shorten argv if it does not fit (see agent_emit_exec). */
static void agent_emit_spawn(uint64_t ts, unsigned kind, pid_t child, int ret, const char *path,
			     char *const *argv)
{
	size_t argc = agent_argc(argv);
	ssize_t n;

	agent_t_guard++;
	agent_lock();
	for (;;) {
		n = enc_spawn(agent_buf, AGENT_BUF_SIZE, ts, agent_tid(), kind, child, ret, path,
			      (const char *const *)argv, argc);
		if ((n != -ENOBUFS && !agent_frame_needs_cut(n)) || argc == 0)
			break;
		argc /= 2;
	}
	agent_write_locked(agent_buf, n);
	agent_unlock();
	agent_t_guard--;
}

/*
 * glibc's posix_spawn child calls an internal execve we cannot hook, so
 * the environment is merged here, before the real call. A child that
 * will load the agent is handed FORKTRACE_EXEC_TS: the call's time, our
 * CLOCK_BOOTTIME before it (the child derives its start ticks from it as
 * a fork child does) and the exe's name, so that it need not read /proc.
 */
static int agent_spawn_plain(unsigned kind, pid_t *pid, const char *path,
			     const posix_spawn_file_actions_t *fa, const posix_spawnattr_t *attr,
			     char *const argv[], char *const envp[])
{
	agent_posix_spawn_fn f = kind == FT_SPAWN_POSIX_SPAWNP ? AGENT_REAL(posix_spawnp)
							       : AGENT_REAL(posix_spawn);
	struct agent_env env;
	char exec_ts[AGENT_EXEC_TS_SIZE];
	const char *extra = NULL;
	bool record = !agent_bypass();
	pid_t child = 0;
	int ret, err, table_fd;

	if (!f)
		return ENOSYS;
	if (!agent_env_ready())
		return f(pid, path, fa, attr, argv, envp);
	/* A raw clone child that shares our memory records nothing. */
	if (record && !agent_silent_fork_child() && !agent_same_process())
		record = false;
	if (record)
		agent_ev_flush_self();
	/* The time before the child exists (see fork). */
	uint64_t ts = agent_now();
	if (record) {
		/* posix_spawnp searches $PATH as execvp does. */
		unsigned xk = kind == FT_SPAWN_POSIX_SPAWNP ? FT_EXEC_EXECVP : FT_EXEC_EXECVE;

		extra = agent_exec_handover(exec_ts, ts, 0, agent_boot_now(), false, xk, AT_FDCWD,
					    path, 0, fa == NULL);
	}
	agent_env_merge(&env, envp, extra);
	table_fd = agent_table_fd_pass();
	ret = f(&child, path, fa, attr, argv, env.envp);
	/* Past the kernel's limit only with the agent's variables: the
	 * child runs as it would untraced, without the agent (agent_exec). */
	if (ret == E2BIG && env.envp != envp)
		ret = f(&child, path, fa, attr, argv, envp);
	err = errno;
	agent_table_fd_unpass(table_fd);
	agent_env_release(&env);
	if (ret == 0 && pid)
		*pid = child;
	if (record && !agent_bypass())
		agent_emit_spawn(ts, kind, child, ret, path, argv);
	errno = err;
	return ret;
}

/*
 * A spawn of ssh while launches are followed: the rewritten argv, given
 * this process as the launcher (the child's pid is not known before),
 * and REMOTE naming the child once the call succeeded.
 */
static __attribute__((noinline)) int agent_spawn_remote(unsigned kind, pid_t *pid, const char *path,
							const posix_spawn_file_actions_t *fa,
							const posix_spawnattr_t *attr,
							char *const argv[], char *const envp[])
{
	struct agent_remote r;
	pid_t self = agent_sys_getpid(), child = 0;
	int ret, err;

	if (!agent_env_ready() || agent_t_in_vfork || !agent_remote_rewrite(&r, argv, self))
		return agent_spawn_plain(kind, pid, path, fa, attr, argv, envp);
	ret = agent_spawn_plain(kind, &child, path, fa, attr, r.argv ? r.argv : argv, envp);
	err = errno;
	if (ret == 0 && pid)
		*pid = child;
	if (ret == 0 && agent_may_record())
		agent_emit_remote(&r, self, child);
	agent_remote_release(&r);
	errno = err;
	return ret;
}

static int agent_spawn(unsigned kind, pid_t *pid, const char *path,
		       const posix_spawn_file_actions_t *fa, const posix_spawnattr_t *attr,
		       char *const argv[], char *const envp[])
{
	if (agent_remote_armed() && path && agent_remote_is_rsh(path))
		return agent_spawn_remote(kind, pid, path, fa, attr, argv, envp);
	return agent_spawn_plain(kind, pid, path, fa, attr, argv, envp);
}

AGENT_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
			     const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	return agent_spawn(FT_SPAWN_POSIX_SPAWN, pid, path, fa, attr, argv, envp);
}

AGENT_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
			      const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	return agent_spawn(FT_SPAWN_POSIX_SPAWNP, pid, file, fa, attr, argv, envp);
}
