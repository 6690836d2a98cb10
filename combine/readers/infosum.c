/*
 * infosum.c - the summary `forktrace info` prints (merge.h, info_summary):
 * the processes of an info_report summed per program, their exits, CPU
 * and memory, and the critical path per process. Sorts, no quadratic
 * walks: a build of 40,000 processes is summed in milliseconds.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "merge.h"

/* How far up the tree a non-zero exit looks for the script it ran under:
 * a configure probe is a few levels below configure (sh, gcc, cc1). */
#define UNDER_MAX_DEPTH 16

static const char *prog_name(const info_process *p)
{
	if (p->prog != NULL)
		return p->prog;
	return p->name != NULL ? p->name : "?";
}

static const info_process *find_proc(const info_report *r, int64_t pid)
{
	size_t lo = 0, hi = r->nprocs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r->procs[mid].pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < r->nprocs && r->procs[lo].pid == pid ? &r->procs[lo] : NULL;
}

/* The name of the nearest ancestor of p that runs a script (its record
 * names an interpreter), or NULL. */
static const char *script_above(const info_report *r, const info_process *p)
{
	for (int depth = 0; depth < UNDER_MAX_DEPTH && p->parent >= 0; depth++) {
		p = find_proc(r, p->parent);
		if (p == NULL)
			return NULL;
		if (p->interp != NULL)
			return prog_name(p);
	}
	return NULL;
}

static int64_t cpu_of(const info_process *p)
{
	if (p->user_ns < 0 && p->sys_ns < 0)
		return -1;
	return (p->user_ns > 0 ? p->user_ns : 0) + (p->sys_ns > 0 ? p->sys_ns : 0);
}

static int64_t add_sat(int64_t a, int64_t b)
{
	return a > INT64_MAX - b ? INT64_MAX : a + b;
}

static int cmp_by_name(const void *a, const void *b, void *ctx)
{
	const info_report *r = ctx;
	const info_process *pa = &r->procs[*(const size_t *)a];
	const info_process *pb = &r->procs[*(const size_t *)b];
	int c = strcmp(prog_name(pa), prog_name(pb));

	return c != 0 ? c : (pa->pid > pb->pid) - (pa->pid < pb->pid);
}

/* Larger first, then by name: the order is the same on every run. */
static int cmp_desc(int64_t a, int64_t b, const char *na, const char *nb)
{
	if (a != b)
		return a < b ? 1 : -1;
	return strcmp(na, nb);
}

static int cmp_wall(const void *a, const void *b, void *ctx)
{
	const info_prog *progs = ctx;
	const info_prog *x = &progs[*(const size_t *)a];
	const info_prog *y = &progs[*(const size_t *)b];

	return cmp_desc(x->wall_ns, y->wall_ns, x->name, y->name);
}

static int cmp_cpu(const void *a, const void *b, void *ctx)
{
	const info_prog *progs = ctx;
	const info_prog *x = &progs[*(const size_t *)a];
	const info_prog *y = &progs[*(const size_t *)b];

	return cmp_desc(x->cpu_ns, y->cpu_ns, x->name, y->name);
}

static int cmp_nonzero(const void *a, const void *b, void *ctx)
{
	const info_prog *progs = ctx;
	const info_prog *x = &progs[*(const size_t *)a];
	const info_prog *y = &progs[*(const size_t *)b];

	return cmp_desc((int64_t)x->nonzero, (int64_t)y->nonzero, x->name, y->name);
}

static int cmp_rss(const void *a, const void *b)
{
	const info_process *x = *(const info_process *const *)a;
	const info_process *y = *(const info_process *const *)b;

	if (x->maxrss_kb != y->maxrss_kb)
		return x->maxrss_kb < y->maxrss_kb ? 1 : -1;
	return (x->pid > y->pid) - (x->pid < y->pid);
}

static int cmp_end(const void *a, const void *b)
{
	const info_process *x = *(const info_process *const *)a;
	const info_process *y = *(const info_process *const *)b;

	if (x->end_ns != y->end_ns)
		return x->end_ns < y->end_ns ? -1 : 1;
	return (x->pid > y->pid) - (x->pid < y->pid);
}

