/*
 * Thread hooks: pthread_create wraps the start routine in a trampoline that
 * reports THREAD_START and THREAD_END; pthread_setname_np and
 * prctl(PR_SET_NAME) report THREAD_NAME.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>

#include "internal.h"

/* pthread_t -> kernel tid of the threads our trampoline started, so that
 * naming another thread can say which one. Guarded by the send lock. */
#define AGENT_THREADS_MAX 1024

struct agent_thread {
	pthread_t th;
	pid_t tid;
};

AGENT_DATA static struct agent_thread agent_threads[AGENT_THREADS_MAX];

/* The main thread's pthread_t, which no trampoline saw start: taken when
 * it first creates a thread (before any thread it creates can name it). */
AGENT_DATA static pthread_t agent_main_th;
AGENT_DATA static int agent_main_th_set;

/*
 * In a fork child: forget the parent's threads. Only the slots ever used
 * are cleared: a fork child that wrote the whole 16 KiB table would take
 * a page fault per page, in every child of every fork (this is on the
 * path of each process a build starts).
 */
void agent_threads_reset(void)
{
	if (agent_g.threads_used) {
		memset(agent_threads, 0, (size_t)agent_g.threads_used * sizeof(agent_threads[0]));
		agent_g.threads_used = 0;
	}
	if (agent_main_th_set)
		agent_main_th_set = 0;
}

/* Caller holds the send lock. */
static void agent_threads_set(pthread_t th, pid_t tid, pid_t newtid)
{
	int i;

	for (i = 0; i < AGENT_THREADS_MAX; i++) {
		if (agent_threads[i].tid == tid &&
		    (tid == 0 || pthread_equal(agent_threads[i].th, th))) {
			agent_threads[i].th = th;
			agent_threads[i].tid = newtid;
			if (i >= agent_g.threads_used)
				agent_g.threads_used = i + 1;
			return;
		}
	}
}

/* Caller holds the send lock. Returns 0 when unknown. */
static pid_t agent_threads_find(pthread_t th)
{
	int i;

	for (i = 0; i < AGENT_THREADS_MAX; i++)
		if (agent_threads[i].tid && pthread_equal(agent_threads[i].th, th))
			return agent_threads[i].tid;
	return 0;
}

/* Allocated by the creating thread, freed by the new one. */
struct agent_tramp {
	void *(*start)(void *);
	void *arg;
};

static void agent_thread_end(void *unused)
{
	(void)unused;
	if (agent_bypass())
		return;
	agent_ev_thread_end();
	agent_t_guard++;
	agent_lock();
	agent_threads_set(pthread_self(), agent_tid(), 0);
	agent_write_locked(agent_buf, enc_thread(agent_buf, AGENT_BUF_SIZE, FT_MSG_THREAD_END,
						 agent_now(), agent_tid(), NULL));
	agent_unlock();
	agent_t_guard--;
}

/* THREAD_END goes out through a cleanup handler, so return, pthread_exit
 * and cancellation are all reported. */
static void *agent_tramp_run(void *p)
{
	struct agent_tramp t = *(struct agent_tramp *)p;
	void *ret;

	free(p);
	agent_t_tramp = 1;
	if (!agent_bypass()) {
		agent_t_guard++;
		agent_lock();
		agent_threads_set(pthread_self(), 0, agent_tid());
		agent_write_locked(agent_buf,
				   enc_thread(agent_buf, AGENT_BUF_SIZE, FT_MSG_THREAD_START,
					      agent_now(), agent_tid(), NULL));
		agent_unlock();
		agent_t_guard--;
	}
	pthread_cleanup_push(agent_thread_end, NULL);
	ret = t.start(t.arg);
	pthread_cleanup_pop(1);
	return ret;
}

AGENT_EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*start)(void *),
				void *arg)
{
	agent_pthread_create_fn f = AGENT_REAL(pthread_create);
	struct agent_tramp *t;
	int ret, err;

	if (!f)
		return ENOSYS;
	if (agent_bypass())
		return f(th, attr, start, arg);
	err = errno;
	t = malloc(sizeof(*t));
	errno = err;
	if (!t)
		return f(th, attr, start, arg);
	if (!agent_main_th_set && agent_tid() == agent_g.pid) {
		agent_main_th = pthread_self();
		agent_main_th_set = 1;
	}
	t->start = start;
	t->arg = arg;
	ret = f(th, attr, agent_tramp_run, t);
	if (ret != 0)
		free(t);
	errno = err;
	return ret;
}

/* Threads we did not start (the main thread) report their end here. */
AGENT_EXPORT void pthread_exit(void *ret)
{
	agent_pthread_exit_fn f = AGENT_REAL(pthread_exit);

	if (!agent_t_tramp && !agent_bypass()) {
		agent_ev_thread_end();
		AGENT_EMIT(enc_thread(agent_buf, AGENT_BUF_SIZE, FT_MSG_THREAD_END, agent_now(),
				      agent_tid(), NULL));
	}
	f(ret);
	__builtin_unreachable();
}

