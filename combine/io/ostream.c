/*
 * Buffered, optionally gzip-compressed output with hand-written JSON
 * formatting (ostream.h); a stream on a file is a pipeline of blocks
 * (opipe.h) compressed as gzip blocks (gzblock.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "gzblock.h"
#include "opipe.h"
#include "ostream.h"
#include "vec.h"

/*
 * A stream on a file: its blocks and the pipeline they go through.
 *
 * A block's life: filled by the stream's thread (text and deferred
 * slices), handed to the opipe; work (any thread) expands the slices into
 * xbuf (or takes the text as it is when it has none), for gzip passes the
 * last 32 KiB of the stream so far on as the next block's dictionary,
 * takes its own from the block before and compresses; done (in order)
 * writes it; release puts it back on the free list.
 *
 * The dictionaries go through a ring of OSTREAM_RING slots, slot (seq %
 * ring) holding the 32 KiB before block seq: block seq - 1 writes it,
 * block seq reads it. The slot is written again only by block seq + ring -
 * 1, which cannot be submitted before block seq is released (at most
 * OSTREAM_INFLIGHT blocks are in flight), so its reader has finished.
 * Workers take blocks oldest first, so when block seq waits for its slot,
 * block seq - 1 is being worked and fills it right after its expansion:
 * no block waits for another's compression.
 *
 * Lock order: opipe's pool lock and a pipe's lock are never held together.
 */
#define OSTREAM_RING (OSTREAM_INFLIGHT + 1u)
/* A deferred slice takes at least this much of a block: its prefix is at
 * least `\n,{"ph":"X","name":"","pid":0,"tid":0,"ts":` and then its tail. */
#define OSTREAM_X_MIN 64u
#define OSTREAM_XCAP (OSTREAM_BLOCK / OSTREAM_X_MIN)
/* Prefix text is stored in chunks of this size, never moved. */
#define OSTREAM_CHUNK (64u * 1024u)
/* Spare encoders a stream keeps (one per thread that compresses). */
#define OSTREAM_MAX_CTX 8u

typedef struct oblock {
	uint64_t seq;
	char *text; /* OSTREAM_BLOCK bytes */
	size_t len;
	ostream_xrec *xs; /* OSTREAM_XCAP of them */
	size_t nx;
	char *xbuf; /* expanded bytes, OSTREAM_BLOCK, made on first need */
	const char *out;
	size_t outlen;
	unsigned char *z; /* gzip: the compressed block */
	size_t zcap, zlen;
	uint32_t crc;
	bool last;
	struct oblock *next_free;
} oblock;

typedef struct dict_slot {
	char bytes[GZBLOCK_DICT];
	size_t n;
	uint64_t seq; /* the block it is the dictionary of */
} dict_slot;

/* A chunk of prefix text no longer used for new slices: freed once the
 * blocks up to seq are released. */
typedef struct retired_chunk {
	char *chunk;
	uint64_t seq;
} retired_chunk;

/* The prefix text of a stream (ostream_prefix): chunks never moved. */
typedef struct ostream_store {
	char *chunk; /* the one being filled */
	size_t used, cap;
	char **chunks; /* every chunk in use, chunk included */
	size_t nchunks, chunks_cap;
	retired_chunk *retired;
	size_t nretired, retired_cap;
} ostream_store;

typedef struct ostream_pipe {
	opipe *op;
	int fd;
	int level; /* < 0: plain */
	uint64_t next_seq;
	oblock *filling;

	pthread_mutex_t lock; /* guards the fields below, up to the done side */
	pthread_cond_t cond;  /* a dictionary slot was filled */
	oblock *free;
	gzblock_ctx *ctxs[OSTREAM_MAX_CTX];
	size_t nctxs;
	uint64_t released; /* blocks released */
	bool failed;       /* a block's work failed: no dictionary will come */
	int work_err;      /* why (what the blocks after it report is -ECANCELED) */
	dict_slot *ring;   /* gzip: OSTREAM_RING slots */

	/* The done side: one done at a time, in order; read by the stream's
	 * thread after opipe_finish. */
	uint64_t bytes_in, bytes_out;
	uint32_t crc;
} ostream_pipe;

