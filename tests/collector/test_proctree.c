/*
 * The process tree gets the same facts about a child in whatever order
 * the event loop reads them: the parent's FORK record, the child's HELLO
 * and EXIT (its own connection or table slot), the parent's WAIT record,
 * and the collector's own reaping of an orphan. Each order must give one
 * process with its parent and its exit status. Every permutation is
 * applied here to the collector's proctree.c (the e2e tests in
 * tests/e2e/test_adv_tree.py check the orders real programs produce).
 * So must its resource use: EXIT's own figure and its descendants', the
 * reaper's (WAIT or the collector's) make the same ru in every order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "internal.h"

#define T0 5000000000000ll
#define ROOT 100
#define CHILD 300

enum fact { F_FORK, F_HELLO, F_EXIT, F_WAIT, F_REAP, F_N };
static const char *const fact_name[F_N] = {"FORK", "HELLO", "EXIT", "WAIT", "REAP"};

/* The child's RUSAGE_SELF and RUSAGE_CHILDREN at exit, its reaper's wait4
 * figure (at least their sum), and what the reaper's less its children's
 * is, with its own peak. */
static const model_rusage ru_exit_self = {100, 50, 2000, 10, 1, 3, 4, 5, 6};
static const model_rusage ru_exit_children = {40, 20, 9000, 5, 1, 1, 1, 2, 3};
static const model_rusage ru_reaper = {150, 75, 9000, 16, 2, 4, 5, 7, 9};
static const model_rusage ru_own = {110, 55, 2000, 11, 1, 3, 4, 5, 6};

static wire_msg msg(unsigned type, int64_t ts, int64_t tid)
{
	wire_msg m;

	memset(&m, 0, sizeof(m));
	m.type = type;
	m.ts = ts;
	m.tid = tid;
	m.present = (1ull << FT_K_TS) | (1ull << FT_K_TID);
	return m;
}

static wire_msg hello(int64_t pid, int64_t ppid, uint64_t ticks, int64_t ts, uint64_t flags)
{
	wire_msg m = msg(FT_MSG_HELLO, ts, pid);

	m.pid = pid;
	m.ppid = ppid;
	m.start_ticks = ticks;
	m.flags = flags;
	m.present |= (1ull << FT_K_PID) | (1ull << FT_K_PPID) | (1ull << FT_K_START_TICKS) |
		     (1ull << FT_K_FLAGS);
	return m;
}

struct scenario {
	const char *what;
	bool hello;         /* the child speaks (HELLO, then EXIT) */
	bool orphan;        /* the parent never waits: the collector reaps */
	int64_t hello_ppid; /* the parent pid the child's HELLO names */
	uint64_t hello_flags;
	int kind; /* FT_SPAWN_FORK, FT_SPAWN_VFORK, FT_SPAWN_POSIX_SPAWN */
};

