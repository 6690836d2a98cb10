/*
 * merge - traces in, one trace out: the one path from any input to a
 * sink (`forktrace run`, `combine`, `report`), and what a trace file
 * holds (`forktrace info`). The collector's interface to combine/'s
 * readers.
 *
 *   int merge_inputs(sources, nsources, opts, sink, result)
 *
 * streams every event of every input into sink, between sink->begin and
 * sink->end, which it calls. An input is a file (Chrome trace JSON,
 * plain or gzip, object or array form, HDF5; directories expand to the
 * trace files inside) or a trace model (the live run's, or the one the
 * agents' spill files make): the model's events (events_emit) stand for
 * a file's traceEvents, its run metadata for the file's otherData, and
 * they go through the same pid map, id namespaces and --align shifts.
 * Memory stays flat: one input is read at a time in 1 MiB chunks, and
 * only per-process state is kept (the pid map).
 *
 * pids: every process keeps its pid unless an earlier input already
 * used it (two hosts, two runs, pid reuse); then it gets an unused pid
 * from MERGE_REMAP_BASE on, and a "forktrace_origin" metadata event
 * records the original pid and the input (docs/TRACE_FORMAT.md).
 *
 * ids: with two inputs or more, each input's flow and async ids are
 * rewritten into a namespace of its own (reader.h, READER_ID_SHIFT), so
 * that arrows and async slices of two files never pair up.
 *
 * A multi-host run: a model input whose node.is_node is set is a node's
 * part. Its times go onto the clock of the reference input - the first
 * that is no node's part (the head's) - through its clock map
 * (model_clock_fit; without samples, its realtime anchor against the
 * reference's), its root process (its first, when parentless) becomes a
 * child of its launcher (node.launcher_pid, a pid of the reference
 * input) with a "remote" arrow, and the parts are read after the other
 * inputs. The output lists the hosts (sink_meta.hosts): the head, each
 * part and the hosts the head's model says are missing.
 *
 * Top-level keys other than traceEvents are kept (sink_meta.extra): each
 * with the first input's value, and the differing values of the others
 * in their entry of otherData.forktrace.inputs (docs/TRACE_FORMAT.md).
 */
#ifndef FT_COMBINE_MERGE_H
#define FT_COMBINE_MERGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sink.h"

/* Remapped pids start here: above any pid Linux hands out (pid_max is at
 * most 4194304), as the collector's out_pid does. */
#define MERGE_REMAP_BASE 4194304

typedef struct merge_opts {
	/* --align: shift each input so that traces of different hosts line
	 * up: by its realtime anchor when it has one, else by start time. */
	bool align;
	/* Called now and then with the bytes read so far of all inputs and
	 * their total size (for a progress line); may be NULL. */
	void (*progress)(void *ctx, uint64_t done, uint64_t total);
	void *progress_ctx;
	/* Read size for the readers; 0: the default (1 MiB). For tests. */
	size_t chunk;
	/*
	 * The first input is a model and the output is its own trace, as
	 * `forktrace run` writes it: the model's run metadata is the
	 * output's (origin, host, command, exit status; no list of inputs)
	 * and its events go to the sink as they are, without the pid map
	 * (its pids are taken first: nobody collides with it) or a copy of
	 * their text. The other inputs, if any, must be models of its
	 * nodes' parts (node.is_node): a multi-host run's head.
	 */
	bool model_as_trace;
} merge_opts;

/* One input of a merge: a path (a file, a directory of traces, "-"), or
 * a model, named name in the output (otherData.forktrace.inputs, the
 * forktrace_origin records of its remapped pids). Borrowed. */
typedef struct merge_source {
	const char *path;
	const model_trace *model;
	const char *name;
	/* path was found in a directory (merge_expand): it is read only if
	 * it is a regular file, as a directory input's files are. */
	bool in_dir;
} merge_source;

