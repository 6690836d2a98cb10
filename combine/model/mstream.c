/*
 * mstream.c - a model as a stream of records and back (mstream.h). The
 * records are defined in docs/TRACE_FORMAT.md, "Model stream".
 *
 * The writer remembers, per object of the model, what it sent: a hash of
 * a process's, an image's or a thread's small fields (strings by their
 * arena pointer: arena strings never change), how many marks, modules,
 * clock pairs, samples and missing hosts went out, and the last event
 * chunk sent of each thread (chunks form an append-only list). A sync
 * that finds nothing changed costs a few hashes per process and no
 * allocation; chunk bytes go to emit straight from the arena (or from the
 * spill file, through one buffer).
 *
 * The reader rebuilds the model through the model API, so that every
 * limit of the model (its spill limit for arena bytes) holds for what
 * comes from a peer too. Each record is checked with mpcheck_plausible
 * before msgpack-c unpacks it, so what a record claims cannot make the
 * unpacker allocate more than a small multiple of the record's size.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <msgpack.h>

#include "mpcheck.h"
#include "mstream.h"
#include "vec.h"

/* The fields of a model_rusage, as PROC carries them. */
#define MSTREAM_RU_FIELDS 9
_Static_assert(sizeof(model_rusage) == MSTREAM_RU_FIELDS * sizeof(int64_t),
	       "model_rusage is its nine int64_t fields");

/* Clock pairs and samples per record: keeps a record of a long run's
 * pairs well under MSTREAM_RECORD_MAX. */
#define CLOCKS_PER_RECORD 65536u

static const char *const kind_names[] = {
	[MSTREAM_R_STREAM] = "STREAM",   [MSTREAM_R_TRACE] = "TRACE",
	[MSTREAM_R_CLOCKS] = "CLOCKS",   [MSTREAM_R_SAMPLES] = "SAMPLES",
	[MSTREAM_R_MISSING] = "MISSING", [MSTREAM_R_PROC] = "PROC",
	[MSTREAM_R_SEG] = "SEG",         [MSTREAM_R_THREAD] = "THREAD",
	[MSTREAM_R_MARK] = "MARK",       [MSTREAM_R_CHUNK] = "CHUNK",
	[MSTREAM_R_END] = "END",
};

static const char *kind_name(uint64_t kind)
{
	if (kind < sizeof(kind_names) / sizeof(kind_names[0]) && kind_names[kind] != NULL)
		return kind_names[kind];
	return "unknown";
}

/* ---- writing ------------------------------------------------------------ */

typedef struct seg_sent {
	uint64_t hash;
	size_t nmods; /* modules sent */
} seg_sent;

typedef struct thread_sent {
	uint64_t hash;
	const model_chunk *last; /* last chunk sent, NULL: none yet */
} thread_sent;

typedef struct proc_sent {
	uint64_t hash;
	bool sent;
	int64_t parent; /* the parent index sent, -1: none */
	seg_sent *segs;
	size_t nsegs, segs_cap;
	thread_sent *threads;
	size_t nthreads, threads_cap;
	size_t nmarks;
} proc_sent;

struct mstream_writer {
	const model_trace *t;
	bool started;
	bool trace_sent;
	uint64_t trace_hash;
	size_t nclocks, nsamples, nmissing;
	proc_sent *procs;
	size_t nprocs, procs_cap;
	size_t nsent; /* processes [0, nsent) are known to the reader */
	/* Processes that went out without their parent in this round (not
	 * sent yet, or it would have closed a loop), for the second round. */
	size_t *defer;
	size_t ndefer, defer_cap;

	/* The record being built: 4 bytes of length, then its msgpack. */
	char *buf;
	size_t len, cap;
	bool nomem;
	msgpack_packer pk;
	/* A chunk's bytes read back from the model's spill file. */
	model_chunk_buf chunk_buf;

	/* The sync in progress. */
	mstream_emit_fn emit;
	void *ctx;
	size_t budget, emitted;
};

static int buf_write(void *data, const char *p, size_t n)
{
	mstream_writer *w = data;

	if (vec_grow(&w->buf, &w->cap, w->len + n, 1, 4096) < 0) {
		w->nomem = true;
		return -1;
	}
	memcpy(w->buf + w->len, p, n);
	w->len += n;
	return 0;
}

mstream_writer *mstream_writer_new(const model_trace *t)
{
	mstream_writer *w = calloc(1, sizeof(*w));

	if (w == NULL)
		return NULL;
	w->t = t;
	msgpack_packer_init(&w->pk, w, buf_write);
	return w;
}

void mstream_writer_free(mstream_writer *w)
{
	if (w == NULL)
		return;
	for (size_t i = 0; i < w->nprocs; i++) {
		free(w->procs[i].segs);
		free(w->procs[i].threads);
	}
	free(w->procs);
	free(w->defer);
	free(w->buf);
	free(w->chunk_buf.p);
	free(w);
}

/* Starts a record of kind with n fields after the kind. */
static void rec_begin(mstream_writer *w, unsigned kind, uint32_t n)
{
	static const char zero[4];

	w->len = 0;
	w->nomem = false;
	buf_write(w, zero, 4);
	msgpack_pack_array(&w->pk, n + 1);
	msgpack_pack_unsigned_int(&w->pk, kind);
}

/* Sends the record built, followed by tail[0..tail_len) (the bytes of a
 * CHUNK record's bin, straight from the arena), as one record. */
static int rec_end_tail(mstream_writer *w, const void *tail, size_t tail_len)
{
	size_t body;
	int err;

	if (w->nomem)
		return -ENOMEM;
	body = w->len - 4 + tail_len;
	if (body > MSTREAM_RECORD_MAX)
		return -EMSGSIZE;
	w->buf[0] = (char)(body & 0xff);
	w->buf[1] = (char)((body >> 8) & 0xff);
	w->buf[2] = (char)((body >> 16) & 0xff);
	w->buf[3] = (char)((body >> 24) & 0xff);
	err = w->emit(w->ctx, w->buf, w->len);
	if (err == 0 && tail_len > 0)
		err = w->emit(w->ctx, tail, tail_len);
	if (err == 0)
		w->emitted += w->len + tail_len;
	return err;
}

static int rec_end(mstream_writer *w)
{
	return rec_end_tail(w, NULL, 0);
}

static void put_int(mstream_writer *w, int64_t v)
{
	msgpack_pack_int64(&w->pk, v);
}

