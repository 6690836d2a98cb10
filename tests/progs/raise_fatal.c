/*
 * raise_fatal SIGNO: sends itself SIGNO with raise() (SIGABRT, SIGBUS,
 * SIGFPE, SIGILL: signals the agent reports) without touching the
 * disposition, so the agent's handler runs. The agent must report the
 * signal, restore the default action and raise it again: the process
 * dies from SIGNO as it would untraced (STYLE "never" rule 13). Reaching
 * the end means the signal was swallowed: exit 100.
 */
#include "internal.h"

int main(int argc, char **argv)
{
	int sig;

	if (argc != 2) {
		fprintf(stderr, "usage: raise_fatal SIGNO\n");
		return TP_FAIL;
	}
	sig = (int)strtol(argv[1], NULL, 10);
	tp_no_core();
	fflush(NULL);
	raise(sig);
	fprintf(stderr, "raise_fatal: still alive after signal %d\n", sig);
	return TP_FAIL;
}
