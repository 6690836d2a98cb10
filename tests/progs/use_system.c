/*
 * use_system: system("exit 3") and system("<dir>/exit_with 9"); checks the
 * statuses system() returns.
 */
#include "internal.h"

int main(void)
{
	char path[PATH_MAX], cmd[PATH_MAX + 16];
	int st;

	st = system("exit 3");
	tp_expect_code(st, 3, "system(exit 3)");
	tp_sibling(path, sizeof(path), "exit_with");
	snprintf(cmd, sizeof(cmd), "%s 9", path);
	st = system(cmd);
	tp_expect_code(st, 9, "system(exit_with 9)");
	printf("system ok\n");
	return 0;
}
