/*
 * test_jsonr: the reader gives the same output whatever the read size.
 *
 * Events, strings, escapes, numbers and UTF-8 sequences that straddle two
 * reads are the reader's hardest case and never happen with 1 MiB reads
 * on small test files; here every input given on the command line is
 * combined with read sizes of 1, 2, 3, 5, 7, 13, 64 and 4096 bytes, and the
 * output must be byte for byte the output of the default size. Also checks
 * the number parsing that ts and dur go through.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "merge.h"
#include "jsonr.h"

/* Combines paths with read size chunk; returns the output (malloc'd). */
static char *merge_to_mem(const char *const *paths, size_t n, size_t chunk, size_t *len,
			  merge_result *res)
{
	int fd = memfd_create("out", 0), err;
	merge_opts o = {.chunk = chunk};
	trace_sink *s = sink_json_new(fd, -1, &err);
	char *buf;
	off_t size;

	if (fd < 0 || s == NULL)
		abort();
	err = merge_files(paths, n, &o, s, res);
	s->free(s);
	CHECK_MSG(err == 0, "merge_files with chunk %zu: %d", chunk, err);
	size = lseek(fd, 0, SEEK_END);
	buf = malloc((size_t)size + 1);
	if (pread(fd, buf, (size_t)size, 0) != size)
		abort();
	close(fd);
	*len = (size_t)size;
	return buf;
}

static void test_chunks(const char *const *paths, size_t n)
{
	static const size_t sizes[] = {1, 2, 3, 5, 7, 13, 64, 4096};
	merge_result ref_res, res;
	size_t ref_len, len;
	char *ref = merge_to_mem(paths, n, 0, &ref_len, &ref_res);

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char *out = merge_to_mem(paths, n, sizes[i], &len, &res);

		CHECK_MSG(len == ref_len && !memcmp(out, ref, len),
			  "read size %zu: output differs (%zu bytes, %zu expected)", sizes[i], len,
			  ref_len);
		CHECK_MSG(res.events == ref_res.events && res.problems == ref_res.problems,
			  "read size %zu: %llu events, %zu problems; expected %llu, %zu", sizes[i],
			  (unsigned long long)res.events, res.problems,
			  (unsigned long long)ref_res.events, ref_res.problems);
		for (size_t k = 0; k < res.ninputs && k < ref_res.ninputs; k++) {
			const char *a = res.inputs[k].error, *b = ref_res.inputs[k].error;

			CHECK_MSG((a == NULL) == (b == NULL) && (a == NULL || !strcmp(a, b)),
				  "read size %zu, %s: error '%s', expected '%s'", sizes[i],
				  res.inputs[k].path, a ? a : "(none)", b ? b : "(none)");
		}
		merge_result_free(&res);
		free(out);
	}
	printf("%zu inputs, %llu events, %zu bytes out: same at every read size\n", n,
	       (unsigned long long)ref_res.events, ref_len);
	merge_result_free(&ref_res);
	free(ref);
}

static void test_numbers(void)
{
	static const struct {
		const char *text;
		bool ok;
		int64_t ns;
	} cases[] = {
		{"0", true, 0},
		{"356961203.734", true, 356961203734},
		{"356961207.02", true, 356961207020},
		{"0.11", true, 110},
		{"0.1234", true, 123},
		{"0.1235", true, 124},
		{"-1.5", true, -1500},
		{"12", true, 12000},
		{"1e3", true, 1000000},
		{"1.5E-3", true, 2},
		{"999999999999999.999", true, 999999999999999999},
		{"9999999999999999", false, 0},
		{"\"12\"", false, 0},
		{"abc", false, 0},
		{"", false, 0},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int64_t ns = -42;
		bool ok = jsonr_parse_us_ns(strview_c(cases[i].text), &ns);

		CHECK_MSG(ok == cases[i].ok && (!ok || ns == cases[i].ns),
			  "parse_us_ns(%s) = %d, %lld", cases[i].text, ok, (long long)ns);
	}
}

/* The keys of flow and async ids are found, written plainly or not, and
 * only at the first level. */
static void test_id_keys(void)
{
	static const char *const events[] = {
		"{\"ph\":\"b\",\"id2\":{\"global\":\"0x1\"},\"bind_id\":\"0x5\",\"idx\":1,"
		"\"bind_idx\":2,\"args\":{\"id\":3}}",
		"{ \"ph\" : \"b\" , \"id2\" : {\"global\":\"0x1\"} , \"bind_id\" : \"0x5\", "
		"\"bind\\u005fid\":7, \"args\":{\"bind_id\":3}}",
	};
	for (size_t i = 0; i < sizeof(events) / sizeof(events[0]); i++) {
		char buf[256] = {0};
		size_t n = strlen(events[i]);
		jsonr_obj o;
		const char *next;
		strview id2, bind;

		memcpy(buf, events[i], n);
		CHECK_MSG(jsonr_value(buf, buf + n, &next, &o, true) == JSONR_OK && next == buf + n,
			  "event %zu: not scanned", i);
		id2 = o.v[JSONR_K_ID2];
		bind = o.v[JSONR_K_BIND_ID];
		CHECK_MSG(id2.p != NULL && id2.n == 16 &&
				  !memcmp(id2.p, "{\"global\":\"0x1\"}", 16),
			  "event %zu: id2 is '%.*s'", i, (int)id2.n, id2.p ? id2.p : "");
		CHECK_MSG(bind.p != NULL && bind.n == 5 && !memcmp(bind.p, "\"0x5\"", 5),
			  "event %zu: bind_id is '%.*s'", i, (int)bind.n, bind.p ? bind.p : "");
		CHECK_MSG(o.v[JSONR_K_ID].p == NULL, "event %zu: an id found", i);
	}
}

int main(int argc, char **argv)
{
	test_numbers();
	test_id_keys();
	if (argc > 1)
		test_chunks((const char *const *)argv + 1, (size_t)(argc - 1));
	return check_done("jsonr");
}