/* Applies the facts in the order given and checks the result. */
static void run_order(const struct scenario *sc, const enum fact *order, int n)
{
	model_trace *t = model_new();
	proc_tree *pt = proc_tree_new(t);
	proc_conn root_c, child_c;
	const char *argv[] = {"root", NULL};
	char desc[256];
	int status = 4 << 8;
	size_t len = 0;

	len += (size_t)snprintf(desc + len, sizeof(desc) - len, "%s:", sc->what);
	for (int i = 0; i < n; i++)
		len += (size_t)snprintf(desc + len, sizeof(desc) - len, " %s", fact_name[order[i]]);
	memset(&root_c, 0, sizeof(root_c));
	memset(&child_c, 0, sizeof(child_c));
	proc_add_root(pt, ROOT, argv, "/bin/root", T0);
	wire_msg rh = hello(ROOT, getpid(), 11, T0 + 1, 0);
	CHECK_MSG(proc_apply(pt, &root_c, &rh, T0 + 1) == 0, "%s", desc);
	for (int i = 0; i < n; i++) {
		wire_msg m;

		switch (order[i]) {
		case F_FORK:
			if (sc->kind == FT_SPAWN_POSIX_SPAWN) {
				m = msg(FT_MSG_SPAWN, T0 + 10, ROOT);
				m.err = 0;
				m.present |= 1ull << FT_K_ERRNO;
			} else {
				m = msg(FT_MSG_FORK, T0 + 10, ROOT);
			}
			m.child = CHILD;
			m.kind = (uint64_t)sc->kind;
			m.present |= (1ull << FT_K_CHILD) | (1ull << FT_K_KIND);
			CHECK_MSG(proc_apply(pt, &root_c, &m, T0 + 100) == 0, "%s", desc);
			break;
		case F_HELLO:
			m = hello(CHILD, sc->hello_ppid, 777, T0 + 20, sc->hello_flags);
			CHECK_MSG(proc_apply(pt, &child_c, &m, T0 + 100) == 0, "%s", desc);
			break;
		case F_EXIT:
			m = msg(FT_MSG_EXIT, T0 + 30, CHILD);
			m.code = 4;
			m.ru = ru_exit_self;
			m.ru_children = ru_exit_children;
			m.present |= (1ull << FT_K_CODE) | (1ull << FT_K_RUSAGE) |
				     (1ull << FT_K_RUSAGE_CHILDREN);
			CHECK_MSG(proc_apply(pt, &child_c, &m, T0 + 100) == 0, "%s", desc);
			proc_conn_closed(pt, &child_c, T0 + 100);
			break;
		case F_WAIT:
			m = msg(FT_MSG_WAIT, T0 + 40, ROOT);
			m.child = CHILD;
			m.status = status;
			m.ru = ru_reaper;
			m.present |= (1ull << FT_K_CHILD) | (1ull << FT_K_STATUS) |
				     (1ull << FT_K_RUSAGE);
			CHECK_MSG(proc_apply(pt, &root_c, &m, T0 + 100) == 0, "%s", desc);
			break;
		case F_REAP:
			proc_reaped(pt, CHILD, status, &ru_reaper, T0 + 50);
			break;
		default:
			break;
		}
	}
	proc_conn_closed(pt, &root_c, T0 + 60);
	proc_reaped(pt, ROOT, 0, NULL, T0 + 60);
	proc_finish(pt, T0 + 200, true);

	model_process *root = NULL, *child = NULL;
	int nchild = 0;
	CHECK_MSG(t->nprocs == 2, "%s: %zu processes, expected 2", desc, t->nprocs);
	for (size_t i = 0; i < t->nprocs; i++) {
		model_process *p = t->procs[i];
		if (p->pid == ROOT)
			root = p;
		if (p->pid == CHILD) {
			child = p;
			nchild++;
		}
	}
	CHECK_MSG(root && child && nchild == 1, "%s: root %p, %d children", desc, (void *)root,
		  nchild);
	if (root && child) {
		CHECK_MSG(child->parent == root, "%s: the child's parent is %lld", desc,
			  child->parent ? (long long)child->parent->pid : -1ll);
		CHECK_MSG(child->exit_kind == MODEL_EXIT_CODE && child->exit_value == 4,
			  "%s: exit kind %d value %d", desc, (int)child->exit_kind,
			  child->exit_value);
		CHECK_MSG(child->spawn_ns == T0 + 10 && child->spawn_kind == sc->kind,
			  "%s: spawn %lld kind %d", desc, (long long)child->spawn_ns,
			  child->spawn_kind);
		CHECK_MSG(child->start_ns == T0 + 10, "%s: start %lld", desc,
			  (long long)child->start_ns);
		CHECK_MSG(child->out_pid == CHILD, "%s: trace pid %lld", desc,
			  (long long)child->out_pid);
		CHECK_MSG(!sc->hello || child->start_ticks == 777, "%s: start ticks %llu", desc,
			  (unsigned long long)child->start_ticks);
		CHECK_MSG(child->end_ns >= T0 + 30 && child->end_ns <= T0 + 50, "%s: end %lld",
			  desc, (long long)child->end_ns);
		/* An exec'd image (not a fork child's HELLO) is the last one;
		 * only a fork child has the parent's image before it, a
		 * vfork child only when it never exec'd. */
		size_t want = 1;
		if (sc->kind == FT_SPAWN_FORK && sc->hello && !(sc->hello_flags & FT_HELLO_FORKED))
			want = 2;
		CHECK_MSG(child->nsegs == want, "%s: %zu images, expected %zu", desc, child->nsegs,
			  want);
		/* With EXIT: the reaper's less its descendants'; without: the
		 * reaper's whole. */
		enum model_ru_source src = sc->hello ? MODEL_RU_WAIT : MODEL_RU_WAIT_WITH_DESC;
		const model_rusage *ru = sc->hello ? &ru_own : &ru_reaper;
		CHECK_MSG(child->ru_source == src && memcmp(&child->ru, ru, sizeof(*ru)) == 0,
			  "%s: rusage source %d user %lld sys %lld maxrss %lld minflt %lld", desc,
			  (int)child->ru_source, (long long)child->ru.user_ns,
			  (long long)child->ru.sys_ns, (long long)child->ru.maxrss_kb,
			  (long long)child->ru.minflt);
	}
	proc_tree_free(pt);
	model_free(t);
}

