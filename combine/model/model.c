/*
 * The trace model (model.h): processes, their exec segments, threads and
 * marks, and an arena that owns every string of a trace.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "model.h"
#include "vec.h"

/* Strings are small and many (argv of thousands of processes): carving them
 * out of large blocks saves one malloc header per string and lets
 * model_free release them in a handful of calls. */
#define ARENA_BLOCK_SIZE (64u * 1024u)
/* A string larger than this gets a block of its own, so that one huge
 * argv element does not waste the rest of the current block. */
#define ARENA_BIG (ARENA_BLOCK_SIZE / 4u)

struct model_arena_block {
	model_arena_block *next;
	size_t used;
	size_t cap;
	size_t maplen; /* > 0: mapped from the spill file, not malloc'd */
	char data[];
};

model_trace *model_new(void)
{
	model_trace *t = calloc(1, sizeof(*t));

	if (t == NULL)
		return NULL;
	t->anchor_mono_ns = -1;
	t->anchor_real_ns = -1;
	t->start_ns = -1;
	t->end_ns = -1;
	t->spill_fd = -1;
	t->node.launcher_pid = -1;
	t->node.lost_ns = -1;
	return t;
}

int model_set_spill(model_trace *t, const char *dir, uint64_t limit)
{
	int fd;

	/* Chunks already in the file stay readable: one file per model. */
	if (t->spill_fd >= 0) {
		t->spill_limit = limit;
		return 0;
	}
	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0) {
		/* O_TMPFILE is not supported everywhere (older filesystems):
		 * a named file, unlinked at once, does the same. */
		char path[4096];
		if ((size_t)snprintf(path, sizeof(path), "%s/spill-XXXXXX", dir) >= sizeof(path))
			return -ENAMETOOLONG;
		fd = mkostemp(path, O_CLOEXEC);
		if (fd < 0)
			return -errno;
		unlink(path);
	}
	t->spill_fd = fd;
	t->spill_limit = limit;
	return 0;
}

/* Whether n more bytes go to the spill file rather than memory. */
static bool spill_wanted(const model_trace *t, size_t n)
{
	return t->spill_fd >= 0 && t->spill_error == 0 && t->arena_mem + n > t->spill_limit;
}

/* Stops spilling for good: later data stays in memory. What is in the
 * file stays readable (the fd stays open). */
static void spill_failed(model_trace *t, int err)
{
	t->spill_error = err ? err : EIO;
}

/* Writes buf[0..n) at off of the spill file, all of it. Returns 0 or an
 * errno (a short write is ENOSPC: the disk took what it had room for). */
