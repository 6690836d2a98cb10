/*
 * libFuzzer target: the trace reader (combine/readers/reader.c, combine/io/jsonr.c) on
 * arbitrary bytes. The input is combined twice (so the second copy's pids
 * collide and are remapped) into the JSON sink, and the output must be
 * valid JSON and valid UTF-8, checked by a small strict validator written
 * independently of jsonr; then `forktrace info`'s sink and summary read
 * the same bytes. Byte 0 picks the read size (tiny sizes put every
 * token across a read boundary) and --align; the rest is the file.
 * Crashes, leaks, UB, or an invalid output are bugs.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "merge.h"
#include "jsoncheck.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t chunks[] = {0, 1, 2, 3, 5, 8, 17, 64};
	int in = memfd_create("in", 0), out = memfd_create("out", 0), err;
	char path[64];
	const char *paths[2];
	merge_opts o = {0};
	merge_result res;
	trace_sink *s;
	unsigned char *buf;
	off_t n;

	if (size < 1 || in < 0 || out < 0)
		goto out;
	o.chunk = chunks[data[0] & 7];
	o.align = data[0] & 8;
	if (write(in, data + 1, size - 1) != (ssize_t)(size - 1))
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", in);
	paths[0] = paths[1] = path;
	s = sink_json_new(out, -1, &err);
	if (s == NULL)
		abort();
	err = merge_files(paths, 2, &o, s, &res);
	s->free(s);
	if (err != 0)
		abort();
	merge_result_free(&res);
	n = lseek(out, 0, SEEK_END);
	buf = malloc((size_t)n + 1);
	if (buf == NULL || pread(out, buf, (size_t)n, 0) != n)
		abort();
	if (!json_check(buf, (size_t)n))
		abort(); /* the output is not valid JSON / UTF-8 */
	free(buf);
	/* forktrace info of the same bytes: its sink reads the args of
	 * forktrace_process records (exit, rusage, names) of its own. */
	{
		info_report rep;
		info_summary sum;

		if (info_read(path, false, &rep) != 0 || info_summarize(&rep, &sum) != 0)
			abort();
		info_summary_free(&sum);
		info_free(&rep);
	}
out:
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return 0;
}
