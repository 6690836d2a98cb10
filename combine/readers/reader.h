/*
 * reader - Chrome Trace Event JSON files (plain or gzip, object or array
 * form) turned into a stream of sink events, in flat memory (internal to
 * combine/).
 *
 * The file is read in fixed-size chunks (1 MiB; gzip is inflated chunk by
 * chunk), and each event is scanned where it lies in the buffer and handed
 * to the sink with raw = its exact text; only an event that straddles two
 * chunks is moved (to the start of the buffer) before the next read. An
 * event larger than READER_MAX_EVENT is refused as an error. Top-level
 * keys other than traceEvents are handed to the caller (reader_opts.
 * top_key) one at a time, each value where it lies in the buffer, or
 * skipped as they stream past when nobody takes them; forktrace reads the
 * small metadata objects itself (otherData.forktrace, viztracer_metadata).
 *
 * The raw text of an event is rewritten only where forktrace must change
 * it: its pid when the caller remaps it (and the main thread's tid, which
 * equals the pid, and forktrace_process's args.parent), its ts when
 * shift_ns != 0, its flow and async ids when remap_ids is set, and
 * invalid UTF-8 or raw control characters in its strings (replaced by
 * \ufffd / escaped, so the output stays valid JSON).
 */
#ifndef FT_COMBINE_READER_H
#define FT_COMBINE_READER_H

#include <stdbool.h>
#include <stdint.h>

#include "sink.h"

/* Read size; also the buffer's starting size. */
#define READER_CHUNK (1u << 20)
/* The largest event (or metadata object) accepted. */
#define READER_MAX_EVENT (16u << 20)
/* String pids of a file get ids from here on when nobody maps them. */
#define READER_STRPID_BASE 4194304

typedef struct reader_opts {
	/* Added to every ts (--align); 0: ts text untouched. */
	int64_t shift_ns;
	/* The pid to write for a pid of this file: pid is the number, or,
	 * for a pid that is a non-numeric string, name is that string
	 * (unescaped, borrowed for the call) and pid the file-local id the
	 * reader gave it. NULL: numbers unchanged, strings get
	 * READER_STRPID_BASE + k. May emit events into the sink (it is
	 * called before the event that made it). */
	int64_t (*map_pid)(void *ctx, int64_t pid, const char *name);
	void *map_ctx;
	/* Called after each read with the bytes of the file read so far. */
	void (*progress)(void *ctx, uint64_t file_bytes);
	void *progress_ctx;
	/* Read size; 0 means READER_CHUNK (tests use tiny ones). */
	size_t chunk;
	/* Called with the value of otherData.forktrace (valid JSON text,
	 * borrowed for the call) when the file has one; may be NULL. combine
	 * takes the run metadata of its inputs (host, command, exit status)
	 * from it. */
	void (*run_meta)(void *ctx, strview forktrace);
	void *run_meta_ctx;
	/*
	 * Keeps the flow and async ids of this file apart from those of the
	 * other inputs of a combine, in the namespace of input number
	 * id_input: "id" of the phases s t f b n e S T p F, "global" of their
	 * "id2", and "bind_id" of any event (reader_remap_id says how; ev.id
	 * follows). "local" ids of id2 belong to their process and stay.
	 */
	bool remap_ids;
	uint64_t id_input;
	/*
	 * Called with each top-level key of the object form other than
	 * traceEvents, and with each member of otherData but forktrace
	 * (in_other_data): key is the name, unescaped (may hold NUL), value
	 * its complete JSON text, valid (strings repaired as in events); both
	 * borrowed for the call. Returns 0 (kept), 1 (not kept: counted in
	 * skipped_keys) or a negative errno, which ends the reading and is
	 * returned. Values larger than READER_MAX_EVENT are skipped (and
	 * counted). NULL: every key is skipped, and counted but
	 * displayTimeUnit and the metadata objects forktrace reads.
	 */
	int (*top_key)(void *ctx, strview key, bool in_other_data, strview value);
	void *top_key_ctx;
	/* reader_read only. regular_only: the path was found in a directory,
	 * not named by the user: it is read only if it is a regular file
	 * (regfile.h; a FIFO there would block forever). use_fd: read fd
	 * (borrowed, a regular file, from its start) instead of opening the
	 * path: the copy of a stream that must be read twice (reader_spool). */
	bool regular_only;
	bool use_fd;
	int fd;
} reader_opts;

