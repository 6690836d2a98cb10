/*
 * killself SIGNO: restores the default disposition of SIGNO and sends it to
 * itself, so the process dies from it. Used for forktrace's 128+N exit code.
 */
#include "internal.h"

int main(int argc, char **argv)
{
	int sig;

	if (argc != 2) {
		fprintf(stderr, "usage: killself SIGNO\n");
		return TP_FAIL;
	}
	sig = (int)strtol(argv[1], NULL, 10);
	tp_no_core();
	signal(sig, SIG_DFL);
	fflush(NULL);
	kill(getpid(), sig);
	/* Only a signal that does not kill gets here. */
	fprintf(stderr, "killself: still alive after signal %d\n", sig);
	return TP_FAIL;
}
