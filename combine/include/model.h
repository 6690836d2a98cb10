/*
 * The trace model: what forktrace knows about a process tree, whichever way
 * it learned it (live from the agents, or from files). The collector fills
 * one in as frames arrive; events.h turns it into events for the writers.
 *
 * Memory: a model_trace owns everything reachable from it. Strings are
 * copied into the trace's arena (model_strdup) and live until model_free.
 * Arrays grow by doubling; pointers to processes stay valid (processes are
 * allocated one by one), pointers into the segment/thread/mark arrays of a
 * process are valid only until the next add to that array.
 *
 * Times are CLOCK_MONOTONIC nanoseconds of the traced host. -1 means
 * "unknown" for every *_ns field.
 */
#ifndef FT_COMBINE_MODEL_H
#define FT_COMBINE_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum model_exit_kind {
	MODEL_EXIT_UNKNOWN = 0, /* nobody saw it end (e.g. --wait-timeout) */
	MODEL_EXIT_CODE,        /* exited; exit_value is the code */
	MODEL_EXIT_SIGNAL,      /* killed; exit_value is the signal number */
	MODEL_EXIT_RUNNING,     /* still running when the trace was written */
	MODEL_EXIT_HOST_LOST    /* its host's part of the run stopped coming
				 * (connection dropped, host died); end_ns is
				 * when, on that host's clock */
};

/* A loaded object of an image, to name function addresses. */
typedef struct model_module {
	const char *path; /* in the arena */
	uint64_t bias;    /* load bias: file address = runtime address - bias */
	uint64_t lo, hi;  /* runtime address range */
} model_module;

/* One process image: the time between two execs (or fork and exec). */
typedef struct model_segment {
	int64_t start_ns;
	int64_t end_ns;
	const char *exe;   /* path of the executable; NULL if unknown */
	const char **argv; /* NULL-terminated; NULL if unknown */
	size_t argc;
	const char *cwd;   /* NULL if unknown */
	bool instrumented; /* an agent ran in this image */
	bool argv_truncated;
	model_module *mods; /* loaded objects, as the agent reported them */
	size_t nmods, mods_cap;
	/* The process's CPU times and peak resident set, cumulative over its
	 * images, when an exec ended this image (the EXEC record's
	 * getrusage(RUSAGE_SELF)): this image's CPU is its end less the
	 * previous image's. -1: unknown; the last image ends with the
	 * process, whose ru tells it. A fork child's copy of its parent's
	 * image that exec'd without a word ends at 0 CPU (peak unknown): what
	 * it ran between fork and exec (microseconds) counts with the image
	 * it exec'd. */
	int64_t end_user_ns, end_sys_ns, end_maxrss_kb;
} model_segment;

/*
 * A piece of one thread's stream of in-process event records (function
 * calls, regions, instants, counters: include/forktrace/wire.h, enum
 * ft_ev_type), kept as the agent encoded them and decoded only when the
 * trace is written (events.c). Times in it are time stamp counter ticks,
 * converted with the trace's clock pairs. The header is always in memory;
 * the bytes are in memory (data) or, past the model's memory limit, in its
 * spill file (data NULL, at off): model_chunk_bytes reads either.
 */
typedef struct model_chunk {
	struct model_chunk *next;
	const unsigned char *data; /* in memory, or NULL: in the spill file */
	uint64_t off;              /* where in the spill file, when data is NULL */
	uint32_t len;
	uint32_t seg; /* index of the image that recorded it */
} model_chunk;

/* Room for the bytes of chunks read back from the spill file, reused
 * from chunk to chunk: zero it before the first use, free(p) after. */
typedef struct model_chunk_buf {
	unsigned char *p;
	size_t cap;
} model_chunk_buf;

/* A (time stamp counter, CLOCK_MONOTONIC ns) pair read together. */
typedef struct model_clock {
	uint64_t tsc;
	int64_t ns;
} model_clock;

