/*
 * Unit test of the model stream (combine/model/mstream.c): a model written
 * as records and read back into another model is the same model (every
 * field, and the bytes events_write makes of it), whether it is sent
 * whole, in syncs after each of many random changes, fed at every byte
 * boundary, or cut into pieces by max_bytes; malformed records are
 * refused with a message that names the record; node-output files that
 * end early keep what came before.
 *
 * Usage: test_mstream [bench | seeds DIR]   (bench: time a sync of 10,000
 * processes; seeds: write fuzz_mstream's seeds into DIR)
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <msgpack.h>

#include "check.h"
#include "events.h"
#include "model_fixture.h"
#include "mstream.h"

/* ---- helpers ------------------------------------------------------------ */

typedef struct bytes {
	unsigned char *p;
	size_t len, cap;
	size_t calls;
} bytes;

static int emit_bytes(void *ctx, const void *data, size_t len)
{
	bytes *b = ctx;

	if (b->len + len > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + len)
			cap *= 2;
		MUST(b->p = realloc(b->p, cap));
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, len);
	b->len += len;
	b->calls++;
	return 0;
}

/* Everything w has not sent yet, in one sync. */
static void sync_all(mstream_writer *w, bytes *out)
{
	bool more = true;

	CHECK_INT(mstream_sync(w, emit_bytes, out, SIZE_MAX, &more), ==, 0);
	CHECK(!more);
}

/* events_write of t as JSON, in a new buffer (*len bytes). */
static char *json_of(const model_trace *t, size_t *len)
{
	int fd = memfd_create("json", MFD_CLOEXEC);
	char *s;

	MUST(fd >= 0);
	CHECK_INT(events_write(t, fd, TRACE_FORMAT_JSON, NULL, NULL), ==, 0);
	s = read_back(fd, len);
	MUST(s);
	close(fd);
	return s;
}

static bool str_eq(const char *a, const char *b)
{
	return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static bool strv_eq(const char *const *a, const char *const *b, size_t n)
{
	if (a == NULL || b == NULL)
		return a == b;
	for (size_t i = 0; i < n; i++)
		if (!str_eq(a[i], b[i]))
			return false;
	return true;
}

static size_t strv_count(const char *const *v)
{
	size_t n = 0;

	while (v != NULL && v[n] != NULL)
		n++;
	return n;
}

/* The first difference between a and b, field by field, or NULL. */
static const char *model_diff(const model_trace *a, const model_trace *b, char *why, size_t len)
{
#define DIFF(cond, ...)                                                                            \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			snprintf(why, len, __VA_ARGS__);                                           \
			return why;                                                                \
		}                                                                                  \
	} while (0)
	DIFF(str_eq(a->host, b->host) && str_eq(a->origin, b->origin), "host/origin");
	DIFF(strv_count(a->command) == strv_count(b->command) &&
		     strv_eq(a->command, b->command, strv_count(a->command)),
	     "command");
	DIFF(a->anchor_mono_ns == b->anchor_mono_ns && a->anchor_real_ns == b->anchor_real_ns &&
		     a->start_ns == b->start_ns && a->end_ns == b->end_ns &&
		     a->exit_status == b->exit_status && a->lost_events == b->lost_events,
	     "trace scalars");
	DIFF(a->node.is_node == b->node.is_node && str_eq(a->node.run_id, b->node.run_id) &&
		     str_eq(a->node.head_host, b->node.head_host) &&
		     a->node.launcher_pid == b->node.launcher_pid &&
		     str_eq(a->node.launched_as, b->node.launched_as) &&
		     a->node.lost_ns == b->node.lost_ns,
	     "node part");
	DIFF(a->node.nsamples == b->node.nsamples &&
		     (a->node.nsamples == 0 ||
		      !memcmp(a->node.samples, b->node.samples,
			      a->node.nsamples * sizeof(*a->node.samples))),
	     "samples");
	DIFF(a->nclocks == b->nclocks &&
		     (a->nclocks == 0 ||
		      !memcmp(a->clocks, b->clocks, a->nclocks * sizeof(*a->clocks))),
	     "clocks");
	DIFF(a->nmissing == b->nmissing, "missing hosts %zu vs %zu", a->nmissing, b->nmissing);
	for (size_t i = 0; i < a->nmissing; i++)
		DIFF(str_eq(a->missing[i].host, b->missing[i].host) &&
			     a->missing[i].launcher_pid == b->missing[i].launcher_pid &&
			     str_eq(a->missing[i].why, b->missing[i].why) &&
			     str_eq(a->missing[i].where, b->missing[i].where),
		     "missing host %zu", i);
	DIFF(a->nprocs == b->nprocs, "processes %zu vs %zu", a->nprocs, b->nprocs);
	for (size_t i = 0; i < a->nprocs; i++) {
		const model_process *p = a->procs[i], *q = b->procs[i];

		DIFF(p->index == q->index && p->pid == q->pid && p->out_pid == q->out_pid &&
			     p->start_ticks == q->start_ticks && p->ppid == q->ppid &&
			     (p->parent ? (int64_t)p->parent->index : -1) ==
				     (q->parent ? (int64_t)q->parent->index : -1) &&
			     str_eq(p->host, q->host) && p->start_ns == q->start_ns &&
			     p->end_ns == q->end_ns && p->spawn_ns == q->spawn_ns &&
			     p->spawn_tid == q->spawn_tid && p->spawn_kind == q->spawn_kind &&
			     p->exit_kind == q->exit_kind && p->exit_value == q->exit_value &&
			     p->lost_events == q->lost_events && p->rank == q->rank &&
			     p->local_rank == q->local_rank && str_eq(p->rank_var, q->rank_var),
		     "process %zu", i);
		DIFF(p->ru_source == q->ru_source && !memcmp(&p->ru, &q->ru, sizeof(p->ru)),
		     "process %zu: rusage", i);
		DIFF(p->nsegs == q->nsegs && p->nthreads == q->nthreads && p->nmarks == q->nmarks,
		     "process %zu: counts", i);
		for (size_t j = 0; j < p->nsegs; j++) {
			const model_segment *s = &p->segs[j], *z = &q->segs[j];

			DIFF(s->start_ns == z->start_ns && s->end_ns == z->end_ns &&
				     str_eq(s->exe, z->exe) && s->argc == z->argc &&
				     strv_eq(s->argv, z->argv, s->argc) && str_eq(s->cwd, z->cwd) &&
				     s->instrumented == z->instrumented &&
				     s->argv_truncated == z->argv_truncated &&
				     s->nmods == z->nmods && s->end_user_ns == z->end_user_ns &&
				     s->end_sys_ns == z->end_sys_ns &&
				     s->end_maxrss_kb == z->end_maxrss_kb,
			     "process %zu image %zu", i, j);
			for (size_t m = 0; m < s->nmods; m++)
				DIFF(str_eq(s->mods[m].path, z->mods[m].path) &&
					     s->mods[m].bias == z->mods[m].bias &&
					     s->mods[m].lo == z->mods[m].lo &&
					     s->mods[m].hi == z->mods[m].hi,
				     "process %zu image %zu module %zu", i, j, m);
		}
		for (size_t j = 0; j < p->nthreads; j++) {
			const model_thread *s = &p->threads[j], *z = &q->threads[j];
			const model_chunk *c, *d;

			DIFF(s->tid == z->tid && str_eq(s->name, z->name) &&
				     s->start_ns == z->start_ns && s->end_ns == z->end_ns &&
				     s->chunk_bytes == z->chunk_bytes,
			     "process %zu thread %zu", i, j);
			for (c = s->chunks, d = z->chunks; c && d; c = c->next, d = d->next)
				DIFF(c->len == d->len && c->seg == d->seg &&
					     !memcmp(c->data, d->data, c->len),
				     "process %zu thread %zu: chunk", i, j);
			DIFF(c == NULL && d == NULL, "process %zu thread %zu: chunk count", i, j);
		}
		for (size_t j = 0; j < p->nmarks; j++) {
			const model_mark *s = &p->marks[j], *z = &q->marks[j];

			DIFF(s->ts_ns == z->ts_ns && s->dur_ns == z->dur_ns && s->tid == z->tid &&
				     str_eq(s->name, z->name) && str_eq(s->cat, z->cat) &&
				     str_eq(s->args_json, z->args_json),
			     "process %zu mark %zu", i, j);
		}
	}
	return NULL;
