/*
 * The constructor, at the top of the agent: reads the auxiliary vector and
 * the environment this image was given, prepares what every other part
 * uses (argv for HELLO, where spill files go), hides the agent's variables
 * from the program, and opens the channel to the collector.
 */
#include <errno.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

/* Copy argv into the arena for HELLO, truncating (never failing) when it
 * does not fit. */
static void agent_cache_argv(int argc, char **argv)
{
	size_t used = 0, cap = (size_t)(argc < 0 ? 0 : argc);
	const char **v;
	int i;

	if (cap > AGENT_ARGV_MAX)
		cap = AGENT_ARGV_MAX;
	v = (const char **)(void *)agent_arena_take(cap * sizeof(char *), true);
	if (!v)
		return;
	agent_g.argv = v;
	for (i = 0; argv && i < argc && argv[i]; i++) {
		size_t n = strlen(argv[i]) + 1;
		char *p = NULL;

		if ((size_t)i == cap || n > AGENT_ARGV_BYTES - used ||
		    !(p = agent_arena_take(n, false))) {
			agent_g.argv_truncated = 1;
			break;
		}
		memcpy(p, argv[i], n);
		v[agent_g.argc++] = p;
		used += n;
	}
}

/* Where spill files go (agent_spill_open): $FORKTRACE_SPILL, else
 * $TMPDIR, copied as the image started. The variable itself is kept for
 * the environments of the images this one starts (agent_env_merge).
 * Constructor only. */
static void agent_spill_dir(const char *dir, const char *tmp)
{
	if (dir && *dir && strlen(dir) < PATH_MAX) {
		agent_g.env_spill = agent_arena_join(FT_ENV_SPILL_DIR "=", sizeof(FT_ENV_SPILL_DIR),
						     dir, strlen(dir));
		if (agent_g.env_spill)
			agent_g.spill_dir = agent_g.env_spill + sizeof(FT_ENV_SPILL_DIR);
	} else if (tmp && *tmp && strlen(tmp) < PATH_MAX - 64) {
		agent_g.spill_tmp = agent_arena_join(tmp, strlen(tmp), "", 0);
	}
}

/*
 * The program sees the environment it would see untraced: environ
 * without FORKTRACE_SOCK, FORKTRACE_SPILL, FORKTRACE_FUNCTIONS, and with
 * the user's own LD_PRELOAD (forktrace run put the agent in front of it),
 * or none. The agent keeps them (agent_prepare_env, agent_spill_dir) and
 * every exec and spawn merges them back (agent_env_merge), whatever
 * environment the program passes. environ is pointed at a new vector in
 * the arena (a mapping for more than AGENT_ENVIRON_MAX entries); the
 * initial one on the stack is left as it is, so that a runtime that reads
 * it directly and execs with raw system calls (Go) keeps the agent in its
 * children. Only when forktrace run configured this image: a program
 * started with the agent in LD_PRELOAD by hand sees what it was given.
 * Constructor only (before main, single-threaded).
 */