static void put_uint(mstream_writer *w, uint64_t v)
{
	msgpack_pack_uint64(&w->pk, v);
}

static void put_bool(mstream_writer *w, bool v)
{
	if (v)
		msgpack_pack_true(&w->pk);
	else
		msgpack_pack_false(&w->pk);
}

static void put_str(mstream_writer *w, const char *s)
{
	size_t n;

	if (s == NULL) {
		msgpack_pack_nil(&w->pk);
		return;
	}
	n = strlen(s);
	msgpack_pack_str(&w->pk, n);
	msgpack_pack_str_body(&w->pk, s, n);
}

/* n strings of v (NULL elements as nil), or nil for no array. */
static void put_strv(mstream_writer *w, const char *const *v, size_t n)
{
	if (v == NULL) {
		msgpack_pack_nil(&w->pk);
		return;
	}
	msgpack_pack_array(&w->pk, n);
	for (size_t i = 0; i < n; i++)
		put_str(w, v[i]);
}

static inline uint64_t mix(uint64_t h, uint64_t v)
{
	h = (h ^ v) * 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 31);
}

static inline uint64_t mixp(uint64_t h, const void *p)
{
	return mix(h, (uint64_t)(uintptr_t)p);
}

static uint64_t trace_hash(const model_trace *t)
{
	const model_node_part *n = &t->node;
	uint64_t h = 1;

	h = mixp(h, t->host);
	h = mixp(h, t->command);
	h = mixp(h, t->origin);
	h = mix(h, (uint64_t)t->anchor_mono_ns);
	h = mix(h, (uint64_t)t->anchor_real_ns);
	h = mix(h, (uint64_t)t->start_ns);
	h = mix(h, (uint64_t)t->end_ns);
	h = mix(h, (uint64_t)(int64_t)t->exit_status);
	h = mix(h, t->lost_events);
	h = mix(h, n->is_node);
	h = mixp(h, n->run_id);
	h = mixp(h, n->head_host);
	h = mix(h, (uint64_t)n->launcher_pid);
	h = mixp(h, n->launched_as);
	h = mix(h, (uint64_t)n->lost_ns);
	return h;
}

static size_t strv_len(const char *const *v)
{
	size_t n = 0;

	while (v != NULL && v[n] != NULL)
		n++;
	return n;
}

static int send_stream(mstream_writer *w)
{
	rec_begin(w, MSTREAM_R_STREAM, 3);
	put_uint(w, MSTREAM_VERSION);
	put_str(w, w->t->host);
	put_str(w, w->t->node.run_id);
	return rec_end(w);
}

static int send_trace(mstream_writer *w)
{
	const model_trace *t = w->t;
	const model_node_part *n = &t->node;

	rec_begin(w, MSTREAM_R_TRACE, 15);
	put_str(w, t->host);
	put_strv(w, t->command, strv_len(t->command));
	put_str(w, t->origin);
	put_int(w, t->anchor_mono_ns);
	put_int(w, t->anchor_real_ns);
	put_int(w, t->start_ns);
	put_int(w, t->end_ns);
	put_int(w, t->exit_status);
	put_uint(w, t->lost_events);
	put_bool(w, n->is_node);
	put_str(w, n->run_id);
	put_str(w, n->head_host);
	put_int(w, n->launcher_pid);
	put_str(w, n->launched_as);
	put_int(w, n->lost_ns);
	return rec_end(w);
}

/* The trace-wide records: header, clock pairs, samples, missing hosts. */
static int send_trace_parts(mstream_writer *w)
{
	const model_trace *t = w->t;
	uint64_t h = trace_hash(t);
	int err;

	if (!w->trace_sent || h != w->trace_hash) {
		if ((err = send_trace(w)) < 0)
			return err;
		w->trace_sent = true;
		w->trace_hash = h;
	}
	while (w->nclocks < t->nclocks) {
		size_t n = t->nclocks - w->nclocks;

		n = n > CLOCKS_PER_RECORD ? CLOCKS_PER_RECORD : n;
		rec_begin(w, MSTREAM_R_CLOCKS, 2);
		put_uint(w, w->nclocks);
		msgpack_pack_array(&w->pk, 2 * n);
		for (size_t i = w->nclocks; i < w->nclocks + n; i++) {
			put_uint(w, t->clocks[i].tsc);
			put_int(w, t->clocks[i].ns);
		}
		if ((err = rec_end(w)) < 0)
			return err;
		w->nclocks += n;
	}
	while (w->nsamples < t->node.nsamples) {
		size_t n = t->node.nsamples - w->nsamples;

		n = n > CLOCKS_PER_RECORD ? CLOCKS_PER_RECORD : n;
		rec_begin(w, MSTREAM_R_SAMPLES, 2);
		put_uint(w, w->nsamples);
		msgpack_pack_array(&w->pk, 3 * n);
		for (size_t i = w->nsamples; i < w->nsamples + n; i++) {
			const model_clock_sample *s = &t->node.samples[i];
			put_int(w, s->node_ns);
			put_int(w, s->offset_ns);
			put_int(w, s->err_ns);
		}
		if ((err = rec_end(w)) < 0)
			return err;
		w->nsamples += n;
	}
	for (; w->nmissing < t->nmissing; w->nmissing++) {
		const model_missing_host *m = &t->missing[w->nmissing];

		rec_begin(w, MSTREAM_R_MISSING, 5);
		put_uint(w, w->nmissing);
		put_str(w, m->host);
		put_int(w, m->launcher_pid);
		put_str(w, m->why);
		put_str(w, m->where);
		if ((err = rec_end(w)) < 0)
			return err;
	}
	return 0;
}

static uint64_t proc_hash(const model_process *p, int64_t parent)
{
	uint64_t h = 2;

	h = mix(h, (uint64_t)p->pid);
	h = mix(h, (uint64_t)p->out_pid);
	h = mix(h, p->start_ticks);
	h = mix(h, (uint64_t)p->ppid);
	h = mix(h, (uint64_t)parent);
	h = mixp(h, p->host);
	h = mix(h, (uint64_t)p->start_ns);
	h = mix(h, (uint64_t)p->end_ns);
	h = mix(h, (uint64_t)p->spawn_ns);
	h = mix(h, (uint64_t)p->spawn_tid);
	h = mix(h, (uint64_t)(int64_t)p->spawn_kind);
	h = mix(h, (uint64_t)p->exit_kind);
	h = mix(h, (uint64_t)(int64_t)p->exit_value);
	h = mix(h, p->lost_events);
	h = mix(h, (uint64_t)p->rank);
	h = mix(h, (uint64_t)p->local_rank);
	h = mixp(h, p->rank_var);
	h = mix(h, (uint64_t)p->ru_source);
	for (const int64_t *v = &p->ru.user_ns; v <= &p->ru.oublock; v++)
		h = mix(h, (uint64_t)*v);
	return h;
}