#undef DIFF
}

/* Checks that b is a, field by field and in the JSON events_write makes. */
#define CHECK_SAME_MODEL(a, b) check_same_model(a, b, __FILE__, __LINE__)
static void check_same_model(const model_trace *a, const model_trace *b, const char *file, int line)
{
	char why[200];
	size_t na, nb;
	char *ja, *jb;

	if (model_diff(a, b, why, sizeof(why)) != NULL)
		check_fail_at(file, line, "models differ: %s", why);
	ja = json_of(a, &na);
	jb = json_of(b, &nb);
	if (na != nb || memcmp(ja, jb, na) != 0)
		check_fail_at(file, line, "events_write differs (%zu vs %zu bytes)", na, nb);
	free(ja);
	free(jb);
}

/* A chunk of real in-process event records (include/forktrace/wire.h,
 * enum ft_ev_type): a time, a region with an instant and a counter in
 * it, and a function call; n varies the names and times. */
static void event_records(msgpack_sbuffer *sb, uint64_t tsc, unsigned n)
{
	msgpack_packer pk;
	char name[32];
	int len = snprintf(name, sizeof(name), "region %u", n);

	msgpack_sbuffer_init(sb);
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	msgpack_pack_array(&pk, 2); /* FT_EV_TIME */
	msgpack_pack_uint8(&pk, 0);
	msgpack_pack_uint64(&pk, tsc);
	msgpack_pack_array(&pk, 3); /* FT_EV_REGION_BEGIN */
	msgpack_pack_uint8(&pk, 3);
	msgpack_pack_uint64(&pk, 300 + n);
	msgpack_pack_str_with_body(&pk, name, (size_t)len);
	msgpack_pack_array(&pk, 3); /* FT_EV_INSTANT */
	msgpack_pack_uint8(&pk, 5);
	msgpack_pack_uint64(&pk, 90);
	msgpack_pack_str_with_body(&pk, "tick", 4);
	msgpack_pack_array(&pk, 4); /* FT_EV_COUNTER */
	msgpack_pack_uint8(&pk, 6);
	msgpack_pack_uint64(&pk, 60);
	msgpack_pack_str_with_body(&pk, "items", 5);
	msgpack_pack_double(&pk, 1.5 * n);
	msgpack_pack_array(&pk, 3); /* FT_EV_FUNC_ENTER */
	msgpack_pack_uint8(&pk, 1);
	msgpack_pack_uint64(&pk, 30);
	msgpack_pack_uint64(&pk, 0x401000 + 16 * n);
	msgpack_pack_array(&pk, 2); /* FT_EV_FUNC_EXIT */
	msgpack_pack_uint8(&pk, 2);
	msgpack_pack_uint64(&pk, 120);
	msgpack_pack_array(&pk, 2); /* FT_EV_REGION_END */
	msgpack_pack_uint8(&pk, 4);
	msgpack_pack_uint64(&pk, 500);
}

static void add_events(model_trace *t, model_thread *th, uint32_t seg, uint64_t tsc, unsigned n)
{
	msgpack_sbuffer sb;

	event_records(&sb, tsc, n);
	CHECK_INT(model_add_chunk(t, th, seg, sb.data, sb.size), ==, 0);
	msgpack_sbuffer_destroy(&sb);
}