static int spill_pwrite(int fd, const void *buf, size_t n, uint64_t off)
{
	const unsigned char *p = buf;

	while (n > 0) {
		ssize_t w = pwrite(fd, p, n, (off_t)off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return errno;
		if (w == 0)
			return ENOSPC;
		p += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

/* Writes the chunk bytes waiting in the write buffer. On failure they
 * stay there (readable, in memory) and spilling stops. Returns 0 or an
 * errno. */
static int spill_flush(model_trace *t)
{
	int err;

	if (t->spill_wlen == 0 || t->spill_error)
		return t->spill_error;
	err = spill_pwrite(t->spill_fd, t->spill_wbuf, t->spill_wlen, t->spill_size);
	if (err) {
		/* What the disk took of it is beyond spill_size: overwritten or
		 * ignored, never read. */
		spill_failed(t, err);
		return err;
	}
	t->spill_size += t->spill_wlen;
	t->spill_wlen = 0;
	return 0;
}

/*
 * Gives the spill file len more bytes of disk, from the next page
 * boundary, and maps them. The blocks are reserved before the mapping: a
 * page of a file that has only a size (ftruncate) gets its disk block
 * when it is first written through the mapping, and on a full file
 * system that write is SIGBUS, which would kill forktrace mid-run and
 * lose the whole trace. Returns NULL when the disk cannot take it
 * (t->spill_error says why).
 */
static void *spill_map(model_trace *t, size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uint64_t at;
	int err = spill_flush(t);
	void *b;

	if (err)
		return NULL;
	at = (t->spill_size + page - 1) & ~(uint64_t)(page - 1);
	err = posix_fallocate(t->spill_fd, (off_t)at, (off_t)len);
	if (err == 0) {
		b = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, t->spill_fd, (off_t)at);
		if (b != MAP_FAILED) {
			t->spill_size = at + len;
			return b;
		}
		err = errno;
	}
	/* What a failed reservation took stays with the file: give it back,
	 * and spill no more. The disk is full or refuses; memory is still
	 * better than losing data. */
	(void)ftruncate(t->spill_fd, (off_t)t->spill_size);
	spill_failed(t, err);
	return NULL;
}

/* The spill file's write buffer: chunks smaller than this are gathered
 * into one pwrite. */
#define SPILL_WBUF_SIZE (256u * 1024u)

/*
 * Puts data[0..len) at the end of the spill file; *off says where.
 * Returns 0, or an errno when the disk refuses (spilling stops; nothing
 * of data was kept).
 */
static int spill_append(model_trace *t, const void *data, size_t len, uint64_t *off)
{
	int err;

	if (t->spill_wbuf == NULL) {
		t->spill_wbuf = malloc(SPILL_WBUF_SIZE);
		if (t->spill_wbuf == NULL)
			return ENOMEM;
	}
	if (t->spill_wlen + len > SPILL_WBUF_SIZE && (err = spill_flush(t)) != 0)
		return err;
	if (len <= SPILL_WBUF_SIZE) {
		*off = t->spill_size + t->spill_wlen;
		memcpy(t->spill_wbuf + t->spill_wlen, data, len);
		t->spill_wlen += len;
		return 0;
	}
	err = spill_pwrite(t->spill_fd, data, len, t->spill_size);
	if (err) {
		spill_failed(t, err);
		return err;
	}
	*off = t->spill_size;
	t->spill_size += len;
	return 0;
}

/* A block of cap data bytes: from the heap while under the limit, else
 * (when may_spill) mapped from the spill file. */
static model_arena_block *block_new(model_trace *t, size_t cap, bool may_spill)
{
	model_arena_block *b;
	size_t size = sizeof(*b) + cap;

	if (may_spill && spill_wanted(t, size)) {
		size_t page = (size_t)sysconf(_SC_PAGESIZE);
		size_t len = (size + page - 1) & ~(page - 1);

		b = spill_map(t, len);
		if (b != NULL) {
			t->arena_spilled += len;
			b->maplen = len;
			b->cap = cap;
			return b;
		}
	}
	b = malloc(size);
	if (b == NULL)
		return NULL;
	t->arena_mem += size;
	b->maplen = 0;
	b->cap = cap;
	return b;
}

static void process_free(model_process *p)
{
	if (p == NULL)
		return;
	for (size_t i = 0; i < p->nsegs; i++)
		free(p->segs[i].mods);
	free(p->segs);
	free(p->threads);
	free(p->marks);
	free(p);
}

static void arena_free(model_arena_block *b)
{
	model_arena_block *next;

	for (; b != NULL; b = next) {
		next = b->next;
		if (b->maplen)
			munmap(b, b->maplen);
		else
			free(b);
	}
}

void model_free(model_trace *t)
{
	size_t i;

	if (t == NULL)
		return;
	for (i = 0; i < t->nprocs; i++)
		process_free(t->procs[i]);
	free(t->procs);
	free(t->clocks);
	free(t->node.samples);
	free(t->missing);
	arena_free(t->arena);
	arena_free(t->chunk_arena);
	free(t->spill_wbuf);
	if (t->spill_fd >= 0)
		close(t->spill_fd);
	free(t);
}

/* Returns n bytes of the arena *head (no alignment: only chars live
 * here). The head block is the one being filled; a big request gets a
 * block that is linked behind the head, so the head keeps serving small
 * strings. */
static char *arena_alloc_in(model_trace *t, model_arena_block **head, size_t n, bool may_spill)
{
	model_arena_block *b = *head;
	size_t cap;

	if (b != NULL && b->cap - b->used >= n) {
		char *p = b->data + b->used;

		b->used += n;
		return p;
	}
	cap = n > ARENA_BIG ? n : ARENA_BLOCK_SIZE;
	if (cap > SIZE_MAX - sizeof(*b))
		return NULL;
	b = block_new(t, cap, may_spill);
	if (b == NULL)
		return NULL;
	b->used = n;
	if (n > ARENA_BIG && *head != NULL) {
		b->next = (*head)->next;
		(*head)->next = b;
	} else {
		b->next = *head;
		*head = b;
	}
	return b->data;
}

/* n bytes for strings. */
static char *arena_alloc(model_trace *t, size_t n)
{
	return arena_alloc_in(t, &t->arena, n, true);
}

const char *model_strndup(model_trace *t, const char *s, size_t n)
{
	char *p;

	if (s == NULL)
		return NULL;
	if (n == SIZE_MAX)
		return NULL;
	p = arena_alloc(t, n + 1);
	if (p == NULL)
		return NULL;
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

const char *model_strdup(model_trace *t, const char *s)
{
	if (s == NULL)
		return NULL;
	return model_strndup(t, s, strlen(s));
}

/* The pointer array lives in the arena too: it is freed with the strings
 * and needs no alignment beyond what we give it here. */
const char **model_strv_alloc(model_trace *t, size_t n)
{
	const size_t align = _Alignof(const char *);
	const char **out;
	char *raw;

	if (n > (SIZE_MAX - align) / sizeof(*out) - 1)
		return NULL;
	raw = arena_alloc(t, (n + 1) * sizeof(*out) + align - 1);
	if (raw == NULL)
		return NULL;
	out = (const char **)(void *)(((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1));
	memset(out, 0, (n + 1) * sizeof(*out));
	return out;
}

const char **model_strvdup(model_trace *t, const char *const *v, size_t n)
{
	const char **out;

	if (v == NULL)
		return NULL;
	out = model_strv_alloc(t, n);
	if (out == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (v[i] == NULL)
			continue;
		out[i] = model_strdup(t, v[i]);
		if (out[i] == NULL)
			return NULL;
	}
	return out;
}

model_process *model_add_process(model_trace *t, int64_t pid)
{
	model_process *p;

	if (t->nprocs > UINT32_MAX)
		return NULL;
	if (vec_grow(&t->procs, &t->procs_cap, t->nprocs + 1, sizeof(*t->procs), 8) < 0)
		return NULL;
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return NULL;
	p->index = (uint32_t)t->nprocs;
	p->pid = pid;
	p->out_pid = pid;
	p->ppid = -1;
	p->start_ns = -1;
	p->end_ns = -1;
	p->spawn_ns = -1;
	p->spawn_tid = -1;
	p->exit_kind = MODEL_EXIT_UNKNOWN;
	p->rank = -1;
	p->local_rank = -1;
	p->ru = (model_rusage){-1, -1, -1, -1, -1, -1, -1, -1, -1};
	p->ru_source = MODEL_RU_NONE;
	t->procs[t->nprocs++] = p;
	return p;
}

model_segment *model_add_segment(model_trace *t, model_process *p)
{
	model_segment *s;

	(void)t;
	if (vec_grow(&p->segs, &p->segs_cap, p->nsegs + 1, sizeof(*p->segs), 8) < 0)
		return NULL;
	s = &p->segs[p->nsegs++];
	memset(s, 0, sizeof(*s));
	s->start_ns = -1;
	s->end_ns = -1;
	s->end_user_ns = s->end_sys_ns = s->end_maxrss_kb = -1;
	return s;
}

model_thread *model_add_thread(model_trace *t, model_process *p, int64_t tid)
{
	model_thread *th;

	(void)t;
	if (vec_grow(&p->threads, &p->threads_cap, p->nthreads + 1, sizeof(*p->threads), 8) < 0)
		return NULL;
	th = &p->threads[p->nthreads++];
	memset(th, 0, sizeof(*th));
	th->tid = tid;
	th->start_ns = -1;
	th->end_ns = -1;
	return th;
}

model_mark *model_add_mark(model_trace *t, model_process *p)
{
	model_mark *m;

	(void)t;
	if (vec_grow(&p->marks, &p->marks_cap, p->nmarks + 1, sizeof(*p->marks), 8) < 0)
		return NULL;
	m = &p->marks[p->nmarks++];
	memset(m, 0, sizeof(*m));
	m->ts_ns = -1;
	m->dur_ns = -1;
	return m;
}

int model_add_chunk(model_trace *t, model_thread *th, uint32_t seg, const void *data, size_t len)
{
	const size_t align = _Alignof(model_chunk);
	bool spill = spill_wanted(t, len);
	model_chunk *c;
	char *raw;

	if (len > UINT32_MAX)
		return -EINVAL;
	raw = arena_alloc_in(t, &t->chunk_arena, sizeof(*c) + align - 1 + (spill ? 0 : len), false);
	if (raw == NULL)
		return -ENOMEM;
	c = (model_chunk *)(void *)(((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1));
	c->off = 0;
	if (spill && spill_append(t, data, len, &c->off) == 0) {
		c->data = NULL;
		t->arena_spilled += len;
	} else if (spill) {
		/* The disk refused: the bytes go to memory after all, in a
		 * block of their own (the header's has no room for them). */
		unsigned char *d = (unsigned char *)arena_alloc_in(t, &t->chunk_arena, len, false);

		if (d == NULL)
			return -ENOMEM;
		memcpy(d, data, len);
		c->data = d;
	} else {
		memcpy(c + 1, data, len);
		c->data = (const unsigned char *)(c + 1);
	}
	c->next = NULL;
	c->len = (uint32_t)len;
	c->seg = seg;
	if (th->chunks_last)
		th->chunks_last->next = c;
	else
		th->chunks = c;
	th->chunks_last = c;
	th->chunk_bytes += len;
	return 0;
}

const unsigned char *model_chunk_bytes(const model_trace *t, const model_chunk *c,
				       model_chunk_buf *buf)
{
	unsigned char *p;
	size_t n = c->len, done = 0;

	if (c->data != NULL)
		return c->data;
	/* Still in the write buffer (the file would not take it, or it was
	 * not full yet). */
	if (c->off >= t->spill_size && c->off - t->spill_size + n <= t->spill_wlen)
		return t->spill_wbuf + (c->off - t->spill_size);
	if (buf->cap < n) {
		p = realloc(buf->p, n);
		if (p == NULL) {
			errno = ENOMEM;
			return NULL;
		}
		buf->p = p;
		buf->cap = n;
	}
	while (done < n) {
		ssize_t r = pread(t->spill_fd, buf->p + done, n - done, (off_t)(c->off + done));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r == 0)
				errno = EIO;
			return NULL;
		}
		done += (size_t)r;
	}
	return buf->p;
}

int model_add_module(model_trace *t, model_segment *s, const char *path, size_t pathlen,
		     uint64_t bias, uint64_t lo, uint64_t hi)
{
	model_module *m;

	for (size_t i = 0; i < s->nmods; i++)
		if (s->mods[i].bias == bias && s->mods[i].lo == lo &&
		    strlen(s->mods[i].path) == pathlen && !memcmp(s->mods[i].path, path, pathlen))
			return 0;
	if (vec_grow(&s->mods, &s->mods_cap, s->nmods + 1, sizeof(*s->mods), 8) < 0)
		return -ENOMEM;
	m = &s->mods[s->nmods];
	m->path = model_strndup(t, path, pathlen);
	if (m->path == NULL)
		return -ENOMEM;
	m->bias = bias;
	m->lo = lo;
	m->hi = hi;
	s->nmods++;
	return 0;
}

int model_add_clock(model_trace *t, uint64_t tsc, int64_t ns)
{
	if (vec_grow(&t->clocks, &t->clocks_cap, t->nclocks + 1, sizeof(*t->clocks), 8) < 0)
		return -ENOMEM;
	t->clocks[t->nclocks].tsc = tsc;
	t->clocks[t->nclocks].ns = ns;
	t->nclocks++;
	return 0;
}

int model_add_missing_host(model_trace *t, const char *host, int64_t launcher_pid, const char *why,
			   const char *where)
{
	model_missing_host *m;

	if (vec_grow(&t->missing, &t->missing_cap, t->nmissing + 1, sizeof(*t->missing), 4) < 0)
		return -ENOMEM;
	m = &t->missing[t->nmissing];
	*m = (model_missing_host){model_strdup(t, host), launcher_pid, model_strdup(t, why),
				  model_strdup(t, where)};
	if ((host != NULL && m->host == NULL) || (why != NULL && m->why == NULL) ||
	    (where != NULL && m->where == NULL))
		return -ENOMEM;
	t->nmissing++;
	return 0;
}

int model_add_clock_sample(model_trace *t, int64_t node_ns, int64_t offset_ns, int64_t err_ns)
{
	model_node_part *n = &t->node;

	if (vec_grow(&n->samples, &n->samples_cap, n->nsamples + 1, sizeof(*n->samples), 8) < 0)
		return -ENOMEM;
	n->samples[n->nsamples++] = (model_clock_sample){node_ns, offset_ns, err_ns};
	return 0;
}

/* Samples closer together than this give the drift no footing: their
 * errors (tens of us) would dominate the slope. */
#define MODEL_DRIFT_MIN_SPAN_NS 1000000000LL
/* A sample whose error is more than this many times the best one's (a
 * burst whose every round trip was slow: a busy host, a full link) is
 * left out of the fit: it would only widen the bound. */
#define MODEL_FIT_ERR_FACTOR 4
/* Drifts beyond this (1000 ppm) are no clock's: a fit that finds one
 * fitted noise, and falls back to the best sample's offset. */
#define MODEL_DRIFT_MAX 1e-3

/* Whether sample s takes part in a fit whose best error is best_err. */
static bool sample_used(const model_clock_sample *s, int64_t best_err)
{
	if (s->err_ns < 0)
		return false;
	return s->err_ns <= (best_err > 0 ? best_err : 1) * MODEL_FIT_ERR_FACTOR;
}

/* The weight of a sample: 1/err^2, so that a sample twice as sure counts
 * four times. */
static double sample_weight(const model_clock_sample *s)
{
	double e = s->err_ns > 0 ? (double)s->err_ns : 1.0;

	return 1.0 / (e * e);
}

void model_clock_fit(const model_trace *t, model_clock_map *out)
{
	const model_node_part *n = &t->node;
	const model_clock_sample *best = NULL;
	int64_t lo = INT64_MAX, hi = INT64_MIN;
	double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0, mx, my, drift;
	size_t used = 0;

	*out = (model_clock_map){.method = "none", .err_ns = -1};
	for (size_t i = 0; i < n->nsamples; i++) {
		const model_clock_sample *s = &n->samples[i];

		if (s->err_ns >= 0 && (best == NULL || s->err_ns < best->err_ns))
			best = s;
	}
	if (best == NULL) {
		if (t->anchor_real_ns > 0)
			out->method = "realtime anchor";
		return;
	}
	out->method = "measured";
	out->offset_ns = best->offset_ns;
	out->ref_ns = best->node_ns;
	out->err_ns = best->err_ns;
	out->nsamples = 1;
	for (size_t i = 0; i < n->nsamples; i++) {
		const model_clock_sample *s = &n->samples[i];

		if (!sample_used(s, best->err_ns))
			continue;
		lo = s->node_ns < lo ? s->node_ns : lo;
		hi = s->node_ns > hi ? s->node_ns : hi;
	}
	if (hi - lo < MODEL_DRIFT_MIN_SPAN_NS)
		return;
	/* Weighted least squares around the weighted mean time, relative to
	 * the best sample so that the sums stay small. */
	for (size_t i = 0; i < n->nsamples; i++) {
		const model_clock_sample *s = &n->samples[i];
		double w = sample_weight(s);

		if (!sample_used(s, best->err_ns))
			continue;
		sw += w;
		sx += w * (double)(s->node_ns - best->node_ns);
		sy += w * (double)(s->offset_ns - best->offset_ns);
		used++;
	}
	mx = sx / sw;
	my = sy / sw;
	for (size_t i = 0; i < n->nsamples; i++) {
		const model_clock_sample *s = &n->samples[i];
		double w = sample_weight(s), dx;

		if (!sample_used(s, best->err_ns))
			continue;
		dx = (double)(s->node_ns - best->node_ns) - mx;
		sxx += w * dx * dx;
		sxy += w * dx * ((double)(s->offset_ns - best->offset_ns) - my);
	}
	if (sxx <= 0)
		return;
	drift = sxy / sxx;
	if (drift > MODEL_DRIFT_MAX || drift < -MODEL_DRIFT_MAX)
		return;
	out->drift = drift;
	out->ref_ns = best->node_ns + (int64_t)mx;
	out->offset_ns = best->offset_ns + (int64_t)my;
	out->nsamples = used;
	/* The bound holds at every sample the fit used: the sample says the
	 * true offset is within its error of what it measured, and the line
	 * is that far from what it measured. Between samples, with the
	 * drift constant, it holds too. */
	out->err_ns = 0;
	for (size_t i = 0; i < n->nsamples; i++) {
		const model_clock_sample *s = &n->samples[i];
		int64_t r;

		if (!sample_used(s, best->err_ns))
			continue;
		r = s->node_ns + s->offset_ns - model_clock_apply(out, s->node_ns);
		r = (r < 0 ? -r : r) + s->err_ns;
		if (r > out->err_ns)
			out->err_ns = r;
	}
}

int64_t model_clock_apply(const model_clock_map *m, int64_t ns)
{
	double d;

	if (m == NULL || ns < 0)
		return ns;
	d = m->drift * (double)(ns - m->ref_ns);
	return ns + m->offset_ns + (int64_t)(d < 0 ? d - 0.5 : d + 0.5);
}

static void later(int64_t *last, int64_t ns)
{
	if (ns > *last)
		*last = ns;
}

int64_t model_last_ns(const model_trace *t)
{
	int64_t last = -1;

	later(&last, t->start_ns);
	later(&last, t->end_ns);
	for (size_t i = 0; i < t->nclocks; i++)
		later(&last, t->clocks[i].ns);
	for (size_t i = 0; i < t->node.nsamples; i++)
		later(&last, t->node.samples[i].node_ns);
	for (size_t i = 0; i < t->nprocs; i++) {
		const model_process *p = t->procs[i];

		later(&last, p->start_ns);
		later(&last, p->end_ns);
		later(&last, p->spawn_ns);
		for (size_t k = 0; k < p->nsegs; k++) {
			later(&last, p->segs[k].start_ns);
			later(&last, p->segs[k].end_ns);
		}
		for (size_t k = 0; k < p->nthreads; k++) {
			later(&last, p->threads[k].start_ns);
			later(&last, p->threads[k].end_ns);
		}
		for (size_t k = 0; k < p->nmarks; k++) {
			const model_mark *mk = &p->marks[k];

			later(&last, mk->ts_ns);
			/* Times come from files and peers: no overflow. */
			if (mk->ts_ns >= 0 && mk->dur_ns > 0 && mk->dur_ns <= INT64_MAX - mk->ts_ns)
				later(&last, mk->ts_ns + mk->dur_ns);
		}
	}
	return last;
}

/* Ends p's images and threads still open at its end (when it has one). */
static void close_inside(model_process *p)
{
	if (p->end_ns < 0)
		return;
	for (size_t s = 0; s < p->nsegs; s++)
		if (p->segs[s].end_ns < 0)
			p->segs[s].end_ns = s + 1 < p->nsegs && p->segs[s + 1].start_ns >= 0
						    ? p->segs[s + 1].start_ns
						    : p->end_ns;
	for (size_t k = 0; k < p->nthreads; k++)
		if (p->threads[k].end_ns < 0)
			p->threads[k].end_ns = p->end_ns;
}

size_t model_close_open(model_trace *t, enum model_exit_kind kind, int64_t end_ns)
{
	size_t closed = 0;

	for (size_t i = 0; i < t->nprocs; i++) {
		model_process *p = t->procs[i];

		/* Ended, and how is known: only what it left open. */
		if (p->exit_kind == MODEL_EXIT_CODE || p->exit_kind == MODEL_EXIT_SIGNAL ||
		    (p->exit_kind == MODEL_EXIT_HOST_LOST && p->end_ns >= 0)) {
			close_inside(p);
			continue;
		}
		p->exit_kind = kind;
		p->end_ns = end_ns > p->start_ns ? end_ns : p->start_ns;
		close_inside(p);
		closed++;
	}
	if (t->end_ns < end_ns)
		t->end_ns = end_ns;
	return closed;
}

size_t model_mark_lost(model_trace *t, int64_t lost_ns)
{
	t->node.lost_ns = lost_ns;
	return model_close_open(t, MODEL_EXIT_HOST_LOST, lost_ns);
}

model_thread *model_find_thread(model_process *p, int64_t tid)
{
	size_t i;

	for (i = 0; i < p->nthreads; i++)
		if (p->threads[i].tid == tid)
			return &p->threads[i];
	return NULL;
}

const char *model_process_name(const model_process *p)
{
	if (p->nsegs == 0)
		return "?";
	return model_image_name(&p->segs[p->nsegs - 1]).name;
}

const char *model_ru_source_name(enum model_ru_source src)
{
	switch (src) {
	case MODEL_RU_WAIT:
		return "wait";
	case MODEL_RU_EXIT:
		return "exit";
	case MODEL_RU_WAIT_WITH_DESC:
		return "wait+descendants";
	case MODEL_RU_NONE:
		break;
	}
	return NULL;
}