static uint64_t seg_hash(const model_segment *s)
{
	uint64_t h = 3;

	h = mix(h, (uint64_t)s->start_ns);
	h = mix(h, (uint64_t)s->end_ns);
	h = mixp(h, s->exe);
	h = mixp(h, s->argv);
	h = mix(h, s->argc);
	h = mixp(h, s->cwd);
	h = mix(h, (uint64_t)s->instrumented << 1 | s->argv_truncated);
	h = mix(h, s->nmods);
	h = mix(h, (uint64_t)s->end_user_ns);
	h = mix(h, (uint64_t)s->end_sys_ns);
	h = mix(h, (uint64_t)s->end_maxrss_kb);
	return h;
}

static uint64_t thread_hash(const model_thread *th)
{
	uint64_t h = 4;

	h = mix(h, (uint64_t)th->tid);
	h = mixp(h, th->name);
	h = mix(h, (uint64_t)th->start_ns);
	h = mix(h, (uint64_t)th->end_ns);
	return h;
}

/* Has this sync sent its share? At least one record goes out per call. */
static bool budget_spent(const mstream_writer *w)
{
	return w->emitted > 0 && w->emitted >= w->budget;
}

/* The index of p's parent when it is a process of t, else -1. */
static int64_t parent_index(const model_trace *t, const model_process *p)
{
	const model_process *q = p->parent;

	if (q == NULL || q->index >= t->nprocs || t->procs[q->index] != q)
		return -1;
	return q->index;
}

static int send_proc(mstream_writer *w, const model_process *p, int64_t parent)
{
	rec_begin(w, MSTREAM_R_PROC, 18 + 1 + MSTREAM_RU_FIELDS);
	put_uint(w, p->index);
	put_int(w, p->pid);
	put_int(w, p->out_pid);
	put_uint(w, p->start_ticks);
	put_int(w, p->ppid);
	put_int(w, parent);
	put_str(w, p->host);
	put_int(w, p->start_ns);
	put_int(w, p->end_ns);
	put_int(w, p->spawn_ns);
	put_int(w, p->spawn_tid);
	put_int(w, p->spawn_kind);
	put_uint(w, (uint64_t)p->exit_kind);
	put_int(w, p->exit_value);
	put_uint(w, p->lost_events);
	put_int(w, p->rank);
	put_int(w, p->local_rank);
	put_str(w, p->rank_var);
	put_uint(w, (uint64_t)p->ru_source);
	for (const int64_t *v = &p->ru.user_ns; v <= &p->ru.oublock; v++)
		put_int(w, *v);
	return rec_end(w);
}

static int send_seg(mstream_writer *w, const model_process *p, size_t i, size_t mods_from)
{
	const model_segment *s = &p->segs[i];

	rec_begin(w, MSTREAM_R_SEG, 13);
	put_uint(w, p->index);
	put_uint(w, i);
	put_int(w, s->start_ns);
	put_int(w, s->end_ns);
	put_str(w, s->exe);
	put_strv(w, s->argv, s->argc);
	put_str(w, s->cwd);
	put_bool(w, s->instrumented);
	put_bool(w, s->argv_truncated);
	msgpack_pack_array(&w->pk, 4 * (s->nmods - mods_from));
	for (size_t m = mods_from; m < s->nmods; m++) {
		put_str(w, s->mods[m].path);
		put_uint(w, s->mods[m].bias);
		put_uint(w, s->mods[m].lo);
		put_uint(w, s->mods[m].hi);
	}
	put_int(w, s->end_user_ns);
	put_int(w, s->end_sys_ns);
	put_int(w, s->end_maxrss_kb);
	return rec_end(w);
}

static int send_thread(mstream_writer *w, const model_process *p, size_t i)
{
	const model_thread *th = &p->threads[i];

	rec_begin(w, MSTREAM_R_THREAD, 6);
	put_uint(w, p->index);
	put_uint(w, i);
	put_int(w, th->tid);
	put_str(w, th->name);
	put_int(w, th->start_ns);
	put_int(w, th->end_ns);
	return rec_end(w);
}

static int send_mark(mstream_writer *w, const model_process *p, size_t i)
{
	const model_mark *m = &p->marks[i];

	rec_begin(w, MSTREAM_R_MARK, 8);
	put_uint(w, p->index);
	put_uint(w, i);
	put_int(w, m->ts_ns);
	put_int(w, m->dur_ns);
	put_int(w, m->tid);
	put_str(w, m->name);
	put_str(w, m->cat);
	put_str(w, m->args_json);
	return rec_end(w);
}

static int send_chunk(mstream_writer *w, const model_process *p, size_t i, const model_chunk *c)
{
	const unsigned char *bytes = model_chunk_bytes(w->t, c, &w->chunk_buf);

	if (bytes == NULL)
		return -errno;
	rec_begin(w, MSTREAM_R_CHUNK, 4);
	put_uint(w, p->index);
	put_uint(w, i);
	put_uint(w, c->seg);
	msgpack_pack_bin(&w->pk, c->len);
	return rec_end_tail(w, bytes, c->len);
}

/* Would parent, as the reader knows the parents (those sent), lead back
 * to process i? */
static bool closes_loop(const mstream_writer *w, size_t i, int64_t parent)
{
	for (size_t steps = 0; parent >= 0 && steps <= w->nsent; steps++) {
		if ((size_t)parent == i)
			return true;
		parent = (size_t)parent < w->nsent ? w->procs[parent].parent : -1;
	}
	return parent >= 0;
}

/* Sends what changed in process i. Returns 0, 1 when the budget ran out
 * first, or a negative errno. */