/* The fixture's model with everything else a model can hold: clock
 * pairs, event chunks, modules, a node part with samples, a missing
 * host, ranks, a lost host, a parent added after its child. */
static model_trace *full_model(void)
{
	model_trace *t = build_model();
	model_process *p;
	model_thread *th;

	/* ~3 ticks per ns */
	CHECK_INT(model_add_clock(t, 3000000000ull, 1000000000), ==, 0);
	CHECK_INT(model_add_clock(t, 15000000000ull, 5000000000), ==, 0);
	t->node.is_node = true;
	t->node.run_id = model_strdup(t, "run-1234");
	t->node.head_host = model_strdup(t, "head");
	t->node.launcher_pid = 77;
	t->node.launched_as = model_strdup(t, "node2");
	t->node.lost_ns = 5500000000;
	CHECK_INT(model_add_clock_sample(t, 1000000000, -123456789, 15000), ==, 0);
	CHECK_INT(model_add_clock_sample(t, 3000000000, -123456700, 12000), ==, 0);
	CHECK_INT(model_add_missing_host(t, "node9", 88, "no node collector joined", NULL), ==, 0);
	CHECK_INT(model_add_missing_host(t, "node8", -1, "connection lost", "node8:/tmp/x.ftnode"),
		  ==, 0);

	p = t->procs[0];
	p->rank = 3;
	p->local_rank = 1;
	p->rank_var = model_strdup(t, "OMPI_COMM_WORLD_RANK");
	/* Resource use: the process's, and its first image's end (an exec);
	 * a count past 2^32 and one unknown field. */
	p->ru = (model_rusage){5000000000, 250000000, 204800, 51234, 3, 17, 300, -1, 8};
	p->ru_source = MODEL_RU_WAIT;
	p->segs[0].end_user_ns = 1000000;
	p->segs[0].end_sys_ns = 2000000;
	p->segs[0].end_maxrss_kb = 4096;
	t->procs[1]->ru = (model_rusage){1, 2, 3, 4, 5, 6, 7, 8, 9};
	t->procs[1]->ru_source = MODEL_RU_WAIT_WITH_DESC;
	CHECK_INT(
		model_add_module(t, &p->segs[1], "/usr/bin/make", 13, 0x400000, 0x400000, 0x500000),
		==, 0);
	CHECK_INT(model_add_module(t, &p->segs[1], "/lib/libc.so.6", 14, 0x7f0000000000,
				   0x7f0000001000, 0x7f0000200000),
		  ==, 0);
	th = model_find_thread(p, 101);
	add_events(t, th, 1, 4800000000ull, 1);
	add_events(t, th, 1, 4900000000ull, 2);
	th = model_find_thread(p, 100);
	add_events(t, th, 0, 3300000000ull, 3);

	/* Empty strings are strings, not NULL. */
	t->procs[1]->segs[0].cwd = model_strdup(t, "");
	CHECK_INT(model_add_module(t, &t->procs[1]->segs[0], "", 0, 0, 0, 1), ==, 0);

	p = t->procs[3];
	p->exit_kind = MODEL_EXIT_HOST_LOST;
	p->end_ns = 5500000000;
	add_events(t, &p->threads[1], 0, 10800000000ull, 4);

	/* A child whose parent comes later in the list. */
	MUST(p = model_add_process(t, 500));
	p->host = model_strdup(t, "node2");
	p->start_ns = 700000000;
	p->end_ns = 800000000;
	MUST(p->parent = model_add_process(t, 450));
	p->ppid = 450;
	p->parent->start_ns = 650000000;
	p->parent->parent = t->procs[4];
	return t;
}

/* The model read back from bytes fed in pieces of at most step bytes. */
static model_trace *read_back_model(const bytes *b, size_t step, bool want_end)
{
	model_trace *t = model_new();
	mstream_reader *r;

	MUST(t);
	MUST(r = mstream_reader_new(t));
	for (size_t off = 0; off < b->len; off += step) {
		size_t n = b->len - off < step ? b->len - off : step;
		int err = mstream_feed(r, b->p + off, n);
		CHECK_MSG(err == 0, "feed at %zu: %d %s", off, err, mstream_error(r));
	}
	CHECK(mstream_complete(r) == want_end);
	CHECK_UINT(mstream_bytes(r), ==, b->len);
	CHECK_UINT(mstream_held(r), ==, 0);
	mstream_reader_free(r);
	return t;
}

/* ---- tests -------------------------------------------------------------- */

/* Clears *ctx when emit is handed the very bytes it points to. */
static int emit_find(void *ctx, const void *data, size_t len)
{
	(void)len;
	if (*(const void **)ctx == data)
		*(const void **)ctx = NULL;
	return 0;
}

static void test_roundtrip(void)
{
	model_trace *t = full_model(), *u;
	mstream_writer *w;
	bytes b = {0};

	MUST(w = mstream_writer_new(t));
	sync_all(w, &b);
	CHECK_INT(mstream_end(w, emit_bytes, &b), ==, 0);
	u = read_back_model(&b, b.len, true);
	CHECK_SAME_MODEL(t, u);
	CHECK(u->procs[5]->parent == u->procs[6] && u->procs[6]->parent == u->procs[4]);

	/* Nothing changed: the next sync sends nothing. */
	size_t before = b.len;
	sync_all(w, &b);
	CHECK_UINT(b.len, ==, before);

	/* Chunk bytes go to emit straight from the arena, not copied. */
	mstream_writer *w2;
	const void *chunk = model_find_thread(t->procs[0], 101)->chunks->data;
	MUST(w2 = mstream_writer_new(t));
	bool more;
	CHECK_INT(mstream_sync(w2, emit_find, (void *)&chunk, SIZE_MAX, &more), ==, 0);
	CHECK(chunk == NULL);
	mstream_writer_free(w2);

	model_free(u);
	mstream_writer_free(w);
	model_free(t);
	free(b.p);
}

