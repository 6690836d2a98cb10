/*
 * Unit test of combine/: ostream formatting in C, then a hand-built model
 * written as .json and .json.gz and checked field by field by
 * check_events.py (the json module is a stricter judge of our output than
 * anything we would write here).
 *
 * Then the model as an input of the merge: written as its own trace it
 * is byte for byte what events_write writes, and among other inputs
 * byte for byte what the merge makes of that file.
 *
 * Usage: test_events PYTHON CHECK_SCRIPT WORKDIR
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "jsonw.h"
#include "events.h"
#include "merge.h"
#include "model.h"
#include "ostream.h"

static void check_fmt(size_t (*fmt)(char *, int64_t), int64_t v, const char *want)
{
	char buf[OSTREAM_NUM_MAX + 1];
	size_t n = fmt(buf, v);

	CHECK(n <= OSTREAM_NUM_MAX);
	buf[n < OSTREAM_NUM_MAX ? n : OSTREAM_NUM_MAX] = '\0';
	if (strcmp(buf, want) != 0)
		check_fail_at(__FILE__, __LINE__, "format %" PRId64 ": got '%s', want '%s'", v, buf,
			      want);
}

static void check_u64(uint64_t v, const char *want)
{
	char buf[OSTREAM_NUM_MAX + 1];
	size_t n = ostream_fmt_u64(buf, v);

	buf[n < OSTREAM_NUM_MAX ? n : OSTREAM_NUM_MAX] = '\0';
	if (strcmp(buf, want) != 0)
		check_fail_at(__FILE__, __LINE__, "u64 %" PRIu64 ": got '%s', want '%s'", v, buf,
			      want);
}

static void test_numbers(void)
{
	check_u64(0, "0");
	check_u64(9, "9");
	check_u64(10, "10");
	check_u64(99, "99");
	check_u64(100, "100");
	check_u64(12345, "12345");
	check_u64(UINT64_MAX, "18446744073709551615");

	check_fmt(ostream_fmt_i64, 0, "0");
	check_fmt(ostream_fmt_i64, -1, "-1");
	check_fmt(ostream_fmt_i64, 1000000, "1000000");
	check_fmt(ostream_fmt_i64, INT64_MAX, "9223372036854775807");
	check_fmt(ostream_fmt_i64, INT64_MIN, "-9223372036854775808");

	check_fmt(ostream_fmt_ts, 0, "0.000");
	check_fmt(ostream_fmt_ts, 1, "0.001");
	check_fmt(ostream_fmt_ts, 999, "0.999");
	check_fmt(ostream_fmt_ts, 1000, "1.000");
	check_fmt(ostream_fmt_ts, 1234567, "1234.567");
	check_fmt(ostream_fmt_ts, 2000000123, "2000000.123");
	check_fmt(ostream_fmt_ts, -1, "-0.001");
	check_fmt(ostream_fmt_ts, -1000, "-1.000");
	check_fmt(ostream_fmt_ts, -1234567, "-1234.567");
	check_fmt(ostream_fmt_ts, INT64_MAX, "9223372036854775.807");
	check_fmt(ostream_fmt_ts, INT64_MIN, "-9223372036854775.808");
}

/* Everything an ostream wrote to a memfd, NUL-terminated; caller frees. */
static char *read_back(int fd, size_t *len)
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

static void check_escape(const char *in, size_t n, const char *want)
{
	int fd = memfd_create("escape", 0);
	ostream o;
	size_t len = 0;
	char *got;

	CHECK(fd >= 0);
	CHECK(ostream_open(&o, fd, -1) == 0);
	ostream_json_str(&o, in, n);
	CHECK(ostream_finish(&o) == 0);
	got = read_back(fd, &len);
	CHECK(got != NULL);
	if (got != NULL && strcmp(got, want) != 0)
		check_fail_at(__FILE__, __LINE__, "escape: got '%s', want '%s'", got, want);
	free(got);
	close(fd);

	/* The buffer flavour for the collector must agree byte for byte. */
	{
		char buf[256];
		size_t len2 = jsonw_escape(buf, sizeof(buf), in, n);

		CHECK(len2 == strlen(want) && memcmp(buf, want, len2) == 0);
	}
}

