/*
 * restricted MODE ...: processes that give up rights, for
 * tests/e2e/test_adv_restricted.py.
 *
 * drop UID: gives up root for UID (groups, gid and uid), then starts two
 *   children that exec this program as "leaf"; waits, exits 0.
 * leaf: forks a child that execs /bin/true, waits, exits 7.
 * sandbox: starts two children that each install a seccomp filter under
 *   which socket, connect, mkdir(at) and open(at) other than for reading
 *   fail with ENOSYS (as man-db's sandbox does), close every fd above 2,
 *   then fork a child that exits 5, one that execs /bin/true, and
 *   posix_spawn /bin/true; each waits and exits 6.
 * libseccomp: the same, with the filter made and loaded by libseccomp
 *   (exits 77 when built without it).
 * killsock N: installs a seccomp filter that kills the process on
 *   socket() and connect() (as systemd's SystemCallFilter= does), then
 *   execs this program as "leaf" with N arguments of 100 bytes after it
 *   (a long argv makes the agent want a connection).
 * strict: forks a child that enters seccomp strict mode (read, write,
 *   exit and sigreturn only), writes "strict ok" and dies of SIGSEGV;
 *   waits, exits 0.
 * nspid: forks a child in a new pid namespace (its pid 1 there), which
 *   forks a grandchild that execs /bin/true, and exits 3; waits.
 * Every filter returns its action only for x86-64 system calls and lets
 * everything else through.
 */

#include <fcntl.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <spawn.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "internal.h"

static void wait_code(pid_t pid, int want)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		tp_die("waitpid");
	if (!WIFEXITED(st) || WEXITSTATUS(st) != want) {
		fprintf(stderr, "restricted: child %d: status 0x%x, expected exit %d\n", (int)pid,
			st, want);
		exit(TP_FAIL);
	}
}

static pid_t run_true(void)
{
	pid_t pid = fork();

	if (pid < 0)
		tp_die("fork");
	if (pid == 0) {
		execl("/bin/true", "true", (char *)NULL);
		_exit(TP_FAIL);
	}
	return pid;
}

static pid_t spawn_true(void)
{
	char *argv[] = {"true", NULL};
	pid_t pid;
	int err = posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ);

	if (err) {
		errno = err;
		tp_die("posix_spawn");
	}
	return pid;
}

#define NR_ACT(nr, act)                                                                            \
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, (act))

/* Installs a filter whose action for the listed system calls is act. */
static void install(unsigned act, const int *nrs, int n)
{
	struct sock_filter f[64];
	struct sock_fprog prog;
	int k = 0;

	f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, arch));
	f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, nr));
	for (int i = 0; i < n; i++) {
		struct sock_filter pair[] = {NR_ACT((unsigned)nrs[i], act)};

		f[k++] = pair[0];
		f[k++] = pair[1];
	}
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	prog.len = (unsigned short)k;
	prog.filter = f;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		tp_die("PR_SET_NO_NEW_PRIVS");
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0)
		tp_die("PR_SET_SECCOMP");
}

static int drop(const char *uid_s, const char *self)
{
	uid_t uid = (uid_t)atoi(uid_s);
	pid_t kids[2];

	if (setgroups(0, NULL) != 0 || setgid((gid_t)uid) != 0 || setuid(uid) != 0)
		tp_die("dropping privileges");
	if (getuid() != uid || geteuid() != uid)
		tp_die("still privileged");
	for (int i = 0; i < 2; i++) {
		kids[i] = fork();
		if (kids[i] < 0)
			tp_die("fork");
		if (kids[i] == 0) {
			execl(self, "restricted", "leaf", (char *)NULL);
			_exit(TP_FAIL);
		}
	}
	for (int i = 0; i < 2; i++)
		wait_code(kids[i], 7);
	printf("drop ok\n");
	return 0;
}

static int leaf(void)
{
	wait_code(run_true(), 0);
	return 7;
}

/*
 * man-db's sandbox, in short: socket, connect, mkdir(at), and open(at)
 * for anything but reading fail with ENOSYS (the loader still opens the
 * libraries of the images it execs).
 */
static void install_sandbox(void)
{
	const unsigned deny = SECCOMP_RET_ERRNO | ENOSYS;
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 6, 0), /* to [11] */
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_open, 7, 0),   /* to [13] */
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_socket, 9, 0), /* to [16] */
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_connect, 8, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mkdir, 7, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mkdirat, 6, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		/* [11] openat: flags are the third argument */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
		BPF_JUMP(BPF_JMP | BPF_JA, 1, 0, 0), /* to [14] */
		/* [13] open: the second */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
		/* [14] */
		BPF_STMT(BPF_ALU | BPF_AND | BPF_K, O_ACCMODE),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, O_RDONLY, 1, 0), /* to [17] */
		/* [16] */
		BPF_STMT(BPF_RET | BPF_K, deny),
		/* [17] */
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {(unsigned short)(sizeof(f) / sizeof(f[0])), f};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		tp_die("PR_SET_NO_NEW_PRIVS");
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0)
		tp_die("PR_SET_SECCOMP");
}

#if HAVE_LIBSECCOMP
#include <seccomp.h>

/* The same filter, made and loaded by libseccomp as man-db does (the
 * seccomp system call through syscall(), no prctl). */
