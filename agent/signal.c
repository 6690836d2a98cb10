/*
 * Fatal-signal reporting: SIGNAL is written (best effort) before the default
 * action kills the process.
 */
#include <errno.h>
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
	if (__atomic_load_n(&agent_g.active, __ATOMIC_RELAXED) && !agent_t_in_vfork &&
	    !agent_nested()) {
		agent_t_guard++;
		if (agent_trylock()) {
			agent_ev_flush_self_locked();
			agent_write_locked(agent_buf, enc_signal(agent_buf, AGENT_BUF_SIZE,
								 agent_now(), agent_tid(), sig));
			agent_unlock();
		} else {
			agent_count_lost();
		}
		agent_t_guard--;
	}
	if (si->si_code <= 0)
		agent_syscall(SYS_tgkill, agent_syscall0(SYS_getpid), agent_syscall0(SYS_gettid), sig);
	errno = saved;
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
	struct sigaction sa, old;
	size_t i;

	/* All zero is the empty sa_mask: no sigemptyset, one import less
	 * for every image to bind. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = agent_on_fatal;
	sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER | SA_RESTART;
	for (i = 0; i < sizeof(agent_fatal_signals) / sizeof(agent_fatal_signals[0]); i++) {
		int sig = agent_fatal_signals[i];

		if (sigaction(sig, &sa, &old) == 0 &&
		    ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL))
			sigaction(sig, &old, NULL);
	}
}