static int sync_proc(mstream_writer *w, size_t i)
{
	const model_trace *t = w->t;
	const model_process *p = t->procs[i];
	proc_sent *ps = &w->procs[i];
	int64_t parent = parent_index(t, p);
	size_t known = w->nsent > i + 1 ? w->nsent : i + 1;
	uint64_t h;
	int err;

	/* The reader refuses a parent it does not have yet, and one that
	 * closes a loop of parents as it knows them (parents re-pointed
	 * since the last sync, whose other half comes later in this one):
	 * such a process goes out without one, and again once the parent
	 * went out or the loop is gone. A loop in t itself stays open. */
	if (parent >= (int64_t)known || closes_loop(w, i, parent)) {
		parent = -1;
		if (vec_grow(&w->defer, &w->defer_cap, w->ndefer + 1, sizeof(*w->defer), 16) < 0)
			return -ENOMEM;
		w->defer[w->ndefer++] = i;
	}
	h = proc_hash(p, parent);
	if (!ps->sent || h != ps->hash) {
		if (budget_spent(w))
			return 1;
		if ((err = send_proc(w, p, parent)) < 0)
			return err;
		ps->sent = true;
		ps->hash = h;
		ps->parent = parent;
		if (w->nsent < i + 1)
			w->nsent = i + 1;
	}
	if (vec_grow(&ps->segs, &ps->segs_cap, p->nsegs, sizeof(*ps->segs), 2) < 0 ||
	    vec_grow(&ps->threads, &ps->threads_cap, p->nthreads, sizeof(*ps->threads), 2) < 0)
		return -ENOMEM;
	for (size_t j = 0; j < p->nsegs; j++) {
		seg_sent *ss = &ps->segs[j];

		if (j >= ps->nsegs) {
			ss->hash = 0;
			ss->nmods = 0;
		}
		h = seg_hash(&p->segs[j]);
		if (j < ps->nsegs && h == ss->hash)
			continue;
		if (budget_spent(w))
			return 1;
		if ((err = send_seg(w, p, j, ss->nmods)) < 0)
			return err;
		ss->hash = h;
		ss->nmods = p->segs[j].nmods;
		if (ps->nsegs < j + 1)
			ps->nsegs = j + 1;
	}
	for (size_t j = 0; j < p->nthreads; j++) {
		const model_thread *th = &p->threads[j];
		thread_sent *ts = &ps->threads[j];
		const model_chunk *c;

		if (j >= ps->nthreads)
			*ts = (thread_sent){0};
		h = thread_hash(th);
		if (j >= ps->nthreads || h != ts->hash) {
			if (budget_spent(w))
				return 1;
			if ((err = send_thread(w, p, j)) < 0)
				return err;
			ts->hash = h;
			if (ps->nthreads < j + 1)
				ps->nthreads = j + 1;
		}
		for (c = ts->last ? ts->last->next : th->chunks; c != NULL; c = c->next) {
			if (budget_spent(w))
				return 1;
			if ((err = send_chunk(w, p, j, c)) < 0)
				return err;
			ts->last = c;
		}
	}
	for (; ps->nmarks < p->nmarks; ps->nmarks++) {
		if (budget_spent(w))
			return 1;
		if ((err = send_mark(w, p, ps->nmarks)) < 0)
			return err;
	}
	return 0;
}

int mstream_sync(mstream_writer *w, mstream_emit_fn emit, void *ctx, size_t max_bytes, bool *more)
{
	const model_trace *t = w->t;
	size_t n = t->nprocs;
	int err;

	*more = false;
	w->emit = emit;
	w->ctx = ctx;
	w->budget = max_bytes;
	w->emitted = 0;
	if (!w->started) {
		if ((err = send_stream(w)) < 0)
			return err;
		w->started = true;
	}
	if ((err = send_trace_parts(w)) < 0)
		return err;
	if (n > w->nprocs) {
		if (vec_grow(&w->procs, &w->procs_cap, n, sizeof(*w->procs), 64) < 0)
			return -ENOMEM;
		memset(w->procs + w->nprocs, 0, (n - w->nprocs) * sizeof(*w->procs));
		w->nprocs = n;
	}
	/* Every process in index order, which is the order the reader wants
	 * new ones in. A sync that max_bytes stopped goes on where it stopped:
	 * what went out before is no longer different from what was sent,
	 * and a thread's chunks go on after its last chunk sent. A second
	 * round, over the processes deferred in the first, sends the parents
	 * that were not there yet (every process is, then). */
	w->ndefer = 0;
	for (size_t i = 0; i < n; i++) {
		err = sync_proc(w, i);
		if (err != 0)
			break;
	}
	for (size_t k = 0, nd = w->ndefer; err == 0 && k < nd; k++)
		err = sync_proc(w, w->defer[k]);
	if (err > 0) {
		*more = true;
		return 0;
	}
	return err;
}

int mstream_end(mstream_writer *w, mstream_emit_fn emit, void *ctx)
{
	w->emit = emit;
	w->ctx = ctx;
	rec_begin(w, MSTREAM_R_END, 0);
	return rec_end(w);
}

