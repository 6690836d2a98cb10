/*
 * libFuzzer target: the model stream's reader (combine/model/mstream.c) on
 * arbitrary bytes. The stream comes from a node over the network, or from
 * a node-output file anyone could have written, so nothing in it is
 * trusted. The input:
 *
 *   byte 0: where the rest splits into two feeds (fraction b/255), which
 *           puts a record across the two
 *   the rest: the stream (records, without the file's magic)
 *
 * Whatever the reader accepted must be a model the writer of the trace
 * takes (valid JSON and UTF-8 out), and that the stream's own writer sends
 * again to a reader that rebuilds the same trace, byte for byte. Crashes,
 * leaks, UB, hangs, or a model that does not survive the round trip are
 * bugs.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "events.h"
#include "jsoncheck.h"
#include "model.h"
#include "mstream.h"

/* events_write of t as JSON, checked; the bytes in *out (caller frees). */
static size_t write_checked(const model_trace *t, unsigned char **out)
{
	int fd = memfd_create("out", 0);
	unsigned char *buf;
	off_t n;

	if (fd < 0)
		abort();
	if (events_write(t, fd, TRACE_FORMAT_JSON, NULL, NULL) != 0)
		abort(); /* the writer must accept whatever the stream made */
	n = lseek(fd, 0, SEEK_END);
	buf = malloc((size_t)n + 1);
	if (buf == NULL || pread(fd, buf, (size_t)n, 0) != n)
		abort();
	if (!json_check(buf, (size_t)n))
		abort(); /* the output is not valid JSON / UTF-8 */
	close(fd);
	*out = buf;
	return (size_t)n;
}

static int feed_reader(void *ctx, const void *data, size_t len)
{
	return mstream_feed(ctx, data, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	model_trace *t, *u;
	mstream_reader *r, *r2;
	mstream_writer *w;
	unsigned char *a, *b;
	size_t na, nb, split;
	bool more;

	if (size < 1)
		return 0;
	split = (size - 1) * data[0] / 255;
	t = model_new();
	u = model_new();
	r = t ? mstream_reader_new(t) : NULL;
	r2 = u ? mstream_reader_new(u) : NULL;
	if (r == NULL || r2 == NULL)
		abort();
	if (mstream_feed(r, data + 1, split) == 0)
		mstream_feed(r, data + 1 + split, size - 1 - split);

	na = write_checked(t, &a);
	w = mstream_writer_new(t);
	if (w == NULL || mstream_sync(w, feed_reader, r2, SIZE_MAX, &more) != 0 || more)
		abort(); /* what the reader built, the writer must send */
	nb = write_checked(u, &b);
	if (na != nb || memcmp(a, b, na) != 0)
		abort(); /* the round trip changed the trace */
	free(a);
	free(b);
	mstream_writer_free(w);
	mstream_reader_free(r2);
	mstream_reader_free(r);
	/* What a file cut short gets: whatever the stream held, nothing is
	 * left open after it. */
	model_mark_lost(t, model_last_ns(t));
	for (size_t i = 0; i < t->nprocs; i++)
		if (t->procs[i]->exit_kind == MODEL_EXIT_UNKNOWN ||
		    t->procs[i]->exit_kind == MODEL_EXIT_RUNNING)
			abort();
	model_free(u);
	model_free(t);
	return 0;
}
