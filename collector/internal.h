/*
 * Collector internals: the `forktrace` command. Never included from outside
 * collector/ (its unit and fuzz tests see it as its own files do).
 *
 * Files, prefixes and what each does. The live run, in data order:
 *   run_    run.c         `forktrace run` in steps: spawn, the libuv loop,
 *                         the end of the tree, writing the trace and the
 *                         report (through the merge, in one walk), the
 *                         summary
 *   rsig_   runsig.c      the signals sent to forktrace: passed on, or the
 *                         end of the wait (runsig.h)
 *   srv_    server.c      the Unix socket server: connections, frame
 *                         assembly (server.h)
 *   ptab_   proctable.c   the shared-memory process table that short-lived
 *                         images write their frames into
 *   shm_    shm.c         a process image's event buffers shared with the
 *                         collector, salvaged when the image dies
 *   wire_   decode.c      frame and msgpack payload -> struct wire_msg
 *   proc_   proctree.c    the process tree: lifetimes, exec images, exit
 *                         statuses, into the model; the collector's clock
 *   args_   jsonargs.c    the args objects of the marks it adds to the
 *                         model (jsonargs.h)
 *   spill_  spill.c       the agents' spill files, as inputs of the run
 *                         and of `forktrace combine` (spill.h)
 *   head_   head.c        a multi-host run's head: the key, the listener,
 *                         one part per node, the wait for nodes, hosts
 *                         lost or missing
 *   node_   node.c        a node collector (--join): its model streamed
 *                         to the head, clock bursts, its part's file
 *   link_   link.c        the TCP link of a multi-host run: key files,
 *                         the authenticated handshake, the node's model
 *                         stream, clock bursts (link.h)
 * Shared by the live run and the command lines:
 *   out_    outfile.c     the output file of every subcommand, put in
 *                         place only when complete
 *   say_    say.c         what forktrace prints: terminal-safe strings,
 *                         warning limits, option values, usage errors
 *                         (say.h)
 * The command lines, in cli/ (which sees this folder; nothing here sees
 * cli/):
 *            cli/main.c         dispatches to a subcommand
 *   run_     cli/run_cmd.c      `forktrace run`'s options and help, and
 *                               run_main (the options, then run.c's steps)
 *   combine_ cli/combine_cmd.c  `forktrace combine`
 *   info_    cli/info_cmd.c     `forktrace info`
 *   report_  cli/report_cmd.c   `forktrace report`
 *   report_  cli/report_opts.c  the report options run and report share
 */
#ifndef FT_COLLECTOR_INTERNAL_H
#define FT_COLLECTOR_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <msgpack.h>

#include "forktrace/wire.h"
#include "events.h"
#include "model.h"

/* ---- decode.c ---------------------------------------------------------- */

typedef struct wire_str {
	const char *ptr; /* not NUL-terminated; borrowed from the payload */
	uint32_t len;
} wire_str;

/*
 * One decoded message. Strings and argv borrow from the msgpack_unpacked
 * passed to wire_decode and are valid until it is destroyed or reused.
 */
typedef struct wire_msg {
	unsigned type;
	uint64_t present; /* bit (1 << key) for each key that was present */
	int64_t ts, tid, pid, ppid, child, err, status, code, signo, child_err;
	int64_t rank, local_rank; /* HELLO: when present (wire_has) */
	wire_str rank_var;
	uint64_t realtime, start_ticks, kind, count, flags, exec_ts;
	uint64_t slot, offset, tsc, addr, lo, hi, size, table_slot;
	wire_str path, cwd, exe, name, cmd;
	wire_str data;              /* DATA (bin) */
	const msgpack_object *argv; /* elements of the ARGV array, or NULL */
	uint32_t argc;
	/* RUSAGE, RUSAGE_CHILDREN: when present (wire_has) */
	model_rusage ru, ru_children;
} wire_msg;

static inline bool wire_has(const wire_msg *m, unsigned key)
{
	return (m->present >> key) & 1u;
}

