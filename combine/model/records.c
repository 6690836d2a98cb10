/*
 * records.c - the in-process event records of a thread (functions,
 * regions, instants, counters: include/forktrace/wire.h, enum ft_ev_type)
 * turned into trace events when a trace is written.
 *
 * The collector keeps the records as the agent encoded them (model_chunk):
 * decoding, timestamp conversion and symbol lookup happen here, once, at
 * write time, so that the collector can take tens of millions of records a
 * second while the program runs.
 *
 * Times: records carry time stamp counter ticks. The trace's clock pairs
 * (ticks, CLOCK_MONOTONIC ns read together, by the agents at each send and
 * by the collector) map them to ns: piecewise linear between pairs at
 * least 100 us apart, and the slope of the first and last pair outside.
 *
 * Begin/end records pair on per-thread stacks and are written as 'X'
 * slices when they end (children before parents, as VizTracer writes
 * them); what is still open when the thread's records end is written up
 * to the thread's end with args {"unfinished": true}.
 *
 * Records are untrusted input (a program can scribble over its buffer):
 * a record that does not parse ends the decoding of its chunk, counted in
 * rec_stats.corrupt_chunks, and never reads out of bounds.
 */
#include <errno.h>
#include <math.h>
#include <regex.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forktrace/wire.h"
#include "model.h"
#include "records.h"
#include "htab.h"
#include "symtab.h"
#include "vec.h"

/* Pairs closer than this are thinned out: their noise (tens of ns) would
 * make the slope between them meaningless. */
#define REC_MIN_PAIR_GAP_NS 100000

typedef struct rec_clock {
	uint64_t *tsc;
	int64_t *ns;
	size_t n;
	double slope; /* ns per tick, first to last pair */
	/* The interval [tsc[hint], tsc[hint + 1]) of the last conversion and
	 * its slope: a thread's records come in time order, so most
	 * conversions land in it and skip the search. */
	size_t hint;
	double hint_slope;
	/* The same interval as the fast path reads it: tsc - hint_tsc <
	 * hint_len is in it (hint_len 0: no interval), ns at its start. */
	uint64_t hint_tsc, hint_len;
	int64_t hint_ns;
	/* Both ends of the interval are within half the limit: a time in it
	 * is its start plus delta, which no clamp of ns_add changes. */
	bool hint_safe;
	/* Past the last pair (a process that outlived the last one): its
	 * ns and the overall slope; tail_n 0 when there is no pair. */
	uint64_t tail_tsc;
	int64_t tail_ns;
	size_t tail_n;
	bool tail_safe; /* tail_ns within half the limit */
} rec_clock;

/* What an address of an image is called, and whether it is written;
 * idx: its place in the process's names plus one (0: a name made outside
 * them), which with the walk's number makes its slices' tmpl. */
typedef struct rec_name {
	uint64_t addr;
	uint32_t seg;
	uint32_t idx;
	bool keep;
	strview name;
} rec_name;

/* Entries of the direct-mapped cache in front of names_by_addr, each a
 * copy of a name (an empty slot has name.p NULL): a program's calls come
 * from a few hot functions, and a slot compare is cheaper than the
 * table's probe and the load from names after it. */
#define REC_NAME_CACHE_BITS 8

struct rec_ctx {
	const model_trace *t;
	rec_clock clk;
	symtab *syms;
	regex_t *include, *exclude;
	size_t ninclude, nexclude;
	/* Per-process cache of named addresses. */
	const model_process *cache_proc;
	rec_name *names;
	size_t nnames, names_cap;
	htab names_by_addr; /* name_key -> index + 1 in names */
	rec_name name_cache[1 << REC_NAME_CACHE_BITS];
	/* Names made up for addresses without a symbol, freed with ctx. */
	char **made;
	size_t nmade, made_cap;
	/* The bytes of a chunk read back from the model's spill file. */
	model_chunk_buf chunk_buf;
	rec_stats stats;
};

static int clock_cmp(const void *a, const void *b)
{
	const model_clock *x = a, *y = b;

	return x->tsc < y->tsc ? -1 : x->tsc > y->tsc;
}

/* Times made from records stay within +-REC_NS_LIMIT (73 years), so that
 * the difference of two of them fits in an int64_t whatever ticks and
 * clock pairs a program sent. */
#define REC_NS_LIMIT ((int64_t)1 << 61)