/* What happened to one input file. */
typedef struct merge_input {
	char *path;            /* owned */
	uint64_t events;       /* events read and written */
	uint64_t bytes;        /* JSON bytes read (uncompressed) */
	uint64_t file_bytes;   /* bytes of the file read */
	uint64_t pids;         /* processes (pids) it brought */
	uint64_t remapped;     /* of them, given another pid */
	uint64_t utf8_fixed;   /* events whose strings had invalid UTF-8 (or raw
	                        control characters), replaced by U+FFFD */
	uint64_t utf8_offset;  /* where the first of them starts */
	uint64_t dup_fixed;    /* events with a key twice in one object: the
	                         last value was kept (as JSON parsers do) */
	uint64_t dup_offset;   /* where the first of them starts */
	uint64_t skipped_keys; /* top-level keys not kept: larger than
	                          READER_MAX_EVENT, not valid JSON, twice */
	char skipped[160];     /* their names, comma-separated (cut) */
	bool gzip;
	bool hdf5;               /* an HDF5 trace, read through its JSON form */
	bool array_form;         /* a bare array of events */
	bool viztracer_overflow; /* VizTracer's buffer wrapped: early events lost */
	int64_t lost_events;     /* otherData.forktrace.lost_events, -1: not said */
	/* Salvaged: the file ends early (killed while writing); every
	 * complete event before error_offset was kept. */
	bool truncated;
	/* NULL when the file was read to its end; else what went wrong
	 * ("byte 1234: expected ',' or ']' after an event"), owned. Events
	 * before error_offset were kept. */
	char *error;
	uint64_t error_offset;
	/* --align: "realtime anchor" or "start time" (static strings), or
	 * NULL; and the shift applied to its timestamps. */
	const char *align;
	int64_t shift_ns;
	char origin[64]; /* "forktrace run", "VizTracer 1.1.1", ... */
	/* A model's chunks of in-process event records that stopped at a
	 * record that did not parse (events_stats.corrupt_chunks). */
	uint64_t corrupt_chunks;
} merge_input;

typedef struct merge_result {
	merge_input *inputs; /* owned, ninputs of them (directories expanded) */
	size_t ninputs;
	uint64_t events;    /* events written, all inputs */
	uint64_t bytes;     /* JSON bytes read, all inputs */
	uint64_t processes; /* distinct pids written */
	uint64_t remapped;  /* pids given another number */
	size_t problems;    /* inputs with an error, truncated, repaired (UTF-8,
	                       duplicate keys), or
	                       with top-level keys not kept */
	/* Top-level keys that the inputs disagree on ("file_info, otherData.x"),
	 * whose first value is the output's and the others are in the
	 * inputs' entries; NULL when none. Owned. */
	char *differ;
	events_stats out; /* what the sink wrote */
	/* The temporary file in $TMPDIR that keeps the inputs' top-level
	 * keys could not be written (negative errno: a full disk); the
	 * combine's error is that one, not the output's. */
	int spool_error;
} merge_result;

/*
 * Combines the inputs src[0..n) - files, directories (every *.json,
 * *.json.gz, *.gz file inside and every other file whose content is a
 * trace, in name order) and models - into sink, in that order. Borrows
 * src, o and sink (calls begin, event, end; never free). Fills *res
 * (owned by the caller: release with merge_result_free). An input that
 * cannot be read whole is reported in res (what was read of it is kept)
 * and the others are still combined. Returns 0, or a negative errno when
 * the output failed (the sink's error, -ENOMEM), -EINVAL when
 * o->model_as_trace is set and src is not one model followed by node
 * parts.
 */
int merge_inputs(const merge_source *src, size_t n, const merge_opts *o, trace_sink *sink,
		 merge_result *res);

/* merge_inputs of the paths[0..npaths): a thin wrapper over the one
 * path, for the readers' unit test and fuzzer, which have files only;
 * forktrace's commands call merge_inputs. */
int merge_files(const char *const *paths, size_t npaths, const merge_opts *o, trace_sink *sink,
		merge_result *res);

/*
 * The inputs paths[0..npaths) stand for, as merge_inputs reads them:
 * each directory replaced by its trace files in name order (or by itself
 * when it has none), "-" (standard input) and other paths as they are.
 * *out (an array of *nout strings), its strings and *in_dir (for each,
 * whether it was found in a directory) are the caller's to free.
 * Returns 0 or -ENOMEM.
 */
