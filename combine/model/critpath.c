/*
 * critpath.c - the critical path of a trace (critpath.h; the definition is
 * docs/TRACE_FORMAT.md "Critical path").
 *
 * The walk goes back in time from the end of the process that ended last:
 * inside a process, the child that ended last (of those the process waited
 * for) before the point reached is on the path, the process's own time
 * after that child's end is a step, and the process goes on from the
 * child's start. Each process's children are sorted by end once, latest
 * first, and a cursor per process moves down that list only: every child
 * is looked at once, so the walk is linear after the sorts, and it keeps
 * its own stack (a chain of processes can be as deep as the tree).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "critpath.h"
#include "vec.h"

typedef struct cp_proc {
	int64_t pid, host_pid, parent;
	int64_t start, end;
	size_t name; /* offset in the name pool */
	size_t host; /* offset in the name pool, SIZE_MAX: the trace's */
	bool remote; /* on another host than its parent */
	/* Set by the compute. */
	int64_t reap;    /* when its parent reaped it, -1: no wait says */
	int64_t eff_end; /* its end, else when its parent reaped it */
	uint32_t up;     /* parent's index, NO_PROC: none */
	bool waits;      /* it recorded a wait */
	bool candidate;  /* its parent may have waited for it */
	bool walked;     /* on the path already (a cycle of parents) */
} cp_proc;

typedef struct cp_wait {
	int64_t pid, child, ts;
} cp_wait;

/* One process being walked back over [a, cursor]: its children in
 * kids[next..last) are the ones not yet looked at. */
typedef struct cp_frame {
	uint32_t proc;
	int64_t a, cursor;
	size_t next, last;
} cp_frame;

#define NO_PROC UINT32_MAX

struct critpath {
	cp_proc *procs;
	size_t nprocs, procs_cap;
	cp_wait *waits;
	size_t nwaits, waits_cap;
	char *names;
	size_t names_len, names_cap;
	int64_t start_ns, end_ns;
	critpath_step *steps;
	size_t nsteps, steps_cap;
};

critpath *critpath_new(void)
{
	critpath *cp = calloc(1, sizeof(*cp));

	if (cp)
		cp->start_ns = cp->end_ns = -1;
	return cp;
}

void critpath_free(critpath *cp)
{
	if (!cp)
		return;
	free(cp->procs);
	free(cp->waits);
	free(cp->names);
	free(cp->steps);
	free(cp);
}

/* Copies s into the name pool; its offset, SIZE_MAX on ENOMEM. */
static size_t pool_add(critpath *cp, const char *s)
{
	size_t len = strlen(s) + 1, at = cp->names_len;

	if (vec_grow(&cp->names, &cp->names_cap, cp->names_len + len, 1, 1024) < 0)
		return SIZE_MAX;
	memcpy(cp->names + at, s, len);
	cp->names_len += len;
	return at;
}

int critpath_add(critpath *cp, const critpath_proc *p)
{
	size_t name, host = SIZE_MAX;

	if (cp->nprocs >= NO_PROC ||
	    vec_grow(&cp->procs, &cp->procs_cap, cp->nprocs + 1, sizeof(*cp->procs), 64) < 0)
		return -ENOMEM;
	name = pool_add(cp, p->name != NULL ? p->name : "?");
	if (name != SIZE_MAX && p->host != NULL)
		host = pool_add(cp, p->host);
	if (name == SIZE_MAX || (p->host != NULL && host == SIZE_MAX))
		return -ENOMEM;
	cp->procs[cp->nprocs++] = (cp_proc){
		.pid = p->pid,
		.host_pid = p->host_pid,
		.parent = p->parent,
		.start = p->start_ns,
		.end = p->end_ns,
		.name = name,
		.host = host,
	};
	return 0;
}

/* Whether two processes' hosts differ (SIZE_MAX: the trace's). */
static bool other_host(const critpath *cp, const cp_proc *a, const cp_proc *b)
{
	if (a->host == SIZE_MAX || b->host == SIZE_MAX)
		return a->host != b->host;
	return strcmp(cp->names + a->host, cp->names + b->host) != 0;
}

