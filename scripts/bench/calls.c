/*
 * calls: the workload of the in-process events benchmark
 * (scripts/bench/events.py builds and runs it).
 *
 *   calls fib THREADS      22,700,000 instrumented calls in all: a unit of
 *                          work is fib(31) (4,356,617 calls) plus a loop of
 *                          1,318,383 calls of a small function, 5,675,000
 *                          calls; one thread runs the unit 4 times, or
 *                          each of 4 threads runs it once (the same total
 *                          work, split).
 *   calls fib 1 UNITS      one thread runs the unit UNITS times (1 to 64):
 *                          a smaller or larger trace of the same shape, for
 *                          quick checks of the writers
 *                          (scripts/bench/output.py --units).
 *   calls region N         N ft_region_begin/ft_region_end pairs in a loop.
 *
 * Built with -finstrument-functions (or -pg); only fib and small are
 * instrumented, so the count is exact: everything else here is marked
 * no_instrument_function. Prints what it did and the workload's own time,
 * measured around the workload with CLOCK_MONOTONIC, so that a tracer's
 * start-up and its writing of the trace after the program ends are not
 * counted:
 *
 *   calls=22700000 threads=1 ns=412345678 cpu_ns=410000000 parent_cpu_ns=300000000 maxrss_kb=5120
 *
 * cpu_ns is the process's CPU time (user + system, all threads) over the
 * same span: well below ns * threads means the workload waited (for a
 * tracer that could not keep up, or for a CPU). parent_cpu_ns is the
 * parent's over the same span: the tracer's, when the tracer started the
 * program. maxrss_kb is the program's peak RSS at its end.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "forktrace.h"

#define NOINST __attribute__((no_instrument_function))
/* Kept out of line (and not cloned) so that every call in the source is a
 * call in the binary, with its enter and exit hooks. */
#define CALLED __attribute__((noinline, noclone))

#define FIB_N 31
#define FIB_CALLS 4356617ull /* 2 * F(32) - 1 */
#define LOOP_CALLS 1318383ull
#define UNIT_CALLS (FIB_CALLS + LOOP_CALLS) /* 5,675,000 */
#define UNITS 4
#define MAX_UNITS 64

CALLED unsigned long fib(unsigned n)
{
	unsigned long r;

	if (n < 2)
		return n;
	r = fib(n - 1) + fib(n - 2);
	/* Not a tail call either: with -pg (no exit hook) gcc would turn the
	 * second call into a loop. */
	__asm__ volatile("" : "+r"(r));
	return r;
}

CALLED unsigned long small(unsigned long x)
{
	/* An empty asm keeps the call from being computed away. */
	__asm__ volatile("" : "+r"(x));
	return x * 3 + 1;
}

static volatile unsigned long sink;

NOINST static void *unit(void *arg)
{
	unsigned long acc = fib(FIB_N);

	(void)arg;
	for (unsigned long i = 0; i < LOOP_CALLS; i++)
		acc += small(i);
	sink = acc;
	return NULL;
}

NOINST static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/* CPU time of the whole process (all its threads), user and system. */
NOINST static unsigned long long cpu_ns(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ((unsigned long long)ru.ru_utime.tv_sec + (unsigned long long)ru.ru_stime.tv_sec) *
		       1000000000ull +
	       ((unsigned long long)ru.ru_utime.tv_usec + (unsigned long long)ru.ru_stime.tv_usec) *
		       1000ull;
}

/* The process's peak resident set so far (KiB): its share of a tracer's
 * peak RSS as wait4 reports it (the larger of the tracer's and its
 * waited-for children's). */
NOINST static long maxrss_kb(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

/* CPU time of the parent process (all its threads), from /proc (clock
 * ticks: 10 ms). Under a tracer that starts the program itself (forktrace
 * run, uftrace record) the parent is the tracer, which takes the data
 * while the program runs. */
NOINST static unsigned long long parent_cpu_ns(void)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)getppid());
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* Fields 14 and 15 (utime, stime) follow the command name, which
	 * ends at the last ')'. */
	p = strrchr(buf, ')');
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return 0;
	return (ut + st) * (1000000000ull / (unsigned long long)sysconf(_SC_CLK_TCK));
}

NOINST static void regions(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++) {
		ft_region_begin("r");
		ft_region_end();
	}
}

NOINST int main(int argc, char **argv)
{
	unsigned long long t0, t1, c0, c1, p0, p1;

	if ((argc == 3 || argc == 4) && strcmp(argv[1], "fib") == 0) {
		int threads = atoi(argv[2]);
		int units = argc == 4 ? atoi(argv[3]) : UNITS;
		pthread_t tids[UNITS];

		if (threads != 1 && threads != UNITS) {
			fprintf(stderr, "calls: THREADS is 1 or %d\n", UNITS);
			return 2;
		}
		if (units < 1 || units > MAX_UNITS || (threads != 1 && units != UNITS)) {
			fprintf(stderr, "calls: UNITS is 1 to %d, with THREADS 1\n", MAX_UNITS);
			return 2;
		}
		p0 = parent_cpu_ns();
		c0 = cpu_ns();
		t0 = now_ns();
		if (threads == 1) {
			for (int i = 0; i < units; i++)
				unit(NULL);
		} else {
			for (int i = 0; i < UNITS; i++)
				if (pthread_create(&tids[i], NULL, unit, NULL) != 0) {
					perror("pthread_create");
					return 1;
				}
			for (int i = 0; i < UNITS; i++)
				pthread_join(tids[i], NULL);
		}
		t1 = now_ns();
		c1 = cpu_ns();
		p1 = parent_cpu_ns();
		printf("calls=%llu threads=%d ns=%llu cpu_ns=%llu parent_cpu_ns=%llu maxrss_kb=%ld\n",
		       (unsigned long long)units * UNIT_CALLS, threads, t1 - t0, c1 - c0, p1 - p0,
		       maxrss_kb());
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "region") == 0) {
		unsigned long n = strtoul(argv[2], NULL, 10);

		p0 = parent_cpu_ns();
		c0 = cpu_ns();
		t0 = now_ns();
		regions(n);
		t1 = now_ns();
		c1 = cpu_ns();
		p1 = parent_cpu_ns();
		printf("regions=%lu ns=%llu cpu_ns=%llu parent_cpu_ns=%llu maxrss_kb=%ld\n", n,
		       t1 - t0, c1 - c0, p1 - p0, maxrss_kb());
		return 0;
	}
	fprintf(stderr, "usage: calls fib 1|4 | calls fib 1 UNITS | calls region N\n");
	return 2;
}