/* Every order of facts[0..n) in which a before[] pair keeps its order. */
static void permute(const struct scenario *sc, enum fact *facts, int k, int n)
{
	if (k == n) {
		int pos[F_N];

		for (int i = 0; i < n; i++)
			pos[facts[i]] = i;
		/* The child's EXIT travels after its HELLO, on one stream. */
		for (int i = 0; i < n; i++)
			if (facts[i] == F_EXIT && pos[F_HELLO] > i)
				return;
		run_order(sc, facts, n);
		return;
	}
	for (int i = k; i < n; i++) {
		enum fact tmp = facts[k];

		facts[k] = facts[i];
		facts[i] = tmp;
		permute(sc, facts, k + 1, n);
		facts[i] = facts[k];
		facts[k] = tmp;
	}
}

/*
 * Pid reuse: child A (pid CHILD, forked at +10, silent, an orphan reaped
 * at +15 with exit 4), then child B (same pid, forked at +20, its image
 * says HELLO at +25 and EXIT 5 at +27, reaped at +30). Every order the
 * collector can read them in: the root's two FORK records in order, the
 * reaps in order, B's HELLO before its EXIT, and nothing of B before A's
 * reaping (B's pid was free only then).
 */
enum reuse_fact { R_FORK_A, R_REAP_A, R_FORK_B, R_HELLO_B, R_EXIT_B, R_REAP_B, R_N };

static bool reuse_order_ok(const int *pos)
{
	return pos[R_FORK_A] < pos[R_FORK_B] && pos[R_REAP_A] < pos[R_FORK_B] &&
	       pos[R_REAP_A] < pos[R_HELLO_B] && pos[R_REAP_A] < pos[R_REAP_B] &&
	       pos[R_HELLO_B] < pos[R_EXIT_B];
}