/*
 * Decodes a frame payload of the given type into *out. up is a caller-owned
 * msgpack_unpacked (initialized with msgpack_unpacked_init) that keeps the
 * decoded objects; out borrows from it. Returns 0, or -EBADMSG when the
 * payload is not one msgpack map with integer keys and values of the
 * documented types, or has trailing bytes.
 */
int wire_decode(const char *payload, size_t len, unsigned type, msgpack_unpacked *up,
		wire_msg *out);

/* Why wire_next_frame refused a stream. */
enum wire_frame_error {
	WIRE_ERR_MAGIC = -1,   /* the bytes are not a forktrace frame */
	WIRE_ERR_VERSION = -2, /* a protocol version this collector does not speak */
	WIRE_ERR_TOO_BIG = -3, /* payload larger than the limit */
};

typedef struct wire_frame {
	unsigned type;
	const char *payload; /* borrowed from the stream's bytes */
	uint32_t len;
	size_t size; /* header + payload: bytes to consume */
} wire_frame;

/*
 * Looks for one frame at the start of data[0..n). Returns 1 and fills *f
 * when a whole frame is there, 0 when more bytes are needed, or a negative
 * enum wire_frame_error. max_payload caps the announced length.
 */
int wire_next_frame(const char *data, size_t n, uint32_t max_payload, wire_frame *f);

/* A sentence for an enum wire_frame_error ("a frame without the FT magic"). */
const char *wire_frame_strerror(int err);

/* The name of a message type for warnings ("HELLO"), or "unknown". */
const char *wire_type_name(unsigned type);

/* ---- proctree.c -------------------------------------------------------- */

typedef struct proc_tree proc_tree;
typedef struct proc_entry proc_entry;

/* ---- shm.c: event buffers of one process image ---------------------------- */

typedef struct shm_image shm_image;

/* A new state with one reference; NULL on allocation failure. */
shm_image *shm_image_new(void);
void shm_image_ref(shm_image *si);
/* Drops a reference; the last closes the regions' fds. NULL: no-op. */
void shm_image_unref(shm_image *si);
/* Adds a region (FT_MSG_SHM). Consumes fd, also on error. Returns 0,
 * -EINVAL for a region that is not plausible, or -ENOMEM. */
int shm_add_region(shm_image *si, int fd, uint64_t first, uint64_t count, uint64_t slot_size);
/* An EVENTS frame of len bytes at stream offset of slot arrived from
 * thread tid: returns how many of its first bytes were received before
 * (salvaged already), which the caller drops. */
uint64_t shm_accept(shm_image *si, uint64_t slot, uint64_t offset, uint64_t len, int64_t tid);
/* Reads what every slot holds beyond what was received and hands it to
 * fn (data borrowed for the call); *salvaged gets the byte count. Returns
 * 0 or the first negative return of fn or -ENOMEM. */
int shm_salvage(shm_image *si, int (*fn)(void *arg, int64_t tid, const void *data, size_t len),
		void *arg, uint64_t *salvaged);

/*
 * What the tree knows about one agent connection: which process and which
 * of its images the connection speaks for, and the exec it announced.
 * Owned by the server's connection; zero-initialized before the first
 * message.
 */
typedef struct proc_conn {
	proc_entry *pe;     /* NULL before HELLO */
	size_t seg;         /* index of the image this connection speaks for */
	uint32_t seg_shift; /* images inserted before the first one when seg
			     * was set (proctree.c keeps seg right) */
	bool exec_sent;     /* an EXEC came and no EXEC_FAIL after it */
	int64_t exec_ts;
	const char *exec_path;  /* in the model's arena */
	const char **exec_argv; /* in the model's arena */
	size_t exec_argc;
	shm_image *shm; /* its event buffers; a reference, or NULL */
	int fds[8];     /* fds received (SCM_RIGHTS) not yet claimed */
	int nfds;
	size_t remote_pending; /* 1 + the proc_remotes index of a launch this
				* image announced before its exec call, which
				* an EXEC_FAIL then cancels; 0: none */
} proc_conn;

