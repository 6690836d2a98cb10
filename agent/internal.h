/*
 * Internals of libforktrace-agent.so, shared by the files of agent/ only.
 *
 * Module map. The files form layers, lowest first (agent_layers in
 * agent/CMakeLists.txt): a file calls into its own layer and the ones below
 * it, never above, and the files' calls form no cycle. The sections of this
 * header follow the layers; layout.agent_layers checks all three on the
 * object files. Where a lower layer must reach a higher one, the higher one
 * registers a function with it (agent_g.fork_child_reset).
 *
 *   layer      file            what it does
 *   base       str.c           libc's string functions, the agent's own (no imports)
 *              encode.c        the wire encoder (encode.h): a frame into the caller's buffer
 *              sys.h           system calls made inline, without libc's wrappers
 *   runtime    runtime.c       agent_g and the per-thread variables, real symbols (dlsym),
 *                              the clocks, the thread id, the one error line, the process's
 *                              start time, whether it is still the process agent_g describes
 *   startup    startup.c       the start-up arena; the strings exec and spawn merge into a new
 *                              image's environment, prepared once (also before the constructor)
 *   slot       slot.c          this image's slot in the collector's process table
 *   transport  transport.c     HELLO, the connection, the spill file: where a frame goes
 *   lock       lock.c          the send lock; the WAIT records that signal handlers leave for
 *                              its next release
 *   support    events.c        in-process events: per-thread buffers, forktrace.h, -finstrument-
 *                              functions
 *              env.c           environment merging for exec and spawn, FORKTRACE_EXEC_TS
 *              exectarget.c    will the image an exec starts load the agent itself?
 *              remote.c        launch following: ssh's remote command behind a node collector
 *   hooks      hooks_exec.c    the exec family and posix_spawn
 *              hooks_fd.c      close, dup2, close_range, closefrom: the agent's fds stay its own
 *              hooks_proc.c    fork and the fork child's reset, the wait family, the exit paths,
 *                              system, popen
 *              hooks_thread.c  pthread_create and exit, thread names, prctl, seccomp
 *              signal.c        the fatal-signal handlers
 *              vfork.c         vfork
 *   init       init.c          the constructor: auxv, the environment it reads and hides, argv
 *
 * Lock order: the agent has one lock, the process-wide send lock
 * (agent_lock). It guards the connection (agent_g.fd), the frame buffer
 * (agent_buf), the thread table and the popen table. It is only ever taken
 * with the calling thread's nesting guard raised (AGENT_EMIT does both), so a
 * hook reached again from a signal handler of the same thread passes through
 * instead of deadlocking. fork() takes it with all signals blocked and
 * releases it in parent and child.
 */
#ifndef AGENT_INTERNAL_H
#define AGENT_INTERNAL_H

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "forktrace/wire.h"
#include "encode.h"
#include "sys.h"

#define AGENT_EXPORT __attribute__((visibility("default")))

/*
 * For the agent's large zero-initialised objects: they go in .data, not
 * .bss. A .bss that runs past the file's last page is an anonymous mapping
 * of its own, one more mapping for every traced image to create and tear
 * down, and for every fork to copy. In .data they share the one file
 * mapping of the writable segment; a page costs what it did (copied from
 * the page cache on first write instead of zero-filled), and the file is
 * ~400 KiB larger. test_rules.py agent_segments checks the rest of .bss
 * still ends on the file's last page.
 */
#define AGENT_DATA __attribute__((section(".data")))
#define AGENT_TLS __thread __attribute__((tls_model("initial-exec")))

/* Size of the one frame buffer used under the send lock. */
#define AGENT_BUF_SIZE (256u * 1024u)
/* The agent's socket is moved to the lowest free fd at or above this. */
#define AGENT_FD_MIN 1000
/* Bounds of the argv copy taken in the constructor for HELLO. */
#define AGENT_ARGV_MAX 1024
#define AGENT_ARGV_BYTES (32u * 1024u)

/* Room for a frame with no string in it (FORK, WAIT, EXIT, SIGNAL, LOST). */
#define AGENT_SMALL_FRAME 64
/* Room for such a frame with up to two rusage arrays (WAIT, EXIT). */
#define AGENT_RU_FRAME (AGENT_SMALL_FRAME + 2 * ENC_RUSAGE_MAX)

/* The process environment (glibc's `environ`). */
extern char **environ;

/* ==== base: str.c encode.c (encode.h), sys.h ================================================== */

/* Appends the decimal digits of v to p; returns the end, unterminated.
 * Signal-safe (agent/str.c). */
char *agent_utoa(char *p, uint64_t v);

/* ==== runtime: runtime.c ====================================================================== */

/*
 * Real functions, found with dlsym(RTLD_NEXT) in the constructor and lazily
 * (thread-safely, idempotent) by AGENT_REAL() when a hook runs before it.
 */
