/*
 * In-process events under test (tests/e2e/test_events.py). One program,
 * several scenarios, each recording a number of events the test knows:
 *
 *   ev_prog regions THREADS OUTER INNER
 *       THREADS threads (plus main) named "w<i>"; each records OUTER
 *       regions "outer" holding INNER regions "inner" each, an instant
 *       "tick" per outer region and a counter "progress" = 0..OUTER-1.
 *   ev_prog die N SIGNAL
 *       records N regions "r", then dies of SIGNAL (9: kill itself with
 *       SIGKILL, before any flush; 11: a segmentation fault).
 *   ev_prog forkexec THREADS N
 *       THREADS threads record N regions "t<i>" each while the main thread
 *       forks a child that records N regions "child" and exits, and then
 *       execs `ev_prog regions 0 N 0` (N "outer" regions).
 *   ev_prog clock K
 *       K processes (forked, 10 ms apart) each record 5 instants "mark",
 *       each between two reads of CLOCK_MONOTONIC, and print
 *       "mark <pid> <i> <ns before> <ns after>" for each.
 *   ev_prog phases N GOFILE PIDFILE
 *       records N regions "before", writes its pid to PIDFILE (so the
 *       test knows they are recorded), waits until GOFILE exists (the
 *       test kills the collector meanwhile), records N regions "after"
 *       and exits.
 *   ev_prog exitrun THREADS
 *       THREADS threads record regions "busy" without end while the main
 *       thread waits 100 ms, prints how many each had finished, and calls
 *       exit(): the threads are still recording when the process ends.
 *   ev_prog flood THREADS N
 *       THREADS threads record N instants "e" each as fast as they can.
 *
 * Every scenario prints what it did, so a traced and an untraced run can
 * be compared line by line.
 */
#include <forktrace.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long outer_n, inner_n;

static void record_regions(void)
{
	for (long i = 0; i < outer_n; i++) {
		ft_region_begin("outer");
		ft_instant("tick");
		for (long j = 0; j < inner_n; j++) {
			FT_REGION("inner");
		}
		ft_counter("progress", (double)i);
		ft_region_end();
	}
}

static void *regions_thread(void *arg)
{
	char name[16];

	snprintf(name, sizeof(name), "w%ld", (long)(size_t)arg);
	ft_thread_name(name);
	record_regions();
	return NULL;
}

static int regions(long threads)
{
	pthread_t th[64];

	for (long i = 0; i < threads && i < 64; i++)
		pthread_create(&th[i], NULL, regions_thread, (void *)(size_t)i);
	record_regions();
	for (long i = 0; i < threads && i < 64; i++)
		pthread_join(th[i], NULL);
	printf("regions: %ld threads x %ld outer x %ld inner\n", threads + 1, outer_n, inner_n);
	return 0;
}

static int die(long n, int sig)
{
	for (long i = 0; i < n; i++) {
		ft_region_begin("r");
		ft_region_end();
	}
	printf("recorded %ld\n", n);
	fflush(stdout);
	if (sig == SIGSEGV) {
		volatile int *p = NULL;
		*p = 1;
	}
	kill(getpid(), sig);
	return 1;
}

static long fe_n;

static void *fe_thread(void *arg)
{
	char name[16];

	snprintf(name, sizeof(name), "t%ld", (long)(size_t)arg);
	for (long i = 0; i < fe_n; i++) {
		ft_region_begin(name);
		ft_region_end();
	}
	return NULL;
}

static int forkexec(const char *self, long threads)
{
	pthread_t th[16];
	char n[32];
	pid_t pid;
	int st;

	for (long i = 0; i < threads && i < 16; i++)
		pthread_create(&th[i], NULL, fe_thread, (void *)(size_t)i);
	pid = fork();
	if (pid == 0) {
		for (long i = 0; i < fe_n; i++) {
			ft_region_begin("child");
			ft_region_end();
		}
		_exit(0);
	}
	waitpid(pid, &st, 0);
	for (long i = 0; i < threads && i < 16; i++)
		pthread_join(th[i], NULL);
	printf("forkexec: child exit %d\n", WEXITSTATUS(st));
	fflush(stdout);
	snprintf(n, sizeof(n), "%ld", fe_n);
	execl(self, "ev_prog", "regions", "0", n, "0", (char *)NULL);
	perror("execl");
	return 1;
}

