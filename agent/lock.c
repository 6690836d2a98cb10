/*
 * The send lock, which guards the connection, agent_buf and the agent's
 * tables (lock order: internal.h), and the queue of WAIT records that
 * signal handlers leave for whoever releases it next. Above the transport:
 * its release writes them.
 */
#include <errno.h>
#include <linux/futex.h>
#include <linux/kcmp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

static void agent_futex(int op, int val)
{
	agent_syscall(SYS_futex, &agent_g.lockword, op | FUTEX_PRIVATE_FLAG, val, NULL, NULL, 0);
}

/* Drepper's three-state mutex ("Futexes are tricky", mutex 2). Preserves
 * errno, which the futex syscall may change. */
void agent_lock(void)
{
	int c = 0;
	int saved;

	if (__atomic_compare_exchange_n(&agent_g.lockword, &c, 1, false, __ATOMIC_ACQUIRE,
					__ATOMIC_RELAXED))
		return;
	saved = errno;
	/* Held in a process that is not this one: a raw clone child copied
	 * the word while a thread of its parent held it, and nobody here
	 * will ever release it (agent_same_process). */
	pid_t pid = (pid_t)agent_syscall0(SYS_getpid), was = agent_g.pid;

	if (pid != was && agent_syscall(SYS_kcmp, pid, was, KCMP_VM, 0, 0) > 0) {
		__atomic_store_n(&agent_g.lockword, 1, __ATOMIC_RELAXED);
		errno = saved;
		return;
	}
	if (c != 2)
		c = __atomic_exchange_n(&agent_g.lockword, 2, __ATOMIC_ACQUIRE);
	while (c != 0) {
		agent_futex(FUTEX_WAIT, 2);
		c = __atomic_exchange_n(&agent_g.lockword, 2, __ATOMIC_ACQUIRE);
	}
	errno = saved;
}

bool agent_trylock(void)
{
	int c = 0;

	return __atomic_compare_exchange_n(&agent_g.lockword, &c, 1, false, __ATOMIC_ACQUIRE,
					   __ATOMIC_RELAXED);
}

/*
 * WAIT records of wait hooks reached from a signal handler that
 * interrupted the agent (a SIGCHLD handler that reaps, landing while its
 * thread sends a record): the send lock may be held below the handler, so
 * the record waits here, and whoever next releases the lock sends it.
 * Slots are reserved with a compare-and-swap, so that handlers on several
 * threads, or nested in each other, do not collide, and marked ready once
 * written. One queue for the process, not one per thread: 13 KiB more of
 * static TLS would cost every thread, and would move the agent's
 * per-thread variables off the page of errno and the thread's descriptor,
 * onto one more page that a fork's parent then copies.
 */
#define AGENT_DEFER_MAX 128 /* a SIGCHLD handler reaps bursts of dozens */

struct agent_deferred {
	uint64_t ts;
	pid_t child;
	pid_t tid; /* of the thread that reaped */
	int status;
	int ready;
	int has_ru;
	struct enc_rusage ru; /* the child's, when has_ru */
};

AGENT_DATA static struct agent_deferred agent_defer_q[AGENT_DEFER_MAX];

void agent_defer_wait(uint64_t ts, pid_t child, int status, const struct enc_rusage *ru)
{
	unsigned h = __atomic_load_n(&agent_g.defer_head, __ATOMIC_RELAXED);
	struct agent_deferred *d;

	do {
		if (h - __atomic_load_n(&agent_g.defer_tail, __ATOMIC_ACQUIRE) >= AGENT_DEFER_MAX) {
			agent_count_lost();
			return;
		}
	} while (!__atomic_compare_exchange_n(&agent_g.defer_head, &h, h + 1, false,
					      __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	d = &agent_defer_q[h % AGENT_DEFER_MAX];
	d->ts = ts;
	d->child = child;
	d->tid = agent_tid();
	d->status = status;
	d->has_ru = ru != NULL;
	if (ru)
		d->ru = *ru;
	__atomic_store_n(&d->ready, 1, __ATOMIC_RELEASE);
}

/* Send the deferred records. Caller holds the send lock. */
static void agent_defer_flush(void)
{
	unsigned char buf[AGENT_RU_FRAME];

	while (agent_g.defer_tail != __atomic_load_n(&agent_g.defer_head, __ATOMIC_ACQUIRE)) {
		struct agent_deferred *d = &agent_defer_q[agent_g.defer_tail % AGENT_DEFER_MAX];
		ssize_t n;

		if (!__atomic_load_n(&d->ready, __ATOMIC_ACQUIRE))
			break; /* still being written by an interrupted handler */
		n = enc_wait(buf, sizeof(buf), d->ts, d->tid, d->child, d->status,
			     d->has_ru ? &d->ru : NULL);
		__atomic_store_n(&d->ready, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&agent_g.defer_tail, agent_g.defer_tail + 1, __ATOMIC_RELEASE);
		agent_write_locked(buf, n);
	}
}

/* The parent's deferred records are the parent's to send. Only the slots
 * between tail and head can be marked (a sent slot is cleared), so only
 * those are cleared: the whole 13 KiB queue would cost every fork child
 * page faults for nothing. */
void agent_defer_fork_child(void)
{
	if (agent_g.defer_head || agent_g.defer_tail) {
		for (unsigned i = agent_g.defer_tail; i != agent_g.defer_head; i++)
			agent_defer_q[i % AGENT_DEFER_MAX].ready = 0;
		agent_g.defer_head = agent_g.defer_tail = 0;
	}
}

void agent_unlock(void)
{
	int saved;

	if (__atomic_load_n(&agent_g.defer_tail, __ATOMIC_RELAXED) !=
	    __atomic_load_n(&agent_g.defer_head, __ATOMIC_RELAXED))
		agent_defer_flush();
	if (__atomic_exchange_n(&agent_g.lockword, 0, __ATOMIC_RELEASE) == 2) {
		saved = errno;
		agent_futex(FUTEX_WAKE, 1);
		errno = saved;
	}
}

void agent_emit_frame(const void *frame, ssize_t n)
{
	agent_t_guard++;
	agent_lock();
	agent_write_locked(frame, n);
	agent_unlock();
	agent_t_guard--;
}