/* Creates a tree that fills t (borrowed until proc_tree_free). */
proc_tree *proc_tree_new(model_trace *t);
void proc_tree_free(proc_tree *pt);

/*
 * Applies one message from connection c. now_ns is the collector's clock
 * when the frame arrived. Returns 0, -EPROTO when a message other than
 * HELLO arrives before HELLO, or -ENOMEM.
 */
int proc_apply(proc_tree *pt, proc_conn *c, const wire_msg *m, int64_t now_ns);

/* Connection c ended (EOF or error) at now_ns. */
void proc_conn_closed(proc_tree *pt, proc_conn *c, int64_t now_ns);

/* The collector's own waitpid reaped pid with raw status at now_ns. */
void proc_reaped(proc_tree *pt, pid_t pid, int status, const model_rusage *ru, int64_t now_ns);

/* Registers the root command before its agent says hello. */
proc_entry *proc_add_root(proc_tree *pt, pid_t pid, const char *const *argv, const char *exe,
			  int64_t start_ns);

/* The host pid of a process entry, for messages. */
pid_t proc_pid(const proc_entry *pe);

/* Reads /proc/PID/stat into buf (cap bytes) and returns its fields after
 * the command name ("S PPID PGRP ..."), or NULL when the process is gone
 * or the file is not as expected. Signal-safe. */
const char *proc_stat_fields(pid_t pid, char *buf, size_t cap);
/* The parent of pid as /proc/PID/stat gives it (a zombie's too), or -1
 * when the process is gone. Signal-safe. */
pid_t proc_stat_ppid(pid_t pid);

/*
 * Ends the run: every process gets an end time, exit state, parents and
 * trace pids, and processes that are still alive are marked running
 * (tree_done says whether the collector saw the whole tree end).
 */
void proc_finish(proc_tree *pt, int64_t now_ns, bool tree_done);

/* Sets each process's model parent to what the tree knows now (its
 * creator's record, else its ppid's process); proc_finish has the final
 * word. For a node, whose model streams while it runs. */
void proc_link_parents(proc_tree *pt);

/* Closes fds received on c that no message claimed. */
void proc_conn_drop_fds(proc_conn *c);

/* The process tree's slot for the process table's bookkeeping: the open
 * table entry of pe's current image, or NULL (ptab_ only). */
void **proc_table_ref(proc_entry *pe);
/* The latest time anything was heard of pe. */
int64_t proc_last_seen(const proc_entry *pe);
/* Does c speak for its process's latest image (not one before it)? */
bool proc_conn_current(proc_conn *c);
/* Was pe's wait status seen (its parent's WAIT, or our own reaping)? */
bool proc_status_known(const proc_entry *pe);
/* The image of `from` goes on on `to` (which said HELLO with
 * FT_HELLO_RESUMED): `to` takes over what `from` knew, `from` is done. */
void proc_conn_handover(proc_conn *from, proc_conn *to);

/* ptab_ (proctable.c): the process table, see include/forktrace/wire.h. */
typedef struct ptab ptab;
/* Creates the table beside the socket in sock_dir (or in /dev/shm with a
 * symlink there). NULL when it cannot: every image then connects. */
ptab *ptab_create(const char *sock_dir, proc_tree *pt);
/* The table of a run whose collector died (named by its spill
 * directory's FT_TABLE_NAME link; fd -1: gone) and its journal (jfd, -1:
 * none), to read their slots into pt (borrowed) as that collector would
 * have: read-only, each frame at its own time. Consumes both fds. NULL
 * with *err set (-EPROTO: not a process table); *bad gets the number of
 * journal records that were damaged. */
ptab *ptab_open_salvage(int fd, int jfd, proc_tree *pt, int *err, size_t *bad);
/* Gives the table a journal: the frames of each slot it gives the pages
 * of back are appended there first, so that a crash of the collector
 * loses none (docs/TRACE_FORMAT.md, "Spill files"). open_journal(ctx)
 * (ctx borrowed for t's life) returns its fd, or -1 (then no journal),
 * and is called once, when first needed. NULL t: no-op. */
