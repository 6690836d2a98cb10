/*
 * exit_with CODE [SLEEP_MS]: sleeps SLEEP_MS milliseconds if given, then
 * exits with CODE. The target of most exec and spawn tests: a distinct code
 * per call site lets a test tell the children apart in the trace.
 */
#include <time.h>

#include "internal.h"

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: exit_with CODE [SLEEP_MS]\n");
		return TP_FAIL;
	}
	if (argc == 3) {
		long ms = strtol(argv[2], NULL, 10);
		struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
	return (int)strtol(argv[1], NULL, 10);
}
