/*
 * libFuzzer target: the decoder of in-process event records
 * (combine/model/records.c; include/forktrace/wire.h, enum ft_ev_type) on
 * arbitrary bytes. A program can scribble over its event buffer and send
 * any clock pair, so records and clocks are both untrusted.
 *
 * The model: one process, two images (the first with a module that is a
 * real ELF file, /proc/self/exe, so symbolization goes through symtab, and
 * one whose file does not exist), two threads. The input:
 *
 *   byte 0: flags: bit 0 no_functions (second write), bit 1 an include
 *           regex, bit 2 an exclude regex (second write), bit 3 clock
 *           pairs from the input instead of fixed ones, bits 4-5 the image
 *           of the second chunks (0, 1, 7 = none such, 0), bit 6 thread
 *           and process end times unknown, bit 7 no clock pairs at all
 *   byte 1: where the records split between thread A and thread B; when
 *           odd, the chunks' bytes also go to the model's spill file
 *           (memory limit 0), and are read back one chunk at a time
 *   byte 2, 3: where thread A's and B's part splits into two chunks (the
 *           second chunk carries the time and the open stack over)
 *   with bit 3: byte 4 = number of pairs k (0..7), then k * 16 bytes
 *           (tsc, ns: 64-bit little-endian)
 *   the rest: the records.
 *
 * The model is written twice as JSON: without filters, then with the
 * filters and no_functions of byte 0. The writer must accept it, and the
 * output must be valid JSON and UTF-8. Crashes, leaks, UB, hangs or an
 * invalid output are bugs.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "jsoncheck.h"
#include "events.h"
#include "model.h"

#define PID 4242

static const char *const include_re[] = {"^[a-z_]", "^0x[0-9a-f]*[02468ace]$", NULL};
static const char *const exclude_re[] = {"^__", "libgone", "LLVM", NULL};

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* The bytes [0, n) split at the fraction b/255. */
static size_t split(size_t n, uint8_t b)
{
	return n * b / 255;
}

static void write_checked(const model_trace *t)
{
	int fd = memfd_create("out", 0);
	unsigned char *buf;
	off_t n;

	if (fd < 0)
		abort();
	if (events_write(t, fd, TRACE_FORMAT_JSON, NULL, NULL) != 0)
		abort(); /* the writer must accept whatever the records are */
	n = lseek(fd, 0, SEEK_END);
	buf = malloc((size_t)n + 1);
	if (buf == NULL || pread(fd, buf, (size_t)n, 0) != n)
		abort();
	if (!json_check(buf, (size_t)n))
		abort(); /* the output is not valid JSON / UTF-8 */
	free(buf);
	close(fd);
}

static model_trace *build(uint8_t flags)
{
	model_trace *t = model_new();
	model_process *p;
	model_segment *s;
	bool unknown_ends = flags & 0x40;

	if (t == NULL)
		abort();
	t->host = model_strdup(t, "fuzzhost");
	t->origin = model_strdup(t, "fuzz");
	t->start_ns = 1000000;
	t->end_ns = 9000000;
	p = model_add_process(t, PID);
	if (p == NULL)
		abort();
	p->start_ns = 1000000;
	p->end_ns = unknown_ends ? -1 : 8000000;
	p->exit_kind = MODEL_EXIT_CODE;

	s = model_add_segment(t, p);
	if (s == NULL)
		abort();
	s->start_ns = 1000000;
	s->end_ns = 4000000;
	s->exe = model_strdup(t, "/proc/self/exe");
	s->instrumented = true;
	/* Small addresses name functions of the fuzzer itself (bias 0: its
	 * file addresses); a range high up belongs to a library that is
	 * gone. */
	if (model_add_module(t, s, "/proc/self/exe", 14, 0, 0x1000, 0x40000000) < 0 ||
	    model_add_module(t, s, "/nonexistent/forktrace-fuzz/libgone.so", 38, 0x7f0000000000,
			     0x7f0000000000, 0x7f0000100000) < 0)
		abort();

	s = model_add_segment(t, p); /* after an exec */
	if (s == NULL)
		abort();
	s->start_ns = 4000000;
	s->end_ns = unknown_ends ? -1 : 8000000;
	s->exe = model_strdup(t, "/bin/second");
	s->instrumented = true;
	if (model_add_module(t, s, "/proc/self/exe", 14, 0x100, 0x1100, 0x20000000) < 0)
		abort();

	if (!model_add_thread(t, p, PID) || !model_add_thread(t, p, PID + 1))
		abort();
	p->threads[0].start_ns = 1000000;
	p->threads[0].end_ns = unknown_ends ? -1 : 8000000;
	p->threads[1].start_ns = unknown_ends ? -1 : 2000000;
	p->threads[1].end_ns = unknown_ends ? -1 : 3000000;
	p->threads[1].name = model_strdup(t, "worker");
	return t;
}

static void add_chunk(model_trace *t, int th, uint32_t seg, const uint8_t *p, size_t n)
{
	/* An empty EVENTS frame adds nothing; a chunk is never empty. */
	if (n > 0 && model_add_chunk(t, &t->procs[0]->threads[th], seg, p, n) < 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint32_t segs[] = {0, 1, 7, 0};
	model_trace *t;
	uint8_t flags;
	size_t off = 4, n, a, a1, b1;
	uint32_t seg2;

	if (size < 4)
		return 0;
	flags = data[0];
	seg2 = segs[(flags >> 4) & 3];
	t = build(flags);
	if (flags & 0x80) {
		/* no clock pairs: ticks are taken as ns */
	} else if (flags & 0x08) {
		size_t k = size > 4 ? data[4] & 7 : 0;

		off = 5;
		for (size_t i = 0; i < k && off + 16 <= size; i++, off += 16)
			if (model_add_clock(t, le64(data + off), (int64_t)le64(data + off + 8)) < 0)
				abort();
		if (off > size)
			off = size;
	} else {
		/* About 3 ticks per ns, read at irregular times, one pair
		 * closer than the thinning gap. */
		static const model_clock fixed[] = {
			{3000000, 1000000},  {9000000, 3000000},  {9000300, 3000100},
			{15000000, 5000000}, {27000000, 9000000},
		};

		for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
			if (model_add_clock(t, fixed[i].tsc, fixed[i].ns) < 0)
				abort();
	}

	if ((data[1] & 1) && model_set_spill(t, "/tmp", 0) < 0)
		abort();
	n = size - off;
	a = split(n, data[1]);
	a1 = split(a, data[2]);
	b1 = split(n - a, data[3]);
	add_chunk(t, 0, 0, data + off, a1);
	add_chunk(t, 0, seg2, data + off + a1, a - a1);
	add_chunk(t, 1, 0, data + off + a, b1);
	add_chunk(t, 1, seg2, data + off + a + b1, n - a - b1);

	write_checked(t);
	t->no_functions = flags & 0x01;
	t->fn_include = flags & 0x02 ? include_re : NULL;
	t->fn_exclude = flags & 0x04 ? exclude_re : NULL;
	write_checked(t);
	model_free(t);
	return 0;
}