void ptab_set_journal(ptab *t, int (*open_journal)(void *ctx), void *ctx);
/* The table's file (not the link beside the socket), or NULL. */
const char *ptab_file(const ptab *t);
/* Removes what runs of this user whose collector is provably dead (its
 * socket refuses connections and the kernel cleared its table's liveness
 * word) left: their socket directories forktrace-XXXXXX in tmpdir (never
 * own, the caller's, if not NULL) and their tables in /dev/shm. The slots of such a
 * table that still hold frames are first appended to the journal of the
 * run's spill directory (the socket directory's "spill" link), so that
 * `forktrace combine` still recovers them; a table whose journal cannot
 * take them stays. Returns how many directories were removed. */
size_t ptab_clean_stale(const char *tmpdir, const char *own);
/* Did a traced process cut the live table's file short, so that what
 * its images wrote in it from there on was not read? */
bool ptab_was_cut(void);
/* The latest frame time a salvaged table held (0 before any). */
int64_t ptab_last_ts(const ptab *t);
/* Removes the file (not a salvaged one); NULL: no-op. */
void ptab_free(ptab *t);
/* Allocates the first full step of slots, once the command has started
 * (ptab_create makes only a few ready). NULL: no-op. */
void ptab_fill(ptab *t);
/* Applies what the agents committed since the last read; allocates
 * slots ahead. NULL: no-op. */
void ptab_read(ptab *t);
/* Around a connection's HELLO m (before and after proc_apply): a resumed
 * image's slot is read first and then handed to the connection; a new
 * image ends the slot of the image before. t NULL: no-op. */
void ptab_before_hello(ptab *t, const wire_msg *m);
void ptab_after_hello(ptab *t, proc_conn *pc, const wire_msg *m);
/* The end: reads everything and closes every slot's image. */
void ptab_finish(ptab *t);
/* The paths ptab_free removes ("" for none), for a cleanup that cannot
 * wait for it (a signal handler). Borrowed until ptab_free. NULL: all "". */
void ptab_temp_paths(const ptab *t, const char **file, const char **link, const char **dir);

/*
 * A remote launch an agent announced (FT_MSG_REMOTE): a process ran ssh
 * (or rsh...) with a remote command that now starts a node collector
 * there, which is to join the head (docs/MULTIHOST.md). In the order the
 * records came; strings in the model's arena.
 */
typedef struct proc_remote {
	int64_t pid;              /* the launcher's pid, as the node collector was
				* given it (--launcher-pid, link_node_info's
				* launcher_pid): the process that exec'd ssh, or
				* that posix_spawn'd it */
	const char *dest;         /* the destination as the command line named it
				* ("node2", "user@node2"; --launched-as) */
	const char *forktrace;    /* the forktrace the far side was to run */
	int64_t ts_ns;            /* when, on the collector's clock */
	const proc_entry *pe;     /* the process that runs ssh (the launcher,
				* or its child for a spawn or vfork); NULL if
				* unknown. proc_ended says when it is gone */
	const model_process *mp;  /* its model process (pe's), or NULL */
	bool untraced;            /* the command could not be rewritten
				  * (FT_REMOTE_UNTRACED): no node will join */
	bool failed;              /* the exec of ssh failed: nothing was
				  * launched, no node will join */
	const proc_entry *sender; /* the process whose agent told (proctree.c) */
	int64_t tid;              /* its thread that did */
} proc_remote;
/* The remote launches so far; *out borrowed until the next proc_apply or
 * proc_tree_free. Returns how many. */
size_t proc_remotes(const proc_tree *pt, const proc_remote **out);
/* Has pe ended: its exit, its wait status or the end of its last
 * connection seen? */
bool proc_ended(const proc_entry *pe);