#define AGENT_REAL_LIST(X)                                                                         \
	X(fork, pid_t, (void))                                                                     \
	X(execve, int, (const char *, char *const[], char *const[]))                               \
	X(execvpe, int, (const char *, char *const[], char *const[]))                              \
	X(fexecve, int, (int, char *const[], char *const[]))                                       \
	X(execveat, int, (int, const char *, char *const[], char *const[], int))                   \
	X(posix_spawn, int,                                                                        \
	  (pid_t *, const char *, const posix_spawn_file_actions_t *, const posix_spawnattr_t *,   \
	   char *const[], char *const[]))                                                          \
	X(posix_spawnp, int,                                                                       \
	  (pid_t *, const char *, const posix_spawn_file_actions_t *, const posix_spawnattr_t *,   \
	   char *const[], char *const[]))                                                          \
	X(system, int, (const char *))                                                             \
	X(popen, FILE *, (const char *, const char *))                                             \
	X(pclose, int, (FILE *))                                                                   \
	X(wait, pid_t, (int *))                                                                    \
	X(waitpid, pid_t, (pid_t, int *, int))                                                     \
	X(wait3, pid_t, (int *, int, struct rusage *))                                             \
	X(wait4, pid_t, (pid_t, int *, int, struct rusage *))                                      \
	X(waitid, int, (idtype_t, id_t, siginfo_t *, int))                                         \
	X(pthread_create, int, (pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))   \
	X(pthread_exit, void, (void *))                                                            \
	X(pthread_setname_np, int, (pthread_t, const char *))                                      \
	X(prctl, int, (int, ...))                                                                  \
	X(exit, void, (int))                                                                       \
	X(_exit, void, (int))                                                                      \
	X(_Exit, void, (int))                                                                      \
	X(close, int, (int))                                                                       \
	X(close_range, int, (unsigned, unsigned, int))                                             \
	X(closefrom, void, (int))                                                                  \
	X(dup2, int, (int, int))                                                                   \
	X(dup3, int, (int, int, int))                                                              \
	X(dlclose, int, (void *))

#define AGENT_X(name, ret, args) typedef ret(*agent_##name##_fn) args;
AGENT_REAL_LIST(AGENT_X)
#undef AGENT_X

/* The real functions found so far, NULL until then. A member of agent_g,
 * on the page of its small fields: on a page of their own, the first
 * hook an image calls paid two page faults (the first read and the first
 * write). */
struct agent_reals {
#define AGENT_X(name, ret, args) void *name;
	AGENT_REAL_LIST(AGENT_X)
#undef AGENT_X
};

/* Slow path of AGENT_REAL: dlsym and publish. Returns NULL if missing. */
void *agent_resolve(void **slot, const char *name);
/* Resolves every real function (once per process): before a fork, so the
 * child never needs dlsym. Not signal-safe. */
void agent_resolve_all(void);

static inline void *agent_resolve_fast(void **slot, const char *name)
{
	void *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);

	return p ? p : agent_resolve(slot, name);
}

#define AGENT_REAL(name) ((agent_##name##_fn)agent_resolve_fast(&agent_g.real.name, #name))

/*
 * Start-up strings, written once per image (by the constructor, or before
 * it by agent_env_ready), are carved in order from one arena, the last
 * member of struct agent_state: they then share the page of the small
 * fields, or the next one. As PATH_MAX arrays side by side they took a
 * page each, and every page an image writes costs it a page fault: about
 * 0.5 us each, seven of them per image (perf record -e page-faults).
 * Sized for every string at its longest: four of up to PATH_MAX (the exe,
 * the agent's path, LD_PRELOAD=..., the spill directory), two built from
 * the socket's path, and argv with its pointers.
 */
#define AGENT_ARENA_SIZE                                                                           \
	(5 * PATH_MAX + 4 * sizeof(((struct sockaddr_un *)0)->sun_path) +                          \
	 AGENT_ARGV_MAX * sizeof(char *) + AGENT_ARGV_BYTES + AGENT_ENVIRON_MAX * sizeof(char *) + \
	 AGENT_REMOTE_ENV_BYTES + 64)
/* The launch-following variables kept in the arena (remote.c): their
 * values are bounded by AGENT_REMOTE_HEAD_MAX, PATH_MAX and
 * AGENT_REMOTE_RSH_MAX; one longer is taken as unset. */
#define AGENT_REMOTE_HEAD_MAX 256
#define AGENT_REMOTE_RSH_MAX 1024
#define AGENT_REMOTE_ENV_BYTES (PATH_MAX + AGENT_REMOTE_HEAD_MAX + AGENT_REMOTE_RSH_MAX + 64)
/* The program's environ without the agent's variables (agent_hide_env)
 * takes this many entries from the arena; a larger one is mapped. */
#define AGENT_ENVIRON_MAX 512

/* Process-wide state. Written by the constructor and the fork child reset;
 * fd and the counters change under the send lock. The small fields come
 * first, the send lock's word among them: a fork child writes all of them,
 * and each page it writes costs it a copy-on-write fault. */
