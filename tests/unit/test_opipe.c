/*
 * The ordered pipeline (combine/util/opipe.c) under stress: thousands of
 * jobs of random cost through pipes of a few slots, from two submitting
 * threads at once. Each job's work, done and release are counted: done
 * in submission order, release exactly once, nothing done after an error
 * and nothing worked after it was seen, done_on_submitter's done only on
 * the submitter; a fork child's pipe works synchronously; short pipes
 * made and freed back to back beside a busy one. Run with
 * FORKTRACE_THREADS=1 too (no worker thread: everything on the caller's
 * thread) and under TSan (scripts/test).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "opipe.h"

#define NJOBS 3000

struct job {
	unsigned seq;
	unsigned cost;
	atomic_int worked, done, released;
	atomic_bool worked_elsewhere;
};

struct run {
	struct job *jobs;
	unsigned njobs;
	unsigned fail_work; /* this job's work fails (NJOBS+: none) */
	unsigned fail_done; /* this job's done fails */
	pthread_t submitter;
	unsigned next_done;         /* done's order, only ever touched by done */
	atomic_uint out_of_order;   /* dones not in submission order */
	atomic_uint done_elsewhere; /* done_on_submitter's done off the submitter */
	atomic_uint work_after_err; /* work started after the error was seen */
	atomic_bool failed;
	atomic_uint sink;
};

/* Work that costs time without sleeping: the cost differs per job so they
 * finish out of order. */
static int job_work(void *ctx, void *arg)
{
	struct run *r = ctx;
	struct job *j = arg;
	unsigned x = j->seq;

	if (atomic_load(&r->failed))
		atomic_fetch_add(&r->work_after_err, 1);
	atomic_fetch_add(&j->worked, 1);
	if (!pthread_equal(pthread_self(), r->submitter))
		atomic_store(&j->worked_elsewhere, true);
	for (unsigned i = 0; i < j->cost; i++)
		x = x * 1103515245u + 12345u;
	atomic_fetch_add(&r->sink, x & 1);
	if (j->seq == r->fail_work) {
		atomic_store(&r->failed, true);
		return -EIO;
	}
	return 0;
}

static int job_done(void *ctx, void *arg)
{
	struct run *r = ctx;
	struct job *j = arg;

	atomic_fetch_add(&j->done, 1);
	if (j->seq != r->next_done)
		atomic_fetch_add(&r->out_of_order, 1);
	r->next_done = j->seq + 1;
	if (!pthread_equal(pthread_self(), r->submitter))
		atomic_fetch_add(&r->done_elsewhere, 1);
	if (j->seq == r->fail_done) {
		atomic_store(&r->failed, true);
		return -ENOSPC;
	}
	return 0;
}

static void job_release(void *ctx, void *arg)
{
	struct job *j = arg;

	(void)ctx;
	atomic_fetch_add(&j->released, 1);
}

static atomic_uint worked_on_worker; /* jobs a worker thread worked, all runs */

/* Submits njobs jobs through a pipe of max_jobs slots; checks what the pipe
 * promises. Returns the error submit or finish gave. */
static int run_pipe(unsigned njobs, size_t max_jobs, bool on_submitter, unsigned fail_work,
		    unsigned fail_done, unsigned seed)
{
	opipe_ops ops = {.work = job_work, .done = job_done, .release = job_release};
	struct run r = {.njobs = njobs, .fail_work = fail_work, .fail_done = fail_done};
	int err = 0, ferr;
	opipe *p;

	ops.done_on_submitter = on_submitter;
	r.jobs = calloc(njobs, sizeof(*r.jobs));
	MUST(r.jobs != NULL);
	r.submitter = pthread_self();
	for (unsigned i = 0; i < njobs; i++) {
		r.jobs[i].seq = i;
		seed = seed * 1664525u + 1013904223u;
		/* Mostly cheap, some a hundred times dearer. */
		r.jobs[i].cost = (seed >> 8) % 16 == 0 ? 20000 + (seed >> 12) % 20000
						       : (seed >> 12) % 400;
	}
	p = opipe_new(&ops, &r, max_jobs);
	MUST(p != NULL);
	for (unsigned i = 0; i < njobs; i++) {
		int e = opipe_submit(p, &r.jobs[i]);

		if (e != 0 && err == 0)
			err = e;
	}
	ferr = opipe_finish(p);
	if (err == 0)
		err = ferr;
	else
		CHECK_INT(ferr, ==, err);
	/* The error was handed back, the pipe takes jobs again. */
	CHECK_INT(opipe_finish(p), ==, 0);
	opipe_free(p);

	CHECK_UINT(atomic_load(&r.out_of_order), ==, 0);
	if (on_submitter)
		CHECK_UINT(atomic_load(&r.done_elsewhere), ==, 0);
	for (unsigned i = 0; i < njobs; i++) {
		struct job *j = &r.jobs[i];

		if (atomic_load(&j->released) != 1 || atomic_load(&j->worked) > 1 ||
		    atomic_load(&j->done) > 1) {
			check_fail_at(__FILE__, __LINE__, "job %u: worked %d done %d released %d",
				      i, atomic_load(&j->worked), atomic_load(&j->done),
				      atomic_load(&j->released));
			break;
		}
		if (atomic_load(&j->worked_elsewhere))
			atomic_fetch_add(&worked_on_worker, 1);
		/* Without an error every job is worked and done; with one, no job
		 * at or after the failing one is done, and the dones are a prefix. */
		if (fail_work >= njobs && fail_done >= njobs) {
			CHECK_INT(atomic_load(&j->worked), ==, 1);
			CHECK_INT(atomic_load(&j->done), ==, 1);
		} else if (i >= fail_work || i > fail_done) {
			CHECK_INT(atomic_load(&j->done), ==, 0);
		}
		if (atomic_load(&j->done) == 1 && i > 0)
			CHECK_INT(atomic_load(&r.jobs[i - 1].done), ==, 1);
	}
	if (fail_work < njobs)
		CHECK_INT(err, ==, -EIO);
	else if (fail_done < njobs)
		CHECK_INT(err, ==, -ENOSPC);
	else
		CHECK_INT(err, ==, 0);
	/* The error stops the pipe: at most the jobs in flight when it was
	 * seen are still worked, never the rest. */
	CHECK_UINT(atomic_load(&r.work_after_err), <=, max_jobs + 8);
	free(r.jobs);
	return err;
}