static int cmp_step_pid(const void *a, const void *b)
{
	const info_step *x = *(const info_step *const *)a;
	const info_step *y = *(const info_step *const *)b;

	return (x->pid > y->pid) - (x->pid < y->pid);
}

static int cmp_path_total(const void *a, const void *b)
{
	const info_path_proc *x = a, *y = b;

	if (x->total_ns != y->total_ns)
		return x->total_ns < y->total_ns ? 1 : -1;
	return (x->pid > y->pid) - (x->pid < y->pid);
}

/* One program of the processes order[from, to) (same name). */
static void sum_prog(const info_report *r, const size_t *order, size_t from, size_t to,
		     info_prog *g)
{
	bool under_same = true;

	memset(g, 0, sizeof(*g));
	g->name = prog_name(&r->procs[order[from]]);
	g->maxrss_kb = -1;
	for (size_t k = from; k < to; k++) {
		const info_process *p = &r->procs[order[k]];
		int64_t cpu = cpu_of(p);

		g->processes++;
		if (p->start_ns >= 0 && p->end_ns >= p->start_ns) {
			g->timed++;
			g->wall_ns = add_sat(g->wall_ns, p->end_ns - p->start_ns);
		}
		if (cpu >= 0) {
			g->with_cpu++;
			g->cpu_ns = add_sat(g->cpu_ns, cpu);
		}
		if (p->maxrss_kb > g->maxrss_kb)
			g->maxrss_kb = p->maxrss_kb;
		if (p->exit_kind == INFO_EXIT_SIGNAL)
			g->killed++;
		if (p->exit_kind != INFO_EXIT_CODE || p->exit_value == 0)
			continue;
		const char *under = under_same ? script_above(r, p) : NULL;

		if (g->nonzero == 0)
			g->nonzero_under = under;
		else if (under == NULL || g->nonzero_under == NULL ||
			 strcmp(under, g->nonzero_under) != 0)
			under_same = false;
		g->nonzero++;
	}
	if (!under_same)
		g->nonzero_under = NULL;
}