static void agent_hide_env(const char *preload)
{
	size_t n = 0, j = 0, plen = preload ? strlen(preload) : 0;
	/* Usually the initial vector; another one if a function that ran
	 * before us (a preinit function, a library's constructor) changed
	 * the environment. */
	char **envp = environ;
	char **v, *user = NULL;

	if (!envp)
		return;
	while (envp[n])
		n++;
	if (n < AGENT_ENVIRON_MAX) {
		v = (char **)(void *)agent_arena_take((n + 1) * sizeof(char *), true);
	} else {
		v = agent_sys_mmap(NULL, (n + 1) * sizeof(char *), PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		v = v == MAP_FAILED ? NULL : v;
	}
	if (!v)
		return;
	if (preload) {
		user = agent_arena_take(sizeof(FT_ENV_PRELOAD) + plen + 1, false);
		if (!user)
			return;
		memcpy(user, FT_ENV_PRELOAD "=", sizeof(FT_ENV_PRELOAD));
		if (!agent_preload_strip(preload, user + sizeof(FT_ENV_PRELOAD)))
			user = NULL;
	}
	for (size_t i = 0; i < n; i++) {
		char *e = envp[i];

		if (agent_env_is_ours(e))
			continue;
		if (e[0] == 'L' && strncmp(e, FT_ENV_PRELOAD "=", sizeof(FT_ENV_PRELOAD)) == 0) {
			if (user)
				v[j++] = user;
			user = NULL; /* the first one counts, as for getenv */
			continue;
		}
		v[j++] = e;
	}
	v[j] = NULL;
	environ = v;
}

/*
 * AT_SECURE and AT_CLKTCK from the auxiliary vector, which follows envp on
 * the initial stack: a preloaded object's constructor is given that envp
 * (then argv + argc + 1), and reads them there rather than importing
 * getauxval (one more symbol for every traced image to bind, ~700
 * instructions). In a secure-mode process the loader has removed entries
 * from that envp in place, leaving NULLs before the vector: they are
 * skipped. The vector read is trusted only if it has both AT_PAGESZ and
 * AT_SECURE, which the kernel always supplies; otherwise (an environment
 * changed before: a program's preinit function, a late dlopen) getauxval.
 */
#define AGENT_AUXV_MAX 64

static void agent_read_auxv(int argc, char **argv, char **envp, unsigned long *secure,
			    unsigned long *clktck)
{
	if (argv && envp && argc >= 0 && envp == argv + argc + 1) {
		char **e = envp;
		unsigned found = 0;

		while (*e)
			e++;
		for (unsigned i = 0; i < AGENT_AUXV_MAX && !e[1]; i++)
			e++;
		*clktck = 0;
		const unsigned long *a = (const unsigned long *)(e + 1);
		for (unsigned i = 0; i < AGENT_AUXV_MAX && a[0] != AT_NULL; i++, a += 2) {
			if (a[0] == AT_PAGESZ) {
				found |= 1;
			} else if (a[0] == AT_SECURE) {
				found |= 2;
				*secure = a[1];
			} else if (a[0] == AT_CLKTCK) {
				*clktck = a[1];
			}
		}
		if (found == 3)
			return;
	}
	*secure = getauxval(AT_SECURE);
	*clktck = getauxval(AT_CLKTCK);
}

/* glibc passes argc, argv and envp to .init_array functions. */
__attribute__((constructor)) static void agent_init(int argc, char **argv, char **envp)
{
	int saved = errno;
	struct agent_start_env env;
	const struct agent_handover *ho = &env.ho;
	const char *sock;
	unsigned long secure, tck;
	ssize_t n;

	__atomic_store_n(&agent_g.init_done, 1, __ATOMIC_RELEASE);
	agent_read_auxv(argc, argv, envp, &secure, &tck);
	/* Never honour the environment of a setuid/setgid program. */
	if (secure)
		goto out;
	/* Before main: the program must never see our hand-over variable. */
	agent_env_take_start(envp, &env);
	/* Without a collector (no FORKTRACE_SOCK, or one that does not
	 * answer) everything goes to spill files. */
	sock = env.sock ? env.sock : "";
	agent_spill_dir(env.spill, env.tmpdir);
	if (!__atomic_load_n(&agent_g.env_ready, __ATOMIC_ACQUIRE) &&
	    agent_prepare_env(sock, env.preload) < 0) {
		agent_fail("FORKTRACE_SOCK or the agent path is too long; tracing disabled");
		goto out;
	}
	agent_g.fd = -1;
	if (env.table_fd)
		agent_table_take_fd(env.table_fd);
	agent_cache_argv(argc, argv);
	agent_env_ranks(&env);
	agent_remote_init(env.head, env.remote, env.rsh);
	/* How a raw clone child drops what it inherited (agent_same_process):
	 * the runtime below the hooks resets their state through it. */
	agent_g.fork_child_reset = agent_fork_child;
	agent_g.pid = agent_sys_getpid();
	agent_g.ppid = agent_sys_getppid();
	/* A hand-over meant for another process (inherited through an image
	 * that never loaded the agent, or forged) is ignored whole: its
	 * start time, exe and slot are someone else's. */
	if (ho->pid ? ho->pid != agent_g.pid : ho->ppid != agent_g.ppid)
		memset(&env.ho, 0, sizeof(env.ho));
	agent_g.exec_ts = ho->exec_ns;
	agent_g.table_handed = ho->slot;
	/* Constructors of preloaded objects run on the main thread. */
	agent_t_tid = agent_t_tid_pid = agent_g.pid;
	agent_g.tick_ns = tck ? 1000000000u / tck : 0;
	/* An image a fork child exec'd is handed its start time; one that
	 * posix_spawn started, the spawner's clock reading before the call,
	 * from which it tells its start time as a fork child does (see
	 * agent_fork_start_ticks). The comm is then one prctl away. */
	agent_g.start_ticks = ho->ticks ? ho->ticks : agent_fork_start_ticks(ho->boot_before);
	if (!agent_g.start_ticks ||
	    agent_syscall(SYS_prctl, PR_GET_NAME, agent_g.name, 0, 0, 0) != 0)
		agent_g.start_ticks = agent_read_stat(agent_g.name, sizeof(agent_g.name));
	/* The exe's name, when handed over, is what /proc would say. */
	if (ho->exe && strlen(ho->exe) < PATH_MAX) {
		agent_g.exe = agent_arena_join(ho->exe, strlen(ho->exe), "", 0);
	} else {
		char exe[PATH_MAX];

		n = agent_sys_readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		agent_g.exe = agent_arena_join(exe, n > 0 ? (size_t)n : 0, "", 0);
	}
	agent_ev_init(env.functions);
	if (env.functions && strlen(env.functions) < 16)
		agent_g.env_functions = agent_arena_join(FT_ENV_FUNCTIONS "=",
							 sizeof(FT_ENV_FUNCTIONS), env.functions,
							 strlen(env.functions));
	if (env.sock && *env.sock)
		agent_hide_env(env.preload);
	__atomic_store_n(&agent_g.configured, 1, __ATOMIC_RELEASE);
	agent_open_channel();
	if (__atomic_load_n(&agent_g.active, __ATOMIC_RELAXED)) {
		agent_signals_install();
		agent_exit_watch();
	}
out:
	errno = saved;
}
