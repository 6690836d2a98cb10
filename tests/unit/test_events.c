/*
 * Unit test of combine/: ostream formatting in C, then a hand-built model
 * written as .json and .json.gz and checked field by field by
 * check_events.py (the json module is a stricter judge of our output than
 * anything we would write here). The model as an input of the merge is
 * test_merge.c's.
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
#include "model.h"
#include "model_fixture.h"
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
		"a",
		" ",
		"~",
		"\x7f",
		"\"",
		"\\",
		"\n",
		"\x01",
		"\x1f",
		"[",
		"\xc3\xa9",
		"\xe2\x82\xac",
		"\xf0\x9f\x98\x80",
		"\xc3",
		"\xe2\x82",
		"\xf0\x9f\x98",
		"\xed\xa0\x80",
		"\xc0\xaf",
		"\x80",
		"\xff",
		"\xf4\x90\x80\x80",
	};
	static const char letters[] = "abcdefghijklmnopqrstuvwxyz";
	static char filler[OSTREAM_BUF_SIZE];
	int fd = memfd_create("escape-random", 0);
	unsigned seed = 12345;
	char in[128], want[128 * 6 + 3];

	CHECK(fd >= 0);
	memset(filler, 'f', sizeof(filler));
	for (int round = 0; round < 20000; round++) {
		size_t n = 0, len = 0, wlen,
		       pad = round % 8 == 1 ? OSTREAM_BUF_SIZE - round % 13 : 0;
		size_t want_n = (size_t)(round % 41);
		ostream o;
		char *got;

		while (n < want_n) {
			const char *p;

			seed = seed * 1103515245u + 12345u;
			/* Mostly plain bytes, so that long plain runs occur. */
			p = (seed >> 16) % 4
				    ? &letters[(seed >> 8) % 26]
				    : pieces[(seed >> 20) % (sizeof(pieces) / sizeof(pieces[0]))];
			/* One byte of a plain letter; a whole piece otherwise. */
			for (size_t k = 0;
			     p[k] && n < sizeof(in) && (k == 0 || (seed >> 16) % 4 == 0); k++)
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
	ESC("caf\xc3\xa9", "\"caf\xc3\xa9\"");             /* valid 2-byte */
	ESC("\xe2\x82\xac", "\"\xe2\x82\xac\"");           /* valid 3-byte (euro) */
	ESC("\xf0\x9f\x98\x80!", "\"\xf0\x9f\x98\x80!\""); /* valid 4-byte */
	ESC("a\xff"
	    "b",
	    "\"a\\ufffdb\"");                                        /* never valid */
	ESC("\xc0\xaf", "\"\\ufffd\\ufffd\"");                       /* overlong '/' */
	ESC("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"");            /* surrogate */
	ESC("\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\""); /* > U+10FFFF */
	ESC("\xe2\x82", "\"\\ufffd\\ufffd\"");                       /* cut at the end */
	ESC("\xc3(", "\"\\ufffd(\"");                                /* bad continuation */
	ESC("\x80\xbf", "\"\\ufffd\\ufffd\"");                       /* lone continuation */

	check_escape_cut("abc", 1, "");
	check_escape_cut("abc", 2, "\"\"");
	check_escape_cut("abc", 4, "\"ab\"");
	check_escape_cut("abc", 5, "\"abc\"");
	check_escape_cut("a\nb", 4, "\"a\""); /* no half escape */
	check_escape_cut("a\nb", 5, "\"a\\n\"");
	check_escape_cut("\xc3\xa9x", 3, "\"\""); /* no half character */
	check_escape_cut("\xffx", 7, "\"\"");     /* no half \ufffd */
	check_escape_cut("\xffx", 8, "\"\\ufffd\"");
}

/* A write bigger than a block goes through whole; errors stick. */
static void test_stream(void)
{
	static char big[3 * OSTREAM_BLOCK + 17];
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
		/* The pipeline reports it when a later block is handed over. */
		CHECK(ostream_open(&o, fd, 6) == 0);
		for (int i = 0; i < 8 && ostream_error(&o) == 0; i++)
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
	fprintf(stderr, "test_events: %" PRIu64 " events, %" PRIu64 " bytes\n", st.events,
		st.bytes);
	CHECK(run_check(argv[1], argv[2], "model", path) == 0);

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
