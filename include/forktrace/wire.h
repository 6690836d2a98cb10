/*
 * forktrace wire protocol: the one contract between the agent (in every
 * traced process) and the collector.
 *
 * Transport: one SOCK_STREAM Unix socket connection per process image. The
 * agent connects to the path in $FORKTRACE_SOCK, sends frames, and the
 * connection's end (EOF) tells the collector that the image is gone (exit,
 * exec, or death). After fork the child never writes on the parent's
 * connection: it opens its own.
 *
 * Who may connect: the socket is open to every uid, so that a process of
 * the tree that gave up the collector's uid (a daemon dropping root) can
 * still report. The collector refuses a peer of another uid whose
 * ancestors (/proc) do not include the collector (a child subreaper: every
 * process of the tree has it as an ancestor), and closes a connection
 * whose HELLO gives a pid other than the peer's (SO_PEERCRED), or than
 * its pid in its own pid namespace (the last of its NSpid). Both read
 * /proc, which a process that ended and was reaped no longer has: so
 * when the collector is of another uid than the agent, or outside its pid
 * namespace (the listener's SO_PEERCRED pid is 0), the agent sets
 * FT_HELLO_ACK in its HELLO, the collector writes one byte on the
 * connection once it has checked that HELLO, and the agent waits for it
 * (at most a second) before its process ends. Nothing else ever travels
 * from the collector to the agent.
 *
 * Frame: an 8-byte header followed by a msgpack payload.
 *
 *   byte 0..1  'F' 'T'                 (FT_WIRE_MAGIC0, FT_WIRE_MAGIC1)
 *   byte 2     protocol version        (FT_WIRE_VERSION)
 *   byte 3     message type            (enum ft_msg_type)
 *   byte 4..7  payload length in bytes, unsigned 32-bit little-endian,
 *              at most FT_WIRE_MAX_PAYLOAD
 *
 * Payload: one msgpack map whose keys are small positive integers
 * (enum ft_key). A reader ignores keys it does not know, so fields can be
 * added without a version bump; removing or re-typing a field needs one.
 * Strings are msgpack str (raw bytes; not necessarily UTF-8: argv and paths
 * are whatever the kernel gave). Integers are msgpack int/uint.
 *
 * Times are CLOCK_MONOTONIC nanoseconds (FT_K_TS) unless the key says
 * otherwise. Every message except HELLO carries FT_K_TS and FT_K_TID.
 *
 * Test vectors: tests/wire/ holds byte-exact encodings of every message
 * type; both the agent's encoder and the collector's decoder are checked
 * against them.
 */
#ifndef FORKTRACE_WIRE_H
#define FORKTRACE_WIRE_H

#include <stdint.h>
#include <time.h>

#define FT_WIRE_MAGIC0 0x46 /* 'F' */
#define FT_WIRE_MAGIC1 0x54 /* 'T' */
#define FT_WIRE_VERSION 1
#define FT_WIRE_HEADER_SIZE 8
/* The collector closes a connection that announces a larger payload. */
#define FT_WIRE_MAX_PAYLOAD (16u * 1024u * 1024u)

/* Environment variables the collector sets for the traced command. */
#define FT_ENV_SOCK "FORKTRACE_SOCK"       /* path of the collector's socket */
#define FT_ENV_SPILL_DIR "FORKTRACE_SPILL" /* where spill files go if no collector */
#define FT_ENV_PRELOAD "LD_PRELOAD"
/* "0": the agents record no function calls (forktrace run --no-functions). */
#define FT_ENV_FUNCTIONS "FORKTRACE_FUNCTIONS"
/* Set by an exec'ing fork or vfork child and by posix_spawn for the new
 * image only: "<ns>:<ticks>:<boot_before>:<P|C><pid>:[<slot>:]<exe>", the
 * time of the exec or spawn (monotonic ns), the start time in clock ticks
 * if known (0 if not), the CLOCK_BOOTTIME ns read just before the vfork or
 * spawn (from which the image works out its start ticks), whom it is for
 * (P: the process with that pid, which execs; C: a child of that pid),
 * the process-table slot claimed for the image (see "The process table"),
 * and the exe as /proc/self/exe would name it (empty for a script).
 * Written and parsed in agent/env.c. The new image's agent removes it
 * from environ before main runs, so the program never sees it, reports
 * the time as FT_K_EXEC_TS in its HELLO, and need not read /proc. An
 * image it is not for (it outlived an image that never loaded the agent)
 * ignores it whole, and so does COMMAND: forktrace run drops it. */
