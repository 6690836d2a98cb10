/*
 * Unit test of the critical path (combine/model/critpath.c) on process
 * trees built by hand whose path is known: each case lists its processes
 * and waits and the steps it must give, as "pid:start-end" in time order.
 * Every path must also tile its span (no gap, no overlap). Then the walk
 * at 40,000 processes: a chain that deep, and a make with that many jobs.
 *
 * Usage: test_critpath
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "critpath.h"

/* Times in these cases are small numbers; "end -1" is an unknown end. */
typedef struct tproc {
	int64_t pid, host_pid, parent, start, end;
	const char *host;
} tproc;

typedef struct twait {
	int64_t pid, child, ts;
} twait;

#define MAXP 16

typedef struct tcase {
	const char *name;
	tproc procs[MAXP];
	twait waits[MAXP];
	const char *steps; /* expected, "pid:start-end ..." */
	int64_t start, end;
} tcase;

/* The steps as the cases write them. */
static void format_steps(const critpath *cp, char *buf, size_t size)
{
	const critpath_step *st;
	size_t n = critpath_steps(cp, &st), len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%lld:%lld-%lld", i ? " " : "",
					(long long)st[i].pid, (long long)st[i].start_ns,
					(long long)st[i].end_ns);
}

/* The steps follow each other without gap or overlap from the path's
 * start to its end, each of some length. */
static void check_tiles(const char *name, const critpath *cp)
{
	const critpath_step *st;
	size_t n = critpath_steps(cp, &st);
	int64_t at = critpath_start_ns(cp);

	for (size_t i = 0; i < n; i++) {
		CHECK_MSG(st[i].start_ns == at, "%s: step %zu starts at %lld, not %lld", name, i,
			  (long long)st[i].start_ns, (long long)at);
		CHECK_MSG(st[i].end_ns > st[i].start_ns, "%s: step %zu is empty", name, i);
		CHECK_MSG(st[i].name != NULL && st[i].name[0] != '\0', "%s: step %zu unnamed", name,
			  i);
		at = st[i].end_ns;
	}
	CHECK_MSG(at == critpath_end_ns(cp), "%s: steps end at %lld, the path at %lld", name,
		  (long long)at, (long long)critpath_end_ns(cp));
}

static void run_case(const tcase *tc)
{
	critpath *cp = critpath_new();
	const critpath_step *st;
	char got[1024], name[32];
	int err;

	MUST(cp != NULL);
	for (size_t i = 0; i < MAXP && tc->procs[i].pid != 0; i++) {
		const tproc *p = &tc->procs[i];
		critpath_proc cpp = {
			.pid = p->pid,
			.host_pid = p->host_pid != 0 ? p->host_pid : p->pid,
			.parent = p->parent,
			.start_ns = p->start,
			.end_ns = p->end,
			.name = name,
			.host = p->host,
		};

		snprintf(name, sizeof(name), "p%lld", (long long)p->pid);
		MUST(critpath_add(cp, &cpp) == 0);
	}
	for (size_t i = 0; i < MAXP && tc->waits[i].pid != 0; i++)
		MUST(critpath_add_wait(cp, tc->waits[i].pid, tc->waits[i].child, tc->waits[i].ts) ==
		     0);
	err = critpath_compute(cp);
	CHECK_MSG(err == 0, "%s: compute: %d", tc->name, err);
	format_steps(cp, got, sizeof(got));
	CHECK_MSG(strcmp(got, tc->steps) == 0, "%s: steps\n  got      %s\n  expected %s", tc->name,
		  got, tc->steps);
	CHECK_MSG(critpath_start_ns(cp) == tc->start && critpath_end_ns(cp) == tc->end,
		  "%s: span %lld-%lld, expected %lld-%lld", tc->name,
		  (long long)critpath_start_ns(cp), (long long)critpath_end_ns(cp),
		  (long long)tc->start, (long long)tc->end);
	check_tiles(tc->name, cp);
	/* Each step is named after its process. */
	if (critpath_steps(cp, &st) > 0) {
		snprintf(name, sizeof(name), "p%lld", (long long)st[0].pid);
		CHECK_STR_EQ(st[0].name, name);
	}
	critpath_free(cp);
}