/* Writes all of data[0..len) to the fd in ctx. */
static int emit_fd(void *ctx, const void *data, size_t len)
{
	int fd = *(const int *)ctx;
	const char *p = data;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int mstream_write_file(const model_trace *t, int fd, bool end)
{
	mstream_writer *w = mstream_writer_new(t);
	bool more;
	int err;

	if (w == NULL)
		return -ENOMEM;
	err = emit_fd(&fd, MSTREAM_FILE_MAGIC, MSTREAM_FILE_MAGIC_LEN);
	if (err == 0)
		err = mstream_sync(w, emit_fd, &fd, SIZE_MAX, &more);
	if (err == 0 && end)
		err = mstream_end(w, emit_fd, &fd);
	mstream_writer_free(w);
	return err;
}

/* ---- reading ------------------------------------------------------------ */

struct mstream_reader {
	model_trace *t;
	unsigned char *held; /* the start of a record that straddles feeds */
	size_t nheld, held_cap;
	uint64_t bytes;
	uint64_t records;
	bool started, complete, failed;
	msgpack_unpacked up;
	char err[256];
};

mstream_reader *mstream_reader_new(model_trace *t)
{
	mstream_reader *r = calloc(1, sizeof(*r));

	if (r == NULL)
		return NULL;
	r->t = t;
	msgpack_unpacked_init(&r->up);
	return r;
}

void mstream_reader_free(mstream_reader *r)
{
	if (r == NULL)
		return;
	msgpack_unpacked_destroy(&r->up);
	free(r->held);
	free(r);
}

const char *mstream_error(const mstream_reader *r)
{
	return r->err;
}

bool mstream_complete(const mstream_reader *r)
{
	return r->complete;
}

uint64_t mstream_bytes(const mstream_reader *r)
{
	return r->bytes;
}

size_t mstream_held(const mstream_reader *r)
{
	return r->nheld;
}

/* Stops the reader with a message about record r->records of kind. */
__attribute__((format(printf, 3, 4))) static int bad(mstream_reader *r, uint64_t kind,
						     const char *fmt, ...)
{
	int n = snprintf(r->err, sizeof(r->err),
			 "record %llu (%s): ", (unsigned long long)r->records, kind_name(kind));
	va_list ap;

	va_start(ap, fmt);
	if (n > 0 && (size_t)n < sizeof(r->err))
		vsnprintf(r->err + n, sizeof(r->err) - (size_t)n, fmt, ap);
	va_end(ap);
	r->failed = true;
	return -EBADMSG;
}

/* The fields of the record being read, after its kind. */
typedef struct rec {
	mstream_reader *r;
	uint64_t kind;
	const msgpack_object *f;
	uint32_t n;
	const char *why; /* the first field that did not read, for bad() */
	uint32_t at;
	int nomem;
} rec;

/* Notes the first field that did not read. */
static bool fail(rec *c, uint32_t i, const char *what)
{
	if (c->why == NULL) {
		c->why = what;
		c->at = i;
	}
	return false;
}

static int64_t f_int(rec *c, uint32_t i)
{
	const msgpack_object *o = &c->f[i];

	if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
		return o->via.i64;
	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT64_MAX)
		return (int64_t)o->via.u64;
	fail(c, i, "a signed 64-bit integer");
	return 0;
}

/* A signed integer in [lo, hi]. */
static int64_t f_range(rec *c, uint32_t i, int64_t lo, int64_t hi)
{
	int64_t v = f_int(c, i);

	if (v < lo || v > hi) {
		fail(c, i, "an integer in range");
		return lo;
	}
	return v;
}

static uint64_t f_uint(rec *c, uint32_t i)
{
	const msgpack_object *o = &c->f[i];

	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
		return o->via.u64;
	fail(c, i, "an unsigned integer");
	return 0;
}

static bool f_bool(rec *c, uint32_t i)
{
	const msgpack_object *o = &c->f[i];

	if (o->type == MSGPACK_OBJECT_BOOLEAN)
		return o->via.boolean;
	fail(c, i, "a boolean");
	return false;
}

/* The bytes of a str object: msgpack-c may give an empty one no pointer. */
static const char *str_bytes(const msgpack_object *o)
{
	return o->via.str.size > 0 ? o->via.str.ptr : "";
}

/* Does s (NULL: none) hold what the str or nil object o holds? */
static bool str_same(const char *s, const msgpack_object *o)
{
	if (o->type == MSGPACK_OBJECT_NIL)
		return s == NULL;
	return s != NULL && strlen(s) == o->via.str.size &&
	       memcmp(s, str_bytes(o), o->via.str.size) == 0;
}

/* Sets *dst to the string of field o (nil: NULL), keeping *dst when it
 * already says the same: an update of an object sends its strings again,
 * and the arena should not grow with every update. */
static void set_str_obj(rec *c, uint32_t i, const msgpack_object *o, const char **dst)
{
	if (o->type == MSGPACK_OBJECT_NIL) {
		*dst = NULL;
		return;
	}
	if (o->type != MSGPACK_OBJECT_STR) {
		fail(c, i, "a string or nil");
		return;
	}
	if (str_same(*dst, o))
		return;
	*dst = model_strndup(c->r->t, str_bytes(o), o->via.str.size);
	if (*dst == NULL)
		c->nomem = -ENOMEM;
}

static void f_str(rec *c, uint32_t i, const char **dst)
{
	set_str_obj(c, i, &c->f[i], dst);
}

/* Sets *dst (and *argc when not NULL) to the array of strings of field i
 * (nil: NULL), NULL-terminated, keeping it when it says the same. */
static void f_strv(rec *c, uint32_t i, const char ***dst, size_t *argc)
{
	const msgpack_object *o = &c->f[i];
	const char **v;
	uint32_t n;
	bool same;

	if (o->type == MSGPACK_OBJECT_NIL) {
		*dst = NULL;
		if (argc)
			*argc = 0;
		return;
	}
	if (o->type != MSGPACK_OBJECT_ARRAY) {
		fail(c, i, "an array of strings or nil");
		return;
	}
	n = o->via.array.size;
	for (uint32_t k = 0; k < n; k++)
		if (o->via.array.ptr[k].type != MSGPACK_OBJECT_STR &&
		    o->via.array.ptr[k].type != MSGPACK_OBJECT_NIL) {
			fail(c, i, "an array of strings or nil");
			return;
		}
	same = *dst != NULL && (argc ? *argc == n : strv_len(*dst) == n);
	for (uint32_t k = 0; same && k < n; k++)
		same = str_same((*dst)[k], &o->via.array.ptr[k]);
	if (same)
		return;
	v = model_strv_alloc(c->r->t, n);
	if (v == NULL) {
		c->nomem = -ENOMEM;
		return;
	}
	for (uint32_t k = 0; k < n; k++)
		set_str_obj(c, i, &o->via.array.ptr[k], &v[k]);
	*dst = v;
	if (argc)
		*argc = n;
}

/* The error of a record whose fields did not all read, or 0. */
static int rec_check(rec *c)
{
	if (c->nomem)
		return c->nomem;
	if (c->why)
		return bad(c->r, c->kind, "field %u: expected %s", c->at + 1, c->why);
	return 0;
}

/* The process of field i. */
static model_process *f_proc(rec *c, uint32_t i)
{
	uint64_t k = f_uint(c, i);

	if (c->why)
		return NULL;
	if (k >= c->r->t->nprocs) {
		bad(c->r, c->kind, "process %llu out of range (%zu processes)",
		    (unsigned long long)k, c->r->t->nprocs);
		return NULL;
	}
	return c->r->t->procs[k];
}

/* Whether making q the parent of p would close a loop of parents (the
 * walk of the tree would not end). */
static bool parent_loop(const model_process *p, const model_process *q, size_t nprocs)
{
	for (size_t steps = 0; q != NULL && steps <= nprocs; steps++, q = q->parent)
		if (q == p)
			return true;
	return q != NULL;
}