struct agent_state {
	int lockword;                  /* the send lock: 0 free, 1 locked, 2 with waiters */
	int configured;                /* FORKTRACE_SOCK was set: merge env on exec/spawn */
	int env_ready;                 /* the env_* strings below are prepared (atomic) */
	int init_done;                 /* the constructor ran (whatever it decided) */
	int active;                    /* connected; hooks record (atomic) */
	int fd;                        /* our socket, or -1; valid once configured is set */
	int reconnected;               /* the one reconnect after EBADF/EPIPE was used */
	int failed;                    /* the one stderr line was written */
	int exit_sent;                 /* EXIT was sent for this image (atomic) */
	int pending_connect;           /* fork child: connect and say HELLO at the first write */
	int forked;                    /* this image is a fork child's copy (HELLO flag) */
	int spilling;                  /* fd is this image's spill file, not a socket */
	int ack_wait;                  /* wait for the collector's byte at exit (agent_await_ack) */
	int seccomp;                   /* a seccomp filter is in force: never call socket() */
	int table_keep;                /* the table's fd + 1, kept under a seccomp filter, or 0 */
	uint64_t table_dev, table_ino; /* what table_keep must be open on */
	char env_table[40];            /* "FORKTRACE_TABLE_FD=<fd>" while table_keep */
	int introduced;                /* this image's HELLO went to the table or a connection */
	struct ft_table_slot *table_slot;      /* this image's process-table slot, or NULL */
	struct ft_table_header *table_hdr;     /* the table's mapped header, or NULL */
	struct ft_table_slot *table_inherited; /* a fork child's mapping of its parent's slot */
	uint32_t table_idx;                    /* index of table_slot, or of the slot it left */
	int table_left;   /* this image wrote in slot table_idx, then connected */
	uint64_t exec_ts; /* from FORKTRACE_EXEC_TS: when this image was exec'd */
	uint64_t tick_ns; /* ns per clock tick (the unit of start_ticks), or 0 */
	pid_t pid;
	pid_t ppid;
	uint64_t start_ticks;
	uint64_t lost; /* events dropped, not yet reported (atomic) */
	/* The deferred-WAIT queue's next slot to reserve and to send (lock.c),
	 * beside the lock's word: every unlock reads them. */
	unsigned defer_head;
	unsigned defer_tail;
	unsigned clock_reads; /* readings so far, a hint (agent_clock_ns) */
	/* The thread inside the fork hook, or 0. Kept here, on the page of
	 * the lock's word, rather than in the thread's nesting guard: after
	 * fork the parent writes this page anyway (it releases the lock),
	 * where the guard's TLS page would be one more copy-on-write fault. */
	pid_t fork_tid;
	/* What a fork child resets, read here first: on their own pages,
	 * untouched in most processes, even reading these cost every fork
	 * child a page fault. */
	int threads_used;         /* agent_threads[0, n) were ever written (hooks_thread.c) */
	int popens_used;          /* agent_popens[0, n) were ever written (hooks_proc.c) */
	int ev_used;              /* some thread recorded in-process events (events.c) */
	uint32_t table_slot_size; /* the table's slot size, once its header is mapped */
	uint32_t table_handed;    /* the slot FORKTRACE_EXEC_TS handed over + 1, or 0 */
	uint32_t table_capacity;  /* slots the table file holds, once its header is mapped */
	uint32_t table_used;      /* bytes this image committed in table_slot */
	/* agent_fork_child, for agent_same_process below it: registered by
	 * the constructor before it sets pid (with pid 0 nothing is reset). */
	void (*fork_child_reset)(pid_t parent_pid, uint64_t boot_before);
	struct agent_reals real;
	struct sockaddr_un addr;
	socklen_t addrlen;
	char name[16];
	/* The launcher's rank, read once from the environment (wire.h,
	 * "Ranks"); rank_var is a static string. */
	int has_rank, has_local_rank;
	uint32_t rank, local_rank;
	const char *rank_var;
	/* The strings below point into arena; NULL until set. */
	const char *exe; /* /proc/self/exe: handed over, or read */
	/* argv copy for HELLO of this image and of its fork children. */
	const char **argv;
	size_t argc;
	int argv_truncated;
	/* Strings for env merging, prepared with env_ready. */
	char *env_sock;      /* FORKTRACE_SOCK=<path> (envp entries are char *) */
	char *env_preload;   /* LD_PRELOAD=<original value> */
	char *env_spill;     /* FORKTRACE_SPILL=<dir>, or NULL */
	char *env_functions; /* FORKTRACE_FUNCTIONS=<value>, or NULL */
	/* Launch following (remote.c): FORKTRACE_HEAD=, FORKTRACE_REMOTE=,
	 * FORKTRACE_RSH= entries, NULL when unset, and their values. Launches
	 * are followed only with both of the first two. */
	char *env_head, *env_remote, *env_rsh;
	const char *remote_head, *remote_path, *remote_rsh;
	const char *agent_path; /* this .so, as loaded */
	const char *agent_base; /* basename in agent_path */
	const char *table_path; /* the process table beside the socket, or NULL */
	const char *spill_dir;  /* $FORKTRACE_SPILL: where spill files go, or NULL */
	const char *spill_tmp;  /* else $TMPDIR, or NULL (agent_spill_open) */
	size_t arena_used;
	char arena[AGENT_ARENA_SIZE];
};

