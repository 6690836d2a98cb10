/*
 * info_cmd.c - `forktrace info FILE...`: what a trace holds, read in one
 * streaming pass (info_read, combine/include/merge.h).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "say.h"
#include "jsonw.h"
#include "ostream.h"
#include "merge.h"
#include "internal.h"
#include "spill.h"

/* Deeper process chains are printed at this indentation. */
#define MAX_INDENT 32
/* Thread names listed per process. */
#define MAX_THREAD_NAMES 6

static const char info_usage[] =
	"Usage: forktrace info [OPTIONS] FILE...\n"
	"\n"
	"Say what a trace holds. By default a summary that fits one screen:\n"
	"the command, how long it took, its processes, its exit status, the\n"
	"processes that exited non-zero (grouped by program, with the script\n"
	"they ran under) and those killed by a signal, the programs that took\n"
	"the most time (their processes' lifetimes summed) and CPU time, the\n"
	"largest peak memory, the critical path's longest processes with their\n"
	"share of the run, lost events, hosts and ranks. What the trace does\n"
	"not hold (a trace of another tool has no exits, a trace without\n"
	"resource use no CPU time) is said, not shown as zero.\n"
	"\n"
	"FILE is Chrome Trace Event JSON, plain or gzip (by content), in object\n"
	"or array form, a forktrace HDF5 trace, or anything 'forktrace combine'\n"
	"reads: a directory stands for the trace files in it (each shown), spill\n"
	"files for the one trace they make, '-' for standard input. A file is\n"
	"read in one pass, in a stream (a pipe or FIFO too), through the merge\n"
	"'forktrace combine' uses: the critical path is the one it writes.\n"
	"\n"
	"Exit status: 0 when every file was read to its end, 1 when a file is\n"
	"truncated, damaged or cannot be read, 2 for a usage error.\n"
	"\n"
	"Options:\n"
	"  --tree           the file's events by kind, time span, losses, hosts,\n"
	"                   and every process as a tree (pid, name, rank, exit,\n"
	"                   lifetime, CPU time and peak memory where known,\n"
	"                   events, threads).\n"
	"  --critical-path  the whole critical path: each step (a process's own\n"
	"                   time while none of its children was on the path)\n"
	"                   with its share of the path, then each process on it\n"
	"                   with its total and share.\n"
	"  --json           the summary (or, with --critical-path, the path) as\n"
	"                   JSON: one object per file, an array of them for\n"
	"                   several (keys: docs/TRACE_FORMAT.md, \"forktrace info\n"
	"                   --json\").\n"
	"  -h, --help       show this help.\n"
	"\n"
	"Examples:\n"
	"  forktrace info trace.json\n"
	"  forktrace info --critical-path build.json.gz\n"
	"  forktrace info --tree result_*.json.gz\n"
	"  forktrace info --json trace.h5\n";

static void print_ms(const char *label, int64_t ns)
{
	printf("%s%.3f ms", label, (double)ns / 1e6);
}

static void print_phases(const info_report *r)
{
	bool first = true;

	printf("  events:     %" PRIu64, r->events);
	for (int ph = 0; ph < 128; ph++) {
		if (r->by_phase[ph] == 0)
			continue;
		if (ph == 0)
			printf("%s(no ph) %" PRIu64, first ? " (" : ", ", r->by_phase[ph]);
		else
			printf("%s%c %" PRIu64, first ? " (" : ", ", ph, r->by_phase[ph]);
		first = false;
	}
	printf("%s\n", first ? "" : ")");
}

/* What p used where its record says it: its lifetime, CPU time (user +
 * system) and peak memory. */
static void print_cost(const info_process *p)
{
	if (p->start_ns >= 0 && p->end_ns >= p->start_ns)
		printf(", %s", say_duration(p->end_ns - p->start_ns));
	if (p->user_ns >= 0 || p->sys_ns >= 0)
		printf(", CPU %s", say_duration((p->user_ns > 0 ? p->user_ns : 0) +
						(p->sys_ns > 0 ? p->sys_ns : 0)));
	if (p->maxrss_kb >= 0)
		printf(", peak %s", say_size_kib(p->maxrss_kb));
}

/* hosts: the trace is of several hosts: each process says its own. */
static void print_process(const info_process *p, unsigned depth, bool hosts)
{
	unsigned ind = depth < MAX_INDENT ? depth : MAX_INDENT;

	printf("  %*s%" PRId64, (int)(2 * ind), "", p->pid);
	if (p->host_pid != p->pid)
		printf(" (host pid %" PRId64 ")", p->host_pid);
	printf(" %s", p->name != NULL ? say_esc(p->name) : "?");
	if (hosts && p->host != NULL)
		printf(" on %s", say_esc(p->host));
	if (p->rank >= 0)
		printf(" rank %" PRId64, p->rank);
	if (p->has_record)
		printf(" [%s]", p->exit != NULL ? say_esc(p->exit) : "exit unknown");
	print_cost(p);
	printf(", %" PRIu64 " events", p->events);
	if (p->lost_events > 0)
		printf(", %" PRIu64 " lost", p->lost_events);
	printf(", %zu thread%s", p->nthreads, p->nthreads == 1 ? "" : "s");
	for (size_t i = 0; i < p->nthreads && i < MAX_THREAD_NAMES; i++)
		printf("%s%s", i == 0 ? ": " : ", ",
		       p->thread_names[i] != NULL ? say_esc(p->thread_names[i]) : "(unnamed)");
	if (p->nthreads > MAX_THREAD_NAMES)
		printf(", ...");
	if (p->origin != NULL)
		printf(" (was %s)", say_esc(p->origin));
	printf("\n");
}