static int read_stream(rec *c)
{
	uint64_t version = f_uint(c, 0);
	int err;

	if ((err = rec_check(c)) < 0)
		return err;
	if (version != MSTREAM_VERSION)
		return bad(c->r, c->kind, "version %llu, this reader knows %u",
			   (unsigned long long)version, MSTREAM_VERSION);
	f_str(c, 1, &c->r->t->host);
	f_str(c, 2, &c->r->t->node.run_id);
	return rec_check(c);
}

static int read_trace(rec *c)
{
	model_trace *t = c->r->t;
	model_node_part *n = &t->node;

	f_str(c, 0, &t->host);
	f_strv(c, 1, (const char ***)&t->command, NULL);
	f_str(c, 2, &t->origin);
	t->anchor_mono_ns = f_int(c, 3);
	t->anchor_real_ns = f_int(c, 4);
	t->start_ns = f_int(c, 5);
	t->end_ns = f_int(c, 6);
	t->exit_status = (int)f_range(c, 7, INT32_MIN, INT32_MAX);
	t->lost_events = f_uint(c, 8);
	n->is_node = f_bool(c, 9);
	f_str(c, 10, &n->run_id);
	f_str(c, 11, &n->head_host);
	n->launcher_pid = f_int(c, 12);
	f_str(c, 13, &n->launched_as);
	n->lost_ns = f_int(c, 14);
	return rec_check(c);
}