typedef struct model_thread {
	int64_t tid;
	const char *name; /* NULL: unnamed */
	int64_t start_ns;
	int64_t end_ns;
	model_chunk *chunks, *chunks_last; /* its event records, in order */
	uint64_t chunk_bytes;
} model_thread;

/*
 * Something that happened inside a process at one time or over a span:
 * an exec that failed, a wait that reaped a child, a system() call, a
 * fatal signal, counted loss. Written as a Chrome 'i' instant when
 * dur_ns < 0, else as an 'X' slice.
 */
typedef struct model_mark {
	int64_t ts_ns;
	int64_t dur_ns;
	int64_t tid;
	const char *name;
	const char *cat;
	const char *args_json; /* a complete JSON object, or NULL */
} model_mark;

/*
 * What a process used, as getrusage/wait4 report it (docs/INSIGHT.md):
 * times in ns, peak resident set in KiB, the rest counts. -1: unknown.
 */
typedef struct model_rusage {
	int64_t user_ns, sys_ns;  /* CPU time in user and kernel mode */
	int64_t maxrss_kb;        /* peak resident set size */
	int64_t minflt, majflt;   /* page faults without / with I/O */
	int64_t nvcsw, nivcsw;    /* voluntary / involuntary context switches */
	int64_t inblock, oublock; /* block input / output operations */
} model_rusage;

/* Where a process's model_rusage came from, most exact first. */
enum model_ru_source {
	MODEL_RU_NONE = 0,       /* nobody reported it */
	MODEL_RU_WAIT,           /* the reaper's wait4 less what the process
				  * itself reaped (its RUSAGE_CHILDREN at exit) */
	MODEL_RU_EXIT,           /* the agent's RUSAGE_SELF at its exit call */
	MODEL_RU_WAIT_WITH_DESC, /* the reaper's wait4 alone: includes the
				  * descendants the process reaped */
};

typedef struct model_process {
	uint32_t index;               /* position in model_trace.procs */
	int64_t pid;                  /* pid on the host */
	int64_t out_pid;              /* pid written to the trace; differs from pid
	                         when the pid was reused during the run */
	uint64_t start_ticks;         /* kernel start time; 0 if unknown */
	int64_t ppid;                 /* -1 if unknown */
	struct model_process *parent; /* NULL: the root or unknown */
	const char *host;             /* NULL: the trace's host */

	int64_t start_ns; /* fork/spawn time, or first sight */
	int64_t end_ns;

	/* Where the parent created this process, for the flow arrow. */
	int64_t spawn_ns; /* -1: no record from the parent */
	int64_t spawn_tid;
	int spawn_kind; /* enum ft_spawn_kind */

	enum model_exit_kind exit_kind;
	int exit_value;

	uint64_t lost_events;

	/* The rank a launcher gave the process, read by the agent from its
	 * environment when it started (OMPI_COMM_WORLD_RANK, PMIX_RANK,
	 * PMI_RANK, SLURM_PROCID, RANK): -1 when none. rank_var names the
	 * variable (in the arena), NULL when none. local_rank likewise
	 * (LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID), -1: none. */
	int64_t rank;
	int64_t local_rank;
	const char *rank_var;

	/* Its own resource use (all -1 when ru_source is MODEL_RU_NONE). */
	model_rusage ru;
	enum model_ru_source ru_source;

	model_segment *segs;
	size_t nsegs, segs_cap;
	model_thread *threads;
	size_t nthreads, threads_cap;
	model_mark *marks;
	size_t nmarks, marks_cap;
} model_process;

typedef struct model_arena_block model_arena_block;

/*
 * One measurement of a node's CLOCK_MONOTONIC against the head's, NTP
 * style (the best of a burst of round trips): at node time node_ns the
 * head's clock read node_ns + offset_ns, within +-err_ns (half the round
 * trip).
 */
typedef struct model_clock_sample {
	int64_t node_ns;
	int64_t offset_ns;
	int64_t err_ns;
} model_clock_sample;