/* Declared hidden, as they are defined: every file then reaches them
 * relative to its code, not through an address it loads first (a load
 * and a register more in every hook). */
extern struct agent_state agent_g __attribute__((visibility("hidden")));
extern unsigned char agent_buf[AGENT_BUF_SIZE] __attribute__((visibility("hidden")));

/* Per-thread state, initial-exec TLS (house rule 10). */
extern AGENT_TLS int agent_t_guard;     /* >0: inside the agent, hooks pass through */
extern AGENT_TLS int agent_t_in_vfork;  /* set from vfork() until the parent resumes */
extern AGENT_TLS pid_t agent_t_tid;     /* cached kernel tid (see agent_tid) */
extern AGENT_TLS pid_t agent_t_tid_pid; /* the agent_g.pid it was cached in */
extern AGENT_TLS int agent_t_tramp;     /* thread started by our trampoline */

/* Kernel tid of the calling thread, cached. Signal-safe. */
pid_t agent_tid(void);

/* Is the calling thread inside the fork hook (in fork's atfork handlers,
 * say)? Then it holds the send lock. Signal-safe. */
static inline bool agent_in_fork(void)
{
	pid_t t = __atomic_load_n(&agent_g.fork_tid, __ATOMIC_RELAXED);

	return t && t == agent_tid();
}

/* Is the calling thread inside the agent: nested in it (agent_t_guard),
 * or inside the fork hook, holding the send lock? Signal-safe. */
static inline bool agent_nested(void)
{
	return agent_t_guard || agent_in_fork();
}

/* True when a hook must only call the real function: agent inactive,
 * nested, or in a vfork child (which shares our memory). */
static inline bool agent_bypass(void)
{
	return !__atomic_load_n(&agent_g.active, __ATOMIC_RELAXED) || agent_nested() ||
	       agent_t_in_vfork;
}

/* errno = e, writing errno only when it differs: in a fork's parent the
 * page of errno is shared with the child until the child execs, and a
 * write would copy it. Signal-safe. */
static inline void agent_errno_restore(int e)
{
	if (errno != e)
		errno = e;
}

/* Clock id's reading in ns. Signal-safe (a system call or the vDSO). */
uint64_t agent_clock_ns(clockid_t id);
/* CLOCK_MONOTONIC ns. Signal-safe. */
uint64_t agent_now(void);

/* Count one dropped event (no lock needed). Signal-safe. */
void agent_count_lost(void);

/* A seccomp filter is in force (a hook installed it, or an image of a
 * filtered process handed over the table's fd). Signal-safe. */
void agent_seccomp_seen(void);

/* Write the one "forktrace-agent: <msg>" line to stderr and disable. */
void agent_fail(const char *msg);

/* Is this still the process agent_g describes? A raw clone child becomes
 * a fork child here; false for one that shares its parent's memory, which
 * must record nothing (runtime.c). Caller is not inside the agent.
 * Signal-safe. Preserves errno. */
bool agent_same_process(void);

/* CLOCK_BOOTTIME ns, the clock of start_ticks. Signal-safe. */
uint64_t agent_boot_now(void);
/* getrusage(who) into *out through the raw system call (no libc import,
 * no cancellation point). Returns 0, or -errno (then *out is unset).
 * Signal-safe. Preserves errno. */
int agent_rusage(int who, struct enc_rusage *out);
/* Field 22 (starttime, in clock ticks) of /proc/self/stat; the comm into
 * name (namecap bytes) unless name is NULL. 0 when it cannot be read.
 * Signal-safe. */
uint64_t agent_read_stat(char *name, size_t namecap);
/*
 * The start time of a fork child in clock ticks, as /proc/<pid>/stat will
 * show it, without reading /proc: in a new process that costs ~6 us of
 * kernel time (its /proc entries are made, then torn down at exit), which
 * a fork+exec loop pays for every child. The kernel takes the child's
 * start time during fork, so it lies between the parent's clock reading
 * before the call (before) and the child's first one after it; when both
 * fall in the same tick, that tick is the start time. Otherwise (a fork
 * across a tick boundary: about fork's duration in 10 ms) returns 0, and
 * the child reads /proc when it needs the value. Signal-safe.
 */
static inline uint64_t agent_fork_start_ticks(uint64_t before)
{
	uint64_t after = agent_boot_now();

	if (!agent_g.tick_ns || !before || before / agent_g.tick_ns != after / agent_g.tick_ns)
		return 0;
	return after / agent_g.tick_ns;
}