#define FT_ENV_EXEC_TS "FORKTRACE_EXEC_TS"
/* Set by an agent under a seccomp filter for the image it execs: the
 * number of an fd (inherited across the exec) open on the process table.
 * A filter may refuse open(): the image then maps its slot through this
 * fd. The image's agent checks that the fd is the table, removes the
 * variable from environ before main runs, and keeps the fd (close-on-exec,
 * and passed on the same way to the images it execs). */
#define FT_ENV_TABLE_FD "FORKTRACE_TABLE_FD"
/* Launch following (docs/MULTIHOST.md): set by a collector that takes
 * nodes. HEAD is "auto:PORT" or "ADDR:PORT", what a node collector is to
 * join (--join); REMOTE, the path of forktrace on the far side; RSH,
 * colon-separated names of programs to treat as ssh beside ssh and rsh
 * (a launcher's configured rsh agent). Read by the agent as its image
 * starts, hidden from the program as FT_ENV_SOCK is, and passed on to
 * every image it starts. */
#define FT_ENV_HEAD "FORKTRACE_HEAD"
#define FT_ENV_REMOTE "FORKTRACE_REMOTE"
#define FT_ENV_RSH "FORKTRACE_RSH"

enum ft_msg_type {
	/* First message of every connection: who this process image is.
	 * Keys: PID, PPID, TID, TS, REALTIME, START_TICKS, EXE, ARGV, CWD,
	 * NAME (comm of the main thread), FLAGS (FT_HELLO_*), EXEC_TS,
	 * TABLE_SLOT, and RANK, LOCAL_RANK, RANK_VAR when the image has a
	 * launcher's rank (see "Ranks"). */
	FT_MSG_HELLO = 1,
	/* fork() or vfork() returned in the parent. Keys: TS, TID, CHILD,
	 * KIND (FT_SPAWN_FORK / FT_SPAWN_VFORK), ERRNO when it failed
	 * (then CHILD is absent). A vfork child records nothing itself, so
	 * its parent tells what the child's last exec call was, when it
	 * made one: PATH, ARGV (a prefix, if long), EXEC_TS (the call's
	 * time), and CHILD_ERRNO if that call failed. */
	FT_MSG_FORK = 2,
	/* About to call the real exec. Keys: TS, TID, PATH, ARGV, KIND
	 * (FT_EXEC_*), RUSAGE (the process's so far). Sent and flushed
	 * before the call. */
	FT_MSG_EXEC = 3,
	/* The exec call returned: it failed. Keys: TS, TID, ERRNO, PATH. */
	FT_MSG_EXEC_FAIL = 4,
	/* posix_spawn/posix_spawnp returned. Keys: TS, TID, CHILD (when it
	 * succeeded), PATH, ARGV, KIND (FT_SPAWN_POSIX_SPAWN[P]), ERRNO (the
	 * return value, 0 on success). */
	FT_MSG_SPAWN = 5,
	/* A wait-family call reaped (or saw stop/continue of) a child.
	 * Keys: TS, TID, CHILD, STATUS (raw wait status as waitpid reports
	 * it; waitid's siginfo is converted to the same encoding), RUSAGE
	 * (the child's, as wait4 reports it; absent from a waitid that also
	 * asks for stops or continues). */
	FT_MSG_WAIT = 6,
	/* A thread started / ended. Keys: TS, TID, NAME (optional). */
	FT_MSG_THREAD_START = 7,
	FT_MSG_THREAD_END = 8,
	/* pthread_setname_np / prctl(PR_SET_NAME). Keys: TS, TID, NAME. */
	FT_MSG_THREAD_NAME = 9,
	/* exit(), _exit(), _Exit() or return from main. Keys: TS, TID, CODE,
	 * RUSAGE, RUSAGE_CHILDREN. */
	FT_MSG_EXIT = 10,
	/* A fatal signal arrived; the old disposition runs next.
	 * Keys: TS, TID, SIGNO. */
	FT_MSG_SIGNAL = 11,
	/* system() or popen() started / finished in this process.
	 * Keys: TS, TID, CMD, KIND (FT_SPAWN_SYSTEM / FT_SPAWN_POPEN),
	 * for the end also STATUS (system's return value, pclose's status)
	 * and, when the call failed (-1, or a popen that returned NULL),
	 * ERRNO. */
	FT_MSG_SHELL_BEGIN = 12,
	FT_MSG_SHELL_END = 13,
	/* Events the agent had to drop. Keys: TS, TID, COUNT. Loss always
	 * travels as a record; it is never silent. */
	FT_MSG_LOST = 14,
	/* A region of per-thread event buffers in shared memory (see "Event
	 * buffers" below). The region's memfd travels with this frame as
	 * SCM_RIGHTS ancillary data, so the collector can read what a thread
	 * recorded but never sent when the process dies (SIGKILL).
	 * Keys: TS, TID, SLOT (global index of the region's first slot),
	 * COUNT (slots in the region), SIZE (data bytes per slot), TSC (the
	 * time stamp counter read with TS: a calibration pair, for records
	 * that are salvaged before any EVENTS frame carried one). */
	FT_MSG_SHM = 15,
	/* A chunk of one thread's event records, sent when its buffer is
	 * full, when the flush interval passed, and before fork, exec,
	 * posix_spawn, system, popen, thread end and exit. Keys: TS, TID,
	 * SLOT, OFFSET (stream offset of the chunk's first byte in the slot's
	 * stream), TSC (the time stamp counter read with TS: a calibration
	 * pair), DATA (bin: whole records, see enum ft_ev_type). */
	FT_MSG_EVENTS = 16,
	/* A loaded object (executable or shared library) of this image, to
	 * name function addresses. Sent before the first EVENTS frame and
	 * after each dlopen. Keys: TS, TID, PATH, ADDR (load bias, as
	 * dl_iterate_phdr's dlpi_addr), LO, HI (the runtime address range of
	 * its PT_LOAD segments). */
	FT_MSG_MODULE = 17,
	/* The first frame of a process-table slot that continues an image's
	 * full slot: TABLE_SLOT (the slot before). Only in the table. */
	FT_MSG_CONTINUE = 18,
	/* A remote launch (docs/MULTIHOST.md, "Launch following"): a program
	 * named ssh or rsh (or one of FT_ENV_RSH) is started with a remote
	 * command, and the agent put a node collector in front of that
	 * command, so a node is to join the head. Keys: TS, TID, PID (the
	 * launcher's pid, as the rewritten command gives it to the node:
	 * the process that execs ssh, or that spawned it), NAME (the
	 * destination as the command line names it: "node2", "user@node2"),
	 * PATH (the forktrace the far side is to run), FLAGS (FT_REMOTE_*),
	 * and CHILD when the process that runs ssh is a child of the sender
	 * (posix_spawn: PID is then the sender's own pid; vfork: PID is the
	 * child's). An exec sends it before the call (an EXEC_FAIL after it
	 * says the launch never happened), posix_spawn and vfork once the
	 * call returned. */
	FT_MSG_REMOTE = 19,
	FT_MSG_TYPE_MAX = 32
};

