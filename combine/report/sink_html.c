/*
 * sink_html.c - the HTML report (htmlw_): one self-contained page that
 * shows what a process tree did.
 *
 * The sink aggregates while the events stream by and writes everything at
 * `end`: memory grows with processes, threads and distinct names, never
 * with events. Per process it keeps the span, program, argv, cwd, exit,
 * parent, images, threads and a bounded number of marks; per (process,
 * name) the call statistics, with self time from a small nesting stack per
 * thread; per thread the HTMLW_THREAD_SLICES longest slices (a min-heap);
 * per counter series a bounded, max-preserving down-sampling.
 *
 * The page is the template in combine/report/ (HTML, CSS and JS, embedded
 * into the binary at build time as report_assets.c) with the data as one
 * JSON text inside <script type="application/json">, written with the
 * JSON writer (jsonw.h). Every string of the trace lives in that JSON's
 * string table, written by jsonw_script_str with '<', '>' and '&'
 * escaped as \u003c and friends, so no trace text can close the script
 * element; the page puts strings into the DOM with textContent only.
 */
#include <errno.h>
#include <jansson.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "critpath.h"
#include "htab.h"
#include "report_assets.h"
#include "sink.h"
#include "vec.h"

/* Slices kept per thread while streaming (the longest ones). */
#define HTMLW_THREAD_SLICES 512
/* Slices embedded in the page over all threads: threads with fewer keep
 * all of theirs (short-lived processes in full), the others are cut to a
 * common cap that makes the total fit. */
#define HTMLW_SLICE_BUDGET 120000
/* Marks (instants) kept per process. */
#define HTMLW_PROC_MARKS 200
/* Points kept per counter series. */
#define HTMLW_COUNTER_POINTS 1024
/* Per-process statistics rows embedded per process (by total time). */
#define HTMLW_PROC_STATS 40
/* Depth of the nesting stacks used for self time. */
#define HTMLW_STACK 128
/* The figures of a process's "rusage" (docs/INSIGHT.md), in this order. */
#define HTMLW_RUSAGE_N 9
static const char *const htmlw_rusage_keys[HTMLW_RUSAGE_N] = {"user_ns", "sys_ns",  "maxrss_kb",
							      "minflt",  "majflt",  "nvcsw",
							      "nivcsw",  "inblock", "oublock"};

/* ---- small containers ---------------------------------------------------- */

/* Index maps (an htab from a key to index + 1 in an array): the index
 * of key, or UINT32_MAX. */
static uint32_t index_get(const htab *m, uint64_t key)
{
	uint64_t v = htab_get(m, key);

	return v != 0 ? (uint32_t)(v - 1) : UINT32_MAX;
}

static int index_put(htab *m, uint64_t key, uint32_t i)
{
	return htab_add(m, key, (uint64_t)i + 1);
}

/* The key of two 32-bit numbers (a process's index and a name's id). */
static uint64_t pair_key(uint32_t a, uint32_t b)
{
	return (uint64_t)a << 32 | b;
}

/* The key of a thread in tmap: a thread is not told by its key alone
 * (tids are 64-bit), so the threads under one key are compared. */
static uint64_t thread_key(uint32_t proc, int64_t tid)
{
	return (uint64_t)proc * 0x9e3779b97f4a7c15ull ^ (uint64_t)tid;
}

/* Interned strings: id 0 is the empty string (also "none"). */
typedef struct strtab {
	char *buf;
	size_t len, cap;
	uint32_t *off, *slen; /* per id */
	size_t n, ncap;
	htab ids; /* htab_hash_bytes -> id + 1 */
} strtab;

/* The id of the n bytes at s, adding them if new; UINT32_MAX on ENOMEM. */
static uint32_t strtab_id(strtab *t, const char *s, size_t n)
{
	uint64_t h, v;
	size_t pos;

	if (s == NULL || n == 0)
		return 0;
	if (n > UINT32_MAX / 2)
		n = UINT32_MAX / 2;
	h = htab_hash_bytes(s, n);
	pos = htab_start(&t->ids, h);
	while ((v = htab_next(&t->ids, h, &pos)) != 0) {
		uint32_t id = (uint32_t)v - 1;

		if (t->slen[id] == n && memcmp(t->buf + t->off[id], s, n) == 0)
			return id;
	}
	if (htab_reserve(&t->ids) < 0 || vec_grow(&t->buf, &t->cap, t->len + n, 1, 8) < 0 ||
	    vec_grow(&t->off, &t->ncap, t->n + 1, sizeof(*t->off), 8) < 0)
		return UINT32_MAX;
	/* off and slen share ncap: grow slen to the same size. */
	{
		uint32_t *q = realloc(t->slen, t->ncap * sizeof(*q));

		if (q == NULL)
			return UINT32_MAX;
		t->slen = q;
	}
	memcpy(t->buf + t->len, s, n);
	t->off[t->n] = (uint32_t)t->len;
	t->slen[t->n] = (uint32_t)n;
	t->len += n;
	htab_add(&t->ids, h, t->n + 1); /* reserved above */
	return (uint32_t)t->n++;
}

static void strtab_free(strtab *t)
{
	free(t->buf);
	free(t->off);
	free(t->slen);
	htab_free(&t->ids);
}

/* ---- the aggregate -------------------------------------------------------- */

typedef struct hw_slice {
	int64_t ts, dur;
	uint32_t name;
} hw_slice;

/* An entry of the nesting stack: an interval whose self time is still
 * open, or (merged) a run of finished intervals a later parent may hold. */
typedef struct hw_open {
	int64_t s, e;
	int64_t child; /* time of direct children seen so far */
	int64_t sub;   /* what a parent subtracts for it */
	/* The latest end of this interval and those below it on the stack,
	 * or more (an entry dropped from the bottom may still count): no
	 * interval from here down can contain one that ends later. */
	int64_t max_e;
	uint32_t name;
	bool done; /* its self time was recorded already */
} hw_open;

typedef struct hw_bopen {
	int64_t s;
	uint32_t name;
} hw_bopen;

enum { ORDER_UNKNOWN, ORDER_PRE, ORDER_POST };

typedef struct hw_thread {
	int64_t tid;
	uint32_t name;
	uint32_t proc; /* its process's index */
	int64_t sort;
	hw_open xs[HTMLW_STACK];
	unsigned nx;
	hw_bopen *bs;
	size_t nb, bcap;
	int order;
	hw_slice *heap; /* min-heap by dur */
	size_t nheap, heapcap;
	uint64_t nslices;
} hw_thread;

typedef struct hw_seg {
	int64_t s, e;
	uint32_t name;
	bool inst;
	int64_t image;
} hw_seg;

typedef struct hw_mark {
	int64_t tid, ts, dur;
	uint32_t name, cat;
} hw_mark;

typedef struct hw_proc {
	int64_t pid, hpid, ppid, parent_pid;
	uint32_t name, label, exe, cwd, spawn, signame;
	uint32_t host; /* forktrace_process.host; 0: the trace's */
	int64_t rank;  /* -1: none */
	int64_t local_rank;
	/* forktrace_process "interpreter" (a script's: "perl" for
	 * dh_installman) and "launcher" (who set the rank): 0 when none. */
	uint32_t interp, launcher;
	/* forktrace_process "rusage": its source (0: none, no figures) and
	 * the figures in model_rusage's order, -1 where unknown. */
	uint32_t ru_source;
	int64_t ru[HTMLW_RUSAGE_N];
	uint32_t *argv;
	size_t argc;
	bool has_record, inst;
	int64_t start, end, ev_min, ev_max;
	int exit_kind; /* enum model_exit_kind */
	int64_t exit_val;
	uint64_t lost, events, marks_dropped;
	int64_t sort;
	int64_t spawn_ts, spawn_tid;
	hw_seg *segs;
	size_t nsegs, segcap;
	uint32_t *threads; /* indices into the sink's threads */
	size_t nthreads, thcap;
	hw_mark *marks;
	size_t nmarks, markcap;
	/* set at end */
	bool keep;
	bool prog_match;
	uint32_t out_idx;
} hw_proc;

typedef struct hw_stat {
	uint32_t proc, name;
	uint64_t calls;
	int64_t total, self, max;
} hw_stat;

typedef struct hw_series {
	uint32_t proc, name;
	int64_t *pts; /* ts, value-bits pairs */
	size_t n;
	unsigned stride, acc; /* points merged into the one being built */
	double cur;
	int64_t cur_ts;
} hw_series;

typedef struct hw_flow {
	uint64_t id;
	int64_t pid, tid, ts;
} hw_flow;

