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
} rec_clock;

/* What an address of an image is called, and whether it is written. */
typedef struct rec_name {
	uint64_t addr;
	uint32_t seg;
	bool keep;
	const char *name;
} rec_name;

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
	/* Names made up for addresses without a symbol, freed with ctx. */
	char **made;
	size_t nmade, made_cap;
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

static int64_t ns_clamp(int64_t ns)
{
	return ns < -REC_NS_LIMIT ? -REC_NS_LIMIT : ns > REC_NS_LIMIT ? REC_NS_LIMIT : ns;
}

/* base (within the limit) plus delta ns, clamped to the limit. */
static int64_t ns_add(int64_t base, double delta)
{
	if (!(delta > -2.0 * REC_NS_LIMIT)) /* NaN too */
		delta = -2.0 * REC_NS_LIMIT;
	else if (delta > 2.0 * REC_NS_LIMIT)
		delta = 2.0 * REC_NS_LIMIT;
	return ns_clamp(base + (int64_t)delta);
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
	return 0;
}

/* CLOCK_MONOTONIC ns of a tick count. */
static int64_t clock_ns(rec_clock *c, uint64_t tsc)
{
	size_t lo = 0, hi;
	double slope;

	if (c->hint + 1 < c->n && tsc >= c->tsc[c->hint] && tsc < c->tsc[c->hint + 1])
		return ns_add(c->ns[c->hint], (double)(tsc - c->tsc[c->hint]) * c->hint_slope);
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
	c->hint = lo;
	c->hint_slope = slope;
	return ns_add(c->ns[lo], (double)(tsc - c->tsc[lo]) * slope);
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
/* The name of an address, looked up once per process. */
static const rec_name *name_of(rec_ctx *rc, const model_process *p, uint32_t seg, uint64_t addr)
{
	static rec_name fallback;
	uint64_t key = name_key(addr, seg);
	size_t pos;
	uint64_t v;
	rec_name *n;

	if (rc->cache_proc != p) {
		htab_clear(&rc->names_by_addr);
		rc->nnames = 0;
		rc->cache_proc = p;
	}
	pos = htab_start(&rc->names_by_addr, key);
	while ((v = htab_next(&rc->names_by_addr, key, &pos)) != 0) {
		n = &rc->names[v - 1];
		if (n->addr == addr && n->seg == seg)
			return n;
	}
	if (vec_grow(&rc->names, &rc->names_cap, rc->nnames + 1, sizeof(*rc->names), 512) < 0 ||
	    htab_add(&rc->names_by_addr, key, rc->nnames + 1) < 0) {
		fallback.name = symbolize(rc, p, seg, addr);
		fallback.keep = name_kept(rc, fallback.name);
		return &fallback;
	}
	n = &rc->names[rc->nnames++];
	n->addr = addr;
	n->seg = seg;
	n->name = symbolize(rc, p, seg, addr);
	n->keep = name_kept(rc, n->name);
	return n;
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

static bool cur_uint(rec_cur *c, uint64_t *v)
{
	size_t len;
	unsigned b;

	if (c->p >= c->end)
		return false;
	b = *c->p;
	if (b <= 0x7f) {
		*v = b;
		c->p++;
		return true;
	}
	/* clang-format off */
	switch (b) {
	case 0xcc: len = 1; break;
	case 0xcd: len = 2; break;
	case 0xce: len = 4; break;
	case 0xcf: len = 8; break;
	default: return false;
	}
	/* clang-format on */
	if ((size_t)(c->end - c->p) < 1 + len)
		return false;
	*v = 0;
	for (size_t i = 1; i <= len; i++)
		*v = *v << 8 | c->p[i];
	c->p += 1 + len;
	return true;
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
	strview name;  /* regions: borrowed from the chunk */
	uint64_t seq;  /* order of the begins, to close the innermost first */
	uint32_t seg;
	bool func;
} rec_open;

typedef struct rec_stack {
	rec_open *v;
	size_t n, cap;
} rec_stack;

typedef struct rec_walk {
	rec_ctx *rc;
	const model_process *p;
	int64_t pid, tid;
	int (*emit)(void *arg, const jsonw_event *ev);
	void *arg;
	/* What is open, regions [0] and functions [1] apart: they pair
	 * separately, and an end then finds its begin on top. */
	rec_stack open[2];
	uint64_t seq;
	uint64_t last_tsc;
	int err;
} rec_walk;

static void walk_emit(rec_walk *w, jsonw_event *ev)
{
	int err;

	if (w->err)
		return;
	ev->pid = w->pid;
	ev->tid = w->tid;
	err = w->emit(w->arg, ev);
	if (err < 0)
		w->err = err;
}

static void walk_close(rec_walk *w, const rec_open *o, int64_t end_ns, bool unfinished)
{
	int64_t start = clock_ns(&w->rc->clk, o->tsc);
	int64_t end = ns_clamp(end_ns); /* so that end - start fits */
	jsonw_event ev = {
		.ph = 'X',
		.ts_ns = start,
		.dur_ns = end > start ? end - start : 0,
	};

	if (unfinished)
		ev.args = strview_c("{\"unfinished\":true}");
	if (o->func) {
		const rec_name *n;

		if (w->rc->t->no_functions)
			return;
		n = name_of(w->rc, w->p, o->seg, o->addr);
		if (!n->keep)
			return;
		ev.name = strview_c(n->name);
		ev.cat = strview_c("function");
	} else {
		ev.name = o->name;
		ev.cat = strview_c("region");
	}
	walk_emit(w, &ev);
}

static int walk_push(rec_walk *w, const rec_open *o)
{
	rec_stack *st = &w->open[o->func];

	if (vec_grow(&st->v, &st->cap, st->n + 1, sizeof(*st->v), 256) < 0)
		return -ENOMEM;
	st->v[st->n] = *o;
	st->v[st->n++].seq = w->seq++;
	return 0;
}

/*
 * The innermost open entry of a kind (function or region) ends at ns.
 * Functions and regions pair separately: a region is often begun and
 * ended inside calls of their own. Entries of the other kind stay open.
 * An end without a begin (recorded before the agent's buffers existed) is
 * ignored.
 */
static void walk_end(rec_walk *w, bool func, int64_t ns)
{
	rec_stack *st = &w->open[func];

	if (st->n > 0)
		walk_close(w, &st->v[--st->n], ns, false);
}

/* Everything still open ends at ns, unfinished, innermost first. */
static void walk_close_all(rec_walk *w, int64_t ns)
{
	rec_stack *r = &w->open[0], *f = &w->open[1];

	while ((r->n > 0 || f->n > 0) && !w->err) {
		rec_stack *st = r;

		if (r->n == 0 || (f->n > 0 && f->v[f->n - 1].seq > r->v[r->n - 1].seq))
			st = f;

		walk_close(w, &st->v[--st->n], ns, true);
	}
}

/* Walks one chunk. Returns false when a record did not parse. */
static bool walk_chunk(rec_walk *w, const model_chunk *ch)
{
	rec_cur c = {ch->data, ch->data + ch->len};

	while (c.p < c.end && !w->err) {
		unsigned n;
		uint64_t type, v, dt;
		rec_open o;
		strview name;
		double value;
		char args[64];

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
		memset(&o, 0, sizeof(o));
		o.tsc = w->last_tsc;
		o.seg = ch->seg;
		switch (type) {
		case FT_EV_FUNC_ENTER:
			if (n < 3 || !cur_uint(&c, &o.addr))
				return false;
			o.func = true;
			if (walk_push(w, &o) < 0)
				w->err = -ENOMEM;
			break;
		case FT_EV_REGION_BEGIN:
			if (n < 3 || !cur_str(&c, &o.name))
				return false;
			if (walk_push(w, &o) < 0)
				w->err = -ENOMEM;
			break;
		case FT_EV_FUNC_EXIT:
		case FT_EV_REGION_END:
			walk_end(w, type == FT_EV_FUNC_EXIT, clock_ns(&w->rc->clk, o.tsc));
			break;
		case FT_EV_INSTANT: {
			jsonw_event ev = {.ph = 'i', .scope = 't', .cat = strview_c("instant")};

			if (n < 3 || !cur_str(&c, &name))
				return false;
			ev.name = name;
			ev.ts_ns = clock_ns(&w->rc->clk, o.tsc);
			ev.dur_ns = JSONW_NO_TIME;
			walk_emit(w, &ev);
			break;
		}
		case FT_EV_COUNTER: {
			jsonw_event ev = {.ph = 'C', .cat = strview_c("counter")};

			if (n < 4 || !cur_str(&c, &name) || !cur_number(&c, &value))
				return false;
			if (isfinite(value))
				snprintf(args, sizeof(args), "{\"value\":%.17g}", value);
			else
				snprintf(args, sizeof(args), "{\"value\":null}");
			ev.name = name;
			ev.ts_ns = clock_ns(&w->rc->clk, o.tsc);
			ev.dur_ns = JSONW_NO_TIME;
			ev.args = strview_c(args);
			walk_emit(w, &ev);
			break;
		}
		default:
			return false; /* a newer agent's record: its size is unknown */
		}
	}
	return true;
}

int rec_write_thread(rec_ctx *rc, const model_process *p, const model_thread *th, int64_t pid,
		     int64_t tid, int64_t end_ns, int (*emit)(void *arg, const jsonw_event *ev),
		     void *arg)
{
	rec_walk w = {.rc = rc, .p = p, .pid = pid, .tid = tid, .emit = emit, .arg = arg};
	int64_t last_ns;

	if (th->chunks == NULL)
		return 0;
	for (const model_chunk *ch = th->chunks; ch && !w.err; ch = ch->next) {
		const rec_stack *st = w.open[0].n > 0 ? &w.open[0] : &w.open[1];

		/* An exec ended the image before: what it left open ends
		 * with it. (All that is open was begun in one image: this
		 * closes it whenever the image changes.) */
		if (st->n > 0 && ch->seg != st->v[0].seg) {
			uint32_t s = st->v[0].seg;
			int64_t at = s < p->nsegs && p->segs[s].end_ns >= 0 ? p->segs[s].end_ns
				     : ch->seg < p->nsegs ? p->segs[ch->seg].start_ns
							  : -1;

			if (at < 0)
				at = clock_ns(&rc->clk, w.last_tsc);
			walk_close_all(&w, at);
		}
		if (!walk_chunk(&w, ch))
			rc->stats.corrupt_chunks++;
	}
	last_ns = clock_ns(&rc->clk, w.last_tsc);
	if (end_ns < last_ns)
		end_ns = last_ns;
	walk_close_all(&w, end_ns);
	free(w.open[0].v);
	free(w.open[1].v);
	return w.err;
}