static void reuse_run(const int *order)
{
	model_trace *t = model_new();
	proc_tree *pt = proc_tree_new(t);
	proc_conn root_c, b_c;
	const char *argv[] = {"root", NULL};
	char desc[128];
	size_t len = 0;
	static const char *const names[R_N] = {"FORK_A",  "REAP_A", "FORK_B",
					       "HELLO_B", "EXIT_B", "REAP_B"};

	for (int i = 0; i < R_N; i++)
		len += (size_t)snprintf(desc + len, sizeof(desc) - len, " %s", names[order[i]]);
	memset(&root_c, 0, sizeof(root_c));
	memset(&b_c, 0, sizeof(b_c));
	proc_add_root(pt, ROOT, argv, "/bin/root", T0);
	wire_msg rh = hello(ROOT, getpid(), 11, T0 + 1, 0);
	proc_apply(pt, &root_c, &rh, T0 + 1);
	for (int i = 0; i < R_N; i++) {
		wire_msg m;

		switch (order[i]) {
		case R_FORK_A:
		case R_FORK_B:
			m = msg(FT_MSG_FORK, order[i] == R_FORK_A ? T0 + 10 : T0 + 20, ROOT);
			m.child = CHILD;
			m.kind = FT_SPAWN_FORK;
			m.present |= (1ull << FT_K_CHILD) | (1ull << FT_K_KIND);
			proc_apply(pt, &root_c, &m, T0 + 100);
			break;
		case R_REAP_A:
			proc_reaped(pt, CHILD, 4 << 8, NULL, T0 + 15);
			break;
		case R_HELLO_B:
			m = hello(CHILD, getpid(), 888, T0 + 25, 0);
			proc_apply(pt, &b_c, &m, T0 + 100);
			break;
		case R_EXIT_B:
			m = msg(FT_MSG_EXIT, T0 + 27, CHILD);
			m.code = 5;
			m.present |= 1ull << FT_K_CODE;
			proc_apply(pt, &b_c, &m, T0 + 100);
			proc_conn_closed(pt, &b_c, T0 + 100);
			break;
		case R_REAP_B:
			proc_reaped(pt, CHILD, 5 << 8, NULL, T0 + 30);
			break;
		}
	}
	proc_conn_closed(pt, &root_c, T0 + 60);
	proc_reaped(pt, ROOT, 0, NULL, T0 + 60);
	proc_finish(pt, T0 + 200, true);

	model_process *a = NULL, *b = NULL;
	CHECK_MSG(t->nprocs == 3, "pid reuse%s: %zu processes, expected 3", desc, t->nprocs);
	for (size_t i = 0; i < t->nprocs; i++) {
		model_process *p = t->procs[i];
		if (p->pid == CHILD && p->exit_value == 4)
			a = p;
		else if (p->pid == CHILD && p->exit_value == 5)
			b = p;
	}
	CHECK_MSG(a && b, "pid reuse%s: A %p B %p", desc, (void *)a, (void *)b);
	if (a && b) {
		CHECK_MSG(a->parent && a->parent->pid == ROOT && a->spawn_ns == T0 + 10,
			  "pid reuse%s: A's creator", desc);
		CHECK_MSG(b->parent && b->parent->pid == ROOT && b->spawn_ns == T0 + 20 &&
				  b->start_ticks == 888,
			  "pid reuse%s: B's creator %lld ticks %llu", desc, (long long)b->spawn_ns,
			  (unsigned long long)b->start_ticks);
		CHECK_MSG(a->out_pid != b->out_pid, "pid reuse%s: one trace pid", desc);
	}
	proc_tree_free(pt);
	model_free(t);
}

static void reuse_permute(int *facts, int k)
{
	if (k == R_N) {
		int pos[R_N];

		for (int i = 0; i < R_N; i++)
			pos[facts[i]] = i;
		if (reuse_order_ok(pos))
			reuse_run(facts);
		return;
	}
	for (int i = k; i < R_N; i++) {
		int tmp = facts[k];

		facts[k] = facts[i];
		facts[i] = tmp;
		reuse_permute(facts, k + 1);
		facts[i] = facts[k];
		facts[k] = tmp;
	}
}

/*
 * A fork child that speaks (its own HELLO with FT_HELLO_FORKED, an event
 * chunk, EXEC) on one stream, the image it exec'd (HELLO, a module, an
 * event chunk, EXIT) on another, the parent's FORK and WAIT on a third:
 * every interleaving gives one process with the fork child's image first
 * and the exec'd image second, each with its own chunks and module, even
 * when an image learnt late is put in front of those already known.
 */
