/*
 * main_named [exec]: names its main thread "ft-main" with ft_thread_name
 * (the README's example) and exits 0. With "exec": names it with
 * prctl(PR_SET_NAME) instead, then execs exit_with 0, whose image has
 * its own name again.
 */
#include <sys/prctl.h>

#include <forktrace.h>

#include "internal.h"

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "exec") == 0) {
		char path[PATH_MAX];
		char *cargv[] = {(char *)"exit_with", (char *)"0", NULL};

		if (prctl(PR_SET_NAME, "before-exec", 0, 0, 0) != 0)
			tp_die("prctl PR_SET_NAME");
		tp_sibling(path, sizeof(path), "exit_with");
		execv(path, cargv);
		tp_die("execv exit_with");
	}
	ft_thread_name("ft-main");
	return 0;
}
