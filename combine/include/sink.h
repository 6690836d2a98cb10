/*
 * Trace sinks: the one path from any input to any output.
 *
 *   live model (run) ------------------+
 *   spill files -> model (combine) ----+--> merge_inputs --> trace_sink: JSON / JSON.gz / HDF5 / HTML
 *   files (combine, report) --readers--+    (pid map,        (sink_tee: two of them, one walk)
 *                                            ids, --align)
 *
 * Every input becomes a stream of Chrome trace events (sink_event) through
 * the one merge (merge.h); every output format is a sink that consumes
 * that stream. A model is turned into the same events (events_emit:
 * process_name, forktrace_process, image slices, flows, marks:
 * docs/TRACE_FORMAT.md) that a file written by `forktrace run` holds, so
 * a sink cannot tell - and need not care -
 * whether it is writing a live run or combining files, and
 * `forktrace report trace.json` draws what `forktrace run --report` draws.
 *
 * Sinks may not keep pointers into an event after the call returns, and
 * must keep memory bounded whatever the number of events (streaming
 * writers; aggregating writers keep per-process / per-name state only).
 */
#ifndef FT_COMBINE_SINK_H
#define FT_COMBINE_SINK_H

#include <stdbool.h>
#include <stdint.h>

#include "jsonw.h"
#include "events.h"
#include "model.h"

/*
 * One event on its way to a sink.
 *
 * ev holds the fields forktrace interprets (ph, name, cat, pid, tid, ts,
 * dur, s, id, bp, args as raw JSON object text). Times are ns; pid is the
 * pid to write (after remapping a collision).
 *
 * raw, when raw.p != NULL, is the complete JSON object of the event as it
 * was read from an input file, with every key, including ones forktrace
 * does not know, and with its pid (and, after --align, its ts) already
 * rewritten to match ev. A sink that writes JSON copies raw verbatim, so
 * nothing it does not interpret is lost. Events made from the model have
 * raw.p == NULL.
 *
 * tmpl, when not 0, names the event's template: every event with the same
 * non-zero tmpl that one sink sees in its life has the same ph, name and
 * cat (bytes), pid and tid, and no raw text, args, id, scope or bp; only
 * its times differ. A sink may key what it made of one such event by tmpl
 * alone (sink_json: the slice's text up to its ts) instead of comparing
 * bytes. 0 says nothing. Whoever changes one of those fields of an event
 * it passes on (or makes an event from another's fields) sets 0, unless
 * the change is the same for every event of that tmpl (a pid map). Made
 * by records.c for function slices (a number for each walk of a thread,
 * and one for each name of its process).
 */
typedef struct sink_event {
	jsonw_event ev;
	strview raw;
	uint64_t tmpl;
} sink_event;

/* The run metadata one input of a combine states (its
 * otherData.forktrace); NULL / false where it says nothing. Borrowed. */
typedef struct sink_input_run {
	const char *host;
	const char *const *command; /* NULL-terminated */
	bool has_exit_status;
	int exit_status;
} sink_input_run;

/* Where sink_extra.write is called: the output object itself (after
 * traceEvents), its otherData (after forktrace), and the object of input
 * number `input` in otherData.forktrace.inputs. */
enum sink_extra_place { SINK_EXTRA_TOP, SINK_EXTRA_OTHER_DATA, SINK_EXTRA_INPUT };

/*
 * What else a JSON output holds: the top-level keys of a combine's
 * inputs (merge.c; docs/TRACE_FORMAT.md). write adds keys and values
 * with w at the place named (w is inside that object; write leaves it
 * there) and reports its errors on w's stream (ostream_fail). With an
 * extra, the JSON sink leaves displayTimeUnit to it: write at
 * SINK_EXTRA_TOP always writes one. Sinks that write other formats
 * ignore it.
 */
typedef struct sink_extra {
	void (*write)(void *ctx, jsonw *w, enum sink_extra_place where, size_t input);
	void *ctx;
} sink_extra;

/*
 * One host of a multi-host trace (otherData.forktrace.hosts,
 * docs/TRACE_FORMAT.md): how its clock was put on the trace's, and
 * whether its part is whole. Strings borrowed (static or the merge's).
 */
typedef struct sink_host {
	const char *name;
	const char *role;  /* "head" or "node" */
	const char *state; /* "complete", "lost" (lost_ns says when),
			    * "incomplete" (the head stopped waiting for it
			    * at lost_ns), "missing" (why, where) */
	uint64_t processes;
	/* model_clock_map: "reference" (the head: the trace's clock),
	 * "measured", "realtime anchor", "none"; "not aligned": a part in a
	 * trace without a head (nothing to align it to); err_ns -1: unknown. */
	const char *clock;
	bool anchor; /* its part has a realtime anchor */
	int64_t offset_ns;
	int64_t ref_ns;
	double drift; /* a ratio: 50e-6 is 50 ppm */
	int64_t err_ns;
	uint64_t samples;
	int64_t lost_ns;         /* trace clock, -1: neither lost nor incomplete */
	const char *why, *where; /* a missing host's, else NULL */
	int64_t launcher;        /* trace pid of the process that launched it, -1 */
	const char *launched_as; /* the destination as the launcher named it */
} sink_host;

