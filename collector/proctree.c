/*
 * proctree.c - the process tree as the collector learns it.
 *
 * Processes speak for themselves (HELLO, EXIT, ...) and for their children
 * (FORK, SPAWN, WAIT), over separate connections that the event loop reads
 * in no guaranteed order. So every fact is applied where it belongs
 * whatever arrives first: a child's HELLO may precede its parent's FORK
 * record, and a new image's HELLO may precede the EXEC record of the image
 * before it. A process is identified by (pid, start ticks); an entry created
 * from a parent's record has ticks 0 until its own HELLO adopts it.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "say.h"
#include "htab.h"
#include "internal.h"
#include "jsonargs.h"
#include "vec.h"

#define MAX_OPEN_SHELLS 8

typedef struct open_shell {
	int64_t ts;
	int64_t tid;
	uint64_t kind;
	const char *cmd;
} open_shell;

struct proc_entry {
	model_process *mp;
	proc_entry *older;  /* previous entry with the same pid */
	proc_entry *parent; /* from the parent's FORK/SPAWN record */
	int conns;          /* connections open now */
	bool hello_seen;
	bool status_known;    /* a wait status was seen (parent's or ours) */
	bool exit_recorded;   /* the agent sent EXIT */
	bool end_seen;        /* an end time is known */
	bool placeholder;     /* the last segment waits for its image's HELLO */
	bool exec_pending;    /* the last image announced an exec */
	bool first_forked;    /* the first HELLO was a fork child's (FT_HELLO_FORKED) */
	bool fork_image;      /* segs[0] is the parent's image, derived */
	bool root;            /* the command forktrace started */
	bool lost_warned;     /* an implausible LOST count was reported */
	uint32_t front_shift; /* images inserted before the first one so far */
	int64_t exec_ts;      /* when, if exec_pending */
	int exit_code;
	int64_t exit_ts;
	int64_t last_seen_ns;
	open_shell shells[MAX_OPEN_SHELLS];
	int nshells;
	shm_image *shm; /* event buffers of image shm_seg (a reference) */
	size_t shm_seg;
	void *table_entry; /* ptab_'s open slot of the current image */
	/* What the records said it used (docs/INSIGHT.md, "Resource use per
	 * process"): its reaper's wait4 figure, and its agent's RUSAGE_SELF
	 * and RUSAGE_CHILDREN at exit. ru_settle makes mp->ru of them,
	 * whichever order they come in. */
	model_rusage wait_ru, exit_ru, exit_children;
	bool has_wait_ru, has_exit_ru, has_exit_children;
};

struct proc_tree {
	model_trace *t;
	htab newest;      /* pid -> its newest entry (a proc_entry *) */
	proc_entry **all; /* by model index */
	size_t nall, all_cap;
	uint64_t messages;
	uint64_t salvaged_bytes;
	int64_t self;         /* the collector's pid: where orphans are reparented */
	proc_remote *remotes; /* remote launches, in the order announced */
	size_t nremotes, remotes_cap;
};

int64_t proc_now_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t proc_now_real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Pairs from the collector's side of the run, for records salvaged
 * before any EVENTS frame brought one. */
int proc_add_clock_pair(model_trace *t)
{
	uint64_t tsc, ns;

	ft_wire_clock_pair(8, &tsc, &ns);
	return model_add_clock(t, tsc, (int64_t)ns);
}

proc_tree *proc_tree_new(model_trace *t)
{
	proc_tree *pt = calloc(1, sizeof(*pt));

	if (!pt)
		return NULL;
	pt->t = t;
	pt->self = getpid();
	pt->newest.first = 1024;
	return pt;
}

void proc_tree_free(proc_tree *pt)
{
	if (!pt)
		return;
	for (size_t i = 0; i < pt->nall; i++) {
		shm_image_unref(pt->all[i]->shm);
		free(pt->all[i]);
	}
	free(pt->all);
	free(pt->remotes);
	htab_free(&pt->newest);
	free(pt);
}

static proc_entry *newest(const proc_tree *pt, int64_t pid)
{
	return (proc_entry *)(uintptr_t)htab_get(&pt->newest, (uint64_t)pid);
}

/* A new entry for pid, newest of its pid. */
static proc_entry *entry_new(proc_tree *pt, int64_t pid, int64_t start_ns)
{
	if (htab_reserve(&pt->newest) < 0)
		return NULL;
	if (vec_grow(&pt->all, &pt->all_cap, pt->nall + 1, sizeof(*pt->all), 256) < 0)
		return NULL;
	proc_entry *pe = calloc(1, sizeof(*pe));
	if (!pe)
		return NULL;
	pe->mp = model_add_process(pt->t, pid);
	if (!pe->mp) {
		free(pe);
		return NULL;
	}
	pe->mp->start_ns = start_ns;
	pe->last_seen_ns = start_ns;
	pt->all[pt->nall++] = pe;
	pe->older = newest(pt, pid);
	htab_set(&pt->newest, (uint64_t)pid, (uintptr_t)pe); /* reserved above */
	return pe;
}

pid_t proc_pid(const proc_entry *pe)
{
	return (pid_t)pe->mp->pid;
}

static void seen(proc_entry *pe, int64_t ts)
{
	if (ts > pe->last_seen_ns)
		pe->last_seen_ns = ts;
}

static const char *dup_ws(model_trace *t, wire_str s)
{
	return s.ptr ? model_strndup(t, s.ptr, s.len) : NULL;
}

static const char **dup_argv(model_trace *t, const wire_msg *m, size_t *argc)
{
	if (!m->argv) {
		*argc = 0;
		return NULL;
	}
	const char **v = model_strv_alloc(t, m->argc);
	if (!v)
		return NULL;
	for (uint32_t i = 0; i < m->argc; i++)
		v[i] = model_strndup(t, m->argv[i].via.str.ptr, m->argv[i].via.str.size);
	*argc = m->argc;
	return v;
}

static model_segment *last_seg(proc_entry *pe)
{
	model_process *p = pe->mp;

	return p->nsegs ? &p->segs[p->nsegs - 1] : NULL;
}

/* A segment for an image nobody has described from the inside (yet). */
static int add_placeholder(proc_tree *pt, proc_entry *pe, int64_t start_ns, const char *exe,
			   const char **argv, size_t argc)
{
	model_segment *s = model_add_segment(pt->t, pe->mp);

	if (!s)
		return -ENOMEM;
	s->start_ns = start_ns;
	s->exe = exe;
	s->argv = argv;
	s->argc = argc;
	s->instrumented = false;
	pe->placeholder = true;
	return 0;
}

/*
 * Best effort, for a child whose image may never speak (vfork then exec of
 * a static binary): read what /proc still shows of it.
 */