static const tcase cases[] = {
	{
		/* make (1) runs jobs 2 and 3 at once; 3 is a shell whose
		 * compile (5) is long; when 3 ends, make starts 4 (linking
		 * on what 3 made). 2 and 6, shorter, ran beside the chain.
		 * make reaps each job just after it ends. */
		.name = "make -j2, longest chain 3 then 4",
		.procs =
			{
				{1, 0, -1, 0, 100, NULL},
				{2, 0, 1, 1, 30, NULL},
				{3, 0, 1, 2, 50, NULL},
				{5, 0, 3, 4, 48, NULL},
				{6, 0, 1, 31, 45, NULL},
				{4, 0, 1, 51, 90, NULL},
			},
		.waits = {{1, 2, 31}, {3, 5, 48}, {1, 6, 46}, {1, 3, 51}, {1, 4, 91}},
		.steps = "1:0-2 3:2-4 5:4-48 3:48-50 1:50-51 4:51-90 1:90-100",
		.start = 0,
		.end = 100,
	},
	{
		/* sh (1) runs a | b | c (2, 3, 4) and waits for them; the
		 * last stage ends last. */
		.name = "pipeline",
		.procs =
			{
				{1, 0, -1, 0, 20, NULL},
				{2, 0, 1, 1, 10, NULL},
				{3, 0, 1, 2, 15, NULL},
				{4, 0, 1, 3, 18, NULL},
			},
		.waits = {{1, 2, 10}, {1, 3, 15}, {1, 4, 18}},
		.steps = "1:0-3 4:3-18 1:18-20",
		.start = 0,
		.end = 20,
	},
	{
		/* 2 forks 3 and ends; 3, an orphan nobody in the trace
		 * reaps (the collector does, as subreaper), runs on after
		 * the root (1) ended. It ended last: the path is the
		 * ancestors' time up to the forks that made it, then its
		 * life. */
		.name = "orphan outlives its parent",
		.procs =
			{
				{1, 0, -1, 0, 6, NULL},
				{2, 0, 1, 1, 5, NULL},
				{3, 0, 2, 2, 20, NULL},
			},
		.waits = {{1, 2, 5}},
		.steps = "1:0-1 2:1-2 3:2-20",
		.start = 0,
		.end = 20,
	},
	{
		/* The root works on after its only child: it ends last,
		 * and its own time is most of the path. */
		.name = "root ends last",
		.procs =
			{
				{1, 0, -1, 0, 10, NULL},
				{2, 0, 1, 1, 3, NULL},
			},
		.waits = {{1, 2, 3}},
		.steps = "1:0-1 2:1-3 1:3-10",
		.start = 0,
		.end = 10,
	},
	{
		/* 1 waits for 3 (ended at 8), works until 12, then reaps 2
		 * (ended at 5) at once: the late wait does not make 2 the
		 * one it waited for. 4, a background job 1 never waits for,
		 * ended at 11, within 1's work: not on the path either. */
		.name = "waits that reap late",
		.procs =
			{
				{1, 0, -1, 0, 13, NULL},
				{2, 0, 1, 1, 5, NULL},
				{3, 0, 1, 1, 8, NULL},
				{4, 0, 1, 2, 11, NULL},
			},
		.waits = {{1, 3, 8}, {1, 2, 12}},
		.steps = "1:0-1 3:1-8 1:8-13",
		.start = 0,
		.end = 13,
	},
	{
		/* Unknown ends: 2's end is unknown but 1 reaped it at 7 (its
		 * end for the path); 3's is unknown and nobody reaped it
		 * (1 recorded no wait for it): it cannot be placed. 5, the
		 * child of another root, never ended as far as anyone knows:
		 * not the last to end. */
		.name = "unknown ends",
		.procs =
			{
				{1, 0, -1, 0, 10, NULL},
				{2, 0, 1, 1, -1, NULL},
				{3, 0, 1, 2, -1, NULL},
				{4, 0, -1, 0, 9, NULL},
				{5, 0, 4, 1, -1, NULL},
			},
		.waits = {{1, 2, 7}},
		.steps = "1:0-1 2:1-7 1:7-10",
		.start = 0,
		.end = 10,
	},
	{
		/* A process that recorded no wait at all (no agent in it,
		 * or a file without wait marks): all its children may be
		 * what it waited for; the last to end is. */
		.name = "no wait records",
		.procs =
			{
				{1, 0, -1, 0, 10, NULL},
				{2, 0, 1, 1, 4, NULL},
				{3, 0, 1, 2, 8, NULL},
			},
		.steps = "1:0-2 3:2-8 1:8-10",
		.start = 0,
		.end = 10,
	},
	{
		/* A multi-host run: mpirun (1) on the head runs ssh (2),
		 * whose child in the trace is the node's root (1000001,
		 * host pid 1, on node1), whose child is the rank
		 * (1000007, host pid 7). ssh recorded a wait for a helper
		 * (3, before the node started: on the path): the remote
		 * root is on the path all the same, unreaped. A
		 * process of the head with host pid 7 (7) is no rank. */
		.name = "multi-host, a node root under its ssh",
		.procs =
			{
				{1, 0, -1, 0, 100, NULL},
				{2, 0, 1, 1, 99, NULL},
				{3, 0, 2, 1, 2, NULL},
				{7, 0, 1, 1, 3, NULL},
				{1000001, 1, 2, 3, 98, "node1"},
				{1000007, 7, 1000001, 4, 97, "node1"},
			},
		.waits = {{2, 3, 2}, {1, 7, 3}, {1000001, 7, 97}, {1, 2, 99}},
		.steps = "1:0-1 3:1-2 2:2-3 1000001:3-4 1000007:4-97 1000001:97-98 2:98-99 "
			 "1:99-100",
		.start = 0,
		.end = 100,
	},
	{
		/* A reused pid: 1 ran two children with host pid 50 (trace
		 * pids 50 and 1000050); its waits name 50 twice, and each
		 * names the one running then. Only the second was waited
		 * for long (1 did nothing else from 20 to 40). */
		.name = "reused host pid",
		.procs =
			{
				{1, 0, -1, 0, 41, NULL},
				{50, 0, 1, 1, 10, NULL},
				{1000050, 50, 1, 20, 40, NULL},
				{9, 0, 1, 11, 39, NULL},
			},
		.waits = {{1, 50, 10}, {1, 50, 40}},
		.steps = "1:0-1 50:1-10 1:10-20 1000050:20-40 1:40-41",
		.start = 0,
		.end = 41,
	},
};