/* A small deterministic generator (xorshift64*). */
static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(uint64_t n)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (rng_state * 2685821657736338717ull) % n;
}

/* One random change of t. */
static void mutate(model_trace *t)
{
	static const char *const argv[] = {"/bin/x", "-a", "b c", NULL};
	model_process *p = t->nprocs ? t->procs[rnd(t->nprocs)] : NULL;
	char s[32];

	switch (p ? rnd(12) : 0) {
	case 0: {
		model_process *c = model_add_process(t, (int64_t)rnd(100000));
		MUST(c);
		c->start_ns = (int64_t)rnd(1000000000);
		c->ppid = p ? p->pid : 1;
		c->parent = p;
		c->spawn_kind = (int)rnd(3);
		c->spawn_ns = p ? c->start_ns : -1;
		c->rank = rnd(3) ? -1 : (int64_t)rnd(64);
		break;
	}
	case 1:
		p->end_ns = p->start_ns + (int64_t)rnd(1000000);
		p->exit_kind = (enum model_exit_kind)rnd(5);
		p->exit_value = (int)rnd(256);
		break;
	case 2:
		add_seg(t, p, argv[0], argv, 3, "/w", p->start_ns, -1, rnd(2));
		break;
	case 3:
		if (p->nsegs) {
			model_segment *g = &p->segs[rnd(p->nsegs)];
			if (rnd(2))
				g->end_ns = g->start_ns + (int64_t)rnd(1000);
			snprintf(s, sizeof(s), "/lib/l%u.so", (unsigned)rnd(5));
			CHECK_INT(
				model_add_module(t, g, s, strlen(s), rnd(4) << 12, 0x1000, 0x2000),
				==, 0);
		}
		break;
	case 4:
		MUST(model_add_thread(t, p, (int64_t)rnd(100000)));
		break;
	case 5:
	case 6:
	case 7:
		if (p->nthreads)
			add_events(t, &p->threads[rnd(p->nthreads)], (uint32_t)rnd(2),
				   rnd(1u << 30) + 3000000000ull, (unsigned)rnd(1000));
		break;
	case 8: {
		model_mark *m = model_add_mark(t, p);
		MUST(m);
		m->ts_ns = p->start_ns;
		m->tid = p->pid;
		m->name = model_strdup(t, "mark");
		m->cat = model_strdup(t, "test");
		break;
	}
	case 9:
		if (p->nthreads) {
			model_thread *th = &p->threads[rnd(p->nthreads)];
			snprintf(s, sizeof(s), "t%u", (unsigned)rnd(100));
			th->name = model_strdup(t, s);
			th->end_ns = (int64_t)rnd(2000000000);
		}
		break;
	case 10:
		CHECK_INT(model_add_clock(t, rnd(1ull << 40), (int64_t)rnd(1ull << 40)), ==, 0);
		CHECK_INT(model_add_clock_sample(t, (int64_t)rnd(1ull << 40), -(int64_t)rnd(1000),
						 (int64_t)rnd(100)),
			  ==, 0);
		t->end_ns = (int64_t)rnd(5000000000);
		t->lost_events += rnd(3);
		break;
	case 11:
		p->lost_events += 1;
		p->host = rnd(2) ? model_strdup(t, "node3") : NULL;
		break;
	}
}

static void test_incremental(void)
{
	model_trace *t = model_new(), *u = model_new();
	mstream_writer *w;
	mstream_reader *r;
	char why[200];

	MUST(t && u);
	t->host = model_strdup(t, "node1");
	MUST(w = mstream_writer_new(t));
	MUST(r = mstream_reader_new(u));
	for (int i = 0; i < 5000; i++) {
		bytes b = {0};

		mutate(t);
		if (rnd(3) == 0)
			continue; /* several changes per sync */
		sync_all(w, &b);
		CHECK_INT(mstream_feed(r, b.p, b.len), ==, 0);
		free(b.p);
		if (i % 100 == 0 && model_diff(t, u, why, sizeof(why)) != NULL) {
			check_fail_at(__FILE__, __LINE__, "after change %d: %s", i, why);
			break;
		}
	}
	bytes b = {0};
	sync_all(w, &b);
	CHECK_INT(mstream_end(w, emit_bytes, &b), ==, 0);
	CHECK_INT(mstream_feed(r, b.p, b.len), ==, 0);
	CHECK(mstream_complete(r));
	CHECK_SAME_MODEL(t, u);
	printf("incremental: %zu processes\n", t->nprocs);
	free(b.p);
	mstream_reader_free(r);
	mstream_writer_free(w);
	model_free(u);
	model_free(t);
}

/* Parents re-pointed between two syncs so that, sent in index order, the
 * reader would see a loop of parents for a moment (B's new parent A still
 * has B as parent there); a model with a loop of its own. Neither stops
 * the stream, and the reader ends up with the writer's tree. */
static void test_parent_moves(void)
{
	model_trace *t = model_new(), *u = model_new();
	model_process *b, *a, *c;
	mstream_writer *w;
	mstream_reader *r;
	bytes out = {0};
	char why[200];

	MUST(t && u);
	MUST(b = model_add_process(t, 10));
	MUST(a = model_add_process(t, 11));
	MUST(c = model_add_process(t, 12));
	a->parent = b;
	MUST(w = mstream_writer_new(t));
	MUST(r = mstream_reader_new(u));
	sync_all(w, &out);
	CHECK_INT(mstream_feed(r, out.p, out.len), ==, 0);
	out.len = 0;
	a->parent = NULL;
	b->parent = a;
	sync_all(w, &out);
	CHECK_MSG(mstream_feed(r, out.p, out.len) == 0, "%s", mstream_error(r));
	CHECK_MSG(model_diff(t, u, why, sizeof(why)) == NULL, "%s", why);
	out.len = 0;
	/* A loop in the writer's model: sent without the parent that
	 * closes it. */
	c->parent = c;
	sync_all(w, &out);
	CHECK_MSG(mstream_feed(r, out.p, out.len) == 0, "%s", mstream_error(r));
	CHECK(u->procs[2]->parent == NULL);
	out.len = 0;
	sync_all(w, &out);
	CHECK_UINT(out.len, ==, 0);
	free(out.p);
	mstream_reader_free(r);
	mstream_writer_free(w);
	model_free(u);
	model_free(t);
}

