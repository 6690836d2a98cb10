/*
 * Unit test of a multi-host run's merge (readers/merge.c) and clock fit
 * (model/model.c, model_clock_fit): a head's model and two nodes' parts
 * (model_fixture.c) merged as `forktrace run` writes them, the result
 * combined again as a file, and a part combined offline with the head's
 * trace file; check_multihost.py reads each output with Python's json.
 *
 * Usage: test_multihost PYTHON CHECK_MULTIHOST_PY WORKDIR FORKTRACE
 * (FORKTRACE: the binary, for the trace through HDF5 and `info`), or
 * test_multihost --write FILE: only the run's trace, into FILE, or
 * --write-part FILE: node3's part alone, combined without the head (for
 * the report's browser test).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "merge.h"
#include "model_fixture.h"
#include "mstream.h"
#include "sink.h"

#define S_NS 1000000000LL

/* A deterministic pseudo-random number in [-1, 1] (xorshift). */
static double noise(uint64_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return (double)(*state % 2000001) / 1000000.0 - 1.0;
}

/*
 * model_clock_fit on samples of a known clock: head = node + 1000 s + 50
 * ppm * (node - 10 s). Exact samples: the map is right within 1 us over
 * the samples' span and beyond it. Samples off by up to their error: the
 * bound covers the truth at every time of the span. A few slow bursts
 * (error 40 times the best) are left out of the fit. Without samples:
 * "realtime anchor" with an anchor, else "none".
 */
static void test_clock_fit(void)
{
	model_trace *t = model_new();
	model_clock_map map;
	uint64_t rnd = 0x9e3779b97f4a7c15ULL;

	MUST(t);
	model_clock_fit(t, &map);
	CHECK_STR_EQ(map.method, "none");
	t->anchor_real_ns = 1;
	model_clock_fit(t, &map);
	CHECK_STR_EQ(map.method, "realtime anchor");
	CHECK_INT(map.offset_ns, ==, 0);

	/* One sample: its offset, its error, no drift. */
	MUST(model_add_clock_sample(t, 10 * S_NS, 1000 * S_NS, 20000) == 0);
	model_clock_fit(t, &map);
	CHECK_STR_EQ(map.method, "measured");
	CHECK_INT(model_clock_apply(&map, 10 * S_NS), ==, 1010 * S_NS);
	CHECK_INT(map.err_ns, ==, 20000);
	CHECK(map.drift == 0);

	for (int k = 1; k <= 30; k++) {
		int64_t node = (10 + k) * S_NS;

		MUST(model_add_clock_sample(t, node, 1000 * S_NS + (node - 10 * S_NS) / 20000,
					    20000 + 1000 * (k % 5)) == 0);
	}
	model_clock_fit(t, &map);
	CHECK_MSG(fabs(map.drift - 50e-6) < 1e-9, "drift %.9f", map.drift);
	CHECK_UINT(map.nsamples, ==, 31);
	for (int64_t node = 0; node <= 100 * S_NS; node += S_NS / 4) {
		int64_t want = node + 1000 * S_NS + (node - 10 * S_NS) / 20000;

		CHECK_MSG(llabs(model_clock_apply(&map, node) - want) <= 1000,
			  "node %lld: %lld, want %lld", (long long)node,
			  (long long)model_clock_apply(&map, node), (long long)want);
	}
	CHECK_INT(map.err_ns, <=, 25000);
	CHECK_INT(map.err_ns, >=, 20000);
	CHECK_INT(model_clock_apply(&map, -1), ==, -1);
	model_free(t);

	/* Measured within their errors: the bound holds. */
	MUST(t = model_new());
	for (int k = 0; k <= 60; k++) {
		int64_t node = (10 + k) * S_NS / 2, err = 15000 + 500 * (k % 7);
		int64_t truth = 1000 * S_NS + (node - 10 * S_NS) / 20000;

		MUST(model_add_clock_sample(t, node, truth + (int64_t)(noise(&rnd) * (double)err),
					    err) == 0);
	}
	/* Slow bursts, far off: left out. */
	for (int k = 0; k < 3; k++)
		MUST(model_add_clock_sample(t, (12 + k) * S_NS, 1000 * S_NS + 5000000, 800000) ==
		     0);
	model_clock_fit(t, &map);
	CHECK_UINT(map.nsamples, ==, 61);
	CHECK_MSG(fabs(map.drift - 50e-6) < 2e-6, "drift %.9f", map.drift);
	for (int64_t node = 5 * S_NS; node <= 35 * S_NS; node += S_NS / 8) {
		int64_t want = node + 1000 * S_NS + (node - 10 * S_NS) / 20000;

		CHECK_MSG(llabs(model_clock_apply(&map, node) - want) <= map.err_ns,
			  "node %lld: off by %lld, bound %lld", (long long)node,
			  (long long)(model_clock_apply(&map, node) - want), (long long)map.err_ns);
	}
	CHECK_INT(map.err_ns, <, 60000);
	model_free(t);
}

/* merge_inputs of src into a JSON file at path. */
static int merge_to(const merge_source *src, size_t n, const merge_opts *o, const char *path,
		    merge_result *res)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	trace_sink *s;
	int err;

	if (fd < 0)
		return -errno;
	s = sink_json_new(fd, -1, &err);
	if (s != NULL) {
		err = merge_inputs(src, n, o, s, res);
		s->free(s);
	}
	if (close(fd) < 0 && err == 0)
		err = -errno;
	return err;
}