/*
 * How a node's clock maps onto the trace's (the head's): trace_ns = ns +
 * offset_ns + drift * (ns - ref_ns), within +-err_ns. method says how it
 * was found: "measured" (clock samples over the connection), "realtime
 * anchor" (parts combined offline without samples), "none".
 */
typedef struct model_clock_map {
	const char *method; /* static string */
	int64_t offset_ns;
	int64_t ref_ns;
	double drift;
	int64_t err_ns;  /* -1: unknown */
	size_t nsamples; /* samples the fit used */
} model_clock_map;

/*
 * What a trace knows when it is one host's part of a multi-host run (a
 * node collector's model, or the head's copy of it). is_node false: a
 * trace of one host, or the head's own part.
 */
typedef struct model_node_part {
	bool is_node;
	const char *run_id;    /* the run this part belongs to (arena) */
	const char *head_host; /* the head's host name (arena) */
	/* The process on the head whose exec of ssh/rsh started this node
	 * (pid on the head's host), -1 for a node that joined by itself
	 * (--join). The node's root process is its child in the trace. */
	int64_t launcher_pid;
	const char *launched_as; /* the destination as the launcher named it */
	/* The launcher ran on another node (a nested hop: the head has no
	 * such launch), so launcher_pid is that node's: the merge looks for
	 * it among the parts (the process of that pid that marked a "remote
	 * launch" to launched_as), never among the head's processes. */
	bool launched_by_node;
	model_clock_sample *samples;
	size_t nsamples, samples_cap;
	/* When the part stopped coming (the head's clock mapped back onto
	 * the node's), -1: it ended normally. */
	int64_t lost_ns;
	/* The part did not stop, the head stopped taking it: it was still
	 * coming, without its END, when the head's wait for its nodes ended
	 * (--wait-timeout, a signal). lost_ns is then when, and its
	 * processes still open are running, not host lost ("incomplete" in
	 * the trace's hosts, not "lost"). */
	bool cut;
} model_node_part;

/* A host of a multi-host run whose part is not in this trace (in the
 * head's model): forktrace missing there, a node that never joined, a
 * part that went to a node-output file instead. Strings in the arena. */
typedef struct model_missing_host {
	const char *host;     /* as the launcher named it, or the node's name */
	int64_t launcher_pid; /* on the head; -1: none */
	const char *why;      /* "no node collector joined", "connection lost" */
	const char *where;    /* where its part went ("node2:/tmp/x.ftnode"), or NULL */
} model_missing_host;

typedef struct model_trace {
	const char *host;
	const char **command;   /* NULL-terminated argv of the traced command */
	const char *origin;     /* "forktrace run", "combine", ... */
	model_node_part node;   /* one host's part of a multi-host run */
	int64_t anchor_mono_ns; /* one (monotonic, realtime) pair taken */
	int64_t anchor_real_ns; /* together, to align traces across hosts */
	int64_t start_ns;
	int64_t end_ns;

	int exit_status;      /* forktrace's own exit code for the run */
	uint64_t lost_events; /* sum over processes plus collector losses */

	model_process **procs;
	size_t nprocs, procs_cap;

	/* Hosts of a multi-host run whose part is missing (the head's). */
	model_missing_host *missing;
	size_t nmissing, missing_cap;

	/* Clock pairs of the host, to convert event records' ticks. */
	model_clock *clocks;
	size_t nclocks, clocks_cap;
	/* Which instrumented functions to write: POSIX extended regexes on
	 * their names (NULL-terminated, borrowed; NULL: all), and whether to
	 * write them at all. */
	const char *const *fn_include;
	const char *const *fn_exclude;
	bool no_functions;

	model_arena_block *arena;       /* strings: in memory, or mapped from the spill file */
	model_arena_block *chunk_arena; /* chunk headers and bytes: in memory only */
	/* Bytes in memory (both arenas), bytes kept in the spill file instead
	 * past the limit set with model_set_spill, and that limit. */
	uint64_t arena_mem, arena_spilled, spill_limit;
	int spill_fd;        /* -1: no spilling */
	uint64_t spill_size; /* bytes of the spill file written or mapped */
	/* Chunk bytes on their way to the spill file, written in large
	 * pieces: they belong at spill_size. */
	unsigned char *spill_wbuf;
	size_t spill_wlen;
	/* Why the spill file could not grow (ENOSPC, EDQUOT...): spilling
	 * stopped there, and later data stayed in memory. 0: it never failed. */
	int spill_error;
} model_trace;