static void check_escape_cut(const char *in, size_t cap, const char *want)
{
	char buf[64];
	size_t n = jsonw_escape(buf, cap, in, strlen(in));

	CHECK(n <= cap);
	if (n != strlen(want) || memcmp(buf, want, n) != 0)
		check_fail_at(__FILE__, __LINE__, "jsonw_escape cap %zu: got '%.*s', want '%s'",
			      cap, (int)n, buf, want);
}

#define ESC(lit, want) check_escape(lit, sizeof(lit) - 1, want)

/* The stream flavour (ostream_json_str, copying runs) and the buffer
 * flavour (jsonw_escape, byte by byte) are two implementations of one
 * escaping: random strings over the bytes and sequences that matter must
 * come out the same from both. Every other string is written after a
 * filler that ends just short of the stream's buffer, so that it crosses
 * a flush. */
static void test_escape_random(void)
{
	static const char *const pieces[] = {
		"a", " ", "~", "\x7f", "\"", "\\", "\n", "\x01", "\x1f", "[", "\xc3\xa9",
		"\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xc3", "\xe2\x82", "\xf0\x9f\x98",
		"\xed\xa0\x80", "\xc0\xaf", "\x80", "\xff", "\xf4\x90\x80\x80",
	};
	static const char letters[] = "abcdefghijklmnopqrstuvwxyz";
	static char filler[OSTREAM_BUF_SIZE];
	int fd = memfd_create("escape-random", 0);
	unsigned seed = 12345;
	char in[128], want[128 * 6 + 3];

	CHECK(fd >= 0);
	memset(filler, 'f', sizeof(filler));
	for (int round = 0; round < 20000; round++) {
		size_t n = 0, len = 0, wlen, pad = round % 8 == 1 ? OSTREAM_BUF_SIZE - round % 13 : 0;
		size_t want_n = (size_t)(round % 41);
		ostream o;
		char *got;

		while (n < want_n) {
			const char *p;

			seed = seed * 1103515245u + 12345u;
			/* Mostly plain bytes, so that long plain runs occur. */
			p = (seed >> 16) % 4 ? &letters[(seed >> 8) % 26]
					     : pieces[(seed >> 20) % (sizeof(pieces) / sizeof(pieces[0]))];
			/* One byte of a plain letter; a whole piece otherwise. */
			for (size_t k = 0; p[k] && n < sizeof(in) && (k == 0 || (seed >> 16) % 4 == 0);
			     k++)
				in[n++] = p[k];
		}
		wlen = jsonw_escape(want, sizeof(want), in, n);
		CHECK(ftruncate(fd, 0) == 0 && lseek(fd, 0, SEEK_SET) == 0);
		CHECK(ostream_open(&o, fd, -1) == 0);
		ostream_write(&o, filler, pad);
		ostream_json_str(&o, in, n);
		CHECK(ostream_finish(&o) == 0);
		got = read_back(fd, &len);
		if (got == NULL || len != pad + wlen || memcmp(got + pad, want, wlen) != 0) {
			check_fail_at(__FILE__, __LINE__,
				      "escape round %d: ostream_json_str and jsonw_escape differ",
				      round);
			free(got);
			break;
		}
		free(got);
	}
	close(fd);
}