static void describe_from_proc(proc_tree *pt, proc_entry *pe, int64_t ts)
{
	char path[64], buf[4096];
	const char *argv[64];
	size_t argc = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%lld/exe", (long long)pe->mp->pid);
	char exe[4096];
	n = readlink(path, exe, sizeof(exe) - 1);
	if (n <= 0)
		return;
	exe[n] = '\0';
	snprintf(path, sizeof(path), "/proc/%lld/cmdline", (long long)pe->mp->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	for (ssize_t i = 0; i < n && argc < 63; i += (ssize_t)strlen(buf + i) + 1)
		argv[argc++] = buf + i;
	argv[argc] = NULL;
	add_placeholder(pt, pe, ts, model_strdup(pt->t, exe), model_strvdup(pt->t, argv, argc),
			argc);
}

/* Could pe have been alive at ts? Facts arrive out of order, so an entry
 * whose end is already known may still be the one a late record means. */
static bool alive_at(const proc_entry *pe, int64_t ts)
{
	return !pe->end_seen || ts <= pe->mp->end_ns;
}

/*
 * Could a process whose parent pid was ppid when it spoke (or died) be a
 * child that `parent` created? Yes if ppid is unknown or parent itself,
 * or if the child had been orphaned by then: an orphan goes to the
 * nearest subreaper above it (this collector, a subreaper of the tree
 * among parent's ancestors) or to init.
 */
static bool ppid_fits(const proc_tree *pt, const proc_entry *parent, int64_t ppid)
{
	int depth = 0;

	if (ppid < 0 || ppid == pt->self || ppid == 1)
		return true;
	for (const proc_entry *a = parent; a && depth < 4096; a = a->parent, depth++)
		if (a->mp->pid == ppid)
			return true;
	return false;
}

/*
 * The entry for a child the process `parent` created at ts (a time taken
 * before the child existed). Facts about the child may have come first,
 * each of which made an entry without a creator: its own HELLO, the
 * collector's reaping of an orphan, another thread's WAIT for it. Such an
 * entry is this child if it started no earlier than ts (an older process
 * that used the same pid began before), was alive at ts, and its parent
 * pid fits. Of several, the first to start is this child: any other one
 * is a later process that reused the pid.
 */
static proc_entry *child_entry(proc_tree *pt, proc_entry *parent, int64_t child, int64_t ts)
{
	proc_entry *pe = NULL;

	for (proc_entry *e = newest(pt, child); e; e = e->older) {
		if (e->parent || e->mp->spawn_ns >= 0 || e->root || e->mp->start_ns < ts ||
		    !alive_at(e, ts) || !ppid_fits(pt, parent, e->mp->ppid))
			continue;
		if (!pe || e->mp->start_ns < pe->mp->start_ns)
			pe = e;
	}
	if (pe)
		return pe;
	pe = entry_new(pt, child, ts);
	if (pe)
		pe->mp->ppid = parent->mp->pid;
	return pe;
}

/* c's image index, after images were inserted in front of it since it
 * was set (its process's fork image, learnt late). */
static void conn_sync(proc_conn *c)
{
	if (c->pe && c->seg_shift != c->pe->front_shift) {
		c->seg += c->pe->front_shift - c->seg_shift;
		c->seg_shift = c->pe->front_shift;
	}
}

static void conn_set_seg(proc_conn *c, size_t seg)
{
	c->seg = seg;
	c->seg_shift = c->pe->front_shift;
}

/*
 * A new empty image in front of pe's others (its fork image, learnt after
 * the image it exec'd). What already points at an image by index moves
 * with it: the event records kept so far, the event buffers' image, and
 * (through conn_sync) every connection's image.
 */
static model_segment *insert_front_segment(proc_tree *pt, proc_entry *pe)
{
	model_process *p = pe->mp;
	model_segment *s;

	if (!model_add_segment(pt->t, p))
		return NULL;
	memmove(&p->segs[1], &p->segs[0], (p->nsegs - 1) * sizeof(p->segs[0]));
	s = &p->segs[0];
	memset(s, 0, sizeof(*s));
	s->start_ns = -1;
	s->end_ns = -1;
	s->end_user_ns = s->end_sys_ns = s->end_maxrss_kb = -1;
	for (size_t i = 0; i < p->nthreads; i++)
		for (model_chunk *ch = p->threads[i].chunks; ch; ch = ch->next)
			ch->seg++;
	if (pe->shm)
		pe->shm_seg++;
	pe->front_shift++;
	return s;
}

/*
 * The image a fork child ran before it exec'd: its parent's image at the
 * fork. A fork child that execs at once never says so itself (see
 * FT_HELLO_FORKED), so this segment is derived: from the fork to the new
 * image's HELLO. Inserted as segs[0]. A vfork child only borrows its
 * parent's image until it execs, and never speaks before: it gets that
 * image at the end of the run (at_end) if it has none of its own (it
 * exited without exec), so that what the trace shows does not depend on
 * whether its HELLO or its parent's FORK record was read first. So does
 * the child of a posix_spawn whose exec failed (glibc's spawn helper
 * runs in the parent's memory, as a vfork child does).
 */
static int add_fork_image(proc_tree *pt, proc_entry *pe, bool at_end)
{
	model_process *p = pe->mp;
	const model_segment *src = NULL;

	bool borrowed = p->spawn_kind == FT_SPAWN_VFORK || p->spawn_kind == FT_SPAWN_POSIX_SPAWN ||
			p->spawn_kind == FT_SPAWN_POSIX_SPAWNP;
	bool forked = p->spawn_kind == FT_SPAWN_FORK || (borrowed && at_end && p->nsegs == 0);
	if (!pe->parent || !forked || pe->fork_image || pe->first_forked)
		return 0;
	for (size_t i = pe->parent->mp->nsegs; i-- > 0;) {
		if (pe->parent->mp->segs[i].start_ns <= p->spawn_ns) {
			src = &pe->parent->mp->segs[i];
			break;
		}
	}
	model_segment *s = insert_front_segment(pt, pe);
	if (!s)
		return -ENOMEM;
	s->start_ns = p->spawn_ns;
	if (src) {
		s->exe = src->exe;
		s->argv = src->argv;
		s->argc = src->argc;
		s->cwd = src->cwd;
		s->instrumented = src->instrumented;
	}
	/* Not at the end: the child exec'd since, without a word (its new
	 * image's HELLO is why this runs): see model_segment's end_*. Its
	 * peak resident set is not known. */
	if (!at_end)
		s->end_user_ns = s->end_sys_ns = 0;
	pe->fork_image = true;
	return 0;
}

static void set_spawn(proc_tree *pt, proc_entry *child, proc_entry *parent, int64_t ts, int64_t tid,
		      int kind)
{
	child->parent = parent;
	/* Its creator, even when it spoke or died an orphan first. */
	child->mp->ppid = parent->mp->pid;
	child->mp->spawn_ns = ts;
	child->mp->spawn_tid = tid;
	child->mp->spawn_kind = kind;
	if (ts < child->mp->start_ns || child->mp->start_ns < 0) {
		child->mp->start_ns = ts;
		/* A forked copy starts at the fork; an exec'd image that spoke
		 * first keeps its own start, behind the derived fork image. */
		if (child->mp->nsegs && (child->first_forked || kind != FT_SPAWN_FORK))
			child->mp->segs[0].start_ns = ts;
	}
	if (child->hello_seen)
		add_fork_image(pt, child, false);
}

/* a - b field by field, at least 0 (unknown, -1, stays unknown). */
static model_rusage ru_less(const model_rusage *a, const model_rusage *b)
{
	const int64_t *x = &a->user_ns, *y = &b->user_ns;
	model_rusage r;
	int64_t *z = &r.user_ns;

	_Static_assert(sizeof(model_rusage) == 9 * sizeof(int64_t), "model_rusage is 9 int64_t");
	for (size_t i = 0; i < 9; i++)
		z[i] = x[i] < 0 ? -1 : y[i] < 0 ? x[i] : x[i] > y[i] ? x[i] - y[i] : 0;
	return r;
}

/*
 * The process's own resource use from what is known so far, the most
 * exact first: the reaper's figure less what the process's own reaped
 * descendants used (its RUSAGE_CHILDREN at exit; it reaps nothing after
 * its exit call), with its own peak resident set at exit (wait4's is the
 * largest of it and its descendants'); else its RUSAGE_SELF at exit;
 * else the reaper's figure whole (killed, static, agent-less: no EXIT).
 */
static void ru_settle(proc_entry *pe)
{
	model_process *p = pe->mp;

	if (pe->has_wait_ru && pe->has_exit_ru && pe->has_exit_children) {
		p->ru = ru_less(&pe->wait_ru, &pe->exit_children);
		p->ru.maxrss_kb = pe->exit_ru.maxrss_kb;
		p->ru_source = MODEL_RU_WAIT;
	} else if (pe->has_exit_ru) {
		p->ru = pe->exit_ru;
		p->ru_source = MODEL_RU_EXIT;
	} else if (pe->has_wait_ru) {
		p->ru = pe->wait_ru;
		p->ru_source = MODEL_RU_WAIT_WITH_DESC;
	}
}

/* The reaper's figure for pe, reaped with status (an exit or a death). */
static void set_wait_ru(proc_entry *pe, int status, const model_rusage *ru)
{
	if (!ru || (!WIFEXITED(status) && !WIFSIGNALED(status)))
		return;
	pe->wait_ru = *ru;
	pe->has_wait_ru = true;
	ru_settle(pe);
}

static void set_status(proc_entry *pe, int status, int64_t ts)
{
	model_process *p = pe->mp;

	if (WIFEXITED(status)) {
		p->exit_kind = MODEL_EXIT_CODE;
		p->exit_value = WEXITSTATUS(status);
	} else if (WIFSIGNALED(status)) {
		p->exit_kind = MODEL_EXIT_SIGNAL;
		p->exit_value = WTERMSIG(status);
	} else {
		return; /* stopped or continued: not an end */
	}
	pe->status_known = true;
	/* Its connections salvage what they hold; nothing reconnects now. */
	shm_image_unref(pe->shm);
	pe->shm = NULL;
	/* The process ended no later than whoever reaped it noticed; the
	 * agent's own EXIT time, when there is one, is exact. */
	if (!pe->exit_recorded && (!pe->end_seen || ts < p->end_ns)) {
		p->end_ns = ts;
		pe->end_seen = true;
	}
}

/* The entry of pid that a wait by parent (NULL: the collector) reaped:
 * the newest one still without a status. NULL if there is none yet. */
static bool is_ancestor(const proc_entry *e, const proc_entry *a)
{
	for (int depth = 0; e && depth < 4096; e = e->parent, depth++)
		if (e == a)
			return true;
	return false;
}

static proc_entry *find_child(proc_tree *pt, proc_entry *parent, int64_t pid)
{
	/* A subreaper of the tree reaps an orphan it did not create: the
	 * waiter is then an ancestor of the child's creator, which ended. */
	for (proc_entry *pe = newest(pt, pid); pe; pe = pe->older)
		if (!pe->status_known &&
		    (!parent || pe->parent == parent || pe->mp->ppid == parent->mp->pid ||
		     (pe->parent && (pe->parent->status_known || pe->parent->end_seen) &&
		      is_ancestor(pe->parent->parent, parent))))
			return pe;
	return NULL;
}

/* The thread tid of p, added if the model does not have it yet. */
static model_thread *thread_of(proc_tree *pt, model_process *p, int64_t tid)
{
	model_thread *th = model_find_thread(p, tid);

	return th ? th : model_add_thread(pt->t, p, tid);
}

static int on_late_fork_hello(proc_tree *pt, proc_conn *c, proc_entry *pe, const wire_msg *m)
{
	model_process *p = pe->mp;
	model_segment *s;

	if (!pe->fork_image) {
		s = insert_front_segment(pt, pe);
		if (!s)
			return -ENOMEM;
		s->start_ns = p->spawn_ns >= 0 ? p->spawn_ns : p->start_ns;
	}
	pe->fork_image = true;
	pe->first_forked = true;
	s = &p->segs[0];
	s->instrumented = true;
	if (m->exe.ptr)
		s->exe = dup_ws(pt->t, m->exe);
	if (m->argv) {
		s->argv = dup_argv(pt->t, m, &s->argc);
		s->argv_truncated = (m->flags & FT_HELLO_ARGV_TRUNCATED) != 0;
	}
	s->cwd = dup_ws(pt->t, m->cwd);
	if (m->ts < p->start_ns)
		p->start_ns = m->ts;
	pe->conns++;
	seen(pe, m->ts);
	c->pe = pe;
	conn_set_seg(c, 0);
	return thread_of(pt, p, m->pid) ? 0 : -ENOMEM;
}

/* The entry a HELLO speaks for, or NULL for a process not seen yet. */
static proc_entry *hello_entry(proc_tree *pt, const wire_msg *m)
{
	/* Same pid and start time: a new image (or a reconnect) of a known
	 * process. Start time 0: an entry made from a parent's record. */
	for (proc_entry *e = newest(pt, m->pid); e; e = e->older) {
		if (e->mp->start_ticks == m->start_ticks && m->start_ticks)
			return e;
		/* Made from the parent's record (which can be read before the
		 * child's HELLO, even after the parent's WAIT for it), from a
		 * WAIT (ppid: the waiter), or from our reaping of an orphan
		 * (ppid unknown), before anything else of it came. */
		if (e->mp->start_ticks == 0 && !e->hello_seen && alive_at(e, m->ts) &&
		    (e->mp->ppid < 0 || e->mp->ppid == m->ppid ||
		     (e->parent ? ppid_fits(pt, e->parent, m->ppid)
				: m->ppid == pt->self || m->ppid == 1)))
			return e;
	}
	return NULL;
}

/* The segment the HELLO describes: the last one, a placeholder that turns
 * out instrumented, or a new one for a new image. NULL: out of memory. */
static model_segment *hello_segment(proc_tree *pt, proc_entry *pe, const wire_msg *m,
				    bool new_image)
{
	model_process *p = pe->mp;
	model_segment *s = last_seg(pe);

	/* When the image began: the exec call, if anyone saw it. */
	int64_t image_start = pe->exec_pending ? pe->exec_ts : m->ts;
	if (m->exec_ts && (int64_t)m->exec_ts <= m->ts)
		image_start = (int64_t)m->exec_ts;
	pe->exec_pending = false;
	if (pe->placeholder && s) {
		/* The image described from outside turns out instrumented. */
		s->instrumented = true;
		pe->placeholder = false;
	} else if (!s || new_image) {
		s = model_add_segment(pt->t, p);
		if (!s)
			return NULL;
		s->start_ns = p->nsegs == 1 ? p->start_ns : image_start;
		if (pe->fork_image && p->nsegs == 2)
			s->start_ns = image_start;
		s->instrumented = true;
	}
	return s;
}

/* The image's exe, argv and cwd from the HELLO (copies in the model). A
 * resumed image was described by its first HELLO (its cwd then, not after
 * a chdir). */
static void describe_image(model_segment *s, const wire_msg *m, const char *exe, const char **argv,
			   size_t argc, const char *cwd)
{
	if (!(m->flags & FT_HELLO_RESUMED) || !s->exe) {
		if (exe)
			s->exe = exe;
		if (argv) {
			s->argv = argv;
			s->argc = argc;
		}
		s->cwd = cwd;
		s->argv_truncated = (m->flags & FT_HELLO_ARGV_TRUNCATED) != 0;
	}
}

/* The connection's shared-memory buffers, c->seg set. */
static void conn_take_shm(proc_conn *c, proc_entry *pe)
{
	if (pe->shm && pe->shm_seg != c->seg) {
		/* A new image: the old one's buffers were salvaged when its
		 * connection closed. */
		shm_image_unref(pe->shm);
		pe->shm = NULL;
	}
	/* The agent reconnected: its buffers are those of the image before. */
	if (pe->shm && pe->shm_seg == c->seg) {
		shm_image_ref(pe->shm);
		c->shm = pe->shm;
	}
}

/* HELLO's NAME is the main thread's comm, which is the program's name
 * unless the program named the thread: only THREAD_NAME names the main
 * thread's track. A new image's comm is its own again. */
static void hello_main_thread(proc_tree *pt, model_process *p, const wire_msg *m, bool new_image)
{
	model_thread *th = thread_of(pt, p, m->pid);
	if (th) {
		if (th->start_ns < 0)
			th->start_ns = p->start_ns;
		if (new_image)
			th->name = NULL;
	}
}

/* The launcher's rank an image read from its environment: an image
 * without one (a helper the rank exec'd with a clean environment) leaves
 * the process's as it was. */
static void hello_rank(proc_tree *pt, model_process *p, const wire_msg *m)
{
	if (wire_has(m, FT_K_RANK)) {
		p->rank = m->rank;
		p->rank_var = m->rank_var.ptr ? dup_ws(pt->t, m->rank_var) : NULL;
	}
	if (wire_has(m, FT_K_LOCAL_RANK))
		p->local_rank = m->local_rank;
}

static int on_hello(proc_tree *pt, proc_conn *c, const wire_msg *m)
{
	model_trace *t = pt->t;
	proc_entry *pe;

	pe = hello_entry(pt, m);
	/* A fork child's own HELLO read after that of the image it exec'd
	 * (another connection, or a table slot read first): it speaks for
	 * the image before, which goes (or is already derived) in front. */
	if (pe && pe->hello_seen && (m->flags & FT_HELLO_FORKED) &&
	    !(m->flags & FT_HELLO_RESUMED) && !pe->first_forked)
		return on_late_fork_hello(pt, c, pe, m);
	/* The fork child's image moving from its table slot to a connection
	 * after the image it exec'd spoke: it goes on as segs[0]. */
	if (pe && pe->hello_seen && (m->flags & FT_HELLO_FORKED) && (m->flags & FT_HELLO_RESUMED) &&
	    pe->mp->nsegs > 1 && (pe->first_forked || pe->fork_image)) {
		pe->conns++;
		seen(pe, m->ts);
		c->pe = pe;
		conn_set_seg(c, 0);
		return 0;
	}
	bool new_image = false;
	if (!pe) {
		pe = entry_new(pt, m->pid, m->ts);
		if (!pe)
			return -ENOMEM;
		pe->mp->ppid = m->ppid;
	} else if (pe->hello_seen && !pe->placeholder) {
		/* A known process speaks again: it exec'd, unless the agent
		 * says its image goes on (a reconnect after losing its fd, or
		 * an image moving from its process-table slot to a
		 * connection). */
		new_image = !(m->flags & FT_HELLO_RESUMED);
	}
	model_process *p = pe->mp;
	if (!pe->hello_seen) {
		pe->first_forked = (m->flags & FT_HELLO_FORKED) != 0;
		/* A fork child that exec'd without a word: derive the image
		 * it ran between the fork and the exec. */
		if (add_fork_image(pt, pe, false) < 0)
			return -ENOMEM;
		new_image = pe->fork_image;
	}
	p->start_ticks = m->start_ticks;
	if (p->ppid < 0)
		p->ppid = m->ppid;
	hello_rank(pt, p, m);
	if (!pe->hello_seen && m->ts < p->start_ns)
		p->start_ns = m->ts;
	pe->hello_seen = true;
	pe->conns++;
	seen(pe, m->ts);

	size_t argc;
	const char **argv = dup_argv(t, m, &argc);
	const char *exe = dup_ws(t, m->exe);
	const char *cwd = dup_ws(t, m->cwd);
	model_segment *s = hello_segment(pt, pe, m, new_image);
	if (!s)
		return -ENOMEM;
	describe_image(s, m, exe, argv, argc, cwd);
	c->pe = pe;
	conn_set_seg(c, p->nsegs - 1);
	conn_take_shm(c, pe);
	hello_main_thread(pt, p, m, new_image);
	return 0;
}

static void on_exec(proc_tree *pt, proc_conn *c, const wire_msg *m)
{
	proc_entry *pe = c->pe;

	c->exec_ts = m->ts;
	c->exec_path = dup_ws(pt->t, m->path);
	c->exec_argv = dup_argv(pt->t, m, &c->exec_argc);
	if (wire_has(m, FT_K_RUSAGE) && c->seg < pe->mp->nsegs) {
		model_segment *s = &pe->mp->segs[c->seg];

		s->end_user_ns = m->ru.user_ns;
		s->end_sys_ns = m->ru.sys_ns;
		s->end_maxrss_kb = m->ru.maxrss_kb;
	}
	if (c->seg + 1 < pe->mp->nsegs) {
		/* The new image said hello before this record was read: just
		 * move the boundary to the exec call. */
		pe->mp->segs[c->seg + 1].start_ns = m->ts;
		return;
	}
	c->exec_sent = true;
	pe->exec_pending = true;
	pe->exec_ts = m->ts;
}

static void add_exec_fail_mark(proc_tree *pt, model_process *p, const char *name, int64_t ts,
			       int64_t tid, wire_str path, int err);

static void on_exec_fail(proc_tree *pt, proc_conn *c, const wire_msg *m)
{
	proc_entry *pe = c->pe;
	wire_str path = m->path;

	c->exec_sent = false;
	pe->exec_pending = false;
	/* The image goes on: the EXEC's figure was not its end. */
	if (c->seg < pe->mp->nsegs && c->seg + 1 == pe->mp->nsegs) {
		model_segment *s = &pe->mp->segs[c->seg];

		s->end_user_ns = s->end_sys_ns = s->end_maxrss_kb = -1;
	}
	if (c->remote_pending)
		pt->remotes[c->remote_pending - 1].failed = true;
	c->remote_pending = 0;
	if (!path.ptr && c->exec_path)
		path = (wire_str){c->exec_path, (uint32_t)strlen(c->exec_path)};
	add_exec_fail_mark(pt, pe->mp, "exec failed", m->ts, m->tid, path, (int)m->err);
}

/* An "exec failed" mark on process p: its exec of path failed with err. */
static void add_exec_fail_mark(proc_tree *pt, model_process *p, const char *name, int64_t ts,
			       int64_t tid, wire_str path, int err)
{
	model_mark *mk = model_add_mark(pt->t, p);
	char *s;

	if (!mk)
		return;
	s = path.ptr ? strndup(path.ptr, path.len) : NULL;
	mk->ts_ns = ts;
	mk->dur_ns = -1;
	mk->tid = tid;
	mk->name = name;
	mk->cat = "exec";
	mk->args_json = args_exec_fail(pt->t, s, err);
	free(s);
}

/*
 * Did a posix_spawn that failed with err create a child? glibc's spawn
 * creates one with clone, which runs the file actions and the exec and
 * exits 127 when either fails; the parent reaps it inside posix_spawn
 * and never learns its pid. Only the steps before and in clone fail
 * without a child: the helper stack's mmap and clone itself, with
 * EAGAIN (RLIMIT_NPROC, a pids cgroup), ENOMEM or ENOSPC (a pid
 * namespace full). Those errors a child's exec can give as well are
 * taken as clone's: the more likely, and a process is not invented.
 */
static bool spawn_failed_in_child(int err)
{
	return err > 0 && err != EAGAIN && err != ENOMEM && err != ENOSPC && err != ENOSYS;
}

/*
 * The child of a posix_spawn that failed after its clone: a process that
 * ran the spawn's helper in its parent's image, whose exec (or a file
 * action) failed, and that exited 127. Its pid is unknown: host pid -1,
 * a trace pid no real process has, no entry in the pid map.
 */
static void add_failed_spawn_child(proc_tree *pt, proc_entry *parent, const wire_msg *m)
{
	proc_entry *pe;

	if (vec_grow(&pt->all, &pt->all_cap, pt->nall + 1, sizeof(*pt->all), 256) < 0)
		return;
	pe = calloc(1, sizeof(*pe));
	if (!pe)
		return;
	pe->mp = model_add_process(pt->t, -1);
	if (!pe->mp) {
		free(pe);
		return;
	}
	pt->all[pt->nall++] = pe;
	pe->mp->start_ns = m->ts;
	pe->last_seen_ns = m->ts;
	set_spawn(pt, pe, parent, m->ts, m->tid, (int)m->kind);
	set_status(pe, 127 << 8, m->ts);
	add_exec_fail_mark(pt, pe->mp, "exec failed", m->ts, -1, m->path, (int)m->err);
}

static void on_spawn(proc_tree *pt, proc_conn *c, const wire_msg *m)
{
	model_trace *t = pt->t;
	proc_entry *parent = c->pe;

	if (m->err != 0 || !wire_has(m, FT_K_CHILD)) {
		add_exec_fail_mark(pt, parent->mp, "spawn failed", m->ts, m->tid, m->path,
				   (int)m->err);
		if (spawn_failed_in_child((int)m->err))
			add_failed_spawn_child(pt, parent, m);
		return;
	}
	proc_entry *child = child_entry(pt, parent, m->child, m->ts);
	if (!child)
		return;
	set_spawn(pt, child, parent, m->ts, m->tid, (int)m->kind);
	if (!child->hello_seen && child->mp->nsegs == 0) {
		size_t argc;
		const char **argv = dup_argv(t, m, &argc);
		add_placeholder(pt, child, m->ts, dup_ws(t, m->path), argv, argc);
	}
}

/* fork() or vfork() failed (EAGAIN under RLIMIT_NPROC or a pids cgroup,
 * ENOMEM): no process, but the program saw the failure. */
static void on_fork_fail(proc_tree *pt, proc_conn *c, const wire_msg *m)
{
	model_mark *mk = model_add_mark(pt->t, c->pe->mp);

	if (!mk)
		return;
	mk->ts_ns = m->ts;
	mk->dur_ns = -1;
	mk->tid = m->tid;
	mk->name = "fork failed";
	mk->cat = "fork";
	mk->args_json = args_fork_fail(pt->t, m->kind == FT_SPAWN_VFORK ? "vfork" : "fork",
				       (int)m->err);
}

static void on_fork(proc_tree *pt, proc_conn *c, const wire_msg *m)
{
	proc_entry *parent = c->pe;

	if (!wire_has(m, FT_K_CHILD) || m->child <= 0) {
		if (wire_has(m, FT_K_ERRNO) && m->err > 0)
			on_fork_fail(pt, c, m);
		return;
	}
	proc_entry *child = child_entry(pt, parent, m->child, m->ts);
	if (!child)
		return;
	set_spawn(pt, child, parent, m->ts, m->tid, (int)m->kind);
	if (m->kind != FT_SPAWN_VFORK)
		return;
	/* The child has exec'd or exited by now, and its parent tells what
	 * its last exec call was: one that failed is marked in the child;
	 * one that did not return started an image, described here until
	 * (if ever) it says HELLO itself. */
	if (wire_has(m, FT_K_PATH)) {
		int64_t exec_ts = wire_has(m, FT_K_EXEC_TS) ? (int64_t)m->exec_ts : m->ts;

		if (wire_has(m, FT_K_CHILD_ERRNO)) {
			add_exec_fail_mark(pt, child->mp, "exec failed", exec_ts, m->child, m->path,
					   (int)m->child_err);
		} else if (!child->hello_seen && child->mp->nsegs == 0) {
			size_t argc;
			const char **argv = dup_argv(pt->t, m, &argc);

			add_placeholder(pt, child, m->ts, dup_ws(pt->t, m->path), argv, argc);
		}
		return;
	}
	/* An agent that does not tell: if the child exec'd something the
	 * agent cannot enter, /proc is the only witness left. */
	if (!child->hello_seen && child->mp->nsegs == 0)
		describe_from_proc(pt, child, m->ts);
}

static void on_wait(proc_tree *pt, proc_conn *c, const wire_msg *m)
{
	proc_entry *child = find_child(pt, c->pe, m->child);
	model_mark *mk;

	/* Another thread's wait can be read before the FORK record of the
	 * thread that forked: the FORK record will adopt this entry. */
	if (!child && m->child > 0) {
		child = entry_new(pt, m->child, m->ts);
		if (child)
			child->mp->ppid = c->pe->mp->pid;
	}
	if (child) {
		set_status(child, (int)m->status, m->ts);
		set_wait_ru(child, (int)m->status, wire_has(m, FT_K_RUSAGE) ? &m->ru : NULL);
	}
	mk = model_add_mark(pt->t, c->pe->mp);
	if (!mk)
		return;
	mk->ts_ns = m->ts;
	mk->dur_ns = -1;
	mk->tid = m->tid;
	mk->name = "wait";
	mk->cat = "wait";
	mk->args_json = args_wait(pt->t, m->child, (int)m->status);
}

static void on_thread(proc_tree *pt, proc_conn *c, const wire_msg *m)
{
	model_thread *th = thread_of(pt, c->pe->mp, m->tid);

	if (!th)
		return;
	if (m->type == FT_MSG_THREAD_START && th->start_ns < 0)
		th->start_ns = m->ts;
	if (m->type == FT_MSG_THREAD_END)
		th->end_ns = m->ts;
	if (m->name.ptr)
		th->name = dup_ws(pt->t, m->name);
}

static void on_shell(proc_tree *pt, proc_conn *c, const wire_msg *m)
{
	proc_entry *pe = c->pe;

	if (m->type == FT_MSG_SHELL_BEGIN) {
		if (pe->nshells < MAX_OPEN_SHELLS) {
			open_shell *s = &pe->shells[pe->nshells++];
			s->ts = m->ts;
			s->tid = m->tid;
			s->kind = m->kind;
			s->cmd = dup_ws(pt->t, m->cmd);
		}
		return;
	}
	for (int i = pe->nshells - 1; i >= 0; i--) {
		open_shell *s = &pe->shells[i];
		if (s->kind != m->kind || (s->tid != m->tid && m->kind == FT_SPAWN_SYSTEM))
			continue;
		model_mark *mk = model_add_mark(pt->t, pe->mp);
		if (mk) {
			mk->ts_ns = s->ts;
			mk->dur_ns = m->ts - s->ts;
			mk->tid = s->tid;
			mk->name = m->kind == FT_SPAWN_POPEN ? "popen" : "system";
			mk->cat = "shell";
			mk->args_json = args_shell(pt->t, s->cmd, (int)m->status,
						   wire_has(m, FT_K_ERRNO) ? (int)m->err : 0);
		}
		pe->shells[i] = pe->shells[--pe->nshells];
		return;
	}
}

static void on_signal(proc_tree *pt, proc_conn *c, const wire_msg *m)
{
	model_mark *mk = model_add_mark(pt->t, c->pe->mp);
	const char *abbrev = sigabbrev_np((int)m->signo);
	char name[32];

	if (!mk)
		return;
	snprintf(name, sizeof(name), "SIG%s", abbrev ? abbrev : "UNKNOWN");
	mk->ts_ns = m->ts;
	mk->dur_ns = -1;
	mk->tid = m->tid;
	mk->name = model_strdup(pt->t, name);
	mk->cat = "signal";
	mk->args_json = args_signal(pt->t, (int)m->signo);
}

/*
 * A remote launch: the process that runs ssh is the sender, or the
 * child it names (posix_spawn, vfork), whose FORK or SPAWN record came
 * first on the same channel. The run reads the list (proc_remotes) to
 * tell which launched hosts never joined; mark_remotes marks them.
 */
static void on_remote(proc_tree *pt, proc_conn *c, const wire_msg *m)
{
	proc_entry *runs = c->pe;
	proc_remote *r;

	if (wire_has(m, FT_K_CHILD) && m->child > 0) {
		runs = find_child(pt, c->pe, m->child);
		if (!runs)
			runs = newest(pt, m->child);
	}
	if (vec_grow(&pt->remotes, &pt->remotes_cap, pt->nremotes + 1, sizeof(*pt->remotes), 8) < 0)
		return;
	r = &pt->remotes[pt->nremotes++];
	r->pid = m->pid;
	r->dest = m->name.ptr ? dup_ws(pt->t, m->name) : "";
	r->forktrace = dup_ws(pt->t, m->path);
	r->ts_ns = m->ts;
	r->pe = runs;
	r->mp = runs ? runs->mp : NULL;
	r->untraced = (m->flags & FT_REMOTE_UNTRACED) != 0;
	r->failed = false;
	r->sender = c->pe;
	r->tid = m->tid;
	/* An exec's launch happens only if the exec does not fail. */
	c->remote_pending = wire_has(m, FT_K_CHILD) ? 0 : pt->nremotes;
}

/* Each launch that happened is marked on the process that ran ssh (or
 * on its sender when that process is unknown): at the end, once the
 * exec calls that failed are known. */
static void mark_remotes(proc_tree *pt)
{
	for (size_t i = 0; i < pt->nremotes; i++) {
		const proc_remote *r = &pt->remotes[i];
		const proc_entry *on = r->pe ? r->pe : r->sender;
		model_mark *mk;

		if (r->failed || !(mk = model_add_mark(pt->t, on->mp)))
			continue;
		mk->ts_ns = r->ts_ns;
		mk->dur_ns = -1;
		mk->tid = on == r->sender ? r->tid : on->mp->pid;
		mk->name = "remote launch";
		mk->cat = "remote";
		mk->args_json = args_remote(pt->t, r->dest, r->untraced);
	}
}

size_t proc_remotes(const proc_tree *pt, const proc_remote **out)
{
	*out = pt->remotes;
	return pt->nremotes;
}

bool proc_ended(const proc_entry *pe)
{
	return pe->status_known || pe->exit_recorded || pe->end_seen;
}

/*
 * An agent counts what it could not keep. No agent drops more than
 * PROC_LOST_PLAUSIBLE events between two reports (that is days of events
 * at full speed): a larger count is a broken or hostile peer's, said
 * once per process, and still counted (saturating), since the trace
 * cannot tell how many were really lost.
 */
#define PROC_LOST_PLAUSIBLE (1ull << 48)

static void on_lost(proc_tree *pt, proc_conn *c, const wire_msg *m)
{
	model_process *p = c->pe->mp;

	if (m->count > PROC_LOST_PLAUSIBLE && !c->pe->lost_warned) {
		c->pe->lost_warned = true;
		fprintf(stderr,
			"forktrace: warning: process %d reported an implausible loss of %llu "
			"events\n",
			(int)proc_pid(c->pe), (unsigned long long)m->count);
	}
	p->lost_events = model_count_add(p->lost_events, m->count);
	pt->t->lost_events = model_count_add(pt->t->lost_events, m->count);
}

/* The event buffers of c's image, created at the first need. */
static shm_image *conn_shm(proc_conn *c)
{
	proc_entry *pe = c->pe;

	if (c->shm)
		return c->shm;
	c->shm = shm_image_new();
	if (!c->shm)
		return NULL;
	shm_image_unref(pe->shm);
	shm_image_ref(c->shm);
	pe->shm = c->shm;
	pe->shm_seg = c->seg;
	return c->shm;
}

/* A peer can send an implausible SHM frame as often as it likes: its
 * warnings are limited, the rest counted (proc_finish says how many). */
static say_limit implausible_shm;

static void on_shm(proc_tree *pt, proc_conn *c, const wire_msg *m)
{
	shm_image *si = conn_shm(c);
	int fd;

	if (wire_has(m, FT_K_TSC))
		model_add_clock(pt->t, m->tsc, m->ts);
	if (c->nfds == 0)
		return; /* sent without its fd: nothing to salvage from */
	fd = c->fds[0];
	memmove(c->fds, c->fds + 1, sizeof(c->fds[0]) * (size_t)--c->nfds);
	if (!si) {
		close(fd);
		return;
	}
	if (shm_add_region(si, fd, m->slot, m->count, m->size) == -EINVAL &&
	    say_limit_take(&implausible_shm, proc_pid(c->pe)))
		fprintf(stderr,
			"forktrace: warning: process %d sent an implausible event buffer "
			"(slots %llu+%llu of %llu bytes); what it does not send is lost\n",
			(int)proc_pid(c->pe), (unsigned long long)m->slot,
			(unsigned long long)m->count, (unsigned long long)m->size);
}

static void on_events(proc_tree *pt, proc_conn *c, const wire_msg *m)
{
	shm_image *si = conn_shm(c);
	model_process *p = c->pe->mp;
	model_thread *th = thread_of(pt, p, m->tid);
	uint64_t skip = si ? shm_accept(si, m->slot, m->offset, m->data.len, m->tid) : 0;

	if (wire_has(m, FT_K_TSC))
		model_add_clock(pt->t, m->tsc, m->ts);
	if (th && skip < m->data.len)
		model_add_chunk(pt->t, th, (uint32_t)c->seg, m->data.ptr + skip,
				m->data.len - (size_t)skip);
}

static void on_module(proc_tree *pt, proc_conn *c, const wire_msg *m)
{
	model_process *p = c->pe->mp;

	if (c->seg < p->nsegs && m->path.ptr && m->hi > m->lo)
		model_add_module(pt->t, &p->segs[c->seg], m->path.ptr, m->path.len, m->addr, m->lo,
				 m->hi);
}

struct salvage_ctx {
	proc_tree *pt;
	proc_conn *c;
};

static int salvage_chunk(void *arg, int64_t tid, const void *data, size_t len)
{
	struct salvage_ctx *sc = arg;
	model_thread *th = thread_of(sc->pt, sc->c->pe->mp, tid ? tid : proc_pid(sc->c->pe));

	if (!th)
		return -ENOMEM;
	return model_add_chunk(sc->pt->t, th, (uint32_t)sc->c->seg, data, len);
}

/* The image of c ended, or its connection did: read what its threads
 * recorded and never sent. Another connection of the same image (a
 * reconnect) later skips what was salvaged here. */
static void conn_salvage(proc_tree *pt, proc_conn *c)
{
	struct salvage_ctx sc = {pt, c};
	uint64_t n = 0;

	if (!c->shm)
		return;
	shm_salvage(c->shm, salvage_chunk, &sc, &n);
	pt->salvaged_bytes += n;
	/* Keep the image's state for a reconnect of a live process only: an
	 * image that exited or exec'd speaks no more (and holding its fds
	 * would run a long build out of them). */
	if (c->pe->shm == c->shm && (c->pe->exit_recorded || c->pe->status_known || c->exec_sent)) {
		shm_image_unref(c->pe->shm);
		c->pe->shm = NULL;
	}
	shm_image_unref(c->shm);
	c->shm = NULL;
}

void proc_conn_drop_fds(proc_conn *c)
{
	while (c->nfds > 0)
		close(c->fds[--c->nfds]);
}

int proc_apply(proc_tree *pt, proc_conn *c, const wire_msg *m, int64_t now_ns)
{
	pt->messages++;
	if (m->type == FT_MSG_HELLO) {
		if (c->pe)
			return -EPROTO;
		return on_hello(pt, c, m);
	}
	if (!c->pe)
		return -EPROTO;
	conn_sync(c);
	(void)now_ns;
	seen(c->pe, m->ts);
	switch (m->type) {
	case FT_MSG_FORK:
		on_fork(pt, c, m);
		break;
	case FT_MSG_EXEC:
		on_exec(pt, c, m);
		break;
	case FT_MSG_EXEC_FAIL:
		on_exec_fail(pt, c, m);
		break;
	case FT_MSG_SPAWN:
		on_spawn(pt, c, m);
		break;
	case FT_MSG_WAIT:
		on_wait(pt, c, m);
		break;
	case FT_MSG_THREAD_START:
	case FT_MSG_THREAD_END:
	case FT_MSG_THREAD_NAME:
		on_thread(pt, c, m);
		break;
	case FT_MSG_EXIT:
		c->pe->exit_recorded = true;
		c->pe->exit_code = (int)m->code;
		c->pe->exit_ts = m->ts;
		c->pe->mp->end_ns = m->ts;
		c->pe->end_seen = true;
		/* How it ended, as soon as it is known: a node's part cut
		 * short before proc_finish says so too. A wait status seen
		 * later (a signal during exit) overrides it. */
		if (!c->pe->status_known) {
			c->pe->mp->exit_kind = MODEL_EXIT_CODE;
			c->pe->mp->exit_value = (int)m->code;
		}
		if (wire_has(m, FT_K_RUSAGE)) {
			c->pe->exit_ru = m->ru;
			c->pe->has_exit_ru = true;
		}
		if (wire_has(m, FT_K_RUSAGE_CHILDREN)) {
			c->pe->exit_children = m->ru_children;
			c->pe->has_exit_children = true;
		}
		ru_settle(c->pe);
		break;
	case FT_MSG_SIGNAL:
		on_signal(pt, c, m);
		break;
	case FT_MSG_SHELL_BEGIN:
	case FT_MSG_SHELL_END:
		on_shell(pt, c, m);
		break;
	case FT_MSG_LOST:
		on_lost(pt, c, m);
		break;
	case FT_MSG_SHM:
		on_shm(pt, c, m);
		break;
	case FT_MSG_EVENTS:
		on_events(pt, c, m);
		break;
	case FT_MSG_MODULE:
		on_module(pt, c, m);
		break;
	case FT_MSG_REMOTE:
		on_remote(pt, c, m);
		break;
	default:
		break; /* a newer agent's message: ignored */
	}
	return 0;
}

void proc_conn_closed(proc_tree *pt, proc_conn *c, int64_t now_ns)
{
	proc_entry *pe = c->pe;

	proc_conn_drop_fds(c);
	if (!pe)
		return;
	conn_sync(c);
	conn_salvage(pt, c);
	pe->conns--;
	seen(pe, now_ns);
	if (c->exec_sent && c->seg + 1 == pe->mp->nsegs) {
		/* The exec succeeded (the connection closed on exec) and the
		 * new image has not spoken: until it does, it is an image the
		 * agent could not enter. */
		pe->exec_pending = false;
		add_placeholder(pt, pe, c->exec_ts, c->exec_path, c->exec_argv, c->exec_argc);
		return;
	}
	if (!c->exec_sent && pe->conns == 0 && !pe->end_seen) {
		pe->mp->end_ns = now_ns;
		pe->end_seen = true;
	}
}

void **proc_table_ref(proc_entry *pe)
{
	return &pe->table_entry;
}

int64_t proc_last_seen(const proc_entry *pe)
{
	return pe->last_seen_ns;
}

bool proc_conn_current(proc_conn *c)
{
	if (!c->pe)
		return false;
	conn_sync(c);
	return c->seg + 1 >= c->pe->mp->nsegs;
}

bool proc_status_known(const proc_entry *pe)
{
	return pe->status_known;
}

void proc_conn_handover(proc_conn *from, proc_conn *to)
{
	if (!from->pe || from->pe != to->pe)
		return;
	/* An exec announced in the slot whose failure comes here. */
	to->exec_sent = from->exec_sent;
	to->exec_ts = from->exec_ts;
	to->exec_path = from->exec_path;
	to->exec_argv = from->exec_argv;
	to->exec_argc = from->exec_argc;
	to->remote_pending = from->remote_pending;
	conn_sync(from);
	to->seg = from->seg;
	to->seg_shift = from->seg_shift;
	from->pe->conns--;
	from->pe = NULL;
}

void proc_reaped(proc_tree *pt, pid_t pid, int status, const model_rusage *ru, int64_t now_ns)
{
	proc_entry *pe = find_child(pt, NULL, pid);

	if (!pe) {
		/* An orphan of a process we never heard of. */
		pe = entry_new(pt, pid, now_ns);
		if (!pe)
			return;
	}
	set_status(pe, status, now_ns);
	set_wait_ru(pe, status, ru);
}

proc_entry *proc_add_root(proc_tree *pt, pid_t pid, const char *const *argv, const char *exe,
			  int64_t start_ns)
{
	proc_entry *pe = entry_new(pt, pid, start_ns);
	size_t argc = 0;

	if (!pe)
		return NULL;
	pe->root = true;
	pe->mp->ppid = getpid();
	while (argv[argc])
		argc++;
	add_placeholder(pt, pe, start_ns, model_strdup(pt->t, exe),
			model_strvdup(pt->t, argv, argc), argc);
	return pe;
}

/* No snprintf: it is not signal-safe (a signal handler of runsig.c
 * follows a sender's parents). */
const char *proc_stat_fields(pid_t pid, char *buf, size_t cap)
{
	char path[32] = "/proc/", digits[12];
	size_t k = 6;
	int nd = 0, fd;
	ssize_t n;

	if (pid <= 0)
		return NULL;
	for (pid_t v = pid; v; v /= 10)
		digits[nd++] = (char)('0' + v % 10);
	while (nd)
		path[k++] = digits[--nd];
	memcpy(path + k, "/stat", 6);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	do
		n = read(fd, buf, cap - 1);
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	/* pid (comm) state ...: comm may hold anything, its last ')' ends it. */
	char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || !p[2])
		return NULL;
	return p + 2;
}

