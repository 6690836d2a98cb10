/*
 * model_fixture.c - what the unit tests of the model's walk (test_events.c)
 * and of the merge (test_merge.c) share: the hand-built model that
 * check_events.py knows by heart, and writing a model the way the walk
 * does (events_write).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "model_fixture.h"

/* Everything an ostream wrote to a memfd, NUL-terminated; caller frees. */
char *read_back(int fd, size_t *len)
{
	off_t end = lseek(fd, 0, SEEK_END);
	char *buf;

	if (end < 0)
		return NULL;
	buf = malloc((size_t)end + 1);
	MUST(buf);
	if (pread(fd, buf, (size_t)end, 0) != end) {
		free(buf);
		return NULL;
	}
	buf[end] = '\0';
	*len = (size_t)end;
	return buf;
}

model_segment *add_seg(model_trace *t, model_process *p, const char *exe, const char *const *argv,
		       size_t argc, const char *cwd, int64_t start, int64_t end, bool instrumented)
{
	model_segment *s = model_add_segment(t, p);

	MUST(s);
	s->exe = model_strdup(t, exe);
	s->argv = model_strvdup(t, argv, argc);
	s->argc = argc;
	s->cwd = model_strdup(t, cwd);
	s->start_ns = start;
	s->end_ns = end;
	s->instrumented = instrumented;
	return s;
}

/*
 * The model check_events.py knows by heart. Times in ns; the comments give
 * the pids. Added in an order different from the expected sort order.
 */
model_trace *build_model(void)
{
	static const char *const cmd[] = {"make", "-j4", NULL};
	static const char *const sh[] = {"/bin/sh", "-c", "make -j4", NULL};
	static const char *const make[] = {"make", "-j4", NULL};
	static const char *const cc[] = {"/usr/bin/cc", "-c", "x.c", NULL};
	static const char *const as[] = {"as", "-o", "x.o", NULL};
	static const char *const odd[] = {"./odd\"na\\me", "\x01\x1f\n\t", "bad\xff\xc3(",
					  "caf\xc3\xa9",   "\xed\xa0\x80", NULL};
	model_trace *t = model_new();
	model_process *root, *child, *gchild, *reused, *orphan;
	model_thread *th;
	model_mark *m;

	MUST(t);
	t->host = model_strdup(t, "testhost");
	t->command = model_strvdup(t, cmd, 2);
	t->origin = model_strdup(t, "forktrace run");
	t->anchor_mono_ns = 123;
	t->anchor_real_ns = 1700000000000000456;
	t->start_ns = 500000000;
	t->end_ns = 6000000000;
	t->exit_status = 137;
	t->lost_events = 5;

	/* Root 100: sh -c, then exec make. Exit code 0. */
	MUST(root = model_add_process(t, 100));
	root->ppid = 1;
	root->start_ns = 1000000000;
	root->end_ns = 5000000000;
	root->start_ticks = 4242;
	root->exit_kind = MODEL_EXIT_CODE;
	root->exit_value = 0;
	add_seg(t, root, "/bin/sh", sh, 3, "/src", 1000000000, 1500000000, true);
	add_seg(t, root, "/usr/bin/make", make, 2, "/src", 1500000000, -1, true);
	MUST(th = model_add_thread(t, root, 100));
	th->start_ns = 1000000000;
	MUST(th = model_add_thread(t, root, 101));
	th->name = model_strdup(t, "worker");
	MUST(th = model_add_thread(t, root, 102));
	CHECK(model_find_thread(root, 101) != NULL && model_find_thread(root, 7) == NULL);
	MUST(m = model_add_mark(t, root));
	m->ts_ns = 1600000000;
	m->tid = 101;
	m->name = model_strdup(t, "exec failed");
	m->cat = model_strdup(t, "exec");
	m->args_json = model_strdup(t, "{\"path\":\"/nope\",\"errno\":2,"
				       "\"error\":\"No such file or directory\"}");
	MUST(m = model_add_mark(t, root));
	m->ts_ns = 1700000000;
	m->dur_ns = 250000;
	m->tid = 100;
	m->name = model_strdup(t, "system");
	m->cat = model_strdup(t, "shell");
	m->args_json = model_strdup(t, "{\"cmd\":\"true\",\"status\":0}");

	/* Child 200: forked by thread 101, killed by SIGKILL, lost 3. */
	MUST(child = model_add_process(t, 200));
	child->ppid = 100;
	child->parent = root;
	child->spawn_ns = 2000000123;
	child->spawn_tid = 101;
	child->spawn_kind = 0; /* FT_SPAWN_FORK */
	child->start_ns = 2000000500;
	child->end_ns = 3000000000;
	child->exit_kind = MODEL_EXIT_SIGNAL;
	child->exit_value = SIGKILL;
	child->lost_events = 3;
	add_seg(t, child, "/usr/bin/make", make, 2, "/src", 2000000500, 3000000000, true);

	/* Grandchild 300: posix_spawn by 200, cc then a static `as`. */
	MUST(gchild = model_add_process(t, 300));
	gchild->ppid = 200;
	gchild->parent = child;
	gchild->spawn_ns = 2100000000;
	gchild->spawn_tid = 200;
	gchild->spawn_kind = 2; /* FT_SPAWN_POSIX_SPAWN */
	gchild->start_ns = 2100000000;
	gchild->end_ns = 2500000000;
	gchild->exit_kind = MODEL_EXIT_CODE;
	gchild->exit_value = 1;
	add_seg(t, gchild, "/usr/bin/cc", cc, 3, "/src", 2100000000, 2200000000, true);
	add_seg(t, gchild, "/usr/bin/as", as, 3, "/src", 2200000000, -1, false);

	/* Pid 200 again (reused): vfork by the root, still running, odd
	 * bytes in argv. */
	MUST(reused = model_add_process(t, 200));
	reused->out_pid = 4194305;
	reused->ppid = 100;
	reused->parent = root;
	reused->spawn_ns = 3500000000;
	reused->spawn_tid = 100;
	reused->spawn_kind = 1; /* FT_SPAWN_VFORK */
	reused->start_ns = 3500000000;
	reused->exit_kind = MODEL_EXIT_RUNNING;
	add_seg(t, reused, NULL, odd, 5, NULL, 3500000000, -1, true);
	MUST(th = model_add_thread(t, reused, 200));
	MUST(th = model_add_thread(t, reused, 201));
	th->name = model_strdup(t, "t\"1\xff");
	MUST(m = model_add_mark(t, reused));
	m->ts_ns = 3600000000;
	m->tid = 201;
	m->name = model_strdup(t, "SIGSEGV");
	m->cat = model_strdup(t, "signal");
	m->args_json = model_strdup(t, "{\"signal\":11}");

	/* Orphan 400: no parent record, nothing known but its lifetime; it
	 * starts first, so it is the first root. */
	MUST(orphan = model_add_process(t, 400));
	orphan->ppid = 1;
	orphan->start_ns = 500000000;
	orphan->end_ns = 600000000;
	return t;
}