static void install_libseccomp(void)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	const uint32_t deny = SCMP_ACT_ERRNO(ENOSYS);

	if (!ctx || seccomp_rule_add(ctx, deny, SCMP_SYS(socket), 0) ||
	    seccomp_rule_add(ctx, deny, SCMP_SYS(connect), 0) ||
	    seccomp_rule_add(ctx, deny, SCMP_SYS(mkdir), 0) ||
	    seccomp_rule_add(ctx, deny, SCMP_SYS(mkdirat), 0) ||
	    seccomp_rule_add(ctx, deny, SCMP_SYS(open), 1,
			     SCMP_A1(SCMP_CMP_MASKED_EQ, O_ACCMODE, O_WRONLY)) ||
	    seccomp_rule_add(ctx, deny, SCMP_SYS(open), 1,
			     SCMP_A1(SCMP_CMP_MASKED_EQ, O_ACCMODE, O_RDWR)) ||
	    seccomp_rule_add(ctx, deny, SCMP_SYS(openat), 1,
			     SCMP_A2(SCMP_CMP_MASKED_EQ, O_ACCMODE, O_WRONLY)) ||
	    seccomp_rule_add(ctx, deny, SCMP_SYS(openat), 1,
			     SCMP_A2(SCMP_CMP_MASKED_EQ, O_ACCMODE, O_RDWR)) ||
	    seccomp_load(ctx))
		tp_die("libseccomp");
	seccomp_release(ctx);
}
#else
static void install_libseccomp(void)
{
	fprintf(stderr, "restricted: built without libseccomp\n");
	exit(77);
}
#endif

static int sandbox(bool libseccomp)
{
	pid_t kids[2];

	for (int i = 0; i < 2; i++) {
		kids[i] = fork();
		if (kids[i] < 0)
			tp_die("fork");
		if (kids[i] == 0) {
			pid_t q;

			if (libseccomp)
				install_libseccomp();
			else
				install_sandbox();
			if (socket(AF_UNIX, SOCK_STREAM, 0) >= 0 || errno != ENOSYS ||
			    open("/dev/null", O_WRONLY) >= 0 || errno != ENOSYS)
				tp_die("the filter lets socket() or open() through");
			/* As a pipeline's child does before it execs. */
			closefrom(3);
			q = fork();
			if (q < 0)
				tp_die("fork");
			if (q == 0)
				_exit(5);
			wait_code(q, 5);
			wait_code(run_true(), 0);
			wait_code(spawn_true(), 0);
			_exit(6);
		}
	}
	for (int i = 0; i < 2; i++)
		wait_code(kids[i], 6);
	printf("sandbox ok\n");
	return 0;
}

static int killsock(int n, const char *self)
{
	static const int nrs[] = {SYS_socket, SYS_connect};
	char **av = calloc((size_t)n + 3, sizeof(*av));

	if (!av || n < 0)
		tp_die("calloc");
	av[0] = "restricted";
	av[1] = "leaf";
	for (int i = 0; i < n; i++) {
		av[2 + i] = malloc(128);
		if (!av[2 + i])
			tp_die("malloc");
		snprintf(av[2 + i], 128, "arg%04d-%090d", i, 0);
	}
	install(SECCOMP_RET_KILL_PROCESS, nrs, 2);
	execv(self, av);
	tp_die("execv");
	return TP_FAIL;
}

static int strict(void)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		tp_die("fork");
	if (pid == 0) {
		static const char msg[] = "strict ok\n";

		if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT, 0, 0, 0) != 0)
			_exit(TP_FAIL);
		if (write(1, msg, sizeof(msg) - 1)) {
		}
		*(volatile int *)0 = 0;
		syscall(SYS_exit, TP_FAIL);
	}
	if (waitpid(pid, &st, 0) != pid)
		tp_die("waitpid");
	if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGSEGV) {
		fprintf(stderr, "restricted: strict child: status 0x%x, expected SIGSEGV\n", st);
		return TP_FAIL;
	}
	return 0;
}

static int nspid(void)
{
	pid_t pid;

	if (unshare(CLONE_NEWPID) != 0)
		tp_die("unshare(CLONE_NEWPID)");
	pid = fork();
	if (pid < 0)
		tp_die("fork");
	if (pid == 0) {
		if (getpid() != 1)
			_exit(TP_FAIL);
		wait_code(run_true(), 0);
		_exit(3);
	}
	wait_code(pid, 3);
	printf("nspid ok\n");
	return 0;
}

int main(int argc, char **argv)
{
	char self[PATH_MAX];

	tp_sibling(self, sizeof(self), "restricted");
	if (argc == 3 && !strcmp(argv[1], "drop"))
		return drop(argv[2], self);
	if (argc >= 2 && !strcmp(argv[1], "leaf"))
		return leaf();
	if (argc == 2 && !strcmp(argv[1], "sandbox"))
		return sandbox(false);
	if (argc == 2 && !strcmp(argv[1], "libseccomp"))
		return sandbox(true);
	if (argc == 3 && !strcmp(argv[1], "killsock"))
		return killsock(atoi(argv[2]), self);
	if (argc == 2 && !strcmp(argv[1], "strict"))
		return strict();
	if (argc == 2 && !strcmp(argv[1], "nspid"))
		return nspid();
	fprintf(stderr,
		"usage: restricted drop UID | leaf | sandbox | libseccomp | killsock N | strict "
		"| nspid\n");
	return 2;
}
