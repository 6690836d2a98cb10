/*
 * chain_a -> chain_b -> chain_c: one process, three exec images. Built three
 * times with TP_STAGE 0, 1, 2. Each stage checks the exact argv it was given
 * (including an argument with a space and an empty one) before it execs the
 * next; the last stage exits 5.
 */
#include "internal.h"

#ifndef TP_STAGE
#error "build with -DTP_STAGE=0, 1 or 2"
#endif

static void expect_argv(int argc, char **argv, const char *const *want, int nwant)
{
	int i;

	if (argc != nwant)
		goto bad;
	for (i = 0; i < nwant; i++) {
		if (strcmp(argv[i] ? argv[i] : "(null)", want[i]) != 0)
			goto bad;
	}
	return;
bad:
	fprintf(stderr, "chain stage %d: unexpected argv:", TP_STAGE);
	for (i = 0; i < argc; i++)
		fprintf(stderr, " [%s]", argv[i]);
	fprintf(stderr, "\n");
	exit(TP_FAIL);
}

int main(int argc, char **argv)
{
	char next[PATH_MAX];

	switch (TP_STAGE) {
	case 0: {
		static const char *const want[] = {"start"};
		char *nargv[] = {"chain_b", "x y", "--level=2", NULL};

		/* argv[0] is whatever path the test used; check the rest. */
		expect_argv(argc - 1, argv + 1, want, 1);
		tp_sibling(next, sizeof(next), "chain_b");
		execv(next, nargv);
		tp_die("execv chain_b");
		break;
	}
	case 1: {
		static const char *const want[] = {"chain_b", "x y", "--level=2"};
		char *nargv[] = {"chain_c", "z", "", "end", NULL};

		expect_argv(argc, argv, want, 3);
		tp_sibling(next, sizeof(next), "chain_c");
		execv(next, nargv);
		tp_die("execv chain_c");
		break;
	}
	default: {
		static const char *const want[] = {"chain_c", "z", "", "end"};

		expect_argv(argc, argv, want, 4);
		printf("chain ok\n");
		return 5;
	}
	}
	return TP_FAIL;
}