void ostream_fail(ostream *o, int err)
{
	if (o->err == 0)
		o->err = err;
}

static void block_free(oblock *b)
{
	if (b == NULL)
		return;
	free(b->text);
	free(b->xs);
	free(b->xbuf);
	free(b->z);
	free(b);
}

static oblock *block_new(const ostream_pipe *pp)
{
	oblock *b = calloc(1, sizeof(*b));

	if (b == NULL)
		return NULL;
	b->text = malloc(OSTREAM_BLOCK);
	b->xs = malloc(OSTREAM_XCAP * sizeof(*b->xs));
	if (b->text == NULL || b->xs == NULL)
		goto fail;
	if (pp->level >= 0) {
		b->zcap = gzblock_bound(OSTREAM_BLOCK);
		b->z = malloc(b->zcap);
		if (b->z == NULL)
			goto fail;
	}
	return b;

fail:
	block_free(b);
	return NULL;
}

/* Writes all n bytes, retrying after signals and short writes (pipes,
 * sockets, full disks report progress piecemeal). */
static int write_all(ostream_pipe *pp, const void *buf, size_t n)
{
	const char *p = buf;

	while (n > 0) {
		ssize_t w = write(pp->fd, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (w == 0)
			return -EIO;
		p += w;
		n -= (size_t)w;
		pp->bytes_out += (uint64_t)w;
	}
	return 0;
}

size_t ostream_x_expand(char *out, const ostream_xrec *r)
{
	char *p = out;

	memcpy(p, r->prefix, r->plen);
	p += r->plen;
	p += ostream_fmt_ts(p, r->ts_ns);
	memcpy(p, ",\"dur\":", 7);
	p += 7;
	p += ostream_fmt_ts(p, r->dur_ns);
	*p++ = '}';
	return (size_t)(p - out);
}

/* The block's final bytes: its text with its deferred slices expanded in
 * place; ostream_x's accounting keeps them within OSTREAM_BLOCK. */
static int block_expand(oblock *b)
{
	const char *text = b->text;
	size_t from = 0;
	char *p;

	if (b->nx == 0) {
		b->out = b->text;
		b->outlen = b->len;
		return 0;
	}
	if (b->xbuf == NULL) {
		b->xbuf = malloc(OSTREAM_BLOCK);
		if (b->xbuf == NULL)
			return -ENOMEM;
	}
	p = b->xbuf;
	for (size_t i = 0; i < b->nx; i++) {
		const ostream_xrec *r = &b->xs[i];

		memcpy(p, text + from, r->at - from);
		p += r->at - from;
		from = r->at;
		p += ostream_x_expand(p, r);
	}
	memcpy(p, text + from, b->len - from);
	p += b->len - from;
	b->out = b->xbuf;
	b->outlen = (size_t)(p - b->xbuf);
	return 0;
}

/* Fills the next block's slot with the last GZBLOCK_DICT bytes of the
 * stream up to the end of b: of b alone when it is that long, else of its
 * own dictionary d followed by b. */
static void dict_pass(ostream_pipe *pp, const oblock *b, const dict_slot *d)
{
	dict_slot *next = &pp->ring[(b->seq + 1) % OSTREAM_RING];
	size_t n = b->outlen;

	if (n >= GZBLOCK_DICT) {
		memcpy(next->bytes, b->out + n - GZBLOCK_DICT, GZBLOCK_DICT);
		next->n = GZBLOCK_DICT;
	} else {
		size_t keep = d->n + n > GZBLOCK_DICT ? GZBLOCK_DICT - n : d->n;

		memcpy(next->bytes, d->bytes + d->n - keep, keep);
		memcpy(next->bytes + keep, b->out, n);
		next->n = keep + n;
	}
	pthread_mutex_lock(&pp->lock);
	next->seq = b->seq + 1;
	pthread_cond_broadcast(&pp->cond);
	pthread_mutex_unlock(&pp->lock);
}

/* b's dictionary, once the block before has passed it on (the first
 * block's is empty); NULL when a block before failed. */
static const dict_slot *dict_wait(ostream_pipe *pp, const oblock *b)
{
	dict_slot *d = &pp->ring[b->seq % OSTREAM_RING];

	if (b->seq == 0) {
		d->n = 0;
		return d;
	}
	pthread_mutex_lock(&pp->lock);
	while (d->seq != b->seq && !pp->failed)
		pthread_cond_wait(&pp->cond, &pp->lock);
	if (d->seq != b->seq)
		d = NULL;
	pthread_mutex_unlock(&pp->lock);
	return d;
}

/* An encoder for this thread's while: one of the stream's spares, or new. */
static gzblock_ctx *ctx_take(ostream_pipe *pp, int *err)
{
	gzblock_ctx *c = NULL;

	pthread_mutex_lock(&pp->lock);
	if (pp->nctxs > 0)
		c = pp->ctxs[--pp->nctxs];
	pthread_mutex_unlock(&pp->lock);
	if (c == NULL)
		c = gzblock_ctx_new(pp->level, err);
	return c;
}

static void ctx_give(ostream_pipe *pp, gzblock_ctx *c)
{
	pthread_mutex_lock(&pp->lock);
	if (pp->nctxs < OSTREAM_MAX_CTX) {
		pp->ctxs[pp->nctxs++] = c;
		c = NULL;
	}
	pthread_mutex_unlock(&pp->lock);
	gzblock_ctx_free(c);
}

/* Wakes the blocks waiting for a dictionary that will not come. */
static int work_failed(ostream_pipe *pp, int err)
{
	pthread_mutex_lock(&pp->lock);
	pp->failed = true;
	if (pp->work_err == 0 && err != -ECANCELED)
		pp->work_err = err;
	pthread_cond_broadcast(&pp->cond);
	pthread_mutex_unlock(&pp->lock);
	return err;
}

/* The error the pipeline reported, or the one that cancelled it. */
static int pipe_error(ostream_pipe *pp, int err)
{
	if (err == -ECANCELED) {
		pthread_mutex_lock(&pp->lock);
		if (pp->work_err != 0)
			err = pp->work_err;
		pthread_mutex_unlock(&pp->lock);
	}
	return err;
}

/* opipe work: expand; for gzip pass the dictionary on and compress. */
static int block_work(void *ctx, void *job)
{
	ostream_pipe *pp = ctx;
	oblock *b = job;
	const dict_slot *d;
	gzblock_ctx *c;
	long zn;
	int err = block_expand(b);

	if (pp->level < 0)
		return err;
	if (err < 0)
		return work_failed(pp, err);
	/* The next block may be waiting for its dictionary: it goes first,
	 * unless this block is too short to make it without its own. */
	if (b->last) {
		d = dict_wait(pp, b);
	} else if (b->outlen >= GZBLOCK_DICT) {
		dict_pass(pp, b, NULL);
		d = dict_wait(pp, b);
	} else {
		d = dict_wait(pp, b);
		if (d != NULL)
			dict_pass(pp, b, d);
	}
	if (d == NULL)
		return work_failed(pp, -ECANCELED);
	c = ctx_take(pp, &err);
	if (c == NULL)
		return work_failed(pp, err);
	zn = gzblock_compress(c, d->bytes, d->n, b->out, b->outlen, b->last, b->z, b->zcap,
			      &b->crc);
	ctx_give(pp, c);
	if (zn < 0)
		return work_failed(pp, (int)zn);
	b->zlen = (size_t)zn;
	return 0;
}

/* opipe done, in order: writes the block; gzip's header before the first,
 * its trailer after the last. */
static int block_done(void *ctx, void *job)
{
	ostream_pipe *pp = ctx;
	oblock *b = job;
	int err;

	pp->bytes_in += b->outlen;
	if (pp->level < 0)
		return write_all(pp, b->out, b->outlen);
	if (b->seq == 0) {
		unsigned char h[GZBLOCK_HEADER];

		gzblock_header(h);
		err = write_all(pp, h, sizeof(h));
		if (err < 0)
			return err;
		pp->crc = b->crc;
	} else {
		pp->crc = gzblock_crc_combine(pp->crc, b->crc, b->outlen);
	}
	err = write_all(pp, b->z, b->zlen);
	if (err == 0 && b->last) {
		unsigned char t[GZBLOCK_TRAILER];

		gzblock_trailer(t, pp->crc, pp->bytes_in);
		err = write_all(pp, t, sizeof(t));
	}
	return err;
}

static void block_release(void *ctx, void *job)
{
	ostream_pipe *pp = ctx;
	oblock *b = job;

	pthread_mutex_lock(&pp->lock);
	b->next_free = pp->free;
	pp->free = b;
	pp->released++;
	pthread_mutex_unlock(&pp->lock);
}

static const opipe_ops block_ops = {
	.work = block_work,
	.done = block_done,
	.release = block_release,
};

/* Frees the retired prefix chunks that no unreleased block can use. */
static void store_collect(ostream *o)
{
	ostream_store *st = o->store;
	uint64_t released = UINT64_MAX;
	size_t k = 0;

	if (st == NULL || st->nretired == 0)
		return;
	if (o->pipe != NULL) {
		pthread_mutex_lock(&o->pipe->lock);
		released = o->pipe->released;
		pthread_mutex_unlock(&o->pipe->lock);
	}
	for (size_t i = 0; i < st->nretired; i++) {
		if (st->retired[i].seq <= released)
			free(st->retired[i].chunk);
		else
			st->retired[k++] = st->retired[i];
	}
	st->nretired = k;
}

static void store_free(ostream_store *st)
{
	if (st == NULL)
		return;
	for (size_t i = 0; i < st->nchunks; i++)
		free(st->chunks[i]);
	free(st->chunks);
	for (size_t i = 0; i < st->nretired; i++)
		free(st->retired[i].chunk);
	free(st->retired);
	free(st);
}

/* Makes b the block being filled. */
static void block_fill(ostream *o, oblock *b)
{
	ostream_pipe *pp = o->pipe;

	b->seq = pp->next_seq++;
	b->len = 0;
	b->nx = 0;
	b->last = false;
	pp->filling = b;
	o->buf = b->text;
	o->len = 0;
	o->cap = OSTREAM_BLOCK;
	o->xs = b->xs;
	o->nx = 0;
	o->xcap = OSTREAM_XCAP;
}

/* A free block, else a new one. After opipe_submit returns at most
 * OSTREAM_INFLIGHT blocks are unreleased, so at most OSTREAM_INFLIGHT + 1
 * are ever made. NULL on -ENOMEM. */
static oblock *block_get(ostream_pipe *pp)
{
	oblock *b;

	pthread_mutex_lock(&pp->lock);
	b = pp->free;
	if (b != NULL)
		pp->free = b->next_free;
	pthread_mutex_unlock(&pp->lock);
	return b != NULL ? b : block_new(pp);
}

/* Hands the block being filled to the pipeline (last: the stream's end)
 * and, unless last, starts the next. */
static int block_submit(ostream *o, bool last)
{
	ostream_pipe *pp = o->pipe;
	oblock *b = pp->filling, *next;
	int err;

	b->len = o->len;
	b->nx = o->nx;
	b->last = last;
	pp->filling = NULL;
	err = opipe_submit(pp->op, b);
	if (err < 0)
		ostream_fail(o, pipe_error(pp, err));
	if (last)
		return o->err;
	store_collect(o);
	next = block_get(pp);
	if (next == NULL) {
		/* No memory for the next block: the stream fails, and takes
		 * back a block from the pipeline to drop what comes next in. */
		ostream_fail(o, -ENOMEM);
		err = opipe_finish(pp->op);
		if (err < 0)
			ostream_fail(o, pipe_error(pp, err));
		next = block_get(pp);
	}
	block_fill(o, next);
	return o->err;
}

static void pipe_free(ostream_pipe *pp)
{
	oblock *b;

	if (pp == NULL)
		return;
	opipe_free(pp->op);
	block_free(pp->filling);
	while ((b = pp->free) != NULL) {
		pp->free = b->next_free;
		block_free(b);
	}
	for (size_t i = 0; i < pp->nctxs; i++)
		gzblock_ctx_free(pp->ctxs[i]);
	free(pp->ring);
	pthread_cond_destroy(&pp->cond);
	pthread_mutex_destroy(&pp->lock);
	free(pp);
}

int ostream_open(ostream *o, int fd, int gzip_level)
{
	ostream_pipe *pp;
	oblock *b;
	int err = -ENOMEM;

	memset(o, 0, sizeof(*o));
	o->fd = fd;
	if (gzip_level > 9)
		return -EINVAL;
	if (fd < 0) {
		/* A memory stream: text only, grown as needed. */
		o->buf = malloc(OSTREAM_BUF_SIZE);
		if (o->buf == NULL)
			return -ENOMEM;
		o->cap = OSTREAM_BUF_SIZE;
		return 0;
	}
	pp = calloc(1, sizeof(*pp));
	if (pp == NULL)
		return -ENOMEM;
	pp->fd = fd;
	pp->level = gzip_level;
	pthread_mutex_init(&pp->lock, NULL);
	pthread_cond_init(&pp->cond, NULL);
	if (gzip_level >= 0) {
		/* One encoder now: a level it refuses fails here, not later. */
		gzblock_ctx *c = gzblock_ctx_new(gzip_level, &err);

		if (c == NULL)
			goto fail;
		pp->ctxs[pp->nctxs++] = c;
		err = -ENOMEM;
		pp->ring = calloc(OSTREAM_RING, sizeof(*pp->ring));
		if (pp->ring == NULL)
			goto fail;
	}
	pp->op = opipe_new(&block_ops, pp, OSTREAM_INFLIGHT);
	if (pp->op == NULL)
		goto fail;
	b = block_new(pp);
	if (b == NULL)
		goto fail;
	o->pipe = pp;
	block_fill(o, b);
	return 0;

fail:
	pipe_free(pp);
	return err;
}

int ostream_drain(ostream *o)
{
	if (o->pipe == NULL) {
		/* A memory stream (or one that ended): make room instead of
		 * writing out. */
		if (o->err || o->buf == NULL ||
		    vec_grow(&o->buf, &o->cap, o->cap + 1, 1, OSTREAM_BUF_SIZE) < 0) {
			ostream_fail(o, -ENOMEM);
			o->len = 0; /* keep the writers' room promise; content is lost */
			return o->err;
		}
		return 0;
	}
	if (o->err != 0) {
		/* The block is emptied even after an error, so the inline
		 * writers always find room; what they write then is dropped. */
		o->len = 0;
		o->nx = 0;
		o->cap = OSTREAM_BLOCK;
		return o->err;
	}
	if (o->len == 0 && o->nx == 0)
		return 0;
	return block_submit(o, false);
}

void ostream_write_slow(ostream *o, const void *p, size_t n)
{
	const char *s = p;

	while (n > 0) {
		size_t room = o->cap - o->len;
		size_t k = n < room ? n : room;

		memcpy(o->buf + o->len, s, k);
		o->len += k;
		s += k;
		n -= k;
		if (n > 0)
			ostream_drain(o);
	}
}

int ostream_finish(ostream *o)
{
	ostream_pipe *pp = o->pipe;

	if (pp != NULL) {
		int err;

		/* The last block ends the gzip member, even when empty. */
		if (o->err == 0 && (o->len > 0 || o->nx > 0 || pp->level >= 0))
			block_submit(o, true);
		err = opipe_finish(pp->op);
		if (err < 0)
			ostream_fail(o, pipe_error(pp, err));
		o->bytes_in = pp->bytes_in;
		o->bytes_out = pp->bytes_out;
		pipe_free(pp);
		o->pipe = NULL;
	} else {
		free(o->buf);
	}
	o->buf = NULL;
	o->len = o->cap = 0;
	o->xs = NULL;
	o->nx = o->xcap = 0;
	store_free(o->store);
	o->store = NULL;
	free(o->ptexts);
	o->ptexts = NULL;
	o->nptexts = o->ptexts_cap = 0;
	return o->err;
}

/* Copies text into the stream's prefix store. NULL on -ENOMEM. */
static const char *store_add(ostream *o, const char *text, size_t n)
{
	ostream_store *st = o->store;
	char *p;

	if (st == NULL) {
		st = calloc(1, sizeof(*st));
		if (st == NULL)
			return NULL;
		o->store = st;
	}
	if (st->chunk == NULL || st->cap - st->used < n) {
		size_t cap = n > OSTREAM_CHUNK ? n : OSTREAM_CHUNK;
		char *c;

		if (vec_grow(&st->chunks, &st->chunks_cap, st->nchunks + 1, sizeof(*st->chunks),
			     16) < 0)
			return NULL;
		c = malloc(cap);
		if (c == NULL)
			return NULL;
		st->chunks[st->nchunks++] = c;
		st->chunk = c;
		st->used = 0;
		st->cap = cap;
	}
	p = st->chunk + st->used;
	memcpy(p, text, n);
	st->used += n;
	return p;
}

uint32_t ostream_prefix(ostream *o, const char *text, size_t n)
{
	const char *p;

	if (n > OSTREAM_PREFIX_MAX || o->nptexts >= OSTREAM_NO_PREFIX - 1)
		return OSTREAM_NO_PREFIX;
	if (vec_grow(&o->ptexts, &o->ptexts_cap, o->nptexts + 1, sizeof(*o->ptexts), 64) < 0)
		return OSTREAM_NO_PREFIX;
	p = store_add(o, text, n);
	if (p == NULL)
		return OSTREAM_NO_PREFIX;
	o->ptexts[o->nptexts].p = p;
	o->ptexts[o->nptexts].n = (uint32_t)n;
	o->prefix_bytes += n;
	return (uint32_t)o->nptexts++;
}

/* The chunks go on living until the blocks that may point into them (up to
 * the one being filled) are released. */
void ostream_prefix_reset(ostream *o)
{
	ostream_store *st = o->store;

	o->nptexts = 0;
	o->prefix_bytes = 0;
	if (st == NULL)
		return;
	if (o->pipe != NULL) {
		uint64_t seq = o->pipe->next_seq;

		/* Without room to note them, they stay until the end. */
		if (vec_grow(&st->retired, &st->retired_cap, st->nretired + st->nchunks,
			     sizeof(*st->retired), 16) < 0)
			return;
		for (size_t i = 0; i < st->nchunks; i++) {
			st->retired[st->nretired].chunk = st->chunks[i];
			st->retired[st->nretired].seq = seq;
			st->nretired++;
		}
	} else {
		/* A memory stream expanded its slices at once. */
		for (size_t i = 0; i < st->nchunks; i++)
			free(st->chunks[i]);
	}
	st->nchunks = 0;
	st->chunk = NULL;
	st->used = st->cap = 0;
}

void ostream_x_slow(ostream *o, uint32_t prefix, int64_t ts_ns, int64_t dur_ns)
{
	const ostream_ptext *t = &o->ptexts[prefix];
	ostream_xrec r = {.prefix = t->p, .plen = t->n, .ts_ns = ts_ns, .dur_ns = dur_ns};
	size_t need = t->n + OSTREAM_X_TAIL;

	if (o->pipe == NULL || o->err != 0) {
		/* A memory stream, or one that drops what it is given:
		 * expanded now, as text. */
		while (o->cap - o->len < need)
			if (ostream_drain(o) < 0 && o->cap - o->len < need)
				return;
		o->len += ostream_x_expand(o->buf + o->len, &r);
		return;
	}
	ostream_drain(o);
	ostream_x(o, prefix, ts_ns, dur_ns);
}

/* Two ASCII digits for each value 0..99: halves the divisions. */
static const char digits2[201] = "00010203040506070809"
				 "10111213141516171819"
				 "20212223242526272829"
				 "30313233343536373839"
				 "40414243444546474849"
				 "50515253545556575859"
				 "60616263646566676869"
				 "70717273747576777879"
				 "80818283848586878889"
				 "90919293949596979899";

/* Exactly 8 digits of v < 10^8, leading zeros included. */
static inline void put8(char *p, uint32_t v)
{
	uint32_t hi = v / 10000, lo = v - hi * 10000;

	memcpy(p, digits2 + 2 * (hi / 100), 2);
	memcpy(p + 2, digits2 + 2 * (hi % 100), 2);
	memcpy(p + 4, digits2 + 2 * (lo / 100), 2);
	memcpy(p + 6, digits2 + 2 * (lo % 100), 2);
}

/* v < 10^8 without leading zeros: 32-bit arithmetic only. */
static inline size_t put_small(char *out, uint32_t v)
{
	size_t n = v < 10000 ? (v < 100 ? (v < 10 ? 1 : 2) : (v < 1000 ? 3 : 4))
			     : (v < 1000000 ? (v < 100000 ? 5 : 6) : (v < 10000000 ? 7 : 8));
	char *p = out + n;

	while (v >= 100) {
		uint32_t r = v % 100;

		v /= 100;
		p -= 2;
		memcpy(p, digits2 + 2 * r, 2);
	}
	if (v >= 10) {
		p -= 2;
		memcpy(p, digits2 + 2 * v, 2);
	} else {
		*--p = (char)('0' + v);
	}
	return n;
}

/* In pieces of 8 digits, so that the divisions are by constants of 32
 * bits: a trace's times have 11 to 14 digits, its pids 5 to 7. */
size_t ostream_fmt_u64(char *out, uint64_t v)
{
	uint64_t top, rest, mid;
	size_t n;

	if (v < 100000000u)
		return put_small(out, (uint32_t)v);
	if (v < 10000000000000000ull) {
		top = v / 100000000u;
		n = put_small(out, (uint32_t)top);
		put8(out + n, (uint32_t)(v - top * 100000000u));
		return n + 8;
	}
	top = v / 10000000000000000ull;
	rest = v - top * 10000000000000000ull;
	mid = rest / 100000000u;
	n = put_small(out, (uint32_t)top);
	put8(out + n, (uint32_t)mid);
	put8(out + n + 8, (uint32_t)(rest - mid * 100000000u));
	return n + 16;
}

/* The magnitude of v as unsigned, correct for INT64_MIN too. */
static uint64_t magnitude(int64_t v)
{
	return v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
}

size_t ostream_fmt_i64(char *out, int64_t v)
{
	if (v >= 0)
		return ostream_fmt_u64(out, (uint64_t)v);
	out[0] = '-';
	return 1 + ostream_fmt_u64(out + 1, magnitude(v));
}

size_t ostream_fmt_ts(char *out, int64_t ns)
{
	uint64_t m = magnitude(ns);
	unsigned frac = (unsigned)(m % 1000);
	size_t n = 0;

	if (ns < 0)
		out[n++] = '-';
	n += ostream_fmt_u64(out + n, m / 1000);
	out[n++] = '.';
	out[n++] = (char)('0' + frac / 100);
	memcpy(out + n, digits2 + 2 * (frac % 100), 2);
	return n + 2;
}

/* Makes room for OSTREAM_NUM_MAX bytes and returns where they go. */
static char *num_room(ostream *o)
{
	if (o->cap - o->len < OSTREAM_NUM_MAX)
		ostream_drain(o);
	return o->buf + o->len;
}

void ostream_u64(ostream *o, uint64_t v)
{
	o->len += ostream_fmt_u64(num_room(o), v);
}

void ostream_i64(ostream *o, int64_t v)
{
	o->len += ostream_fmt_i64(num_room(o), v);
}

void ostream_ts(ostream *o, int64_t ns)
{
	o->len += ostream_fmt_ts(num_room(o), ns);
}

/*
 * What to do with each byte inside a JSON string: 0 copy as is, 1 a
 * control character or '"' or '\\' to escape, 2 a byte >= 0x80 that starts
 * (or pretends to start) a multi-byte UTF-8 sequence.
 */
static const unsigned char byte_class[256] = {
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x00 */
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x10 */
	0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x20 '"' */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x30 */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x40 */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, /* 0x50 '\\' */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x60 */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x70 */
	2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0x80 */
	2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0x90 */
	2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xa0 */
	2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xb0 */
	2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xc0 */
	2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xd0 */
	2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xe0 */
	2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xf0 */
};

size_t ostream_utf8_len(const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	unsigned char c = s[0];
	unsigned char lo = 0x80, hi = 0xbf;
	size_t len, i;

	/* Unicode's table of well-formed sequences: no overlong forms, no
	 * surrogates, nothing above U+10FFFF. */
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
	} else {
		return 0;
	}
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

bool ostream_json_needs_escape(unsigned char c)
{
	return byte_class[c] == 1;
}

size_t ostream_json_escape_ascii(char *out, unsigned char c)
{
	static const char hex[] = "0123456789abcdef";
	char short_form = 0;

	switch (c) {
	case '"':
		short_form = '"';
		break;
	case '\\':
		short_form = '\\';
		break;
	case '\b':
		short_form = 'b';
		break;
	case '\f':
		short_form = 'f';
		break;
	case '\n':
		short_form = 'n';
		break;
	case '\r':
		short_form = 'r';
		break;
	case '\t':
		short_form = 't';
		break;
	default:
		break;
	}
	out[0] = '\\';
	if (short_form != 0) {
		out[1] = short_form;
		return 2;
	}
	memcpy(out + 1, "u00", 3);
	out[4] = hex[c >> 4];
	out[5] = hex[c & 15];
	return 6;
}

void ostream_json_str(ostream *o, const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0, run = 0;

	ostream_putc(o, '"');
	/* Copy runs of plain bytes in one go; stop only at bytes that need
	 * a decision. */
	while (i < n) {
		size_t len;

		if (byte_class[s[i]] == 0) {
			i++;
			continue;
		}
		ostream_write(o, s + run, i - run);
		if (byte_class[s[i]] == 1) {
			char e[6];

			ostream_write(o, e, ostream_json_escape_ascii(e, s[i]));
			run = ++i;
			continue;
		}
		len = ostream_utf8_len(str + i, n - i);
		if (len == 0) {
			ostream_write(o, "\\ufffd", 6);
			run = ++i;
			continue;
		}
		/* Valid sequence: becomes part of the next run. */
		run = i;
		i += len;
	}
	ostream_write(o, s + run, i - run);
	ostream_putc(o, '"');
}

void ostream_json_cstr(ostream *o, const char *s)
{
	if (s == NULL) {
		ostream_write(o, "null", 4);
		return;
	}
	ostream_json_str(o, s, strlen(s));
}

/*
 * A JSON string literal that is safe inside a <script> element: besides
 * JSON's own escapes, '<', '>' and '&' become \u003c, \u003e, \u0026 (no
 * "</script>" or "<!--" can appear), U+2028/U+2029 become escapes, and
 * malformed UTF-8 becomes \ufffd.
 */
void ostream_json_str_script(ostream *os, const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;

	ostream_putc(os, '"');
	while (i < n) {
		unsigned char c = s[i];

		if (c < 0x80) {
			if (ostream_json_needs_escape(c)) {
				char e[6];

				ostream_write(os, e, ostream_json_escape_ascii(e, c));
			} else if (c == '<' || c == '>' || c == '&') {
				static const char hex[] = "0123456789abcdef";
				char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};

				ostream_write(os, e, 6);
			} else {
				ostream_putc(os, (char)c);
			}
			i++;
			continue;
		}
		size_t len = ostream_utf8_len(str + i, n - i);

		if (len == 0) {
			ostream_write(os, "\\ufffd", 6);
			i++;
		} else if (len == 3 && c == 0xe2 && s[i + 1] == 0x80 && (s[i + 2] & 0xfe) == 0xa8) {
			ostream_write(os, s[i + 2] == 0xa8 ? "\\u2028" : "\\u2029", 6);
			i += 3;
		} else {
			ostream_write(os, str + i, len);
			i += len;
		}
	}
	ostream_putc(os, '"');
}
