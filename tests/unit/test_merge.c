/*
 * Unit test of the merge (readers/merge.c) with a model among its inputs:
 * written as its own trace the model is byte for byte what events_write
 * writes, and among other inputs byte for byte what the merge makes of
 * that file.
 *
 * Usage: test_merge WORKDIR
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "merge.h"
#include "model_fixture.h"
#include "sink.h"

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

int main(int argc, char **argv)
{
	char path[4096];
	events_stats st;
	model_trace *t;

	if (argc != 2) {
		fprintf(stderr, "usage: %s WORKDIR\n", argv[0]);
		return 2;
	}
	t = build_model();
	snprintf(path, sizeof(path), "%s/test_merge.json", argv[1]);
	CHECK(write_file(t, path, 0, &st) == 0);
	test_model_input(t, argv[1], path);
	model_free(t);
	return check_done("test_merge");
}