static inline int64_t ns_clamp(int64_t ns)
{
	return ns < -REC_NS_LIMIT ? -REC_NS_LIMIT : ns > REC_NS_LIMIT ? REC_NS_LIMIT : ns;
}

/* base (within the limit) plus delta ns, clamped to the limit. */
static inline int64_t ns_add(int64_t base, double delta)
{
	if (!(delta > -2.0 * REC_NS_LIMIT)) /* NaN too */
		delta = -2.0 * REC_NS_LIMIT;
	else if (delta > 2.0 * REC_NS_LIMIT)
		delta = 2.0 * REC_NS_LIMIT;
	return ns_clamp(base + (int64_t)delta);
}

/* Is ns within half the limit? Then adding a delta of less than half
 * (a time between two pairs, or less than that past the last) never
 * reaches it. */
static bool ns_half(int64_t ns)
{
	return ns >= -REC_NS_LIMIT / 2 && ns <= REC_NS_LIMIT / 2;
}

/* The interval [tsc[i], tsc[i + 1]) and its slope become the hint: the
 * next conversions most likely land in it. */
static void clock_hint_set(rec_clock *c, size_t i, double slope)
{
	c->hint = i;
	c->hint_slope = slope;
	c->hint_len = 0;
	if (i + 1 < c->n) {
		c->hint_tsc = c->tsc[i];
		c->hint_len = c->tsc[i + 1] - c->tsc[i];
		c->hint_ns = c->ns[i];
		c->hint_safe = ns_half(c->ns[i]) && ns_half(c->ns[i + 1]);
	}
}

static int clock_build(rec_clock *c, const model_trace *t)
{
	model_clock *v;
	size_t n = 0;

	memset(c, 0, sizeof(*c));
	c->slope = 1.0;
	if (t->nclocks == 0)
		return 0;
	v = malloc(t->nclocks * sizeof(*v));
	c->tsc = malloc(t->nclocks * sizeof(*c->tsc));
	c->ns = malloc(t->nclocks * sizeof(*c->ns));
	if (!v || !c->tsc || !c->ns) {
		free(v);
		return -ENOMEM;
	}
	memcpy(v, t->clocks, t->nclocks * sizeof(*v));
	qsort(v, t->nclocks, sizeof(*v), clock_cmp);
	for (size_t i = 0; i < t->nclocks; i++) {
		int64_t ns = ns_clamp(v[i].ns);

		/* A pair that does not move both clocks forward from the one
		 * before was not read together (or a program made it up). */
		if (n > 0 && (v[i].tsc == c->tsc[n - 1] || ns <= c->ns[n - 1]))
			continue;
		if (n > 0 && ns - c->ns[n - 1] < REC_MIN_PAIR_GAP_NS) {
			if (i + 1 < t->nclocks)
				continue;
			/* The last pair replaces a close predecessor: the
			 * ends matter most for the overall slope. */
			if (n > 1)
				n--;
		}
		c->tsc[n] = v[i].tsc;
		c->ns[n] = ns;
		n++;
	}
	free(v);
	c->n = n;
	/* Both clocks increase strictly from pair to pair now. */
	if (n >= 2)
		c->slope = (double)(c->ns[n - 1] - c->ns[0]) / (double)(c->tsc[n - 1] - c->tsc[0]);
	/* The first interval, with its own slope: a hint without one would
	 * put every tick count of that interval converted before the first
	 * search at the interval's start (a spill file's first records all at
	 * one time, each 0 long). */
	clock_hint_set(c, 0,
		       n >= 2 ? (double)(c->ns[1] - c->ns[0]) / (double)(c->tsc[1] - c->tsc[0])
			      : 0.0);
	c->tail_n = n;
	if (n > 0) {
		c->tail_tsc = c->tsc[n - 1];
		c->tail_ns = c->ns[n - 1];
		c->tail_safe = ns_half(c->tail_ns);
	}
	return 0;
}

/* CLOCK_MONOTONIC ns of a tick count outside the hint's interval: the
 * ends' slopes, or the interval that holds it (then the hint). */
