/*
 * spill_tree: process trees for the tests of what agents write when they
 * cannot reach forktrace (tests/e2e/test_adv_recovery.py).
 *
 *   spill_tree hold N PIDFILE
 *       N children (exec'd images of this program) alive at the same
 *       time, each holding its connection to forktrace, until all of them
 *       have started; prints the RLIMIT_NOFILE soft limit this program
 *       got, writes the children's pids to PIDFILE.
 *   spill_tree crash NBEFORE NLONG NAFTER DIR
 *       NLONG long children (exec'd, they wait for DIR/go) and NBEFORE
 *       short ones; then DIR/ready appears and the program waits for
 *       DIR/go (the test kills forktrace in between); then NAFTER short
 *       children. Short children alternate: an exec'd image that exits 3,
 *       a fork child that exits 4 without exec. Writes "<pid> <phase>"
 *       lines (root, long, before, after) to DIR/pids, renamed into place
 *       as its last act.
 */
#include <fcntl.h>
#include <time.h>

#include "internal.h"

static char self[PATH_MAX];

static void wait_for_file(const char *path)
{
	struct timespec ts = {0, 2000000};

	while (access(path, F_OK) < 0)
		nanosleep(&ts, NULL);
}

static pid_t start(char *const argv[])
{
	pid_t pid = fork();

	if (pid < 0)
		tp_die("fork");
	if (pid == 0) {
		execv(self, argv);
		_exit(TP_FAIL);
	}
	return pid;
}

/* A short child: exec'd (exits 3) or only forked (exits 4), by i. */
static pid_t start_short(int i)
{
	char *argv[] = {"spill_tree", "child-short", NULL};
	pid_t pid;

	if (i % 2 == 0)
		return start(argv);
	pid = fork();
	if (pid < 0)
		tp_die("fork");
	if (pid == 0)
		_exit(4); /* not exit: it would flush the parent's buffered pids again */
	return pid;
}

static int hold(int n, const char *pidfile)
{
	int ready[2], gate[2];
	pid_t *pids = calloc((size_t)n, sizeof(*pids));
	struct rlimit rl;
	char rfd[16], gfd[16];
	FILE *f;

	if (!pids || pipe(ready) < 0 || pipe(gate) < 0)
		tp_die("pipe");
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		tp_die("getrlimit");
	printf("nofile %llu\n", (unsigned long long)rl.rlim_cur);
	fflush(stdout);
	snprintf(rfd, sizeof(rfd), "%d", ready[1]);
	snprintf(gfd, sizeof(gfd), "%d", gate[0]);
	for (int i = 0; i < n; i++) {
		char *argv[] = {"spill_tree", "child-hold", rfd, gfd, NULL};

		pids[i] = fork();
		if (pids[i] < 0)
			tp_die("fork");
		if (pids[i] == 0) {
			close(ready[0]);
			close(gate[1]);
			execv(self, argv);
			_exit(TP_FAIL);
		}
	}
	close(ready[1]);
	close(gate[0]);
	/* Every child has started (and its agent said hello) before any
	 * ends. */
	for (int got = 0; got < n;) {
		char c[64];
		ssize_t r = read(ready[0], c, sizeof(c));

		if (r <= 0)
			tp_die("a child did not start");
		got += (int)r;
	}
	close(gate[1]);
	f = fopen(pidfile, "w");
	if (!f)
		tp_die(pidfile);
	for (int i = 0; i < n; i++) {
		tp_expect_code(tp_wait(pids[i]), 0, "held child");
		fprintf(f, "%d\n", (int)pids[i]);
	}
	fclose(f);
	return 0;
}

static int crash(int nbefore, int nlong, int nafter, const char *dir)
{
	char go[PATH_MAX], ready[PATH_MAX], pidfile[PATH_MAX], tmp[PATH_MAX];
	char *long_argv[] = {"spill_tree", "child-long", go, NULL};
	pid_t *pids = calloc((size_t)(nbefore + nlong + nafter), sizeof(*pids));
	int np = 0;
	FILE *f;

	snprintf(go, sizeof(go), "%s/go", dir);
	snprintf(ready, sizeof(ready), "%s/ready", dir);
	snprintf(pidfile, sizeof(pidfile), "%s/pids", dir);
	snprintf(tmp, sizeof(tmp), "%s/pids.tmp", dir);
	f = fopen(tmp, "w");
	if (!pids || !f)
		tp_die("setup");
	fprintf(f, "%d root\n", (int)getpid());
	for (int i = 0; i < nlong; i++) {
		pids[np] = start(long_argv);
		fprintf(f, "%d long\n", (int)pids[np++]);
	}
	for (int i = 0; i < nbefore; i++) {
		pid_t pid = start_short(i);

		tp_expect_code(tp_wait(pid), i % 2 ? 4 : 3, "short child");
		fprintf(f, "%d before\n", (int)pid);
	}
	close(open(ready, O_WRONLY | O_CREAT, 0600));
	wait_for_file(go);
	for (int i = 0; i < nafter; i++) {
		pid_t pid = start_short(i);

		tp_expect_code(tp_wait(pid), i % 2 ? 4 : 3, "short child");
		fprintf(f, "%d after\n", (int)pid);
	}
	for (int i = 0; i < np; i++)
		tp_expect_code(tp_wait(pids[i]), 0, "long child");
	if (fclose(f) != 0 || rename(tmp, pidfile) < 0)
		tp_die(pidfile);
	return 0;
}

int main(int argc, char **argv)
{
	tp_sibling(self, sizeof(self), "spill_tree");
	if (argc == 4 && strcmp(argv[1], "hold") == 0)
		return hold(atoi(argv[2]), argv[3]);
	if (argc == 6 && strcmp(argv[1], "crash") == 0)
		return crash(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), argv[5]);
	if (argc == 4 && strcmp(argv[1], "child-hold") == 0) {
		char c;

		if (write(atoi(argv[2]), "x", 1) != 1)
			tp_die("write");
		/* Until the parent lets every child go. */
		while (read(atoi(argv[3]), &c, 1) > 0)
			;
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "child-long") == 0) {
		wait_for_file(argv[2]);
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "child-short") == 0)
		return 3;
	fprintf(stderr, "usage: spill_tree hold N PIDFILE | crash NBEFORE NLONG NAFTER DIR\n");
	return 2;
}