typedef struct proc_counts {
	uint64_t salvaged_bytes; /* event records read from dead processes' buffers */
	uint64_t processes;
	uint64_t running; /* connected or not yet known to have ended */
	uint64_t messages;
} proc_counts;
void proc_get_counts(const proc_tree *pt, proc_counts *c);

/* ---- proctree.c: time ------------------------------------------------- */

int64_t proc_now_mono_ns(void);
int64_t proc_now_real_ns(void);
/* Adds a (time stamp counter, CLOCK_MONOTONIC) pair read now to t: with
 * the agents' own pairs, it converts in-process event times. Returns 0 or
 * -ENOMEM. */
int proc_add_clock_pair(model_trace *t);

/* ---- run.c ------------------------------------------------------------- */

/*
 * One `forktrace run`, in steps: run_new (from the parsed options),
 * run_start, run_wait, run_write_outputs, run_free. Each step returns
 * RUN_GO_ON to go on, or the exit code to leave with.
 */
#define RUN_GO_ON (-1)
typedef struct run_state run_state;
typedef struct run_opts run_opts;
/* A run of o, which it copies: what o's members point to must outlive it.
 * NULL on allocation failure. */
run_state *run_new(const run_opts *o);
/* Everything the user controls that can fail is checked (COMMAND, the
 * agent, the outputs) before the outputs, the socket, the model and the
 * loop are made and COMMAND is started with the agent, as a child of a
 * subreaper. Returns RUN_GO_ON, or the exit code after saying why. */
int run_start(run_state *rs);
/* Runs the loop until the whole tree is gone (or --wait-timeout, or a
 * signal) and finishes the model. Returns COMMAND's exit code. */
int run_wait(run_state *rs);
/* Sets what of t the trace writes (--no-functions, --filter, --exclude)
 * from o (borrowed until t is written): the run's model and every node's
 * part are written alike. */
void run_set_write_opts(model_trace *t, const struct run_opts *o);
/* Writes the trace (and the report) from the model and says what the run
 * ends with. code: run_wait's. Returns the exit code. */
int run_write_outputs(run_state *rs, int code);
/* Undoes what run_start made, whatever it got to, and frees rs. NULL:
 * no-op. */
void run_free(run_state *rs);

/* ---- head.c: the head of a multi-host run ------------------------------ */

struct uv_loop_s;
typedef struct head_state head_state;
typedef struct head_opts {
	const char *listen;                /* --listen [ADDR:]PORT, or NULL: every address,
				  * a free port */
	uint64_t max_memory;               /* what of --max-memory the run's model and
				  * every part share */
	const char *spill_dir;             /* where parts spill past it (borrowed) */
	const char *remote_path;           /* forktrace on the other hosts, for messages */
	proc_tree *tree;                   /* the run's, for its remote launches */
	const struct run_opts *write_opts; /* what every part is written with
					    * (run_set_write_opts), or NULL */
	bool quiet;
} head_opts;

/*
 * Creates the run's key and listens for node collectors, whose parts it
 * keeps beside model (borrowed until head_free; its node.run_id is set).
 * *port gets the port. Returns 0, or a negative errno with why (whycap
 * bytes) saying what failed: remote launches are then not followed.
 */
int head_start(head_state **h, struct uv_loop_s *loop, model_trace *model, const head_opts *o,
	       int *port, char *why, size_t whycap);
/* The key file (removed by head_free; a signal's cleanup removes it too). */
const char *head_key_path(const head_state *h);
/* Sets the run's model's spill limit to its share of --max-memory. */
void head_rebalance(head_state *h);
/* The tree is gone: stops listening and waits for the nodes still
 * streaming and the launched hosts still due to join, at most limit_ms
 * (-1: no limit); then done(ctx). */
void head_wait(head_state *h, int64_t limit_ms, void (*done)(void *ctx), void *ctx);
/* Ends head_wait now (a signal). NULL: no-op. */
void head_stop_waiting(head_state *h);
/* After the wait: parts that did not end whole get their open processes
 * closed (host lost, or running when the wait was cut), and the missing
 * hosts go into the run's model. NULL: no-op. */