static int64_t clock_ns_search(rec_clock *c, uint64_t tsc)
{
	size_t lo = 0, hi;
	double slope;

	if (c->n == 0)
		return ns_clamp(tsc > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)tsc);
	if (tsc <= c->tsc[0])
		return ns_add(c->ns[0], -((double)(c->tsc[0] - tsc) * c->slope));
	if (tsc >= c->tsc[c->n - 1])
		return ns_add(c->ns[c->n - 1], (double)(tsc - c->tsc[c->n - 1]) * c->slope);
	hi = c->n - 1;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (c->tsc[mid] <= tsc)
			lo = mid;
		else
			hi = mid;
	}
	slope = (double)(c->ns[hi] - c->ns[lo]) / (double)(c->tsc[hi] - c->tsc[lo]);
	clock_hint_set(c, lo, slope);
	return ns_add(c->ns[lo], (double)(tsc - c->tsc[lo]) * slope);
}

/*
 * CLOCK_MONOTONIC ns of a tick count. Inline, with the hint's interval
 * (and the time after the last pair) as one compare and a multiply-add:
 * every function record is converted.
 */
static inline int64_t clock_ns(rec_clock *c, uint64_t tsc)
{
	double delta;

	if (tsc - c->hint_tsc < c->hint_len) {
		/* Less than the interval's span (both clocks increase from
		 * pair to pair), rounding aside. */
		delta = (double)(tsc - c->hint_tsc) * c->hint_slope;
		return c->hint_safe ? c->hint_ns + (int64_t)delta : ns_add(c->hint_ns, delta);
	}
	/* What clock_ns_search does past the last pair, which leaves the
	 * hint as it is. */
	if (tsc >= c->tail_tsc && c->tail_n > 0) {
		delta = (double)(tsc - c->tail_tsc) * c->slope;
		if (c->tail_safe && delta < (double)(REC_NS_LIMIT / 2))
			return c->tail_ns + (int64_t)delta;
		return ns_add(c->tail_ns, delta);
	}
	return clock_ns_search(c, tsc);
}

static void regexes_free(regex_t *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		regfree(&r[i]);
	free(r);
}

static int regexes_build(const char *const *src, regex_t **out, size_t *nout)
{
	size_t n = 0;

	*out = NULL;
	*nout = 0;
	while (src && src[n])
		n++;
	if (n == 0)
		return 0;
	*out = calloc(n, sizeof(**out));
	if (*out == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (regcomp(&(*out)[i], src[i], REG_EXTENDED | REG_NOSUB) != 0) {
			regexes_free(*out, i);
			*out = NULL;
			return -EINVAL;
		}
	}
	*nout = n;
	return 0;
}

rec_ctx *rec_ctx_new(const model_trace *t, int *err)
{
	rec_ctx *rc = calloc(1, sizeof(*rc));

	*err = -ENOMEM;
	if (rc == NULL)
		return NULL;
	rc->t = t;
	rc->names_by_addr.first = 1024;
	if ((*err = clock_build(&rc->clk, t)) < 0 ||
	    (*err = regexes_build(t->fn_include, &rc->include, &rc->ninclude)) < 0 ||
	    (*err = regexes_build(t->fn_exclude, &rc->exclude, &rc->nexclude)) < 0)
		goto fail;
	rc->syms = symtab_new();
	if (rc->syms == NULL) {
		*err = -ENOMEM;
		goto fail;
	}
	*err = 0;
	return rc;
fail:
	rec_ctx_free(rc);
	return NULL;
}

void rec_ctx_free(rec_ctx *rc)
{
	if (rc == NULL)
		return;
	free(rc->clk.tsc);
	free(rc->clk.ns);
	regexes_free(rc->include, rc->ninclude);
	regexes_free(rc->exclude, rc->nexclude);
	symtab_free(rc->syms);
	free(rc->names);
	htab_free(&rc->names_by_addr);
	for (size_t i = 0; i < rc->nmade; i++)
		free(rc->made[i]);
	free(rc->made);
	free(rc->chunk_buf.p);
	free(rc);
}

const rec_stats *rec_ctx_stats(const rec_ctx *rc)
{
	return &rc->stats;
}

/* Does a function of this name go into the trace? */
static bool name_kept(const rec_ctx *rc, const char *name)
{
	bool keep = rc->ninclude == 0;

	for (size_t i = 0; i < rc->ninclude && !keep; i++)
		keep = regexec(&rc->include[i], name, 0, NULL, 0) == 0;
	for (size_t i = 0; i < rc->nexclude && keep; i++)
		keep = regexec(&rc->exclude[i], name, 0, NULL, 0) != 0;
	return keep;
}

static const char *made_name(rec_ctx *rc, const char *s)
{
	char *d;

	if (vec_grow(&rc->made, &rc->made_cap, rc->nmade + 1, sizeof(*rc->made), 16) < 0)
		return "?";
	d = strdup(s);
	if (d == NULL)
		return "?";
	rc->made[rc->nmade++] = d;
	return d;
}