/* Every split of a small stream into two feeds, and one byte at a time. */
static void test_split(void)
{
	model_trace *t = full_model(), *u;
	mstream_writer *w;
	bytes b = {0};

	MUST(w = mstream_writer_new(t));
	sync_all(w, &b);
	CHECK_INT(mstream_end(w, emit_bytes, &b), ==, 0);
	for (size_t k = 0; k <= b.len; k++) {
		mstream_reader *r;
		char why[200];

		MUST(u = model_new());
		MUST(r = mstream_reader_new(u));
		CHECK_INT(mstream_feed(r, b.p, k), ==, 0);
		CHECK_INT(mstream_feed(r, b.p + k, b.len - k), ==, 0);
		CHECK(mstream_complete(r));
		if (model_diff(t, u, why, sizeof(why)) != NULL)
			check_fail_at(__FILE__, __LINE__, "split at %zu: %s", k, why);
		mstream_reader_free(r);
		model_free(u);
	}
	u = read_back_model(&b, 1, true);
	CHECK_SAME_MODEL(t, u);
	model_free(u);
	mstream_writer_free(w);
	model_free(t);
	free(b.p);
}

typedef struct capped {
	bytes b;
	size_t call_bytes;
} capped;

static int emit_capped(void *ctx, const void *data, size_t len)
{
	capped *c = ctx;

	c->call_bytes += len;
	return emit_bytes(&c->b, data, len);
}

/* max_bytes: each sync stops after about that many bytes, and the next
 * goes on exactly there (nothing twice, nothing skipped). */
static void test_max_bytes(void)
{
	static const size_t caps[] = {1, 40, 100, 333, 1000};

	for (size_t k = 0; k < sizeof(caps) / sizeof(caps[0]); k++) {
		model_trace *t = full_model(), *u;
		mstream_writer *w;
		capped c = {0};
		bytes whole = {0};
		bool more = true;
		int calls = 0;

		MUST(w = mstream_writer_new(t));
		while (more && calls < 10000) {
			c.call_bytes = 0;
			CHECK_INT(mstream_sync(w, emit_capped, &c, caps[k], &more), ==, 0);
			/* At most one record past the cap: the largest here is
			 * under 400 bytes. */
			CHECK_MSG(c.call_bytes < caps[k] + 400, "cap %zu: %zu bytes", caps[k],
				  c.call_bytes);
			calls++;
		}
		CHECK(!more);
		CHECK(calls > 1);
		CHECK_INT(mstream_end(w, emit_bytes, &c.b), ==, 0);
		u = read_back_model(&c.b, c.b.len, true);
		CHECK_SAME_MODEL(t, u);
		/* The same bytes as one sync: records in the same order. */
		mstream_writer *w1;
		MUST(w1 = mstream_writer_new(t));
		sync_all(w1, &whole);
		CHECK_INT(mstream_end(w1, emit_bytes, &whole), ==, 0);
		CHECK(whole.len == c.b.len && !memcmp(whole.p, c.b.p, whole.len));
		mstream_writer_free(w1);
		model_free(u);
		mstream_writer_free(w);
		model_free(t);
		free(c.b.p);
		free(whole.p);
	}
}

/* ---- hostile input ------------------------------------------------------ */

/* One record: the 4-byte length, then what pk packed into sb. */
static void record(bytes *out, const msgpack_sbuffer *sb)
{
	unsigned char len[4] = {(unsigned char)sb->size, (unsigned char)(sb->size >> 8),
				(unsigned char)(sb->size >> 16), (unsigned char)(sb->size >> 24)};

	emit_bytes(out, len, 4);
	emit_bytes(out, sb->data, sb->size);
}

/* Where the records of a case go, for cases of more than one record. */
static bytes *case_out;
static msgpack_sbuffer *case_sb;

/* Ends the record packed so far; what is packed next is the next one. */
static void next_record(void)
{
	record(case_out, case_sb);
	msgpack_sbuffer_clear(case_sb);
}

/* A stream of a STREAM record, then the records packed by fn. */
static int feed_after_stream(void (*fn)(msgpack_packer *), model_trace **tp, char *err,
			     size_t errlen)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	bytes out = {0};
	mstream_reader *r;
	int ret;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_array(&pk, 4);
	msgpack_pack_uint8(&pk, MSTREAM_R_STREAM);
	msgpack_pack_uint8(&pk, MSTREAM_VERSION);
	msgpack_pack_nil(&pk);
	msgpack_pack_nil(&pk);
	record(&out, &sb);
	msgpack_sbuffer_clear(&sb);
	case_out = &out;
	case_sb = &sb;
	fn(&pk);
	record(&out, &sb);
	msgpack_sbuffer_destroy(&sb);
	MUST(*tp = model_new());
	MUST(r = mstream_reader_new(*tp));
	ret = mstream_feed(r, out.p, out.len);
	snprintf(err, errlen, "%s", mstream_error(r));
	/* After an error the reader takes nothing more. */
	if (ret < 0)
		CHECK_INT(mstream_feed(r, out.p, out.len), ==, -EBADMSG);
	mstream_reader_free(r);
	free(out.p);
	return ret;
}