#define S_NS 1000000000LL
/* The head's realtime anchor. */
#define HEAD_REAL (1700000000LL * S_NS)

/* A process of the multi-host fixture: one image of argv, its lifetime,
 * its exit code. */
static model_process *mh_proc(model_trace *t, int64_t pid, model_process *parent,
			      const char *const *argv, size_t argc, int64_t start, int64_t end,
			      int code)
{
	model_process *p = model_add_process(t, pid);

	MUST(p);
	p->ppid = parent != NULL ? parent->pid : 1;
	p->parent = parent;
	p->start_ns = start;
	p->end_ns = end;
	if (parent != NULL) {
		p->spawn_ns = start;
		p->spawn_tid = parent->pid;
		p->spawn_kind = 0; /* FT_SPAWN_FORK */
	}
	p->exit_kind = MODEL_EXIT_CODE;
	p->exit_value = code;
	add_seg(t, p, argv[0], argv, argc, "/home/u", start, end, true);
	return p;
}

model_trace *build_head_model(void)
{
	static const char *const cmd[] = {"bash", "job.sh", NULL};
	static const char *const ssh2[] = {"/usr/bin/ssh", "node2", "./app", NULL};
	static const char *const ssh3[] = {"/usr/bin/ssh", "node3", "./app", NULL};
	static const char *const ssh4[] = {"/usr/bin/ssh", "node4", "./app", NULL};
	model_trace *t = model_new();
	model_process *root;

	MUST(t);
	t->host = model_strdup(t, "head");
	t->command = model_strvdup(t, cmd, 2);
	t->origin = model_strdup(t, "forktrace run");
	t->anchor_mono_ns = 2000 * S_NS;
	t->anchor_real_ns = HEAD_REAL;
	t->start_ns = 2000 * S_NS;
	t->end_ns = 2030 * S_NS;
	root = mh_proc(t, 100, NULL, cmd, 2, 2000 * S_NS, 2030 * S_NS, 0);
	mh_proc(t, 200, root, ssh2, 3, 2001 * S_NS, 2025 * S_NS, 0);
	mh_proc(t, 300, root, ssh3, 3, 2001 * S_NS + 1000, 2026 * S_NS, 255);
	mh_proc(t, 400, root, ssh4, 3, 2001 * S_NS + 2000, 2002 * S_NS, 0);
	MUST(model_add_missing_host(t, "node4", 400, "no node collector joined",
				    "node4:/shared/out/node4-77.ftnode") == 0);
	return t;
}