enum ft_key {
	FT_K_TS = 1,           /* uint: CLOCK_MONOTONIC ns */
	FT_K_TID = 2,          /* int: kernel thread id */
	FT_K_PID = 3,          /* int */
	FT_K_PPID = 4,         /* int */
	FT_K_CHILD = 5,        /* int: a child's pid */
	FT_K_PATH = 6,         /* str: path or file given to exec/spawn */
	FT_K_ARGV = 7,         /* array of str */
	FT_K_CWD = 8,          /* str */
	FT_K_EXE = 9,          /* str: the executable's path */
	FT_K_REALTIME = 10,    /* uint: CLOCK_REALTIME ns taken with TS */
	FT_K_START_TICKS = 11, /* uint: process start time, clock ticks after
	                         boot (field 22 of /proc/PID/stat); with PID it
	                         identifies a process across exec, and tells pid
	                         reuse apart */
	FT_K_ERRNO = 12,       /* int */
	FT_K_STATUS = 13,      /* int: raw wait status */
	FT_K_CODE = 14,        /* int: exit code */
	FT_K_SIGNO = 15,       /* int */
	FT_K_NAME = 16,        /* str */
	FT_K_KIND = 17,        /* uint: FT_SPAWN_* or FT_EXEC_* */
	FT_K_COUNT = 18,       /* uint */
	FT_K_CMD = 19,         /* str: the shell command of system/popen */
	FT_K_FLAGS = 20,       /* uint: bit set, meaning depends on the type */
	FT_K_EXEC_TS = 21,     /* uint: HELLO of an exec'd image: when the exec
	                         call was made (absent when not known) */
	FT_K_SLOT = 22,        /* uint: event buffer slot, global per image */
	FT_K_OFFSET = 23,      /* uint: byte offset in a slot's stream */
	FT_K_TSC = 24,         /* uint: time stamp counter value */
	FT_K_DATA = 25,        /* bin */
	FT_K_ADDR = 26,        /* uint: an address (load bias of a module) */
	FT_K_LO = 27,          /* uint: lowest address of a range */
	FT_K_HI = 28,          /* uint: one past the highest address */
	FT_K_SIZE = 29,        /* uint: a size in bytes */
	FT_K_TABLE_SLOT = 30,  /* uint: HELLO on a connection: the process-table
			       * slot this image wrote before (FT_HELLO_RESUMED) */
	FT_K_CHILD_ERRNO = 31, /* int: FORK of a vfork child: its last exec call
			       * (PATH, ARGV, EXEC_TS) failed with this errno */
	/* HELLO of an image started with a launcher's rank in its
	 * environment (all three absent when it has none; see "Ranks"
	 * below): */
	FT_K_RANK = 32,       /* uint: the rank in the job */
	FT_K_LOCAL_RANK = 33, /* uint: the rank among the job's processes on
			       * this host; may come without RANK */
	FT_K_RANK_VAR = 34,   /* str: the variable RANK was read from */
	/* Resource use (docs/INSIGHT.md, "Resource use per process"): an
	 * array of at least FT_RUSAGE_N unsigned integers, in the order of
	 * enum ft_rusage_field; a reader ignores entries past those it
	 * knows. RUSAGE on WAIT: wait4's figure for the reaped child; on
	 * EXEC and EXIT: getrusage(RUSAGE_SELF) of the sender at the call.
	 * RUSAGE_CHILDREN on EXIT: getrusage(RUSAGE_CHILDREN), what the
	 * descendants the process reaped used. Absent when not known. */
	FT_K_RUSAGE = 35,
	FT_K_RUSAGE_CHILDREN = 36,
	FT_K_MAX = 64
};

