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
 * SIZE_MAX: everything. Returns 0 or the first negative errno of emit, or
 * -ENOMEM.
 */
int mstream_sync(mstream_writer *w, mstream_emit_fn emit, void *ctx, size_t max_bytes,
		 bool *more);

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

#endif /* FT_COMBINE_MSTREAM_H */
