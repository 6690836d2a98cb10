/*
 * events - a trace model turned into trace events and written to an output
 * file (events_, model/events.c): the output formats, their options and
 * what was written. The collector calls it at the end of `forktrace run`.
 */
#ifndef FT_COMBINE_EVENTS_H
#define FT_COMBINE_EVENTS_H

#include <stdint.h>

#include "model.h"

enum trace_format {
	TRACE_FORMAT_JSON = 1,    /* Chrome Trace Event JSON, object form */
	TRACE_FORMAT_JSON_GZ = 2, /* the same, gzip (zlib) */
	TRACE_FORMAT_H5 = 3,      /* HDF5, docs/HDF5_LAYOUT.md */
};

typedef struct events_opts {
	int gzip_level; /* 1..9 for TRACE_FORMAT_JSON_GZ; 0 means 6. For
	                   TRACE_FORMAT_H5 the deflate level; 0 means 4. */
} events_opts;

typedef struct events_stats {
	uint64_t processes;      /* processes written */
	uint64_t threads;        /* threads written */
	uint64_t events;         /* trace events written (all phases) */
	uint64_t bytes;          /* bytes written to the file */
	uint64_t corrupt_chunks; /* in-process record chunks that stopped at a
	                            record that did not parse (records.c) */
} events_stats;

/* The format for an output path by its extension: ".json.gz" or ".gz" ->
 * JSON_GZ, ".h5" or ".hdf5" -> H5, anything else -> JSON. */
enum trace_format events_format_for_path(const char *path);

/*
 * Writes the whole trace t to fd in format fmt. Borrows t and fd (does not
 * close fd). opts and stats may be NULL. Returns 0 or a negative errno
 * (-EIO and friends from write, -ENOMEM).
 *
 * The model's own walk into a sink, without the merge: forktrace itself
 * writes a model through merge_inputs (a model input, model_as_trace).
 * Kept because a test needs exactly this walk: unit.merge checks that the
 * merge writes of a model the bytes this writes (the merge's and the
 * readers' comments define a model input by it); the tests, fuzzers and
 * the benchmark that write a model with nothing to merge use it too.
 */
int events_write(const model_trace *t, int fd, enum trace_format fmt, const events_opts *opts,
		 events_stats *stats);

#endif /* FT_COMBINE_EVENTS_H */
