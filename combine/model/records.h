/*
 * records.c: in-process event records -> trace events (rec_). Used by
 * events.c, which writes a model's threads.
 */
#ifndef FT_COMBINE_RECORDS_H
#define FT_COMBINE_RECORDS_H

#include <stdint.h>

#include "jsonw.h"
#include "sink.h"

struct model_trace;
struct model_process;
struct model_thread;

typedef struct rec_ctx rec_ctx;

typedef struct rec_stats {
	uint64_t corrupt_chunks; /* chunks whose decoding stopped at a bad record */
} rec_stats;

/* State for writing the records of trace t (borrowed until free): the
 * clock map, symbol tables, function filters. NULL with *err = -ENOMEM,
 * or -EINVAL when a filter regex does not compile. */
rec_ctx *rec_ctx_new(const struct model_trace *t, int *err);
void rec_ctx_free(rec_ctx *rc); /* NULL: no-op */
const rec_stats *rec_ctx_stats(const rec_ctx *rc);

/*
 * Sends the trace events of thread th's records (p's thread; written as
 * pid/tid) to out, what is left open ending at end_ns, their times onto
 * the trace's clock through clock (NULL: as they are). Each goes to
 * out->event at once, without raw text and without a copy on the way.
 * Returns 0 or the first negative return of out->event, or -ENOMEM.
 */
int rec_write_thread(rec_ctx *rc, const struct model_process *p, const struct model_thread *th,
		     int64_t pid, int64_t tid, int64_t end_ns, trace_sink *out,
		     const model_clock_map *clock);

#endif /* FT_COMBINE_RECORDS_H */