static const info_process *find(const info_report *r, int64_t pid)
{
	size_t lo = 0, hi = r->nprocs;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (r->procs[mid].pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < r->nprocs && r->procs[lo].pid == pid ? &r->procs[lo] : NULL;
}

/* Processes by parent, then by pid (procs are by pid: a stable sort by
 * parent keeps that order). */
static int cmp_parent(const void *a, const void *b, void *ctx)
{
	const info_report *r = ctx;
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	int64_t px = r->procs[x].parent, py = r->procs[y].parent;

	if (px != py)
		return px < py ? -1 : 1;
	return (x > y) - (x < y);
}

/* The first position in kids[0..n) (by parent) of a child of pid. */
static size_t first_child(const info_report *r, const size_t *kids, size_t n, int64_t pid)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (r->procs[kids[mid]].parent < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * The processes as a tree (parents from forktrace_process records),
 * depth-first with an explicit stack: a fork chain can be thousands deep.
 * Children are found in the processes sorted by parent once: a build's
 * 40,000 processes print in the time they take to write.
 */
static int print_tree(const info_report *r)
{
	size_t n = r->nprocs, top = 0;
	size_t *stack = malloc((n + 1) * sizeof(*stack));
	unsigned *depth = malloc((n + 1) * sizeof(*depth));
	bool *seen = calloc(n + 1, sizeof(*seen));
	size_t *kids = malloc((n + 1) * sizeof(*kids));

	if (stack == NULL || depth == NULL || seen == NULL || kids == NULL) {
		free(stack);
		free(depth);
		free(seen);
		free(kids);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		kids[i] = i;
	qsort_r(kids, n, sizeof(*kids), cmp_parent, (void *)r);
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = n; i-- > 0;) {
			const info_process *p = &r->procs[i];
			bool root = p->parent < 0 || find(r, p->parent) == NULL;

			if (seen[i] || (pass == 0 && !root))
				continue;
			stack[top] = i;
			depth[top++] = 0;
			/* Pushed backwards: popped in pid order. */
			seen[i] = true;
		}
		while (top > 0) {
			size_t q = stack[--top];
			unsigned d = depth[top];
			int64_t pid = r->procs[q].pid;
			size_t k = first_child(r, kids, n, pid), end = k;

			print_process(&r->procs[q], d, r->nhosts > 0);
			while (end < n && r->procs[kids[end]].parent == pid)
				end++;
			while (end-- > k) {
				size_t j = kids[end];

				if (seen[j])
					continue;
				seen[j] = true;
				stack[top] = j;
				depth[top++] = d + 1;
			}
		}
	}
	free(stack);
	free(depth);
	free(seen);
	free(kids);
	return 0;
}

/*
 * The rest of a host's line in the summary, within 80 columns: its clock
 * without the map's figures (--tree has them), whether its part is whole,
 * and when it was cut, after the trace's start.
 */
static void print_host_brief(const info_report *r, const info_host *h, const char *state)
{
	int64_t t0 = r->min_ts <= r->max_ts ? r->min_ts : 0;

	if (h->clock != NULL && !strcmp(h->clock, "not aligned"))
		printf("not aligned: no head in this trace; %s",
		       h->anchor ? "realtime anchor available" : "no realtime anchor");
	else
		printf("clock %s", h->clock != NULL ? say_esc(h->clock) : "?");
	if (h->clock != NULL && !strcmp(h->clock, "measured") && h->err_ns >= 0)
		printf(" (+/- %s)", say_duration(h->err_ns));
	if (!strcmp(state, "lost"))
		printf(", lost at +%s", say_duration(h->lost_ns - t0));
	else if (!strcmp(state, "incomplete"))
		printf(", incomplete: the head stopped waiting for it at +%s",
		       say_duration(h->lost_ns - t0));
	else
		printf(", %s", say_esc(state));
	printf("\n");
}

/*
 * The hosts of a multi-host trace, one line each: its processes, how its
 * clock was put on the trace's (offset, drift, error bound, samples),
 * and whether its part is whole (lost: when; missing: why and where its
 * part went).
 */
static void print_hosts(const info_report *r, size_t max, bool brief)
{
	size_t shown = 0, complete = 0;

	for (size_t i = 0; i < r->nhosts; i++)
		complete += r->hosts[i].state != NULL && !strcmp(r->hosts[i].state, "complete");
	printf("  hosts:      %zu\n", r->nhosts);
	for (size_t i = 0; i < r->nhosts; i++) {
		const info_host *h = &r->hosts[i];
		const char *state = h->state != NULL ? h->state : "?";

		/* Over max, the hosts that are whole are counted, not listed:
		 * the ones to look at are those that are not. */
		if (r->nhosts > max && !strcmp(state, "complete"))
			continue;
		if (shown++ == max) {
			printf("    ...\n");
			break;
		}

		printf("    %s%s: ", h->name != NULL ? say_esc(h->name) : "?",
		       h->role != NULL && !strcmp(h->role, "head") ? " (head)" : "");
		if (!strcmp(state, "missing")) {
			printf("missing, %s", h->why != NULL ? say_esc(h->why) : "no part");
			if (h->where != NULL)
				printf("; its part went to %s", say_esc(h->where));
			printf("\n");
			continue;
		}
		printf("%" PRIu64 " process%s, ", h->processes, h->processes == 1 ? "" : "es");
		if (brief) {
			print_host_brief(r, h, state);
			continue;
		}
		if (h->clock != NULL && !strcmp(h->clock, "not aligned"))
			printf("not aligned: no head in this trace; %s",
			       h->anchor ? "realtime anchor available" : "no realtime anchor");
		else
			printf("clock %s", h->clock != NULL ? say_esc(h->clock) : "?");
		if (h->clock != NULL && strcmp(h->clock, "reference") != 0 &&
		    strcmp(h->clock, "none") != 0 && strcmp(h->clock, "not aligned") != 0)
			printf(" (offset %+.6f s, drift %+.3f ppm", (double)h->offset_ns / 1e9,
			       h->drift_ppm);
		if (h->clock != NULL && !strcmp(h->clock, "measured"))
			printf(", error bound %.1f us, %" PRIu64 " sample%s)",
			       (double)h->err_ns / 1e3, h->samples, h->samples == 1 ? "" : "s");
		else if (h->clock != NULL && strcmp(h->clock, "reference") != 0 &&
			 strcmp(h->clock, "none") != 0 && strcmp(h->clock, "not aligned") != 0)
			printf(", error bound unknown)");
		if (!strcmp(state, "lost"))
			print_ms(", lost at ", h->lost_ns);
		else if (!strcmp(state, "incomplete"))
			print_ms(", incomplete: the head stopped waiting for it at ", h->lost_ns);
		else
			printf(", %s", say_esc(state));
		printf("\n");
	}
	if (r->nhosts > max && complete > 0)
		printf("    and %zu complete host%s (--tree lists them)\n", complete,
		       complete == 1 ? "" : "s");
}

/* What each file gets. */
enum info_mode { MODE_SUMMARY, MODE_TREE, MODE_PATH };

typedef struct info_opts {
	enum info_mode mode;
	bool json;
} info_opts;

/* Lines of a summary's lists: the whole summary stays within a screen. */
#define SUMMARY_TOP 4
/* Hosts a summary lists (the others are counted). */
#define SUMMARY_HOSTS 4
/* Columns of a program's name in a summary's lists. */
#define NAME_COLS 22
/* The command line in a summary: what fits the line's 80 columns. */
#define COMMAND_COLS 64

/* name made safe for a terminal and cut to cols bytes (an ellipsis says
 * so). Valid until the next call. */
static const char *cut(const char *name, size_t cols)
{
	static char buf[256];
	const char *e = say_esc(name != NULL ? name : "?");
	size_t n = strlen(e);

	if (cols > sizeof(buf) - 4)
		cols = sizeof(buf) - 4;
	if (n <= cols)
		return e;
	/* Cut before a UTF-8 continuation byte, never inside a character. */
	n = cols - 3;
	while (n > 0 && ((unsigned char)e[n] & 0xc0) == 0x80)
		n--;
	memcpy(buf, e, n);
	memcpy(buf + n, "...", 4);
	return buf;
}

static double share(int64_t part, int64_t whole)
{
	return whole > 0 ? 100.0 * (double)part / (double)whole : 0.0;
}

/* The command line, space-separated, cut at COMMAND_COLS. */
static void print_command(char *const *argv)
{
	char line[COMMAND_COLS + 8];
	size_t n = 0;

	line[0] = '\0';
	for (size_t i = 0; argv[i] != NULL && n < sizeof(line) - 1; i++)
		n += (size_t)snprintf(line + n, sizeof(line) - n, "%s%s", i > 0 ? " " : "",
				      argv[i]);
	printf("  command:     %s\n", cut(line, COMMAND_COLS));
}

/* The root process: the first without a parent in the trace (the traced
 * command), or NULL. */
static const info_process *root_of(const info_report *r)
{
	const info_process *best = NULL;

	for (size_t i = 0; i < r->nprocs; i++) {
		const info_process *p = &r->procs[i];

		if (!p->has_record || (p->parent >= 0 && find(r, p->parent) != NULL))
			continue;
		if (best == NULL || (p->start_ns >= 0 && p->start_ns < best->start_ns))
			best = p;
	}
	return best;
}

/* The run's own exit status, said plainly. */
static void print_run_exit(const info_report *r)
{
	const info_process *root = root_of(r);

	if (!r->has_exit_status) {
		printf("  exit:        not in this trace\n");
		return;
	}
	if (r->exit_status == 0)
		printf("  exit:        the command succeeded (exit status 0)\n");
	else if (root != NULL && root->exit_kind == INFO_EXIT_SIGNAL)
		printf("  exit:        the command was %s (exit status %d)\n",
		       root->exit != NULL ? say_esc(root->exit) : "killed", r->exit_status);
	else
		printf("  exit:        the command failed (exit status %d)\n", r->exit_status);
}

/* A list printed in at most WRAP_LINES lines of WRAP_COLS columns, the
 * continuation lines under the first item. */
#define WRAP_COLS 79
#define WRAP_LINES 2
#define WRAP_INDENT 15

typedef struct wrap {
	size_t col, lines;
	size_t max_lines; /* 0: WRAP_LINES */
	bool full;        /* an item did not fit: the list was cut */
} wrap;

/* Prints item (with its ", " before it unless it is the first) if it fits;
 * returns whether it did. */
static bool wrap_add(wrap *w, const char *item, bool first)
{
	size_t n = strlen(item) + (first ? 0 : 2);

	if (w->full)
		return false;
	if (!first && w->col + n > WRAP_COLS) {
		if (w->lines + 1 >= (w->max_lines > 0 ? w->max_lines : WRAP_LINES)) {
			w->full = true;
			return false;
		}
		printf(",\n%*s", WRAP_INDENT, "");
		w->lines++;
		w->col = WRAP_INDENT;
		n -= 2;
		first = true;
	}
	printf("%s%s", first ? "" : ", ", item);
	w->col += n;
	return true;
}

/* A process in a line of its own is named as the critical path names it
 * (process_name: a script with its interpreter, "k.sh (sh)"); the
 * per-program lists group by the program's name. */
static const char *proc_name(const info_process *p)
{
	return p->name != NULL ? p->name : p->prog;
}

static void print_exits(const info_summary *s)
{
	uint64_t rest = s->nonzero;
	size_t shown = 0;
	wrap w = {0};
	char item[600];

	if (s->nonzero == 0) {
		printf("  non-zero:    no process exited with a non-zero code\n");
	} else {
		w.col = (size_t)printf("  non-zero:    %s process%s exited non-zero: ",
				       say_count(s->nonzero), s->nonzero == 1 ? "" : "es");
		for (size_t i = 0; i < s->nby_nonzero && i < SUMMARY_TOP; i++) {
			const info_prog *g = &s->progs[s->by_nonzero[i]];
			int k = snprintf(item, sizeof(item), "%s %s", say_count(g->nonzero),
					 cut(g->name, NAME_COLS));

			if (g->nonzero_under != NULL && k > 0 && (size_t)k < sizeof(item))
				snprintf(item + k, sizeof(item) - (size_t)k, " (under %s)",
					 cut(g->nonzero_under, NAME_COLS));
			if (!wrap_add(&w, item, i == 0))
				break;
			rest -= g->nonzero;
			shown++;
		}
		if (rest > 0) {
			snprintf(item, sizeof(item), "%s of %zu other program%s", say_count(rest),
				 s->nby_nonzero - shown, s->nby_nonzero - shown == 1 ? "" : "s");
			w.full = false;
			w.lines = 0;
			wrap_add(&w, item, false);
		}
		printf("\n");
	}
	if (s->killed > 0) {
		printf("  killed:      %s by a signal: ", say_count(s->killed));
		for (uint64_t i = 0; i < s->killed && i < 3; i++) {
			const info_process *p = s->killed_procs[i];

			printf("%s%s (pid %" PRId64 ", ", i > 0 ? ", " : "",
			       cut(proc_name(p), NAME_COLS), p->pid);
			if (p->exit_signame[0] != '\0')
				printf("%s)", say_esc(p->exit_signame));
			else
				printf("signal %" PRId64 ")", p->exit_value);
		}
		printf("%s\n", s->killed > 3 ? ", ..." : "");
	}
	if (s->running > 0 || s->host_lost > 0 || s->unknown > 0) {
		const char *sep = "";

		printf("  unfinished:  ");
		if (s->running > 0) {
			printf("%s still running when the trace was written",
			       say_count(s->running));
			sep = ", ";
		}
		if (s->host_lost > 0) {
			printf("%s%s cut short by a lost host", sep, say_count(s->host_lost));
			sep = ", ";
		}
		if (s->unknown > 0)
			printf("%s%s whose exit is not known", sep, say_count(s->unknown));
		printf("\n");
	}
}

/* The programs that took the most time and CPU time. */
static void print_programs(const info_report *r, const info_summary *s)
{
	size_t n = s->nprogs < SUMMARY_TOP ? s->nprogs : SUMMARY_TOP;

	printf("  most time:   (lifetimes of a program's processes, summed)\n");
	for (size_t i = 0; i < n; i++) {
		const info_prog *g = &s->progs[s->by_wall[i]];

		printf("    %-*s %10s  %6s process%s\n", NAME_COLS, cut(g->name, NAME_COLS),
		       g->timed > 0 ? say_duration(g->wall_ns) : "?", say_count(g->processes),
		       g->processes == 1 ? "" : "es");
	}
	if (s->with_cpu == 0) {
		printf("  CPU time:    not in this trace (no resource use in its process "
		       "records)\n");
		return;
	}
	printf("  CPU time:    %s (user %s, system %s", say_duration(s->user_ns + s->sys_ns),
	       say_duration(s->user_ns), say_duration(s->sys_ns));
	if (s->with_cpu < r->nprocs)
		printf("; %s of %s processes", say_count(s->with_cpu), say_count(r->nprocs));
	printf("), most:\n");
	n = s->nby_cpu < SUMMARY_TOP ? s->nby_cpu : SUMMARY_TOP;
	for (size_t i = 0; i < n; i++) {
		const info_prog *g = &s->progs[s->by_cpu[i]];

		printf("    %-*s %10s  %5.1f%%  %6s process%s\n", NAME_COLS,
		       cut(g->name, NAME_COLS), say_duration(g->cpu_ns),
		       share(g->cpu_ns, s->user_ns + s->sys_ns), say_count(g->processes),
		       g->processes == 1 ? "" : "es");
	}
}

static void print_memory(const info_summary *s)
{
	wrap w = {.max_lines = 1};
	char item[300];

	if (s->nby_rss == 0) {
		printf("  peak memory: not in this trace\n");
		return;
	}
	w.col = (size_t)printf("  peak memory: ");
	for (size_t i = 0; i < s->nby_rss && i < 3; i++) {
		const info_process *p = s->by_rss[i];

		snprintf(item, sizeof(item), "%s %s (pid %" PRId64 ")", say_size_kib(p->maxrss_kb),
			 cut(proc_name(p), NAME_COLS), p->pid);
		if (!wrap_add(&w, item, i == 0))
			break;
	}
	printf("\n");
}

/* Why a trace has no critical path. */
static const char *no_path_why(const info_report *r, const info_summary *s)
{
	if (s->records == 0)
		return "no forktrace process records: no process tree to walk";
	(void)r;
	return "not computed for this trace";
}

static void print_path_top(const info_report *r, const info_summary *s)
{
	int64_t total = r->path_end_ns - r->path_start_ns;
	size_t n = s->npath_procs < SUMMARY_TOP ? s->npath_procs : SUMMARY_TOP;

	if (!r->has_path) {
		printf("  critical path: %s\n", no_path_why(r, s));
		return;
	}
	printf("  critical path: %s, %zu step%s in %zu process%s (--critical-path), most:\n",
	       say_duration(total), r->nsteps, r->nsteps == 1 ? "" : "s", s->npath_procs,
	       s->npath_procs == 1 ? "" : "es");
	for (size_t i = 0; i < n; i++) {
		const info_path_proc *pp = &s->path_procs[i];

		printf("    %5.1f%%  %10s  %s (pid %" PRId64 ")\n", share(pp->total_ns, total),
		       say_duration(pp->total_ns), cut(pp->name, 40), pp->pid);
	}
}

static const char *format_of(const info_report *r)
{
	if (r->events == 0 && r->error != NULL)
		return "unreadable";
	if (r->hdf5)
		return "forktrace HDF5 trace";
	if (r->array_form)
		return r->gzip ? "Chrome trace JSON (array form, gzip)"
			       : "Chrome trace JSON (array form)";
	return r->gzip ? "Chrome trace JSON (gzip)" : "Chrome trace JSON";
}

/* Lost events as the summary and the tree say them. */
static void print_lost(const info_report *r, const char *label)
{
	if (r->lost_events > 0 || r->lost_in_processes > 0)
		printf("%s%" PRId64 " events\n", label,
		       r->lost_events > 0 ? r->lost_events : (int64_t)r->lost_in_processes);
	else if (r->lost_events == 0)
		printf("%snone\n", label);
	else if (r->viztracer_overflow)
		printf("%sVizTracer's buffer overflowed: the earliest events are lost\n", label);
	else
		printf("%snot recorded by this tool\n", label);
}

/* What went wrong reading the file, and what was repaired. */
static void print_problems(const info_report *r)
{
	if (r->skipped_keys > 0)
		printf("  not read:   %" PRIu64 " top-level key%s (%s)\n", r->skipped_keys,
		       r->skipped_keys == 1 ? "" : "s", say_esc(r->skipped));
	if (r->utf8_fixed > 0)
		printf("  repaired:   %" PRIu64 " events with invalid UTF-8\n", r->utf8_fixed);
	if (r->dup_fixed > 0)
		printf("  repaired:   %" PRIu64 " events with a key twice in an object (the "
		       "last value counts)\n",
		       r->dup_fixed);
	if (r->error != NULL)
		printf("  problem:    %s%s\n", say_esc(r->error),
		       r->truncated ? " (truncated file)" : "");
}

/*
 * The summary: one screen whatever the trace (at most about 30 lines:
 * each list is cut at SUMMARY_TOP, the hosts at SUMMARY_HOSTS).
 */
static void print_summary(const info_report *r, const info_summary *s, const char *name)
{
	printf("%s: %s, %s events, from %s\n", say_esc(name), format_of(r), say_count(r->events),
	       say_esc(r->origin));
	if (r->command != NULL && r->command[0] != NULL)
		print_command(r->command);
	printf("  run:         ");
	if (r->min_ts <= r->max_ts)
		printf("%s, ", say_duration(r->max_ts - r->min_ts));
	printf("%s process%s", say_count(r->nprocs), r->nprocs == 1 ? "" : "es");
	if (s->ranked > 0) {
		printf(", %s with a rank (%" PRId64 "-%" PRId64, say_count(s->ranked), s->rank_min,
		       s->rank_max);
		if (s->launcher != NULL)
			printf(", %s", cut(s->launcher, 30));
		printf(")");
	}
	printf("\n");
	print_lost(r, "  lost:        ");
	print_run_exit(r);
	if (s->records == 0) {
		printf("  not known:   exits, lifetimes, CPU time, memory, critical path (no "
		       "forktrace process records)\n");
	} else {
		if (s->records < r->nprocs)
			printf("  records:     %s of %s processes have forktrace's process record\n",
			       say_count(s->records), say_count(r->nprocs));
		print_exits(s);
		print_programs(r, s);
		print_memory(s);
		print_path_top(r, s);
	}
	if (r->nhosts > 0)
		print_hosts(r, SUMMARY_HOSTS, true);
	print_problems(r);
}

/* --critical-path: every step, then every process on it. */
static void print_path(const info_report *r, const info_summary *s, const char *name)
{
	int64_t total = r->path_end_ns - r->path_start_ns;

	printf("%s: ", say_esc(name));
	if (!r->has_path) {
		printf("no critical path: %s\n", no_path_why(r, s));
		print_problems(r);
		return;
	}
	printf("critical path, %s (%.3f ms to %.3f ms), %zu step%s\n", say_duration(total),
	       (double)r->path_start_ns / 1e6, (double)r->path_end_ns / 1e6, r->nsteps,
	       r->nsteps == 1 ? "" : "s");
	printf("  steps (when after the path's start, own time, share, process):\n");
	for (size_t i = 0; i < r->nsteps; i++) {
		const info_step *st = &r->steps[i];

		printf("    +%-10s %10s  %5.1f%%  %s (pid %" PRId64 ")\n",
		       say_duration(st->start_ns - r->path_start_ns),
		       say_duration(st->end_ns - st->start_ns),
		       share(st->end_ns - st->start_ns, total), cut(st->name, 60), st->pid);
	}
	printf("  per process (total on the path, share, steps):\n");
	for (size_t i = 0; i < s->npath_procs; i++) {
		const info_path_proc *pp = &s->path_procs[i];

		printf("    %10s  %5.1f%%  %4zu  %s (pid %" PRId64 ")\n",
		       say_duration(pp->total_ns), share(pp->total_ns, total), pp->steps,
		       cut(pp->name, 60), pp->pid);
	}
	print_problems(r);
}

/* --tree: what the file holds, every process in its tree. */
static void print_full(const info_report *r, const char *name)
{
	bool records = false;
	size_t threads = 0;

	for (size_t i = 0; i < r->nprocs; i++) {
		records |= r->procs[i].has_record;
		threads += r->procs[i].nthreads;
	}
	printf("%s: %s", say_esc(name),
	       r->events == 0 && r->error != NULL ? "unreadable"
	       : r->hdf5                          ? "forktrace HDF5 trace"
						  : "Chrome trace JSON");
	if (r->hdf5)
		printf(", %" PRIu64 " bytes of JSON events", r->bytes);
	else
		printf(" (%s form%s), %" PRIu64 " bytes", r->array_form ? "array" : "object",
		       r->gzip ? ", gzip" : "", r->bytes);
	if (r->gzip)
		printf(" (%" PRIu64 " compressed)", r->file_bytes);
	printf("\n  origin:     %s\n", say_esc(r->origin));
	print_phases(r);
	if (r->min_ts <= r->max_ts) {
		print_ms("  time span:  ", r->min_ts);
		print_ms(" to ", r->max_ts);
		print_ms(" (", r->max_ts - r->min_ts);
		printf(")\n");
	}
	printf("  processes:  %zu, threads: %zu\n", r->nprocs, threads);
	print_lost(r, "  lost:       ");
	if (r->nhosts > 0)
		print_hosts(r, SIZE_MAX, false);
	print_problems(r);
	printf("  %s:\n", records ? "process tree (pid name [exit], lifetime, CPU, peak memory)"
				  : "processes");
	if (records)
		print_tree(r);
	else
		for (size_t i = 0; i < r->nprocs; i++)
			print_process(&r->procs[i], 0, r->nhosts > 0);
}

/* ---- --json ------------------------------------------------------------- */

/* A string of the trace in the JSON: escaped as say_esc escapes text,
 * so that the JSON too is safe on a terminal. NULL writes null. */
static void json_str(jsonw *w, const char *v)
{
	char *q;

	if (v == NULL) {
		jsonw_null(w);
		return;
	}
	q = say_json_str(v);
	if (q == NULL) {
		ostream_fail(w->os, -ENOMEM);
		return;
	}
	jsonw_raw(w, (strview){q, strlen(q)});
	free(q);
}

static void json_kv_str(jsonw *w, const char *key, const char *v)
{
	jsonw_key(w, key);
	json_str(w, v);
}

static void json_strv(jsonw *w, char *const *v)
{
	if (v == NULL) {
		jsonw_null(w);
		return;
	}
	jsonw_arr_begin(w);
	for (size_t i = 0; v[i] != NULL; i++)
		json_str(w, v[i]);
	jsonw_arr_end(w);
}

static void json_dur_or_null(jsonw *w, const char *key, bool known, int64_t ns)
{
	jsonw_key(w, key);
	if (known)
		jsonw_i64(w, ns);
	else
		jsonw_null(w);
}

static void json_prog(jsonw *w, const info_prog *g)
{
	jsonw_obj_begin(w);
	json_kv_str(w, "name", g->name);
	jsonw_kv_u64(w, "processes", g->processes);
	jsonw_kv_i64(w, "wall_ns", g->wall_ns);
	json_dur_or_null(w, "cpu_ns", g->with_cpu > 0, g->cpu_ns);
	json_dur_or_null(w, "maxrss_kb", g->maxrss_kb >= 0, g->maxrss_kb);
	jsonw_kv_u64(w, "nonzero_exits", g->nonzero);
	jsonw_kv_u64(w, "killed", g->killed);
	jsonw_obj_end(w);
}

static void json_proc_ref(jsonw *w, const info_process *p)
{
	jsonw_kv_i64(w, "pid", p->pid);
	json_kv_str(w, "name", p->prog != NULL ? p->prog : p->name);
}

static void json_exits(jsonw *w, const info_summary *s)
{
	jsonw_key(w, "exits");
	jsonw_obj_begin(w);
	jsonw_kv_u64(w, "nonzero", s->nonzero);
	jsonw_kv_u64(w, "killed", s->killed);
	jsonw_kv_u64(w, "running", s->running);
	jsonw_kv_u64(w, "host_lost", s->host_lost);
	jsonw_kv_u64(w, "unknown", s->unknown);
	jsonw_key(w, "nonzero_by_program");
	jsonw_arr_begin(w);
	for (size_t i = 0; i < s->nby_nonzero; i++) {
		const info_prog *g = &s->progs[s->by_nonzero[i]];

		jsonw_obj_begin(w);
		json_kv_str(w, "name", g->name);
		jsonw_kv_u64(w, "count", g->nonzero);
		json_kv_str(w, "under", g->nonzero_under);
		jsonw_obj_end(w);
	}
	jsonw_arr_end(w);
	jsonw_key(w, "killed_processes");
	jsonw_arr_begin(w);
	for (uint64_t i = 0; i < s->killed; i++) {
		const info_process *p = s->killed_procs[i];

		jsonw_obj_begin(w);
		json_proc_ref(w, p);
		jsonw_kv_i64(w, "signal", p->exit_value);
		json_kv_str(w, "signal_name", p->exit_signame[0] != '\0' ? p->exit_signame : NULL);
		jsonw_obj_end(w);
	}
	jsonw_arr_end(w);
	jsonw_obj_end(w);
}

static void json_path(jsonw *w, const info_report *r, const info_summary *s, bool steps, size_t top)
{
	int64_t total = r->path_end_ns - r->path_start_ns;

	jsonw_key(w, "critical_path");
	if (!r->has_path) {
		jsonw_null(w);
		return;
	}
	jsonw_obj_begin(w);
	jsonw_kv_i64(w, "start_ns", r->path_start_ns);
	jsonw_kv_i64(w, "end_ns", r->path_end_ns);
	jsonw_kv_u64(w, "steps", r->nsteps);
	if (steps) {
		jsonw_key(w, "step_list");
		jsonw_arr_begin(w);
		for (size_t i = 0; i < r->nsteps; i++) {
			const info_step *st = &r->steps[i];

			jsonw_obj_begin(w);
			jsonw_kv_i64(w, "pid", st->pid);
			json_kv_str(w, "name", st->name);
			jsonw_kv_i64(w, "start_ns", st->start_ns);
			jsonw_kv_i64(w, "end_ns", st->end_ns);
			jsonw_key(w, "share");
			jsonw_f64(w, share(st->end_ns - st->start_ns, total) / 100);
			jsonw_obj_end(w);
		}
		jsonw_arr_end(w);
	}
	jsonw_key(w, "processes");
	jsonw_arr_begin(w);
	for (size_t i = 0; i < s->npath_procs && i < top; i++) {
		const info_path_proc *pp = &s->path_procs[i];

		jsonw_obj_begin(w);
		jsonw_kv_i64(w, "pid", pp->pid);
		json_kv_str(w, "name", pp->name);
		jsonw_kv_i64(w, "total_ns", pp->total_ns);
		jsonw_kv_u64(w, "steps", pp->steps);
		jsonw_key(w, "share");
		jsonw_f64(w, share(pp->total_ns, total) / 100);
		jsonw_obj_end(w);
	}
	jsonw_arr_end(w);
	jsonw_obj_end(w);
}

/* Programs in the JSON summary's lists. */
#define JSON_TOP 10

static void json_summary(jsonw *w, const info_report *r, const info_summary *s, const char *name,
			 bool whole_path)
{
	jsonw_obj_begin(w);
	json_kv_str(w, "file", name);
	json_kv_str(w, "format", r->hdf5 ? "hdf5" : r->gzip ? "json.gz" : "json");
	json_kv_str(w, "origin", r->origin);
	jsonw_kv_u64(w, "events", r->events);
	jsonw_key(w, "command");
	json_strv(w, r->command);
	json_dur_or_null(w, "exit_status", r->has_exit_status, r->exit_status);
	json_dur_or_null(w, "start_ns", r->min_ts <= r->max_ts, r->min_ts);
	json_dur_or_null(w, "end_ns", r->min_ts <= r->max_ts, r->max_ts);
	json_dur_or_null(w, "duration_ns", r->min_ts <= r->max_ts, r->max_ts - r->min_ts);
	jsonw_kv_u64(w, "processes", r->nprocs);
	jsonw_kv_u64(w, "records", s->records);
	json_dur_or_null(w, "lost_events", r->lost_events >= 0 || r->lost_in_processes > 0,
			 r->lost_events > 0 ? r->lost_events : (int64_t)r->lost_in_processes);
	if (s->records == 0) {
		jsonw_key(w, "exits");
		jsonw_null(w);
	} else {
		json_exits(w, s);
	}
	jsonw_key(w, "cpu");
	if (s->with_cpu == 0) {
		jsonw_null(w);
	} else {
		jsonw_obj_begin(w);
		jsonw_kv_u64(w, "processes", s->with_cpu);
		jsonw_kv_i64(w, "user_ns", s->user_ns);
		jsonw_kv_i64(w, "sys_ns", s->sys_ns);
		jsonw_obj_end(w);
	}
	jsonw_key(w, "programs_by_wall");
	jsonw_arr_begin(w);
	for (size_t i = 0; s->records > 0 && i < s->nprogs && i < JSON_TOP; i++)
		json_prog(w, &s->progs[s->by_wall[i]]);
	jsonw_arr_end(w);
	jsonw_key(w, "programs_by_cpu");
	jsonw_arr_begin(w);
	for (size_t i = 0; i < s->nby_cpu && i < JSON_TOP; i++)
		json_prog(w, &s->progs[s->by_cpu[i]]);
	jsonw_arr_end(w);
	jsonw_key(w, "peak_memory");
	jsonw_arr_begin(w);
	for (size_t i = 0; i < s->nby_rss && i < JSON_TOP; i++) {
		jsonw_obj_begin(w);
		json_proc_ref(w, s->by_rss[i]);
		jsonw_kv_i64(w, "maxrss_kb", s->by_rss[i]->maxrss_kb);
		jsonw_obj_end(w);
	}
	jsonw_arr_end(w);
	json_path(w, r, s, whole_path, whole_path ? SIZE_MAX : JSON_TOP);
	jsonw_key(w, "ranks");
	if (s->ranked == 0) {
		jsonw_null(w);
	} else {
		jsonw_obj_begin(w);
		jsonw_kv_u64(w, "processes", s->ranked);
		jsonw_kv_i64(w, "min", s->rank_min);
		jsonw_kv_i64(w, "max", s->rank_max);
		json_kv_str(w, "launcher", s->launcher);
		jsonw_obj_end(w);
	}
	jsonw_key(w, "hosts");
	jsonw_arr_begin(w);
	for (size_t i = 0; i < r->nhosts; i++) {
		const info_host *h = &r->hosts[i];

		jsonw_obj_begin(w);
		json_kv_str(w, "name", h->name);
		json_kv_str(w, "role", h->role);
		json_kv_str(w, "state", h->state);
		jsonw_kv_u64(w, "processes", h->processes);
		jsonw_obj_end(w);
	}
	jsonw_arr_end(w);
	json_kv_str(w, "problem", r->error);
	jsonw_obj_end(w);
}

/* What the trace at path (or, when m is not NULL, the trace of model m)
 * holds, under name, as o says; in_dir as info_read's. w: the JSON
 * writer of --json, else NULL. */
static int show(const char *path, bool in_dir, const model_trace *m, const char *name,
		const info_opts *o, jsonw *w)
{
	info_report r;
	info_summary s;
	int err = m != NULL ? info_read_model(m, name, &r) : info_read(path, in_dir, &r);

	if (err == 0)
		err = info_summarize(&r, &s);
	if (err < 0) {
		fprintf(stderr, "forktrace: %s: out of memory\n", say_esc(name));
		info_free(&r);
		return 1;
	}
	if (w != NULL)
		json_summary(w, &r, &s, name, o->mode == MODE_PATH);
	else if (o->mode == MODE_TREE)
		print_full(&r, name);
	else if (o->mode == MODE_PATH)
		print_path(&r, &s, name);
	else
		print_summary(&r, &s, name);
	if (r.error != NULL)
		fprintf(stderr, "forktrace: %s: %s\n", say_esc(name), say_esc(r.error));
	err = r.error != NULL || r.utf8_fixed > 0 || r.dup_fixed > 0;
	info_summary_free(&s);
	info_free(&r);
	return err;
}

/* Between two files' outputs: a blank line (text); JSON's commas are the
 * writer's. */
static void next_output(size_t *shown, const jsonw *w)
{
	if ((*shown)++ > 0 && w == NULL)
		printf("\n");
}

int info_main(int argc, char **argv)
{
	enum { OPT_TREE = 256, OPT_JSON, OPT_PATH };
	static const struct option longopts[] = {
		{"help", no_argument, NULL, 'h'},
		{"tree", no_argument, NULL, OPT_TREE},
		{"json", no_argument, NULL, OPT_JSON},
		{"critical-path", no_argument, NULL, OPT_PATH},
		{NULL, 0, NULL, 0},
	};
	int c, code = 0;
	spill_inputs sp;
	const char **paths = NULL;
	char **files = NULL;
	bool *in_dir = NULL;
	size_t npaths = 0, nfiles = 0, shown = 0, outputs;
	info_opts o = {.mode = MODE_SUMMARY};
	ostream os;
	jsonw jw, *w = NULL;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'h':
			fputs(info_usage, stdout);
			return 0;
		case OPT_TREE:
		case OPT_PATH:
			if (o.mode != MODE_SUMMARY)
				return say_usage_error("info", "--tree and --critical-path are two "
							       "views: give one");
			o.mode = c == OPT_TREE ? MODE_TREE : MODE_PATH;
			break;
		case OPT_JSON:
			o.json = true;
			break;
		default:
			return say_usage_error("info", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (o.json && o.mode == MODE_TREE)
		return say_usage_error("info", "--json is the summary (or with --critical-path "
					       "the path), not the tree");
	if (optind >= argc)
		return say_usage_error("info", "no trace file given");
	/* The inputs combine and report read, the same way: directories,
	 * spill files (one trace of them all, the last input), "-" for
	 * standard input. */
	if (spill_prepare((const char *const *)argv + optind, (size_t)(argc - optind), &sp) < 0 ||
	    (paths = calloc(sp.nsrc + 1, sizeof(*paths))) == NULL) {
		fprintf(stderr, "forktrace: out of memory\n");
		spill_release(&sp);
		return 1;
	}
	for (size_t i = 0; i < sp.nsrc; i++)
		if (sp.src[i].model == NULL)
			paths[npaths++] = sp.src[i].path;
	if (merge_expand(paths, npaths, &files, &in_dir, &nfiles) < 0) {
		fprintf(stderr, "forktrace: out of memory\n");
		free(paths);
		spill_release(&sp);
		return 1;
	}
	outputs = nfiles + sp.nnodes + (sp.model != NULL);
	if (o.json) {
		fflush(stdout);
		if (ostream_open(&os, STDOUT_FILENO, -1) < 0) {
			fprintf(stderr, "forktrace: out of memory\n");
			code = 1;
			goto out;
		}
		w = &jw;
		jsonw_init(w, &os);
		/* Several files: an array of their objects. */
		if (outputs > 1)
			jsonw_arr_begin(w);
	}
	for (size_t i = 0; i < nfiles; i++) {
		next_output(&shown, w);
		code |= show(files[i], in_dir[i], NULL, files[i], &o, w);
	}
	/* Each node-output file is one host's part: a model of its own. */
	for (size_t i = 0; i < sp.nnodes; i++) {
		next_output(&shown, w);
		code |= show(NULL, false, sp.nodes[i].model, sp.nodes[i].path, &o, w);
	}
	if (sp.model != NULL) {
		char spills[64];

		snprintf(spills, sizeof(spills), "%zu spill file%s", sp.nspill,
			 sp.nspill == 1 ? "" : "s");
		next_output(&shown, w);
		code |= show(NULL, false, sp.model, spills, &o, w);
	}
	if (w != NULL) {
		if (outputs > 1)
			jsonw_arr_end(w);
		ostream_write(&os, "\n", 1);
		if (ostream_finish(&os) < 0) {
			fprintf(stderr, "forktrace: cannot write the JSON to standard output\n");
			code = 1;
		}
	}
out:
	for (size_t i = 0; i < nfiles; i++)
		free(files[i]);
	free(files);
	free(in_dir);
	free(paths);
	code |= sp.problems > 0;
	spill_release(&sp);
	return code;
}
