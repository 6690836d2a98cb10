/*
 * The agent's runtime, which every layer above the string functions and
 * the encoder builds on: the process-wide state and the per-thread
 * variables, real-symbol resolution, the clocks, the thread id, the one
 * error line, and who this process is (its start time, whether it is
 * still the process agent_g describes).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* Zero-initialised, in .data like the agent's other large objects
 * (AGENT_DATA); fd is meaningful only once `configured` is set. */
AGENT_DATA struct agent_state agent_g;
AGENT_DATA unsigned char agent_buf[AGENT_BUF_SIZE];

AGENT_TLS int agent_t_guard;
AGENT_TLS int agent_t_in_vfork;
AGENT_TLS pid_t agent_t_tid;
AGENT_TLS pid_t agent_t_tid_pid;
AGENT_TLS int agent_t_tramp;

void *agent_resolve(void **slot, const char *name)
{
	void *p = dlsym(RTLD_NEXT, name);

	if (p)
		__atomic_store_n(slot, p, __ATOMIC_RELEASE);
	return p;
}

/*
 * Real functions are resolved lazily, each on its hook's first call: a
 * process image uses a handful of the 34 hooks, and resolving all of them
 * in every image cost ~8 us per process (dlsym walks the symbol tables),
 * which a build pays thousands of times. A fork child, though, may not
 * call dlsym (STYLE: no dlsym after a multithreaded fork), so the fork
 * hook resolves everything once per process before its first fork.
 */
void agent_resolve_all(void)
{
	static int done;

	if (__atomic_load_n(&done, __ATOMIC_ACQUIRE))
		return;
#define AGENT_X(name, ret, args) agent_resolve_fast(&agent_g.real.name, #name);
	AGENT_REAL_LIST(AGENT_X)
#undef AGENT_X
	__atomic_store_n(&done, 1, __ATOMIC_RELEASE);
}

/*
 * A short-lived image reads the clocks a handful of times (HELLO, EXIT).
 * Through the vDSO, its first reading costs it two page faults, the vDSO's
 * text and its data page (~1.5 us on the benchmark machine), where a
 * system call costs ~0.1 us. So an image's first AGENT_CLOCK_SYSCALLS
 * readings are system calls, and the rest go through the vDSO. The count
 * is a hint: threads may race on it.
 */
#define AGENT_CLOCK_SYSCALLS 8