int critpath_add_process(critpath *cp, int64_t pid, int64_t parent, int64_t start_ns,
			 int64_t end_ns, const char *name)
{
	critpath_proc p = {
		.pid = pid,
		.host_pid = pid,
		.parent = parent,
		.start_ns = start_ns,
		.end_ns = end_ns,
		.name = name,
	};

	return critpath_add(cp, &p);
}

int critpath_add_wait(critpath *cp, int64_t pid, int64_t child, int64_t ts_ns)
{
	if (child <= 0 || ts_ns < 0)
		return 0;
	if (vec_grow(&cp->waits, &cp->waits_cap, cp->nwaits + 1, sizeof(*cp->waits), 64) < 0)
		return -ENOMEM;
	cp->waits[cp->nwaits++] = (cp_wait){.pid = pid, .child = child, .ts = ts_ns};
	return 0;
}

/* ---- lookups by sorting ------------------------------------------------- */

/* qsort has no context argument: the array the comparators read. */
static const cp_proc *sort_procs;

/* By trace pid, then order of adding (the last added of a pid wins). */
static int by_pid(const void *x, const void *y)
{
	uint32_t i = *(const uint32_t *)x, j = *(const uint32_t *)y;
	const cp_proc *a = &sort_procs[i], *b = &sort_procs[j];

	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	return i < j ? -1 : i > j;
}

/* The process added last with trace pid pid, NO_PROC when none. by: the
 * processes in by_pid order. */
static uint32_t find_pid(const cp_proc *procs, const uint32_t *by, size_t n, int64_t pid)
{
	size_t lo = 0, hi = n;

	/* The first entry with a pid above pid; the one before it. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (procs[by[mid]].pid <= pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || procs[by[lo - 1]].pid != pid)
		return NO_PROC;
	return by[lo - 1];
}

/* By parent, host pid, start (for the waits' children). */
static int by_parent_host(const void *x, const void *y)
{
	uint32_t i = *(const uint32_t *)x, j = *(const uint32_t *)y;
	const cp_proc *a = &sort_procs[i], *b = &sort_procs[j];

	if (a->up != b->up)
		return a->up < b->up ? -1 : 1;
	if (a->host_pid != b->host_pid)
		return a->host_pid < b->host_pid ? -1 : 1;
	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	return i < j ? -1 : i > j;
}

/*
 * The child of up with host pid host that a wait at ts reaped: of the
 * children with that pid (a reused pid), the last started by ts, else the
 * first. by: the processes with a parent, in by_parent_host order.
 */
static uint32_t find_child(const cp_proc *procs, const uint32_t *by, size_t n, uint32_t up,
			   int64_t host, int64_t ts)
{
	size_t lo = 0, hi = n;
	uint32_t best = NO_PROC;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const cp_proc *m = &procs[by[mid]];

		if (m->up < up || (m->up == up && m->host_pid < host))
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i < n; i++) {
		const cp_proc *c = &procs[by[i]];

		if (c->up != up || c->host_pid != host)
			break;
		if (best != NO_PROC && c->start > ts)
			break;
		best = by[i];
	}
	return best;
}

/* By parent, then end (latest first), then start (earliest first): the
 * order in which a walk back through a parent meets its children. */
static int by_parent_end(const void *x, const void *y)
{
	uint32_t i = *(const uint32_t *)x, j = *(const uint32_t *)y;
	const cp_proc *a = &sort_procs[i], *b = &sort_procs[j];

	if (a->up != b->up)
		return a->up < b->up ? -1 : 1;
	if (a->eff_end != b->eff_end)
		return a->eff_end > b->eff_end ? -1 : 1;
	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	return i < j ? -1 : i > j;
}

/* ---- the compute ---------------------------------------------------------- */

/*
 * Links each process to its parent and each wait to the child it reaped,
 * then sets eff_end and candidate. pids and kids: scratch of nprocs
 * entries each.
 */