static int sum_programs(const info_report *r, info_summary *s)
{
	size_t n = r->nprocs, *order = malloc((n ? n : 1) * sizeof(*order));

	if (order == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	qsort_r(order, n, sizeof(*order), cmp_by_name, (void *)r);
	s->progs = calloc(n ? n : 1, sizeof(*s->progs));
	if (s->progs == NULL) {
		free(order);
		return -ENOMEM;
	}
	for (size_t i = 0, j; i < n; i = j) {
		const char *name = prog_name(&r->procs[order[i]]);

		for (j = i + 1; j < n && !strcmp(prog_name(&r->procs[order[j]]), name); j++)
			;
		sum_prog(r, order, i, j, &s->progs[s->nprogs++]);
	}
	free(order);
	s->by_wall = malloc((s->nprogs + 1) * sizeof(*s->by_wall));
	s->by_cpu = malloc((s->nprogs + 1) * sizeof(*s->by_cpu));
	s->by_nonzero = malloc((s->nprogs + 1) * sizeof(*s->by_nonzero));
	if (s->by_wall == NULL || s->by_cpu == NULL || s->by_nonzero == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < s->nprogs; i++) {
		s->by_wall[i] = i;
		if (s->progs[i].with_cpu > 0)
			s->by_cpu[s->nby_cpu++] = i;
		if (s->progs[i].nonzero > 0)
			s->by_nonzero[s->nby_nonzero++] = i;
	}
	qsort_r(s->by_wall, s->nprogs, sizeof(*s->by_wall), cmp_wall, s->progs);
	qsort_r(s->by_cpu, s->nby_cpu, sizeof(*s->by_cpu), cmp_cpu, s->progs);
	qsort_r(s->by_nonzero, s->nby_nonzero, sizeof(*s->by_nonzero), cmp_nonzero, s->progs);
	return 0;
}

/* The critical path's steps summed per process. */
static int sum_path(const info_report *r, info_summary *s)
{
	const info_step **byp;
	size_t n = r->nsteps;

	if (n == 0)
		return 0;
	byp = malloc(n * sizeof(*byp));
	s->path_procs = calloc(n, sizeof(*s->path_procs));
	if (byp == NULL || s->path_procs == NULL) {
		free(byp);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		byp[i] = &r->steps[i];
	qsort(byp, n, sizeof(*byp), cmp_step_pid);
	for (size_t i = 0; i < n; i++) {
		info_path_proc *pp = &s->path_procs[s->npath_procs - (s->npath_procs > 0)];
		int64_t d = byp[i]->end_ns - byp[i]->start_ns;

		if (s->npath_procs == 0 || pp->pid != byp[i]->pid) {
			const info_process *p = find_proc(r, byp[i]->pid);

			pp = &s->path_procs[s->npath_procs++];
			pp->pid = byp[i]->pid;
			pp->name = byp[i]->name != NULL ? byp[i]->name
				   : p != NULL          ? prog_name(p)
							: "?";
		}
		pp->total_ns = add_sat(pp->total_ns, d > 0 ? d : 0);
		pp->steps++;
	}
	free(byp);
	qsort(s->path_procs, s->npath_procs, sizeof(*s->path_procs), cmp_path_total);
	return 0;
}

static int sum_processes(const info_report *r, info_summary *s)
{
	size_t nkilled = 0;

	s->rank_min = INT64_MAX;
	s->rank_max = INT64_MIN;
	for (size_t i = 0; i < r->nprocs; i++) {
		const info_process *p = &r->procs[i];

		s->records += p->has_record;
		s->nonzero += p->exit_kind == INFO_EXIT_CODE && p->exit_value != 0;
		s->killed += p->exit_kind == INFO_EXIT_SIGNAL;
		s->running += p->exit_kind == INFO_EXIT_RUNNING;
		s->host_lost += p->exit_kind == INFO_EXIT_HOST_LOST;
		s->unknown += p->has_record &&
			      (p->exit_kind == INFO_EXIT_UNKNOWN || p->exit_kind == INFO_EXIT_NONE);
		if (cpu_of(p) >= 0) {
			s->with_cpu++;
			s->user_ns = add_sat(s->user_ns, p->user_ns > 0 ? p->user_ns : 0);
			s->sys_ns = add_sat(s->sys_ns, p->sys_ns > 0 ? p->sys_ns : 0);
		}
		s->nby_rss += p->maxrss_kb >= 0;
		if (p->rank >= 0) {
			if (s->ranked++ == 0)
				s->launcher = p->launcher;
			s->rank_min = p->rank < s->rank_min ? p->rank : s->rank_min;
			s->rank_max = p->rank > s->rank_max ? p->rank : s->rank_max;
		}
	}
	s->killed_procs = malloc((s->killed + 1) * sizeof(*s->killed_procs));
	s->by_rss = malloc((s->nby_rss + 1) * sizeof(*s->by_rss));
	if (s->killed_procs == NULL || s->by_rss == NULL)
		return -ENOMEM;
	s->nby_rss = 0;
	for (size_t i = 0; i < r->nprocs; i++) {
		const info_process *p = &r->procs[i];

		if (p->exit_kind == INFO_EXIT_SIGNAL)
			s->killed_procs[nkilled++] = p;
		if (p->maxrss_kb >= 0)
			s->by_rss[s->nby_rss++] = p;
	}
	qsort(s->killed_procs, nkilled, sizeof(*s->killed_procs), cmp_end);
	qsort(s->by_rss, s->nby_rss, sizeof(*s->by_rss), cmp_rss);
	return 0;
}

int info_summarize(const info_report *rep, info_summary *sum)
{
	int err;

	memset(sum, 0, sizeof(*sum));
	err = sum_processes(rep, sum);
	if (err == 0)
		err = sum_programs(rep, sum);
	if (err == 0)
		err = sum_path(rep, sum);
	if (err < 0)
		info_summary_free(sum);
	return err;
}

void info_summary_free(info_summary *sum)
{
	if (sum == NULL)
		return;
	free(sum->progs);
	free(sum->by_wall);
	free(sum->by_cpu);
	free(sum->by_nonzero);
	free(sum->killed_procs);
	free(sum->by_rss);
	free(sum->path_procs);
	memset(sum, 0, sizeof(*sum));
}