uint64_t agent_clock_ns(clockid_t id)
{
	struct timespec ts;
	unsigned n = __atomic_load_n(&agent_g.clock_reads, __ATOMIC_RELAXED);

	if (n >= AGENT_CLOCK_SYSCALLS) {
		clock_gettime(id, &ts);
	} else if (agent_syscall(SYS_clock_gettime, id, &ts) != 0) {
		/* A seccomp filter refuses it: the vDSO from now on. */
		__atomic_store_n(&agent_g.clock_reads, AGENT_CLOCK_SYSCALLS, __ATOMIC_RELAXED);
		clock_gettime(id, &ts);
	} else {
		__atomic_store_n(&agent_g.clock_reads, n + 1, __ATOMIC_RELAXED);
	}
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t agent_now(void)
{
	return agent_clock_ns(CLOCK_MONOTONIC);
}

uint64_t agent_boot_now(void)
{
	return agent_clock_ns(CLOCK_BOOTTIME);
}

/* Under a seccomp filter the agent makes no system call the program
 * would not make (agent_seccomp_seen): a filter may kill for getrusage. */
int agent_rusage(int who, struct enc_rusage *out)
{
	struct rusage ru;
	long r;

	if (__atomic_load_n(&agent_g.seccomp, __ATOMIC_RELAXED))
		return -EPERM;
	r = agent_syscall(SYS_getrusage, who, &ru);

	if (r < 0)
		return (int)r;
	enc_rusage_from(out, &ru);
	return 0;
}

/* A fork child's copy of the cache is the parent's thread's: it is
 * refreshed at first use, not in every fork child, where writing it would
 * cost a copy-on-write fault of the TLS page for a child that only execs. */
pid_t agent_tid(void)
{
	if (agent_t_tid_pid != agent_g.pid || !agent_t_tid) {
		agent_t_tid = (pid_t)agent_syscall0(SYS_gettid);
		agent_t_tid_pid = agent_g.pid;
	}
	return agent_t_tid;
}

void agent_count_lost(void)
{
	__atomic_add_fetch(&agent_g.lost, 1, __ATOMIC_RELAXED);
}

void agent_fail(const char *msg)
{
	static const char pfx[] = "forktrace-agent: ";
	int saved = errno;

	if (!__atomic_exchange_n(&agent_g.failed, 1, __ATOMIC_RELAXED)) {
		char line[256];
		size_t n = strlen(msg);

		if (n > sizeof(line) - sizeof(pfx) - 1)
			n = sizeof(line) - sizeof(pfx) - 1;
		memcpy(line, pfx, sizeof(pfx) - 1);
		memcpy(line + sizeof(pfx) - 1, msg, n);
		line[sizeof(pfx) - 1 + n] = '\n';
		if (agent_sys_write(2, line, sizeof(pfx) + n)) {
		}
	}
	__atomic_store_n(&agent_g.active, 0, __ATOMIC_RELAXED);
	errno = saved;
}

/* Read field 22 (starttime) of /proc/self/stat, and optionally the comm.
 * comm may hold spaces and ')', so fields are counted after the LAST ')'.
 * One open, one read, one close; no stdio. Signal-safe. */
uint64_t agent_read_stat(char *name, size_t namecap)
{
	char buf[1024];
	ssize_t n;
	char *rp, *lp, *p;
	int fd, field;
	uint64_t v = 0;

	fd = agent_sys_open("/proc/self/stat", O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	n = agent_sys_read(fd, buf, sizeof(buf) - 1);
	agent_sys_close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	rp = strrchr(buf, ')');
	if (!rp)
		return 0;
	lp = strchr(buf, '(');
	if (name && lp && lp < rp) {
		size_t len = (size_t)(rp - lp - 1);

		if (len >= namecap)
			len = namecap - 1;
		memcpy(name, lp + 1, len);
		name[len] = '\0';
	}
	/* After ") " comes field 3; step to the start of field 22. */
	p = rp + 1;
	for (field = 2; field < 22 && *p; p++)
		if (*p == ' ')
			field++;
	while (*p >= '0' && *p <= '9')
		v = v * 10 + (uint64_t)(*p++ - '0');
	return v;
}

/* A filter may also refuse, or kill for, the clock system calls that
 * spare a short image the vDSO's page faults (agent_clock_ns): the vDSO
 * from now on, which makes none. */
void agent_seccomp_seen(void)
{
	__atomic_store_n(&agent_g.seccomp, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&agent_g.clock_reads, AGENT_CLOCK_SYSCALLS, __ATOMIC_RELAXED);
}

/*
 * Is this still the process agent_g describes? A child made by a raw
 * clone or clone3 system call (Go, Rust's std with pidfds, sandboxes: no
 * glibc fork, so no fork hook ran) starts with a copy of its parent's
 * agent: pid, connection, slot, buffers. Without this check it spoke as
 * its parent: its exec renamed the parent, its children hung under the
 * parent. One getpid, where a hook is about to record (fork, vfork, exec,
 * spawn, system, popen, exit, a frame on a connection); not where a fork
 * child that has not spoken yet goes (its first words check it), nor on
 * the table's append path, which makes no system call (a raw clone child
 * that only waits or names threads still writes those records into its
 * parent's slot).
 *
 * A child with its own memory then becomes what a fork child is
 * (agent_fork_child: drops what it inherited, connects at its first
 * write, introduces itself with its real parent). One that shares its
 * parent's memory (CLONE_VM, as the children of posix_spawn and Go are)
 * must change nothing of it, as a vfork child: false, and the caller
 * records nothing. Shared memory is told by kcmp(KCMP_VM); where kcmp is
 * refused, the child is taken for one that shares it. Caller is not
 * inside the agent. Signal-safe. Preserves errno.
 */
bool agent_same_process(void)
{
	pid_t pid = (pid_t)agent_syscall0(SYS_getpid);
	pid_t was = __atomic_load_n(&agent_g.pid, __ATOMIC_RELAXED);
	sigset_t all, old;

	if (pid == was)
		return true;
	if (agent_syscall(SYS_kcmp, pid, was, KCMP_VM, 0, 0) <= 0)
		return false; /* shared, or cannot tell */
	/* A handler must not find the agent half reset. */
	sigfillset(&all);
	(void)agent_raw_sigmask(SIG_SETMASK, &all, &old);
	agent_g.fork_child_reset((pid_t)agent_syscall0(SYS_getppid), 0);
	(void)agent_raw_sigmask(SIG_SETMASK, &old, NULL);
	return true;
}