/* The entries of an FT_K_RUSAGE array: CPU times in nanoseconds, the
 * peak resident set in KiB (ru_maxrss), the rest counts as struct rusage
 * has them. */
enum ft_rusage_field {
	FT_RU_USER_NS = 0,
	FT_RU_SYS_NS = 1,
	FT_RU_MAXRSS_KB = 2,
	FT_RU_MINFLT = 3,
	FT_RU_MAJFLT = 4,
	FT_RU_NVCSW = 5,
	FT_RU_NIVCSW = 6,
	FT_RU_INBLOCK = 7,
	FT_RU_OUBLOCK = 8,
	FT_RUSAGE_N = 9
};

/* How a child came to be (FT_K_KIND of FORK, SPAWN, SHELL_*). */
enum ft_spawn_kind {
	FT_SPAWN_FORK = 0,
	FT_SPAWN_VFORK = 1,
	FT_SPAWN_POSIX_SPAWN = 2,
	FT_SPAWN_POSIX_SPAWNP = 3,
	FT_SPAWN_SYSTEM = 4,
	FT_SPAWN_POPEN = 5
};

/* Which exec call (FT_K_KIND of EXEC). */
enum ft_exec_kind {
	FT_EXEC_EXECVE = 0,
	FT_EXEC_EXECV = 1,
	FT_EXEC_EXECVP = 2,
	FT_EXEC_EXECVPE = 3,
	FT_EXEC_EXECL = 4,
	FT_EXEC_EXECLP = 5,
	FT_EXEC_EXECLE = 6,
	FT_EXEC_FEXECVE = 7,
	FT_EXEC_EXECVEAT = 8
};