/* Remember the main thread's name for HELLO of fork children. */
static void agent_emit_name(pid_t tid, const char *name)
{
	int err = errno;

	agent_t_guard++;
	agent_lock();
	if (tid == agent_g.pid) {
		strncpy(agent_g.name, name, sizeof(agent_g.name) - 1);
		agent_g.name[sizeof(agent_g.name) - 1] = '\0';
	}
	agent_write_locked(agent_buf,
			   enc_thread_name(agent_buf, AGENT_BUF_SIZE, agent_now(), tid, name));
	agent_unlock();
	agent_t_guard--;
	errno = err;
}

AGENT_EXPORT int pthread_setname_np(pthread_t th, const char *name)
{
	agent_pthread_setname_np_fn f = AGENT_REAL(pthread_setname_np);
	pid_t tid;
	int ret;

	if (!f)
		return ENOSYS;
	ret = f(th, name);
	if (ret != 0 || agent_bypass())
		return ret;
	if (pthread_equal(th, pthread_self())) {
		tid = agent_tid();
	} else {
		agent_t_guard++;
		agent_lock();
		tid = agent_threads_find(th);
		agent_unlock();
		agent_t_guard--;
		/* Another thread names the main thread. */
		if (!tid && agent_main_th_set && pthread_equal(th, agent_main_th))
			tid = agent_g.pid;
	}
	if (tid)
		agent_emit_name(tid, name);
	else
		agent_count_lost();
	return ret;
}

/* Keeps the process table's fd (agent_table_keep) under the send lock,
 * which guards the table's state. */
static void agent_keep_table(void)
{
	agent_t_guard++;
	agent_lock();
	agent_table_keep();
	agent_unlock();
	agent_t_guard--;
}

/*
 * prctl(PR_SET_SECCOMP). Strict mode allows read, write, exit and
 * sigreturn only: the agent's next system call of any other kind (a
 * table slot to open, a clock read, the fatal-signal handler's re-raise)
 * would have the kernel kill the process. So before the process enters
 * it, the agent sends what this thread recorded, stops, and gives the
 * fatal signals back to their default action; if the call fails, it
 * goes on. A filter may refuse open(): the table's fd is kept open
 * before it is installed (agent_table_keep), and once it is, the agent
 * makes no connection (agent_may_connect).
 */
static int agent_prctl_seccomp(agent_prctl_fn f, unsigned long mode, unsigned long a3,
			       unsigned long a4, unsigned long a5)
{
	bool was = false;
	int ret, err;

	if (mode == SECCOMP_MODE_STRICT) {
		was = !agent_bypass();
		if (was)
			agent_ev_flush_self();
		__atomic_store_n(&agent_g.active, 0, __ATOMIC_RELAXED);
		agent_signals_uninstall();
	}
	/* A filter may refuse open(): the table stays at hand. */
	if (mode == SECCOMP_MODE_FILTER && __atomic_load_n(&agent_g.configured, __ATOMIC_ACQUIRE))
		agent_keep_table();
	ret = f(PR_SET_SECCOMP, mode, a3, a4, a5);
	err = errno;
	if (ret == 0 && mode == SECCOMP_MODE_FILTER)
		agent_seccomp_seen();
	if (ret != 0 && was) {
		__atomic_store_n(&agent_g.active, 1, __ATOMIC_RELAXED);
		agent_signals_install();
	}
	errno = err;
	return ret;
}

/*
 * libseccomp's seccomp_load installs its filter with the seccomp system
 * call through syscall(), which no hook sees: man-db's sandbox (run by
 * dh_installman in every Debian package build with man pages) makes
 * open() for writing, socket() and mkdir() fail there. So the table's fd
 * is kept first, as for prctl. Resolved at its first call, not with the
 * other real functions: programs that load libseccomp are few, and a
 * dlsym in every process before its first fork is not.
 */
AGENT_EXPORT int seccomp_load(void *ctx)
{
	static void *real;
	int (*f)(void *) = (int (*)(void *))agent_resolve_fast(&real, "seccomp_load");
	int ret;

	if (!f)
		return -ENOSYS; /* libseccomp's convention: a negative errno */
	if (!agent_t_in_vfork && __atomic_load_n(&agent_g.configured, __ATOMIC_ACQUIRE))
		agent_keep_table();
	ret = f(ctx);
	if (ret == 0 && !agent_t_in_vfork)
		agent_seccomp_seen();
	return ret;
}

/* prctl is variadic; every option takes at most four more unsigned long
 * arguments, which are passed through untouched. */
AGENT_EXPORT int prctl(int option, ...)
{
	agent_prctl_fn f = AGENT_REAL(prctl);
	unsigned long a2, a3, a4, a5;
	char name[16];
	va_list ap;
	int ret;

	va_start(ap, option);
	a2 = va_arg(ap, unsigned long);
	a3 = va_arg(ap, unsigned long);
	a4 = va_arg(ap, unsigned long);
	a5 = va_arg(ap, unsigned long);
	va_end(ap);
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	/* A vfork child shares our memory: what it does is not ours. */
	if (option == PR_SET_SECCOMP && !agent_t_in_vfork)
		return agent_prctl_seccomp(f, a2, a3, a4, a5);
	ret = f(option, a2, a3, a4, a5);
	if (ret != 0 || option != PR_SET_NAME || agent_bypass() || !a2)
		return ret;
	/* The kernel keeps at most 15 bytes. */
	strncpy(name, (const char *)a2, sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	agent_emit_name(agent_tid(), name);
	return ret;
}