static void test_escape(void)
{
	ESC("", "\"\"");
	ESC("plain", "\"plain\"");
	ESC("a\"b\\c", "\"a\\\"b\\\\c\"");
	ESC("\b\f\n\r\t", "\"\\b\\f\\n\\r\\t\"");
	ESC("\x01\x1f\x7f", "\"\\u0001\\u001f\x7f\"");
	ESC("nul\0in", "\"nul\\u0000in\"");
	ESC("caf\xc3\xa9", "\"caf\xc3\xa9\"");		   /* valid 2-byte */
	ESC("\xe2\x82\xac", "\"\xe2\x82\xac\"");	   /* valid 3-byte (euro) */
	ESC("\xf0\x9f\x98\x80!", "\"\xf0\x9f\x98\x80!\""); /* valid 4-byte */
	ESC("a\xff"
	    "b",
	    "\"a\\ufffdb\"");					     /* never valid */
	ESC("\xc0\xaf", "\"\\ufffd\\ufffd\"");			     /* overlong '/' */
	ESC("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"");	     /* surrogate */
	ESC("\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\""); /* > U+10FFFF */
	ESC("\xe2\x82", "\"\\ufffd\\ufffd\"");			     /* cut at the end */
	ESC("\xc3(", "\"\\ufffd(\"");				     /* bad continuation */
	ESC("\x80\xbf", "\"\\ufffd\\ufffd\"");			     /* lone continuation */

	check_escape_cut("abc", 1, "");
	check_escape_cut("abc", 2, "\"\"");
	check_escape_cut("abc", 4, "\"ab\"");
	check_escape_cut("abc", 5, "\"abc\"");
	check_escape_cut("a\nb", 4, "\"a\""); /* no half escape */
	check_escape_cut("a\nb", 5, "\"a\\n\"");
	check_escape_cut("\xc3\xa9x", 3, "\"\""); /* no half character */
	check_escape_cut("\xffx", 7, "\"\"");	  /* no half \ufffd */
	check_escape_cut("\xffx", 8, "\"\\ufffd\"");
}

/* A write bigger than the buffer goes through whole; errors stick. */
static void test_stream(void)
{
	static char big[3 * OSTREAM_BUF_SIZE + 17];
	int fd = memfd_create("big", 0);
	ostream o;
	size_t len = 0;
	char *got;

	memset(big, 'x', sizeof(big));
	CHECK(fd >= 0);
	CHECK(ostream_open(&o, fd, -1) == 0);
	ostream_putc(&o, '<');
	ostream_write(&o, big, sizeof(big));
	ostream_putc(&o, '>');
	CHECK(ostream_finish(&o) == 0);
	CHECK(ostream_bytes(&o) == sizeof(big) + 2);
	got = read_back(fd, &len);
	CHECK(got != NULL && len == sizeof(big) + 2 && got[0] == '<' && got[len - 1] == '>');
	free(got);
	close(fd);

	fd = open("/dev/full", O_WRONLY);
	if (fd >= 0) {
		CHECK(ostream_open(&o, fd, 6) == 0);
		ostream_write(&o, big, sizeof(big));
		CHECK(ostream_error(&o) == -ENOSPC);
		ostream_write(&o, big, sizeof(big));
		CHECK(ostream_finish(&o) == -ENOSPC);
		close(fd);
	}
	fd = open("/dev/null", O_RDONLY);
	CHECK(fd >= 0);
	CHECK(ostream_open(&o, fd, -1) == 0);
	ostream_puts(&o, "x");
	CHECK(ostream_finish(&o) == -EBADF);
	close(fd);
	CHECK(ostream_open(&o, 1, 10) == -EINVAL);

	CHECK(events_format_for_path("a.json") == TRACE_FORMAT_JSON);
	CHECK(events_format_for_path("a.json.gz") == TRACE_FORMAT_JSON_GZ);
	CHECK(events_format_for_path("a.gz") == TRACE_FORMAT_JSON_GZ);
	CHECK(events_format_for_path("gz") == TRACE_FORMAT_JSON);
	CHECK(events_format_for_path(NULL) == TRACE_FORMAT_JSON);
}

static model_segment *add_seg(model_trace *t, model_process *p, const char *exe,
			      const char *const *argv, size_t argc, const char *cwd, int64_t start,
			      int64_t end, bool instrumented)
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
static model_trace *build_model(void)
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

/* A chain of n processes, each the parent of the next: the writer must not
 * recurse. */
static model_trace *build_chain(size_t n)
{
	static const char *const argv[] = {"sh", NULL};
	model_trace *t = model_new();
	model_process *prev = NULL;
	size_t i;

	MUST(t);
	t->start_ns = 0;
	t->end_ns = (int64_t)n * 10 + 10;
	for (i = 0; i < n; i++) {
		model_process *p = model_add_process(t, (int64_t)i + 1000);

		MUST(p);
		p->parent = prev;
		p->ppid = prev != NULL ? prev->pid : -1;
		p->start_ns = (int64_t)i * 10;
		p->spawn_ns = prev != NULL ? p->start_ns : -1;
		p->spawn_tid = prev != NULL ? prev->pid : -1;
		add_seg(t, p, "/bin/sh", argv, 1, "/", p->start_ns, -1, true);
		prev = p;
	}
	return t;
}

static int write_file(const model_trace *t, const char *path, int level, events_stats *st)
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

static int run_check(const char *python, const char *script, const char *mode, const char *path)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		execl(python, python, script, mode, path, (char *)NULL);
		perror(python);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "check_events.py %s %s failed (status 0x%x)\n", mode, path, status);
		return -1;
	}
	return 0;
}