enum img_fact {
	I_FORK,
	I_F_HELLO,
	I_F_EVENTS,
	I_F_EXEC,
	I_X_HELLO,
	I_X_MODULE,
	I_X_EVENTS,
	I_X_EXIT,
	I_WAIT,
	I_N
};

static bool img_order_ok(const int *pos)
{
	return pos[I_FORK] < pos[I_WAIT] && pos[I_F_HELLO] < pos[I_F_EVENTS] &&
	       pos[I_F_EVENTS] < pos[I_F_EXEC] && pos[I_X_HELLO] < pos[I_X_MODULE] &&
	       pos[I_X_MODULE] < pos[I_X_EVENTS] && pos[I_X_EVENTS] < pos[I_X_EXIT];
}

static int img_runs;

static void img_run(const int *order)
{
	model_trace *t = model_new();
	proc_tree *pt = proc_tree_new(t);
	proc_conn root_c, f_c, x_c;
	const char *argv[] = {"root", NULL};
	static const char *const names[I_N] = {"FORK",     "F_HELLO", "F_EVENTS",
					       "F_EXEC",   "X_HELLO", "X_MODULE",
					       "X_EVENTS", "X_EXIT",  "WAIT"};
	char desc[160];
	size_t len = 0;

	img_runs++;
	for (int i = 0; i < I_N; i++)
		len += (size_t)snprintf(desc + len, sizeof(desc) - len, " %s", names[order[i]]);
	memset(&root_c, 0, sizeof(root_c));
	memset(&f_c, 0, sizeof(f_c));
	memset(&x_c, 0, sizeof(x_c));
	proc_add_root(pt, ROOT, argv, "/bin/root", T0);
	wire_msg rh = hello(ROOT, getpid(), 11, T0 + 1, 0);
	proc_apply(pt, &root_c, &rh, T0 + 1);
	for (int i = 0; i < I_N; i++) {
		wire_msg m;

		switch (order[i]) {
		case I_FORK:
			m = msg(FT_MSG_FORK, T0 + 10, ROOT);
			m.child = CHILD;
			m.kind = FT_SPAWN_FORK;
			m.present |= (1ull << FT_K_CHILD) | (1ull << FT_K_KIND);
			proc_apply(pt, &root_c, &m, T0 + 100);
			break;
		case I_F_HELLO:
			m = hello(CHILD, ROOT, 777, T0 + 12, FT_HELLO_FORKED);
			proc_apply(pt, &f_c, &m, T0 + 100);
			break;
		case I_F_EVENTS:
		case I_X_EVENTS:
			m = msg(FT_MSG_EVENTS, order[i] == I_F_EVENTS ? T0 + 13 : T0 + 25, CHILD);
			m.data.ptr = order[i] == I_F_EVENTS ? "F" : "X";
			m.data.len = 1;
			m.present |= (1ull << FT_K_SLOT) | (1ull << FT_K_OFFSET) |
				     (1ull << FT_K_DATA);
			proc_apply(pt, order[i] == I_F_EVENTS ? &f_c : &x_c, &m, T0 + 100);
			break;
		case I_F_EXEC:
			m = msg(FT_MSG_EXEC, T0 + 14, CHILD);
			m.path.ptr = "/bin/x";
			m.path.len = 6;
			m.present |= 1ull << FT_K_PATH;
			proc_apply(pt, &f_c, &m, T0 + 100);
			proc_conn_closed(pt, &f_c, T0 + 100);
			break;
		case I_X_HELLO:
			m = hello(CHILD, ROOT, 777, T0 + 20, 0);
			m.exe.ptr = "/bin/x";
			m.exe.len = 6;
			m.exec_ts = T0 + 14;
			m.present |= (1ull << FT_K_EXE) | (1ull << FT_K_EXEC_TS);
			proc_apply(pt, &x_c, &m, T0 + 100);
			break;
		case I_X_MODULE:
			m = msg(FT_MSG_MODULE, T0 + 21, CHILD);
			m.path.ptr = "/bin/x";
			m.path.len = 6;
			m.lo = 0x1000;
			m.hi = 0x2000;
			m.present |= (1ull << FT_K_PATH) | (1ull << FT_K_LO) | (1ull << FT_K_HI);
			proc_apply(pt, &x_c, &m, T0 + 100);
			break;
		case I_X_EXIT:
			m = msg(FT_MSG_EXIT, T0 + 30, CHILD);
			m.code = 4;
			m.present |= 1ull << FT_K_CODE;
			proc_apply(pt, &x_c, &m, T0 + 100);
			proc_conn_closed(pt, &x_c, T0 + 100);
			break;
		case I_WAIT:
			m = msg(FT_MSG_WAIT, T0 + 40, ROOT);
			m.child = CHILD;
			m.status = 4 << 8;
			m.present |= (1ull << FT_K_CHILD) | (1ull << FT_K_STATUS);
			proc_apply(pt, &root_c, &m, T0 + 100);
			break;
		}
	}
	proc_conn_closed(pt, &root_c, T0 + 60);
	proc_reaped(pt, ROOT, 0, NULL, T0 + 60);
	proc_finish(pt, T0 + 200, true);

	model_process *ch = NULL;
	CHECK_MSG(t->nprocs == 2, "images%s: %zu processes", desc, t->nprocs);
	for (size_t i = 0; i < t->nprocs; i++)
		if (t->procs[i]->pid == CHILD)
			ch = t->procs[i];
	CHECK_MSG(ch && ch->nsegs == 2, "images%s: %zu images", desc, ch ? ch->nsegs : 0);
	if (ch && ch->nsegs == 2) {
		CHECK_MSG(ch->segs[0].instrumented && ch->segs[0].nmods == 0,
			  "images%s: the fork image", desc);
		CHECK_MSG(ch->segs[1].exe && strcmp(ch->segs[1].exe, "/bin/x") == 0 &&
				  ch->segs[1].nmods == 1,
			  "images%s: the exec'd image has exe %s, %zu modules", desc,
			  ch->segs[1].exe ? ch->segs[1].exe : "(null)", ch->segs[1].nmods);
		CHECK_MSG(ch->segs[1].start_ns == T0 + 14, "images%s: exec'd image starts at %lld",
			  desc, (long long)ch->segs[1].start_ns);
		CHECK_MSG(ch->exit_kind == MODEL_EXIT_CODE && ch->exit_value == 4 && ch->parent,
			  "images%s: exit or parent", desc);
		model_thread *th = model_find_thread(ch, CHILD);
		int nchunks = 0;
		for (model_chunk *c = th ? th->chunks : NULL; c; c = c->next, nchunks++)
			CHECK_MSG(c->seg == (c->data[0] == 'F' ? 0u : 1u),
				  "images%s: chunk %c recorded by image %u", desc, c->data[0],
				  c->seg);
		CHECK_MSG(nchunks == 2, "images%s: %d chunks", desc, nchunks);
	}
	proc_tree_free(pt);
	model_free(t);
}

