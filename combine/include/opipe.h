/*
 * opipe - an ordered pipeline on the process's worker threads: jobs are
 * worked on by any thread, in any order, and finished (written) one at a
 * time in the order they were submitted. The one way forktrace's writers
 * use the second core (docs/OUTPUT.md):
 *
 *   producer (the walk of the model, the merge) --submit--> work (any thread:
 *   expand deferred events, compress, shuffle) --done, in order--> write
 *
 * The workers are one process-wide pool of threads (opipe_threads() - 1 of
 * them; the submitting thread is the other one): started on first use,
 * never receiving signals, shared by every pipe. FORKTRACE_THREADS=N sets
 * the number of threads (1: no worker thread; every job is worked and done
 * inside opipe_submit / opipe_finish on the caller's thread, in order, and
 * the output is the same byte for byte).
 *
 * Memory is bounded by the caller: at most max_jobs jobs are in flight;
 * opipe_submit past that first helps (works a pending job itself on the
 * submitting thread) and then waits, so a producer faster than the
 * workers slows down instead of queueing without end.
 *
 * Errors: work and done return 0 or a negative errno. The first error
 * stops the pipe: later jobs are neither worked nor done (they are handed
 * to release), and opipe_submit and opipe_finish return it.
 *
 * Used only inside combine/ (and by the collector through the sinks).
 */
#ifndef FT_COMBINE_OPIPE_H
#define FT_COMBINE_OPIPE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct opipe opipe;

typedef struct opipe_ops {
	/* Works on job: any thread, concurrently with other jobs' work. */
	int (*work)(void *ctx, void *job);
	/* Finishes job after its work: in submission order, one at a time.
	 * With done_on_submitter, only on the thread that calls opipe_submit
	 * and opipe_finish (for libraries that are not thread-safe, HDF5);
	 * otherwise on whichever thread finished the job that was next. */
	int (*done)(void *ctx, void *job);
	/* Gives job back to its owner after done, or instead of work/done
	 * after an error: any thread, called exactly once per job. May be NULL. */
	void (*release)(void *ctx, void *job);
	bool done_on_submitter;
} opipe_ops;

/* The number of threads pipes use, the submitting one included: from
 * FORKTRACE_THREADS, else the CPUs this process may run on, at most 8. */
unsigned opipe_threads(void);

/* A pipe of at most max_jobs jobs in flight (>= 1). NULL on -ENOMEM. */
opipe *opipe_new(const opipe_ops *ops, void *ctx, size_t max_jobs);

/* Submits job (owned by the pipe until release). Returns 0 or the pipe's
 * first error (job has then been released). */
int opipe_submit(opipe *p, void *job);

/* Waits until every submitted job is done and released. Returns 0 or the
 * first error. The pipe can take jobs again afterwards. */
int opipe_finish(opipe *p);

/* Finishes (opipe_finish) and frees p; NULL: no-op. */
void opipe_free(opipe *p);

#endif /* FT_COMBINE_OPIPE_H */