/* Names an address of image seg: its function's name from the module
 * that holds it, else "module+0xoff", else "0xaddr". */
static const char *symbolize(rec_ctx *rc, const model_process *p, uint32_t seg, uint64_t addr)
{
	const model_segment *s = seg < p->nsegs ? &p->segs[seg] : NULL;
	const model_module *best = NULL;
	const char *name, *base;
	char buf[640];

	for (size_t i = 0; s && i < s->nmods; i++) {
		const model_module *m = &s->mods[i];

		/* The latest report wins: a library loaded where an unloaded
		 * one was. */
		if (addr >= m->lo && addr < m->hi)
			best = m;
	}
	if (best == NULL) {
		snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)addr);
		return made_name(rc, buf);
	}
	name = symtab_lookup(rc->syms, best->path, addr - best->bias);
	if (name)
		return name;
	base = strrchr(best->path, '/');
	snprintf(buf, sizeof(buf), "%.512s+0x%llx", base ? base + 1 : best->path,
		 (unsigned long long)(addr - best->bias));
	return made_name(rc, buf);
}

/* The key of an address in names_by_addr: the table spreads it. Two
 * addresses may share a key (images past 2^48), so entries are compared. */
static uint64_t name_key(uint64_t addr, uint32_t seg)
{
	return addr ^ ((uint64_t)seg << 48);
}
/* The slot of an address in the name cache. */
static rec_name *name_slot(rec_ctx *rc, uint64_t addr)
{
	return &rc->name_cache[(addr * 0x9e3779b97f4a7c15ull) >> (64 - REC_NAME_CACHE_BITS)];
}

/* The name of an address looked up in the process's table, made there
 * when it is new. */
static const rec_name *name_lookup(rec_ctx *rc, const model_process *p, uint32_t seg, uint64_t addr)
{
	static rec_name fallback;
	uint64_t key = name_key(addr, seg);
	rec_name *slot = name_slot(rc, addr);
	const char *name;
	size_t pos;
	uint64_t v;
	rec_name *n;

	pos = htab_start(&rc->names_by_addr, key);
	while ((v = htab_next(&rc->names_by_addr, key, &pos)) != 0) {
		n = &rc->names[v - 1];
		if (n->addr == addr && n->seg == seg) {
			*slot = *n;
			return n;
		}
	}
	if (vec_grow(&rc->names, &rc->names_cap, rc->nnames + 1, sizeof(*rc->names), 512) < 0 ||
	    htab_add(&rc->names_by_addr, key, rc->nnames + 1) < 0) {
		name = symbolize(rc, p, seg, addr);
		fallback.name = strview_c(name);
		fallback.keep = name_kept(rc, name);
		fallback.idx = 0;
		return &fallback;
	}
	n = &rc->names[rc->nnames++];
	n->addr = addr;
	n->seg = seg;
	n->idx = rc->nnames <= UINT32_MAX ? (uint32_t)rc->nnames : 0;
	name = symbolize(rc, p, seg, addr);
	n->name = strview_c(name);
	n->keep = name_kept(rc, name);
	*slot = *n;
	return n;
}

/* The name of an address, looked up once per process: in the cache,
 * else in the table. */
static inline const rec_name *name_of(rec_ctx *rc, const model_process *p, uint32_t seg,
				      uint64_t addr)
{
	const rec_name *slot;

	if (rc->cache_proc != p) {
		htab_clear(&rc->names_by_addr);
		memset(rc->name_cache, 0, sizeof(rc->name_cache));
		rc->nnames = 0;
		rc->cache_proc = p;
	}
	slot = name_slot(rc, addr);
	if (slot->addr == addr && slot->seg == seg && slot->name.p != NULL)
		return slot;
	return name_lookup(rc, p, seg, addr);
}

/* ---- record parsing -------------------------------------------------- */

typedef struct rec_cur {
	const unsigned char *p, *end;
} rec_cur;

static bool cur_array(rec_cur *c, unsigned *n)
{
	if (c->p >= c->end || (*c->p & 0xf0) != 0x90)
		return false;
	*n = *c->p++ & 0x0f;
	return true;
}

/*
 * An unsigned integer at p, which has at least 9 readable bytes (the
 * longest one): its value in *v and the byte after it, or NULL when p
 * holds no unsigned integer.
 */