/* ==== startup: startup.c ====================================================================== */

/* n bytes of the start-up arena (pointer-aligned when align), or NULL
 * when it is full. Start-up only: the constructor, or agent_env_load
 * before it. */
static inline char *agent_arena_take(size_t n, bool align)
{
	size_t at = agent_g.arena_used;

	if (align)
		at = (at + sizeof(void *) - 1) & ~(sizeof(void *) - 1);
	if (n > sizeof(agent_g.arena) - at)
		return NULL;
	agent_g.arena_used = at + n;
	return agent_g.arena + at;
}
/* The alen bytes at a and the blen at b (borrowed), joined and
 * '\0'-terminated in the arena; NULL when it is full. Start-up only. */
char *agent_arena_join(const char *a, size_t alen, const char *b, size_t blen);
/* Prepares the strings for env merging from sock (FORKTRACE_SOCK's value)
 * and preload (LD_PRELOAD's, or NULL), both borrowed. Returns 0 or -1.
 * Start-up only. */
int agent_prepare_env(const char *sock, const char *preload);

/* Are the strings for env merging prepared? Prepares them once from
 * /proc/self/environ when a hook runs before the constructor (STYLE
 * "never" rule 8). Only async-signal-safe calls, except dladdr on that
 * one early call. */
bool agent_env_ready(void);

/* ==== slot: slot.c ============================================================================ */

/* The process table (slot.c, include/forktrace/wire.h). */
/* Claims a slot of the collector's table and writes the n bytes of hello
 * (this image's HELLO frame) into it. Returns 0: the image speaks there
 * from now on; or -errno: it must connect (no table, full, HELLO too
 * long). Caller holds the send lock or is single-threaded. Signal-safe. */
int agent_table_start(const void *hello, size_t n);
/* Appends a frame of n bytes gathered from iov[0..cnt) to the slot.
 * Returns 0, or -ENOSPC when it does not fit. Caller holds the send lock. */
int agent_table_append(const struct iovec *iov, int cnt, size_t n);
/* The frame did not fit: claims a new slot that continues this one and
 * writes it there. Returns 0 or -errno (then connect). Caller holds the
 * send lock. Signal-safe. */
int agent_table_continue(const struct iovec *iov, int cnt, size_t n);
/* The image goes on to a connection: unmaps its slot; its next HELLO
 * names the slot it leaves (table_left). */
void agent_table_leave(void);
/* A seccomp filter is about to be installed, which may refuse open():
 * opens the table now (if this process has none kept) and keeps the fd,
 * for this process's new slots and for the images it execs. Caller holds
 * the send lock. */
void agent_table_keep(void);
/* In the constructor: fd (FORKTRACE_TABLE_FD's value) was handed over by
 * the image before the exec; kept if it is open on a process table. */
void agent_table_take_fd(const char *fd);
/* The kept fd if it is still open on the table, else -1. Signal-safe. */
int agent_table_kept_fd(void);
/* The longest frame a slot holds (the table's header is mapped). */
size_t agent_table_frame_max(void);
/* In a fork child: drop the parent's slot. Signal-safe. */
void agent_table_fork_child(void);
/* Maps the table's header now if this image writes in a slot it was
 * handed without it: its children then get their slots claimed for them.
 * Once per process; a fork child (which owns no slot yet) maps nothing.
 * Signal-safe. */
void agent_table_need_header(void);
/* Claims a slot for the image an exec or posix_spawn is about to start
 * (handed over in FORKTRACE_EXEC_TS), so that it maps only that slot, not
 * the table's header too. Returns 0 or -errno. Signal-safe. */
int agent_table_claim_for(uint32_t *idx);
/* The exec-target cache in the table's header page (FT_TABLE_TARGETS
 * entries), mapping the header as agent_table_need_header does; NULL
 * without it. Signal-safe. */
struct ft_table_target *agent_table_targets(void);

/* ==== transport: transport.c ================================================================== */

/* Write a frame of n bytes gathered from iov[0..cnt) (cnt <= 4; n < 0:
 * the encoder failed), with passfd (>= 0) attached as SCM_RIGHTS. When it
 * cannot be written, nevents events are counted lost and a negative errno
 * is returned; 0 on success. Caller holds the send lock. Signal-safe.
 * Preserves errno. */
int agent_writev_locked(const struct iovec *iov, int cnt, ssize_t n, int passfd, uint64_t nevents);

/* Write a frame of n bytes (n < 0: the encoder failed, count a loss).
 * Caller holds the send lock. Reconnects once on EBADF/EPIPE, reports
 * pending losses after a successful write. Signal-safe. Preserves errno. */
void agent_write_locked(const void *frame, ssize_t n);

/* The image introduces itself: in a slot of the collector's process
 * table if it can, else on a new connection; if neither works, through
 * agent_on_collector_gone. Caller holds the send lock or is
 * single-threaded. Signal-safe. */
