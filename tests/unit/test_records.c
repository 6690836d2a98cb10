/*
 * The decoding of in-process event records (combine/model/records.c):
 * its fast path for function entries and exits against its general
 * parser. The same random records (functions, regions, instants,
 * counters, time and clock records, with every width of integer, chunks
 * cut inside a record, records that do not parse in the middle of a chunk,
 * images changing between chunks) are written twice
 * into a model: as the agent writes them, which takes the fast path, and
 * with each record's type as a uint8, which only the general parser
 * reads. The two traces must be the same bytes, with and without
 * function filters, and under clock maps of no, one and many pairs (times
 * before, between and after them). A combine of the model (the merge's
 * model feed) must give each event the raw text a file would hold.
 *
 * The templates of function slices (sink_event.tmpl): in the events of
 * two models of several processes and threads with the same addresses,
 * sent into one sink, the slices of one tmpl must all have the same
 * name, cat, pid and tid, and the JSON sink must write the same bytes
 * whether it sees the tmpls or not.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "forktrace/wire.h"
#include "check.h"
#include "events.h"
#include "merge.h"
#include "model.h"
#include "sink.h"

#define PID 5151
#define NRECORDS 60000

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* A record stream in the two encodings. */
typedef struct enc {
	unsigned char *buf[2];
	size_t len, cap; /* of buf[0]; buf[1] is its length plus one a record */
	size_t len1;
} enc;

static void put(enc *e, int k, const void *p, size_t n)
{
	size_t *len = k == 0 ? &e->len : &e->len1;

	if (*len + n > e->cap) {
		fprintf(stderr, "test_records: buffer full\n");
		abort();
	}
	memcpy(e->buf[k] + *len, p, n);
	*len += n;
}

/* An unsigned integer in one of the widths msgpack has for it. */
static size_t uint_bytes(unsigned char *out, uint64_t v, unsigned width)
{
	if (width == 0 && v <= 0x7f) {
		out[0] = (unsigned char)v;
		return 1;
	}
	if (width <= 1 && v <= 0xff) {
		out[0] = 0xcc;
		out[1] = (unsigned char)v;
		return 2;
	}
	if (width <= 2 && v <= 0xffff) {
		out[0] = 0xcd;
		out[1] = (unsigned char)(v >> 8);
		out[2] = (unsigned char)v;
		return 3;
	}
	if (width <= 3 && v <= 0xffffffffu) {
		out[0] = 0xce;
		for (int i = 0; i < 4; i++)
			out[1 + i] = (unsigned char)(v >> (24 - 8 * i));
		return 5;
	}
	out[0] = 0xcf;
	for (int i = 0; i < 8; i++)
		out[1 + i] = (unsigned char)(v >> (56 - 8 * i));
	return 9;
}

/*
 * One record [type, fields...] of n elements in both encodings; fields
 * are already encoded. cut > 0: only the first cut parts (array header,
 * type, then the fields) are written, the last of them half when it is
 * longer than a byte: a chunk that ends inside the record.
 */
static void record(enc *e, unsigned type, const unsigned char *fields[], const size_t flen[],
		   size_t nf, size_t cut)
{
	unsigned char hdr = (unsigned char)(0x90 | (nf + 1));
	unsigned char t8[2] = {0xcc, (unsigned char)type};
	unsigned char t0 = (unsigned char)type;

	for (int k = 0; k < 2; k++) {
		size_t part = 0;

		if (cut > 0 && ++part > cut)
			continue;
		put(e, k, &hdr, 1);
		if (cut > 0 && ++part > cut)
			continue;
		if (k == 0)
			put(e, k, &t0, 1);
		else
			put(e, k, t8, 2);
		for (size_t i = 0; i < nf; i++) {
			if (cut > 0 && ++part >= cut) {
				put(e, k, fields[i], flen[i] > 1 ? flen[i] / 2 : flen[i]);
				break;
			}
			put(e, k, fields[i], flen[i]);
		}
	}
}

/* A random record; cut as for record. bad: its field number bad - 1 is
 * no integer (a scribbled buffer), when it has that field. */