pid_t proc_stat_ppid(pid_t pid)
{
	char buf[1024];
	const char *p = proc_stat_fields(pid, buf, sizeof(buf));
	pid_t ppid = 0;

	if (!p || p[1] != ' ' || p[2] < '0' || p[2] > '9')
		return -1;
	for (p += 2; *p >= '0' && *p <= '9'; p++)
		ppid = ppid * 10 + (*p - '0');
	return ppid;
}

/* Is this process still alive on the host (same pid, same start)? */
static bool still_alive(const proc_entry *pe)
{
	char buf[1024];
	const char *p = proc_stat_fields((pid_t)pe->mp->pid, buf, sizeof(buf));

	if (!p || p[0] == 'Z' || p[0] == 'X')
		return false;
	if (!pe->mp->start_ticks)
		return true;
	/* Field 22 (starttime) is the 20th after the state (field 3). */
	for (int field = 3; field < 22 && p; field++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	return p && strtoull(p, NULL, 10) == pe->mp->start_ticks;
}

static proc_entry *find_parent(proc_tree *pt, proc_entry *pe)
{
	if (pe->parent)
		return pe->parent;
	if (pe->mp->ppid < 0)
		return NULL;
	for (proc_entry *e = newest(pt, pe->mp->ppid); e; e = e->older)
		if (e != pe && e->mp->start_ns <= pe->mp->start_ns)
			return e;
	return NULL;
}

/*
 * glibc's system() and popen() start their shell through an internal
 * spawn the agent cannot see, so the parent records only the call
 * (SHELL_BEGIN/END). A child with no creator record that started inside
 * such a call of its parent is that call's shell.
 */
static void link_shell_child(proc_entry *pe, proc_entry *parent, int64_t end_ns)
{
	const model_process *pp = parent->mp;
	int64_t start = pe->mp->start_ns;

	for (size_t i = pp->nmarks; i-- > 0;) {
		const model_mark *mk = &pp->marks[i];
		if (!mk->cat || strcmp(mk->cat, "shell") != 0 || mk->ts_ns > start ||
		    mk->ts_ns + mk->dur_ns < start)
			continue;
		pe->parent = parent;
		pe->mp->spawn_ns = mk->ts_ns;
		pe->mp->spawn_tid = mk->tid;
		pe->mp->spawn_kind = strcmp(mk->name, "popen") == 0 ? FT_SPAWN_POPEN
								    : FT_SPAWN_SYSTEM;
		return;
	}
	/* A call still open (popen without pclose) runs to the end. */
	for (int i = parent->nshells - 1; i >= 0; i--) {
		const open_shell *sh = &parent->shells[i];
		if (sh->ts <= start && start <= end_ns) {
			pe->parent = parent;
			pe->mp->spawn_ns = sh->ts;
			pe->mp->spawn_tid = sh->tid;
			pe->mp->spawn_kind = (int)sh->kind;
			return;
		}
	}
}

/*
 * Points every process's model parent at what the tree knows of it now:
 * its creator's FORK/SPAWN record, else the process its ppid names (the
 * newest of that pid that started before it, so a reused pid is not
 * taken for an older process). A node collector calls it before each sync
 * of its model stream, so that a part cut short (the node killed) holds
 * the parents known when it was cut, as a finished one does; a later
 * call re-points a parent the tree learned better since.
 */
void proc_link_parents(proc_tree *pt)
{
	for (size_t i = 0; i < pt->nall; i++) {
		proc_entry *parent = find_parent(pt, pt->all[i]);

		pt->all[i]->mp->parent = parent ? parent->mp : NULL;
	}
}

void proc_finish(proc_tree *pt, int64_t now_ns, bool tree_done)
{
	model_trace *t = pt->t;
	int64_t next_out_pid = 1 << 22; /* above any pid_max: never a real pid */

	for (size_t i = 0; i < pt->nall; i++) {
		proc_entry *pe = pt->all[i];
		model_process *p = pe->mp;

		if (!pe->status_known) {
			if (!tree_done && still_alive(pe)) {
				p->exit_kind = MODEL_EXIT_RUNNING;
				p->end_ns = -1;
				pe->end_seen = false;
			} else if (pe->exit_recorded) {
				p->exit_kind = MODEL_EXIT_CODE;
				p->exit_value = pe->exit_code;
			}
		}
		if (!pe->end_seen && p->exit_kind != MODEL_EXIT_RUNNING)
			p->end_ns = pe->last_seen_ns;
		if (pe->exit_recorded && p->exit_kind != MODEL_EXIT_RUNNING)
			p->end_ns = pe->exit_ts;
		/* Never spoke: a fork child is a copy of its parent's image;
		 * anything else ran something the agent could not enter. */
		if (p->nsegs == 0)
			add_fork_image(pt, pe, true);
		if (p->nsegs == 0)
			add_placeholder(pt, pe, p->start_ns, NULL, NULL, 0);
		for (size_t s = 0; s < p->nsegs; s++)
			p->segs[s].end_ns = s + 1 < p->nsegs ? p->segs[s + 1].start_ns : p->end_ns;
		for (size_t k = 0; k < p->nthreads; k++)
			if (p->threads[k].end_ns < 0 && p->exit_kind != MODEL_EXIT_RUNNING)
				p->threads[k].end_ns = p->end_ns;
		proc_entry *parent = find_parent(pt, pe);
		if (parent && !pe->parent)
			link_shell_child(pe, parent, now_ns);
		p->parent = parent ? parent->mp : NULL;
		/* Pid reuse: the later process of a pid gets a number no real
		 * process can have, and keeps its host pid in its args. */
		if (pe->older || p->pid < 0)
			p->out_pid = next_out_pid++;
		if (t->start_ns < 0 || (p->start_ns >= 0 && p->start_ns < t->start_ns))
			t->start_ns = p->start_ns;
		if (p->end_ns > t->end_ns)
			t->end_ns = p->end_ns;
	}
	mark_remotes(pt);
	if (t->end_ns < now_ns && !tree_done)
		t->end_ns = now_ns;
	if (t->end_ns < 0)
		t->end_ns = now_ns;
	say_limit_end(&implausible_shm, "implausible event buffers", "process");
}

void proc_get_counts(const proc_tree *pt, proc_counts *c)
{
	c->processes = pt->nall;
	c->running = 0;
	for (size_t i = 0; i < pt->nall; i++)
		if (!pt->all[i]->status_known && !pt->all[i]->end_seen)
			c->running++;
	c->messages = pt->messages;
	c->salvaged_bytes = pt->salvaged_bytes;
}