static void proc_fields(msgpack_packer *pk, uint64_t index, int64_t parent, int64_t exit_kind)
{
	msgpack_pack_array(pk, 19);
	msgpack_pack_uint8(pk, MSTREAM_R_PROC);
	msgpack_pack_uint64(pk, index);
	for (int i = 0; i < 3; i++)
		msgpack_pack_int64(pk, 5);
	msgpack_pack_int64(pk, -1);
	msgpack_pack_int64(pk, parent);
	msgpack_pack_nil(pk);
	for (int i = 0; i < 5; i++)
		msgpack_pack_int64(pk, -1);
	msgpack_pack_int64(pk, exit_kind);
	msgpack_pack_int64(pk, 0);
	msgpack_pack_uint64(pk, 0);
	msgpack_pack_int64(pk, -1);
	msgpack_pack_int64(pk, -1);
	msgpack_pack_nil(pk);
}

static void proc_index_3(msgpack_packer *pk)
{
	proc_fields(pk, 3, -1, 0);
}

static void proc_self_parent(msgpack_packer *pk)
{
	proc_fields(pk, 0, 0, 0);
}

static void proc_bad_exit(msgpack_packer *pk)
{
	proc_fields(pk, 0, -1, 9);
}

static void proc_short(msgpack_packer *pk)
{
	msgpack_pack_array(pk, 3);
	msgpack_pack_uint8(pk, MSTREAM_R_PROC);
	msgpack_pack_uint8(pk, 0);
	msgpack_pack_uint8(pk, 1);
}

static void chunk_no_proc(msgpack_packer *pk)
{
	msgpack_pack_array(pk, 5);
	msgpack_pack_uint8(pk, MSTREAM_R_CHUNK);
	msgpack_pack_uint8(pk, 0);
	msgpack_pack_uint8(pk, 0);
	msgpack_pack_uint8(pk, 0);
	msgpack_pack_bin_with_body(pk, "x", 1);
}

static void clocks_gap(msgpack_packer *pk)
{
	msgpack_pack_array(pk, 3);
	msgpack_pack_uint8(pk, MSTREAM_R_CLOCKS);
	msgpack_pack_uint8(pk, 1);
	msgpack_pack_array(pk, 2);
	msgpack_pack_uint8(pk, 1);
	msgpack_pack_uint8(pk, 1);
}

/* A process, then a mark whose args are not JSON (the writers copy args
 * into the trace as they are). */
static void mark_bad_args(msgpack_packer *pk)
{
	proc_fields(pk, 0, -1, 0);
	next_record();
	msgpack_pack_array(pk, 9);
	msgpack_pack_uint8(pk, MSTREAM_R_MARK);
	msgpack_pack_uint8(pk, 0);
	msgpack_pack_uint8(pk, 0);
	msgpack_pack_int64(pk, 1);
	msgpack_pack_int64(pk, -1);
	msgpack_pack_int64(pk, 1);
	msgpack_pack_str_with_body(pk, "m", 1);
	msgpack_pack_nil(pk);
	msgpack_pack_str_with_body(pk, "{\"a\":\"\xff\"}", 9);
}

static void unknown_kind(msgpack_packer *pk)
{
	msgpack_pack_array(pk, 2);
	msgpack_pack_uint8(pk, 99);
	msgpack_pack_str_with_body(pk, "future", 6);
}

/* An array that claims four billion elements in a few bytes. */
static void huge_count(msgpack_packer *pk)
{
	static const char claim[] = {(char)0xdd, (char)0xff, (char)0xff, (char)0xff, (char)0xff, 1};

	pk->callback(pk->data, claim, sizeof(claim));
}

static void test_hostile(void)
{
	static const struct {
		void (*fn)(msgpack_packer *);
		const char *msg; /* expected in the error, NULL: accepted */
	} cases[] = {
		{proc_index_3, "record 2 (PROC): index 3 out of range (0 processes)"},
		{proc_self_parent, "record 2 (PROC): parent 0 would make a loop"},
		{proc_bad_exit, "record 2 (PROC): field 13: expected an integer in range"},
		{proc_short, "record 2 (PROC): 2 fields, expected 18"},
		{chunk_no_proc, "record 2 (CHUNK): process 0 out of range (0 processes)"},
		{clocks_gap, "record 2 (CLOCKS): first pair 1, 0 pairs so far"},
		{huge_count, "record 2 (unknown): not one msgpack object"},
		{mark_bad_args, "record 3 (MARK): field 9: the args are not a JSON object"},
		{unknown_kind, NULL},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		model_trace *t = NULL;
		char err[256];
		int ret = feed_after_stream(cases[i].fn, &t, err, sizeof(err));

		if (cases[i].msg == NULL) {
			CHECK_MSG(ret == 0, "case %zu: %s", i, err);
		} else {
			CHECK_MSG(ret == -EBADMSG, "case %zu: %d", i, ret);
			CHECK_MSG(strstr(err, cases[i].msg) != NULL, "case %zu: \"%s\"", i, err);
		}
		model_free(t);
	}

	/* A length over the cap is refused before anything is held. */
	model_trace *t = model_new();
	mstream_reader *r;
	unsigned char big[4] = {0xff, 0xff, 0xff, 0x7f};
	MUST(t && (r = mstream_reader_new(t)));
	CHECK_INT(mstream_feed(r, big, 2), ==, 0);
	CHECK_INT(mstream_feed(r, big + 2, 2), ==, -EBADMSG);
	CHECK_STR_EQ(mstream_error(r), "record 1 (unknown): length 2147483647 over the limit of "
				       "67108864");
	mstream_reader_free(r);
	model_free(t);

	/* The first record must be STREAM. */
	model_trace *full = full_model();
	mstream_writer *w;
	bytes b = {0};
	MUST(w = mstream_writer_new(full));
	sync_all(w, &b);
	MUST(t = model_new());
	MUST(r = mstream_reader_new(t));
	size_t first = 4 + (size_t)(b.p[0] | b.p[1] << 8);
	CHECK_INT(mstream_feed(r, b.p + first, b.len - first), ==, -EBADMSG);
	CHECK_MSG(strstr(mstream_error(r), "does not start with a STREAM") != NULL, "%s",
		  mstream_error(r));
	mstream_reader_free(r);
	model_free(t);
	mstream_writer_free(w);
	model_free(full);
	free(b.p);
}