static void random_record(enc *e, const uint64_t *addrs, size_t naddrs, size_t cut, size_t bad)
{
	static const char *const names[] = {"outer", "inner", "tick", "\xc3\xa9t\xc3\xa9",
					    "q\"uote"};
	unsigned char dt[9], a[9], name[40], val[9];
	const unsigned char *f[3] = {dt, a, val};
	size_t fl[3];
	unsigned r = (unsigned)(next() % 100);
	uint64_t d = next() % 4 == 0 ? next() % 100000 : next() % 200;

	fl[0] = uint_bytes(dt, d, (unsigned)(next() % 5));
	if (bad == 1) {
		dt[0] = 0xc1;
		fl[0] = 1;
	}
	if (r < 45) {
		fl[1] = uint_bytes(a, addrs[next() % naddrs], next() % 8 == 0 ? 3 : 4);
		if (bad == 2) {
			a[0] = 0xc1;
			fl[1] = 1;
		}
		record(e, FT_EV_FUNC_ENTER, f, fl, 2, cut);
	} else if (r < 88) {
		record(e, FT_EV_FUNC_EXIT, f, fl, 1, cut);
	} else if (r < 96) {
		const char *s = names[next() % 5];
		size_t n = strlen(s);
		unsigned type = r < 92   ? FT_EV_REGION_BEGIN
				: r < 94 ? FT_EV_REGION_END
				: r < 95 ? FT_EV_INSTANT
					 : FT_EV_COUNTER;

		name[0] = (unsigned char)(0xa0 | n);
		memcpy(name + 1, s, n);
		f[1] = name;
		fl[1] = n + 1;
		if (type == FT_EV_REGION_END) {
			record(e, type, f, fl, 1, cut);
		} else if (type == FT_EV_COUNTER) {
			double v = (double)(next() % 1000) / 8.0;
			uint64_t bits;

			memcpy(&bits, &v, 8);
			val[0] = 0xcb;
			for (int i = 0; i < 8; i++)
				val[1 + i] = (unsigned char)(bits >> (56 - 8 * i));
			f[2] = val;
			fl[2] = 9;
			record(e, type, f, fl, 3, cut);
		} else {
			record(e, type, f, fl, 2, cut);
		}
		f[1] = a;
	} else if (r < 98) {
		/* A time record: the time jumps (forward, now and then
		 * back). */
		fl[0] = uint_bytes(dt, 3000000 + next() % 30000000, 4);
		record(e, FT_EV_TIME, f, fl, 1, cut);
	} else {
		fl[0] = uint_bytes(dt, 3000000 + next() % 30000000, 4);
		fl[1] = uint_bytes(a, 1000000 + next() % 9000000, 4);
		record(e, FT_EV_CLOCK, f, fl, 2, cut);
	}
}

static model_trace *build(void)
{
	model_trace *t = model_new();
	model_process *p;
	model_segment *s;

	CHECK(t != NULL);
	t->start_ns = 1000000;
	t->end_ns = 20000000;
	p = model_add_process(t, PID);
	CHECK(p != NULL);
	p->start_ns = 1000000;
	p->end_ns = 15000000;
	for (int i = 0; i < 2; i++) {
		s = model_add_segment(t, p);
		CHECK(s != NULL);
		s->start_ns = i == 0 ? 1000000 : 6000000;
		s->end_ns = i == 0 ? 6000000 : 15000000;
		s->exe = model_strdup(t, i == 0 ? "/bin/first" : "/bin/second");
		s->instrumented = true;
	}
	CHECK(model_add_thread(t, p, PID) != NULL);
	CHECK(model_add_thread(t, p, PID + 1) != NULL);
	p->threads[0].end_ns = 15000000;
	p->threads[1].end_ns = 9000000;
	return t;
}

/* The JSON of t (malloc'd, *n bytes). */
static char *write_json(const model_trace *t, size_t *n, events_stats *st)
{
	int fd = memfd_create("trace", 0);
	char *buf;
	off_t len;

	CHECK(fd >= 0);
	CHECK(events_write(t, fd, TRACE_FORMAT_JSON, NULL, st) == 0);
	len = lseek(fd, 0, SEEK_END);
	buf = malloc((size_t)len + 1);
	CHECK(buf != NULL && pread(fd, buf, (size_t)len, 0) == len);
	close(fd);
	*n = (size_t)len;
	return buf;
}

