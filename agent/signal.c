/*
 * Fatal-signal reporting: SIGNAL is written (best effort) before the default
 * action kills the process.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

static const int agent_fatal_signals[] = {SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE};

/*
 * Signal-safe. Preserves errno. No malloc, no stdio, no blocking lock: if
 * another context of this process holds the send lock, the event is
 * counted as lost instead. SA_RESETHAND has already restored SIG_DFL. A
 * fault (si_code > 0) re-executes the faulting instruction on return and
 * meets the default action; a sent signal (kill, raise, abort) is raised
 * again, and SA_NODEFER lets it through at once.
 */
static void agent_on_fatal(int sig, siginfo_t *si, void *uctx)
{
	int saved = errno;

	(void)uctx;
	/* A raw clone child's SIGNAL is its own, never its parent's (and
	 * one that shares its parent's memory records nothing): one getpid,
	 * on the way out of the process. */
	if (__atomic_load_n(&agent_g.active, __ATOMIC_RELAXED) && !agent_t_in_vfork &&
	    !agent_nested() && (agent_silent_fork_child() || agent_same_process())) {
		agent_t_guard++;
		if (agent_trylock()) {
			agent_ev_flush_self_locked();
			agent_write_locked(agent_buf, enc_signal(agent_buf, AGENT_BUF_SIZE,
								 agent_now(), agent_tid(), sig));
			agent_unlock();
			/* The process ends next, as after exit. */
			agent_await_ack();
		} else {
			agent_count_lost();
		}
		agent_t_guard--;
	}
	if (si->si_code <= 0)
		agent_syscall(SYS_tgkill, agent_syscall0(SYS_getpid), agent_syscall0(SYS_gettid),
			      sig);
	errno = saved;
}

#define AGENT_FATAL_FLAGS (SA_SIGINFO | SA_RESETHAND | SA_NODEFER | SA_RESTART)

#if AGENT_X86_64
/*
 * The kernel's struct sigaction, set with rt_sigaction directly: glibc's
 * sigaction is one more import for every traced image to bind (~700
 * instructions) and copies a 128-byte mask per call. The kernel needs a
 * restorer to return from the handler through rt_sigreturn. This one is
 * laid out as glibc's: a nop first, so that an unwinder looking up the
 * frame description of the return address minus one finds none (not the
 * preceding function's) and falls back to matching the bytes, and then
 * exactly glibc's bytes (mov $15, %rax; syscall), which libgcc's and
 * gdb's unwinders match; gdb also goes by the name __restore_rt (a local
 * symbol here).
 */
struct agent_ksigaction {
	uintptr_t handler; /* sa_handler or sa_sigaction */
	unsigned long flags;
	void (*restorer)(void);
	uint64_t mask;
};

#define AGENT_SA_RESTORER 0x04000000UL

void agent_sigreturn(void) __asm__("__restore_rt");
__asm__(".pushsection .text\n"
	".p2align 4\n"
	"\tnop\n"
	".type __restore_rt,@function\n"
	"__restore_rt:\n"
	/* movq $15 (SYS_rt_sigreturn), %rax; syscall */
	"\t.byte 0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05\n"
	".size __restore_rt,.-__restore_rt\n"
	".popsection\n");

/* Swaps our handler in for sig, and puts the old disposition back unless
 * it was the default. */
static void agent_fatal_swap_in(int sig)
{
	struct agent_ksigaction sa = {(uintptr_t)agent_on_fatal,
				      AGENT_FATAL_FLAGS | AGENT_SA_RESTORER, agent_sigreturn, 0};
	struct agent_ksigaction old;

	if (agent_syscall(SYS_rt_sigaction, sig, &sa, &old, sizeof(old.mask)) == 0 &&
	    ((old.flags & SA_SIGINFO) || old.handler != (uintptr_t)SIG_DFL))
		agent_syscall(SYS_rt_sigaction, sig, &old, NULL, sizeof(old.mask));
}
#else
static void agent_fatal_swap_in(int sig)
{
	struct sigaction sa, old;

	/* All zero is the empty sa_mask: no sigemptyset to import. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = agent_on_fatal;
	sa.sa_flags = AGENT_FATAL_FLAGS;
	if (sigaction(sig, &sa, &old) == 0 &&
	    ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL))
		sigaction(sig, &old, NULL);
}
#endif

#if AGENT_X86_64
/* Puts the default action back for sig if our handler is there. */
static void agent_fatal_swap_out(int sig)
{
	struct agent_ksigaction dfl = {(uintptr_t)SIG_DFL, AGENT_SA_RESTORER, agent_sigreturn, 0};
	struct agent_ksigaction cur;

	if (agent_syscall(SYS_rt_sigaction, sig, NULL, &cur, sizeof(cur.mask)) == 0 &&
	    cur.handler == (uintptr_t)agent_on_fatal)
		agent_syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof(dfl.mask));
}
#else
static void agent_fatal_swap_out(int sig)
{
	struct sigaction cur;

	if (sigaction(sig, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
	    cur.sa_sigaction == agent_on_fatal)
		signal(sig, SIG_DFL);
}
#endif

bool agent_exit_unwaited(void)
{
	/* The kernel's struct sigaction begins with the handler and its
	 * flags on every architecture the agent builds for; the rest is room
	 * for a restorer and the mask. */
	struct {
		uintptr_t handler;
		unsigned long flags;
		uintptr_t rest[4];
	} cur;

	if (agent_syscall(SYS_rt_sigaction, SIGCHLD, NULL, &cur, sizeof(uint64_t)) != 0)
		return false;
	return cur.handler == (uintptr_t)SIG_IGN || (cur.flags & SA_NOCLDWAIT);
}

void agent_signals_uninstall(void)
{
	for (size_t i = 0; i < sizeof(agent_fatal_signals) / sizeof(agent_fatal_signals[0]); i++)
		agent_fatal_swap_out(agent_fatal_signals[i]);
}

/* Install only where the disposition is SIG_DFL: a program's own handler
 * (or SIG_IGN inherited across exec) wins, and a handler the program
 * installs later simply replaces ours. One call per signal swaps ours in
 * and returns the old disposition, which is put back in the rare case it
 * was not the default: every traced image pays for these calls, and a
 * constructor runs before the program can have installed a handler (exec
 * resets handlers; only SIG_IGN survives it). */
void agent_signals_install(void)
{
	for (size_t i = 0; i < sizeof(agent_fatal_signals) / sizeof(agent_fatal_signals[0]); i++)
		agent_fatal_swap_in(agent_fatal_signals[i]);
}
