/*
 * System calls the agent makes itself, without libc's wrappers.
 *
 * Every libc function the agent imports is one more symbol the dynamic
 * loader looks up (through the program, the agent and libc, with version
 * checks) in every traced image before main: ~700 instructions each,
 * measured with callgrind on /bin/true, about a quarter of what the agent
 * costs a short-lived process. syscall() is imported once for all of
 * these. They set errno and return -1 on failure, as the wrappers do, and
 * are never cancellation points: a thread cancelled inside the agent would
 * leave the send lock held.
 */
#ifndef AGENT_SYS_H
#define AGENT_SYS_H

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static inline int agent_sys_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	return (int)syscall(SYS_openat, dirfd, path, flags, mode);
}

static inline int agent_sys_open(const char *path, int flags, mode_t mode)
{
	return agent_sys_openat(AT_FDCWD, path, flags, mode);
}

static inline int agent_sys_close(int fd)
{
	return (int)syscall(SYS_close, fd);
}

static inline ssize_t agent_sys_read(int fd, void *buf, size_t n)
{
	return syscall(SYS_read, fd, buf, n);
}

static inline ssize_t agent_sys_pread(int fd, void *buf, size_t n, off_t off)
{
	return syscall(SYS_pread64, fd, buf, n, off);
}

static inline ssize_t agent_sys_write(int fd, const void *buf, size_t n)
{
	return syscall(SYS_write, fd, buf, n);
}

static inline ssize_t agent_sys_writev(int fd, const struct iovec *iov, int cnt)
{
	return syscall(SYS_writev, fd, iov, cnt);
}

static inline ssize_t agent_sys_readlink(const char *path, char *buf, size_t n)
{
	return syscall(SYS_readlinkat, AT_FDCWD, path, buf, n);
}

/* Like getcwd(3) with a buffer: buf, or NULL with errno set. */
static inline char *agent_sys_getcwd(char *buf, size_t n)
{
	return syscall(SYS_getcwd, buf, n) > 0 ? buf : NULL;
}

static inline int agent_sys_mkdir(const char *path, mode_t mode)
{
	return (int)syscall(SYS_mkdirat, AT_FDCWD, path, mode);
}

static inline int agent_sys_fcntl(int fd, int cmd, long arg)
{
	return (int)syscall(SYS_fcntl, fd, cmd, arg);
}

static inline int agent_sys_socket(int domain, int type, int proto)
{
	return (int)syscall(SYS_socket, domain, type, proto);
}

static inline int agent_sys_connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	return (int)syscall(SYS_connect, fd, sa, len);
}

static inline ssize_t agent_sys_sendmsg(int fd, const struct msghdr *mh, int flags)
{
	return syscall(SYS_sendmsg, fd, mh, flags);
}

static inline pid_t agent_sys_getpid(void)
{
	return (pid_t)syscall(SYS_getpid);
}

static inline pid_t agent_sys_getppid(void)
{
	return (pid_t)syscall(SYS_getppid);
}

static inline uid_t agent_sys_getuid(void)
{
	return (uid_t)syscall(SYS_getuid);
}

static inline void *agent_sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

static inline int agent_sys_munmap(void *addr, size_t len)
{
	return (int)syscall(SYS_munmap, addr, len);
}

static inline int agent_sys_madvise(void *addr, size_t len, int advice)
{
	return (int)syscall(SYS_madvise, addr, len, advice);
}

static inline int agent_sys_ftruncate(int fd, off_t len)
{
	return (int)syscall(SYS_ftruncate, fd, len);
}

static inline int agent_sys_access(const char *path, int mode)
{
	return (int)syscall(SYS_faccessat, AT_FDCWD, path, mode);
}

static inline int agent_sys_fstat(int fd, struct stat *st)
{
	return (int)syscall(SYS_fstat, fd, st);
}

static inline int agent_sys_pipe2(int fds[2], int flags)
{
	return (int)syscall(SYS_pipe2, fds, flags);
}

#endif /* AGENT_SYS_H */
