/*
 * runsig.c - what `forktrace run` does with the signals sent to it.
 *
 * COMMAND stays in forktrace's process group (job control, the terminal
 * and pipelines such as `forktrace run -- make | less` work as without
 * forktrace). So a signal sent to the group (Ctrl-C, kill -TERM -PGID, a
 * job-control kill) reaches COMMAND on its own, and one sent to forktrace
 * alone does not. The kernel tells neither apart in siginfo (both are
 * SI_USER from the same sender), so forktrace keeps a sentinel: a small
 * child in the same group that blocks every signal. A signal sent to the
 * group is pending in the sentinel by the time forktrace's handler runs
 * (kill(2) marks every member of the group before it returns); one sent
 * to forktrace alone is not. Only the latter is passed on to COMMAND, so
 * COMMAND gets every signal once. The decision waits RSIG_DEFER_MS: systemd
 * stopping a unit signals the main process first and the rest of the
 * cgroup one by one after it has read the list.
 *
 * Phases:
 *   SETUP    before COMMAND starts: INT/TERM/HUP/QUIT/USR1/USR2 remove what
 *            forktrace created and end it by the signal (nothing to trace);
 *   RUNNING  COMMAND runs: a signal COMMAND did not get is passed on
 *            (INT, TERM, HUP, QUIT, USR1, USR2, TSTP, CONT);
 *            TSTP stops forktrace with COMMAND, CONT resumes both;
 *   WAITING  COMMAND is gone (daemons may be left, or the trace is being
 *            written): the first INT/TERM/HUP/QUIT ends the wait as
 *            --wait-timeout does, the second INT/TERM/QUIT removes the
 *            temporaries and ends forktrace by the signal, without a trace;
 *            USR1/USR2 are ignored.
 *
 * Signals forktrace inherited as ignored (nohup, a background job of a
 * non-interactive shell) stay ignored by forktrace and by COMMAND. COMMAND
 * gets forktrace's inherited signal mask and its SIGPIPE and SIGXFSZ
 * dispositions.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "runsig.h"

enum { PHASE_SETUP, PHASE_RUNNING, PHASE_WAITING };

/* The signals handled here, in the order of sig_names. */
static const int handled[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGCONT, SIGUSR1, SIGUSR2};
#define NHANDLED (sizeof(handled) / sizeof(handled[0]))
/* The output and report temporaries, the socket directory, socket and
 * spill link, the table, its directory and link, the spill directory, its
 * journal and link, the run key. */
#define RSIG_MAX_TEMPS 14
/* Two receipts of one signal from one sender this close are one event:
 * timeout(1) sends to forktrace and then to its group, a terminal hangup
 * comes from the kernel and again from the shell. */
#define RSIG_SAME_NS 200000000LL

static volatile sig_atomic_t phase;
static volatile sig_atomic_t cmd_pid;        /* COMMAND, for kill */
static volatile sig_atomic_t cmd_pidfd = -1; /* COMMAND, immune to pid reuse */
static volatile sig_atomic_t sentinel_fd = -1;
static volatile sig_atomic_t stop_sig;       /* the signal that ended the wait */
static volatile sig_atomic_t we_stopped_cmd; /* a TSTP of ours stopped COMMAND */
/* Signals to pass on to COMMAND, unless the group got them (by index in
 * handled[]). */
static volatile sig_atomic_t deferred[NHANDLED];
static char sentinel_status[64]; /* /proc/PID/status of the sentinel */
static pid_t sentinel_pid;       /* the sentinel, or 0 */
static sigset_t orig_mask, handled_set;
static bool pipe_was_default;
static bool xfsz_was_default;
static uv_async_t *volatile notify;
static int last_sig;
static pid_t last_sender;
static long long last_ns;
static int nstops;
static pid_t self_pid;

/* What to remove when forktrace ends without a trace: files, then
 * directories, in reverse order of registration. */
static char temps[RSIG_MAX_TEMPS][4096];
static bool temp_is_dir[RSIG_MAX_TEMPS];
static volatile sig_atomic_t ntemps;
static char abort_msg[512];

static const char *sig_name(int sig)
{
	/* clang-format off */
	switch (sig) {
	case SIGINT: return "SIGINT";
	case SIGTERM: return "SIGTERM";
	case SIGHUP: return "SIGHUP";
	case SIGQUIT: return "SIGQUIT";
	case SIGTSTP: return "SIGTSTP";
	case SIGCONT: return "SIGCONT";
	case SIGUSR1: return "SIGUSR1";
	case SIGUSR2: return "SIGUSR2";
	default: return "a signal";
	}
	/* clang-format on */
}

