/*
 * name_main: a worker thread names the main thread "boss" with
 * pthread_setname_np (the main thread's pthread_t, which the agent did
 * not see start), and itself "worker"; exits 0.
 */
#include <pthread.h>

#include "internal.h"

static pthread_t main_th;

static void *worker(void *arg)
{
	(void)arg;
	if (pthread_setname_np(main_th, "boss") != 0 ||
	    pthread_setname_np(pthread_self(), "worker") != 0)
		tp_die("pthread_setname_np");
	return NULL;
}

int main(void)
{
	pthread_t th;

	main_th = pthread_self();
	if (pthread_create(&th, NULL, worker, NULL) != 0)
		tp_die("pthread_create");
	pthread_join(th, NULL);
	return 0;
}