void head_finish(head_state *h);
/* The parts (owned by h), at most cap of them into parts; returns how
 * many. */
size_t head_parts(const head_state *h, model_trace **parts, size_t cap);
size_t head_nparts(const head_state *h);
/* Closes the listener and every connection (their handles). NULL: no-op. */
void head_close(head_state *h);
/* Frees the parts and removes the key file. NULL: no-op. */
void head_free(head_state *h);

/* ---- node.c: a node collector (--join) --------------------------------- */

typedef struct node_state node_state;
typedef struct node_opts {
	const char *head;          /* HOST:PORT to connect to */
	const char *resolve_error; /* why head could not be found, or NULL */
	const char *host;          /* this host's name */
	int64_t launcher_pid;      /* -1: --join by hand */
	const char *launched_as;   /* or NULL */
	const char *node_output;   /* --node-output DIR, or NULL */
	const char *spill_dir;     /* the run's spill directory, or NULL */
	proc_tree *tree;           /* the run's (borrowed): parents to link */
} node_opts;

/*
 * Starts the link to the head for model (borrowed until node_free; its
 * node part is filled in). A link that cannot start is no error: the
 * part then goes to its file at the end. Returns 0 or -ENOMEM.
 */
int node_start(node_state **n, struct uv_loop_s *loop, model_trace *model, const node_opts *o);
/* The tree ended and the model is finished: the last clock burst, the
 * rest of the stream, END, the head's acknowledgement, or the part's
 * file; then done(ctx). */
void node_deliver(node_state *n, void (*done)(void *ctx), void *ctx);
/* Where the part was written instead of the head, or NULL. */
const char *node_part_file(const node_state *n);
/* Closes the link and the timers (their handles). NULL: no-op. */
void node_close(node_state *n);
void node_free(node_state *n);

/* ---- cli/combine_cmd.c, cli/info_cmd.c, cli/report_cmd.c ---------------- */

/* `forktrace combine` and `forktrace info` (argv[0] is the subcommand);
 * return the exit code. */
int combine_main(int argc, char **argv);
int info_main(int argc, char **argv);
int report_main(int argc, char **argv);

/* ---- cli/report_opts.c -------------------------------------------------- */

/* getopt values of the report options (shared by run and report). */
enum { REPORT_OPT_INCLUDE = 512, REPORT_OPT_EXCLUDE, REPORT_OPT_PIDS, REPORT_OPT_HOSTS };

/* --include/--exclude (NULL-terminated, malloc'd; strings borrowed from
 * argv), --pids and --hosts. Zero-initialized; report_opts_free releases. */
typedef struct report_opts {
	const char **include, **exclude;
	size_t ninclude, nexclude;
	const char *pids;
	const char *hosts;
} report_opts;

/* Takes one report option (opt is a REPORT_OPT_*; arg borrowed). Returns
 * 0, -ENOMEM, or -EINVAL for another opt. */
int report_opt(report_opts *ro, int opt, const char *arg);
/* Validates the regexes and ranges; returns 0 or SAY_EXIT_USAGE after
 * printing what is wrong (sub names the subcommand). */
int report_check(const report_opts *ro, const char *sub);
void report_opts_free(report_opts *ro);

/* ---- outfile.c --------------------------------------------------------- */

/*
 * An output file. A regular file (or a name not taken yet) is written to
 * an unnamed file in its directory and put in place when complete, so a
 * failed run never leaves half a file, nor a crash a temporary file. A
 * symlink is followed: its target is written. A FIFO, a character device
 * or stdout ("-", /dev/stdout) is written in place. Zero-initialized, or
 * set up by out_file_open.
 */