static void img_permute(int *facts, int k)
{
	if (k == I_N) {
		int pos[I_N];

		for (int i = 0; i < I_N; i++)
			pos[facts[i]] = i;
		if (img_order_ok(pos))
			img_run(facts);
		return;
	}
	for (int i = k; i < I_N; i++) {
		int tmp = facts[k];

		facts[k] = facts[i];
		facts[i] = tmp;
		img_permute(facts, k + 1);
		facts[i] = facts[k];
		facts[k] = tmp;
	}
}

/* A HELLO with the launcher's rank gives the process its rank; the
 * image it execs without one keeps it. */
static void test_rank(void)
{
	model_trace *t = model_new();
	proc_tree *pt = proc_tree_new(t);
	proc_conn c1, c2;
	const char *argv[] = {"root", NULL};
	static const char var[] = "PMIX_RANK";

	memset(&c1, 0, sizeof(c1));
	memset(&c2, 0, sizeof(c2));
	proc_add_root(pt, ROOT, argv, "/bin/root", T0);
	wire_msg h = hello(ROOT, getpid(), 11, T0 + 1, 0);
	h.rank = 6;
	h.local_rank = 2;
	h.rank_var = (wire_str){var, sizeof(var) - 1};
	h.present |= (1ull << FT_K_RANK) | (1ull << FT_K_LOCAL_RANK) | (1ull << FT_K_RANK_VAR);
	CHECK(proc_apply(pt, &c1, &h, T0 + 1) == 0);
	proc_conn_closed(pt, &c1, T0 + 2);
	wire_msg h2 = hello(ROOT, getpid(), 11, T0 + 3, 0);
	CHECK(proc_apply(pt, &c2, &h2, T0 + 3) == 0);
	proc_finish(pt, T0 + 10, false);
	CHECK(t->nprocs == 1);
	CHECK(t->procs[0]->rank == 6 && t->procs[0]->local_rank == 2);
	CHECK(t->procs[0]->rank_var && strcmp(t->procs[0]->rank_var, var) == 0);
	proc_tree_free(pt);
	model_free(t);
}