static inline const unsigned char *uint_at(const unsigned char *p, uint64_t *v)
{
	if (*p <= 0x7f) {
		*v = *p;
		return p + 1;
	}
	switch (*p) {
	case 0xcc:
		*v = p[1];
		return p + 2;
	case 0xcd:
		*v = (uint64_t)p[1] << 8 | p[2];
		return p + 3;
	case 0xce:
		*v = (uint64_t)p[1] << 24 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 8 | p[4];
		return p + 5;
	case 0xcf:
		*v = (uint64_t)p[1] << 56 | (uint64_t)p[2] << 48 | (uint64_t)p[3] << 40 |
		     (uint64_t)p[4] << 32 | (uint64_t)p[5] << 24 | (uint64_t)p[6] << 16 |
		     (uint64_t)p[7] << 8 | p[8];
		return p + 9;
	default:
		return NULL;
	}
}

/* An unsigned integer longer than a fixint, within c. */
static bool cur_uint_long(rec_cur *c, uint64_t *v)
{
	size_t len, left = (size_t)(c->end - c->p);

	if (left == 0)
		return false;
	/* clang-format off */
	switch (*c->p) {
	case 0xcc: len = 1; break;
	case 0xcd: len = 2; break;
	case 0xce: len = 4; break;
	case 0xcf: len = 8; break;
	default: return false;
	}
	/* clang-format on */
	if (left < 1 + len)
		return false;
	*v = 0;
	for (size_t i = 1; i <= len; i++)
		*v = *v << 8 | c->p[i];
	c->p += 1 + len;
	return true;
}

/* An unsigned integer: a fixint inline, since most are. */
static inline bool cur_uint(rec_cur *c, uint64_t *v)
{
	if (c->p < c->end && *c->p <= 0x7f) {
		*v = *c->p++;
		return true;
	}
	return cur_uint_long(c, v);
}

static bool cur_str(rec_cur *c, strview *s)
{
	size_t len, hdr;
	unsigned b;

	if (c->p >= c->end)
		return false;
	b = *c->p;
	if ((b & 0xe0) == 0xa0) {
		len = b & 0x1f;
		hdr = 1;
	} else if (b == 0xd9 && c->end - c->p >= 2) {
		len = c->p[1];
		hdr = 2;
	} else if (b == 0xda && c->end - c->p >= 3) {
		len = (size_t)c->p[1] << 8 | c->p[2];
		hdr = 3;
	} else {
		return false;
	}
	if ((size_t)(c->end - c->p) < hdr + len)
		return false;
	s->p = (const char *)c->p + hdr;
	s->n = len;
	c->p += hdr + len;
	return true;
}

/* A counter value: float64, float32 or an integer. */
static bool cur_number(rec_cur *c, double *v)
{
	uint64_t u;

	if (c->p >= c->end)
		return false;
	if (*c->p == 0xcb && c->end - c->p >= 9) {
		u = 0;
		for (int i = 1; i <= 8; i++)
			u = u << 8 | c->p[i];
		memcpy(v, &u, 8);
		c->p += 9;
		return true;
	}
	if (*c->p == 0xca && c->end - c->p >= 5) {
		uint32_t w = (uint32_t)c->p[1] << 24 | (uint32_t)c->p[2] << 16 |
			     (uint32_t)c->p[3] << 8 | c->p[4];
		float f;

		memcpy(&f, &w, 4);
		*v = f;
		c->p += 5;
		return true;
	}
	if ((*c->p & 0xe0) == 0xe0) {
		*v = (int8_t)*c->p++;
		return true;
	}
	if (!cur_uint(c, &u))
		return false;
	*v = (double)u;
	return true;
}

/* ---- the per-thread walk --------------------------------------------- */

typedef struct rec_open {
	uint64_t tsc;
	uint64_t addr; /* functions */
	strview name;  /* regions: borrowed from the chunk, or owned (name_owned) */
	uint64_t seq;  /* order of the begins, to close the innermost first */
	uint32_t seg;
	bool func;
	bool name_owned; /* name is a copy, freed when the region closes */
} rec_open;

typedef struct rec_stack {
	rec_open *v;
	size_t n, cap;
} rec_stack;