typedef struct html_sink {
	trace_sink base;
	int fd;
	/* filters */
	regex_t *inc, *exc;
	size_t ninc, nexc;
	int64_t *ranges; /* lo, hi pairs */
	size_t nranges;
	char *opt_text[4];
	char **hosts; /* --hosts: the host names to keep (NULL: all) */
	size_t nhosts;
	/* aggregate */
	strtab st;
	hw_proc *procs;
	size_t nprocs, proccap;
	htab pmap; /* pid -> proc (index_get) */
	hw_thread *threads;
	size_t nthreads, thcap;
	htab tmap; /* thread_key -> thread index + 1 */
	hw_stat *stats;
	size_t nstats, statcap;
	htab smap; /* pair_key(proc, name) -> stat (index_get) */
	hw_series *series;
	size_t nseries, sercap;
	htab cmap; /* pair_key(proc, name) -> series (index_get) */
	hw_flow *fs, *ff;
	size_t nfs, fscap, nff, ffcap;
	uint64_t events;
	int64_t tmin, tmax;
	uint32_t last_proc;
	int64_t last_pid;
	int8_t *name_pass; /* per string id: name_flags */
	size_t name_pass_cap;
	int err;
} html_sink;

/* ---- options -------------------------------------------------------------- */

/* Parses "0-3,7,10-" into inclusive ranges. */
static int parse_ranges(const char *s, int64_t **out, size_t *n)
{
	size_t cap = 0;

	*out = NULL;
	*n = 0;
	while (*s != '\0') {
		char *end;
		long long lo = 0, hi = INT64_MAX;

		if (*s != '-') {
			errno = 0;
			lo = strtoll(s, &end, 10);
			if (errno != 0 || end == s || lo < 0)
				return -EINVAL;
			s = end;
			hi = lo;
		}
		if (*s == '-') {
			s++;
			hi = INT64_MAX;
			if (*s >= '0' && *s <= '9') {
				errno = 0;
				hi = strtoll(s, &end, 10);
				if (errno != 0 || end == s)
					return -EINVAL;
				s = end;
			}
		}
		if (hi < lo)
			return -EINVAL;
		if (vec_grow(out, &cap, *n * 2 + 2, sizeof(**out), 8) < 0)
			return -ENOMEM;
		(*out)[(*n) * 2] = lo;
		(*out)[(*n) * 2 + 1] = hi;
		(*n)++;
		if (*s == ',')
			s++;
		else if (*s != '\0')
			return -EINVAL;
	}
	return *n > 0 ? 0 : -EINVAL;
}

/* Splits --hosts ("node1,node2") into h->hosts. Returns 0, -EINVAL for an
 * empty name, or -ENOMEM. */
static int parse_hosts(const char *s, char ***out, size_t *n)
{
	*out = NULL;
	*n = 0;
	while (s != NULL) {
		const char *comma = strchr(s, ',');
		size_t len = comma != NULL ? (size_t)(comma - s) : strlen(s);
		char **q;

		if (len == 0)
			return -EINVAL;
		q = realloc(*out, (*n + 1) * sizeof(*q));
		if (q == NULL)
			return -ENOMEM;
		*out = q;
		q[*n] = strndup(s, len);
		if (q[*n] == NULL)
			return -ENOMEM;
		(*n)++;
		s = comma != NULL ? comma + 1 : NULL;
	}
	return 0;
}

static void free_hosts(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

int htmlw_check_opts(const htmlw_opts *o, char *msg, size_t size)
{
	regex_t re;
	int64_t *r;
	size_t n;
	int rc;

	for (int k = 0; k < 2; k++) {
		const char *const *v = k == 0 ? o->include : o->exclude;

		for (size_t i = 0; v != NULL && v[i] != NULL; i++) {
			rc = regcomp(&re, v[i], REG_EXTENDED | REG_NOSUB);
			if (rc != 0) {
				char e[128];

				regerror(rc, &re, e, sizeof(e));
				snprintf(msg, size, "--%s '%s' is not a regular expression: %s",
					 k == 0 ? "include" : "exclude", v[i], e);
				return -EINVAL;
			}
			regfree(&re);
		}
	}
	if (o->pids != NULL) {
		rc = parse_ranges(o->pids, &r, &n);
		free(r);
		if (rc < 0) {
			snprintf(msg, size, "--pids takes ranges such as 0-3,7,10- (got '%s')",
				 o->pids);
			return rc;
		}
	}
	if (o->hosts != NULL) {
		char **hv;

		rc = parse_hosts(o->hosts, &hv, &n);
		free_hosts(hv, n);
		if (rc < 0) {
			snprintf(msg, size,
				 "--hosts takes host names separated by commas, such as "
				 "node1,node2 (got '%s')",
				 o->hosts);
			return rc;
		}
	}
	return 0;
}

static int compile_all(const char *const *v, regex_t **out, size_t *n)
{
	size_t k = 0;

	while (v != NULL && v[k] != NULL)
		k++;
	*n = 0;
	*out = NULL;
	if (k == 0)
		return 0;
	*out = calloc(k, sizeof(**out));
	if (*out == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < k; i++) {
		if (regcomp(&(*out)[i], v[i], REG_EXTENDED | REG_NOSUB) != 0)
			return -EINVAL;
		(*n)++;
	}
	return 0;
}

/* Joins a pattern list with '|' for the page's own filter boxes. */
static char *join_patterns(const char *const *v)
{
	size_t len = 1;
	char *s;

	if (v == NULL || v[0] == NULL)
		return NULL;
	for (size_t i = 0; v[i] != NULL; i++)
		len += strlen(v[i]) + 3;
	s = malloc(len);
	if (s == NULL)
		return NULL;
	s[0] = '\0';
	for (size_t i = 0; v[i] != NULL; i++) {
		if (i > 0)
			strcat(s, "|");
		if (v[i + 1] != NULL || i > 0)
			strcat(s, "(");
		strcat(s, v[i]);
		if (v[i + 1] != NULL || i > 0)
			strcat(s, ")");
	}
	return s;
}

static bool any_match(const regex_t *re, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (regexec(&re[i], s, 0, NULL, 0) == 0)
			return true;
	return false;
}

/* Regex results per string id, cached: bit 1 excluded known, bit 2
 * excluded, bit 4 included known, bit 8 included. */
static uint8_t *name_flags(html_sink *h, uint32_t id)
{
	if (id >= h->name_pass_cap) {
		size_t old = h->name_pass_cap;

		if (vec_grow(&h->name_pass, &h->name_pass_cap, (size_t)id + 1, 1, 8) < 0)
			return NULL;
		memset(h->name_pass + old, 0, h->name_pass_cap - old);
	}
	return (uint8_t *)&h->name_pass[id];
}

static bool name_test(html_sink *h, uint32_t id, const regex_t *re, size_t n, uint8_t known,
		      uint8_t yes)
{
	uint8_t *f = name_flags(h, id);
	char *s;

	if (f != NULL && (*f & known))
		return (*f & yes) != 0;
	s = strndup(h->st.buf + h->st.off[id], h->st.slen[id]);
	if (s == NULL)
		return false;
	if (any_match(re, n, s)) {
		if (f != NULL)
			*f |= known | yes;
		free(s);
		return true;
	}
	if (f != NULL)
		*f |= known;
	free(s);
	return false;
}

/* Whether --exclude hides name id (it applies everywhere). */
static bool name_excluded(html_sink *h, uint32_t id)
{
	if (h->nexc == 0 || id == 0)
		return false;
	return name_test(h, id, h->exc, h->nexc, 1, 2);
}

/* Whether name id matches --include (true when there is none). */
static bool name_included(html_sink *h, uint32_t id)
{
	if (h->ninc == 0)
		return true;
	if (id == 0)
		return false;
	return name_test(h, id, h->inc, h->ninc, 4, 8);
}

static bool pid_in_range(const html_sink *h, int64_t pid)
{
	if (h->nranges == 0)
		return true;
	for (size_t i = 0; i < h->nranges; i++)
		if (pid >= h->ranges[2 * i] && pid <= h->ranges[2 * i + 1])
			return true;
	return false;
}

/* Whether a process on host (a string id; 0: the trace's, trace_host)
 * passes --hosts. */
static bool host_kept(const html_sink *h, uint32_t host, const char *trace_host)
{
	const char *name = trace_host;
	size_t n = name != NULL ? strlen(name) : 0;

	if (h->nhosts == 0)
		return true;
	if (host != 0) {
		name = h->st.buf + h->st.off[host];
		n = h->st.slen[host];
	}
	for (size_t i = 0; name != NULL && i < h->nhosts; i++)
		if (strlen(h->hosts[i]) == n && memcmp(h->hosts[i], name, n) == 0)
			return true;
	return false;
}

/* ---- streaming ------------------------------------------------------------ */

static uint32_t intern(html_sink *h, strview s)
{
	uint32_t id = strtab_id(&h->st, s.p, s.n);

	if (id == UINT32_MAX) {
		h->err = -ENOMEM;
		return 0;
	}
	return id;
}

static hw_proc *proc_get(html_sink *h, int64_t pid)
{
	uint32_t i;
	hw_proc *p;

	if (h->nprocs > 0 && h->last_pid == pid)
		return &h->procs[h->last_proc];
	i = index_get(&h->pmap, (uint64_t)pid);
	if (i == UINT32_MAX) {
		if (vec_grow(&h->procs, &h->proccap, h->nprocs + 1, sizeof(*h->procs), 8) < 0 ||
		    index_put(&h->pmap, (uint64_t)pid, (uint32_t)h->nprocs) < 0) {
			h->err = -ENOMEM;
			return NULL;
		}
		i = (uint32_t)h->nprocs++;
		p = &h->procs[i];
		memset(p, 0, sizeof(*p));
		p->pid = pid;
		p->hpid = pid;
		p->ppid = -1;
		p->parent_pid = -1;
		p->start = p->end = -1;
		p->ev_min = INT64_MAX;
		p->ev_max = INT64_MIN;
		p->sort = -1;
		p->rank = -1;
		p->local_rank = -1;
		p->spawn_ts = -1;
		p->exit_kind = MODEL_EXIT_UNKNOWN;
	}
	h->last_pid = pid;
	h->last_proc = i;
	return &h->procs[i];
}

static hw_thread *thread_get(html_sink *h, hw_proc *p, int64_t tid)
{
	uint32_t pi = (uint32_t)(p - h->procs), i;
	uint64_t key = thread_key(pi, tid), v;
	size_t pos = htab_start(&h->tmap, key);
	hw_thread *t;

	while ((v = htab_next(&h->tmap, key, &pos)) != 0) {
		t = &h->threads[v - 1];
		if (t->tid == tid && t->proc == pi)
			return t;
	}
	if (vec_grow(&h->threads, &h->thcap, h->nthreads + 1, sizeof(*h->threads), 8) < 0 ||
	    vec_grow(&p->threads, &p->thcap, p->nthreads + 1, sizeof(*p->threads), 8) < 0 ||
	    index_put(&h->tmap, key, (uint32_t)h->nthreads) < 0) {
		h->err = -ENOMEM;
		return NULL;
	}
	i = (uint32_t)h->nthreads++;
	t = &h->threads[i];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	t->proc = pi;
	t->sort = tid == p->pid ? -1 : INT64_MAX;
	p->threads[p->nthreads++] = i;
	return t;
}

static hw_stat *stat_get(html_sink *h, uint32_t proc, uint32_t name)
{
	uint32_t i = index_get(&h->smap, pair_key(proc, name));
	hw_stat *s;

	if (i != UINT32_MAX)
		return &h->stats[i];
	if (vec_grow(&h->stats, &h->statcap, h->nstats + 1, sizeof(*h->stats), 8) < 0 ||
	    index_put(&h->smap, pair_key(proc, name), (uint32_t)h->nstats) < 0) {
		h->err = -ENOMEM;
		return NULL;
	}
	s = &h->stats[h->nstats++];
	memset(s, 0, sizeof(*s));
	s->proc = proc;
	s->name = name;
	return s;
}

/* Keeps the slice if it is among the thread's longest. */
static void heap_add(html_sink *h, hw_thread *t, int64_t ts, int64_t dur, uint32_t name)
{
	hw_slice x = {ts, dur, name};
	size_t i;

	t->nslices++;
	if (t->nheap < HTMLW_THREAD_SLICES) {
		if (vec_grow(&t->heap, &t->heapcap, t->nheap + 1, sizeof(*t->heap), 8) < 0) {
			h->err = -ENOMEM;
			return;
		}
		i = t->nheap++;
		while (i > 0 && t->heap[(i - 1) / 2].dur > x.dur) {
			t->heap[i] = t->heap[(i - 1) / 2];
			i = (i - 1) / 2;
		}
		t->heap[i] = x;
		return;
	}
	if (dur <= t->heap[0].dur)
		return;
	i = 0;
	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= t->nheap)
			break;
		if (c + 1 < t->nheap && t->heap[c + 1].dur < t->heap[c].dur)
			c++;
		if (t->heap[c].dur >= x.dur)
			break;
		t->heap[i] = t->heap[c];
		i = c;
	}
	t->heap[i] = x;
}

