/*
 * opipe: the ordered pipeline on the process's worker threads (opipe.h).
 *
 * One mutex guards everything: the pool's queue of pending jobs (every
 * pipe's, oldest first) and each pipe's ring of jobs in flight. Jobs are
 * large (a block of output, a chunk of a column), so the lock is taken a
 * few thousand times a second at most and never held while a job is
 * worked, done or released.
 *
 * A job's life: PENDING (in the queue) -> WORKING (a thread took it) ->
 * WORKED; then, at the head of its pipe's ring, done and release, one job
 * at a time (the pipe's "doing" flag), by whichever thread finished the
 * head's work, or by the submitter alone for done_on_submitter. After an
 * error, jobs are released without being worked or done, still in order.
 *
 * Lock order: the pool's mutex only; work, done and release are called
 * without it.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "opipe.h"

/* More threads than this gain nothing for writing one file. */
#define OPIPE_MAX_THREADS 8u
/* FORKTRACE_THREADS is taken up to this. */
#define OPIPE_ENV_MAX 64u

enum slot_state { SLOT_PENDING, SLOT_WORKING, SLOT_WORKED };

struct slot {
	opipe *p;
	void *job;
	enum slot_state state;
	struct slot *qnext; /* the pool's queue of pending jobs */
};

struct opipe {
	opipe_ops ops;
	void *ctx;
	size_t max;          /* ring size: jobs in flight at most */
	size_t head;         /* the oldest job in flight */
	size_t count;        /* jobs in flight (submitted, not released) */
	bool doing;          /* a thread is doing and releasing the head */
	int err;             /* the first error, 0 if none */
	pthread_cond_t cond; /* the submitter waits for room, a worked head, the end */
	struct slot *slots;
};

static struct {
	pthread_once_t once;
	pthread_mutex_t lock;
	pthread_cond_t work; /* workers wait for a pending job */
	struct slot *qhead, *qtail;
	unsigned threads;  /* opipe_threads() */
	unsigned nworkers; /* started threads; 0 in a fork child: all synchronous */
} pool = {
	.once = PTHREAD_ONCE_INIT,
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.work = PTHREAD_COND_INITIALIZER,
};

/* FORKTRACE_THREADS if it is a number >= 1, else the CPUs this process may
 * run on, at most OPIPE_MAX_THREADS. */
static unsigned threads_wanted(void)
{
	const char *env = getenv("FORKTRACE_THREADS");
	cpu_set_t set;
	int n;

	if (env != NULL && *env != '\0') {
		char *end;
		unsigned long v = strtoul(env, &end, 10);

		if (*end == '\0' && v >= 1)
			return v > OPIPE_ENV_MAX ? OPIPE_ENV_MAX : (unsigned)v;
	}
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return 1;
	n = CPU_COUNT(&set);
	if (n < 1)
		return 1;
	return (unsigned)n > OPIPE_MAX_THREADS ? OPIPE_MAX_THREADS : (unsigned)n;
}

static void slot_run(struct slot *s);

/* A worker: works pending jobs, oldest first, forever. Never joined: a
 * process that exits while its workers wait in pthread_cond_wait simply
 * ends them (they hold nothing then). */
static void *worker_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&pool.lock);
	for (;;) {
		struct slot *s;

		while (pool.qhead == NULL)
			pthread_cond_wait(&pool.work, &pool.lock);
		s = pool.qhead;
		pool.qhead = s->qnext;
		if (pool.qhead == NULL)
			pool.qtail = NULL;
		slot_run(s);
	}
	return NULL;
}

/* Fork: the child has none of the workers, so its pipes work
 * synchronously; pipes that were in flight in the parent must not be used
 * in the child (their jobs belong to the parent's threads). The lock is
 * held across fork so the child's copy of the pool is consistent. */
static void atfork_prepare(void)
{
	pthread_mutex_lock(&pool.lock);
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&pool.lock);
}

static void atfork_child(void)
{
	pool.nworkers = 0;
	pool.qhead = pool.qtail = NULL;
	pthread_mutex_init(&pool.lock, NULL);
	pthread_cond_init(&pool.work, NULL);
}

/* Starts the workers with every signal blocked (signals stay the main
 * thread's business). A worker that cannot be started is one fewer; none
 * at all means every pipe works synchronously. */