/*
 * Ranks. An agent reads them from its environment once, as its image
 * starts (a plain decimal number, no sign, at most 9 digits; any other
 * value is passed over as if unset). RANK, the first of these set:
 *   OMPI_COMM_WORLD_RANK  Open MPI (mpirun, also under srun)
 *   PMIX_RANK             a PMIx launcher (prterun, srun --mpi=pmix)
 *   PMI_RANK              a PMI launcher (MPICH's Hydra mpiexec, Intel MPI)
 *   SLURM_PROCID          srun (a task of a job step)
 *   RANK                  torchrun and other launchers of the same convention
 * The MPI launchers' own variables come first: a job step inside a Slurm
 * allocation that runs mpirun has SLURM_PROCID 0 in every rank. LOCAL_RANK,
 * the first of OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID (Hydra),
 * SLURM_LOCALID, LOCAL_RANK. RANK_VAR names the variable RANK came from.
 */

/* FT_K_FLAGS of REMOTE. */
/* The remote command was left as it was: it does not fit the agent's
 * bounds for the rewritten command (or its argv is too long), so no node
 * collector runs there and no node joins for this launch. */
#define FT_REMOTE_UNTRACED 0x1u

/* FT_K_FLAGS of HELLO. */
#define FT_HELLO_ARGV_TRUNCATED 0x1u /* argv did not fit; a prefix was sent */
/* This image is a fork child's copy of its parent's image (no exec since
 * the fork). A fork child connects only when it first has something to
 * say, and an exec into a program that will load the agent itself says
 * nothing: the new image's HELLO (without this flag) tells the collector
 * that the child exec'd. */
#define FT_HELLO_FORKED 0x2u
/* The image of the previous HELLO of this pid and start time goes on (a
 * reconnect, or an image that spoke in the process table first and now
 * connects): not a new image. Without it, a second HELLO of a known
 * process means the process exec'd. */
#define FT_HELLO_RESUMED 0x4u
/* On a connection: the agent waits, before its process ends, for the one
 * byte with which the collector says it checked this HELLO (see "Who may
 * connect" above). */
#define FT_HELLO_ACK 0x8u