struct thread_arg {
	bool on_submitter;
	unsigned seed;
};

static void *submitter_thread(void *arg)
{
	struct thread_arg *a = arg;

	run_pipe(NJOBS, 4, a->on_submitter, NJOBS, NJOBS, a->seed);
	run_pipe(NJOBS / 3, 1, !a->on_submitter, NJOBS, NJOBS, a->seed + 1);
	/* Short pipes made and freed back to back while the workers are busy
	 * with the other thread's: a worker that kept a freed pipe's slot
	 * would read memory the next pipe reuses (ASan, TSan). */
	for (unsigned i = 0; i < 400; i++) {
		unsigned seed = a->seed * 1000 + i;

		run_pipe(1 + seed % 6, 1 + seed % 4, (seed & 1) != 0, NJOBS, NJOBS, seed);
	}
	return NULL;
}

/* A child forked while the workers exist has none: its pipe still works
 * every job in order (synchronously), and it exits cleanly. */
static void check_fork_child(void)
{
	pid_t pid;

	fflush(stdout);
	pid = fork();
	int status;

	MUST(pid >= 0);
	if (pid == 0) {
		run_pipe(500, 4, false, 1000, 1000, 7);
		run_pipe(500, 2, true, 1000, 1000, 8);
		_exit(check_nfailed == 0 ? 0 : 1);
	}
	MUST(waitpid(pid, &status, 0) == pid);
	CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fork child status %d", status);
}

int main(void)
{
	pthread_t t[2];
	struct thread_arg args[2] = {{false, 11}, {true, 12}};
	unsigned threads = opipe_threads();

	printf("opipe: %u threads\n", threads);
	/* One pipe at a time, each shape. */
	for (unsigned seed = 1; seed <= 3; seed++) {
		run_pipe(NJOBS, 4, false, NJOBS, NJOBS, seed);
		run_pipe(NJOBS, 4, true, NJOBS, NJOBS, seed);
		run_pipe(NJOBS, 1, false, NJOBS, NJOBS, seed);
		run_pipe(NJOBS, 8, true, NJOBS, NJOBS, seed);
	}
	/* Errors: in work, in done, first job, last job. */
	run_pipe(NJOBS, 4, false, 1000, NJOBS, 21);
	run_pipe(NJOBS, 4, true, 1000, NJOBS, 22);
	run_pipe(NJOBS, 4, false, NJOBS, 1500, 23);
	run_pipe(NJOBS, 4, true, NJOBS, 1500, 24);
	run_pipe(NJOBS, 3, false, 0, NJOBS, 25);
	run_pipe(NJOBS, 3, true, NJOBS, NJOBS - 1, 26);
	/* Two submitters on the one pool. */
	for (int i = 0; i < 2; i++)
		MUST(pthread_create(&t[i], NULL, submitter_thread, &args[i]) == 0);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	check_fork_child();
	/* With workers, they took part; with FORKTRACE_THREADS=1 nothing ran
	 * off the submitting thread. */
	if (threads > 1)
		CHECK_UINT(atomic_load(&worked_on_worker), >, 0);
	else
		CHECK_UINT(atomic_load(&worked_on_worker), ==, 0);
	return check_done("opipe");
}