/* The self time of a finished interval goes into its name's statistics. */
static void open_done(html_sink *h, uint32_t proc, hw_open *o)
{
	hw_stat *s;

	if (o->done)
		return;
	o->done = true;
	s = stat_get(h, proc, o->name);
	if (s != NULL)
		s->self += (o->e - o->s) - o->child;
}

/*
 * A completed interval [s, e) arrives on a thread: its calls, total and
 * max are counted now; its self time (minus its direct children) when no
 * more children can come. Producers write nested slices either in
 * pre-order (parent first: sorted by start) or in post-order (parent when
 * it completes: VizTracer, B/E pairs). One stack serves both: a new
 * interval takes the finished intervals on top that it contains as its
 * children (post-order), and is a child of the nearest earlier interval
 * that contains it (pre-order). Which of the two a thread does decides
 * whether finished siblings can be dropped at once (pre-order) or must
 * wait for a parent (post-order); a long run of them is merged at the
 * bottom so the stack stays HTMLW_STACK deep.
 */
static void interval(html_sink *h, hw_proc *p, hw_thread *t, int64_t s, int64_t e, uint32_t name)
{
	uint32_t pi = (uint32_t)(p - h->procs);
	hw_stat *st = stat_get(h, pi, name);
	hw_open n = {.s = s, .e = e, .sub = e - s, .name = name};
	unsigned k;

	if (st == NULL)
		return;
	st->calls++;
	st->total += e - s;
	if (e - s > st->max)
		st->max = e - s;
	if (!name_excluded(h, name))
		heap_add(h, t, s, e - s, name);

	/* Post-order: finished intervals it contains are its children. */
	while (t->nx > 0) {
		hw_open *top = &t->xs[t->nx - 1];

		if (top->s < s || top->e > e)
			break;
		if (top->s != s || top->e != e)
			t->order = ORDER_POST;
		open_done(h, pi, top);
		n.child += top->sub;
		t->nx--;
	}
	/* Pre-order: the nearest interval below that contains it. In a
	 * post-order thread the stack holds finished siblings that all ended
	 * earlier: max_e ends the search at once instead of at the bottom. */
	for (k = t->nx; k > 0; k--) {
		hw_open *c = &t->xs[k - 1];

		if (c->max_e < e) {
			k = 0;
			break;
		}
		if (c->s <= s && c->e >= e)
			break;
	}
	if (k > 0) {
		t->order = ORDER_PRE;
		while (t->nx > k) /* siblings that ended: done */
			open_done(h, pi, &t->xs[--t->nx]);
		t->xs[k - 1].child += e - s;
	} else if (t->order == ORDER_PRE) {
		while (t->nx > 0)
			open_done(h, pi, &t->xs[--t->nx]);
	}
	if (t->nx == HTMLW_STACK) {
		/* Merge the two bottom entries (finished siblings as a
		 * parent to come would see them), or drop the bottom one
		 * when it is open. */
		hw_open *a = &t->xs[0], *b = &t->xs[1];

		open_done(h, pi, a);
		if (a->e <= b->s) {
			open_done(h, pi, b);
			a->e = b->e;
			a->max_e = b->max_e;
			a->sub += b->sub;
			memmove(&t->xs[1], &t->xs[2], (t->nx - 2) * sizeof(*t->xs));
		} else {
			memmove(&t->xs[0], &t->xs[1], (t->nx - 1) * sizeof(*t->xs));
		}
		t->nx--;
	}
	n.max_e = t->nx > 0 && t->xs[t->nx - 1].max_e > e ? t->xs[t->nx - 1].max_e : e;
	t->xs[t->nx++] = n;
}

static void flush_stacks(html_sink *h)
{
	for (size_t i = 0; i < h->nprocs; i++) {
		hw_proc *p = &h->procs[i];

		for (size_t j = 0; j < p->nthreads; j++) {
			hw_thread *t = &h->threads[p->threads[j]];

			while (t->nx > 0)
				open_done(h, (uint32_t)i, &t->xs[--t->nx]);
			/* B without E: open until the last event seen. */
			while (t->nb > 0) {
				hw_bopen *b = &t->bs[--t->nb];
				int64_t e = p->ev_max > b->s ? p->ev_max : b->s;

				interval(h, p, t, b->s, e, b->name);
				while (t->nx > 0)
					open_done(h, (uint32_t)i, &t->xs[--t->nx]);
			}
		}
	}
}

static int64_t json_i64(const json_t *o, const char *key, int64_t dflt)
{
	json_t *v = json_object_get(o, key);

	if (json_is_integer(v))
		return json_integer_value(v);
	/* A real out of range would be undefined to convert. */
	if (json_is_real(v) && json_real_value(v) > -9.2e18 && json_real_value(v) < 9.2e18)
		return (int64_t)json_real_value(v);
	return dflt;
}

static uint32_t json_strid(html_sink *h, const json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_string(v))
		return 0;
	return intern(h, (strview){json_string_value(v), json_string_length(v)});
}