static int clock_marks(long k)
{
	for (long i = 0; i < k; i++) {
		pid_t pid = fork();

		if (pid == 0) {
			struct timespec a, b;

			for (int j = 0; j < 5; j++) {
				clock_gettime(CLOCK_MONOTONIC, &a);
				ft_instant("mark");
				clock_gettime(CLOCK_MONOTONIC, &b);
				printf("mark %d %d %lld %lld\n", (int)getpid(), j,
				       (long long)a.tv_sec * 1000000000LL + a.tv_nsec,
				       (long long)b.tv_sec * 1000000000LL + b.tv_nsec);
			}
			fflush(stdout);
			_exit(0);
		}
		waitpid(pid, NULL, 0);
		usleep(10000);
	}
	return 0;
}

static long flood_n;

static void *flood_thread(void *arg)
{
	(void)arg;
	for (long i = 0; i < flood_n; i++)
		ft_instant("e");
	return NULL;
}

static int flood(long threads)
{
	pthread_t th[64];

	for (long i = 0; i < threads && i < 64; i++)
		pthread_create(&th[i], NULL, flood_thread, NULL);
	for (long i = 0; i < threads && i < 64; i++)
		pthread_join(th[i], NULL);
	printf("flood: %ld x %ld\n", threads, flood_n);
	return 0;
}

static long exitrun_done[16];

static void *exitrun_thread(void *arg)
{
	long *done = arg;

	for (;;) {
		ft_region_begin("busy");
		ft_region_end();
		__atomic_add_fetch(done, 1, __ATOMIC_RELEASE);
		usleep(20);
	}
	return NULL;
}

static int exitrun(long threads)
{
	pthread_t th;

	for (long i = 0; i < threads && i < 16; i++)
		pthread_create(&th, NULL, exitrun_thread, &exitrun_done[i]);
	usleep(100000);
	for (long i = 0; i < threads && i < 16; i++)
		printf("thread %ld done %ld\n", i,
		       __atomic_load_n(&exitrun_done[i], __ATOMIC_ACQUIRE));
	fflush(stdout);
	exit(0);
}

static int phases(long n, const char *go, const char *pidfile)
{
	FILE *f;

	for (long i = 0; i < n; i++) {
		ft_region_begin("before");
		ft_region_end();
	}
	f = fopen(pidfile, "w");
	if (!f)
		return 3;
	fprintf(f, "%d\n", (int)getpid());
	fclose(f);
	while (access(go, F_OK) != 0)
		usleep(10000);
	for (long i = 0; i < n; i++) {
		ft_region_begin("after");
		ft_region_end();
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "exitrun"))
		return exitrun(atol(argv[2]));
	if (argc == 5 && !strcmp(argv[1], "phases"))
		return phases(atol(argv[2]), argv[3], argv[4]);
	if (argc == 5 && !strcmp(argv[1], "regions")) {
		outer_n = atol(argv[3]);
		inner_n = atol(argv[4]);
		return regions(atol(argv[2]));
	}
	if (argc == 4 && !strcmp(argv[1], "die"))
		return die(atol(argv[2]), atoi(argv[3]));
	if (argc == 4 && !strcmp(argv[1], "forkexec")) {
		fe_n = atol(argv[3]);
		return forkexec("/proc/self/exe", atol(argv[2]));
	}
	if (argc == 3 && !strcmp(argv[1], "clock"))
		return clock_marks(atol(argv[2]));
	if (argc == 4 && !strcmp(argv[1], "flood")) {
		flood_n = atol(argv[3]);
		return flood(atol(argv[2]));
	}
	fprintf(stderr, "usage: ev_prog regions|die|forkexec|clock|flood ...\n");
	return 2;
}
