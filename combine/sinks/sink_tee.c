/*
 * sink_tee.c - one stream of events into two sinks (sink.h): the trace
 * and the report of `forktrace run --report` from one walk of the model.
 *
 * An output that fails (a full disk, a closed pipe) is left out from then
 * on and the other one is still written whole: what the caller then does
 * about the failed one (write it again from the model elsewhere) must not
 * cost it the one that works, and an output written in place (a pipe)
 * cannot be written again. The tee itself fails only when both have.
 */
#include <errno.h>
#include <stdlib.h>

#include "sink.h"

typedef struct tee_sink {
	trace_sink base;
	trace_sink *out[2]; /* owned */
	int err[2];         /* each one's first error, or 0 */
} tee_sink;

/* Notes each output's first error; returns the first one once both
 * failed, else 0. */
static int tee_note(tee_sink *t, size_t k, int err)
{
	if (err < 0 && t->err[k] == 0)
		t->err[k] = err;
	return t->err[0] < 0 && t->err[1] < 0 ? t->err[0] : 0;
}

static int tee_begin(trace_sink *s, const sink_meta *meta)
{
	tee_sink *t = (tee_sink *)s;
	int err = 0;

	for (size_t k = 0; k < 2; k++)
		if (t->err[k] == 0)
			err = tee_note(t, k, t->out[k]->begin(t->out[k], meta));
	return err;
}

static int tee_event(trace_sink *s, const sink_event *e)
{
	tee_sink *t = (tee_sink *)s;
	int err = 0;

	for (size_t k = 0; k < 2; k++)
		if (t->err[k] == 0)
			err = tee_note(t, k, t->out[k]->event(t->out[k], e));
	return err;
}

static int tee_end(trace_sink *s, const sink_meta *meta)
{
	tee_sink *t = (tee_sink *)s;
	int err = 0;

	for (size_t k = 0; k < 2; k++) {
		/* What the producer counted (events_emit) is each output's. */
		t->out[k]->stats.threads = s->stats.threads;
		t->out[k]->stats.corrupt_chunks = s->stats.corrupt_chunks;
		if (t->err[k] == 0)
			err = tee_note(t, k, t->out[k]->end(t->out[k], meta));
	}
	s->stats = t->out[0]->stats;
	return err;
}

static void tee_free(trace_sink *s)
{
	tee_sink *t = (tee_sink *)s;

	if (t == NULL)
		return;
	for (size_t k = 0; k < 2; k++)
		if (t->out[k]->free != NULL)
			t->out[k]->free(t->out[k]);
	free(t);
}

trace_sink *sink_tee_new(trace_sink *a, trace_sink *b, int *err)
{
	tee_sink *t = calloc(1, sizeof(*t));

	if (t == NULL) {
		*err = -ENOMEM;
		if (a->free != NULL)
			a->free(a);
		if (b->free != NULL)
			b->free(b);
		return NULL;
	}
	t->out[0] = a;
	t->out[1] = b;
	t->base.begin = tee_begin;
	t->base.event = tee_event;
	t->base.end = tee_end;
	t->base.free = tee_free;
	return &t->base;
}

int sink_tee_result(const trace_sink *s, size_t which, events_stats *stats)
{
	const tee_sink *t = (const tee_sink *)s;

	if (stats != NULL)
		*stats = t->out[which]->stats;
	return t->err[which];
}