/* A sink that checks that each event's raw text is what a file would
 * hold of it: jsonw_event_write's text without its leading newline. */
typedef struct raw_sink {
	trace_sink base;
	ostream text; /* the event's, as jsonw_event_write writes it */
	uint64_t events, slices;
	int bad;
} raw_sink;

static int raw_begin(trace_sink *s, const sink_meta *meta)
{
	(void)s;
	(void)meta;
	return 0;
}

static int raw_end(trace_sink *s, const sink_meta *meta)
{
	(void)s;
	(void)meta;
	return 0;
}

static int raw_event(trace_sink *s, const sink_event *e)
{
	raw_sink *r = (raw_sink *)s;
	ostream *o = &r->text;
	jsonw w;

	r->events++;
	r->slices += e->ev.ph == 'X';
	ostream_mem_reset(o);
	jsonw_init(&w, o);
	jsonw_event_write(&w, &e->ev);
	if (e->raw.p == NULL || o->len < 1 || e->raw.n != o->len - 1 ||
	    memcmp(e->raw.p, o->buf + 1, o->len - 1) != 0) {
		if (r->bad++ == 0)
			fprintf(stderr, "test_records: raw text %.*s\n  is not the event's %.*s\n",
				(int)e->raw.n, e->raw.p ? e->raw.p : "", (int)o->len, o->buf);
	}
	return 0;
}

/* A combine of the model (its events through the merge's model feed,
 * which makes their raw text) writes each as a file holds it. */
static void check_feed(const model_trace *t, uint64_t events)
{
	raw_sink r = {.base = {.begin = raw_begin, .event = raw_event, .end = raw_end}};
	merge_source src = {.model = t, .name = "records"};
	merge_opts o = {0};
	merge_result res;

	CHECK(ostream_open_mem(&r.text) == 0);
	CHECK(merge_inputs(&src, 1, &o, &r.base, &res) == 0);
	merge_result_free(&res);
	ostream_finish(&r.text);
	CHECK_UINT(r.bad, ==, 0);
	CHECK_UINT(r.events, ==, events);
	CHECK(r.slices > events / 2);
}

/* The records of both encodings in two models, chunk by chunk, with the
 * clock pairs pairs[0..npairs); compared as JSON. */