/*
 * The process table.
 *
 * A connection costs a short-lived image more than everything else the
 * agent does, so an image first speaks into a slot of a file the collector
 * creates beside its socket (FT_TABLE_NAME in the socket's directory, or a
 * symlink there to a tmpfs file). Most images (a compiler, /bin/true) say
 * all they ever say there: HELLO, maybe a few small records, EXIT. An image
 * with more to say (a record that does not fit in its slot, a memfd to
 * pass) connects, sends HELLO again with FT_HELLO_RESUMED and
 * FT_K_TABLE_SLOT, and uses the connection from then on; the collector
 * reads the slot's frames up to then first.
 *
 * File layout (little-endian, as the host writes it):
 *   offset 0                          struct ft_table_header (one page)
 *   offset FT_TABLE_SLOTS_OFFSET      slot i at + i * slot_size
 * A slot: struct ft_table_slot, then `committed` bytes of whole frames
 * (the same frames as on a connection, HELLO first).
 *
 * Claiming: an agent reads `claimed`; if it is below `ready` it takes it
 * with a compare-and-swap, so no slot is ever claimed that the collector
 * has not allocated (fallocate): a write to a mapped page that the file
 * system cannot back would raise SIGBUS in the traced program. The
 * collector raises `ready` ahead of `claimed` as slots run out, and frees
 * the pages of a slot whose image is gone. A process about to exec or
 * spawn an image that will load the agent claims the image's slot for it
 * and hands it over (FT_ENV_EXEC_TS): the image maps only that slot. Such
 * a slot stays empty if the exec fails. Writing: the owner (under the
 * agent's send lock) copies a whole frame behind the committed bytes, then
 * advances `committed` with a release store; the collector reads
 * `committed` with an acquire load and never reads past it.
 */
#define FT_TABLE_NAME "table"
#define FT_TABLE_MAGIC 0x42545446u /* "FTTB" */
#define FT_TABLE_VERSION 1u
#define FT_TABLE_SLOTS_OFFSET 4096u
#define FT_TABLE_SLOT_SIZE 4096u

struct ft_table_header {
	uint32_t magic;     /* FT_TABLE_MAGIC */
	uint32_t version;   /* FT_TABLE_VERSION */
	uint32_t slot_size; /* bytes per slot, header included */
	uint32_t capacity;  /* slots the file has room for */
	uint32_t claimed;   /* slots taken (atomic, compare-and-swap) */
	uint32_t ready;     /* slots [0, ready) are allocated (atomic) */
	/* Offset 24: the collector's liveness word (see "Liveness" below). */
	uint32_t alive;
	uint32_t reserved[9];
};

/*
 * Liveness. `alive` is the lock word of a robust, process-shared mutex
 * that the collector's main thread takes when it creates the table and
 * holds until it removes it (glibc's pthread_mutex_t begins with its lock
 * word; the mutex takes the 40 bytes from offset 24). The word holds the
 * holder's thread id in its low 30 bits (FUTEX_TID_MASK); when the
 * collector dies, even by SIGKILL, the kernel's robust-futex walk at its
 * exit clears them and sets FUTEX_OWNER_DIED. So an agent learns that
 * nobody reads the table any more from one load, with no system call: it
 * checks the word where it claims a slot or writes a frame (having
 * mapped the header), and then writes to a spill file instead. What the
 * table already holds stays there: the spill directory's FT_TABLE_NAME
 * link names the file, and `forktrace combine` reads its slots.
 */
#define FT_TABLE_ALIVE_TID_MASK 0x3fffffffu
/* Offsets 64 to 511 of the header page are the collector's: the path of
 * its socket directory, '\0'-terminated, so that a later run that finds
 * the table in /dev/shm after a crash knows whether that directory (and
 * the cleaning that saves the table's last frames) is still to come.
 * Agents neither read nor write it. */
#define FT_TABLE_OWNER_OFFSET 64u
#define FT_TABLE_OWNER_SIZE 448u

struct ft_table_slot {
	uint32_t committed; /* bytes of whole frames after this header (atomic) */
	uint32_t owner;     /* pid of the image that took the slot, 0 before:
			     * an image takes it with a compare-and-swap from
			     * 0, so that one handed over twice is written by
			     * one image only */
	uint32_t reserved[2];
};