typedef struct rec_walk {
	rec_ctx *rc;
	const model_process *p;
	trace_sink *out;
	const model_clock_map *clock;
	/* The slices of functions and of regions as they go to the sink:
	 * what every one of the thread's has (ph, cat, pid, tid) filled once.
	 * Apart from the walk (rec_write_thread's), so that the walk's
	 * address never goes to the sink and its fields can stay in
	 * registers across the call. */
	sink_event *slice;
	/* The tmpl of a function slice is this or'ed with its name's idx
	 * (rec_walk_tmpl_base); 0: none. */
	uint64_t tmpl_base;
	bool no_functions;
	/* What is open, regions [0] and functions [1] apart: they pair
	 * separately, and an end then finds its begin on top. */
	rec_open *open_v[2];
	size_t open_n[2], open_cap[2];
	uint64_t seq;
	uint64_t last_tsc;
	int err;
} rec_walk;

/* An event to the sink; e's pid and tid are the walk's already, its times
 * go onto the trace's clock here (both ends of a slice, so that a drift
 * stretches it as it stretched the clock). */
static inline void walk_emit(rec_walk *w, sink_event *e)
{
	jsonw_event *ev = &e->ev;
	int err;

	if (w->err)
		return;
	if (w->clock != NULL && ev->ts_ns != JSONW_NO_TIME) {
		int64_t ts = ev->ts_ns;

		ev->ts_ns = model_clock_apply(w->clock, ts);
		if (ev->dur_ns != JSONW_NO_TIME && ev->dur_ns > 0)
			ev->dur_ns = model_clock_apply(w->clock, ts + ev->dur_ns) - ev->ts_ns;
	}
	err = w->out->event(w->out, e);
	if (err < 0)
		w->err = err;
}

/* o ends at end (within +-REC_NS_LIMIT, as clock_ns's are, so that end
 * - start fits). */
static inline void walk_close(rec_walk *w, const rec_open *o, int64_t end, bool unfinished)
{
	int64_t start = clock_ns(&w->rc->clk, o->tsc);
	sink_event *e = &w->slice[o->func];

	if (o->func) {
		const rec_name *n;

		if (w->no_functions)
			return;
		n = name_of(w->rc, w->p, o->seg, o->addr);
		if (!n->keep)
			return;
		e->ev.name = n->name;
		e->tmpl = w->tmpl_base != 0 && n->idx != 0 && !unfinished ? w->tmpl_base | n->idx
									  : 0;
	} else {
		e->ev.name = o->name;
	}
	e->ev.ts_ns = start;
	e->ev.dur_ns = end > start ? end - start : 0;
	e->ev.args = unfinished ? strview_c("{\"unfinished\":true}") : (strview){NULL, 0};
	walk_emit(w, e);
	if (o->name_owned)
		free((char *)o->name.p);
}

/* A begin on the stack of its kind. */
static inline int walk_push(rec_walk *w, bool func, uint64_t tsc, uint32_t seg, uint64_t addr,
			    strview name)
{
	rec_open *o;

	if (w->open_n[func] == w->open_cap[func]) {
		/* Grown through copies, for the same reason as slice. */
		rec_open *v = w->open_v[func];
		size_t cap = w->open_cap[func];

		if (vec_grow(&v, &cap, w->open_n[func] + 1, sizeof(*v), 256) < 0)
			return -ENOMEM;
		w->open_v[func] = v;
		w->open_cap[func] = cap;
	}
	o = &w->open_v[func][w->open_n[func]++];
	o->tsc = tsc;
	o->addr = addr;
	o->name = name;
	o->seq = w->seq++;
	o->seg = seg;
	o->func = func;
	o->name_owned = false;
	return 0;
}

/*
 * The innermost open entry of a kind (function or region) ends at ns.
 * Functions and regions pair separately: a region is often begun and
 * ended inside calls of their own. Entries of the other kind stay open.
 * An end without a begin (recorded before the agent's buffers existed) is
 * ignored.
 */
static inline void walk_end(rec_walk *w, bool func, int64_t ns)
{
	if (w->open_n[func] > 0)
		walk_close(w, &w->open_v[func][--w->open_n[func]], ns, false);
}

/* Everything still open ends at ns, unfinished, innermost first. */
static void walk_close_all(rec_walk *w, int64_t ns)
{
	ns = ns_clamp(ns);
	while ((w->open_n[0] > 0 || w->open_n[1] > 0) && !w->err) {
		bool func = w->open_n[0] == 0 ||
			    (w->open_n[1] > 0 && w->open_v[1][w->open_n[1] - 1].seq >
							 w->open_v[0][w->open_n[0] - 1].seq);

		walk_close(w, &w->open_v[func][--w->open_n[func]], ns, true);
	}
}

