/*
 * records.c: in-process event records -> trace events (rec_). Used by
 * events.c, which writes a model's threads.
 */
#ifndef FT_COMBINE_RECORDS_H
#define FT_COMBINE_RECORDS_H

#include <stdint.h>

#include "jsonw.h"

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
 * Emits the trace events of thread th's records (p's thread; written as
 * pid/tid) through emit (ev borrowed for the call), what is left open
 * ending at end_ns. Returns 0 or the first negative return of emit, or
 * -ENOMEM.
 */
int rec_write_thread(rec_ctx *rc, const struct model_process *p, const struct model_thread *th,
		     int64_t pid, int64_t tid, int64_t end_ns,
		     int (*emit)(void *arg, const jsonw_event *ev), void *arg);

#endif /* FT_COMBINE_RECORDS_H */