int merge_expand(const char *const *paths, size_t npaths, char ***out, bool **in_dir, size_t *nout);

/* Releases what res owns; NULL or a zeroed result is fine. */
void merge_result_free(merge_result *res);

/* Whether merge_inputs, given the directory that holds the regular file
 * at path (name: its name there), reads that file as an input. */
bool merge_dir_takes(const char *path, const char *name);

/* ---- forktrace info ------------------------------------------------- */

/* How a process ended, as its forktrace_process record says. */
enum info_exit {
	INFO_EXIT_NONE = 0,  /* no record, or the record does not say */
	INFO_EXIT_CODE,      /* exit_value: its exit code */
	INFO_EXIT_SIGNAL,    /* exit_value: the signal that killed it */
	INFO_EXIT_UNKNOWN,   /* it ended, how is not known */
	INFO_EXIT_RUNNING,   /* still running when the trace was written */
	INFO_EXIT_HOST_LOST, /* its host's part stopped coming */
};

/* One process of a trace, as info sees it. */
typedef struct info_process {
	int64_t pid;      /* trace pid */
	int64_t host_pid; /* forktrace_process.pid, else pid */
	int64_t parent;   /* trace pid of the parent, -1: none or unknown */
	char *name;       /* process_name, or NULL; owned */
	char *exit;       /* "code 0", "signal 9 (SIGKILL)", "running", ...,
	                      NULL when the trace does not say; owned */
	bool has_record;  /* a forktrace_process record */
	uint64_t events;
	uint64_t lost_events;
	size_t nthreads;
	int64_t *tids;       /* owned, nthreads */
	char **thread_names; /* owned, nthreads (entries may be NULL) */
	char *origin;        /* forktrace_origin of a remapped pid, or NULL */
	char *host;          /* forktrace_process.host, or NULL; owned */
	int64_t rank;        /* forktrace_process.rank, -1: none */
	/* From forktrace_process (docs/TRACE_FORMAT.md, docs/INSIGHT.md):
	 * the program's name without its interpreter ("name"), the
	 * interpreter that ran it ("interpreter"), the launcher that gave
	 * its rank ("launcher"); owned, NULL when the record says none. */
	char *prog;
	char *interp;
	char *launcher;
	int64_t start_ns, end_ns; /* trace clock; -1: unknown */
	enum info_exit exit_kind;
	int64_t exit_value;
	char exit_signame[16]; /* a signal's name ("SIGKILL"), or "" */
	/* "rusage": its source ("wait", "exit", "wait+descendants"; "" when
	 * the record has none) and CPU times (ns) and peak RSS (KiB), -1
	 * where unknown. */
	char ru_source[24];
	int64_t user_ns, sys_ns, maxrss_kb;
} info_process;

/* One host of a multi-host trace (otherData.forktrace.hosts; sink.h,
 * sink_host). Strings owned, NULL when the trace does not say. */
typedef struct info_host {
	char *name, *role, *state, *clock, *why, *where;
	bool anchor; /* its part has a realtime anchor */
	uint64_t processes, samples;
	int64_t offset_ns, err_ns, lost_ns;
	double drift_ppm;
} info_host;

/* One step of the critical path (critpath.h): name owned. */
typedef struct info_step {
	int64_t pid;
	char *name;
	int64_t start_ns, end_ns;
} info_step;