/* An instant or counter record's event at tick count tsc. */
static void walk_point(rec_walk *w, char ph, strview name, uint64_t tsc, strview args)
{
	sink_event e = {
		.ev =
			{
				.ph = ph,
				.scope = ph == 'i' ? 't' : 0,
				.cat = ph == 'i' ? strview_c("instant") : strview_c("counter"),
				.name = name,
				.pid = w->slice[0].ev.pid,
				.tid = w->slice[0].ev.tid,
				.ts_ns = clock_ns(&w->rc->clk, tsc),
				.dur_ns = JSONW_NO_TIME,
				.args = args,
			},
	};

	walk_emit(w, &e);
}

/* The longest function record: a fixarray, the type, two uint64. */
#define REC_FUNC_MAX 20

/*
 * The regions still open whose names point into bytes[0..len), about to
 * be reused for the next chunk read back from the spill file, get copies
 * of their names. Returns 0 or -ENOMEM.
 */
static int walk_keep_names(rec_walk *w, const unsigned char *bytes, size_t len)
{
	for (size_t i = 0; i < w->open_n[0]; i++) {
		rec_open *o = &w->open_v[0][i];
		const unsigned char *p = (const unsigned char *)o->name.p;
		char *copy;

		if (o->name_owned || p < bytes || p >= bytes + len)
			continue;
		copy = malloc(o->name.n ? o->name.n : 1);
		if (copy == NULL)
			return -ENOMEM;
		memcpy(copy, o->name.p, o->name.n);
		o->name.p = copy;
		o->name_owned = true;
	}
	return 0;
}

/* Frees the names the regions still open own (after an error stopped the
 * walk before it closed them). */
static void walk_free_names(rec_walk *w)
{
	for (size_t i = 0; i < w->open_n[0]; i++)
		if (w->open_v[0][i].name_owned)
			free((char *)w->open_v[0][i].name.p);
}

/* Walks the records of one chunk, its len bytes. Returns false when a
 * record did not parse. */
static bool walk_chunk(rec_walk *w, const model_chunk *ch, const unsigned char *bytes)
{
	rec_cur c = {bytes, bytes + ch->len};

	while (c.p < c.end && !w->err) {
		unsigned n;
		uint64_t type, v, dt, addr;
		strview name;
		double value;
		char args[64];

		/* Function exits and entries as the agent writes them (a
		 * fixarray of 2 or 3, the type a fixint): nearly every record
		 * of a program built with -finstrument-functions, parsed
		 * without a bounds check each while the longest one fits. Any
		 * other shape of them, and the last bytes of a chunk, take the
		 * general path below, to the same effect. */
		if (c.end - c.p >= REC_FUNC_MAX) {
			const unsigned char *q = c.p;

			if (q[0] == 0x92 && q[1] == FT_EV_FUNC_EXIT) {
				q = uint_at(q + 2, &dt);
				if (q == NULL)
					return false;
				c.p = q;
				w->last_tsc += dt;
				walk_end(w, true, clock_ns(&w->rc->clk, w->last_tsc));
				continue;
			}
			if (q[0] == 0x93 && q[1] == FT_EV_FUNC_ENTER) {
				q = uint_at(q + 2, &dt);
				if (q == NULL)
					return false;
				w->last_tsc += dt;
				q = uint_at(q, &addr);
				if (q == NULL)
					return false;
				c.p = q;
				if (walk_push(w, true, w->last_tsc, ch->seg, addr,
					      (strview){NULL, 0}) < 0)
					w->err = -ENOMEM;
				continue;
			}
		}
		if (!cur_array(&c, &n) || n < 2 || !cur_uint(&c, &type))
			return false;
		if (type == FT_EV_TIME || type == FT_EV_CLOCK) {
			if (!cur_uint(&c, &v))
				return false;
			w->last_tsc = v;
			if (type == FT_EV_CLOCK && (n < 3 || !cur_uint(&c, &v)))
				return false;
			continue;
		}
		if (!cur_uint(&c, &dt))
			return false;
		w->last_tsc += dt;
		switch (type) {
		case FT_EV_FUNC_ENTER:
			if (n < 3 || !cur_uint(&c, &addr))
				return false;
			if (walk_push(w, true, w->last_tsc, ch->seg, addr, (strview){NULL, 0}) < 0)
				w->err = -ENOMEM;
			break;
		case FT_EV_REGION_BEGIN:
			if (n < 3 || !cur_str(&c, &name))
				return false;
			if (walk_push(w, false, w->last_tsc, ch->seg, 0, name) < 0)
				w->err = -ENOMEM;
			break;
		case FT_EV_FUNC_EXIT:
		case FT_EV_REGION_END:
			walk_end(w, type == FT_EV_FUNC_EXIT, clock_ns(&w->rc->clk, w->last_tsc));
			break;
		case FT_EV_INSTANT:
			if (n < 3 || !cur_str(&c, &name))
				return false;
			walk_point(w, 'i', name, w->last_tsc, (strview){NULL, 0});
			break;
		case FT_EV_COUNTER:
			if (n < 4 || !cur_str(&c, &name) || !cur_number(&c, &value))
				return false;
			if (isfinite(value))
				snprintf(args, sizeof(args), "{\"value\":%.17g}", value);
			else
				snprintf(args, sizeof(args), "{\"value\":null}");
			walk_point(w, 'C', name, w->last_tsc, strview_c(args));
			break;
		default:
			return false; /* a newer agent's record: its size is unknown */
		}
	}
	return true;
}