static wire_msg remote(int64_t ts, int64_t pid, int64_t child, const char *dest, uint64_t flags)
{
	wire_msg m = msg(FT_MSG_REMOTE, ts, pid);

	m.pid = pid;
	m.name = (wire_str){dest, (uint32_t)strlen(dest)};
	m.path = (wire_str){"/opt/ft", 7};
	m.flags = flags;
	m.present |= (1ull << FT_K_PID) | (1ull << FT_K_NAME) | (1ull << FT_K_PATH) |
		     (1ull << FT_K_FLAGS);
	if (child > 0) {
		m.child = child;
		m.present |= 1ull << FT_K_CHILD;
	}
	return m;
}

/* Remote launches: an exec's, cancelled by its EXEC_FAIL; a spawn's,
 * whose process is the child; the list the run reads, and a mark on
 * each process that ran ssh for the launches that happened. */
static void test_remote(void)
{
	model_trace *t = model_new();
	proc_tree *pt = proc_tree_new(t);
	proc_conn c;
	const char *argv[] = {"root", NULL};
	const proc_remote *r;

	memset(&c, 0, sizeof(c));
	proc_add_root(pt, ROOT, argv, "/bin/root", T0);
	wire_msg h = hello(ROOT, getpid(), 11, T0 + 1, 0);
	CHECK(proc_apply(pt, &c, &h, T0 + 1) == 0);
	wire_msg r1 = remote(T0 + 2, ROOT, 0, "node1", 0);
	CHECK(proc_apply(pt, &c, &r1, T0 + 2) == 0);
	wire_msg fail = msg(FT_MSG_EXEC_FAIL, T0 + 3, ROOT);
	fail.err = 2;
	fail.present |= 1ull << FT_K_ERRNO;
	CHECK(proc_apply(pt, &c, &fail, T0 + 3) == 0);
	wire_msg sp = msg(FT_MSG_SPAWN, T0 + 4, ROOT);
	sp.child = CHILD;
	sp.kind = FT_SPAWN_POSIX_SPAWNP;
	sp.present |= (1ull << FT_K_CHILD) | (1ull << FT_K_KIND) | (1ull << FT_K_ERRNO);
	CHECK(proc_apply(pt, &c, &sp, T0 + 4) == 0);
	wire_msg r2 = remote(T0 + 5, ROOT, CHILD, "user@node2", FT_REMOTE_UNTRACED);
	CHECK(proc_apply(pt, &c, &r2, T0 + 5) == 0);
	wire_msg r3 = remote(T0 + 6, ROOT, 0, "node3", 0);
	CHECK(proc_apply(pt, &c, &r3, T0 + 6) == 0);

	CHECK(proc_remotes(pt, &r) == 3);
	CHECK(r[0].pid == ROOT && strcmp(r[0].dest, "node1") == 0 && r[0].failed);
	CHECK(r[1].pid == ROOT && strcmp(r[1].dest, "user@node2") == 0 && !r[1].failed);
	CHECK(r[1].untraced && r[1].pe && proc_pid(r[1].pe) == CHILD && r[1].mp->pid == CHILD);
	CHECK(strcmp(r[1].forktrace, "/opt/ft") == 0 && r[1].ts_ns == T0 + 5);
	CHECK(!r[2].failed && !r[2].untraced && proc_pid(r[2].pe) == ROOT);
	CHECK(!proc_ended(r[1].pe));
	wire_msg w = msg(FT_MSG_WAIT, T0 + 7, ROOT);
	w.child = CHILD;
	w.present |= (1ull << FT_K_CHILD) | (1ull << FT_K_STATUS);
	CHECK(proc_apply(pt, &c, &w, T0 + 7) == 0);
	CHECK(proc_ended(r[1].pe));

	proc_finish(pt, T0 + 10, true);
	size_t marks = 0;
	for (size_t i = 0; i < t->nprocs; i++) {
		const model_process *p = t->procs[i];
		for (size_t k = 0; k < p->nmarks; k++) {
			if (strcmp(p->marks[k].cat, "remote") != 0)
				continue;
			marks++;
			if (p->pid == CHILD)
				CHECK(strcmp(p->marks[k].args_json,
					     "{\"host\":\"user@node2\",\"untraced\":true}") == 0);
			else
				CHECK(p->pid == ROOT &&
				      strcmp(p->marks[k].args_json, "{\"host\":\"node3\"}") == 0);
		}
	}
	CHECK(marks == 2);
	proc_tree_free(pt);
	model_free(t);
}

