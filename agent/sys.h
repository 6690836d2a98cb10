/*
 * System calls the agent makes itself, without libc's wrappers.
 *
 * Every libc function the agent imports is one more symbol the dynamic
 * loader looks up (through the program, the agent and libc, with version
 * checks) in every traced image before main: ~700 instructions each,
 * measured with callgrind on /bin/true, about a quarter of what the agent
 * costs a short-lived process. On x86-64 the agent enters the kernel
 * itself and imports nothing for it, not even syscall(): a fork child that
 * calls into a page of libc's text the parent's fork did not touch takes a
 * page fault for it (fork copies no page table entries of file mappings),
 * and so does one that reaches errno. Elsewhere syscall() does it.
 *
 * agent_sys_* set errno and return -1 on failure, as the wrappers do;
 * agent_raw_* return the kernel's -errno and leave errno alone, for the
 * fork child's way to exec. None is a cancellation point: a thread
 * cancelled inside the agent would leave the send lock held.
 */
#ifndef AGENT_SYS_H
#define AGENT_SYS_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

/* 1 where the agent's x86-64 assembly applies (system calls here, memcpy
 * and memset in str.c, vfork in vfork.c, the signal restorer in
 * signal.c): x86-64 with 64-bit longs and pointers, not x32, whose long
 * cannot carry a 64-bit offset. Elsewhere the portable paths. */
#if defined(__x86_64__) && defined(__LP64__)
#define AGENT_X86_64 1
#else
#define AGENT_X86_64 0
#endif

#if AGENT_X86_64
/* The kernel's result: -errno (-4095..-1) on failure. */
static inline long agent_syscall6(long n, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}
#else
static inline long agent_syscall6(long n, long a, long b, long c, long d, long e, long f)
{
	int saved = errno;
	long ret = syscall(n, a, b, c, d, e, f);

	if (ret == -1)
		ret = -errno;
	errno = saved;
	return ret;
}
#endif

#define agent_syscall(n, ...) agent_syscall_n(n, __VA_ARGS__, 0, 0, 0, 0, 0, 0)
#define agent_syscall_n(n, a, b, c, d, e, f, ...)                                                  \
	agent_syscall6((n), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), (long)(f))
#define agent_syscall0(n) agent_syscall6((n), 0, 0, 0, 0, 0, 0)

/* A kernel result as libc returns it: -1 with errno set on failure. */
static inline long agent_sys_ret(long r)
{
	if ((unsigned long)r > -4096UL) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

static inline int agent_sys_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	return (int)agent_sys_ret(agent_syscall(SYS_openat, dirfd, path, flags, mode));
}

static inline int agent_sys_open(const char *path, int flags, mode_t mode)
{
	return agent_sys_openat(AT_FDCWD, path, flags, mode);
}

static inline int agent_sys_close(int fd)
{
	return (int)agent_sys_ret(agent_syscall(SYS_close, fd));
}

static inline ssize_t agent_sys_read(int fd, void *buf, size_t n)
{
	return agent_sys_ret(agent_syscall(SYS_read, fd, buf, n));
}

static inline ssize_t agent_sys_pread(int fd, void *buf, size_t n, off_t off)
{
	return agent_sys_ret(agent_syscall(SYS_pread64, fd, buf, n, off));
}

static inline ssize_t agent_sys_write(int fd, const void *buf, size_t n)
{
	return agent_sys_ret(agent_syscall(SYS_write, fd, buf, n));
}

static inline ssize_t agent_sys_writev(int fd, const struct iovec *iov, int cnt)
{
	return agent_sys_ret(agent_syscall(SYS_writev, fd, iov, cnt));
}

static inline ssize_t agent_sys_readlink(const char *path, char *buf, size_t n)
{
	return agent_sys_ret(agent_syscall(SYS_readlinkat, AT_FDCWD, path, buf, n));
}

/* Like getcwd(3) with a buffer: buf, or NULL with errno set. */
static inline char *agent_sys_getcwd(char *buf, size_t n)
{
	return agent_sys_ret(agent_syscall(SYS_getcwd, buf, n)) > 0 ? buf : NULL;
}

static inline int agent_sys_mkdir(const char *path, mode_t mode)
{
	return (int)agent_sys_ret(agent_syscall(SYS_mkdirat, AT_FDCWD, path, mode));
}

static inline uid_t agent_sys_geteuid(void)
{
	return (uid_t)agent_sys_ret(agent_syscall0(SYS_geteuid));
}

static inline int agent_sys_fcntl(int fd, int cmd, long arg)
{
	return (int)agent_sys_ret(agent_syscall(SYS_fcntl, fd, cmd, arg));
}

static inline int agent_sys_socket(int domain, int type, int proto)
{
	return (int)agent_sys_ret(agent_syscall(SYS_socket, domain, type, proto));
}

static inline int agent_sys_connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	return (int)agent_sys_ret(agent_syscall(SYS_connect, fd, sa, len));
}

static inline ssize_t agent_sys_sendmsg(int fd, const struct msghdr *mh, int flags)
{
	return agent_sys_ret(agent_syscall(SYS_sendmsg, fd, mh, flags));
}

static inline pid_t agent_sys_getpid(void)
{
	return (pid_t)agent_sys_ret(agent_syscall0(SYS_getpid));
}

static inline pid_t agent_sys_getppid(void)
{
	return (pid_t)agent_sys_ret(agent_syscall0(SYS_getppid));
}

static inline uid_t agent_sys_getuid(void)
{
	return (uid_t)agent_sys_ret(agent_syscall0(SYS_getuid));
}

static inline void *agent_sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return (void *)agent_sys_ret(agent_syscall(SYS_mmap, addr, len, prot, flags, fd, off));
}

static inline int agent_sys_munmap(void *addr, size_t len)
{
	return (int)agent_sys_ret(agent_syscall(SYS_munmap, addr, len));
}

static inline int agent_sys_madvise(void *addr, size_t len, int advice)
{
	return (int)agent_sys_ret(agent_syscall(SYS_madvise, addr, len, advice));
}

static inline int agent_sys_ftruncate(int fd, off_t len)
{
	return (int)agent_sys_ret(agent_syscall(SYS_ftruncate, fd, len));
}

static inline int agent_sys_access(const char *path, int mode)
{
	return (int)agent_sys_ret(agent_syscall(SYS_faccessat, AT_FDCWD, path, mode));
}

static inline int agent_sys_fstat(int fd, struct stat *st)
{
	return (int)agent_sys_ret(agent_syscall(SYS_fstat, fd, st));
}

static inline int agent_sys_pipe2(int fds[2], int flags)
{
	return (int)agent_sys_ret(agent_syscall(SYS_pipe2, fds, flags));
}

/* rt_sigprocmask for this thread. Unlike pthread_sigmask it does not keep
 * glibc's internal signals unblockable: only for restoring a mask read
 * back from the kernel. Returns 0 or -errno. */
static inline int agent_raw_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	return (int)agent_syscall(SYS_rt_sigprocmask, how, set, old, _NSIG / 8);
}

#endif /* AGENT_SYS_H */