static void compare(const model_clock *pairs, size_t npairs, const char *what)
{
	static const char *const include_re[] = {"^0x[0-9a-f]*[02468ace]0$", NULL};
	static const char *const exclude_re[] = {"00$", NULL};
	uint64_t addrs[600];
	model_trace *t[2] = {build(), build()};
	enc e = {.cap = 8 << 20};
	size_t corrupt = 0;

	e.buf[0] = malloc(e.cap);
	e.buf[1] = malloc(e.cap);
	CHECK(e.buf[0] != NULL && e.buf[1] != NULL);
	/* More functions than the name cache has slots, some on one slot. */
	for (size_t i = 0; i < 600; i++)
		addrs[i] = i < 500 ? 0x401000 + 16 * i : 0x401000 + ((i - 500) << 20);
	for (int k = 0; k < 2; k++)
		for (size_t i = 0; i < npairs; i++)
			CHECK(model_add_clock(t[k], pairs[i].tsc, pairs[i].ns) == 0);
	for (size_t done = 0; done < NRECORDS;) {
		int th = (int)(next() % 2);
		uint32_t seg = next() % 4 == 0 ? 1 : 0;
		size_t recs = 1 + next() % (next() % 2 ? 5 : 800), start0 = e.len, start1 = e.len1;

		/* A record at the start of a chunk sets its time. */
		{
			unsigned char ts[9];
			const unsigned char *f[1] = {ts};
			size_t fl[1] = {uint_bytes(ts, 3000000 + next() % 3000000, 4)};

			record(&e, FT_EV_TIME, f, fl, 1, 0);
		}
		for (size_t i = 0; i < recs; i++) {
			/* Now and then a record that does not parse, with
			 * more after it: where the fast path reads. */
			size_t bad = next() % 400 == 0 ? 1 + next() % 2 : 0;

			random_record(&e, addrs, 600, 0, bad);
			corrupt += bad != 0;
		}
		if (next() % 8 == 0) {
			random_record(&e, addrs, 600, 1 + next() % 4, 0);
			corrupt++;
		}
		done += recs;
		CHECK(model_add_chunk(t[0], &t[0]->procs[0]->threads[th], seg, e.buf[0] + start0,
				      e.len - start0) == 0);
		CHECK(model_add_chunk(t[1], &t[1]->procs[0]->threads[th], seg, e.buf[1] + start1,
				      e.len1 - start1) == 0);
	}
	for (int filters = 0; filters < 2; filters++) {
		events_stats st[2];
		size_t n[2];
		char *out[2];

		for (int k = 0; k < 2; k++) {
			t[k]->fn_include = filters ? include_re : NULL;
			t[k]->fn_exclude = filters ? exclude_re : NULL;
			out[k] = write_json(t[k], &n[k], &st[k]);
		}
		if (n[0] != n[1] || memcmp(out[0], out[1], n[0]) != 0) {
			size_t at = 0;

			while (at < n[0] && at < n[1] && out[0][at] == out[1][at])
				at++;
			fprintf(stderr,
				"test_records: %s%s: the fast path's trace differs at byte %zu\n",
				what, filters ? ", filtered" : "", at);
			CHECK(false);
		}
		/* Cuts inside a record's type or array header leave a chunk
		 * that one encoding still reads whole: at least the others
		 * count. */
		CHECK_UINT(st[0].corrupt_chunks, ==, st[1].corrupt_chunks);
		CHECK(st[0].corrupt_chunks > 0 && st[0].corrupt_chunks <= corrupt);
		CHECK(st[0].events > NRECORDS / (filters ? 8 : 4));
		check_feed(t[0], st[0].events);
		fprintf(stderr,
			"test_records: %s%s: %" PRIu64 " events, %" PRIu64
			" corrupt chunks, the same %zu bytes\n",
			what, filters ? ", filtered" : "", st[0].events, st[0].corrupt_chunks,
			n[0]);
		free(out[0]);
		free(out[1]);
	}
	model_free(t[0]);
	model_free(t[1]);
	free(e.buf[0]);
	free(e.buf[1]);
}

/* ---- templates ------------------------------------------------------ */

/* What the first slice of a tmpl was. */
typedef struct tmpl_seen {
	uint64_t tmpl; /* 0: a free slot */
	char ph;
	char *name, *cat;
	size_t name_n, cat_n;
	bool has_cat;
	int64_t pid, tid;
} tmpl_seen;

#define TMPL_SLOTS (1u << 16)

/* A sink that checks sink.h's promise of tmpl on every event it sees. */
typedef struct tmpl_sink {
	trace_sink base;
	tmpl_seen *seen; /* TMPL_SLOTS, open addressing */
	size_t nseen;
	uint64_t slices, with_tmpl;
	int bad;
} tmpl_sink;

static bool sv_same(strview a, const char *b, size_t n)
{
	return a.n == n && (n == 0 || memcmp(a.p, b, n) == 0);
}