/* Flow and async ids of input k (reader_opts.remap_ids): integers and
 * strings that are hexadecimal numbers ("0x1f", "1f", "42", as Perfetto
 * reads flow ids) have bit 40 and up xored with k (the value for numbers,
 * hex digits out for strings); any other string gets the prefix "iK:". */
#define READER_ID_SHIFT 40

/* Phases whose "id" pairs events: flows (s t f) and async slices,
 * nestable (b n e) and legacy (S T p F). The ids of other phases name
 * something of their process (objects N O D, which snapshots refer to by
 * id; counters C, whose id is part of their name; samples P) and stay. */
static inline bool reader_pairs_by_id(char ph)
{
	switch (ph) {
	case 's':
	case 't':
	case 'f':
	case 'b':
	case 'n':
	case 'e':
	case 'S':
	case 'T':
	case 'p':
	case 'F':
		return true;
	default:
		return false;
	}
}

/* What reading one file found. */
typedef struct reader_info {
	uint64_t events;       /* events handed to the sink */
	uint64_t bytes;        /* JSON bytes read (uncompressed) */
	uint64_t file_bytes;   /* bytes read from the file */
	uint64_t utf8_fixed;   /* events whose strings had to be repaired */
	uint64_t utf8_offset;  /* where the first of them starts */
	uint64_t dup_fixed;    /* events with a key twice in an object: the
	                         last value kept, the others left out */
	uint64_t dup_offset;   /* where the first of them starts */
	uint64_t skipped_keys; /* top-level keys not kept (top_key) */
	char skipped[160];     /* their names, comma-separated (cut) */
	bool gzip;
	bool hdf5;       /* an HDF5 trace, read through its JSON form */
	bool array_form; /* a bare array of events */
	bool truncated;  /* the file ends early: events up to there kept */
	/* Time span of the events, ns (after the shift): min ts, max ts+dur;
	 * min_ts > max_ts when no event has a time. */
	int64_t min_ts, max_ts;
	/* Metadata found in the file. */
	bool has_anchor; /* (monotonic, realtime) pair */
	int64_t anchor_mono_ns, anchor_real_ns;
	char origin[64]; /* "forktrace run", "VizTracer 1.1.1", "" */
	bool viztracer;
	bool viztracer_overflow; /* VizTracer's ring buffer wrapped: early events lost */
	int64_t lost_events;     /* otherData.forktrace.lost_events, -1: unknown */
	/* The first problem (error or truncation), "" if none, and where. */
	char error[256];
	uint64_t error_offset;
} reader_info;

/*
 * Reads the trace in fd (borrowed; name is for messages) and sends each
 * event to sink (NULL: only fill info, e.g. for --align's first pass).
 * Problems of the input (not a trace, corrupt gzip, truncation, syntax
 * errors) end the reading of that file and are reported in info; events
 * before them were sent. Returns 0, -ENOMEM, or the sink's first error.
 */
int reader_read_fd(int fd, const reader_opts *o, trace_sink *sink, reader_info *info);

/*
 * reader_read_fd on what path names, opened once: "-" is standard input;
 * a FIFO, a pipe (/dev/stdin) or a device is read as a stream, from the
 * bytes read to tell its kind on. An HDF5 trace is read through its JSON
 * form (from a stream: after a copy into an unlinked temporary file, as
 * HDF5 seeks). A file that cannot be opened is an input problem
 * (info->error), not a return code.
 */
int reader_read(const char *path, const reader_opts *o, trace_sink *sink, reader_info *info);

/* Whether path is read as a stream ("-", a FIFO, a pipe, a device): it
 * can be read only once. */
bool reader_is_stream(const char *path);

/*
 * Copies the stream path names into an unlinked temporary file (in
 * $TMPDIR, else /tmp), for a reader that must read it twice (--align):
 * returns its fd (the caller owns it; pass it as reader_opts.fd) or a
 * negative errno.
 */
int reader_spool(const char *path);

/* What reader_read of the file events_write writes of m would find in
 * its metadata (origin, anchor, lost events; no events counted yet):
 * a model input of the merge, or of info, stands for that file. */
void reader_info_of_model(const model_trace *m, reader_info *inf);

/* Whether the first bytes of a file look like a trace (gzip magic, or '{'
 * or '[' after whitespace). For picking files in a directory: only a
 * regular file is opened. */
bool reader_sniff(const char *path);

#endif /* FT_COMBINE_READER_H */