/* The whole content of path (malloc'd, *len bytes), or NULL. */
static char *slurp(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char *p;

	if (fd < 0)
		return NULL;
	p = read_back(fd, len);
	close(fd);
	return p;
}

/* merge_inputs of src into a JSON file at path. */
static int merge_to(const merge_source *src, size_t n, const merge_opts *o, const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	merge_result res;
	trace_sink *s;
	int err;

	if (fd < 0)
		return -errno;
	s = sink_json_new(fd, -1, &err);
	if (s != NULL) {
		err = merge_inputs(src, n, o, s, &res);
		merge_result_free(&res);
		s->free(s);
	}
	if (close(fd) < 0 && err == 0)
		err = -errno;
	return err;
}

static void check_same_file(const char *a, const char *b)
{
	size_t na = 0, nb = 0;
	char *pa = slurp(a, &na), *pb = slurp(b, &nb);

	CHECK_MSG(pa != NULL && pb != NULL && na == nb && memcmp(pa, pb, na) == 0,
		  "%s (%zu bytes) and %s (%zu bytes) differ", a, na, b, nb);
	free(pa);
	free(pb);
}

/*
 * The model t as an input of the merge (file: events_write wrote t
 * there). Alone, written as its own trace: the bytes of file. After the
 * file, as a combine (pids of the second input remapped, its flow ids in
 * a namespace of their own; --align too): the bytes the merge writes of
 * the file twice, when the model has the file's name.
 */
static void test_model_input(const model_trace *t, const char *dir, const char *file)
{
	merge_source one = {.model = t, .name = file};
	merge_source mixed[2] = {{.path = file}, {.model = t, .name = file}};
	merge_source files[2] = {{.path = file}, {.path = file}};
	merge_opts own = {.model_as_trace = true}, combine = {0}, align = {.align = true};
	char a[4096], b[4096];

	snprintf(a, sizeof(a), "%s/test_merge_own.json", dir);
	CHECK(merge_to(&one, 1, &own, a) == 0);
	check_same_file(file, a);
	CHECK(merge_to(mixed, 1, &own, a) == -EINVAL);

	snprintf(a, sizeof(a), "%s/test_merge_mixed.json", dir);
	snprintf(b, sizeof(b), "%s/test_merge_files.json", dir);
	CHECK(merge_to(mixed, 2, &combine, a) == 0);
	CHECK(merge_to(files, 2, &combine, b) == 0);
	check_same_file(b, a);
	CHECK(merge_to(mixed, 2, &align, a) == 0);
	CHECK(merge_to(files, 2, &align, b) == 0);
	check_same_file(b, a);
	CHECK(merge_to(&mixed[1], 1, &combine, a) == 0);
	CHECK(merge_to(&files[1], 1, &combine, b) == 0);
	check_same_file(b, a);
}

/*
 * What the HTML report's page data is written with: strings safe inside a
 * <script> element, doubles as %.6g (null when not finite), and values
 * started on a new line with the comma before the newline.
 */
