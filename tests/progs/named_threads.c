/*
 * named_threads: three threads name themselves worker-0..2 with
 * pthread_setname_np and meet at a barrier (so all three are alive at once
 * and have distinct tids), then end; main joins them and exits 0.
 */
#include <pthread.h>

#include "internal.h"

#define NTHREADS 3

static pthread_barrier_t barrier;

static void *worker_main(void *arg)
{
	char name[16];

	snprintf(name, sizeof(name), "worker-%ld", (long)arg);
	if (pthread_setname_np(pthread_self(), name) != 0)
		tp_die("pthread_setname_np");
	pthread_barrier_wait(&barrier);
	return NULL;
}

int main(void)
{
	pthread_t th[NTHREADS];
	long i;

	pthread_barrier_init(&barrier, NULL, NTHREADS + 1);
	for (i = 0; i < NTHREADS; i++) {
		if (pthread_create(&th[i], NULL, worker_main, (void *)i) != 0)
			tp_die("pthread_create");
	}
	pthread_barrier_wait(&barrier);
	for (i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	printf("named_threads ok\n");
	return 0;
}
