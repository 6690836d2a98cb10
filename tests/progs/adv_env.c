/*
 * adv_env: what a hostile or unusual program does to the agent's
 * environment and to its idea of which process it is in
 * (tests/e2e/test_adv_env.py).
 *
 *   adv_env forged
 *       Forks one child per forged FORKTRACE_EXEC_TS below; each child
 *       execs "/bin/sh -c 'exit K'" (K = 10, 11, ...) with a raw execve
 *       system call, which the agent cannot see, and an environment that
 *       carries the agent (from /proc/self/environ) and the forged value.
 *       Checks every exit code; exits 0.
 *   adv_env clone [clone3]
 *       A child made by a raw clone (or clone3) system call, no glibc
 *       fork: it forks a grandchild (exit 41, then execs "sh -c 'exit
 *       42'") and then execs "sh -c 'exit 43'" with execv. The parent
 *       reaps it and exits 0. With "vm": the raw child is CLONE_VM |
 *       CLONE_VFORK (as posix_spawn and Go make theirs) and only execs.
 *       With "abort": the raw child dies of SIGABRT.
 *   adv_env slot
 *       Overwrites its own process-table slot's committed word with a
 *       value past the slot (any traced program can write the table),
 *       then forks a child that exits 7. Exits 0.
 *   adv_env e2big [spawn]
 *       Fills the environment to just under the kernel's limit for one
 *       execve (argv + envp together), then execs "env" through execve
 *       in a fork child (or posix_spawn): untraced the exec succeeds; it
 *       must under forktrace too. Prints "e2big ok" when it did.
 */
#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "internal.h"

extern char **environ;

/* /proc/self/environ as a vector, without FORKTRACE_EXEC_TS; extra
 * appended. The program's own environ may no longer show the agent's
 * variables: this file still does. */
static char **env_from_proc(const char *extra)
{
	static char buf[1 << 20];
	static char *vec[4096];
	size_t n = 0, k = 0;
	ssize_t r;
	int fd = open("/proc/self/environ", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		tp_die("open /proc/self/environ");
	while ((r = read(fd, buf + n, sizeof(buf) - 1 - n)) > 0)
		n += (size_t)r;
	close(fd);
	buf[n] = '\0';
	for (size_t i = 0; i < n && k < 4094; i += strlen(buf + i) + 1)
		if (strncmp(buf + i, "FORKTRACE_EXEC_TS=", 18) != 0)
			vec[k++] = buf + i;
	if (extra)
		vec[k++] = (char *)extra;
	vec[k] = NULL;
	return vec;
}

static int forged(void)
{
	char own[128], ownbig[128], ownslot0[128];
	const char *values[] = {
		own,                                         /* ours, a slot past the table's end */
		ownbig,                                      /* ours, a slot index past 32 bits */
		ownslot0,                                    /* ours, the root's slot (taken) */
		"FORKTRACE_EXEC_TS=1:0:0:P1:5:/bin/true",    /* someone else's */
		"FORKTRACE_EXEC_TS=1:0:0:C1:5:/bin/true",    /* someone else's child's */
		"FORKTRACE_EXEC_TS=1:0:0:3999999:/bin/true", /* an old form */
		"FORKTRACE_EXEC_TS=99999999999999999999999999:x", /* garbage */
		"FORKTRACE_EXEC_TS=",
	};
	size_t n = sizeof(values) / sizeof(values[0]);

	for (size_t i = 0; i < n; i++) {
		char code[8];
		pid_t pid;

		snprintf(code, sizeof(code), "exit %zu", 10 + i);
		pid = fork();
		if (pid < 0)
			tp_die("fork");
		if (pid == 0) {
			char *argv[] = {"sh", "-c", code, NULL};
			pid_t me = getpid();

			/* Every value claims to be for this very process: only
			 * the checks of the slot can stop it. */
			snprintf(own, sizeof(own), "FORKTRACE_EXEC_TS=1:0:0:P%d:4000000:", (int)me);
			snprintf(ownbig, sizeof(ownbig),
				 "FORKTRACE_EXEC_TS=1:0:0:P%d:99999999999:", (int)me);
			snprintf(ownslot0, sizeof(ownslot0), "FORKTRACE_EXEC_TS=%llu:0:0:P%d:0:",
				 (unsigned long long)UINT64_MAX / 2, (int)me);
			syscall(SYS_execve, "/bin/sh", argv, env_from_proc(values[i]));
			_exit(TP_FAIL);
		}
		tp_expect_code(tp_wait(pid), 10 + (int)i, values[i]);
	}
	return 0;
}

/* The raw child's life: a libc fork, then an exec. */
static int raw_child(void)
{
	char *argv[] = {"sh", "-c", "exit 43", NULL};
	pid_t pid = fork();

	if (pid < 0)
		_exit(TP_FAIL);
	if (pid == 0) {
		char *a[] = {"sh", "-c", "exit 42", NULL};

		if (fork() == 0)
			_exit(41);
		if (tp_wait(-1) != 41 << 8)
			_exit(TP_FAIL);
		execv("/bin/sh", a);
		_exit(TP_FAIL);
	}
	if (tp_wait(pid) != 42 << 8)
		_exit(TP_FAIL);
	execv("/bin/sh", argv);
	_exit(TP_FAIL);
}

struct tp_clone_args {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid,
		set_tid_size, cgroup;
};

static char vm_stack[256 * 1024] __attribute__((aligned(16)));

static int vm_child(void *arg)
{
	char *argv[] = {"sh", "-c", "exit 44", NULL};

	(void)arg;
	execv("/bin/sh", argv);
	_exit(TP_FAIL);
}

static int raw_clone(const char *how)
{
	long pid;

	if (strcmp(how, "vm") == 0) {
		/* glibc's clone() wrapper is a raw system call: no atfork
		 * handlers, no hook. The child shares our memory. */
		pid = clone(vm_child, vm_stack + sizeof(vm_stack), CLONE_VM | CLONE_VFORK | SIGCHLD,
			    NULL);
		if (pid < 0)
			tp_die("clone");
		tp_expect_code(tp_wait((pid_t)pid), 44, "CLONE_VM child");
		return 0;
	}
	if (strcmp(how, "abort") == 0) {
		/* The raw child dies of SIGABRT: its parent must not. */
		pid = syscall(SYS_clone, SIGCHLD, 0, NULL, NULL, 0);
		if (pid < 0)
			tp_die("raw clone");
		if (pid == 0) {
			abort();
		}
		int st = tp_wait((pid_t)pid);

		if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGABRT)
			tp_die("the raw clone child did not die of SIGABRT");
		return 0;
	}
	if (strcmp(how, "clone3") == 0) {
		struct tp_clone_args ca;

		memset(&ca, 0, sizeof(ca));
		ca.exit_signal = SIGCHLD;
		pid = syscall(SYS_clone3, &ca, sizeof(ca));
	} else {
		pid = syscall(SYS_clone, SIGCHLD, 0, NULL, NULL, 0);
	}
	if (pid < 0)
		tp_die("raw clone");
	if (pid == 0)
		raw_child();
	tp_expect_code(tp_wait((pid_t)pid), 43, "raw clone child");
	return 0;
}