static void pool_start(void)
{
	sigset_t all, old;

	pool.threads = threads_wanted();
	if (pool.threads <= 1)
		return;
	if (pthread_atfork(atfork_prepare, atfork_parent, atfork_child) != 0)
		return;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (unsigned i = 0; i + 1 < pool.threads; i++) {
		pthread_attr_t attr;
		pthread_t t;
		int err;

		if (pthread_attr_init(&attr) != 0)
			break;
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		err = pthread_create(&t, &attr, worker_main, NULL);
		pthread_attr_destroy(&attr);
		if (err != 0)
			break;
		pthread_mutex_lock(&pool.lock);
		pool.nworkers++;
		pthread_mutex_unlock(&pool.lock);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

unsigned opipe_threads(void)
{
	pthread_once(&pool.once, pool_start);
	return pool.threads;
}

/* Does and releases the worked jobs at the head of p's ring, in order,
 * unless another thread is already at it. Called and returns with the
 * lock held; drops it around done and release. */
static void heads_finish(opipe *p)
{
	if (p->doing)
		return;
	p->doing = true;
	while (p->count > 0 && p->slots[p->head].state == SLOT_WORKED) {
		void *job = p->slots[p->head].job;
		int err = p->err;

		pthread_mutex_unlock(&pool.lock);
		if (err == 0)
			err = p->ops.done(p->ctx, job);
		if (p->ops.release != NULL)
			p->ops.release(p->ctx, job);
		pthread_mutex_lock(&pool.lock);
		if (err < 0 && p->err == 0)
			p->err = err;
		p->head = (p->head + 1) % p->max;
		p->count--;
		pthread_cond_broadcast(&p->cond);
	}
	p->doing = false;
}

/* Works a job taken from the queue (unless its pipe has failed), then
 * finishes what is ready at its pipe's head, or tells the submitter that
 * does that. Called and returns with the lock held. */
static void slot_run(struct slot *s)
{
	opipe *p = s->p;

	if (p->err == 0) {
		int err;

		s->state = SLOT_WORKING;
		pthread_mutex_unlock(&pool.lock);
		err = p->ops.work(p->ctx, s->job);
		pthread_mutex_lock(&pool.lock);
		if (err < 0 && p->err == 0)
			p->err = err;
	}
	s->state = SLOT_WORKED;
	if (p->ops.done_on_submitter)
		pthread_cond_broadcast(&p->cond);
	else
		heads_finish(p);
}

/* One step of a submitter that waits: finish its own pipe's head if only it
 * may, else work the oldest pending job of any pipe, else sleep until a job
 * of p changes state. Returns with the lock held. */
static void submitter_step(opipe *p)
{
	if (p->ops.done_on_submitter && p->count > 0 && p->slots[p->head].state == SLOT_WORKED &&
	    !p->doing) {
		heads_finish(p);
	} else if (pool.qhead != NULL) {
		struct slot *s = pool.qhead;

		pool.qhead = s->qnext;
		if (pool.qhead == NULL)
			pool.qtail = NULL;
		slot_run(s);
	} else {
		pthread_cond_wait(&p->cond, &pool.lock);
	}
}

opipe *opipe_new(const opipe_ops *ops, void *ctx, size_t max_jobs)
{
	opipe *p;

	if (max_jobs < 1)
		max_jobs = 1;
	opipe_threads();
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return NULL;
	p->slots = calloc(max_jobs, sizeof(*p->slots));
	if (p->slots == NULL)
		goto fail_slots;
	if (pthread_cond_init(&p->cond, NULL) != 0)
		goto fail_cond;
	p->ops = *ops;
	p->ctx = ctx;
	p->max = max_jobs;
	return p;

fail_cond:
	free(p->slots);
fail_slots:
	free(p);
	return NULL;
}

/* No worker threads (FORKTRACE_THREADS=1, none could start, a fork
 * child): the job is worked, done and released here. */
static int submit_sync(opipe *p, void *job)
{
	int err = p->err;

	if (err == 0)
		err = p->ops.work(p->ctx, job);
	if (err == 0)
		err = p->ops.done(p->ctx, job);
	if (p->ops.release != NULL)
		p->ops.release(p->ctx, job);
	if (err < 0 && p->err == 0)
		p->err = err;
	return p->err;
}

int opipe_submit(opipe *p, void *job)
{
	struct slot *s;
	int err;

	pthread_mutex_lock(&pool.lock);
	if (pool.nworkers == 0) {
		pthread_mutex_unlock(&pool.lock);
		return submit_sync(p, job);
	}
	while (p->err == 0 && p->count >= p->max)
		submitter_step(p);
	err = p->err;
	if (err != 0) {
		pthread_mutex_unlock(&pool.lock);
		if (p->ops.release != NULL)
			p->ops.release(p->ctx, job);
		return err;
	}
	s = &p->slots[(p->head + p->count) % p->max];
	s->p = p;
	s->job = job;
	s->state = SLOT_PENDING;
	s->qnext = NULL;
	if (pool.qtail != NULL)
		pool.qtail->qnext = s;
	else
		pool.qhead = s;
	pool.qtail = s;
	p->count++;
	pthread_cond_signal(&pool.work);
	/* Whatever is ready is written now, so the submitter never sits on
	 * finished jobs until the ring fills. */
	if (p->ops.done_on_submitter)
		heads_finish(p);
	pthread_mutex_unlock(&pool.lock);
	return 0;
}

int opipe_finish(opipe *p)
{
	int err;

	pthread_mutex_lock(&pool.lock);
	while (p->count > 0 || p->doing)
		submitter_step(p);
	err = p->err;
	p->err = 0;
	pthread_mutex_unlock(&pool.lock);
	return err;
}

void opipe_free(opipe *p)
{
	if (p == NULL)
		return;
	opipe_finish(p);
	pthread_cond_destroy(&p->cond);
	free(p->slots);
	free(p);
}