/* A chain of n processes, each forking the next at its start + 1 and
 * reaping it 1 before its own end: the path goes down the whole chain
 * and back up. */
static void check_deep_chain(size_t n)
{
	critpath *cp = critpath_new();
	const critpath_step *st;
	size_t ns;

	MUST(cp != NULL);
	for (size_t i = 0; i < n; i++) {
		int64_t pid = (int64_t)i + 1;

		MUST(critpath_add_process(cp, pid, i == 0 ? -1 : pid - 1, (int64_t)i,
					  (int64_t)(4 * n - i), "link") == 0);
		if (i + 1 < n)
			MUST(critpath_add_wait(cp, pid, pid + 1, (int64_t)(4 * n - i - 1)) == 0);
	}
	CHECK_INT(critpath_compute(cp), ==, 0);
	ns = critpath_steps(cp, &st);
	CHECK_UINT(ns, ==, 2 * n - 1);
	CHECK_INT(critpath_start_ns(cp), ==, 0);
	CHECK_INT(critpath_end_ns(cp), ==, 4 * n);
	if (ns == 2 * n - 1) {
		CHECK_INT(st[n - 1].pid, ==, n);
		CHECK_INT(st[0].pid, ==, 1);
		CHECK_INT(st[ns - 1].pid, ==, 1);
	}
	check_tiles("deep chain", cp);
	critpath_free(cp);
}

/* make with n jobs one after another, each [10k, 10k + 15) (overlapping
 * the next), but job n/2 runs 10n longer, and make waits for each at
 * its end: the path is make's, the chain of jobs before the slow one,
 * the slow one, and make's time after it. */
static void check_wide_make(size_t n)
{
	critpath *cp = critpath_new();
	const critpath_step *st;
	int64_t slow = (int64_t)n / 2 + 2, total = 30 * (int64_t)n;
	size_t ns;

	MUST(cp != NULL);
	MUST(critpath_add_process(cp, 1, -1, 0, total, "make") == 0);
	for (int64_t k = 2; k < (int64_t)n + 2; k++) {
		int64_t end = 10 * k + 15 + (k == slow ? 10 * (int64_t)n : 0);

		MUST(critpath_add_process(cp, k, 1, 10 * k, end, "cc") == 0);
		MUST(critpath_add_wait(cp, 1, k, end) == 0);
	}
	CHECK_INT(critpath_compute(cp), ==, 0);
	ns = critpath_steps(cp, &st);
	/* make, then every other job up to the slow one with make's gaps
	 * between them, the slow one, make. */
	CHECK_UINT(ns, ==, 2 * (size_t)(slow / 2) + 1);
	if (ns >= 2) {
		CHECK_INT(st[ns - 2].pid, ==, slow);
		CHECK_INT(st[ns - 2].start_ns, ==, 10 * slow);
		CHECK_INT(st[ns - 1].pid, ==, 1);
		CHECK_INT(st[ns - 1].end_ns, ==, total);
	}
	check_tiles("wide make", cp);
	critpath_free(cp);
}

int main(void)
{
	critpath *cp = critpath_new();
	struct timespec t0, t1;
	double ms;

	MUST(cp != NULL);
	CHECK_INT(critpath_compute(cp), ==, -ENOENT);
	/* A process without a start is no tree to walk. */
	MUST(critpath_add_process(cp, 1, -1, -1, 5, "x") == 0);
	CHECK_INT(critpath_compute(cp), ==, -ENOENT);
	critpath_free(cp);
	critpath_free(NULL);

	/* A broken file's cycle of parents ends the walk all the same. */
	cp = critpath_new();
	MUST(cp != NULL);
	MUST(critpath_add_process(cp, 1, 2, 0, 10, "a") == 0);
	MUST(critpath_add_process(cp, 2, 1, 0, 10, "b") == 0);
	MUST(critpath_add_process(cp, 3, 2, 1, 10, "c") == 0);
	CHECK_INT(critpath_compute(cp), ==, 0);
	check_tiles("cycle", cp);
	critpath_free(cp);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_case(&cases[i]);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	check_deep_chain(40000);
	check_wide_make(40000);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	printf("40,000 processes deep and wide: %.1f ms\n", ms);
	/* Linear after the sorts: a few ms; a walk quadratic in the
	 * processes would take seconds. */
	CHECK_MSG(ms < 2000, "%.1f ms", ms);
	return check_done("test_critpath");
}