static int tmpl_event(trace_sink *s, const sink_event *e)
{
	tmpl_sink *k = (tmpl_sink *)s;
	const jsonw_event *ev = &e->ev;
	tmpl_seen *x;
	size_t i;

	k->slices += ev->ph == 'X';
	if (e->tmpl == 0)
		return 0;
	k->with_tmpl++;
	if (e->raw.p != NULL || (ev->args.p != NULL && ev->args.n > 0) || ev->has_id ||
	    ev->scope != 0 || ev->bind_enclosing) {
		if (k->bad++ == 0)
			fprintf(stderr, "test_records: tmpl %#" PRIx64 " on a slice with more\n",
				e->tmpl);
		return 0;
	}
	i = (size_t)((e->tmpl * 0x9e3779b97f4a7c15ull) >> 48);
	while (k->seen[i].tmpl != 0 && k->seen[i].tmpl != e->tmpl)
		i = (i + 1) & (TMPL_SLOTS - 1);
	x = &k->seen[i];
	if (x->tmpl == 0) {
		MUST(++k->nseen < TMPL_SLOTS / 2);
		x->tmpl = e->tmpl;
		x->ph = ev->ph;
		x->name_n = ev->name.p != NULL ? ev->name.n : 0;
		x->cat_n = ev->cat.p != NULL ? ev->cat.n : 0;
		x->has_cat = ev->cat.p != NULL;
		x->name = malloc(x->name_n + 1);
		x->cat = malloc(x->cat_n + 1);
		MUST(x->name != NULL && x->cat != NULL);
		memcpy(x->name, ev->name.p != NULL ? ev->name.p : "", x->name_n);
		memcpy(x->cat, ev->cat.p != NULL ? ev->cat.p : "", x->cat_n);
		x->pid = ev->pid;
		x->tid = ev->tid;
		return 0;
	}
	if (x->ph != ev->ph || !sv_same(ev->name, x->name, x->name_n) ||
	    x->has_cat != (ev->cat.p != NULL) || !sv_same(ev->cat, x->cat, x->cat_n) ||
	    x->pid != ev->pid || x->tid != ev->tid) {
		if (k->bad++ == 0)
			fprintf(stderr,
				"test_records: tmpl %#" PRIx64 " is %.*s of %" PRId64 "/%" PRId64
				" and %.*s of %" PRId64 "/%" PRId64 "\n",
				e->tmpl, (int)x->name_n, x->name, x->pid, x->tid, (int)ev->name.n,
				ev->name.p, ev->pid, ev->tid);
	}
	return 0;
}

/* A sink in front of out that hides every tmpl from it. */
typedef struct strip_sink {
	trace_sink base;
	trace_sink *out;
} strip_sink;

static int strip_event(trace_sink *s, const sink_event *e)
{
	strip_sink *k = (strip_sink *)s;
	sink_event se = *e;

	se.tmpl = 0;
	return k->out->event(k->out, &se);
}

/*
 * A model of nprocs processes (pids from pid0, 2 threads each, one
 * image), each thread given random records over the same addresses, kept
 * in e (which must outlive it). The addresses are in a module of its own
 * for each process and model (tag), which names them ("libT7001.so+0x10").
 */
static model_trace *tmpl_model(char tag, int64_t pid0, size_t nprocs, enc *e, const uint64_t *addrs,
			       size_t naddrs)
{
	model_trace *t = model_new();

	MUST(t != NULL);
	t->start_ns = 1000000;
	t->end_ns = 20000000;
	for (size_t i = 0; i < nprocs; i++) {
		model_process *p = model_add_process(t, pid0 + (int64_t)i);
		model_segment *sg;

		MUST(p != NULL);
		p->start_ns = 1000000;
		p->end_ns = 15000000;
		sg = model_add_segment(t, p);
		MUST(sg != NULL);
		sg->start_ns = 1000000;
		sg->end_ns = 15000000;
		sg->exe = model_strdup(t, "/bin/calls");
		sg->instrumented = true;
		{
			char path[64];
			int n = snprintf(path, sizeof(path), "/nonexistent/lib%c%" PRId64 ".so",
					 tag, p->pid);

			MUST(model_add_module(t, sg, path, (size_t)n, 0x400000, 0x400000,
					      0x800000) == 0);
		}
		MUST(model_add_thread(t, p, p->pid) != NULL);
		MUST(model_add_thread(t, p, p->pid + 1) != NULL);
		for (int th = 0; th < 2; th++) {
			p->threads[th].end_ns = 15000000;
			for (int c = 0; c < 8; c++) {
				size_t start = e->len;

				for (int r = 0; r < 2000; r++)
					random_record(e, addrs, naddrs, 0, 0);
				MUST(model_add_chunk(t, &p->threads[th], 0, e->buf[0] + start,
						     e->len - start) == 0);
			}
		}
	}
	return t;
}

/* The JSON that the sink writes of the events of m[0] and m[1] (malloc'd,
 * *n bytes), with their tmpls or (strip) without. */