/*
 * The rest of the header page, from FT_TABLE_TARGETS_OFFSET, is the
 * agents' exec-target cache: what exec of an absolute path starts (an ELF
 * that loads the agent, or a script) and the file's name as /proc/<pid>/exe
 * will give it. Working that out takes an exec'ing fork child 8 system
 * calls (open, fstat, pread, close, a readlink per path component);
 * checking an entry takes one stat, whose device, inode, size, mode and
 * times must match (agent/exectarget.c says what that leaves to chance).
 * Entries go in pairs: a path's hash picks a pair, either entry may hold
 * it. The collector never reads them and leaves them zero (seq 0: empty).
 * An entry is a seqlock: a writer takes an even seq to seq + 1 with a
 * compare-and-swap, writes, and releases seq + 2; a reader uses what it
 * copied only if seq was even and unchanged across the copy. An entry
 * whose writer died mid-write stays odd, unused, for the rest of the run.
 * Any traced program can write the page: agents bound every length.
 */
#define FT_TABLE_TARGETS_OFFSET 512u
#define FT_TABLE_TARGET_SIZE 256u
#define FT_TABLE_TARGETS ((FT_TABLE_SLOTS_OFFSET - FT_TABLE_TARGETS_OFFSET) / FT_TABLE_TARGET_SIZE)

enum ft_table_target_kind {
	FT_TARGET_ELF = 1,    /* a dynamic ELF of the agent's class */
	FT_TARGET_SCRIPT = 2, /* "#!" */
};

struct ft_table_target {
	uint32_t seq;            /* see above (atomic) */
	uint32_t kind;           /* enum ft_table_target_kind */
	uint64_t dev, ino, size; /* of the file, from fstat */
	int64_t mtime_sec, mtime_nsec, ctime_sec, ctime_nsec;
	uint32_t mode;
	uint16_t path_len; /* text: the path exec was given, '\0', */
	uint16_t exe_len;  /* then its /proc/<pid>/exe name ("" for a script), '\0' */
	char text[FT_TABLE_TARGET_SIZE - 72];
};

/* When a frame does not fit behind the others, the image claims a new slot
 * whose first frame is FT_MSG_CONTINUE naming the full one, and goes on
 * there: a shell or a build driver that starts hundreds of children keeps
 * its FORK and WAIT records off the socket too. */

/*
 * Event buffers.
 *
 * In-process events (functions, regions, instants, counters) are recorded
 * by each thread into a buffer of its own: a slot of a shared-memory region
 * (a memfd the agent creates and hands to the collector with FT_MSG_SHM).
 * A thread appends records, publishes how far it got in its slot's header,
 * and sends what it recorded as FT_MSG_EVENTS frames. If the process dies
 * before sending (SIGKILL), the collector reads the rest from the region.
 *
 * Region layout (all integers little-endian, as the host writes them):
 *   offset 0                       struct ft_shm_header
 *   offset FT_SHM_SLOTS_OFFSET     struct ft_shm_slot[count]
 *   offset header.data_offset      count * header.slot_size data bytes;
 *                                  slot i's data at data_offset + i * slot_size
 *
 * A slot's stream: the bytes a slot ever held, numbered from 0. Data byte
 * k of the slot holds stream byte base + k. The owning thread writes
 * records at head - base, then advances head (a release store) past whole
 * records only; after a successful send of [base, head) it sets base =
 * head and starts again at data byte 0. So the collector, knowing up to
 * which stream offset it received a slot's frames, salvages [received,
 * head) from data byte received - base. A slot freed by an ending thread
 * (tid 0) is reused by a new one, and its stream goes on.
 */
#define FT_SHM_MAGIC 0x4d535446u /* "FTSM" */
#define FT_SHM_VERSION 1u
#define FT_SHM_SLOTS_OFFSET 64u
#define FT_SHM_SLOT_HEADER_SIZE 64u

struct ft_shm_header {
	uint32_t magic;       /* FT_SHM_MAGIC */
	uint32_t version;     /* FT_SHM_VERSION */
	uint32_t first_slot;  /* global index of slot 0 of this region */
	uint32_t count;       /* slots */
	uint64_t slot_size;   /* data bytes per slot */
	uint64_t data_offset; /* where slot 0's data starts */
};