/* What a sink knows about the whole trace. */
typedef struct sink_meta {
	/* Run metadata (host, command, anchors, exit status, lost events,
	 * origin). For a combine, origin is "forktrace combine", host, command
	 * and exit status are the inputs' where they all agree, and the model
	 * has no processes: the process records come as events. Borrowed. */
	const model_trace *model;
	/* Inputs of a combine (NULL-terminated paths), else NULL. */
	const char *const *inputs;
	/* --align: how each input was shifted ("realtime anchor", "start
	 * time") or NULL when not aligned. Parallel to inputs. */
	const char *const *align_methods;
	const int64_t *align_shift_ns;
	/* What each input says about its run, or NULL. Parallel to inputs. */
	const sink_input_run *input_runs;
	/* model->exit_status is the traced run's although origin is not
	 * "forktrace run": a combine whose inputs agree on it. */
	bool exit_status_known;
	/* Processes in the trace (the model's, or the pids a combine saw). */
	uint64_t processes;
	/* The inputs' other top-level keys, or NULL. Borrowed; the same at
	 * begin and end. */
	const sink_extra *extra;
	/* The hosts of a multi-host trace, the head first; none (NULL, 0)
	 * for a trace of one host. Complete at end; at begin, those of the
	 * models among the inputs. Borrowed. */
	const sink_host *hosts;
	size_t nhosts;
	/* The critical path (critpath.h), computed by the merge: at end only
	 * (NULL at begin, and when the trace has no process tree). Borrowed. */
	const struct critpath *critical_path;
} sink_meta;

typedef struct trace_sink trace_sink;

struct trace_sink {
	/* Before the first event. Returns 0 or a negative errno. */
	int (*begin)(trace_sink *s, const sink_meta *meta);
	/* One event; e is borrowed for the call. Returns 0 or a negative
	 * errno (the merge stops at the first error). */
	int (*event)(trace_sink *s, const sink_event *e);
	/* After the last event: complete the output (meta again: counts that
	 * are known only at the end). Returns 0 or a negative errno. */
	int (*end)(trace_sink *s, const sink_meta *meta);
	/* Releases the sink (after end, or instead of it on error); NULL
	 * for a sink its caller keeps (on the stack). */
	void (*free)(trace_sink *s);
	/* Filled by the sink for the summary line. */
	events_stats stats;
};

/*
 * Sink constructors. Each borrows fd until free (never closes it).
 * Return NULL and set *err (negative errno) on failure.
 */
trace_sink *sink_json_new(int fd, int gzip_level, int *err);

/*
 * What the HTML report embeds (sink_html.c). All borrowed until the sink
 * is freed; NULL or empty means "no filter".
 *   include  POSIX extended regexes (NULL-terminated): keep processes whose
 *            program or command line matches one, with all their slices,
 *            and in other processes the regions/functions that match.
 *   exclude  regexes: drop processes whose program matches one, and
 *            regions/functions/counters whose name matches, everywhere.
 *   pids     trace pid ranges "0-3,7,10-": keep only those processes.
 *   hosts    host names "node1,node2": keep only the processes of those
 *            hosts (a process that says no host is on the trace's).
 */
typedef struct htmlw_opts {
	const char *const *include;
	const char *const *exclude;
	const char *pids;
	const char *hosts;
} htmlw_opts;

/* The HTML report on fd (see htmlw_opts; opts may be NULL). */
trace_sink *sink_html_new(int fd, const htmlw_opts *opts, int *err);

/* Checks opts before any work starts: returns 0, or -EINVAL with a
 * sentence for the user in msg (size bytes) naming the bad option. */
int htmlw_check_opts(const htmlw_opts *opts, char *msg, size_t size);

/*
 * A sink that sends every call to a and to b: two outputs of one walk
 * (the trace and the report of `forktrace run --report`). An output that
 * fails is left out from then on and the other is still written whole;
 * the tee fails only when both have (sink_tee_result says which did).
 * Its stats after end are a's. Consumes a and b (frees them with itself,
 * or at once when it cannot be made: NULL, *err = -ENOMEM).
 */
trace_sink *sink_tee_new(trace_sink *a, trace_sink *b, int *err);

/* The first error of output which (0: a, 1: b) of the tee s, or 0; its
 * stats into *stats (may be NULL). */
int sink_tee_result(const trace_sink *s, size_t which, events_stats *stats);

/*
 * A sink in front of out (borrowed: not freed with it) that computes the
 * critical path (critpath.h) from the forktrace_process events and wait
 * marks on their way to out, and hands it to out's end in
 * sink_meta.critical_path (NULL when the trace has no process to walk).
 * The merge puts one in front of every output, events_write too. Its
 * stats after end are out's. NULL and *err = -ENOMEM when it cannot be
 * made.
 */
trace_sink *sink_critpath_new(trace_sink *out, int *err);
/* The shift (--align) of the input now being read: the ts of its events
 * have it, the times in their args do not. */
void sink_critpath_shift(trace_sink *s, int64_t shift_ns);

/* The sink that writes format fmt on fd (events_opts for gzip level). */
trace_sink *events_sink_for(enum trace_format fmt, int fd, const events_opts *opts, int *err);

/*
 * Emits the events of a model (everything docs/TRACE_FORMAT.md lists for
 * `forktrace run`) into s, between s->begin and s->end which the caller
 * calls. Returns 0 or the first negative errno of the sink.
 */
int events_emit(const model_trace *t, trace_sink *s);

/* How events_emit_with writes a model that is one part of a trace. */
typedef struct events_emit_opts {
	/* Every time of the model goes through it onto the trace's clock
	 * (a node's part of a multi-host run); NULL: as they are. */
	const model_clock_map *clock;
	/* process_labels name the process's host: the trace holds several. */
	bool label_host;
	/* Added to every process_sort_index: the part's processes sort after
	 * those of the parts before it. */
	uint64_t sort_base;
} events_emit_opts;

/* events_emit, as o says (NULL: as events_emit). */
int events_emit_with(const model_trace *t, trace_sink *s, const events_emit_opts *o);

#endif /* FT_COMBINE_SINK_H */