static int emit_fd(void *ctx, const void *data, size_t len)
{
	int fd = *(int *)ctx;

	return write(fd, data, len) == (ssize_t)len ? 0 : -EIO;
}

/* t as a node-output file (mstream.h) at path. */
static void write_ftnode(const model_trace *t, const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	mstream_writer *w = mstream_writer_new(t);
	bool more = false;

	MUST(fd >= 0 && w != NULL);
	MUST(write(fd, MSTREAM_FILE_MAGIC, MSTREAM_FILE_MAGIC_LEN) == MSTREAM_FILE_MAGIC_LEN);
	MUST(mstream_sync(w, emit_fd, &fd, SIZE_MAX, &more) == 0 && !more);
	MUST(mstream_end(w, emit_fd, &fd) == 0);
	mstream_writer_free(w);
	MUST(close(fd) == 0);
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
		fprintf(stderr, "check_multihost.py %s %s failed (status 0x%x)\n", mode, path,
			status);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	model_trace *head, *n2, *n3;
	merge_opts own = {.model_as_trace = true}, combine = {0};
	merge_result res;
	char run[4096], again[4096], headf[4096], offline[4096];

	/* The run's trace alone, for the report's browser tests. */
	if (argc == 3 && strcmp(argv[1], "--write") == 0) {
		merge_source src[3];

		head = build_head_model();
		n2 = build_node2_part();
		n3 = build_node3_part();
		src[0] = (merge_source){.model = head, .name = "head"};
		src[1] = (merge_source){.model = n2, .name = "node2"};
		src[2] = (merge_source){.model = n3, .name = "node3"};
		CHECK(merge_to(src, 3, &own, argv[2], &res) == 0);
		merge_result_free(&res);
		model_free(head);
		model_free(n2);
		model_free(n3);
		return check_done("test_multihost --write");
	}
	if (argc == 3 && strcmp(argv[1], "--write-part") == 0) {
		merge_source src = {.model = n3 = build_node3_part(), .name = "node3"};

		CHECK(merge_to(&src, 1, &combine, argv[2], &res) == 0);
		merge_result_free(&res);
		model_free(n3);
		return check_done("test_multihost --write-part");
	}
	if (argc != 5) {
		fprintf(stderr, "usage: %s PYTHON CHECK_MULTIHOST_PY WORKDIR FORKTRACE\n", argv[0]);
		return 2;
	}
	MUST(setenv("FT_BIN", argv[4], 1) == 0);
	test_clock_fit();

	head = build_head_model();
	n2 = build_node2_part();
	n3 = build_node3_part();
	snprintf(run, sizeof(run), "%s/multihost_run.json", argv[3]);
	snprintf(again, sizeof(again), "%s/multihost_again.json", argv[3]);
	snprintf(headf, sizeof(headf), "%s/multihost_head.json", argv[3]);
	snprintf(offline, sizeof(offline), "%s/multihost_offline.json", argv[3]);

	/* As `forktrace run` on the head writes it: the head's model, then
	 * the parts; a part may not come first. */
	{
		merge_source src[3] = {{.model = head, .name = "head"},
				       {.model = n2, .name = "node2"},
				       {.model = n3, .name = "node3"}};
		merge_source parts_first[2] = {{.model = n2, .name = "node2"},
					       {.model = head, .name = "head"}};

		CHECK(merge_to(src, 3, &own, run, &res) == 0);
		CHECK_UINT(res.processes, ==, 9);
		merge_result_free(&res);
		CHECK(run_check(argv[1], argv[2], "run", run) == 0);
		CHECK(run_check(argv[1], argv[2], "tools", run) == 0);
		CHECK(merge_to(parts_first, 2, &own, again, &res) == -EINVAL);
		merge_result_free(&res);
	}
	/* That trace combined again: its hosts, ranks and parents kept. */
	{
		merge_source src[1] = {{.path = run}};

		CHECK(merge_to(src, 1, &combine, again, &res) == 0);
		merge_result_free(&res);
		CHECK(run_check(argv[1], argv[2], "again", again) == 0);
	}
	/* node3's part (written to a node-output file: no samples) combined
	 * later with the head's trace file, named after it: by the realtime
	 * anchors, its root under its launcher in the file. */
	{
		merge_source src[2] = {{.model = n3, .name = "node3"}, {.path = headf}};

		CHECK(write_file(head, headf, 0, NULL) == 0);
		CHECK(merge_to(src, 2, &combine, offline, &res) == 0);
		merge_result_free(&res);
		CHECK(run_check(argv[1], argv[2], "offline", offline) == 0);
	}
	/* Both parts as node-output files, combined with the head's trace
	 * by forktrace combine: node2's samples travel in its file. */
	{
		char f2[4096], f3[4096];

		snprintf(f2, sizeof(f2), "%s/multihost_node2.ftnode", argv[3]);
		snprintf(f3, sizeof(f3), "%s/multihost_node3.ftnode", argv[3]);
		write_ftnode(n2, f2);
		write_ftnode(n3, f3);
		CHECK(run_check(argv[1], argv[2], "ftnode", headf) == 0);
	}
	model_free(head);
	model_free(n2);
	model_free(n3);
	return check_done("test_multihost");
}