typedef struct out_file {
	const char *path; /* borrowed: as given */
	const char *what; /* borrowed: "trace", "report" */
	char dir[4096];   /* the target's directory and name */
	char name[256];
	char tmp[4096];    /* the temporary's path, or "" (none, or unnamed) */
	char tmpname[256]; /* its name in dirfd */
	char kept[4096];   /* where the data is when it could not be put at path */
	char canon[4096];  /* the directory's place, its symlinks resolved */
	int fd;
	int dirfd; /* the target's directory (O_PATH), or -1 */
	bool open;
	bool in_place; /* written as it is: FIFO, device, stdout */
	bool anon;     /* fd is an O_TMPFILE file, nameless until commit */
	bool kept_tmp; /* kept is the temporary file itself */
} out_file;

/* Opens the output at path (what names it in messages: "report").
 * seekable: the writer needs a regular file (HDF5), a pipe or device is
 * refused. Prints why on failure and returns a negative errno. */
int out_file_open(out_file *rf, const char *path, const char *what, bool seekable);
/* Whether out_file_open would write path in place (stdout, a FIFO, a
 * device): no file of its own, nothing to put beside it. */
bool out_path_in_place(const char *path);
/* Gives the file its temporary name now, for a writer that opens it
 * again by its name (HDF5 resolves /proc/self/fd/N, which fails for a
 * file without a name). Returns 0 or a negative errno. */
int out_file_name(out_file *rf);
/* Closes and puts it in place. Returns 0 or a negative errno; then the
 * data, when it is whole somewhere else (the directory moved or turned
 * read-only), is kept, and out_file_abort says where. */
int out_file_commit(out_file *rf);
/* After the output failed (a full disk, a closed pipe): writer(ctx, fd)
 * writes it again into a new file in $TMPDIR, which out_file_abort then
 * names. Returns 0, or a negative errno (nothing is left). */
int out_file_fallback(out_file *rf, int (*writer)(void *ctx, int fd), void *ctx);
/* Closes and removes the temporary file, if any; says where the data of
 * a failed commit is kept. No-op on a zero-initialized out_file. */
void out_file_abort(out_file *rf);

/* Refuses, before any work, outputs (outs) that are the same file as
 * another output or as an input (ins; "-" is stdout and stdin), through
 * symlinks and hard links, and an output that an input directory holds
 * as one of its traces. Returns 0, or SAY_EXIT_USAGE after saying which
 * (sub names the subcommand). */
int out_check_paths(const char *sub, const char *const *outs, size_t nout, const char *const *ins,
		    size_t nin);

/* Says that the merge's temporary file in $TMPDIR failed with err
 * (merge_result.spool_error), not the output. */
void out_spool_error(int err);

/* ---- cli/run_cmd.c ----------------------------------------------------- */

struct run_opts {
	const char *output;
	double wait_timeout; /* seconds; < 0: wait forever */
	uint64_t max_memory;
	int gzip_level;
	bool quiet;
	char **command;
	const char *report;     /* --report FILE, or NULL */
	report_opts ro;         /* --include, --exclude, --pids */
	bool no_functions;      /* --no-functions */
	const char **fn_filter; /* --filter (NULL-terminated, malloc'd) */
	size_t nfilter;
	/* Multi-host runs (docs/MULTIHOST.md). */
	bool no_remote;               /* --no-remote: no listener, no key */
	const char *listen;           /* --listen [ADDR:]PORT, or NULL */
	const char *join;             /* --join HEAD:PORT (or FORKTRACE_JOIN):
				       * a node collector; NULL: a head */
	bool output_given;            /* -o was given (a node writes no
				       * local copy without it) */
	const char *node_output;      /* --node-output DIR, or NULL */
	const char *remote_forktrace; /* --remote-forktrace PATH, or NULL */
	int64_t launcher_pid;         /* --launcher-pid, -1: none */
	const char *launched_as;      /* --launched-as DEST, or NULL */
};

/* Parses `forktrace run`'s options into o (zero-initialized; strings
 * borrowed from argv). Returns 0 to go on, or the exit code to leave with. */
int run_parse_opts(int argc, char **argv, run_opts *o);
/* `forktrace run`: its options, then run.c's steps. Returns the exit
 * code. */
int run_main(int argc, char **argv);

#endif /* FT_COLLECTOR_INTERNAL_H */