void agent_open_channel(void);

/* A fork child that has not spoken yet (connects at its first write).
 * Signal-safe. */
static inline bool agent_silent_fork_child(void)
{
	return __atomic_load_n(&agent_g.pending_connect, __ATOMIC_RELAXED) != 0;
}

/* The collector cannot be reached: write to a spill file from now on
 * (docs/TRACE_FORMAT.md, "Spill files"), or stop recording when that
 * fails too. Caller holds the send lock or is single-threaded.
 * Signal-safe. */
void agent_on_collector_gone(void);

/* The image ends: if its connection is to a collector of another uid
 * (this process gave up the collector's uid) or outside its pid
 * namespace, waits (a second at most) for the byte with which the
 * collector says it checked this process's HELLO, which it cannot once
 * the process is gone. Preserves errno. */
void agent_await_ack(void);

/* May the agent make a connection (socket, connect), or is the process
 * under a seccomp filter that might kill it for that? Asks the kernel
 * until a filter is seen (one prctl). Signal-safe. */
bool agent_may_connect(void);

/* Must a frame of n bytes be made shorter (a prefix of its argv) to go
 * anywhere: this image writes in the table, the frame would not fit a
 * slot, and a seccomp filter forbids the connection it would need?
 * Signal-safe. */
bool agent_frame_needs_cut(ssize_t n);

/* ==== lock: lock.c ============================================================================ */

/* Send lock (futex). Signal-safe trylock; lock/unlock never allocate. */
void agent_lock(void);
bool agent_trylock(void);
void agent_unlock(void);

/* Write one frame of n bytes (see agent_write_locked) under the send lock,
 * raising the nesting guard. For frames encoded into the caller's stack:
 * a fork parent then writes no page of agent_buf, which fork made
 * copy-on-write. Signal-safe. Preserves errno. */
void agent_emit_frame(const void *frame, ssize_t n);

/* Encode with `call` into agent_buf and write it, under the send lock. */
#define AGENT_EMIT(call)                                                                           \
	do {                                                                                       \
		agent_t_guard++;                                                                   \
		agent_lock();                                                                      \
		agent_write_locked(agent_buf, (call));                                             \
		agent_unlock();                                                                    \
		agent_t_guard--;                                                                   \
	} while (0)

/* Queue a WAIT record of this thread for its next release of the send
 * lock: for a wait hook reached from a signal handler while the thread is
 * inside the agent. ru (borrowed; NULL: none) is copied. Counts a loss
 * when the queue is full. Signal-safe. */
void agent_defer_wait(uint64_t ts, pid_t child, int status, const struct enc_rusage *ru);
/* In a fork child: forget the parent's deferred records. Signal-safe. */
void agent_defer_fork_child(void);

/* ==== support: events.c env.c exectarget.c remote.c =========================================== */

/* In-process events (events.c). */
/* Reads FORKTRACE_FUNCTIONS ("0": the -finstrument-functions hooks do
 * nothing). Constructor only. */
void agent_ev_init(const char *functions);
/* Send what the calling thread recorded (before fork, exec, spawn, exit).
 * Takes the send lock; never from inside the agent. */
void agent_ev_flush_self(void);
/* The same with the send lock held by the caller (a fatal-signal handler
 * that got it with agent_trylock). Signal-safe. */
void agent_ev_flush_self_locked(void);
/* The calling thread ends: flush and give its slot back. */
void agent_ev_thread_end(void);
/* In a fork child: forget the parent's buffers. Signal-safe. */
void agent_ev_fork_child(void);

/*
 * Environment merging for exec and spawn: make sure envp carries LD_PRELOAD
 * with this agent and FORKTRACE_SOCK. Only uses the strings prepared in the
 * constructor, the caller's stack (struct agent_env) and mmap: safe in a
 * vfork child and after a multithreaded fork.
 */
struct agent_env {
	char **envp; /* what to pass to the real call */
	void *map;   /* mmap'd storage, or NULL */
	size_t maplen;
	/* The vector, when it fits (about 250 entries; else an mmap): on the
	 * stack of a fork child, where every page written costs a fault. */
	char area[2048] __attribute__((aligned(16)));
};

/* Fill e->envp from envp (borrowed; NULL means empty). */
void agent_env_merge(struct agent_env *e, char *const *envp, const char *extra);
/* What FORKTRACE_EXEC_TS hands a new image (format: env.c). */
struct agent_handover {
	uint64_t exec_ns;     /* when exec/posix_spawn was called, or 0 */
	uint64_t ticks;       /* start time in clock ticks, or 0 */
	uint64_t boot_before; /* spawner's CLOCK_BOOTTIME ns before the spawn, or 0 */
	uint32_t slot;        /* process-table slot claimed for the image + 1, or 0 */
	const char *exe;      /* /proc/self/exe to be (borrowed from envp), or NULL */
	pid_t pid;            /* the image's pid must be this, or 0 */
	pid_t ppid;           /* its parent's pid must be this, or 0 */
};
/* Room for "<slot>:" in FORKTRACE_EXEC_TS. */
#define AGENT_EXEC_TS_SLOT 12
/*
 * Room for the exe's name in FORKTRACE_EXEC_TS, and for the $PATH search
 * and the name's resolution that fill it (exectarget.c). The buffer is on
 * a fork child's stack, where each page it writes costs a page fault: as
 * PATH_MAX it pushed the child's way to exec onto two more pages. An exe
 * with a longer name is left to /proc; a $PATH candidate that does not
 * fit makes the check give up (the caller announces the exec with an
 * EXEC record).
 */
