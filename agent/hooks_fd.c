/*
 * Guards for the agent's socket against programs that close or reuse every
 * fd: close() of our fd pretends success, close_range/closefrom skip it,
 * and dup2/dup3 onto it first move our socket elsewhere.
 *
 * In a vfork child the fd table is a copy, so the calls go through
 * untouched there (moving our fd would corrupt the parent's state, which
 * shares our memory).
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "internal.h"

static int agent_our_fd(void)
{
	if (agent_t_in_vfork || !__atomic_load_n(&agent_g.configured, __ATOMIC_ACQUIRE))
		return -1;
	return __atomic_load_n(&agent_g.fd, __ATOMIC_RELAXED);
}

AGENT_EXPORT int close(int fd)
{
	agent_close_fn f = AGENT_REAL(close);

	/* The program believes it closed it; ours stays open (CLOEXEC). */
	if (fd >= 0 && fd == agent_our_fd())
		return 0;
	return f(fd);
}

AGENT_EXPORT int close_range(unsigned first, unsigned last, int flags)
{
	agent_close_range_fn f = AGENT_REAL(close_range);
	int fd = agent_our_fd();
	int ret = 0;

	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	if (fd < 0 || (unsigned)fd < first || (unsigned)fd > last)
		return f(first, last, flags);
	if ((unsigned)fd > first)
		ret = f(first, (unsigned)fd - 1, flags);
	if (ret == 0 && (unsigned)fd < last)
		ret = f((unsigned)fd + 1, last, flags);
	return ret;
}

AGENT_EXPORT void closefrom(int lowfd)
{
	agent_closefrom_fn f = AGENT_REAL(closefrom);
	agent_close_range_fn cr = AGENT_REAL(close_range);
	int fd = agent_our_fd();

	if (fd < 0 || fd < lowfd || !cr) {
		f(lowfd);
		return;
	}
	if (fd > lowfd)
		cr((unsigned)(lowfd < 0 ? 0 : lowfd), (unsigned)fd - 1, 0);
	f(fd + 1);
}

/* newfd is about to be replaced: move our socket to another free high fd
 * first. If that fails, stop using it rather than write into whatever the
 * program puts there. */
static void agent_fd_evacuate(int newfd)
{
	int saved = errno;
	int hi;

	agent_t_guard++;
	agent_lock();
	if (newfd == agent_g.fd) {
		hi = fcntl(agent_g.fd, F_DUPFD_CLOEXEC, AGENT_FD_MIN);
		if (hi < 0)
			hi = fcntl(agent_g.fd, F_DUPFD_CLOEXEC, 3);
		__atomic_store_n(&agent_g.fd, hi, __ATOMIC_RELAXED);
		if (hi < 0)
			agent_on_collector_gone();
	}
	agent_unlock();
	agent_t_guard--;
	errno = saved;
}

AGENT_EXPORT int dup2(int oldfd, int newfd)
{
	agent_dup2_fn f = AGENT_REAL(dup2);

	if (newfd >= 0 && newfd != oldfd && newfd == agent_our_fd())
		agent_fd_evacuate(newfd);
	return f(oldfd, newfd);
}

AGENT_EXPORT int dup3(int oldfd, int newfd, int flags)
{
	agent_dup3_fn f = AGENT_REAL(dup3);

	if (newfd >= 0 && newfd != oldfd && newfd == agent_our_fd())
		agent_fd_evacuate(newfd);
	return f(oldfd, newfd, flags);
}