static json_t *parse_args(const sink_event *e)
{
	if (e->ev.args.p == NULL || e->ev.args.n == 0)
		return NULL;
	return json_loadb(e->ev.args.p, e->ev.args.n, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
}

static void read_exit(html_sink *h, hw_proc *p, const json_t *ex)
{
	const char *k = json_string_value(json_object_get(ex, "kind"));

	if (k == NULL)
		return;
	if (strcmp(k, "code") == 0) {
		p->exit_kind = MODEL_EXIT_CODE;
		p->exit_val = json_i64(ex, "code", 0);
	} else if (strcmp(k, "signal") == 0) {
		p->exit_kind = MODEL_EXIT_SIGNAL;
		p->exit_val = json_i64(ex, "signal", 0);
		p->signame = json_strid(h, ex, "name");
	} else if (strcmp(k, "running") == 0) {
		p->exit_kind = MODEL_EXIT_RUNNING;
	} else if (strcmp(k, "host_lost") == 0) {
		p->exit_kind = MODEL_EXIT_HOST_LOST;
	}
}

static void read_argv(html_sink *h, hw_proc *p, const json_t *a)
{
	size_t n = json_array_size(a);

	if (!json_is_array(a))
		return;
	free(p->argv);
	p->argv = calloc(n + 1, sizeof(*p->argv));
	p->argc = 0;
	if (p->argv == NULL) {
		h->err = -ENOMEM;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		json_t *s = json_array_get(a, i);

		if (json_is_string(s))
			p->argv[p->argc++] = intern(
				h, (strview){json_string_value(s), json_string_length(s)});
	}
}

/* forktrace_process "rusage": kept only with a source (a figure without
 * one could not say how exact it is). */
static void read_rusage(html_sink *h, hw_proc *p, const json_t *ru)
{
	p->ru_source = json_object_get(ru, "source") != NULL ? json_strid(h, ru, "source") : 0;
	for (int k = 0; k < HTMLW_RUSAGE_N; k++)
		p->ru[k] = p->ru_source != 0 ? json_i64(ru, htmlw_rusage_keys[k], -1) : -1;
}

static void on_process_record(html_sink *h, hw_proc *p, const json_t *a)
{
	p->has_record = true;
	p->hpid = json_i64(a, "pid", p->pid);
	p->ppid = json_i64(a, "ppid", -1);
	p->parent_pid = json_i64(a, "parent", -1);
	if (json_object_get(a, "name") != NULL)
		p->name = json_strid(h, a, "name");
	p->exe = json_strid(h, a, "exe");
	p->cwd = json_strid(h, a, "cwd");
	read_argv(h, p, json_object_get(a, "argv"));
	p->start = json_i64(a, "start_ns", -1);
	p->end = json_i64(a, "end_ns", -1);
	p->spawn = json_strid(h, a, "spawn");
	p->inst = json_is_true(json_object_get(a, "instrumented"));
	p->lost = json_i64(a, "lost_events", 0) > 0 ? (uint64_t)json_i64(a, "lost_events", 0) : 0;
	read_exit(h, p, json_object_get(a, "exit"));
	p->host = json_strid(h, a, "host");
	p->rank = json_i64(a, "rank", -1);
	p->local_rank = json_i64(a, "local_rank", -1);
	p->interp = json_strid(h, a, "interpreter");
	p->launcher = json_strid(h, a, "launcher");
	read_rusage(h, p, json_object_get(a, "rusage"));
}

static bool sv_is(strview s, const char *lit)
{
	size_t n = strlen(lit);

	return s.p != NULL && s.n == n && memcmp(s.p, lit, n) == 0;
}

static void on_meta(html_sink *h, hw_proc *p, const sink_event *e)
{
	const strview nm = e->ev.name;
	json_t *a;

	if (!sv_is(nm, "process_name") && !sv_is(nm, "process_labels") &&
	    !sv_is(nm, "process_sort_index") && !sv_is(nm, "forktrace_process") &&
	    !sv_is(nm, "thread_name") && !sv_is(nm, "thread_sort_index"))
		return;
	a = parse_args(e);
	if (!json_is_object(a))
		goto out;
	if (sv_is(nm, "forktrace_process")) {
		on_process_record(h, p, a);
	} else if (sv_is(nm, "process_name")) {
		if (!p->has_record)
			p->name = json_strid(h, a, "name");
	} else if (sv_is(nm, "process_labels")) {
		p->label = json_strid(h, a, "labels");
	} else if (sv_is(nm, "process_sort_index")) {
		p->sort = json_i64(a, "sort_index", -1);
	} else {
		hw_thread *t = thread_get(h, p, e->ev.tid);

		if (t == NULL)
			goto out;
		if (sv_is(nm, "thread_name"))
			t->name = json_strid(h, a, "name");
		else
			t->sort = json_i64(a, "sort_index", t->sort);
	}
out:
	json_decref(a);
}

/* An image slice (cat "process" on the main thread). */
static void on_image(html_sink *h, hw_proc *p, const sink_event *e)
{
	json_t *a = parse_args(e);
	hw_seg *sg;

	if (vec_grow(&p->segs, &p->segcap, p->nsegs + 1, sizeof(*p->segs), 8) < 0) {
		h->err = -ENOMEM;
		goto out;
	}
	sg = &p->segs[p->nsegs++];
	sg->s = e->ev.ts_ns;
	sg->e = e->ev.ts_ns + (e->ev.dur_ns > 0 ? e->ev.dur_ns : 0);
	sg->inst = true;
	sg->image = (int64_t)p->nsegs - 1;
	if (json_is_object(a)) {
		json_t *ex = json_object_get(a, "exit");
		json_t *prog = json_object_get(a, "argv");

		sg->inst = !json_is_false(json_object_get(a, "instrumented"));
		sg->image = json_i64(a, "image", sg->image);
		/* Without forktrace's process record (a foreign or partial
		 * trace), the images say what the process ran. */
		if (!p->has_record) {
			if (ex != NULL)
				read_exit(h, p, ex);
			if (json_is_array(prog))
				read_argv(h, p, prog);
			if (json_object_get(a, "cwd") != NULL)
				p->cwd = json_strid(h, a, "cwd");
		}
	}
	/* The program of the image without the " (not instrumented)" tail:
	 * the page colours by program. */
	{
		strview n = e->ev.name;
		static const char tail[] = " (not instrumented)";
		size_t tl = sizeof(tail) - 1;

		if (n.p != NULL && n.n > tl && memcmp(n.p + n.n - tl, tail, tl) == 0)
			n.n -= tl;
		sg->name = intern(h, n);
	}
out:
	json_decref(a);
}

static void series_push(html_sink *h, hw_series *s, int64_t ts, double v)
{
	double *vals;

	if (s->n == HTMLW_COUNTER_POINTS) {
		/* Halve: each pair becomes one point, at the first's time
		 * with the larger value, so peaks survive. */
		for (size_t i = 0; i < s->n / 2; i++) {
			double a, b;

			memcpy(&a, &s->pts[4 * i + 1], sizeof(a));
			memcpy(&b, &s->pts[4 * i + 3], sizeof(b));
			s->pts[2 * i] = s->pts[4 * i];
			if (b > a)
				a = b;
			memcpy(&s->pts[2 * i + 1], &a, sizeof(a));
		}
		s->n /= 2;
		s->stride *= 2;
	}
	if (s->pts == NULL) {
		s->pts = malloc(2 * HTMLW_COUNTER_POINTS * sizeof(*s->pts));
		if (s->pts == NULL) {
			h->err = -ENOMEM;
			return;
		}
	}
	vals = (double *)(void *)&s->pts[2 * s->n + 1];
	s->pts[2 * s->n] = ts;
	memcpy(vals, &v, sizeof(v));
	s->n++;
}

static void series_add(html_sink *h, hw_series *s, int64_t ts, double v)
{
	if (s->acc == 0 || v > s->cur) {
		if (s->acc == 0)
			s->cur_ts = ts;
		s->cur = v;
	}
	if (++s->acc >= s->stride) {
		series_push(h, s, s->cur_ts, s->cur);
		s->acc = 0;
	}
}

/* The per-process counters forktrace writes from a process's resource
 * use ("cpu" user_ms/sys_ms and "rss" peak_mib, docs/TRACE_FORMAT.md): the
 * page has the same figures from the process records ("rusage"), and a
 * series per process would fill the counter plots with build jobs. */
static bool is_rusage_counter(strview name, const char *key)
{
	if (sv_is(name, "cpu"))
		return strcmp(key, "user_ms") == 0 || strcmp(key, "sys_ms") == 0;
	return sv_is(name, "rss") && strcmp(key, "peak_mib") == 0;
}

static void on_counter(html_sink *h, hw_proc *p, const sink_event *e)
{
	json_t *a = parse_args(e);
	const char *key;
	json_t *v;
	uint32_t pi = (uint32_t)(p - h->procs);

	if (!json_is_object(a))
		goto out;
	json_object_foreach(a, key, v)
	{
		char buf[512];
		strview n = e->ev.name;
		uint32_t id, si;
		hw_series *s;

		if (!json_is_number(v) || is_rusage_counter(e->ev.name, key))
			continue;
		if (strcmp(key, "value") != 0) {
			int k = snprintf(buf, sizeof(buf), "%.*s.%s", (int)(n.n < 200 ? n.n : 200),
					 n.p != NULL ? n.p : "", key);

			n = (strview){buf, k > 0 && (size_t)k < sizeof(buf) ? (size_t)k : 0};
		}
		id = intern(h, n);
		si = index_get(&h->cmap, pair_key(pi, id));
		if (si == UINT32_MAX) {
			if (vec_grow(&h->series, &h->sercap, h->nseries + 1, sizeof(*h->series),
				     8) < 0 ||
			    index_put(&h->cmap, pair_key(pi, id), (uint32_t)h->nseries) < 0) {
				h->err = -ENOMEM;
				goto out;
			}
			si = (uint32_t)h->nseries++;
			memset(&h->series[si], 0, sizeof(h->series[si]));
			h->series[si].proc = pi;
			h->series[si].name = id;
			h->series[si].stride = 1;
		}
		s = &h->series[si];
		series_add(h, s, e->ev.ts_ns, json_number_value(v));
	}
out:
	json_decref(a);
}

static void on_mark(html_sink *h, hw_proc *p, const sink_event *e)
{
	hw_mark *m;

	if (sv_is(e->ev.cat, "forktrace.loss") && !p->has_record) {
		json_t *a = parse_args(e);

		int64_t n = json_i64(a, "count", 0);

		if (n > 0)
			p->lost = model_count_add(p->lost, (uint64_t)n);
		json_decref(a);
	}
	if (p->nmarks == HTMLW_PROC_MARKS) {
		p->marks_dropped++;
		return;
	}
	if (vec_grow(&p->marks, &p->markcap, p->nmarks + 1, sizeof(*p->marks), 8) < 0) {
		h->err = -ENOMEM;
		return;
	}
	m = &p->marks[p->nmarks++];
	m->tid = e->ev.tid;
	m->ts = e->ev.ts_ns;
	m->dur = -1;
	m->name = intern(h, e->ev.name);
	m->cat = intern(h, e->ev.cat);
}

static void on_flow(html_sink *h, const sink_event *e)
{
	hw_flow **v = e->ev.ph == 's' ? &h->fs : &h->ff;
	size_t *n = e->ev.ph == 's' ? &h->nfs : &h->nff;
	size_t *cap = e->ev.ph == 's' ? &h->fscap : &h->ffcap;

	if (!e->ev.has_id || !sv_is(e->ev.cat, "fork"))
		return;
	if (vec_grow(v, cap, *n + 1, sizeof(**v), 8) < 0) {
		h->err = -ENOMEM;
		return;
	}
	(*v)[(*n)++] = (hw_flow){e->ev.id, e->ev.pid, e->ev.tid, e->ev.ts_ns};
}

static void on_begin_end(html_sink *h, hw_proc *p, hw_thread *t, const sink_event *e)
{
	if (e->ev.ph == 'B') {
		if (vec_grow(&t->bs, &t->bcap, t->nb + 1, sizeof(*t->bs), 8) < 0) {
			h->err = -ENOMEM;
			return;
		}
		t->bs[t->nb++] = (hw_bopen){e->ev.ts_ns, intern(h, e->ev.name)};
		return;
	}
	/* An E without its B (the trace started inside it) is dropped. */
	if (t->nb == 0)
		return;
	t->nb--;
	if (e->ev.ts_ns >= t->bs[t->nb].s)
		interval(h, p, t, t->bs[t->nb].s, e->ev.ts_ns, t->bs[t->nb].name);
}

static int html_event(trace_sink *s, const sink_event *e)
{
	html_sink *h = (html_sink *)s;
	const jsonw_event *ev = &e->ev;
	hw_proc *p;
	hw_thread *t;

	h->events++;
	p = proc_get(h, ev->pid);
	if (p == NULL)
		return h->err;
	p->events++;
	if (ev->ts_ns != JSONW_NO_TIME) {
		int64_t end = ev->ts_ns +
			      (ev->dur_ns != JSONW_NO_TIME && ev->dur_ns > 0 ? ev->dur_ns : 0);

		if (ev->ts_ns < p->ev_min)
			p->ev_min = ev->ts_ns;
		if (end > p->ev_max)
			p->ev_max = end;
	}
	switch (ev->ph) {
	case 'M':
		on_meta(h, p, e);
		break;
	case 'X':
		if (ev->ts_ns == JSONW_NO_TIME)
			break;
		if (sv_is(ev->cat, "process") && (ev->tid == ev->pid)) {
			on_image(h, p, e);
			break;
		}
		t = thread_get(h, p, ev->tid);
		if (t != NULL)
			interval(h, p, t, ev->ts_ns, ev->ts_ns + (ev->dur_ns > 0 ? ev->dur_ns : 0),
				 intern(h, ev->name));
		break;
	case 'B':
	case 'E':
		if (ev->ts_ns == JSONW_NO_TIME)
			break;
		t = thread_get(h, p, ev->tid);
		if (t != NULL)
			on_begin_end(h, p, t, e);
		break;
	case 'C':
		if (ev->ts_ns != JSONW_NO_TIME)
			on_counter(h, p, e);
		break;
	case 'i':
	case 'I':
	case 'n':
	case 'R':
		if (ev->ts_ns != JSONW_NO_TIME)
			on_mark(h, p, e);
		break;
	case 's':
	case 'f':
		on_flow(h, e);
		break;
	default:
		break;
	}
	return h->err;
}

static int html_begin(trace_sink *s, const sink_meta *meta)
{
	(void)s;
	(void)meta;
	return 0;
}

/* ---- writing the page ----------------------------------------------------- */

/* Writer state of `end`: the stream and the string ids in use. */
typedef struct hw_out {
	html_sink *h;
	ostream os;
	jsonw w;         /* the page data, on os */
	uint32_t *remap; /* old id -> new id + 1; 0: not written yet */
	uint32_t *order; /* new id -> old id */
	uint32_t nused;
	int64_t t0;
} hw_out;

static void num(hw_out *o, int64_t v)
{
	jsonw_i64(&o->w, v);
}

/* A time relative to the start of the page's clock; -1 stays unknown. */
static void tnum(hw_out *o, int64_t v)
{
	jsonw_i64(&o->w, v < 0 ? -1 : v - o->t0);
}

static void put_cstr(hw_out *o, const char *s)
{
	jsonw_script_str(&o->w, strview_c(s));
}

/* A string by id: written as its index in the page's string table. */
static void sid(hw_out *o, uint32_t id)
{
	if (id == 0) {
		num(o, 0);
		return;
	}
	if (o->remap[id] == 0) {
		o->order[o->nused] = id;
		o->remap[id] = ++o->nused;
	}
	num(o, o->remap[id]);
}

static bool name_ok(html_sink *h, uint32_t id)
{
	return !name_excluded(h, id) && name_included(h, id);
}

/* Decides which processes the page holds, and their parents among them.
 * trace_host: the host of processes that do not say theirs. */
static void apply_filters(html_sink *h, const char *trace_host)
{
	uint32_t k = 0;

	for (size_t i = 0; i < h->nprocs; i++) {
		hw_proc *p = &h->procs[i];

		p->prog_match = h->ninc == 0 || name_included(h, p->name) ||
				name_included(h, p->label);
		p->keep = pid_in_range(h, p->pid) && !name_excluded(h, p->name) &&
			  host_kept(h, p->host, trace_host);
	}
	if (h->ninc > 0) {
		bool *has = calloc(h->nprocs + 1, sizeof(*has));

		if (has == NULL) {
			h->err = -ENOMEM;
			return;
		}
		for (size_t i = 0; i < h->nstats; i++)
			if (!has[h->stats[i].proc] && name_ok(h, h->stats[i].name))
				has[h->stats[i].proc] = true;
		for (size_t i = 0; i < h->nprocs; i++)
			h->procs[i].keep = h->procs[i].keep && (h->procs[i].prog_match || has[i]);
		free(has);
	}
	for (size_t i = 0; i < h->nprocs; i++)
		if (h->procs[i].keep)
			h->procs[i].out_idx = k++;
}

/* The nearest kept ancestor's page index, or -1. */
static int64_t kept_parent(html_sink *h, const hw_proc *p)
{
	int64_t pid = p->parent_pid;

	for (size_t steps = 0; pid >= 0 && steps < h->nprocs; steps++) {
		uint32_t i = index_get(&h->pmap, (uint64_t)pid);

		if (i == UINT32_MAX || &h->procs[i] == p)
			return -1;
		if (h->procs[i].keep)
			return h->procs[i].out_idx;
		pid = h->procs[i].parent_pid;
	}
	return -1;
}

static int flow_cmp(const void *a, const void *b)
{
	const hw_flow *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/* Fork arrows: the parent's 's' and the child's 'f' share an id. */
static void join_flows(html_sink *h)
{
	size_t i = 0, j = 0;

	if (h->nfs == 0 || h->nff == 0)
		return;
	qsort(h->fs, h->nfs, sizeof(*h->fs), flow_cmp);
	qsort(h->ff, h->nff, sizeof(*h->ff), flow_cmp);
	while (i < h->nfs && j < h->nff) {
		if (h->fs[i].id < h->ff[j].id) {
			i++;
		} else if (h->fs[i].id > h->ff[j].id) {
			j++;
		} else {
			uint32_t c = index_get(&h->pmap, (uint64_t)h->ff[j].pid);

			if (c != UINT32_MAX) {
				hw_proc *p = &h->procs[c];

				p->spawn_ts = h->fs[i].ts;
				p->spawn_tid = h->fs[i].tid;
				if (p->parent_pid < 0 && h->fs[i].pid != p->pid)
					p->parent_pid = h->fs[i].pid;
			}
			i++;
			j++;
		}
	}
}

static int slice_by_dur_desc(const void *a, const void *b)
{
	const hw_slice *x = a, *y = b;

	return x->dur > y->dur ? -1 : x->dur < y->dur;
}

static int slice_by_ts(const void *a, const void *b)
{
	const hw_slice *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->dur > y->dur ? -1 : x->dur < y->dur;
}

/* Drops the slices the filters hide; returns how many are left. */
static size_t filter_slices(html_sink *h, const hw_proc *p, hw_thread *t)
{
	size_t k = 0;

	for (size_t i = 0; i < t->nheap; i++) {
		uint32_t n = t->heap[i].name;

		if (name_excluded(h, n) || (!p->prog_match && !name_included(h, n)))
			continue;
		t->heap[k++] = t->heap[i];
	}
	t->nheap = k;
	return k;
}

/* The per-thread cap that makes all kept slices fit HTMLW_SLICE_BUDGET. */
static size_t slice_cap(html_sink *h, uint64_t *total)
{
	size_t lo = 0, hi = HTMLW_THREAD_SLICES;

	*total = 0;
	for (size_t i = 0; i < h->nprocs; i++) {
		hw_proc *p = &h->procs[i];

		if (!p->keep)
			continue;
		for (size_t j = 0; j < p->nthreads; j++)
			*total += filter_slices(h, p, &h->threads[p->threads[j]]);
	}
	while (lo < hi) {
		size_t mid = (lo + hi + 1) / 2;
		uint64_t sum = 0;

		for (size_t i = 0; i < h->nprocs; i++) {
			hw_proc *p = &h->procs[i];

			if (!p->keep)
				continue;
			for (size_t j = 0; j < p->nthreads; j++) {
				size_t n = h->threads[p->threads[j]].nheap;

				sum += n < mid ? n : mid;
			}
		}
		if (sum <= HTMLW_SLICE_BUDGET)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

/* The hosts of a multi-host trace (sink_meta.hosts): per host its name,
 * role, state, processes and clock figures, for the run info and the
 * host headings; [] for a trace of one host. */
static void write_hosts(hw_out *o, const sink_meta *meta)
{
	jsonw *w = &o->w;

	jsonw_key(w, "hosts");
	jsonw_arr_begin(w);
	for (size_t i = 0; i < meta->nhosts; i++) {
		const sink_host *hs = &meta->hosts[i];

		jsonw_obj_begin(w);
		jsonw_key(w, "name");
		put_cstr(o, hs->name);
		jsonw_key(w, "role");
		put_cstr(o, hs->role);
		jsonw_key(w, "state");
		put_cstr(o, hs->state);
		jsonw_key(w, "processes");
		num(o, (int64_t)hs->processes);
		jsonw_key(w, "clock");
		put_cstr(o, hs->clock);
		jsonw_kv_bool(w, "anchor", hs->anchor);
		jsonw_key(w, "offset_ns");
		num(o, hs->offset_ns);
		jsonw_key(w, "drift_ppm");
		jsonw_f64(w, hs->drift * 1e6);
		jsonw_key(w, "err_ns");
		num(o, hs->err_ns);
		jsonw_key(w, "samples");
		num(o, (int64_t)hs->samples);
		jsonw_key(w, "lost");
		tnum(o, hs->lost_ns);
		jsonw_key(w, "why");
		put_cstr(o, hs->why);
		jsonw_key(w, "where");
		put_cstr(o, hs->where);
		jsonw_obj_end(w);
	}
	jsonw_arr_end(w);
}

/* The critical path (sink_meta.critical_path): null, or its span and its
 * steps as flat quintuples: page index of the step's process (-1 when the
 * page does not hold it: filtered out, or no record of it), trace pid,
 * name, start, end. The page computes shares and totals from these. */
static void write_critical_path(hw_out *o, const sink_meta *meta)
{
	const critpath_step *st = NULL;
	size_t n = meta->critical_path != NULL ? critpath_steps(meta->critical_path, &st) : 0;
	jsonw *w = &o->w;

	jsonw_key(w, "critical_path");
	if (n == 0) {
		jsonw_null(w);
		return;
	}
	jsonw_obj_begin(w);
	jsonw_key(w, "start");
	tnum(o, critpath_start_ns(meta->critical_path));
	jsonw_key(w, "end");
	tnum(o, critpath_end_ns(meta->critical_path));
	jsonw_key(w, "steps");
	jsonw_arr_begin(w);
	for (size_t i = 0; i < n; i++) {
		uint32_t k = index_get(&o->h->pmap, (uint64_t)st[i].pid);

		if (i % 8 == 7)
			jsonw_newline(w);
		num(o,
		    k != UINT32_MAX && o->h->procs[k].keep ? (int64_t)o->h->procs[k].out_idx : -1);
		num(o, st[i].pid);
		put_cstr(o, st[i].name);
		tnum(o, st[i].start_ns);
		tnum(o, st[i].end_ns);
	}
	jsonw_arr_end(w);
	jsonw_obj_end(w);
}

static void write_meta(hw_out *o, const sink_meta *meta, uint64_t slices_total,
		       uint64_t slices_kept, uint64_t threads)
{
	html_sink *h = o->h;
	const model_trace *t = meta->model;
	jsonw *w = &o->w;
	uint64_t kept = 0, lost = 0;

	for (size_t i = 0; i < h->nprocs; i++) {
		kept += h->procs[i].keep;
		lost = model_count_add(lost, h->procs[i].lost);
	}
	jsonw_key(w, "meta");
	jsonw_obj_begin(w);
	jsonw_key(w, "version");
	put_cstr(o, FT_VERSION_STRING);
	jsonw_key(w, "origin");
	put_cstr(o, t != NULL ? t->origin : NULL);
	jsonw_key(w, "host");
	put_cstr(o, t != NULL ? t->host : NULL);
	jsonw_key(w, "command");
	jsonw_arr_begin(w);
	for (size_t i = 0; t != NULL && t->command != NULL && t->command[i] != NULL; i++)
		put_cstr(o, t->command[i]);
	jsonw_arr_end(w);
	jsonw_key(w, "inputs");
	jsonw_arr_begin(w);
	for (size_t i = 0; meta->inputs != NULL && meta->inputs[i] != NULL; i++)
		put_cstr(o, meta->inputs[i]);
	jsonw_arr_end(w);
	jsonw_key(w, "t0");
	num(o, o->t0);
	jsonw_key(w, "start");
	tnum(o, t != NULL && t->start_ns >= 0 ? t->start_ns : h->tmin);
	jsonw_key(w, "end");
	tnum(o, t != NULL && t->end_ns >= 0 ? t->end_ns : h->tmax);
	jsonw_key(w, "realtime_t0_ms");
	if (t != NULL && t->anchor_real_ns > 0)
		num(o, (t->anchor_real_ns + (o->t0 - t->anchor_mono_ns)) / 1000000);
	else
		jsonw_null(w);
	jsonw_key(w, "exit_status");
	if (t != NULL && ((t->origin != NULL && strcmp(t->origin, "forktrace run") == 0) ||
			  meta->exit_status_known))
		num(o, t->exit_status);
	else
		jsonw_null(w);
	jsonw_key(w, "lost_events");
	num(o, (int64_t)(t != NULL && t->lost_events > lost ? t->lost_events : lost));
	jsonw_key(w, "events");
	num(o, (int64_t)h->events);
	jsonw_key(w, "processes");
	num(o, (int64_t)h->nprocs);
	jsonw_key(w, "processes_shown");
	num(o, (int64_t)kept);
	jsonw_key(w, "threads");
	num(o, (int64_t)threads);
	jsonw_key(w, "slices");
	num(o, (int64_t)slices_total);
	jsonw_key(w, "slices_shown");
	num(o, (int64_t)slices_kept);
	jsonw_key(w, "filter");
	jsonw_obj_begin(w);
	jsonw_key(w, "include");
	put_cstr(o, h->opt_text[0]);
	jsonw_key(w, "exclude");
	put_cstr(o, h->opt_text[1]);
	jsonw_key(w, "pids");
	put_cstr(o, h->opt_text[2]);
	jsonw_key(w, "hosts");
	put_cstr(o, h->opt_text[3]);
	jsonw_obj_end(w);
	write_hosts(o, meta);
	write_critical_path(o, meta);
	jsonw_obj_end(w);
}

/* Counts threads the way the JSON writer does: every thread seen, and the
 * main thread of every process. */
static uint64_t count_threads(html_sink *h)
{
	uint64_t n = 0;

	for (size_t i = 0; i < h->nprocs; i++) {
		hw_proc *p = &h->procs[i];
		bool main_seen = false;

		for (size_t j = 0; j < p->nthreads; j++)
			if (h->threads[p->threads[j]].tid == p->pid)
				main_seen = true;
		n += p->nthreads + (main_seen ? 0 : 1);
	}
	return n;
}

/* A process's exec images: start, end, name, instrumented. */
static void write_proc_images(hw_out *o, const hw_proc *p)
{
	jsonw_arr_begin(&o->w);
	for (size_t j = 0; j < p->nsegs; j++) {
		tnum(o, p->segs[j].s);
		tnum(o, p->segs[j].e);
		sid(o, p->segs[j].name);
		num(o, p->segs[j].inst ? 1 : 0);
	}
	jsonw_arr_end(&o->w);
}

/* A process's threads: tid, name, sort key, slices seen. */
static void write_proc_threads(hw_out *o, const hw_proc *p)
{
	html_sink *h = o->h;

	jsonw_arr_begin(&o->w);
	for (size_t j = 0; j < p->nthreads; j++) {
		hw_thread *t = &h->threads[p->threads[j]];

		num(o, t->tid);
		sid(o, t->name);
		num(o, t->sort == INT64_MAX ? 1 << 30 : t->sort);
		num(o, (int64_t)t->nslices);
	}
	jsonw_arr_end(&o->w);
}

/* A process's marks: tid, ts, name, category. */
static void write_proc_marks(hw_out *o, const hw_proc *p)
{
	jsonw_arr_begin(&o->w);
	for (size_t j = 0; j < p->nmarks; j++) {
		hw_mark *m = &p->marks[j];

		num(o, m->tid);
		tnum(o, m->ts);
		sid(o, m->name);
		sid(o, m->cat);
	}
	jsonw_arr_end(&o->w);
}

/* One process's row of "procs", on its own line. */
static void write_proc(hw_out *o, const hw_proc *p)
{
	html_sink *h = o->h;
	jsonw *w = &o->w;
	int64_t start = p->start >= 0 ? p->start : p->ev_min != INT64_MAX ? p->ev_min : -1;
	int64_t end = p->end >= 0 ? p->end : p->ev_max != INT64_MIN ? p->ev_max : -1;

	jsonw_newline(w);
	jsonw_arr_begin(w);
	/* pid,hpid,ppid,parent,name,label,start,end,exit kind,exit
	 * value,signal name,spawn,inst,lost,events,exe,cwd,sort,
	 * spawn ts,spawn tid,record,[argv],[images],[threads],
	 * [marks],marks dropped,host,rank,local rank,interpreter,
	 * launcher,rusage ([source,user_ns,sys_ns,maxrss_kb,minflt,
	 * majflt,nvcsw,nivcsw,inblock,oublock], or 0 when none) */
	num(o, p->pid);
	num(o, p->hpid);
	num(o, p->ppid);
	num(o, kept_parent(h, p));
	sid(o, p->name);
	sid(o, p->label);
	tnum(o, start);
	tnum(o, end);
	num(o, p->exit_kind);
	num(o, p->exit_val);
	sid(o, p->signame);
	sid(o, p->spawn);
	num(o, p->inst || !p->has_record ? 1 : 0);
	num(o, (int64_t)p->lost);
	num(o, (int64_t)p->events);
	sid(o, p->exe);
	sid(o, p->cwd);
	num(o, p->sort);
	tnum(o, p->spawn_ts);
	num(o, p->spawn_ts >= 0 ? p->spawn_tid : -1);
	num(o, p->has_record ? 1 : 0);
	jsonw_arr_begin(w);
	for (size_t j = 0; j < p->argc; j++)
		sid(o, p->argv[j]);
	jsonw_arr_end(w);
	write_proc_images(o, p);
	write_proc_threads(o, p);
	write_proc_marks(o, p);
	num(o, (int64_t)p->marks_dropped);
	sid(o, p->host);
	num(o, p->rank);
	num(o, p->local_rank);
	sid(o, p->interp);
	sid(o, p->launcher);
	if (p->ru_source != 0) {
		jsonw_arr_begin(w);
		sid(o, p->ru_source);
		for (int k = 0; k < HTMLW_RUSAGE_N; k++)
			num(o, p->ru[k]);
		jsonw_arr_end(w);
	} else {
		num(o, 0);
	}
	jsonw_arr_end(w);
}

static void write_procs(hw_out *o)
{
	html_sink *h = o->h;

	jsonw_key(&o->w, "procs");
	jsonw_arr_begin(&o->w);
	for (size_t i = 0; i < h->nprocs; i++)
		if (h->procs[i].keep)
			write_proc(o, &h->procs[i]);
	jsonw_arr_end(&o->w);
}

static int write_slices(hw_out *o, size_t cap)
{
	html_sink *h = o->h;
	jsonw *w = &o->w;

	jsonw_key(w, "slices");
	jsonw_arr_begin(w);
	for (size_t i = 0; i < h->nprocs; i++) {
		hw_proc *p = &h->procs[i];

		if (!p->keep)
			continue;
		for (size_t j = 0; j < p->nthreads; j++) {
			hw_thread *t = &h->threads[p->threads[j]];
			size_t n = t->nheap < cap ? t->nheap : cap;

			if (n == 0)
				continue;
			if (n < t->nheap)
				qsort(t->heap, t->nheap, sizeof(*t->heap), slice_by_dur_desc);
			qsort(t->heap, n, sizeof(*t->heap), slice_by_ts);
			jsonw_newline(w);
			jsonw_arr_begin(w);
			num(o, p->out_idx);
			num(o, t->tid);
			num(o, (int64_t)t->nslices);
			jsonw_arr_begin(w);
			for (size_t k = 0; k < n; k++) {
				tnum(o, t->heap[k].ts);
				num(o, t->heap[k].dur);
				sid(o, t->heap[k].name);
			}
			jsonw_arr_end(w);
			jsonw_arr_end(w);
		}
	}
	jsonw_arr_end(w);
	return 0;
}

static int stat_cmp(const void *a, const void *b)
{
	const hw_stat *x = *(const hw_stat *const *)a, *y = *(const hw_stat *const *)b;

	if (x->proc != y->proc)
		return x->proc < y->proc ? -1 : 1;
	return x->total > y->total ? -1 : x->total < y->total;
}

/* Per-process rows (the HTMLW_PROC_STATS largest of each process) and
 * exact overall rows (every kept process, every shown name). */
static int write_stats(hw_out *o)
{
	html_sink *h = o->h;
	hw_stat **rows = malloc((h->nstats + 1) * sizeof(*rows));
	hw_stat *all = calloc(h->st.n + 1, sizeof(*all));
	uint32_t *nproc = calloc(h->st.n + 1, sizeof(*nproc));
	size_t n = 0, inproc = 0;
	int err = 0;

	if (rows == NULL || all == NULL || nproc == NULL) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < h->nstats; i++) {
		hw_stat *s = &h->stats[i];
		hw_proc *p = &h->procs[s->proc];

		if (!p->keep || name_excluded(h, s->name) ||
		    (!p->prog_match && !name_included(h, s->name)))
			continue;
		rows[n++] = s;
		all[s->name].calls += s->calls;
		all[s->name].total += s->total;
		all[s->name].self += s->self;
		if (s->max > all[s->name].max)
			all[s->name].max = s->max;
		nproc[s->name]++;
	}
	qsort(rows, n, sizeof(*rows), stat_cmp);
	jsonw_key(&o->w, "stats");
	jsonw_arr_begin(&o->w);
	for (size_t i = 0; i < n; i++) {
		if (i > 0 && rows[i]->proc != rows[i - 1]->proc)
			inproc = 0;
		if (inproc++ >= HTMLW_PROC_STATS)
			continue;
		jsonw_newline(&o->w);
		num(o, h->procs[rows[i]->proc].out_idx);
		sid(o, rows[i]->name);
		num(o, (int64_t)rows[i]->calls);
		num(o, rows[i]->total);
		num(o, rows[i]->self);
		num(o, rows[i]->max);
	}
	jsonw_arr_end(&o->w);
	jsonw_key(&o->w, "overall");
	jsonw_arr_begin(&o->w);
	for (size_t id = 1; id < h->st.n; id++) {
		if (nproc[id] == 0)
			continue;
		jsonw_newline(&o->w);
		sid(o, (uint32_t)id);
		num(o, (int64_t)all[id].calls);
		num(o, all[id].total);
		num(o, all[id].self);
		num(o, all[id].max);
		num(o, nproc[id]);
	}
	jsonw_arr_end(&o->w);
out:
	free(nproc);
	free(all);
	free(rows);
	return err;
}

static void write_counters(hw_out *o)
{
	html_sink *h = o->h;
	jsonw *w = &o->w;

	jsonw_key(w, "counters");
	jsonw_arr_begin(w);
	for (size_t i = 0; i < h->nseries; i++) {
		hw_series *s = &h->series[i];
		hw_proc *p = &h->procs[s->proc];

		if (!p->keep || name_excluded(h, s->name))
			continue;
		if (s->acc > 0) {
			series_push(h, s, s->cur_ts, s->cur);
			s->acc = 0;
		}
		jsonw_newline(w);
		jsonw_arr_begin(w);
		num(o, p->out_idx);
		sid(o, s->name);
		jsonw_arr_begin(w);
		for (size_t k = 0; k < s->n; k++) {
			double v;

			memcpy(&v, &s->pts[2 * k + 1], sizeof(v));
			tnum(o, s->pts[2 * k]);
			/* JSON has no NaN or infinity. */
			jsonw_f64(w, v == v && v - v == 0 ? v : 0.0);
		}
		jsonw_arr_end(w);
		jsonw_arr_end(w);
	}
	jsonw_arr_end(w);
}

static void write_names(hw_out *o)
{
	jsonw_key(&o->w, "names");
	jsonw_arr_begin(&o->w);
	jsonw_script_str(&o->w, strview_c(""));
	for (uint32_t i = 0; i < o->nused; i++) {
		uint32_t id = o->order[i];
		strview str = {o->h->st.buf + o->h->st.off[id], o->h->st.slen[id]};

		if (i % 16 == 15)
			jsonw_newline(&o->w);
		jsonw_script_str(&o->w, str);
	}
	jsonw_arr_end(&o->w);
}

/* Writes template text up to the next "@NAME@" marker; returns what
 * follows the marker, or NULL when the template has no more markers. */
static const char *template_upto(hw_out *o, const char *tpl, const char *marker)
{
	const char *at = strstr(tpl, marker);

	if (at == NULL) {
		ostream_puts(&o->os, tpl);
		return NULL;
	}
	ostream_write(&o->os, tpl, (size_t)(at - tpl));
	return at + strlen(marker);
}

/* The page's clock: h->tmin and h->tmax, the span of every process and
 * event; returns t0, the time 0 of the page (the trace's start when it
 * is known and earlier). */
static int64_t page_clock(html_sink *h, const sink_meta *meta)
{
	int64_t t0 = INT64_MAX;

	if (meta->model != NULL && meta->model->start_ns >= 0)
		t0 = meta->model->start_ns;
	h->tmin = INT64_MAX;
	h->tmax = INT64_MIN;
	for (size_t i = 0; i < h->nprocs; i++) {
		hw_proc *p = &h->procs[i];
		int64_t a = p->start >= 0 ? p->start : p->ev_min;
		int64_t b = p->end >= 0 ? p->end : p->ev_max;

		if (p->ev_min < a)
			a = p->ev_min;
		if (a < h->tmin && a >= 0)
			h->tmin = a;
		if (b > h->tmax)
			h->tmax = b;
		if (p->ev_max > h->tmax)
			h->tmax = p->ev_max;
	}
	if (h->tmin < t0)
		t0 = h->tmin;
	if (t0 == INT64_MAX)
		t0 = 0;
	if (h->tmin == INT64_MAX)
		h->tmin = t0;
	if (h->tmax == INT64_MIN)
		h->tmax = t0;
	return t0;
}

/* The slices of the kept processes: *kept embedded (at most cap per
 * thread), *total seen while streaming (what was never kept counts as not
 * shown too). */
static void count_slices(html_sink *h, size_t cap, uint64_t *kept, uint64_t *total)
{
	*kept = 0;
	for (size_t i = 0; i < h->nprocs; i++)
		if (h->procs[i].keep)
			for (size_t j = 0; j < h->procs[i].nthreads; j++) {
				size_t n = h->threads[h->procs[i].threads[j]].nheap;

				*kept += n < cap ? n : cap;
			}
	*total = 0;
	for (size_t i = 0; i < h->nprocs; i++)
		if (h->procs[i].keep)
			for (size_t j = 0; j < h->procs[i].nthreads; j++)
				*total += h->threads[h->procs[i].threads[j]].nslices;
}

/* The page: the template with the CSS, the data and the JS in place of
 * its markers. Returns 0 or a negative errno; write errors stay in o->os. */
static int write_page(hw_out *o, const sink_meta *meta, size_t cap, uint64_t slices_total,
		      uint64_t slices_kept, uint64_t threads)
{
	const char *tpl = htmlw_asset_report_html;
	int err = 0;

	tpl = template_upto(o, tpl, "@FT_CSS@");
	if (tpl != NULL)
		ostream_puts(&o->os, htmlw_asset_report_css);
	if (tpl != NULL)
		tpl = template_upto(o, tpl, "@FT_DATA@");
	if (tpl != NULL) {
		jsonw_init(&o->w, &o->os);
		jsonw_obj_begin(&o->w);
		jsonw_kv_i64(&o->w, "v", 1);
		write_meta(o, meta, slices_total, slices_kept, threads);
		write_procs(o);
		write_slices(o, cap);
		err = write_stats(o);
		write_counters(o);
		write_names(o);
		jsonw_obj_end(&o->w);
		tpl = template_upto(o, tpl, "@FT_JS@");
	}
	if (tpl != NULL) {
		/* The timeline's lanes first: report.js uses them. */
		ostream_puts(&o->os, htmlw_asset_report_timeline_js);
		ostream_puts(&o->os, htmlw_asset_report_js);
		ostream_puts(&o->os, tpl);
	}
	return err;
}

static int html_end(trace_sink *s, const sink_meta *meta)
{
	html_sink *h = (html_sink *)s;
	hw_out o = {.h = h};
	uint64_t slices_total = 0, slices_kept = 0, threads;
	size_t cap;
	int err;

	if (h->err != 0)
		return h->err;
	flush_stacks(h);
	join_flows(h);
	apply_filters(h, meta->model != NULL ? meta->model->host : NULL);
	if (h->err != 0)
		return h->err;
	threads = count_threads(h);
	o.t0 = page_clock(h, meta);
	cap = slice_cap(h, &slices_total);
	count_slices(h, cap, &slices_kept, &slices_total);

	o.remap = calloc(h->st.n + 1, sizeof(*o.remap));
	o.order = calloc(h->st.n + 1, sizeof(*o.order));
	if (o.remap == NULL || o.order == NULL) {
		err = -ENOMEM;
		goto free_maps;
	}
	err = ostream_open(&o.os, h->fd, -1);
	if (err < 0)
		goto free_maps;
	err = write_page(&o, meta, cap, slices_total, slices_kept, threads);
	if (ostream_error(&o.os) == 0 && err < 0)
		ostream_fail(&o.os, err);
	err = ostream_finish(&o.os);
	h->base.stats.processes = h->nprocs;
	h->base.stats.threads = threads;
	h->base.stats.events = h->events;
	h->base.stats.bytes = o.os.bytes_out;
free_maps:
	free(o.order);
	free(o.remap);
	return err;
}

static void html_free(trace_sink *s)
{
	html_sink *h = (html_sink *)s;

	if (h == NULL)
		return;
	for (size_t i = 0; i < h->nprocs; i++) {
		free(h->procs[i].argv);
		free(h->procs[i].segs);
		free(h->procs[i].threads);
		free(h->procs[i].marks);
	}
	for (size_t i = 0; i < h->nthreads; i++) {
		free(h->threads[i].heap);
		free(h->threads[i].bs);
	}
	for (size_t i = 0; i < h->nseries; i++)
		free(h->series[i].pts);
	for (size_t i = 0; i < h->ninc; i++)
		regfree(&h->inc[i]);
	for (size_t i = 0; i < h->nexc; i++)
		regfree(&h->exc[i]);
	for (int i = 0; i < 4; i++)
		free(h->opt_text[i]);
	free_hosts(h->hosts, h->nhosts);
	free(h->inc);
	free(h->exc);
	free(h->ranges);
	free(h->procs);
	free(h->threads);
	free(h->stats);
	free(h->series);
	free(h->fs);
	free(h->ff);
	htab_free(&h->pmap);
	htab_free(&h->tmap);
	htab_free(&h->smap);
	htab_free(&h->cmap);
	free(h->name_pass);
	strtab_free(&h->st);
	free(h);
}

trace_sink *sink_html_new(int fd, const htmlw_opts *opts, int *err)
{
	html_sink *h = calloc(1, sizeof(*h));
	htmlw_opts none = {0};

	if (h == NULL) {
		*err = -ENOMEM;
		return NULL;
	}
	if (opts == NULL)
		opts = &none;
	h->fd = fd;
	h->base.begin = html_begin;
	h->base.event = html_event;
	h->base.end = html_end;
	h->base.free = html_free;
	*err = compile_all(opts->include, &h->inc, &h->ninc);
	if (*err == 0)
		*err = compile_all(opts->exclude, &h->exc, &h->nexc);
	if (*err == 0 && opts->pids != NULL)
		*err = parse_ranges(opts->pids, &h->ranges, &h->nranges);
	if (*err == 0 && opts->hosts != NULL)
		*err = parse_hosts(opts->hosts, &h->hosts, &h->nhosts);
	if (*err == 0) {
		h->opt_text[0] = join_patterns(opts->include);
		h->opt_text[1] = join_patterns(opts->exclude);
		h->opt_text[2] = opts->pids != NULL ? strdup(opts->pids) : NULL;
		h->opt_text[3] = opts->hosts != NULL ? strdup(opts->hosts) : NULL;
		/* Id 0 is "no string". */
		h->st.n = 0;
		h->st.ids.first = 1024;
		if (strtab_id(&h->st, "\x01", 1) == UINT32_MAX)
			*err = -ENOMEM;
	}
	if (*err < 0) {
		html_free(&h->base);
		return NULL;
	}
	return &h->base;
}