/*
 * The largest count of lost events a trace holds: readers parse counts as
 * signed 64-bit numbers. Counts come from agents and input files, which
 * may claim anything: sums saturate here instead of wrapping around to a
 * small number that would look like the truth.
 */
#define MODEL_COUNT_MAX ((uint64_t)INT64_MAX)

/* a + b, at most MODEL_COUNT_MAX. */
static inline uint64_t model_count_add(uint64_t a, uint64_t b)
{
	if (a > MODEL_COUNT_MAX)
		a = MODEL_COUNT_MAX;
	return b > MODEL_COUNT_MAX - a ? MODEL_COUNT_MAX : a + b;
}

/* Constructor. Returns NULL on allocation failure. */
model_trace *model_new(void);
/* Frees the trace and everything it owns. model_free(NULL) is a no-op. */
void model_free(model_trace *t);

/*
 * Bounds the memory of t's arenas (the strings: argv, paths, names, mark
 * args, which grow with the number of processes; and the event records'
 * chunks, which grow with the number of events): once limit bytes are in
 * memory, chunk bytes are written to an unlinked temporary file in dir and
 * read back when the trace is written (model_chunk_bytes), and new string
 * blocks live in that file, mapped shared, so the kernel can write them
 * out and drop them instead of keeping them as anonymous memory. Each
 * string block's disk space is reserved before it is mapped; when the
 * disk refuses, spilling stops, the data stays in memory and
 * t->spill_error says why. Returns 0 or a negative errno (then nothing
 * changes). Called again, only the limit changes.
 */
int model_set_spill(model_trace *t, const char *dir, uint64_t limit);

/* Copies s (or its first n bytes) into t's arena; NULL in, NULL out. */
const char *model_strdup(model_trace *t, const char *s);
const char *model_strndup(model_trace *t, const char *s, size_t n);
/* Copies a NULL-terminated array of strings into the arena. */
const char **model_strvdup(model_trace *t, const char *const *v, size_t n);

/* A NULL-filled array of n + 1 string pointers in t's arena, for the
 * caller to fill; NULL on allocation failure. */
const char **model_strv_alloc(model_trace *t, size_t n);

/* Appends a new zeroed process (unknown times/exit, ppid -1, spawn_ns -1,
 * out_pid = pid). Returns it, owned by t, or NULL on allocation failure. */
model_process *model_add_process(model_trace *t, int64_t pid);

/* Appends and returns a zero-filled element (times, and a segment's end_*
 * resource use, set to -1), owned by p; valid until the next add of the
 * same kind. NULL on failure. */
model_segment *model_add_segment(model_trace *t, model_process *p);
model_thread *model_add_thread(model_trace *t, model_process *p, int64_t tid);
model_mark *model_add_mark(model_trace *t, model_process *p);

/* Appends a copy of data[0..len) to thread th of p as recorded by image
 * seg: in memory while under the spill limit, else in the spill file.
 * Returns 0 or -ENOMEM. */
int model_add_chunk(model_trace *t, model_thread *th, uint32_t seg, const void *data, size_t len);

/*
 * The bytes of chunk c of t (c->len of them): c->data when they are in
 * memory, else read from the spill file into buf (grown to fit; the
 * caller's, reused from call to call), valid until the next call with
 * buf. NULL on failure (the spill file could not be read; errno says
 * why).
 */
const unsigned char *model_chunk_bytes(const model_trace *t, const model_chunk *c,
				       model_chunk_buf *buf);

