/*
 * Message encoder of the agent: one frame (8-byte header + msgpack map with
 * integer keys, see include/forktrace/wire.h) per call, written into a
 * caller-owned buffer. No allocation, no locks, no libc state: every enc_*
 * function is signal-safe and safe in the child of a multithreaded fork.
 *
 * Each enc_* function returns the frame length in bytes, or -ENOBUFS when the
 * frame does not fit in cap bytes (the buffer content is then unspecified),
 * or -EPROTO when it wrote another number of keys than its map announced (a
 * map's size is counted by hand: tests/wire/ checks every variant).
 * Keys are written in ascending key order, so the bytes are a function of the
 * arguments only (tests/wire/ checks them against fixed vectors).
 *
 * This header is shared with tests/wire/, which compiles encode.c directly.
 */
#ifndef AGENT_ENCODE_H
#define AGENT_ENCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "forktrace/wire.h"

/* HELLO fields. All pointers are borrowed for the duration of the call; a
 * NULL string is encoded as "". argv may be NULL when argc is 0. */
struct enc_hello {
	uint64_t ts;
	uint64_t exec_ts; /* 0: not known, key left out */
	uint64_t realtime;
	uint64_t start_ticks;
	bool from_table; /* resumed from process-table slot table_slot */
	uint32_t table_slot;
	int32_t pid;
	int32_t ppid;
	int32_t tid;
	uint32_t flags;
	const char *exe;
	const char *cwd;
	const char *name;
	const char *const *argv;
	size_t argc;
	/* A launcher's rank (wire.h, "Ranks"): RANK and RANK_VAR when
	 * has_rank, LOCAL_RANK when has_local_rank. */
	bool has_rank, has_local_rank;
	uint32_t rank, local_rank;
	const char *rank_var;
};

ssize_t enc_hello(void *buf, size_t cap, const struct enc_hello *h);

/* A struct rusage as the wire carries it (FT_K_RUSAGE: wire.h, enum
 * ft_rusage_field): times in ns, the rest as the kernel counts them. */
struct enc_rusage {
	uint64_t v[FT_RUSAGE_N];
};

struct rusage;
/* *out from *ru; negative fields (none the kernel gives) become 0.
 * Signal-safe. */
void enc_rusage_from(struct enc_rusage *out, const struct rusage *ru);

/* The most bytes one rusage array adds to a frame: its key, the array's
 * header, and each value as a uint64 at worst. */
#define ENC_RUSAGE_MAX (2 + 9 * FT_RUSAGE_N)

/* FORK: CHILD when err == 0, otherwise ERRNO = err and no CHILD. */
ssize_t enc_fork(void *buf, size_t cap, uint64_t ts, int32_t tid, uint32_t kind, int32_t child,
		 int32_t err);

/* FORK of vfork child `child` whose last exec call was path with
 * argv[0..argc) at exec_ts, failed with child_err (0: did not return). */
ssize_t enc_vfork(void *buf, size_t cap, uint64_t ts, int32_t tid, int32_t child, uint64_t exec_ts,
		  const char *path, const char *const *argv, size_t argc, int32_t child_err);

/* EXEC: the first argc entries of argv (borrowed) are sent; RUSAGE only
 * when ru != NULL (borrowed). */
ssize_t enc_exec(void *buf, size_t cap, uint64_t ts, int32_t tid, uint32_t kind, const char *path,
		 const char *const *argv, size_t argc, const struct enc_rusage *ru);

ssize_t enc_exec_fail(void *buf, size_t cap, uint64_t ts, int32_t tid, int32_t err,
		      const char *path);

/* SPAWN: CHILD present only when ret == 0; ERRNO = ret always. */
ssize_t enc_spawn(void *buf, size_t cap, uint64_t ts, int32_t tid, uint32_t kind, int32_t child,
		  int32_t ret, const char *path, const char *const *argv, size_t argc);

/* WAIT; RUSAGE only when ru != NULL (borrowed). */
ssize_t enc_wait(void *buf, size_t cap, uint64_t ts, int32_t tid, int32_t child, int32_t status,
		 const struct enc_rusage *ru);

/* THREAD_START / THREAD_END (type selects which); NAME only when name != NULL. */
ssize_t enc_thread(void *buf, size_t cap, unsigned type, uint64_t ts, int32_t tid,
		   const char *name);

ssize_t enc_thread_name(void *buf, size_t cap, uint64_t ts, int32_t tid, const char *name);

/* EXIT; RUSAGE when self != NULL, RUSAGE_CHILDREN when children != NULL
 * (both borrowed). */
ssize_t enc_exit(void *buf, size_t cap, uint64_t ts, int32_t tid, int32_t code,
		 const struct enc_rusage *self, const struct enc_rusage *children);

ssize_t enc_signal(void *buf, size_t cap, uint64_t ts, int32_t tid, int32_t signo);

/* SHELL_BEGIN (end == 0) or SHELL_END (end != 0, with STATUS). */
ssize_t enc_shell(void *buf, size_t cap, int end, uint64_t ts, int32_t tid, uint32_t kind,
		  const char *cmd, int32_t status);

/* SHELL_END of a call that failed (returned -1 or NULL) with errno. */
ssize_t enc_shell_fail(void *buf, size_t cap, uint64_t ts, int32_t tid, uint32_t kind,
		       const char *cmd, int32_t status, int32_t errnum);

ssize_t enc_lost(void *buf, size_t cap, uint64_t ts, int32_t tid, uint64_t count);

/* CONTINUE: the first frame of a process-table slot after slot `slot`. */
ssize_t enc_continue(void *buf, size_t cap, uint64_t ts, int32_t tid, uint32_t slot);

/* SHM: a region of event buffer slots (its memfd goes as SCM_RIGHTS). */
ssize_t enc_shm(void *buf, size_t cap, uint64_t ts, int32_t tid, uint32_t first_slot,
		uint32_t count, uint64_t slot_size, uint64_t tsc);

/* EVENTS without its data: the frame header and the payload up to and
 * including the bin header of DATA; the caller sends data_len bytes of
 * records right behind it (the frame header counts them). */
ssize_t enc_events_head(void *buf, size_t cap, uint64_t ts, int32_t tid, uint32_t slot,
			uint64_t offset, uint64_t tsc, uint32_t data_len);

/* REMOTE: pid launched dest (borrowed) through ssh, with forktrace
 * (borrowed) to run there; CHILD only when child > 0. flags: FT_REMOTE_*. */
ssize_t enc_remote(void *buf, size_t cap, uint64_t ts, int32_t tid, int32_t pid, int32_t child,
		   const char *dest, const char *forktrace, uint32_t flags);

/* MODULE: a loaded object and where it lies. */
ssize_t enc_module(void *buf, size_t cap, uint64_t ts, int32_t tid, const char *path, uint64_t bias,
		   uint64_t lo, uint64_t hi);

#endif /* AGENT_ENCODE_H */