static void link_tree(critpath *cp, uint32_t *pids, uint32_t *kids)
{
	cp_proc *procs = cp->procs;
	size_t n = cp->nprocs, nk = 0;

	for (size_t i = 0; i < n; i++)
		pids[i] = (uint32_t)i;
	sort_procs = procs;
	qsort(pids, n, sizeof(*pids), by_pid);
	for (size_t i = 0; i < n; i++) {
		cp_proc *p = &procs[i];

		p->reap = -1;
		p->waits = false;
		p->walked = false;
		p->up = p->parent >= 0 && p->parent != p->pid ? find_pid(procs, pids, n, p->parent)
							      : NO_PROC;
		p->remote = p->up != NO_PROC && other_host(cp, p, &procs[p->up]);
	}
	/* A wait names its child by host pid among the waiter's children. */
	for (size_t i = 0; i < n; i++)
		if (procs[i].up != NO_PROC)
			kids[nk++] = (uint32_t)i;
	qsort(kids, nk, sizeof(*kids), by_parent_host);
	for (size_t k = 0; k < cp->nwaits; k++) {
		const cp_wait *wt = &cp->waits[k];
		uint32_t w = find_pid(procs, pids, n, wt->pid), c;

		if (w == NO_PROC)
			continue;
		procs[w].waits = true;
		c = find_child(procs, kids, nk, w, wt->child, wt->ts);
		if (c != NO_PROC && (procs[c].reap < 0 || wt->ts < procs[c].reap))
			procs[c].reap = wt->ts;
	}
	for (size_t i = 0; i < n; i++) {
		cp_proc *p = &procs[i];

		p->eff_end = p->end;
		if (p->reap >= 0 && (p->eff_end < 0 || p->reap < p->eff_end))
			p->eff_end = p->reap;
		p->candidate = p->up != NO_PROC && p->start >= 0 && p->eff_end >= p->start &&
			       (p->reap >= 0 || p->remote || !procs[p->up].waits);
	}
}

/* The process that ended last (ties: the earliest started, an ancestor
 * before its descendants), NO_PROC when no process has both times. */
static uint32_t last_ended(const critpath *cp)
{
	uint32_t e = NO_PROC;

	for (size_t i = 0; i < cp->nprocs; i++) {
		const cp_proc *p = &cp->procs[i];
		const cp_proc *b = e != NO_PROC ? &cp->procs[e] : NULL;

		if (p->start < 0 || p->eff_end < p->start)
			continue;
		if (b == NULL || p->eff_end > b->eff_end ||
		    (p->eff_end == b->eff_end && p->start < b->start))
			e = (uint32_t)i;
	}
	return e;
}

/* Adds proc's own time [a, b) to the steps, which come latest first;
 * joins it to the step before when that is the same process's and starts
 * where this one ends. An empty span adds nothing. */
static int add_step(critpath *cp, uint32_t proc, int64_t a, int64_t b)
{
	const cp_proc *p = &cp->procs[proc];
	critpath_step *last = cp->nsteps > 0 ? &cp->steps[cp->nsteps - 1] : NULL;

	if (b <= a)
		return 0;
	if (last != NULL && last->pid == p->pid && last->start_ns == b) {
		last->start_ns = a;
		return 0;
	}
	if (vec_grow(&cp->steps, &cp->steps_cap, cp->nsteps + 1, sizeof(*cp->steps), 16) < 0)
		return -ENOMEM;
	cp->steps[cp->nsteps++] = (critpath_step){
		.pid = p->pid,
		.name = cp->names + p->name,
		.start_ns = a,
		.end_ns = b,
	};
	return 0;
}

/*
 * Walks proc back over [a, b], adding its steps latest first; a process
 * already on the path (the one above, toward E) is not taken again. first[q]..first[q + 1] are q's candidate
 * children in kids, latest end first; stack has room for a frame per
 * process.
 */