#define AGENT_EXEC_TS_EXE 1024
/* Room for "FORKTRACE_EXEC_TS=<ns>:<ticks>:<boot_before>:<P|C><pid>:<slot>:<exe>";
 * the exe gets what is left after AGENT_EXEC_TS_SLOT. */
#define AGENT_EXEC_TS_SIZE                                                                         \
	(sizeof(FT_ENV_EXEC_TS) + 4 * 21 + AGENT_EXEC_TS_SLOT + AGENT_EXEC_TS_EXE)
/* Writes "FORKTRACE_EXEC_TS=<ns>:<ticks>:<boot_before>:<P|C><pid>:" into
 * buf (AGENT_EXEC_TS_SIZE bytes, the caller's) and returns its length:
 * the exe, or nothing, goes at buf + length. self: the new image runs in
 * this process (an exec), else in a child of it (posix_spawn, vfork).
 * Signal-safe. */
size_t agent_env_exec_ts(char *buf, uint64_t ns, uint64_t ticks, uint64_t boot_before, bool self);
/* Puts "<slot>:" at buf + off, before the exe there (buf as filled by
 * agent_env_exec_ts, with AGENT_EXEC_TS_SLOT bytes left). Signal-safe. */
void agent_env_exec_ts_slot(char *buf, size_t off, uint32_t slot);

/* The variables the constructor reads (borrowed from envp, NULL when
 * unset). */
struct agent_start_env {
	const char *sock;         /* FORKTRACE_SOCK */
	const char *preload;      /* LD_PRELOAD */
	const char *spill;        /* FORKTRACE_SPILL */
	const char *tmpdir;       /* TMPDIR */
	const char *functions;    /* FORKTRACE_FUNCTIONS */
	const char *table_fd;     /* FORKTRACE_TABLE_FD */
	const char *head;         /* FORKTRACE_HEAD */
	const char *remote;       /* FORKTRACE_REMOTE */
	const char *rsh;          /* FORKTRACE_RSH */
	struct agent_handover ho; /* FORKTRACE_EXEC_TS, all 0/NULL without one */
	/* The launcher's rank variables (wire.h, "Ranks"), by precedence:
	 * the values of env.c's agent_rank_vars[], and of the local rank's
	 * variables in the order env.c lists. */
	const char *rank[5];
	const char *local_rank[4];
};
/* Takes the launcher's rank from e into agent_g: the first variable of
 * each list whose value is a plain number. Constructor only. */
void agent_env_ranks(const struct agent_start_env *e);
/* One pass over envp for the constructor (getenv would be one more
 * import for the loader to look up, and a pass per variable): fills e,
 * and removes FORKTRACE_EXEC_TS and FORKTRACE_TABLE_FD from envp, before
 * main (single-threaded). */
void agent_env_take_start(char **envp, struct agent_start_env *e);
/* The user's part of an LD_PRELOAD value v: v without its first entry
 * that names this agent, and one separator beside it, into out
 * (strlen(v) + 1 bytes). Returns false when nothing remains of the
 * user's (v named the agent only): then the program had no LD_PRELOAD. */
bool agent_preload_strip(const char *v, char *out);
/* Is envp entry e one of the agent's own variables (FORKTRACE_SOCK,
 * FORKTRACE_SPILL, FORKTRACE_FUNCTIONS, FORKTRACE_EXEC_TS,
 * FORKTRACE_HEAD, FORKTRACE_REMOTE, FORKTRACE_RSH), which the program
 * does not see and every exec and spawn gets back? */
bool agent_env_is_ours(const char *e);
/* Release what agent_env_merge mapped. Preserves errno. */
void agent_env_release(struct agent_env *e);

/*
 * Will the image that exec(kind, dirfd, path, flags) starts load the agent
 * itself (a dynamic, non-setuid ELF of our class, or a script)? Then its
 * HELLO tells everything an EXEC record would. False whenever it cannot
 * tell, and for a relative name when !cwd_known (posix_spawn file actions
 * may change directory first). kind is an FT_EXEC_* (the p-variants search
 * $PATH). exe (cap bytes, borrowed) gets what /proc/<pid>/exe
 * of the new image will say: the absolute, symlink-free path of the file
 * opened, for an ELF only (a script's is its interpreter); "" when it
 * cannot tell. Only async-signal-safe calls and stack memory: it runs in
 * fork children. Preserves errno.
 */