/* A node's part: its host, run and launcher. */
static model_trace *mh_part(const char *host, int64_t launcher)
{
	model_trace *t = model_new();

	MUST(t);
	t->host = model_strdup(t, host);
	t->origin = model_strdup(t, "forktrace run");
	t->node.is_node = true;
	t->node.run_id = model_strdup(t, "0123456789abcdef");
	t->node.head_host = model_strdup(t, "head");
	t->node.launcher_pid = launcher;
	t->node.launched_as = model_strdup(t, host);
	return t;
}

model_trace *build_node2_part(void)
{
	static const char *const sh[] = {"/bin/sh", "-c", "./app", NULL};
	static const char *const app[] = {"./app", NULL};
	model_trace *t = mh_part("node2", 200);
	model_process *root, *p;
	model_mark *m;

	/* head = node + 1000 s + 50 ppm * (node - 1002 s), measured every
	 * 2 s to within 30 us. */
	for (int k = 0; k <= 10; k++) {
		int64_t node = (1002 + 2 * k) * S_NS;

		MUST(model_add_clock_sample(t, node, 1000 * S_NS + (node - 1002 * S_NS) / 20000,
					    30000) == 0);
	}
	t->anchor_mono_ns = 1002 * S_NS;
	t->anchor_real_ns = HEAD_REAL + 2 * S_NS;
	t->start_ns = 1002 * S_NS;
	t->end_ns = 1024 * S_NS;
	root = mh_proc(t, 100, NULL, sh, 3, 1002 * S_NS + 500000000, 1024 * S_NS, 0);
	p = mh_proc(t, 200, root, app, 1, 1003 * S_NS, 1020 * S_NS, 0);
	p->rank = 0;
	p->local_rank = 0;
	p->rank_var = model_strdup(t, "OMPI_COMM_WORLD_RANK");
	MUST(m = model_add_mark(t, p));
	m->ts_ns = 1010 * S_NS;
	m->dur_ns = 4 * S_NS;
	m->tid = 200;
	m->name = model_strdup(t, "system");
	m->cat = model_strdup(t, "shell");
	p = mh_proc(t, 201, root, app, 1, 1003 * S_NS, 1021 * S_NS, 0);
	p->rank = 1;
	p->local_rank = 1;
	p->rank_var = model_strdup(t, "OMPI_COMM_WORLD_RANK");
	return t;
}

model_trace *build_node3_part(void)
{
	static const char *const sh[] = {"/bin/sh", "-c", "./app", NULL};
	static const char *const app[] = {"./app", NULL};
	model_trace *t = mh_part("node3", 300);
	model_process *root, *p;

	t->anchor_mono_ns = 500 * S_NS;
	t->anchor_real_ns = HEAD_REAL;
	t->start_ns = 502 * S_NS;
	t->end_ns = 515 * S_NS;
	t->node.lost_ns = 515 * S_NS;
	root = mh_proc(t, 100, NULL, sh, 3, 502 * S_NS, 515 * S_NS, 0);
	root->exit_kind = MODEL_EXIT_HOST_LOST;
	p = mh_proc(t, 150, root, app, 1, 503 * S_NS, 515 * S_NS, 0);
	p->exit_kind = MODEL_EXIT_HOST_LOST;
	p->rank = 2;
	p->local_rank = 0;
	p->rank_var = model_strdup(t, "PMIX_RANK");
	return t;
}

int write_file(const model_trace *t, const char *path, int level, events_stats *st)
{
	events_opts opts = {.gzip_level = level};
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int err;

	if (fd < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -errno;
	}
	err = events_write(t, fd, events_format_for_path(path), &opts, st);
	if (close(fd) < 0 && err == 0)
		err = -errno;
	if (err < 0)
		fprintf(stderr, "%s: events_write: %s\n", path, strerror(-err));
	return err;
}
