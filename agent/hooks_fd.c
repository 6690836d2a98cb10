/*
 * Guards for the agent's socket against programs that close or reuse every
 * fd: close() of our fd fails with EBADF as it would untraced (the program
 * never opened that number), close_range/closefrom skip it, dup2/dup3 onto
 * it first move our socket elsewhere, and dup2/dup3 from it fail as from
 * any fd the program does not have. The process table's fd that the agent
 * keeps under a seccomp filter is spared by close, close_range and
 * closefrom too (a program that puts a file of its own at its number
 * makes the agent drop it: slot.c checks it before each use).
 *
 * In a vfork child the fd table is a copy, so the calls go through
 * untouched there (moving our fd would corrupt the parent's state, which
 * shares our memory).
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

static int agent_our_fd(void)
{
	if (agent_t_in_vfork || !__atomic_load_n(&agent_g.configured, __ATOMIC_ACQUIRE))
		return -1;
	return __atomic_load_n(&agent_g.fd, __ATOMIC_RELAXED);
}

/* Our fds, ascending, -1 for none: the socket (or spill file), and the
 * process table's fd kept under a seccomp filter (slot.c), which the
 * images it execs need as much (it is checked to be the table still: the
 * program may have put a file of its own at that number). */
static void agent_our_fds(int fds[2])
{
	int a = agent_our_fd(), b = -1;

	if (!agent_t_in_vfork && __atomic_load_n(&agent_g.table_keep, __ATOMIC_RELAXED))
		b = agent_table_kept_fd();
	if (a == b)
		b = -1;
	fds[0] = a < b ? a : b;
	fds[1] = a < b ? b : a;
	if (fds[0] < 0) {
		fds[0] = fds[1];
		fds[1] = -1;
	}
}

AGENT_EXPORT int close(int fd)
{
	agent_close_fn f = AGENT_REAL(close);
	int ours[2];

	/* Ours stay open (CLOEXEC). Untraced, nothing would be open at this
	 * number (had the program opened one, it would have got another
	 * number), so the program sees what it would see then: EBADF. */
	if (fd >= 0) {
		agent_our_fds(ours);
		if (fd == ours[0] || fd == ours[1]) {
			errno = EBADF;
			return -1;
		}
	}
	return f(fd);
}

AGENT_EXPORT int close_range(unsigned first, unsigned last, int flags)
{
	agent_close_range_fn f = AGENT_REAL(close_range);
	int ours[2];
	int ret = 0;

	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	agent_our_fds(ours);
	/* The range, less our fds: up to three pieces. */
	for (int i = 0; i < 2 && ret == 0; i++) {
		unsigned fd = (unsigned)ours[i];

		if (ours[i] < 0 || fd < first || fd > last)
			continue;
		if (fd > first)
			ret = f(first, fd - 1, flags);
		if (fd == last)
			return ret;
		first = fd + 1;
	}
	return ret == 0 ? f(first, last, flags) : ret;
}

AGENT_EXPORT void closefrom(int lowfd)
{
	agent_closefrom_fn f = AGENT_REAL(closefrom);
	agent_close_range_fn cr = AGENT_REAL(close_range);
	int ours[2];

	agent_our_fds(ours);
	if (!cr) {
		f(lowfd);
		return;
	}
	if (lowfd < 0)
		lowfd = 0;
	for (int i = 0; i < 2; i++) {
		if (ours[i] < lowfd)
			continue;
		if (ours[i] > lowfd)
			cr((unsigned)lowfd, (unsigned)ours[i] - 1, 0);
		lowfd = ours[i] + 1;
	}
	f(lowfd);
}

/* newfd is about to be replaced: move our socket to another free high fd
 * first. If that fails, stop using it rather than write into whatever the
 * program puts there. The compare-and-swap keeps a concurrent move (see
 * below) from being undone.
 *
 * Signal-safe. Preserves errno. A guard already raised means this is a
 * signal handler that interrupted the agent on this thread, which may hold
 * the send lock while it sends on newfd: waiting for the lock would
 * deadlock, so the socket is moved without it when trylock fails, and the
 * interrupted send goes on on the new number (agent_write_all). */
static void agent_fd_evacuate(int newfd)
{
	int saved = errno;
	int cur = newfd;
	bool locked = true;
	int hi;

	if (agent_t_guard++ || agent_in_fork())
		locked = agent_trylock();
	else
		agent_lock();
	if (newfd == __atomic_load_n(&agent_g.fd, __ATOMIC_RELAXED)) {
		hi = agent_sys_fcntl(newfd, F_DUPFD_CLOEXEC, AGENT_FD_MIN);
		if (hi < 0)
			hi = agent_sys_fcntl(newfd, F_DUPFD_CLOEXEC, 3);
		if (!__atomic_compare_exchange_n(&agent_g.fd, &cur, hi, false, __ATOMIC_RELAXED,
						 __ATOMIC_RELAXED)) {
			if (hi >= 0)
				agent_sys_close(hi);
		} else if (hi < 0) {
			agent_on_collector_gone();
		}
	}
	if (locked)
		agent_unlock();
	agent_t_guard--;
	errno = saved;
}

AGENT_EXPORT int dup2(int oldfd, int newfd)
{
	agent_dup2_fn f = AGENT_REAL(dup2);

	/* Never hand the program a copy of our socket (see close). */
	if (oldfd >= 0 && oldfd == agent_our_fd()) {
		errno = EBADF;
		return -1;
	}
	if (newfd >= 0 && newfd != oldfd && newfd == agent_our_fd())
		agent_fd_evacuate(newfd);
	return f(oldfd, newfd);
}

AGENT_EXPORT int dup3(int oldfd, int newfd, int flags)
{
	agent_dup3_fn f = AGENT_REAL(dup3);

	if (oldfd >= 0 && oldfd == agent_our_fd()) {
		errno = EBADF;
		return -1;
	}
	if (newfd >= 0 && newfd != oldfd && newfd == agent_our_fd())
		agent_fd_evacuate(newfd);
	return f(oldfd, newfd, flags);
}