static int read_clocks(rec *c)
{
	model_trace *t = c->r->t;
	uint64_t first = f_uint(c, 0);
	const msgpack_object *a = &c->f[1];
	int err;

	if ((err = rec_check(c)) < 0)
		return err;
	if (a->type != MSGPACK_OBJECT_ARRAY)
		return bad(c->r, c->kind, "field 2: expected an array");
	if (c->kind == MSTREAM_R_CLOCKS) {
		if (first != t->nclocks)
			return bad(c->r, c->kind, "first pair %llu, %zu pairs so far",
				   (unsigned long long)first, t->nclocks);
		if (a->via.array.size % 2)
			return bad(c->r, c->kind, "odd number of values");
	} else {
		if (first != t->node.nsamples)
			return bad(c->r, c->kind, "first sample %llu, %zu samples so far",
				   (unsigned long long)first, t->node.nsamples);
		if (a->via.array.size % 3)
			return bad(c->r, c->kind, "values not a multiple of 3");
	}
	/* Read the values as fields of their own. */
	c->f = a->via.array.ptr;
	c->n = a->via.array.size;
	for (uint32_t i = 0; c->kind == MSTREAM_R_CLOCKS && i < c->n; i += 2) {
		uint64_t tsc = f_uint(c, i);
		int64_t ns = f_int(c, i + 1);

		if ((err = rec_check(c)) < 0)
			return err;
		if (model_add_clock(t, tsc, ns) < 0)
			return -ENOMEM;
	}
	for (uint32_t i = 0; c->kind == MSTREAM_R_SAMPLES && i < c->n; i += 3) {
		int64_t node_ns = f_int(c, i), off = f_int(c, i + 1), e = f_int(c, i + 2);

		if ((err = rec_check(c)) < 0)
			return err;
		if (model_add_clock_sample(t, node_ns, off, e) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int read_missing(rec *c)
{
	model_trace *t = c->r->t;
	uint64_t index = f_uint(c, 0);
	const char *host = NULL, *why = NULL, *where = NULL;
	int64_t launcher;
	int err;

	if ((err = rec_check(c)) < 0)
		return err;
	if (index != t->nmissing)
		return bad(c->r, c->kind, "index %llu, %zu missing hosts so far",
			   (unsigned long long)index, t->nmissing);
	f_str(c, 1, &host);
	launcher = f_int(c, 2);
	f_str(c, 3, &why);
	f_str(c, 4, &where);
	if ((err = rec_check(c)) < 0)
		return err;
	return model_add_missing_host(t, host, launcher, why, where);
}

static int read_proc(rec *c)
{
	model_trace *t = c->r->t;
	uint64_t index = f_uint(c, 0);
	int64_t pid = f_int(c, 1), parent;
	model_process *p;
	int err;

	if ((err = rec_check(c)) < 0)
		return err;
	if (index > t->nprocs)
		return bad(c->r, c->kind, "index %llu out of range (%zu processes)",
			   (unsigned long long)index, t->nprocs);
	if (index == t->nprocs) {
		if ((p = model_add_process(t, pid)) == NULL)
			return -ENOMEM;
	} else {
		p = t->procs[index];
	}
	p->pid = pid;
	p->out_pid = f_int(c, 2);
	p->start_ticks = f_uint(c, 3);
	p->ppid = f_int(c, 4);
	parent = f_int(c, 5);
	f_str(c, 6, &p->host);
	p->start_ns = f_int(c, 7);
	p->end_ns = f_int(c, 8);
	p->spawn_ns = f_int(c, 9);
	p->spawn_tid = f_int(c, 10);
	p->spawn_kind = (int)f_range(c, 11, INT32_MIN, INT32_MAX);
	p->exit_kind = (enum model_exit_kind)f_range(c, 12, 0, MODEL_EXIT_HOST_LOST);
	p->exit_value = (int)f_range(c, 13, INT32_MIN, INT32_MAX);
	p->lost_events = f_uint(c, 14);
	p->rank = f_int(c, 15);
	p->local_rank = f_int(c, 16);
	f_str(c, 17, &p->rank_var);
	/* Resource use, from writers that send it (fields 18 to 27). */
	if (c->n >= 18 + 1 + MSTREAM_RU_FIELDS) {
		int64_t *v = &p->ru.user_ns;

		p->ru_source = (enum model_ru_source)f_range(c, 18, MODEL_RU_NONE,
							     MODEL_RU_WAIT_WITH_DESC);
		for (uint32_t i = 0; i < MSTREAM_RU_FIELDS; i++)
			v[i] = f_int(c, 19 + i);
	}
	if ((err = rec_check(c)) < 0)
		return err;
	if (parent < -1 || parent >= (int64_t)t->nprocs)
		return bad(c->r, c->kind, "parent %lld out of range (%zu processes)",
			   (long long)parent, t->nprocs);
	if (parent >= 0 && parent_loop(p, t->procs[parent], t->nprocs))
		return bad(c->r, c->kind, "parent %lld would make a loop of parents",
			   (long long)parent);
	p->parent = parent >= 0 ? t->procs[parent] : NULL;
	return 0;
}

static int read_seg(rec *c)
{
	model_trace *t = c->r->t;
	model_process *p = f_proc(c, 0);
	uint64_t index = f_uint(c, 1);
	const msgpack_object *mods = &c->f[9];
	model_segment *s;
	int err;

	if (c->r->failed)
		return -EBADMSG;
	if ((err = rec_check(c)) < 0)
		return err;
	if (index > p->nsegs)
		return bad(c->r, c->kind, "image %llu out of range (%zu images)",
			   (unsigned long long)index, p->nsegs);
	if (mods->type != MSGPACK_OBJECT_ARRAY || mods->via.array.size % 4)
		return bad(c->r, c->kind, "field 11: expected an array of modules");
	if (index == p->nsegs) {
		if ((s = model_add_segment(t, p)) == NULL)
			return -ENOMEM;
	} else {
		s = &p->segs[index];
	}
	s->start_ns = f_int(c, 2);
	s->end_ns = f_int(c, 3);
	f_str(c, 4, &s->exe);
	f_strv(c, 5, (const char ***)&s->argv, &s->argc);
	f_str(c, 6, &s->cwd);
	s->instrumented = f_bool(c, 7);
	s->argv_truncated = f_bool(c, 8);
	if (c->n >= 13) {
		s->end_user_ns = f_int(c, 10);
		s->end_sys_ns = f_int(c, 11);
		s->end_maxrss_kb = f_int(c, 12);
	}
	if ((err = rec_check(c)) < 0)
		return err;
	c->f = mods->via.array.ptr;
	c->n = mods->via.array.size;
	for (uint32_t i = 0; i < c->n; i += 4) {
		const msgpack_object *path = &c->f[i];
		uint64_t bias = f_uint(c, i + 1), lo = f_uint(c, i + 2), hi = f_uint(c, i + 3);

		if (path->type != MSGPACK_OBJECT_STR)
			fail(c, i, "a module path");
		if ((err = rec_check(c)) < 0)
			return err;
		if (model_add_module(t, s, str_bytes(path), path->via.str.size, bias, lo, hi) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int read_thread(rec *c)
{
	model_process *p = f_proc(c, 0);
	uint64_t index = f_uint(c, 1);
	int64_t tid = f_int(c, 2);
	model_thread *th;
	int err;

	if (c->r->failed)
		return -EBADMSG;
	if ((err = rec_check(c)) < 0)
		return err;
	if (index > p->nthreads)
		return bad(c->r, c->kind, "thread %llu out of range (%zu threads)",
			   (unsigned long long)index, p->nthreads);
	if (index == p->nthreads) {
		if ((th = model_add_thread(c->r->t, p, tid)) == NULL)
			return -ENOMEM;
	} else {
		th = &p->threads[index];
	}
	th->tid = tid;
	f_str(c, 3, &th->name);
	th->start_ns = f_int(c, 4);
	th->end_ns = f_int(c, 5);
	return rec_check(c);
}

/* Is s[0..n) one JSON object, in valid UTF-8, without NUL? */
static bool json_object_text(const char *s, size_t n)
{
	json_error_t e;
	json_t *v = json_loadb(s, n, JSON_REJECT_DUPLICATES, &e);
	bool ok = v != NULL && json_is_object(v) && memchr(s, 0, n) == NULL;

	json_decref(v);
	return ok;
}

static int read_mark(rec *c)
{
	model_process *p = f_proc(c, 0);
	uint64_t index = f_uint(c, 1);
	model_mark *m;
	int err;

	if (c->r->failed)
		return -EBADMSG;
	if ((err = rec_check(c)) < 0)
		return err;
	if (index > p->nmarks)
		return bad(c->r, c->kind, "mark %llu out of range (%zu marks)",
			   (unsigned long long)index, p->nmarks);
	if (index == p->nmarks) {
		if ((m = model_add_mark(c->r->t, p)) == NULL)
			return -ENOMEM;
	} else {
		m = &p->marks[index];
	}
	m->ts_ns = f_int(c, 2);
	m->dur_ns = f_int(c, 3);
	m->tid = f_int(c, 4);
	f_str(c, 5, &m->name);
	f_str(c, 6, &m->cat);
	if ((err = rec_check(c)) < 0)
		return err;
	/* The writers copy a mark's args into the trace as they are: only a
	 * JSON object in valid UTF-8 may go there. */
	const msgpack_object *args = &c->f[7];
	if (args->type == MSGPACK_OBJECT_STR &&
	    !json_object_text(str_bytes(args), args->via.str.size))
		return bad(c->r, c->kind, "field 9: the args are not a JSON object");
	f_str(c, 7, &m->args_json);
	return rec_check(c);
}

static int read_chunk(rec *c)
{
	model_process *p = f_proc(c, 0);
	uint64_t index = f_uint(c, 1);
	uint64_t seg = f_uint(c, 2);
	const msgpack_object *data = &c->f[3];
	int err;

	if (c->r->failed)
		return -EBADMSG;
	if ((err = rec_check(c)) < 0)
		return err;
	if (index >= p->nthreads)
		return bad(c->r, c->kind, "thread %llu out of range (%zu threads)",
			   (unsigned long long)index, p->nthreads);
	if (seg > UINT32_MAX)
		return bad(c->r, c->kind, "image %llu out of range", (unsigned long long)seg);
	if (data->type != MSGPACK_OBJECT_BIN)
		return bad(c->r, c->kind, "field 5: expected binary data");
	return model_add_chunk(c->r->t, &p->threads[index], (uint32_t)seg,
			       data->via.bin.size > 0 ? data->via.bin.ptr : "", data->via.bin.size);
}

/* Fields each kind needs (after the kind); a record may carry more (a
 * newer writer's), which this reader skips. */
static const uint32_t kind_fields[] = {
	[MSTREAM_R_STREAM] = 3,  [MSTREAM_R_TRACE] = 15,  [MSTREAM_R_CLOCKS] = 2,
	[MSTREAM_R_SAMPLES] = 2, [MSTREAM_R_MISSING] = 5, [MSTREAM_R_PROC] = 18,
	[MSTREAM_R_SEG] = 10,    [MSTREAM_R_THREAD] = 6,  [MSTREAM_R_MARK] = 8,
	[MSTREAM_R_CHUNK] = 4,   [MSTREAM_R_END] = 0,
};

/* Reads one record, body p[0..n) (after its length). */
static int read_record(mstream_reader *r, const unsigned char *p, size_t n)
{
	const msgpack_object *root;
	size_t off = 0;
	rec c = {.r = r};

	r->records++;
	if (!mpcheck_plausible(p, n) ||
	    msgpack_unpack_next(&r->up, (const char *)p, n, &off) != MSGPACK_UNPACK_SUCCESS ||
	    off != n)
		return bad(r, 0, "not one msgpack object");
	root = &r->up.data;
	if (root->type != MSGPACK_OBJECT_ARRAY || root->via.array.size < 1 ||
	    root->via.array.ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return bad(r, 0, "not an array that starts with a record kind");
	c.kind = root->via.array.ptr[0].via.u64;
	c.f = root->via.array.ptr + 1;
	c.n = root->via.array.size - 1;
	if (!r->started && c.kind != MSTREAM_R_STREAM)
		return bad(r, c.kind, "the stream does not start with a STREAM record");
	if (r->started && c.kind == MSTREAM_R_STREAM)
		return bad(r, c.kind, "a second STREAM record");
	if (r->complete)
		return bad(r, c.kind, "a record after END");
	if (c.kind >= sizeof(kind_fields) / sizeof(kind_fields[0]) || kind_names[c.kind] == NULL)
		return 0; /* a newer writer's kind: skipped */
	if (c.n < kind_fields[c.kind])
		return bad(r, c.kind, "%u fields, expected %u", c.n, kind_fields[c.kind]);
	switch (c.kind) {
	case MSTREAM_R_STREAM:
		r->started = true;
		return read_stream(&c);
	case MSTREAM_R_TRACE:
		return read_trace(&c);
	case MSTREAM_R_CLOCKS:
	case MSTREAM_R_SAMPLES:
		return read_clocks(&c);
	case MSTREAM_R_MISSING:
		return read_missing(&c);
	case MSTREAM_R_PROC:
		return read_proc(&c);
	case MSTREAM_R_SEG:
		return read_seg(&c);
	case MSTREAM_R_THREAD:
		return read_thread(&c);
	case MSTREAM_R_MARK:
		return read_mark(&c);
	case MSTREAM_R_CHUNK:
		return read_chunk(&c);
	case MSTREAM_R_END:
		r->complete = true;
		return 0;
	}
	return 0;
}

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Checks a record's length. */
static int check_len(mstream_reader *r, uint32_t len)
{
	if (len > MSTREAM_RECORD_MAX) {
		r->records++;
		return bad(r, 0, "length %u over the limit of %u", len, MSTREAM_RECORD_MAX);
	}
	return 0;
}

int mstream_feed(mstream_reader *r, const void *data, size_t len)
{
	const unsigned char *p = data;
	int err;

	if (r->failed)
		return -EBADMSG;
	/* First finish the record held from earlier feeds. Only what
	 * arrived is held: a length announced but not sent costs nothing. */
	while (r->nheld > 0 && len > 0) {
		size_t want = 4, take;

		if (r->nheld >= 4) {
			want = 4 + (size_t)le32(r->held);
		}
		take = want - r->nheld < len ? want - r->nheld : len;
		if (vec_grow(&r->held, &r->held_cap, r->nheld + take, 1, 256) < 0)
			return -ENOMEM;
		memcpy(r->held + r->nheld, p, take);
		r->nheld += take;
		r->bytes += take;
		p += take;
		len -= take;
		if (r->nheld == 4 && (err = check_len(r, le32(r->held))) < 0)
			return err;
		if (r->nheld >= 4 && r->nheld == 4 + (size_t)le32(r->held)) {
			err = read_record(r, r->held + 4, r->nheld - 4);
			r->nheld = 0;
			if (err < 0) {
				r->failed = true;
				return err;
			}
		}
	}
	/* Then whole records straight from data. */
	while (len >= 4) {
		uint32_t n = le32(p);

		if ((err = check_len(r, n)) < 0)
			return err;
		if (len - 4 < n)
			break;
		err = read_record(r, p + 4, n);
		r->bytes += 4 + (size_t)n;
		p += 4 + (size_t)n;
		len -= 4 + (size_t)n;
		if (err < 0) {
			r->failed = true;
			return err;
		}
	}
	if (len > 0) {
		if (vec_grow(&r->held, &r->held_cap, len, 1, 256) < 0)
			return -ENOMEM;
		memcpy(r->held, p, len);
		r->nheld = len;
		r->bytes += len;
	}
	return 0;
}

static int read_file_records(mstream_reader *r, int fd)
{
	static const size_t chunk = 1u << 20;
	char magic[MSTREAM_FILE_MAGIC_LEN];
	size_t got = 0;
	char *buf;
	int err = 0;

	while (got < sizeof(magic)) {
		ssize_t n = read(fd, magic + got, sizeof(magic) - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	if (got < sizeof(magic) || memcmp(magic, MSTREAM_FILE_MAGIC, sizeof(magic)) != 0) {
		snprintf(r->err, sizeof(r->err), "not a node-output file (no %s header)", "FTNODE");
		r->failed = true;
		return -EBADMSG;
	}
	buf = malloc(chunk);
	if (buf == NULL)
		return -ENOMEM;
	for (;;) {
		ssize_t n = read(fd, buf, chunk);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = -errno;
			break;
		}
		if (n == 0)
			break;
		if ((err = mstream_feed(r, buf, (size_t)n)) < 0)
			break;
	}
	free(buf);
	if (err < 0)
		return err;
	if (r->nheld > 0) {
		snprintf(r->err, sizeof(r->err), "ends inside record %llu, %zu bytes into it",
			 (unsigned long long)r->records + 1, r->nheld);
		return -ENODATA;
	}
	if (!r->complete) {
		snprintf(r->err, sizeof(r->err), "ends after record %llu, without END",
			 (unsigned long long)r->records);
		return -ENODATA;
	}
	return 0;
}

int mstream_read_file(mstream_reader *r, int fd)
{
	int err = read_file_records(r, fd);
	int64_t last;

	/* A file that stopped before its END (or broke) is a part lost
	 * where it stopped, as a node whose connection dropped: what it
	 * left open ends host lost at the last time it knew of. */
	if ((err == -ENODATA || err == -EBADMSG) && (last = model_last_ns(r->t)) >= 0) {
		r->t->node.is_node = true;
		model_mark_lost(r->t, last);
	}
	return err;
}