/* Signal-safe. */
static void say(const char *s)
{
	size_t n = strlen(s);

	while (n) {
		ssize_t w = write(STDERR_FILENO, s, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/*
 * The sentinel: blocks every signal, so that whatever is sent to the
 * group stays pending in it where forktrace can see it (ShdPnd in
 * /proc/PID/status). It drops a pending signal when forktrace writes its
 * number, and ends when forktrace's end of the socket closes (forktrace
 * ended, however). It keeps no fd of forktrace's and sits in / so that
 * it holds nothing busy.
 *
 * It is a child that sends no signal when it ends (a "clone" child):
 * waitpid(-1) without __WCLONE never returns it, so it does not keep
 * forktrace from seeing that the tree is gone (ECHILD). forktrace never
 * waits for it.
 */
/* ThreadSanitizer's clone interceptor runs its fork-child hook in any
 * child, resetting its state of every thread and lock; in a child that
 * shares forktrace's memory that is forktrace's own state, and it then
 * reports races that are none (a worker's read of an opipe slot the main
 * thread had written under the pool's lock). Such a build copies instead. */
#if defined(__SANITIZE_THREAD__)
#define SENTINEL_SHARES_MEMORY 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SENTINEL_SHARES_MEMORY 0
#endif
#endif
#if !defined(SENTINEL_SHARES_MEMORY) && defined(__x86_64__)
#define SENTINEL_SHARES_MEMORY 1
#endif

#if defined(SENTINEL_SHARES_MEMORY) && SENTINEL_SHARES_MEMORY
/*
 * On x86-64 it shares forktrace's memory (CLONE_VM): no page tables to
 * copy, nothing to tear down (a fork of forktrace cost ~0.2 ms of CPU per
 * run). So it runs on a stack of its own and makes its system calls
 * directly: glibc's wrappers would write errno, which is forktrace's.
 */
static long sentinel_sys(long n, long a, long b, long c, long d)
{
	register long r10 __asm__("r10") = d;
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10)
			 : "rcx", "r11", "memory");
	return ret;
}

static char sentinel_stack[16384] __attribute__((aligned(64)));

__attribute__((no_sanitize_address)) static int sentinel_main(void *arg)
{
	static const char name[] = "forktrace-sig";
	const long fd = (long)(intptr_t)arg;
	struct timespec zero = {0, 0};
	unsigned long one;
	unsigned char b;

	sentinel_sys(SYS_prctl, PR_SET_NAME, (long)name, 0, 0);
	sentinel_sys(SYS_chdir, (long)"/", 0, 0, 0);
	if (fd > 0)
		sentinel_sys(SYS_close_range, 0, fd - 1, 0, 0);
	sentinel_sys(SYS_close_range, fd + 1, (long)~0U, 0, 0);
	for (;;) {
		long n = sentinel_sys(SYS_read, fd, (long)&b, 1, 0);

		if (n == -EINTR)
			continue;
		if (n <= 0 || b == 0 || b > 64)
			sentinel_sys(SYS_exit, 0, 0, 0, 0);
		one = 1UL << (b - 1);
		sentinel_sys(SYS_rt_sigtimedwait, (long)&one, 0, (long)&zero, sizeof(one));
	}
	return 0;
}

static pid_t sentinel_clone(int fd)
{
	return clone(sentinel_main, sentinel_stack + sizeof(sentinel_stack), CLONE_VM,
		     (void *)(intptr_t)fd);
}
#else
/* A copy of forktrace (a raw clone, not fork(): it runs nothing of glibc's
 * but system calls). */
static void sentinel_main(int fd)
{
	prctl(PR_SET_NAME, "forktrace-sig", 0, 0, 0);
	if (chdir("/") < 0)
		_exit(1);
	if (fd > 0)
		syscall(SYS_close_range, 0, fd - 1, 0);
	syscall(SYS_close_range, fd + 1, ~0U, 0);
	for (;;) {
		unsigned char b;
		ssize_t n = read(fd, &b, 1);
		struct timespec zero = {0, 0};
		sigset_t one;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(0);
		sigemptyset(&one);
		sigaddset(&one, b);
		sigtimedwait(&one, NULL, &zero);
	}
}

static pid_t sentinel_clone(int fd)
{
	pid_t h = (pid_t)syscall(SYS_clone, 0UL, NULL, NULL, NULL, NULL);

	if (h == 0)
		sentinel_main(fd);
	return h;
}
#endif

/* Starts the sentinel; without one, signals are told apart by si_code. */
static void sentinel_start(void)
{
	sigset_t all, old;
	int sv[2];
	pid_t h;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	h = sentinel_clone(sv[1]);
	sigprocmask(SIG_SETMASK, &old, NULL);
	close(sv[1]);
	if (h < 0) {
		close(sv[0]);
		return;
	}
	snprintf(sentinel_status, sizeof(sentinel_status), "/proc/%d/status", (int)h);
	sentinel_pid = h;
	sentinel_fd = sv[0];
}

/*
 * Is sig pending in the sentinel, that is, was it sent to the whole
 * process group? Then the sentinel is told to drop it. Returns -1 when
 * there is no sentinel to ask. Signal-safe.
 */
static int sentinel_got(int sig)
{
	char buf[4096];
	ssize_t n;
	int fd;

	if (sentinel_fd < 0)
		return -1;
	fd = open(sentinel_status, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* A /proc of another pid namespace names someone else by that pid:
	 * the sentinel's name tells (forktrace's until it has set its own). */
	if (strncmp(buf, "Name:\tforktrace-sig\n", 20) != 0 &&
	    strncmp(buf, "Name:\tforktrace\n", 16) != 0)
		return -1;
	const char *p = strstr(buf, "\nShdPnd:");
	if (!p)
		return -1;
	p += 8;
	while (*p == ' ' || *p == '\t')
		p++;
	/* A 64-bit mask in hex, signal N at bit N-1. */
	unsigned long long mask = 0;
	for (; (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'); p++)
		mask = mask << 4 | (unsigned)(*p <= '9' ? *p - '0' : *p - 'a' + 10);
	if (!(mask >> (sig - 1) & 1))
		return 0;
	unsigned char b = (unsigned char)sig;
	if (write(sentinel_fd, &b, 1) < 0) {
		/* The sentinel is gone: the answer stands. */
	}
	return 1;
}

/*
 * Did some process of the tree send this (a daemon that signals its
 * parent, which is forktrace once it has been orphaned)? Follows the
 * sender's parents up to forktrace. Signal-safe.
 */
static bool sent_by_tree(const siginfo_t *si)
{
	pid_t pid = si->si_pid;

	if (si->si_code != SI_USER && si->si_code != SI_QUEUE)
		return false;
	for (int hops = 0; pid > 1 && hops < 64; hops++) {
		if (pid == self_pid)
			return hops > 0;
		pid = proc_stat_ppid(pid);
		if (pid < 0)
			return false;
	}
	return false;
}

/* Removes what rsig_add_temp registered. Signal-safe. */
static void remove_temps(void)
{
	for (int i = ntemps - 1; i >= 0; i--)
		if (!temp_is_dir[i])
			unlink(temps[i]);
	for (int i = ntemps - 1; i >= 0; i--)
		if (temp_is_dir[i])
			rmdir(temps[i]);
}

/* Ends forktrace by sig, as if it had not caught it. Signal-safe. */
static void die_by(int sig)
{
	struct sigaction sa;
	sigset_t one;

	remove_temps();
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	sigaction(sig, &sa, NULL);
	sigemptyset(&one);
	sigaddset(&one, sig);
	kill(getpid(), sig);
	sigprocmask(SIG_UNBLOCK, &one, NULL);
	/* A signal whose default is to go on (none of ours): exit alike. */
	_exit(128 + sig);
}

/* Stops forktrace the way the default action of SIGTSTP would, and comes
 * back here once continued. Signal-safe. */
static void stop_self(void)
{
	struct sigaction dfl, old;
	sigset_t one;

	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigaction(SIGTSTP, &dfl, &old);
	sigemptyset(&one);
	sigaddset(&one, SIGTSTP);
	kill(getpid(), SIGTSTP);
	sigprocmask(SIG_UNBLOCK, &one, NULL);
	sigprocmask(SIG_BLOCK, &one, NULL);
	sigaction(SIGTSTP, &old, NULL);
}

/* Passes sig on to COMMAND; false when COMMAND has been reaped already
 * (its pid may be another process's by now: the pidfd knows). */
static bool send_cmd(int sig)
{
	int rc = cmd_pidfd >= 0 ? (int)syscall(SYS_pidfd_send_signal, (int)cmd_pidfd, sig, NULL, 0)
				: kill((pid_t)cmd_pid, sig);

	return !(rc < 0 && errno == ESRCH);
}

/* Signal-safe. Preserves errno. The handled signals are blocked while it
 * runs (sa_mask), so it never nests. */
static void on_signal(int sig, siginfo_t *si, void *uctx)
{
	int saved = errno;
	int idx = -1;

	(void)uctx;
	for (size_t i = 0; i < NHANDLED; i++)
		if (handled[i] == sig)
			idx = (int)i;
	if (phase == PHASE_RUNNING && sig != SIGTSTP && sig != SIGCONT && idx >= 0 &&
	    si->si_code <= 0 &&
	    !(si->si_code == SI_USER && (si->si_pid == cmd_pid || sent_by_tree(si)))) {
		/* Sent by some process, maybe to the group: decided in a
		 * moment (rsig_forward_due), when what was sent to the group
		 * (systemd signals each process of its cgroup in turn) has
		 * reached the sentinel too. */
		uv_async_t *a = notify;

		if (a) {
			deferred[idx] = 1;
			uv_async_send(a);
			errno = saved;
			return;
		}
	}
	/* Asked always, so that the sentinel never keeps a stale one. */
	int group = sentinel_got(sig);
	if (group < 0) /* no sentinel: a terminal's signal went to the group */
		group = si->si_code > 0;
	if (phase == PHASE_RUNNING) {
		bool from_tree = si->si_code == SI_USER &&
				 (si->si_pid == cmd_pid || sent_by_tree(si));
		bool alive = true;

		if (sig == SIGCONT) {
			if (!group && !from_tree && we_stopped_cmd)
				send_cmd(SIGCONT);
			we_stopped_cmd = 0;
		} else if (!group && !from_tree) {
			alive = send_cmd(sig);
			if (sig == SIGTSTP)
				we_stopped_cmd = 1;
		}
		if (sig == SIGTSTP)
			stop_self();
		/* COMMAND was reaped a moment ago: the signal is for us. */
		if (alive || sig == SIGTSTP || sig == SIGCONT) {
			errno = saved;
			return;
		}
	}
	if (sig == SIGTSTP) {
		stop_self();
		errno = saved;
		return;
	}
	/* SIGUSR1/2 are COMMAND's business (dd's progress, a daemon's log
	 * reopening): passed on while it runs, never the end of forktrace. */
	if (sig == SIGCONT || (phase != PHASE_SETUP && (sig == SIGUSR1 || sig == SIGUSR2)) ||
	    (phase != PHASE_RUNNING && sent_by_tree(si))) {
		errno = saved;
		return;
	}
	if (phase == PHASE_SETUP)
		die_by(sig);
	/* WAITING. */
	long long t = now_ns();
	pid_t sender = si->si_code <= 0 ? si->si_pid : 0;
	if (nstops && sig == last_sig && sender == last_sender && t - last_ns < RSIG_SAME_NS) {
		errno = saved;
		return;
	}
	last_sig = sig;
	last_sender = sender;
	last_ns = t;
	if (nstops++ == 0) {
		uv_async_t *a = notify;

		stop_sig = sig;
		if (a) {
			uv_async_send(a);
		} else {
			say("forktrace: ");
			say(sig_name(sig));
			say(": writing the trace; send it again to stop without it\n");
		}
	} else if (sig != SIGHUP) {
		say(abort_msg);
		die_by(sig);
	}
	errno = saved;
}

int rsig_setup(const char *output)
{
	struct sigaction sa, old;
	char spill[sizeof(abort_msg) - 200];

	snprintf(spill, sizeof(spill), "%s.spill", output);
	snprintf(abort_msg, sizeof(abort_msg),
		 "forktrace: signalled again: stopped without writing the trace; processes "
		 "still running write what they record to %s ('forktrace combine' reads it)\n",
		 spill);

	self_pid = getpid();
	sigprocmask(SIG_SETMASK, NULL, &orig_mask);
	sigemptyset(&handled_set);
	for (size_t i = 0; i < NHANDLED; i++)
		sigaddset(&handled_set, handled[i]);
	if (sigaction(SIGPIPE, NULL, &old) == 0)
		pipe_was_default = old.sa_handler == SIG_DFL;
	if (sigaction(SIGXFSZ, NULL, &old) == 0)
		xfsz_was_default = old.sa_handler == SIG_DFL;
	sentinel_start();
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sa.sa_mask = handled_set;
	for (size_t i = 0; i < NHANDLED; i++) {
		if (sigaction(handled[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
			continue;
		sigaction(handled[i], &sa, NULL);
	}
	/* Dead connections must not kill forktrace. */
	signal(SIGPIPE, SIG_IGN);
	/* Nor a file past RLIMIT_FSIZE (the trace, the --max-memory spill
	 * file): the write fails with EFBIG instead, an error naming it. */
	signal(SIGXFSZ, SIG_IGN);
	/* The handlers must see the signals even if they came blocked. */
	sigprocmask(SIG_UNBLOCK, &handled_set, NULL);
	return 0;
}

void rsig_spawn_attr(posix_spawnattr_t *attr)
{
	sigset_t def;
	short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;

	sigemptyset(&def);
	if (pipe_was_default)
		sigaddset(&def, SIGPIPE);
	if (xfsz_was_default)
		sigaddset(&def, SIGXFSZ);
	posix_spawnattr_setsigmask(attr, &orig_mask);
	posix_spawnattr_setsigdefault(attr, &def);
	posix_spawnattr_setflags(attr, flags);
}

void rsig_block(sigset_t *old)
{
	sigprocmask(SIG_BLOCK, &handled_set, old);
}

void rsig_command_started(pid_t pid, const sigset_t *old)
{
	cmd_pid = pid;
	cmd_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (cmd_pidfd >= 0)
		fcntl(cmd_pidfd, F_SETFD, FD_CLOEXEC);
	phase = PHASE_RUNNING;
	sigprocmask(SIG_SETMASK, old, NULL);
}

void rsig_command_ended(void)
{
	phase = PHASE_WAITING;
}

void rsig_set_notify(uv_async_t *a)
{
	notify = a;
}

bool rsig_deferred(void)
{
	for (size_t i = 0; i < NHANDLED; i++)
		if (deferred[i])
			return true;
	return false;
}

int rsig_forward_due(void)
{
	sigset_t old;
	int stop = 0;

	rsig_block(&old);
	for (size_t i = 0; i < NHANDLED; i++) {
		int sig = handled[i];

		if (!deferred[i])
			continue;
		deferred[i] = 0;
		if (sentinel_got(sig) == 1)
			continue; /* the group's: COMMAND has it */
		if (phase == PHASE_RUNNING && send_cmd(sig))
			continue;
		/* COMMAND is gone meanwhile: the signal was for forktrace,
		 * as in rsig_command_ended's phase. */
		if (sig != SIGUSR1 && sig != SIGUSR2 && nstops++ == 0) {
			stop_sig = sig;
			last_sig = sig;
			last_ns = now_ns();
			stop = sig;
		}
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	return stop;
}

void rsig_notify_off(void)
{
	notify = NULL;
}

int rsig_stop_signal(void)
{
	return stop_sig;
}

const char *rsig_name(int sig)
{
	return sig_name(sig);
}

void rsig_add_temp(const char *path, bool is_dir)
{
	int i = ntemps;

	if (!path || !*path || i >= RSIG_MAX_TEMPS || strlen(path) >= sizeof(temps[0]))
		return;
	memcpy(temps[i], path, strlen(path) + 1);
	temp_is_dir[i] = is_dir;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	ntemps = i + 1;
}

void rsig_finish(void)
{
	sigset_t old;

	rsig_block(&old);
	notify = NULL;
	if (cmd_pidfd >= 0)
		close(cmd_pidfd);
	cmd_pidfd = -1;
	cmd_pid = 0;
	if (sentinel_fd >= 0)
		close(sentinel_fd);
	sentinel_fd = -1;
	/* Reaped here: left to outlive forktrace, the sentinel would go to
	 * the reaper above (a container's init, an outer forktrace) as an
	 * orphan it knows nothing of. Killed, not just told by the end of
	 * its socket: a stopped one would never read it. An unreaped child's
	 * pid is not reused. */
	if (sentinel_pid > 0) {
		kill(sentinel_pid, SIGKILL);
		while (waitpid(sentinel_pid, NULL, __WCLONE) < 0 && errno == EINTR)
			;
	}
	sentinel_pid = 0;
	ntemps = 0;
	sigprocmask(SIG_SETMASK, &old, NULL);
}
