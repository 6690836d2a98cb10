/*
 * use_popen: reads a line through popen("...", "r") whose shell exits 4, and
 * writes through popen("cat > popen_out.txt", "w"); checks both pclose
 * statuses and the file the second one wrote (in the current directory).
 */
#include "internal.h"

int main(void)
{
	char line[128] = "";
	FILE *f;
	int st;

	f = popen("echo hello-popen; exit 4", "r");
	if (!f)
		tp_die("popen r");
	if (!fgets(line, sizeof(line), f))
		tp_die("fgets from popen");
	st = pclose(f);
	tp_expect_code(st, 4, "pclose(r)");
	if (strcmp(line, "hello-popen\n") != 0)
		tp_die("popen read the wrong line");

	f = popen("cat > popen_out.txt", "w");
	if (!f)
		tp_die("popen w");
	fputs("written-through-popen\n", f);
	st = pclose(f);
	tp_expect_code(st, 0, "pclose(w)");

	f = fopen("popen_out.txt", "r");
	if (!f || !fgets(line, sizeof(line), f) || strcmp(line, "written-through-popen\n") != 0)
		tp_die("popen_out.txt does not hold what was written");
	fclose(f);
	printf("popen read: hello-popen\n");
	return 0;
}