/* Adds a module to image s unless it has it (same path and bias); path is
 * copied. Returns 0 or -ENOMEM. */
int model_add_module(model_trace *t, model_segment *s, const char *path, size_t pathlen,
		     uint64_t bias, uint64_t lo, uint64_t hi);

/* Adds a clock pair. Returns 0 or -ENOMEM. */
int model_add_clock(model_trace *t, uint64_t tsc, int64_t ns);

/* Adds a missing host (strings copied). Returns 0 or -ENOMEM. */
int model_add_missing_host(model_trace *t, const char *host, int64_t launcher_pid, const char *why,
			   const char *where);

/* Adds a clock sample to t->node. Returns 0 or -ENOMEM. */
int model_add_clock_sample(model_trace *t, int64_t node_ns, int64_t offset_ns, int64_t err_ns);

/*
 * Fits t's clock samples: offset and drift by least squares over the
 * samples weighted by 1/err^2, once they span more than a second (else
 * the offset of the best sample, drift 0). Samples with an error above
 * four times the best one's are left out. err_ns bounds the map's error
 * at every sample it used: the largest of a sample's error plus its
 * distance from the fitted line (the best sample's error without a
 * drift). A drift beyond 1000 ppm is taken for noise (the best sample's
 * offset instead). Without samples: method "realtime anchor" when t has
 * an anchor (the offset against another trace's anchor is for the merge
 * to compute; here offset 0), else "none". Returns the map in *out;
 * never fails.
 */
void model_clock_fit(const model_trace *t, model_clock_map *out);

/* ns of the mapped clock through m (NULL: as it is); negative times
 * (-1: unknown) stay as they are. */
int64_t model_clock_apply(const model_clock_map *m, int64_t ns);

/* The latest time t holds outside its event records (processes, images,
 * threads, marks, clock pairs and samples): the last it knew of. -1: none. */
int64_t model_last_ns(const model_trace *t);

/*
 * Closes what a part that stopped coming (a node's connection dropped, its
 * file cut short, the head's wait ended) left open: every process whose
 * exit is not known (unknown, running) gets kind at end_ns (its start if
 * later); the images and threads still open in every ended process end
 * with it. A process already host lost keeps its time. Returns how many
 * processes it closed.
 */
size_t model_close_open(model_trace *t, enum model_exit_kind kind, int64_t end_ns);

/* A node's part lost at lost_ns (its own clock): node.lost_ns, and its
 * open processes MODEL_EXIT_HOST_LOST then (model_close_open). The head
 * and the readers of node-output files use it alike. */
size_t model_mark_lost(model_trace *t, int64_t lost_ns);

/* The thread with this tid, or NULL. */
model_thread *model_find_thread(model_process *p, int64_t tid);

/* Program name of a process: basename of its last segment's argv[0] or
 * exe, else "pid N"-free placeholder "?"; borrowed from the model. */
const char *model_process_name(const model_process *p);

/*
 * What people call the program an image runs (docs/INSIGHT.md "Names"):
 * the script an interpreter runs ("configure" for /bin/sh ./configure,
 * "venv" for python3 -m venv), with interp the interpreter ("sh",
 * "python3"); else the basename of argv[0] (or exe) and interp NULL. name
 * is never NULL ("?" when nothing is known). Both borrowed from s (they
 * point into its strings).
 */
typedef struct model_name {
	const char *name;
	const char *interp;
} model_name;
model_name model_image_name(const model_segment *s);

/* The launcher a rank's variable names (docs/INSIGHT.md "Names"): "Open
 * MPI", "PMIx", "MPICH/PMI", "Slurm", "torchrun"; NULL for NULL or a
 * variable it does not know. Static strings. */
const char *model_launcher_name(const char *rank_var);

/* The strings of ru_source in traces: "wait", "exit", "wait+descendants";
 * NULL for MODEL_RU_NONE. */
const char *model_ru_source_name(enum model_ru_source src);

#endif /* FT_COMBINE_MODEL_H */