/* ---- node-output files -------------------------------------------------- */

static void test_file(void)
{
	model_trace *t = full_model(), *u;
	mstream_reader *r;
	int fd = memfd_create("ftnode", MFD_CLOEXEC);
	size_t len;
	char *whole;

	MUST(fd >= 0);
	CHECK_INT(mstream_write_file(t, fd, true), ==, 0);
	MUST(whole = read_back(fd, &len));
	CHECK(memcmp(whole, MSTREAM_FILE_MAGIC, MSTREAM_FILE_MAGIC_LEN) == 0);
	lseek(fd, 0, SEEK_SET);
	MUST(u = model_new());
	MUST(r = mstream_reader_new(u));
	CHECK_INT(mstream_read_file(r, fd), ==, 0);
	CHECK_SAME_MODEL(t, u);
	mstream_reader_free(r);
	model_free(u);

	/* Cut anywhere (the node died while writing): what came before
	 * stays, and the reader says where it stopped. */
	size_t prev_procs = 0;
	for (size_t cut = MSTREAM_FILE_MAGIC_LEN; cut < len; cut += 7) {
		CHECK_INT(ftruncate(fd, (off_t)cut), ==, 0);
		lseek(fd, 0, SEEK_SET);
		MUST(u = model_new());
		MUST(r = mstream_reader_new(u));
		CHECK_INT(mstream_read_file(r, fd), ==, -ENODATA);
		CHECK(strstr(mstream_error(r), "ends ") != NULL);
		CHECK(u->nprocs >= prev_procs);
		prev_procs = u->nprocs;
		mstream_reader_free(r);
		model_free(u);
		CHECK_INT(pwrite(fd, whole + cut, len - cut, (off_t)cut), ==, (ssize_t)(len - cut));
	}
	CHECK_UINT(prev_procs, ==, t->nprocs);

	/* Not a node-output file. */
	CHECK_INT(ftruncate(fd, 0), ==, 0);
	CHECK_INT(pwrite(fd, "{\"traceEvents\":[]}", 18, 0), ==, 18);
	lseek(fd, 0, SEEK_SET);
	MUST(u = model_new());
	MUST(r = mstream_reader_new(u));
	CHECK_INT(mstream_read_file(r, fd), ==, -EBADMSG);
	mstream_reader_free(r);
	model_free(u);
	free(whole);
	close(fd);
	model_free(t);
}

/* Is everything in u ended, with a known way, and u's part lost? */
static void check_all_closed(const model_trace *u, size_t cut)
{
	for (size_t i = 0; i < u->nprocs; i++) {
		const model_process *p = u->procs[i];

		if (p->end_ns < 0 || p->exit_kind == MODEL_EXIT_UNKNOWN ||
		    p->exit_kind == MODEL_EXIT_RUNNING) {
			fprintf(stderr,
				"cut at %zu: process %zu (pid %lld) end %lld exit kind %d\n", cut,
				i, (long long)p->pid, (long long)p->end_ns, (int)p->exit_kind);
			CHECK(false);
		}
		for (size_t k = 0; k < p->nsegs; k++)
			CHECK_INT(p->segs[k].end_ns, >=, 0);
		for (size_t k = 0; k < p->nthreads; k++)
			CHECK_INT(p->threads[k].end_ns, >=, 0);
		CHECK_INT(u->node.lost_ns, >=, p->start_ns);
	}
	if (u->nprocs > 0) {
		CHECK(u->node.is_node);
		CHECK_INT(u->node.lost_ns, >=, 0);
	}
}

/*
 * A file cut short whose processes were open when it was written (a node
 * killed while it wrote what it had): at every cut, what it left open
 * ends host lost at the last time the part knew of, and the part is lost,
 * as a part whose connection dropped is at the head.
 */
static void test_file_cut_lost(void)
{
	model_trace *t = full_model(), *u;
	mstream_reader *r;
	int fd = memfd_create("ftnode", MFD_CLOEXEC);
	size_t len, lost = 0;
	char *whole;

	MUST(fd >= 0);
	t->node.lost_ns = -1;
	t->procs[0]->exit_kind = MODEL_EXIT_RUNNING;
	t->procs[0]->end_ns = -1;
	t->procs[1]->exit_kind = MODEL_EXIT_UNKNOWN;
	t->procs[1]->end_ns = -1;
	for (size_t k = 0; k < t->procs[1]->nthreads; k++)
		t->procs[1]->threads[k].end_ns = -1;
	for (size_t k = 0; k < t->procs[1]->nsegs; k++)
		t->procs[1]->segs[k].end_ns = -1;
	t->procs[3]->end_ns = -1; /* host lost, without a time */
	CHECK_INT(mstream_write_file(t, fd, false), ==, 0);
	MUST(whole = read_back(fd, &len));
	for (size_t cut = MSTREAM_FILE_MAGIC_LEN; cut <= len; cut += 5) {
		CHECK_INT(ftruncate(fd, (off_t)cut), ==, 0);
		lseek(fd, 0, SEEK_SET);
		MUST(u = model_new());
		MUST(r = mstream_reader_new(u));
		CHECK_INT(mstream_read_file(r, fd), ==, -ENODATA);
		check_all_closed(u, cut);
		for (size_t i = 0; i < u->nprocs; i++)
			lost += u->procs[i]->exit_kind == MODEL_EXIT_HOST_LOST;
		mstream_reader_free(r);
		model_free(u);
		CHECK_INT(pwrite(fd, whole + cut, len - cut, (off_t)cut), ==, (ssize_t)(len - cut));
	}
	CHECK_UINT(lost, >, 0);
	free(whole);
	close(fd);
	model_free(t);
}

/* ---- speed ---------------------------------------------------------------- */

/* CPU time of this process: the machine that runs the benchmark is
 * often shared, and wall time would measure the others. */