static char *tmpl_json(model_trace *const m[2], bool strip, size_t *n)
{
	int fd = memfd_create("trace", 0), err;
	trace_sink *js;
	strip_sink st = {.base = {.event = strip_event}};
	trace_sink *s;
	sink_meta meta = {.model = m[0], .processes = m[0]->nprocs + m[1]->nprocs};
	char *buf;
	off_t len;

	MUST(fd >= 0);
	js = sink_json_new(fd, -1, &err);
	MUST(js != NULL);
	st.out = js;
	s = strip ? &st.base : js;
	CHECK(js->begin(js, &meta) == 0);
	CHECK(events_emit(m[0], s) == 0);
	CHECK(events_emit(m[1], s) == 0);
	CHECK(js->end(js, &meta) == 0);
	js->free(js);
	len = lseek(fd, 0, SEEK_END);
	buf = malloc((size_t)len + 1);
	MUST(buf != NULL && pread(fd, buf, (size_t)len, 0) == len);
	close(fd);
	*n = (size_t)len;
	return buf;
}

/*
 * Two models into one sink: processes 7000-7002 and then 7001-7003 (two
 * pids in both: parts of a trace whose processes collide), every thread
 * over the same TMPL_ADDRS addresses, whose names differ by process and
 * model: more than a megabyte of slice prefixes, which the JSON sink
 * forgets (and their ids are given again) past one.
 */
#define TMPL_ADDRS 2400
static void check_tmpl(void)
{
	uint64_t addrs[TMPL_ADDRS];
	enc e = {.cap = 8 << 20};
	model_trace *m[2];
	tmpl_sink k = {.base = {.event = tmpl_event}};
	size_t n[2];
	char *out[2];

	e.buf[0] = malloc(e.cap);
	e.buf[1] = malloc(e.cap);
	MUST(e.buf[0] != NULL && e.buf[1] != NULL);
	for (size_t i = 0; i < TMPL_ADDRS; i++)
		addrs[i] = 0x401000 + 16 * i;
	m[0] = tmpl_model('A', 7000, 3, &e, addrs, TMPL_ADDRS);
	m[1] = tmpl_model('B', 7001, 3, &e, addrs, TMPL_ADDRS);
	k.seen = calloc(TMPL_SLOTS, sizeof(*k.seen));
	MUST(k.seen != NULL);
	CHECK(events_emit(m[0], &k.base) == 0);
	CHECK(events_emit(m[1], &k.base) == 0);
	CHECK_INT(k.bad, ==, 0);
	/* Nearly all slices are function calls (regions have no tmpl). */
	CHECK(k.with_tmpl > k.slices / 2);
	CHECK(k.nseen > 12 * TMPL_ADDRS / 2);
	for (int q = 0; q < 2; q++)
		out[q] = tmpl_json(m, q == 1, &n[q]);
	if (n[0] != n[1] || memcmp(out[0], out[1], n[0]) != 0) {
		size_t at = 0;

		while (at < n[0] && at < n[1] && out[0][at] == out[1][at])
			at++;
		fprintf(stderr, "test_records: the JSON with tmpls differs at byte %zu\n", at);
		CHECK(false);
	}
	fprintf(stderr,
		"test_records: tmpl: %" PRIu64 " of %" PRIu64
		" slices, %zu templates, the same %zu "
		"bytes\n",
		k.with_tmpl, k.slices, k.nseen, n[0]);
	for (size_t i = 0; i < TMPL_SLOTS; i++) {
		free(k.seen[i].name);
		free(k.seen[i].cat);
	}
	free(k.seen);
	free(out[0]);
	free(out[1]);
	model_free(m[0]);
	model_free(m[1]);
	free(e.buf[0]);
	free(e.buf[1]);
}

int main(void)
{
	/* About 3 ticks a ns; the records' times start before the first
	 * pair and end past the last. */
	static const model_clock many[] = {
		{6000000, 2000000},   {9000000, 3000000},   {9000300, 3000100},
		{15000000, 5000000},  {27000000, 9000000},  {30000000, 10000000},
		{90000000, 30000000}, {91000000, 30400000},
	};
	static const model_clock one[] = {{9000000, 3000000}};

	compare(many, sizeof(many) / sizeof(many[0]), "pairs");
	compare(one, 1, "one pair");
	compare(NULL, 0, "no pair");
	check_tmpl();
	return check_done("test_records");
}