struct ft_shm_slot {
	int32_t tid; /* owner thread, 0 when free */
	uint32_t unused;
	uint64_t base; /* stream offset of data byte 0 */
	uint64_t head; /* stream offset past the last whole record */
	uint64_t reserved[5];
};

/*
 * Event records: the DATA of FT_MSG_EVENTS and a slot's stream. Each is a
 * msgpack array whose first element is the type. Times are time stamp
 * counter values: TIME sets the current value, and every other record
 * carries the ticks elapsed since the record before it (DT). A stream
 * chunk starts with TIME (or CLOCK). Strings are the user's bytes.
 * Converting ticks to CLOCK_MONOTONIC ns uses (TS, TSC) pairs: those of
 * EVENTS frames, CLOCK records, and the collector's own.
 */
enum ft_ev_type {
	FT_EV_TIME = 0,         /* [0, TSC] */
	FT_EV_FUNC_ENTER = 1,   /* [1, DT, ADDR]  -finstrument-functions */
	FT_EV_FUNC_EXIT = 2,    /* [2, DT] */
	FT_EV_REGION_BEGIN = 3, /* [3, DT, NAME] */
	FT_EV_REGION_END = 4,   /* [4, DT] */
	FT_EV_INSTANT = 5,      /* [5, DT, NAME] */
	FT_EV_COUNTER = 6,      /* [6, DT, NAME, VALUE (float64 or int)] */
	FT_EV_CLOCK = 7,        /* [7, TSC, MONO_NS]: a calibration pair; sets the time */
	FT_EV_TYPE_MAX = 32
};

/*
 * A calibration pair (the TSC key with TS, and FT_EV_CLOCK): the time
 * stamp counter read just before and just after CLOCK_MONOTONIC, and its
 * midpoint. A clock read that was slow (the first in a process, an
 * interrupt, a preempted vCPU) makes the midpoint a poor guess by up to
 * half its span, so the tightest of `tries` reads is kept: ~20 ns apart on
 * the test machine, where a single read can be microseconds off. The
 * agent and the collector read pairs with this one function.
 * Signal-safe (vDSO clock, rdtsc). x86-64 only, like the agent.
 */
static inline void ft_wire_clock_pair(int tries, uint64_t *tsc, uint64_t *ns)
{
	uint64_t best = UINT64_MAX;

	*tsc = 0;
	*ns = 0;
	for (int i = 0; i < tries; i++) {
		struct timespec ts;
		uint64_t t0 = __builtin_ia32_rdtsc();
		uint64_t t1;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		t1 = __builtin_ia32_rdtsc();
		if (t1 - t0 < best) {
			best = t1 - t0;
			*tsc = t0 + (t1 - t0) / 2;
			*ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		}
	}
}

/* Encode a frame header into out[0..7]. */
static inline void ft_wire_header(unsigned char out[FT_WIRE_HEADER_SIZE], unsigned type,
				  uint32_t payload_len)
{
	out[0] = FT_WIRE_MAGIC0;
	out[1] = FT_WIRE_MAGIC1;
	out[2] = FT_WIRE_VERSION;
	out[3] = (unsigned char)type;
	out[4] = (unsigned char)(payload_len & 0xff);
	out[5] = (unsigned char)((payload_len >> 8) & 0xff);
	out[6] = (unsigned char)((payload_len >> 16) & 0xff);
	out[7] = (unsigned char)((payload_len >> 24) & 0xff);
}

/* Length of the payload announced by a header (no validation). */
static inline uint32_t ft_wire_payload_len(const unsigned char hdr[FT_WIRE_HEADER_SIZE])
{
	return (uint32_t)hdr[4] | ((uint32_t)hdr[5] << 8) | ((uint32_t)hdr[6] << 16) |
	       ((uint32_t)hdr[7] << 24);
}

#endif /* FORKTRACE_WIRE_H */