static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int emit_count(void *ctx, const void *data, size_t len)
{
	(void)data;
	*(size_t *)ctx += len;
	return 0;
}

/* A sync that finds nothing changed, on a model of nproc processes (two
 * images, two threads, chunks, a mark each): its time per call. */
static void bench(size_t nproc, int rounds)
{
	static const char *const argv[] = {"/usr/bin/cc", "-c", "x.c", NULL};
	model_trace *t = model_new();
	mstream_writer *w;
	size_t sent = 0;
	bool more;
	double t0, t1, best = 1e9;

	MUST(t);
	for (size_t i = 0; i < nproc; i++) {
		model_process *p = model_add_process(t, (int64_t)i + 100);
		model_mark *m;
		MUST(p);
		p->parent = i ? t->procs[(i - 1) / 2] : NULL;
		p->start_ns = (int64_t)i * 1000;
		add_seg(t, p, argv[0], argv, 3, "/src", p->start_ns, -1, true);
		add_seg(t, p, argv[0], argv, 3, "/src", p->start_ns + 10, -1, true);
		for (int k = 0; k < 2; k++) {
			model_thread *th = model_add_thread(t, p, p->pid + k);
			MUST(th);
			add_events(t, th, 1, 3000000000ull + i, (unsigned)i);
		}
		MUST(m = model_add_mark(t, p));
		m->name = "mark";
	}
	MUST(w = mstream_writer_new(t));
	t0 = now_s();
	CHECK_INT(mstream_sync(w, emit_count, &sent, SIZE_MAX, &more), ==, 0);
	t1 = now_s();
	printf("bench: first sync of %zu processes: %.1f ms CPU, %zu bytes\n", nproc,
	       (t1 - t0) * 1e3, sent);
	for (int r = 0; r < rounds; r++) {
		size_t none = 0;
		t0 = now_s();
		CHECK_INT(mstream_sync(w, emit_count, &none, SIZE_MAX, &more), ==, 0);
		t1 = now_s();
		CHECK_UINT(none, ==, 0);
		best = t1 - t0 < best ? t1 - t0 : best;
	}
	printf("bench: no-change sync of %zu processes: %.3f ms CPU (best of %d)\n", nproc,
	       best * 1e3, rounds);
	mstream_writer_free(w);
	model_free(t);
}

/* Writes the seeds of fuzz_mstream (tests/fuzz/corpus/mstream/) into dir:
 * a split byte, then a stream. */
static void write_seeds(const char *dir)
{
	static const unsigned char splits[] = {0, 97, 255};
	char path[4096];

	for (int k = 0; k < 3; k++) {
		model_trace *t = k == 2 ? model_new() : full_model();
		mstream_writer *w;
		bytes b = {0};

		MUST(t && (w = mstream_writer_new(t)));
		emit_bytes(&b, &splits[k], 1);
		if (k == 2) {
			/* A stream of small syncs of random changes. */
			for (int i = 0; i < 60; i++) {
				mutate(t);
				sync_all(w, &b);
			}
		} else {
			sync_all(w, &b);
		}
		if (k != 1)
			CHECK_INT(mstream_end(w, emit_bytes, &b), ==, 0);
		snprintf(path, sizeof(path), "%s/%s", dir,
			 k == 0   ? "full"
			 : k == 1 ? "no_end"
				  : "incremental");
		FILE *f = fopen(path, "wb");
		MUST(f);
		CHECK_UINT(fwrite(b.p, 1, b.len, f), ==, b.len);
		fclose(f);
		free(b.p);
		mstream_writer_free(w);
		model_free(t);
	}
}

static int emit_feed(void *ctx, const void *data, size_t len)
{
	return mstream_feed(ctx, data, len);
}

/* The bulk: nchunks chunks of size bytes on 8 threads, synced straight
 * into a reader (as the link would carry them): MB/s of the whole. */
static void bench_bulk(size_t nchunks, size_t size)
{
	model_trace *t = model_new(), *u = model_new();
	unsigned char *data = malloc(size);
	mstream_writer *w;
	mstream_reader *r;
	model_process *p;
	bool more;
	double t0, t1;

	MUST(t && u && data);
	memset(data, 0x5a, size);
	MUST(p = model_add_process(t, 1));
	for (int k = 0; k < 8; k++)
		MUST(model_add_thread(t, p, k + 1));
	for (size_t i = 0; i < nchunks; i++)
		MUST(model_add_chunk(t, &p->threads[i % 8], 0, data, size) == 0);
	MUST(w = mstream_writer_new(t));
	MUST(r = mstream_reader_new(u));
	t0 = now_s();
	CHECK_INT(mstream_sync(w, emit_feed, r, SIZE_MAX, &more), ==, 0);
	t1 = now_s();
	CHECK_UINT(u->procs[0]->threads[7].chunk_bytes, ==, nchunks / 8 * size);
	printf("bench: %zu chunks of %zu KiB, sync into a reader: %.0f MB/s of CPU time\n", nchunks,
	       size / 1024, (double)(nchunks * size) / (t1 - t0) / 1e6);
	mstream_reader_free(r);
	mstream_writer_free(w);
	model_free(u);
	model_free(t);
	free(data);
}

int main(int argc, char **argv)
{
	if (argc > 2 && strcmp(argv[1], "seeds") == 0) {
		write_seeds(argv[2]);
		return check_done("test_mstream seeds");
	}
	if (argc > 1 && strcmp(argv[1], "bench") == 0) {
		bench(10000, 50);
		bench_bulk(4096, 256 * 1024);
		bench_bulk(65536, 4096);
		return check_done("test_mstream bench");
	}
	test_roundtrip();
	test_incremental();
	test_parent_moves();
	test_split();
	test_max_bytes();
	test_hostile();
	test_file();
	test_file_cut_lost();
	bench(10000, 5);
	return check_done("test_mstream");
}