static int walk(critpath *cp, uint32_t proc, int64_t a, int64_t b, const size_t *first,
		const uint32_t *kids, cp_frame *stack)
{
	cp_proc *procs = cp->procs;
	size_t top = 0;
	int err;

	procs[proc].walked = true;
	stack[top++] = (cp_frame){proc, a, b, first[proc], first[proc + 1]};
	while (top > 0) {
		cp_frame *f = &stack[top - 1];
		const cp_proc *c = NULL;
		uint32_t ci = NO_PROC;

		/* Children that ended after the cursor ran beside the path:
		 * the cursor only moves back, so they are passed for good. */
		while (f->next < f->last) {
			ci = kids[f->next];
			if (procs[ci].eff_end <= f->cursor && !procs[ci].walked) {
				c = &procs[ci];
				break;
			}
			f->next++;
		}
		if (c == NULL || c->eff_end <= f->a) {
			err = add_step(cp, f->proc, f->a, f->cursor);
			if (err < 0)
				return err;
			top--;
			continue;
		}
		f->next++;
		err = add_step(cp, f->proc, c->eff_end, f->cursor);
		if (err < 0)
			return err;
		f->cursor = c->start > f->a ? c->start : f->a;
		/* Each process is pushed at most once, so the stack holds. */
		procs[ci].walked = true;
		stack[top++] = (cp_frame){ci, f->cursor, c->eff_end, first[ci], first[ci + 1]};
	}
	return 0;
}

/* Reverses the steps into time order. */
static void reverse_steps(critpath *cp)
{
	for (size_t i = 0, j = cp->nsteps; i + 1 < j; i++, j--) {
		critpath_step t = cp->steps[i];

		cp->steps[i] = cp->steps[j - 1];
		cp->steps[j - 1] = t;
	}
}

/*
 * The walk of E, then of each ancestor over its time before it started
 * the next process toward E, up to the root (a cycle of parents, which
 * only a broken file has, stops after as many processes as there are).
 */
static int walk_path(critpath *cp, uint32_t e, const size_t *first, const uint32_t *kids,
		     cp_frame *stack)
{
	const cp_proc *procs = cp->procs;
	uint32_t below = e, up = procs[e].up;
	int64_t root_start = procs[e].start;
	int err;

	err = walk(cp, e, procs[e].start, procs[e].eff_end, first, kids, stack);
	for (size_t hops = 0; err == 0 && up != NO_PROC && hops < cp->nprocs; hops++) {
		const cp_proc *p = &procs[up];
		int64_t b = procs[below].start;

		if (p->start < 0 || p->start > b || p->walked)
			break;
		err = walk(cp, up, p->start, b, first, kids, stack);
		root_start = p->start;
		below = up;
		up = p->up;
	}
	cp->start_ns = root_start;
	cp->end_ns = procs[e].eff_end;
	return err;
}

int critpath_compute(critpath *cp)
{
	size_t n = cp->nprocs, nk = 0;
	uint32_t *pids = NULL, *kids = NULL, e;
	size_t *first = NULL;
	cp_frame *stack = NULL;
	int err = -ENOMEM;

	cp->nsteps = 0;
	cp->start_ns = cp->end_ns = -1;
	if (n == 0)
		return -ENOENT;
	pids = malloc(n * sizeof(*pids));
	kids = malloc(n * sizeof(*kids));
	first = calloc(n + 1, sizeof(*first));
	stack = malloc(n * sizeof(*stack));
	if (pids == NULL || kids == NULL || first == NULL || stack == NULL)
		goto out;
	link_tree(cp, pids, kids);
	e = last_ended(cp);
	if (e == NO_PROC) {
		err = -ENOENT;
		goto out;
	}
	/* Each process's candidate children, latest end first. */
	for (size_t i = 0; i < n; i++)
		if (cp->procs[i].candidate)
			kids[nk++] = (uint32_t)i;
	sort_procs = cp->procs;
	qsort(kids, nk, sizeof(*kids), by_parent_end);
	for (size_t k = 0; k < nk; k++)
		first[cp->procs[kids[k]].up + 1]++;
	for (size_t i = 0; i < n; i++)
		first[i + 1] += first[i];
	err = walk_path(cp, e, first, kids, stack);
	if (err == 0)
		reverse_steps(cp);
	else
		cp->nsteps = 0;
out:
	free(pids);
	free(kids);
	free(first);
	free(stack);
	return err;
}

size_t critpath_steps(const critpath *cp, const critpath_step **out)
{
	*out = cp->steps;
	return cp->nsteps;
}

int64_t critpath_start_ns(const critpath *cp)
{
	return cp->start_ns;
}

int64_t critpath_end_ns(const critpath *cp)
{
	return cp->end_ns;
}