static void test_jsonw_page(void)
{
	static const char want[] =
		"{\"s\":[\"\\u003c/script\\u003e \\u0026 \\u2028\\u2029\\ufffd\\\"\",null,\"\"],"
		"\"f\":[0.5,1e+06,-1.23457,0,null,null,null],"
		"\"n\":[\n1,2,\n3,[\n]],\"k\":\n4}";
	int fd = memfd_create("jsonw", 0);
	ostream o;
	jsonw w;
	size_t len = 0;
	char *got;
	double zero = 0.0;

	CHECK(fd >= 0);
	CHECK(ostream_open(&o, fd, -1) == 0);
	jsonw_init(&w, &o);
	jsonw_obj_begin(&w);
	jsonw_key(&w, "s");
	jsonw_arr_begin(&w);
	jsonw_script_str(&w, strview_c("</script> & \xe2\x80\xa8\xe2\x80\xa9\xff\""));
	jsonw_script_str(&w, strview_c(NULL));
	jsonw_script_str(&w, strview_c(""));
	jsonw_arr_end(&w);
	jsonw_key(&w, "f");
	jsonw_arr_begin(&w);
	jsonw_f64(&w, 0.5);
	jsonw_f64(&w, 1e6);
	jsonw_f64(&w, -1.234567);
	jsonw_f64(&w, 0.0);
	jsonw_f64(&w, zero / zero);
	jsonw_f64(&w, 1.0 / zero);
	jsonw_f64(&w, -1.0 / zero);
	jsonw_arr_end(&w);
	jsonw_key(&w, "n");
	jsonw_arr_begin(&w);
	jsonw_newline(&w);
	jsonw_i64(&w, 1);
	jsonw_i64(&w, 2);
	jsonw_newline(&w);
	jsonw_i64(&w, 3);
	jsonw_arr_begin(&w);
	jsonw_newline(&w);
	jsonw_arr_end(&w);
	jsonw_arr_end(&w);
	jsonw_key(&w, "k");
	jsonw_newline(&w);
	jsonw_i64(&w, 4);
	jsonw_obj_end(&w);
	CHECK(ostream_finish(&o) == 0);
	got = read_back(fd, &len);
	CHECK(got != NULL);
	if (got != NULL && strcmp(got, want) != 0)
		check_fail_at(__FILE__, __LINE__, "page JSON: got '%s', want '%s'", got, want);
	free(got);
	close(fd);
}

int main(int argc, char **argv)
{
	char path[4096];
	events_stats st;
	model_trace *t;

	if (argc != 4) {
		fprintf(stderr, "usage: %s PYTHON CHECK_SCRIPT WORKDIR\n", argv[0]);
		return 2;
	}
	test_numbers();
	test_escape();
	test_escape_random();
	test_stream();
	test_jsonw_page();

	model_free(NULL);
	t = build_model();
	CHECK_STR_EQ(model_process_name(t->procs[0]), "make");
	CHECK_STR_EQ(model_process_name(t->procs[3]), "odd\"na\\me");
	CHECK_STR_EQ(model_process_name(t->procs[4]), "?");

	snprintf(path, sizeof(path), "%s/test_events.json", argv[3]);
	CHECK(write_file(t, path, 0, &st) == 0);
	CHECK_UINT(st.processes, ==, 5);
	CHECK_UINT(st.threads, ==, 8); /* 100,101,102 200 300 200',201 400 */
	CHECK(st.bytes > 0);
	fprintf(stderr, "test_events: %" PRIu64 " events, %" PRIu64 " bytes\n", st.events, st.bytes);
	CHECK(run_check(argv[1], argv[2], "model", path) == 0);

	test_model_input(t, argv[3], path);

	snprintf(path, sizeof(path), "%s/test_events.json.gz", argv[3]);
	CHECK(write_file(t, path, 1, &st) == 0);
	CHECK(run_check(argv[1], argv[2], "model", path) == 0);
	model_free(t);

	t = build_chain(10000);
	snprintf(path, sizeof(path), "%s/test_events_chain.json.gz", argv[3]);
	CHECK(write_file(t, path, 0, &st) == 0);
	CHECK_UINT(st.processes, ==, 10000);
	CHECK(run_check(argv[1], argv[2], "chain", path) == 0);
	model_free(t);

	return check_done("test_events");
}
