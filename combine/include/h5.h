/*
 * The HDF5 output and input (docs/HDF5_LAYOUT.md): sink_h5.c writes a
 * trace as HDF5 (prefix h5w_), reader_h5.c turns such a file back into
 * sink events (prefix h5r_). Both are in libforktrace-h5.so, which
 * h5load.c loads on the first call here (h5_module.h says why); when it
 * cannot, it says why on stderr and the call fails with -ELIBACC.
 */
#ifndef FT_COMBINE_H5_H
#define FT_COMBINE_H5_H

#include <stddef.h>
#include <stdint.h>

#include "events.h"
#include "model.h"
#include "sink.h"

/* Value of the root attribute "format" and the version of the layout. */
#define H5_LAYOUT_NAME "forktrace-hdf5"
#define H5_LAYOUT_VERSION 3

/* Loads the HDF5 module now, so that a run can fail before its command
 * starts: 0, or -ELIBACC (the reason said on stderr). */
int sink_h5_load(void);

/*
 * The HDF5 sink writing a new file at path (created or truncated; path
 * borrowed for the call). opts may be NULL; opts->gzip_level 1..9 sets the
 * deflate level of the datasets (0: the default, 4). Returns NULL and sets
 * *err (negative errno: -EACCES, -ENOENT, -EISDIR from creating the file,
 * -EIO from HDF5, -ENOMEM) on failure. The file is complete only after
 * s->end returned 0.
 */
trace_sink *sink_h5_new(const char *path, const events_opts *opts, int *err);

/*
 * The same on an open regular file fd (borrowed until free, never closed),
 * which HDF5 reopens through /proc/self/fd/N: the collector writes into a
 * temporary file it renames afterwards. -ESPIPE if fd is no regular file.
 */
trace_sink *sink_h5_new_fd(int fd, const events_opts *opts, int *err);

/* The memory budget of the buffers of s, a sink_h5 (default 32 MiB), and
 * what they hold now: for tests and the benchmark. */
void sink_h5_set_budget(trace_sink *s, size_t bytes);
size_t sink_h5_buffered(const trace_sink *s);

/*
 * 1 if the file at path starts with the HDF5 signature "\x89HDF\r\n\x1a\n",
 * 0 if not (also for a file shorter than that), negative errno if it
 * cannot be opened or read.
 */
int reader_h5_is(const char *path);

/*
 * Reads the run metadata of an HDF5 trace written by sink_h5 into meta
 * (borrowed; host, origin, command copied into its arena; anchors, start,
 * end, exit status, lost events set) and, when processes != NULL, the
 * number of processes. Returns 0, -EINVAL (not a forktrace HDF5 trace, or
 * a newer layout), -EIO (HDF5 error, corrupt file), -ENOMEM.
 */
int reader_h5_meta(const char *path, model_trace *meta, uint64_t *processes);

/*
 * Sends every event of the HDF5 trace at path to sink->event (sink
 * borrowed; begin and end are the caller's), process by process in the
 * order the file lists them. When meta != NULL it is filled first as by
 * reader_h5_meta. Memory stays bounded (blocks of rows) except for the
 * strings table, which is read whole. Returns 0, the first error of the
 * sink, or the errors of reader_h5_meta.
 */
int reader_h5_read(const char *path, trace_sink *sink, model_trace *meta);

/*
 * The hosts of a multi-host HDF5 trace (its /hosts table): *hosts (n of
 * them; free() it) with their strings in arena's arena; none (NULL, 0)
 * for a trace of one host or of layout 1. Returns 0 or the errors of
 * reader_h5_meta.
 */
int reader_h5_hosts(const char *path, model_trace *arena, sink_host **hosts, size_t *n);

#endif /* FT_COMBINE_H5_H */