typedef struct info_report {
	char *path; /* owned */
	uint64_t events;
	uint64_t by_phase[128]; /* events by ph (ASCII); [0]: no ph */
	uint64_t bytes, file_bytes;
	bool gzip, hdf5, array_form;
	int64_t min_ts, max_ts; /* ns; min > max when no times */
	char origin[64];        /* "forktrace run", "VizTracer 1.1.1", "other" */
	bool viztracer_overflow;
	int64_t lost_events;        /* from the run metadata, -1: not said */
	uint64_t lost_in_processes; /* sum over processes' lost_events */
	uint64_t skipped_keys;
	char skipped[160];
	uint64_t utf8_fixed;
	uint64_t dup_fixed;
	info_process *procs; /* owned, sorted by pid */
	size_t nprocs;
	info_host *hosts; /* owned, as the trace lists them; none: one host */
	size_t nhosts;
	char *error; /* owned, NULL if read to the end */
	bool truncated;
	/* The traced command (otherData.forktrace.command; owned,
	 * NULL-terminated) and forktrace's exit status for it, when the
	 * trace says them. */
	char **command;
	bool has_exit_status;
	int exit_status;
	/* The critical path as the merge computed it (sink_meta at end):
	 * has_path false when the trace has no process tree to walk. */
	bool has_path;
	int64_t path_start_ns, path_end_ns;
	info_step *steps; /* owned, nsteps, in time order */
	size_t nsteps;
} info_report;

/* Reads the trace at path through the merge (merge_inputs: one input)
 * and fills *rep (release with info_free). in_dir: path was found in a
 * directory (merge_expand): only a regular file is read. Returns 0
 * (problems of the file are in rep->error) or -ENOMEM. */
int info_read(const char *path, bool in_dir, info_report *rep);
/* info_read of the file events_write would write of m (borrowed), named
 * name: the agents' spill files read into a model. Returns 0 or a
 * negative errno. */
int info_read_model(const model_trace *m, const char *name, info_report *rep);
void info_free(info_report *rep);

/* ---- info's summary (infosum.c) ---------------------------------------- */

/* One program of a trace: the processes of one name (forktrace_process
 * "name", else process_name), as `forktrace info` sums them. */
typedef struct info_prog {
	const char *name; /* borrowed from the report */
	uint64_t processes;
	uint64_t timed;    /* of them, with a known start and end */
	int64_t wall_ns;   /* their lifetimes, summed */
	uint64_t with_cpu; /* of them, with a known CPU time */
	int64_t cpu_ns;    /* their user + system time, summed */
	int64_t maxrss_kb; /* the largest peak RSS of one of them, -1: none */
	uint64_t nonzero;  /* exited with a code other than 0 */
	uint64_t killed;   /* killed by a signal */
	/* The script (an image with an interpreter) every one of its
	 * non-zero exits ran under ("configure": its probes), or NULL. */
	const char *nonzero_under;
} info_prog;

/* One process on the critical path: its steps' time, summed. */
typedef struct info_path_proc {
	int64_t pid;
	const char *name; /* borrowed from the report */
	int64_t total_ns;
	size_t steps;
} info_path_proc;

typedef struct info_summary {
	uint64_t records; /* processes with a forktrace_process record */
	/* How they ended: exit code not 0, a signal, still running, host
	 * lost, not known. */
	uint64_t nonzero, killed, running, host_lost, unknown;
	uint64_t with_cpu; /* processes with a known CPU time */
	int64_t user_ns, sys_ns;
	info_prog *progs; /* owned, nprogs, by name */
	size_t nprogs;
	/* progs by wall time, by CPU time, by non-zero exits (most first;
	 * by_cpu and by_nonzero only those with some). Owned. */
	size_t *by_wall, *by_cpu, *by_nonzero;
	size_t nby_cpu, nby_nonzero;
	/* The processes killed by a signal, by end time; those with a known
	 * peak RSS, largest first. Borrowed from the report; owned arrays. */
	const info_process **killed_procs;
	const info_process **by_rss;
	size_t nby_rss;
	/* The processes on the critical path, longest total first. Owned. */
	info_path_proc *path_procs;
	size_t npath_procs;
	/* Processes with a rank, the smallest and largest, and the launcher
	 * that gave the first of them its rank (borrowed), or NULL. */
	uint64_t ranked;
	int64_t rank_min, rank_max;
	const char *launcher;
} info_summary;

/* What rep (borrowed until info_summary_free) says, summed up for the
 * summary of `forktrace info`. Time and memory: O(n log n) and O(n) in
 * its processes. Returns 0 or -ENOMEM (*sum then empty). */
int info_summarize(const info_report *rep, info_summary *sum);
void info_summary_free(info_summary *sum);

#endif /* FT_COMBINE_MERGE_H */