int main(void)
{
	const int64_t self = getpid();

	test_rank();
	test_remote();
	const struct scenario scs[] = {
		{"fork child, silent, waited", false, false, ROOT, 0, FT_SPAWN_FORK},
		{"fork child, silent, orphan", false, true, ROOT, 0, FT_SPAWN_FORK},
		{"fork child speaks, waited", true, false, ROOT, FT_HELLO_FORKED, FT_SPAWN_FORK},
		{"fork child speaks, orphan", true, true, ROOT, FT_HELLO_FORKED, FT_SPAWN_FORK},
		{"fork child execs, waited", true, false, ROOT, 0, FT_SPAWN_FORK},
		{"fork child execs, orphaned before", true, true, self, 0, FT_SPAWN_FORK},
		{"fork child execs, orphaned after", true, true, ROOT, 0, FT_SPAWN_FORK},
		{"vfork child execs, waited", true, false, ROOT, 0, FT_SPAWN_VFORK},
		{"vfork child execs, orphan", true, true, self, 0, FT_SPAWN_VFORK},
		{"spawn child, waited", true, false, ROOT, 0, FT_SPAWN_POSIX_SPAWN},
		{"spawn child, orphan", true, true, self, 0, FT_SPAWN_POSIX_SPAWN},
		{"spawn child, silent, orphan", false, true, ROOT, 0, FT_SPAWN_POSIX_SPAWN},
	};

	for (size_t i = 0; i < sizeof(scs) / sizeof(scs[0]); i++) {
		enum fact facts[F_N];
		int n = 0;

		facts[n++] = F_FORK;
		if (scs[i].hello) {
			facts[n++] = F_HELLO;
			facts[n++] = F_EXIT;
		}
		facts[n++] = scs[i].orphan ? F_REAP : F_WAIT;
		permute(&scs[i], facts, 0, n);
	}
	int reuse[R_N] = {R_FORK_A, R_REAP_A, R_FORK_B, R_HELLO_B, R_EXIT_B, R_REAP_B};
	reuse_permute(reuse, 0);
	int img[I_N];
	for (int i = 0; i < I_N; i++)
		img[i] = i;
	img_permute(img, 0);
	CHECK(img_runs > 0);
	return check_done("proctree");
}