/*
 * Every walk of a thread in this process gets its own number: the high
 * half of its function slices' tmpl (sink.h), whose low half is the
 * name's idx. A name's idx is its place in the names of one process, which
 * the walk never leaves, and the walk's pid and tid are fixed: so equal
 * tmpls are slices of one walk and one name. The numbers are never
 * reused while the process lives, so no two walks (of other threads,
 * processes, models or rec_ctx) that reach one sink share one; past 2^32
 * walks, slices go without one.
 */
static uint64_t rec_walk_tmpl_base(void)
{
	static _Atomic uint64_t walks;
	uint64_t n = atomic_fetch_add_explicit(&walks, 1, memory_order_relaxed) + 1;

	return n <= UINT32_MAX ? n << 32 : 0;
}

int rec_write_thread(rec_ctx *rc, const model_process *p, const model_thread *th, int64_t pid,
		     int64_t tid, int64_t end_ns, trace_sink *out, const model_clock_map *clock)
{
	sink_event slice[2];
	rec_walk w = {.rc = rc,
		      .p = p,
		      .out = out,
		      .clock = clock,
		      .slice = slice,
		      .tmpl_base = rec_walk_tmpl_base(),
		      .no_functions = rc->t->no_functions};
	const unsigned char *bytes;
	int64_t last_ns;

	if (th->chunks == NULL)
		return 0;
	memset(slice, 0, sizeof(slice));
	for (int k = 0; k < 2; k++)
		slice[k].ev = (jsonw_event){
			.ph = 'X',
			.cat = k ? strview_c("function") : strview_c("region"),
			.pid = pid,
			.tid = tid,
		};
	for (const model_chunk *ch = th->chunks; ch && !w.err; ch = ch->next) {
		int k = w.open_n[0] > 0 ? 0 : 1;

		/* An exec ended the image before: what it left open ends
		 * with it. (All that is open was begun in one image: this
		 * closes it whenever the image changes.) */
		if (w.open_n[k] > 0 && ch->seg != w.open_v[k][0].seg) {
			uint32_t s = w.open_v[k][0].seg;
			int64_t at = s < p->nsegs && p->segs[s].end_ns >= 0 ? p->segs[s].end_ns
				     : ch->seg < p->nsegs ? p->segs[ch->seg].start_ns
							  : -1;

			if (at < 0)
				at = clock_ns(&rc->clk, w.last_tsc);
			walk_close_all(&w, at);
		}
		bytes = model_chunk_bytes(rc->t, ch, &rc->chunk_buf);
		if (bytes == NULL) {
			w.err = -errno;
			break;
		}
		if (!walk_chunk(&w, ch, bytes))
			rc->stats.corrupt_chunks++;
		/* Bytes read back from the spill file go when the next chunk
		 * is read: the names of regions left open must outlive them. */
		if (ch->data == NULL && w.err == 0)
			w.err = walk_keep_names(&w, bytes, ch->len);
	}
	last_ns = clock_ns(&rc->clk, w.last_tsc);
	if (end_ns < last_ns)
		end_ns = last_ns;
	walk_close_all(&w, end_ns);
	walk_free_names(&w);
	free(w.open_v[0]);
	free(w.open_v[1]);
	return w.err;
}