bool agent_exec_target(unsigned kind, int dirfd, const char *path, int flags, bool cwd_known,
		       char *exe, size_t cap);

/*
 * Launch following (remote.c, docs/MULTIHOST.md): the remote command of
 * an ssh command line gets a node collector in front of it.
 */
/* Keeps FORKTRACE_HEAD, FORKTRACE_REMOTE and FORKTRACE_RSH (values
 * borrowed from envp, NULL when unset) for the images this one starts,
 * and follows launches when both of the first two are set. Constructor
 * only. */
void agent_remote_init(const char *head, const char *remote, const char *rsh);
/* Does this image follow launches? One load: the exec path asks first. */
static inline bool agent_remote_armed(void)
{
	return __atomic_load_n(&agent_g.remote_head, __ATOMIC_RELAXED) != NULL;
}
/* Is the program at path (its basename) ssh, rsh, or a name in
 * FORKTRACE_RSH? Signal-safe. */
bool agent_remote_is_rsh(const char *path);
/* Destinations this long or longer are not followed (untraced). */
#define AGENT_REMOTE_DEST_MAX 256
/* A followed launch: the argv to exec instead of the caller's. */
struct agent_remote {
	char **argv;      /* the new argv (in map), NULL when left alone */
	const char *dest; /* the destination, borrowed from the caller's argv */
	uint32_t flags;   /* FT_REMOTE_*: UNTRACED when it could not be rewritten */
	void *map;        /* what agent_remote_release unmaps */
	size_t maplen;
};
/* If argv (borrowed, never written) is an ssh command line with a remote
 * command, fills r and returns 1: r->argv is argv with that command
 * rewritten to run behind a node collector given launcher as its
 * launcher's pid, or NULL (flags FT_REMOTE_UNTRACED) when the result
 * would not fit the bounds of an exec. Returns 0 when there is no launch
 * to follow (r->argv NULL). Signal-safe: a raw mmap, the agent's string
 * functions. */
int agent_remote_rewrite(struct agent_remote *r, char *const argv[], pid_t launcher);
/* Unmaps what agent_remote_rewrite mapped. Preserves errno. */
void agent_remote_release(struct agent_remote *r);

/* ==== hooks: hooks_exec.c hooks_fd.c hooks_proc.c hooks_thread.c signal.c vfork.c ============= */

/* Fatal-signal handlers, installed by the constructor. */
void agent_signals_install(void);
/* Gives the signals where our handler is back to their default action. */
void agent_signals_uninstall(void);
/* Will nobody wait for this process? Its SIGCHLD disposition, inherited
 * from its parent at fork, is SIG_IGN or has SA_NOCLDWAIT: the kernel
 * reaps its children, and so (unless the parent changed it since) its own
 * end too. One rt_sigaction. Signal-safe. Preserves errno. */
bool agent_exit_unwaited(void);
/* libseccomp's (its scmp_filter_ctx is a void *), hooked in hooks_thread.c. */
int seccomp_load(void *ctx);
/* Registers the on_exit handler that sends EXIT when main returns or
 * exit() runs (hooks_proc.c). Constructor only. */
void agent_exit_watch(void);

/* Thread table (pthread_t -> tid), guarded by the send lock. */
void agent_threads_reset(void);

/* Popen table reset in a fork child. */
void agent_popen_reset(void);

/* In the child of fork(), with the send lock held and signals blocked:
 * drop inherited state, release the lock; the child connects at its first
 * write. boot_before is agent_boot_now() taken by the parent just before
 * the fork. Only async-signal-safe calls. */
void agent_fork_child(pid_t parent_pid, uint64_t boot_before);

/* In a vfork child: agent_boot_now() as the vfork began (vfork.c). */
uint64_t agent_vfork_boot_before(void);
/* In a vfork child (agent_t_in_vfork): its exec call of path with argv at
 * ts is about to be made / returned err; the parent's FORK record tells
 * it (agent/vfork.c). Signal-safe. */
void agent_vfork_note_exec(uint64_t ts, const char *path, char *const argv[]);
void agent_vfork_note_fail(int err);
/* In a vfork child (agent_t_in_vfork): its exec call is a launch r
 * (borrowed) of launcher (its own pid). The parent, once it resumes,
 * unmaps r->map (the child cannot, once its exec succeeded) and sends
 * REMOTE if the exec did not return. r NULL: the exec returned, and the
 * child released r itself. Returns false when there is no note to carry
 * it (vforks nested too deep): then the child must not rewrite.
 * Signal-safe. */
bool agent_vfork_note_remote(const struct agent_remote *r, pid_t launcher);

/* ==== init: init.c ============================================================================ */

/* init.c declares nothing: the constructor is static, and nothing calls up into it. */

#endif /* AGENT_INTERNAL_H */
