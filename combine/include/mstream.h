/*
 * The model stream: one host's model as a stream of records, so that a
 * node collector's model can be rebuilt elsewhere. The node sends what
 * changed in its model since its last sync over its connection to the head
 * (collector/link.h); the head feeds what arrives into a model of its own
 * for that node (a "part"), which the merge then takes as one of its model
 * inputs. The same records, after a file header, are a node-output file
 * (NAME.ftnode): what a node that could not reach the head, or lost it,
 * writes, and what `forktrace combine` reads. docs/TRACE_FORMAT.md, "Model
 * stream", defines the records.
 *
 * The stream is untrusted input on the reading side (it comes over the
 * network, or from a file anyone could have written): every record is
 * length-prefixed and capped, and a malformed record stops the reading with
 * an error that says where, keeping what came before.
 */
#ifndef FT_COMBINE_MSTREAM_H
#define FT_COMBINE_MSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* The file header of a node-output file and its length. */
#define MSTREAM_FILE_MAGIC "FTNODE\n\0"
#define MSTREAM_FILE_MAGIC_LEN 8

/* The version in the STREAM record; a reader refuses another. */
#define MSTREAM_VERSION 1u
/* The largest record body a reader takes (an event chunk is at most
 * FT_WIRE_MAX_PAYLOAD, 16 MiB); a writer refuses to make a larger one. */
#define MSTREAM_RECORD_MAX (64u * 1024u * 1024u)

/* Record kinds: the first field of each record (docs/TRACE_FORMAT.md,
 * "Model stream"). A reader skips kinds it does not know. */
enum mstream_kind {
	MSTREAM_R_STREAM = 1, /* version, host, run id: first, once */
	MSTREAM_R_TRACE,      /* the trace header (sent again when it changes) */
	MSTREAM_R_CLOCKS,     /* clock pairs, appended */
	MSTREAM_R_SAMPLES,    /* clock samples against the head, appended */
	MSTREAM_R_MISSING,    /* a missing host, appended */
	MSTREAM_R_PROC,       /* a process, new or updated, by index */
	MSTREAM_R_SEG,        /* an image of a process, new or updated */
	MSTREAM_R_THREAD,     /* a thread of a process, new or updated */
	MSTREAM_R_MARK,       /* a mark of a process */
	MSTREAM_R_CHUNK,      /* event records of a thread, appended */
	MSTREAM_R_END,        /* the model is complete */
};

/* ---- writing (the node) ----------------------------------------------- */

typedef struct mstream_writer mstream_writer;

/* Where records go: data[0..len) is borrowed for the call (it may point
 * into the model's arena). Returns 0, or a negative errno that stops the
 * sync (mstream_sync returns it). */
typedef int (*mstream_emit_fn)(void *ctx, const void *data, size_t len);

/* A writer of t (borrowed: t must outlive it), that has sent nothing
 * yet. NULL on allocation failure. */
mstream_writer *mstream_writer_new(const model_trace *t);
void mstream_writer_free(mstream_writer *w);

/*
 * Emits the records that bring a reader from what this writer sent before
 * up to t's current state: new and changed processes, images, threads,
 * marks, clock pairs and samples, and every event chunk not sent yet.
 * Stops once about max_bytes were emitted (back-pressure: the caller's
 * connection is full) and sets *more; the next call goes on from there.
 * SIZE_MAX: everything. Records are never cut: a call sends at least one
 * record when any is due, and may go past max_bytes by one record (an
 * event chunk: up to 16 MiB). Returns 0 or the first negative errno of
 * emit, or -ENOMEM; after an error of emit the stream may end inside a
 * record, and only a new writer (from scratch, to a new reader) goes on.
 */
int mstream_sync(mstream_writer *w, mstream_emit_fn emit, void *ctx, size_t max_bytes, bool *more);

/*
 * Writes t whole (from scratch) to fd as a node-output file: the magic,
 * then the records, then END when end is set (t is complete). Borrows t
 * and fd (not closed). Returns 0 or a negative errno (write's, -ENOMEM).
 */
int mstream_write_file(const model_trace *t, int fd, bool end);

/* Emits the END record: t is complete (the node's tree ended and
 * proc_finish ran, then a last mstream_sync). A reader that saw it knows
 * nothing is missing. Returns 0 or emit's error. */
int mstream_end(mstream_writer *w, mstream_emit_fn emit, void *ctx);

/* ---- reading (the head, combine) -------------------------------------- */

typedef struct mstream_reader mstream_reader;

/* A reader that fills t (borrowed until mstream_reader_free). NULL on
 * allocation failure. */
mstream_reader *mstream_reader_new(model_trace *t);
void mstream_reader_free(mstream_reader *r);

/*
 * Takes the next bytes of the stream (any split: records may straddle
 * calls). Returns 0, -ENOMEM, or -EBADMSG for bytes that are not a valid
 * record (mstream_error says which record and why); after an error the
 * reader takes nothing more and t keeps what came before.
 */
int mstream_feed(mstream_reader *r, const void *data, size_t len);
/* Why the last mstream_feed failed ("record 12 (PROC): ..."), or "". */
const char *mstream_error(const mstream_reader *r);
/* Did the END record arrive? */
bool mstream_complete(const mstream_reader *r);
/* Bytes taken so far (for messages and progress). */
uint64_t mstream_bytes(const mstream_reader *r);
/* Bytes of a record started but not finished by what was fed so far. */
size_t mstream_held(const mstream_reader *r);

/*
 * Reads the node-output file open at fd (from its current position: the
 * magic, then records) into r's model. Returns 0 when it was read to its
 * END record; -ENODATA when it ends early (the node died while writing:
 * what came before is in the model); -EBADMSG when it is not a node-output
 * file or a record is malformed (what came before is in the model);
 * -ENOMEM, or read's negative errno. mstream_error says why for -ENODATA
 * and -EBADMSG. After either, a model that holds anything is a node's
 * part lost at the last time it knew of (model_mark_lost(model_last_ns)):
 * its open processes end MODEL_EXIT_HOST_LOST then, node.lost_ns says so.
 */
int mstream_read_file(mstream_reader *r, int fd);

#endif /* FT_COMBINE_MSTREAM_H */