static int e2big(const char *how)
{
	char *argv[] = {"env", NULL};
	long max = sysconf(_SC_ARG_MAX);
	size_t used = 0, left, n = 0;
	static char *vec[65536];
	char *big;
	pid_t pid;

	/* What execve counts: every string with its NUL, every pointer. */
	for (char **e = environ; *e; e++, n++) {
		used += strlen(*e) + 1 + sizeof(char *);
		vec[n] = *e;
	}
	used += strlen("env") + 1 + 2 * sizeof(char *) + sizeof(char *);
	/* One string may be at most 32 pages: fill with several. */
	left = (size_t)max - used - 64;
	while (left > 0) {
		size_t len = left > 100000 ? 100000 : left;

		if (len < sizeof(char *) + 8)
			break;
		big = malloc(len);
		if (!big)
			tp_die("malloc");
		len -= sizeof(char *);
		snprintf(big, len, "ADV_FILL_%zu=", n);
		memset(big + strlen(big), 'x', len - 1 - strlen(big));
		big[len - 1] = '\0';
		vec[n++] = big;
		left -= len + sizeof(char *);
	}
	vec[n] = NULL;
	if (strcmp(how, "spawn") == 0) {
		posix_spawn_file_actions_t fa;
		int rc;

		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
		rc = posix_spawn(&pid, "/usr/bin/env", &fa, NULL, argv, vec);
		if (rc != 0) {
			errno = rc;
			tp_die("posix_spawn env");
		}
		tp_expect_code(tp_wait(pid), 0, "spawned env with a full environment");
		printf("e2big ok\n");
		return 0;
	}
	pid = fork();
	if (pid < 0)
		tp_die("fork");
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);

		dup2(fd, 1);
		execve("/usr/bin/env", argv, vec);
		fprintf(stderr, "execve env: %s\n", strerror(errno));
		_exit(TP_FAIL);
	}
	tp_expect_code(tp_wait(pid), 0, "env with a full environment");
	printf("e2big ok\n");
	return 0;
}

/* Overwrites the committed word of this image's own slot of the process
 * table (found by its owner word, the pid) with a value past the slot,
 * as any traced program can, then forks a child (exit 7) and waits: the
 * agent must go on writing where it was, not where the word says. */
static int slot_word(void)
{
	char **env = env_from_proc(NULL), path[PATH_MAX] = "";
	struct stat st;
	unsigned char *map;
	uint32_t pid = (uint32_t)getpid(), found = 0;
	int fd;

	for (char **e = env; *e; e++)
		if (strncmp(*e, "FORKTRACE_SOCK=", 15) == 0)
			snprintf(path, sizeof(path), "%s", *e + 15);
	if (!strrchr(path, '/'))
		tp_die("no FORKTRACE_SOCK");
	strcpy(strrchr(path, '/') + 1, "table");
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0)
		tp_die("open the table");
	/* The first slots are enough: this image is one of the first. */
	size_t len = 4096 + 256 * 4096;
	map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		tp_die("mmap the table");
	for (size_t off = 4096; off < len; off += 4096) {
		uint32_t *w = (uint32_t *)(void *)(map + off);

		if (w[1] == pid) {
			w[0] = 0xfffff000u;
			found++;
		}
	}
	if (!found)
		tp_die("no slot of ours in the table");
	pid_t c = fork();
	if (c < 0)
		tp_die("fork");
	if (c == 0)
		_exit(7);
	tp_expect_code(tp_wait(c), 7, "child");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "forged") == 0)
		return forged();
	if (argc >= 2 && strcmp(argv[1], "clone") == 0)
		return raw_clone(argc >= 3 ? argv[2] : "clone");
	if (argc >= 2 && strcmp(argv[1], "slot") == 0)
		return slot_word();
	if (argc >= 2 && strcmp(argv[1], "e2big") == 0)
		return e2big(argc >= 3 ? argv[2] : "fork");
	fprintf(stderr, "usage: adv_env forged|clone [clone3|vm|abort]|slot|e2big [spawn]\n");
	return 2;
}
