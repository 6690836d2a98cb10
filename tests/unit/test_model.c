/*
 * The model's memory limit (combine/model/model.c, model_set_spill): past
 * it, chunk bytes go to the spill file and come back whole through
 * model_chunk_bytes, from the write buffer or the file, between string
 * blocks mapped from the same file; what is in memory stays at the limit;
 * a spill file that cannot grow (RLIMIT_FSIZE here, a full disk in life)
 * keeps the rest in memory, readable; a node-output file of a spilled
 * model carries every byte.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "check.h"
#include "model.h"
#include "mstream.h"

/* Chunk sizes: small ones gathered in the write buffer, one as large as
 * an agent's slot (512 KiB) and larger (written at once), empty. */
static const size_t sizes[] = {100, 3000, 70000, 0, 524288, 17, 300000, 1u << 20, 5, 250000};
#define NCHUNKS (sizeof(sizes) / sizeof(sizes[0]))

/* The bytes of chunk i: a pattern of its own. */
static void fill(unsigned char *p, size_t n, size_t i)
{
	for (size_t k = 0; k < n; k++)
		p[k] = (unsigned char)(k * 7 + i * 131 + (k >> 9));
}

/* Checks that th's chunks are sizes[] filled as fill() does, each read
 * through model_chunk_bytes; counts those whose bytes are not in memory. */
static size_t check_chunks(const model_trace *t, const model_thread *th, const char *what)
{
	model_chunk_buf buf = {0};
	unsigned char *want = malloc(1u << 20);
	const model_chunk *c = th->chunks;
	size_t i, spilled = 0;

	MUST(want != NULL);
	for (i = 0; i < NCHUNKS && c != NULL; i++, c = c->next) {
		const unsigned char *got = model_chunk_bytes(t, c, &buf);

		fill(want, sizes[i], i);
		CHECK_MSG(c->len == sizes[i] && c->seg == (uint32_t)i,
			  "%s: chunk %zu: len %u seg %u", what, i, c->len, c->seg);
		CHECK_MSG(got != NULL && (sizes[i] == 0 || !memcmp(got, want, sizes[i])),
			  "%s: chunk %zu (%zu bytes) read back wrong (%s)", what, i, sizes[i],
			  got ? "different bytes" : strerror(errno));
		spilled += c->data == NULL;
	}
	CHECK_MSG(i == NCHUNKS && c == NULL, "%s: %zu chunks", what, i);
	free(buf.p);
	free(want);
	return spilled;
}

/* A model with a memory limit of limit bytes in dir, its chunks added with
 * strings after some of them (with strings, which take string blocks
 * mapped from the same file past the limit, and flush the write buffer);
 * the last two stay in the write buffer. */
static model_trace *make(const char *dir, uint64_t limit, bool strings, model_thread **th)
{
	model_trace *t = model_new();
	model_process *p;
	unsigned char *data = malloc(1u << 20);
	char s[2000];

	MUST(t != NULL && data != NULL);
	MUST(model_set_spill(t, dir, limit) == 0);
	MUST((p = model_add_process(t, 42)) != NULL);
	MUST(model_add_segment(t, p) != NULL);
	MUST((*th = model_add_thread(t, p, 42)) != NULL);
	memset(s, 'a', sizeof(s) - 1);
	s[sizeof(s) - 1] = '\0';
	for (size_t i = 0; i < NCHUNKS; i++) {
		fill(data, sizes[i], i);
		CHECK_INT(model_add_chunk(t, *th, (uint32_t)i, data, sizes[i]), ==, 0);
		for (int k = 0; strings && i % 3 == 0 && i + 2 < NCHUNKS && k < 40; k++)
			MUST(model_strdup(t, s) != NULL);
	}
	free(data);
	return t;
}

static uint64_t total(void)
{
	uint64_t n = 0;

	for (size_t i = 0; i < NCHUNKS; i++)
		n += sizes[i];
	return n;
}

/* No limit to speak of: everything in memory. */
static void test_in_memory(const char *dir)
{
	model_thread *th;
	model_trace *t = make(dir, 1ull << 30, true, &th);

	CHECK_UINT(check_chunks(t, th, "in memory"), ==, 0);
	CHECK_UINT(t->arena_spilled, ==, 0);
	model_free(t);
}

/* Limit 0: every chunk's bytes in the spill file (or its write buffer),
 * read back whole; memory holds the headers and the strings' first block
 * at most. Then the same model through a node-output file. */
static void test_spilled(const char *dir)
{
	model_thread *th, *th2;
	model_trace *t = make(dir, 0, true, &th), *u = model_new();
	mstream_reader *r;
	FILE *f = tmpfile();

	CHECK_UINT(check_chunks(t, th, "spilled"), ==, NCHUNKS);
	CHECK_MSG(t->arena_mem < 200 * 1024, "%llu bytes in memory with a limit of 0",
		  (unsigned long long)t->arena_mem);
	CHECK_MSG(t->arena_spilled >= total(), "%llu bytes spilled of %llu",
		  (unsigned long long)t->arena_spilled, (unsigned long long)total());
	CHECK_INT(t->spill_error, ==, 0);
	CHECK_MSG(t->spill_wlen == 250005, "%zu bytes in the write buffer", t->spill_wlen);

	MUST(f != NULL && u != NULL);
	CHECK_INT(mstream_write_file(t, fileno(f), true), ==, 0);
	MUST(lseek(fileno(f), 0, SEEK_SET) == 0);
	MUST((r = mstream_reader_new(u)) != NULL);
	CHECK_INT(mstream_read_file(r, fileno(f)), ==, 0);
	mstream_reader_free(r);
	MUST(u->nprocs == 1 && u->procs[0]->nthreads == 1);
	th2 = &u->procs[0]->threads[0];
	CHECK_UINT(check_chunks(u, th2, "through a node-output file"), ==, 0);
	fclose(f);
	model_free(u);
	model_free(t);
}

/* The spill file may not pass 1 MiB (RLIMIT_FSIZE): spilling stops at the
 * chunk of 1 MiB (EFBIG), and every chunk is still read back whole, the 7
 * before from the file, the rest from memory. */
static void test_file_full(const char *dir)
{
	struct rlimit old, lim;
	model_thread *th;
	model_trace *t;
	size_t spilled;

	MUST(getrlimit(RLIMIT_FSIZE, &old) == 0);
	lim = old;
	lim.rlim_cur = 1u << 20;
	MUST(setrlimit(RLIMIT_FSIZE, &lim) == 0);
	t = make(dir, 0, false, &th);
	MUST(setrlimit(RLIMIT_FSIZE, &old) == 0);
	spilled = check_chunks(t, th, "file full");
	CHECK_INT(t->spill_error, ==, EFBIG);
	CHECK_MSG(spilled == 7, "%zu of %zu chunks spilled", spilled, (size_t)NCHUNKS);
	model_free(t);
}

int main(void)
{
	char dir[] = "/tmp/ft-test-model-XXXXXX";

	/* The write past RLIMIT_FSIZE fails with EFBIG instead of killing. */
	signal(SIGXFSZ, SIG_IGN);
	MUST(mkdtemp(dir) != NULL);
	test_in_memory(dir);
	test_spilled(dir);
	test_file_full(dir);
	rmdir(dir);
	return check_done("unit.model");
}
