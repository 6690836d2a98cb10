/*
 * A DEFLATE encoder (RFC 1951) for trace JSON: lines that repeat most of
 * an earlier line and differ in a few digits (internal.h).
 *
 * The match finder looks a position up in two hash tables: a long key (12
 * bytes), whose candidate usually runs on to the end of what two lines
 * share, tried before a short one (5 bytes; with effort 1 its last
 * CHAIN_DEPTH positions along a chain). Every position looked at goes
 * into both; inside a long match only the positions where a JSON value
 * ends (a quote, comma, colon, point, brace or bracket after something
 * else: where the last difference between lines has ended and a later
 * line's match starts) go into the long one, found 16 bytes at a time, so
 * a long match costs a few word compares, not a step per byte. A run of
 * misses makes the steps longer (random bytes go by quickly). With effort
 * 1 each match is weighed against the one at the next position (a digit's
 * match from a far line against the previous line's from the punctuation
 * after it) by its rough saving in bits, and the inside of a short match
 * is inserted whole, as zlib does everywhere (text less regular than a
 * trace's lines).
 *
 * The parse of up to BLOCK_SEQS matches is one DEFLATE block: dynamic
 * Huffman codes (length-limited to 15 bits, the code-length code with its
 * run lengths), or the fixed codes, or stored, whichever is smallest, its
 * size computed exactly before a bit is written, so out's cap is checked
 * once per block.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* DEFLATE's window, shortest and longest match. */
#define WSIZE 32768u
#define MIN_MATCH 4u
#define MAX_MATCH 258u

#define SHORT_BITS 16
/* Positions of one short key tried with effort 1. */
#define CHAIN_DEPTH 8
#define LONG_BITS 15

/* Matches per DEFLATE block: larger blocks pay their code tables less
 * often, smaller ones follow the text's changes. */
#define BLOCK_SEQS 32768u

/* The window is parsed in pieces of at most this many bytes (positions
 * stay 32-bit). */
#define PIECE (64u << 20)

/* Bytes readable past the end of the window: the hash keys and word
 * compares near the end read them (zeros; they never become part of a
 * match, which stops at the end). */
#define PAD 32u

/* Positions are stored in the tables as epoch + position: an entry of an
 * earlier call is below epoch and is never a candidate, so no call sees
 * what another left (the output depends on the input alone). */
#define EPOCH_MAX (1u << 30)

#define LITLEN_SYMS 288
#define DIST_SYMS 32
#define CL_SYMS 19
#define MAX_BITS 15
#define CL_MAX_BITS 7

struct seq {
	uint32_t lits; /* literals before the match */
	uint16_t len;  /* 0: no match (the block's last literals) */
	uint16_t dist;
};

struct huff {
	uint16_t code[LITLEN_SYMS]; /* bit-reversed canonical codes */
	uint8_t len[LITLEN_SYMS];
};

struct bitw {
	uint64_t bits;
	unsigned n;
	unsigned char *p, *end;
};

struct defl {
	int effort;
	uint32_t epoch;
	uint32_t *tshort, *tlong;
	uint32_t chain[WSIZE]; /* the short key's previous position of each */
	unsigned depth;        /* how many of the short key's positions to try */
	unsigned char *win;
	size_t win_cap;
	struct seq *seqs;
	uint32_t litlen_freq[LITLEN_SYMS];
	uint32_t dist_freq[DIST_SYMS];
	uint8_t len_sym[MAX_MATCH + 1]; /* length -> its code - 257 */
	uint8_t dist_sym[512];          /* see dist_symbol */
	struct huff fixed_ll, fixed_d;
};

static const uint16_t len_base[29] = {3,  4,  5,  6,   7,   8,   9,   10,  11, 13,
				      15, 17, 19, 23,  27,  31,  35,  43,  51, 59,
				      67, 83, 99, 115, 131, 163, 195, 227, 258};
static const uint8_t len_xbits[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
				      2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const uint16_t dist_base[30] = {
	1,   2,   3,   4,   5,   7,    9,    13,   17,   25,   33,   49,   65,    97,    129,
	193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
static const uint8_t dist_xbits[30] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
				       6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
/* The order the code-length code's lengths are sent in. */
static const uint8_t cl_order[CL_SYMS] = {16, 17, 18, 0, 8,  7, 9,  6, 10, 5,
					  11, 4,  12, 3, 13, 2, 14, 1, 15};

static inline uint64_t load64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static inline uint32_t load32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static inline uint32_t hash_short(uint64_t v)
{
	return (uint32_t)(((v << 24) * 0x9E3779B185EBCA87ull) >> (64 - SHORT_BITS));
}

static inline uint32_t hash_long(uint64_t v, uint32_t w)
{
	return (uint32_t)(((v * 0x9E3779B185EBCA87ull) ^ (w * 0xC2B2AE3D27D4EB4Full)) >>
			  (64 - LONG_BITS));
}

static unsigned reverse_bits(unsigned code, unsigned n)
{
	unsigned r = 0;

	for (unsigned i = 0; i < n; i++, code >>= 1)
		r = (r << 1) | (code & 1);
	return r;
}

/* Canonical codes (RFC 1951 3.2.2) of the lengths h->len[0..n), bit-
 * reversed: DEFLATE sends a code's first bit first. */
static void huff_codes(struct huff *h, unsigned n)
{
	unsigned count[MAX_BITS + 1] = {0}, next[MAX_BITS + 1];
	unsigned code = 0;

	for (unsigned i = 0; i < n; i++)
		count[h->len[i]]++;
	count[0] = 0;
	for (unsigned b = 1; b <= MAX_BITS; b++) {
		code = (code + count[b - 1]) << 1;
		next[b] = code;
	}
	for (unsigned i = 0; i < n; i++)
		h->code[i] = h->len[i] ? (uint16_t)reverse_bits(next[h->len[i]]++, h->len[i]) : 0;
}

struct symfreq {
	uint32_t freq;
	uint32_t sym;
};

static int symfreq_cmp(const void *a, const void *b)
{
	const struct symfreq *x = a, *y = b;

	if (x->freq != y->freq)
		return x->freq < y->freq ? -1 : 1;
	return x->sym < y->sym ? -1 : x->sym > y->sym;
}

/*
 * Code lengths of at most maxbits for freq[0..n) into len[0..n): the
 * minimum-redundancy lengths computed in place over the symbols sorted by
 * frequency (Moffat and Katajainen), then made to fit maxbits by moving
 * leaves up while Kraft's sum allows (miniz's way). A used symbol gets
 * a length >= 1; the caller sees to it that at least two are used.
 */
static void huff_lengths(const uint32_t *freq, unsigned n, unsigned maxbits, uint8_t *len)
{
	struct symfreq a[LITLEN_SYMS];
	unsigned count[LITLEN_SYMS + 1] = {0};
	unsigned used = 0;
	int root, leaf, next, avail, nused, depth;
	uint32_t total;

	memset(len, 0, n);
	for (unsigned i = 0; i < n; i++)
		if (freq[i]) {
			a[used].freq = freq[i];
			a[used].sym = i;
			used++;
		}
	if (used == 0)
		return;
	if (used == 1) {
		len[a[0].sym] = 1;
		return;
	}
	qsort(a, used, sizeof(a[0]), symfreq_cmp);

	/* The in-place algorithm: a[].freq becomes parent pointers, then
	 * depths, then the length of each leaf. */
	a[0].freq += a[1].freq;
	root = 0;
	leaf = 2;
	for (next = 1; next < (int)used - 1; next++) {
		if (leaf >= (int)used || a[root].freq < a[leaf].freq) {
			a[next].freq = a[root].freq;
			a[root++].freq = (uint32_t)next;
		} else {
			a[next].freq = a[leaf++].freq;
		}
		if (leaf >= (int)used || (root < next && a[root].freq < a[leaf].freq)) {
			a[next].freq += a[root].freq;
			a[root++].freq = (uint32_t)next;
		} else {
			a[next].freq += a[leaf++].freq;
		}
	}
	a[used - 2].freq = 0;
	for (next = (int)used - 3; next >= 0; next--)
		a[next].freq = a[a[next].freq].freq + 1;
	avail = 1;
	nused = depth = 0;
	root = (int)used - 2;
	next = (int)used - 1;
	while (avail > 0) {
		while (root >= 0 && (int)a[root].freq == depth) {
			nused++;
			root--;
		}
		while (avail > nused) {
			a[next--].freq = (uint32_t)depth;
			avail--;
		}
		avail = 2 * nused;
		depth++;
		nused = 0;
	}

	/* Lengths past maxbits: moved up to maxbits, then leaves taken from
	 * maxbits and pushed down from shorter lengths until the code is
	 * complete again. */
	for (unsigned i = 0; i < used; i++)
		count[a[i].freq]++;
	for (unsigned b = maxbits + 1; b <= used; b++) {
		count[maxbits] += count[b];
		count[b] = 0;
	}
	total = 0;
	for (unsigned b = maxbits; b > 0; b--)
		total += count[b] << (maxbits - b);
	while (total != (1u << maxbits)) {
		count[maxbits]--;
		for (unsigned b = maxbits - 1; b > 0; b--)
			if (count[b]) {
				count[b]--;
				count[b + 1] += 2;
				break;
			}
		total--;
	}
	/* The shortest lengths to the most frequent symbols (a[] ascends). */
	next = (int)used;
	for (unsigned b = 1; b <= maxbits; b++)
		for (unsigned k = count[b]; k > 0; k--)
			len[a[--next].sym] = (uint8_t)b;
}

static void fixed_codes(struct defl *d)
{
	unsigned i;

	for (i = 0; i < 144; i++)
		d->fixed_ll.len[i] = 8;
	for (; i < 256; i++)
		d->fixed_ll.len[i] = 9;
	for (; i < 280; i++)
		d->fixed_ll.len[i] = 7;
	for (; i < LITLEN_SYMS; i++)
		d->fixed_ll.len[i] = 8;
	huff_codes(&d->fixed_ll, LITLEN_SYMS);
	for (i = 0; i < DIST_SYMS; i++)
		d->fixed_d.len[i] = 5;
	huff_codes(&d->fixed_d, DIST_SYMS);
}

defl *defl_new(int effort)
{
	defl *d = calloc(1, sizeof(*d));

	if (d == NULL)
		goto fail_alloc;
	d->effort = effort;
	d->depth = effort > 0 ? CHAIN_DEPTH : 1;
	d->tshort = calloc(1u << SHORT_BITS, sizeof(uint32_t));
	if (d->tshort == NULL)
		goto fail_short;
	d->tlong = calloc(1u << LONG_BITS, sizeof(uint32_t));
	if (d->tlong == NULL)
		goto fail_long;
	d->seqs = malloc(BLOCK_SEQS * sizeof(struct seq));
	if (d->seqs == NULL)
		goto fail_seqs;
	d->epoch = 1;
	for (unsigned c = 0; c < 29; c++) {
		unsigned last = c < 28 ? len_base[c + 1] - 1u : MAX_MATCH;

		for (unsigned l = len_base[c]; l <= last && l <= MAX_MATCH; l++)
			d->len_sym[l] = (uint8_t)c;
	}
	d->len_sym[MAX_MATCH] = 28;
	for (unsigned c = 0; c < 30; c++) {
		unsigned last = c < 29 ? dist_base[c + 1] - 1u : WSIZE;

		for (unsigned dist = dist_base[c]; dist <= last; dist++) {
			if (dist <= 256)
				d->dist_sym[dist - 1] = (uint8_t)c;
			else
				d->dist_sym[256 + ((dist - 1) >> 7)] = (uint8_t)c;
		}
	}
	fixed_codes(d);
	return d;

fail_seqs:
	free(d->tlong);
fail_long:
	free(d->tshort);
fail_short:
	free(d);
fail_alloc:
	return NULL;
}

void defl_free(defl *d)
{
	if (d == NULL)
		return;
	free(d->win);
	free(d->seqs);
	free(d->tlong);
	free(d->tshort);
	free(d);
}

size_t defl_bound(size_t n)
{
	/* Every block stored: 5 bytes per 65535 and per block (a block holds
	 * at least BLOCK_SEQS matches or ends a piece), the final alignment,
	 * the empty stored block of a sync flush, the bit writer's slack. */
	return n + 5 * (n / 65535) + 6 * (n / (BLOCK_SEQS * MIN_MATCH) + n / PIECE + 2) + 64;
}

static inline unsigned dist_symbol(const struct defl *d, unsigned dist)
{
	return dist <= 256 ? d->dist_sym[dist - 1] : d->dist_sym[256 + ((dist - 1) >> 7)];
}

/* The bit writer: bits go in from the low end; flush stores 8 bytes and
 * keeps the odd bits, so up to 56 bits fit between flushes. Its callers
 * have checked that 8 bytes past what they write are within the cap. */
static inline void bw_put(struct bitw *w, uint64_t v, unsigned n)
{
	w->bits |= v << w->n;
	w->n += n;
}

static inline void bw_flush(struct bitw *w)
{
	memcpy(w->p, &w->bits, 8);
	w->p += w->n >> 3;
	w->bits >>= w->n & ~7u;
	w->n &= 7;
}

/* Bytes the writer holds and what its next n bits need, with the slack
 * of its 8-byte stores. */
static inline bool bw_room(const struct bitw *w, uint64_t nbits)
{
	return (uint64_t)(w->end - w->p) >= (w->n + nbits + 7) / 8 + 8;
}

/* Pads to a byte boundary and writes the held bytes out (room checked). */
static void bw_align(struct bitw *w)
{
	bw_flush(w);
	if (w->n > 0) {
		*w->p++ = (unsigned char)w->bits;
		w->bits = 0;
		w->n = 0;
	}
}

/* The code-length code's run-length encoding of lens[0..n) into syms
 * (symbol | extra << 5); returns how many. */
static unsigned rle_lengths(const uint8_t *lens, unsigned n, uint16_t *syms)
{
	unsigned k = 0;

	for (unsigned i = 0; i < n;) {
		unsigned l = lens[i], run = 1, left;

		while (i + run < n && lens[i + run] == l)
			run++;
		i += run;
		left = run;
		if (l == 0) {
			while (left >= 11) {
				unsigned r = left < 138 ? left : 138;

				syms[k++] = (uint16_t)(18 | (r - 11) << 5);
				left -= r;
			}
			if (left >= 3) {
				syms[k++] = (uint16_t)(17 | (left - 3) << 5);
				left = 0;
			}
		} else {
			syms[k++] = (uint16_t)l;
			left--;
			while (left >= 3) {
				unsigned r = left < 6 ? left : 6;

				syms[k++] = (uint16_t)(16 | (r - 3) << 5);
				left -= r;
			}
		}
		while (left-- > 0)
			syms[k++] = (uint16_t)l;
	}
	return k;
}

/* Bits the block's symbols take with codes ll, dist (extra bits too). */
static uint64_t symbol_bits(const struct defl *d, const uint8_t *ll_len, const uint8_t *d_len)
{
	uint64_t bits = 0;

	for (unsigned s = 0; s < 286; s++)
		bits += (uint64_t)d->litlen_freq[s] *
			(ll_len[s] + (s > 256 ? len_xbits[s - 257] : 0));
	for (unsigned s = 0; s < 30; s++)
		bits += (uint64_t)d->dist_freq[s] * (d_len[s] + dist_xbits[s]);
	return bits;
}

static void write_symbols(struct defl *d, struct bitw *w, const unsigned char *lit,
			  const struct seq *seqs, unsigned nseq, const struct huff *ll,
			  const struct huff *dh)
{
	for (unsigned i = 0; i < nseq; i++) {
		const struct seq *s = &seqs[i];
		uint32_t k = 0;

		for (; k + 2 <= s->lits; k += 2) {
			bw_put(w, ll->code[lit[k]], ll->len[lit[k]]);
			bw_put(w, ll->code[lit[k + 1]], ll->len[lit[k + 1]]);
			bw_flush(w);
		}
		if (k < s->lits) {
			bw_put(w, ll->code[lit[k]], ll->len[lit[k]]);
			bw_flush(w);
		}
		lit += s->lits;
		if (s->len) {
			unsigned ls = d->len_sym[s->len], ds = dist_symbol(d, s->dist);

			bw_put(w, ll->code[257 + ls], ll->len[257 + ls]);
			bw_put(w, s->len - len_base[ls], len_xbits[ls]);
			bw_put(w, dh->code[ds], dh->len[ds]);
			bw_put(w, s->dist - dist_base[ds], dist_xbits[ds]);
			bw_flush(w);
			lit += s->len;
		}
	}
	bw_put(w, ll->code[256], ll->len[256]);
	bw_flush(w);
}

/* Stored blocks of src[0..n) (65535 bytes at most each). */
static int write_stored(struct bitw *w, const unsigned char *src, size_t n, bool final)
{
	do {
		size_t take = n < 65535 ? n : 65535;

		if (!bw_room(w, 3 + 7 + 32 + 8 * (uint64_t)take))
			return -ENOBUFS;
		bw_put(w, final && take == n ? 1 : 0, 3);
		bw_align(w);
		w->p[0] = (unsigned char)take;
		w->p[1] = (unsigned char)(take >> 8);
		w->p[2] = (unsigned char)~take;
		w->p[3] = (unsigned char)(~take >> 8);
		memcpy(w->p + 4, src, take);
		w->p += 4 + take;
		src += take;
		n -= take;
	} while (n > 0);
	return 0;
}

/* Two codes at least in a tree: a code of one symbol is incomplete, which
 * inflate refuses for the code-length code (and others may for any). */
static void ensure_two(uint32_t *freq, unsigned n)
{
	unsigned used = 0;

	for (unsigned s = 0; s < n; s++)
		used += freq[s] != 0;
	for (unsigned s = 0; used < 2; s++)
		if (freq[s] == 0) {
			freq[s] = 1;
			used++;
		}
}

/*
 * Writes the block of seqs[0..nseq) over src[0..n) (its bytes, where its
 * literals are) as the smallest of dynamic, fixed and stored, and clears
 * the frequencies for the next block.
 */
static int write_block(struct defl *d, struct bitw *w, const unsigned char *src, size_t n,
		       unsigned nseq, bool final)
{
	struct huff ll, dh, cl;
	uint32_t cl_freq[CL_SYMS] = {0};
	uint16_t rle[LITLEN_SYMS + DIST_SYMS];
	uint8_t lens[LITLEN_SYMS + DIST_SYMS];
	unsigned hlit = 286, hdist = 30, hclen = CL_SYMS, nrle;
	uint64_t dyn_bits, fixed_bits, stored_bits;
	int ret = 0;

	d->litlen_freq[256] = 1;
	ensure_two(d->litlen_freq, 286);
	ensure_two(d->dist_freq, 30);
	huff_lengths(d->litlen_freq, 286, MAX_BITS, ll.len);
	huff_lengths(d->dist_freq, 30, MAX_BITS, dh.len);
	while (hlit > 257 && ll.len[hlit - 1] == 0)
		hlit--;
	while (hdist > 1 && dh.len[hdist - 1] == 0)
		hdist--;
	memcpy(lens, ll.len, hlit);
	memcpy(lens + hlit, dh.len, hdist);
	nrle = rle_lengths(lens, hlit + hdist, rle);
	for (unsigned i = 0; i < nrle; i++)
		cl_freq[rle[i] & 31]++;
	/* inflate refuses an incomplete code-length code: two codes at
	 * least (lengths of one value repeated need only one). */
	ensure_two(cl_freq, CL_SYMS);
	huff_lengths(cl_freq, CL_SYMS, CL_MAX_BITS, cl.len);
	while (hclen > 4 && cl.len[cl_order[hclen - 1]] == 0)
		hclen--;
	dyn_bits = 3 + 5 + 5 + 4 + 3 * hclen;
	for (unsigned i = 0; i < nrle; i++) {
		unsigned s = rle[i] & 31;

		dyn_bits += cl.len[s] + (s == 16 ? 2 : s == 17 ? 3 : s == 18 ? 7 : 0);
	}
	dyn_bits += symbol_bits(d, ll.len, dh.len);
	fixed_bits = 3 + symbol_bits(d, d->fixed_ll.len, d->fixed_d.len);
	stored_bits = (n / 65535 + 1) * (3 + 7 + 32) + 8 * (uint64_t)n;

	if (stored_bits <= dyn_bits && stored_bits <= fixed_bits) {
		ret = write_stored(w, src, n, final);
	} else if (fixed_bits <= dyn_bits) {
		if (!bw_room(w, fixed_bits))
			ret = -ENOBUFS;
		else {
			bw_put(w, final ? 3 : 2, 3);
			write_symbols(d, w, src, d->seqs, nseq, &d->fixed_ll, &d->fixed_d);
		}
	} else if (!bw_room(w, dyn_bits)) {
		ret = -ENOBUFS;
	} else {
		huff_codes(&ll, hlit);
		huff_codes(&dh, hdist);
		huff_codes(&cl, CL_SYMS);
		bw_put(w, final ? 5 : 4, 3);
		bw_put(w, hlit - 257, 5);
		bw_put(w, hdist - 1, 5);
		bw_put(w, hclen - 4, 4);
		bw_flush(w);
		for (unsigned i = 0; i < hclen; i++) {
			bw_put(w, cl.len[cl_order[i]], 3);
			bw_flush(w);
		}
		for (unsigned i = 0; i < nrle; i++) {
			unsigned s = rle[i] & 31, x = rle[i] >> 5;

			bw_put(w, cl.code[s], cl.len[s]);
			bw_put(w, x, s == 16 ? 2 : s == 17 ? 3 : s == 18 ? 7 : 0);
			bw_flush(w);
		}
		write_symbols(d, w, src, d->seqs, nseq, &ll, &dh);
	}
	memset(d->litlen_freq, 0, sizeof(d->litlen_freq));
	memset(d->dist_freq, 0, sizeof(d->dist_freq));
	return ret;
}

/* How many bytes from a and b agree, at most max (both may be read up to
 * 8 bytes past max: the window's padding). */
static inline uint32_t match_len(const unsigned char *a, const unsigned char *b, uint32_t max)
{
	uint32_t n = 0;

	while (n < max) {
		uint64_t x = load64(a + n) ^ load64(b + n);

		if (x) {
			n += (uint32_t)__builtin_ctzll(x) >> 3;
			return n < max ? n : max;
		}
		n += 8;
	}
	return max;
}

static inline void insert_long(struct defl *d, const unsigned char *w, uint32_t p)
{
	d->tlong[hash_long(load64(w + p), load32(w + p + 8))] = d->epoch + p;
}

/* The bytes that end a JSON value or follow one: the closing quote of a
 * string, the comma, colon, brace or bracket after a value, the decimal
 * point inside a number. */
static inline bool ends_value(unsigned char c)
{
	return c == '"' || c == ',' || c == ':' || c == '.' || c == '}' || c == ']';
}

/* Bit i of the result: ends_value(p[i]), for p[0..16). */
static inline uint32_t ends_value_mask16(const unsigned char *p);

#if defined(__SSE2__)
#include <emmintrin.h>

static inline uint32_t ends_value_mask16(const unsigned char *p)
{
	__m128i v = _mm_loadu_si128((const __m128i *)p);
	__m128i m = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
				 _mm_cmpeq_epi8(v, _mm_set1_epi8(',')));

	m = _mm_or_si128(m, _mm_cmpeq_epi8(v, _mm_set1_epi8(':')));
	m = _mm_or_si128(m, _mm_cmpeq_epi8(v, _mm_set1_epi8('.')));
	m = _mm_or_si128(m, _mm_cmpeq_epi8(v, _mm_set1_epi8('}')));
	m = _mm_or_si128(m, _mm_cmpeq_epi8(v, _mm_set1_epi8(']')));
	return (uint32_t)_mm_movemask_epi8(m);
}
#else
static inline uint32_t ends_value_mask16(const unsigned char *p)
{
	uint32_t m = 0;

	for (unsigned i = 0; i < 16; i++)
		m |= (uint32_t)ends_value(p[i]) << i;
	return m;
}
#endif

/* Inserts the positions of w[from..to) (from >= 1) where a value ends
 * right after something that is not punctuation (the end of a string or
 * a number: where the next difference between lines has ended and the
 * matches of later lines start), 16 bytes at a time. */
static inline void insert_anchors(struct defl *d, const unsigned char *w, uint32_t from,
				  uint32_t to)
{
	uint32_t prev = ends_value(w[from - 1]);

	for (uint32_t q = from; q < to; q += 16) {
		uint32_t m = ends_value_mask16(w + q), a = m & ~(m << 1 | prev);

		prev = m >> 15;
		if (to - q < 16)
			a &= (1u << (to - q)) - 1;
		while (a) {
			insert_long(d, w, q + (uint32_t)__builtin_ctz(a));
			a &= a - 1;
		}
	}
}

/* The best match for position p of w (up to end) among the candidates of
 * the two tables (the long key's, then the short key's latest positions,
 * d->depth of them, along their chain), which then hold p; 0 when none is
 * MIN_MATCH long. */
static inline uint32_t find_match(struct defl *d, const unsigned char *w, uint32_t p, uint32_t end,
				  uint32_t *dist)
{
	uint64_t v = load64(w + p);
	uint32_t hl = hash_long(v, load32(w + p + 8)), hs = hash_short(v);
	uint32_t cl = d->tlong[hl] - d->epoch, c = d->tshort[hs] - d->epoch;
	uint32_t max = end - p < MAX_MATCH ? end - p : MAX_MATCH, len = 0;

	d->tlong[hl] = d->epoch + p;
	d->chain[p & (WSIZE - 1)] = d->tshort[hs];
	d->tshort[hs] = d->epoch + p;
	if (cl < p && p - cl <= WSIZE && load64(w + cl) == v) {
		len = match_len(w + cl, w + p, max);
		*dist = p - cl;
		if (len >= 32)
			return len;
	}
	for (unsigned k = 0; k < d->depth && c < p && p - c <= WSIZE; k++) {
		if (c != cl && load32(w + c) == (uint32_t)v) {
			uint32_t l = match_len(w + c, w + p, max);

			if (l > len) {
				len = l;
				*dist = p - c;
				if (len >= 32)
					break;
			}
		}
		c = d->chain[c & (WSIZE - 1)] - d->epoch;
	}
	return len >= MIN_MATCH ? len : 0;
}

/* Inserts every position of w[from..to) into the short key's chain and
 * the long table: inside a short match, as zlib does everywhere, where the
 * text is not as regular as a trace's lines. */
#define SHORT_INSERT_MAX 24
static inline void insert_all(struct defl *d, const unsigned char *w, uint32_t from, uint32_t to)
{
	for (uint32_t q = from; q < to; q++) {
		uint64_t v = load64(w + q);
		uint32_t hs = hash_short(v);

		d->tlong[hash_long(v, load32(w + q + 8))] = d->epoch + q;
		d->chain[q & (WSIZE - 1)] = d->tshort[hs];
		d->tshort[hs] = d->epoch + q;
	}
}

/* What a match saves, roughly, in bits: a literal of trace JSON takes
 * about 4, a match about 6 and its distance's extra bits. */
#define LIT_SCORE 4
#define LAZY_MAX 259
static inline int score(uint32_t len, uint32_t dist)
{
	return LIT_SCORE * (int)len - 6 - (32 - __builtin_clz(dist));
}

/*
 * Parses w[start..end) (w[0..start) its dictionary) into blocks written to
 * bw; the last is final when final.
 */
static int parse(struct defl *d, const unsigned char *w, uint32_t start, uint32_t end,
		 struct bitw *bw, bool final)
{
	uint32_t p = start, lit_start = start, block_start = start;
	unsigned nseq = 0;
	int ret;

	if (start > 0)
		insert_anchors(d, w, 1, start);
	while (p + MIN_MATCH <= end) {
		uint32_t dist = 0, len;

		len = find_match(d, w, p, end, &dist);

		if (len == 0) {
			p += 1 + ((p - lit_start) >> 6);
			continue;
		}
		while (d->effort > 0 && len < LAZY_MAX && p + 1 + MIN_MATCH <= end) {
			uint32_t dist2 = 0, len2 = find_match(d, w, p + 1, end, &dist2);

			if (len2 == 0 || score(len2, dist2) <= score(len, dist) + LIT_SCORE)
				break;
			p++;
			len = len2;
			dist = dist2;
		}
		for (uint32_t k = lit_start; k < p; k++)
			d->litlen_freq[w[k]]++;
		d->litlen_freq[257 + d->len_sym[len]]++;
		d->dist_freq[dist_symbol(d, dist)]++;
		d->seqs[nseq].lits = p - lit_start;
		d->seqs[nseq].len = (uint16_t)len;
		d->seqs[nseq].dist = (uint16_t)dist;
		nseq++;
		if (d->effort > 0 && len < SHORT_INSERT_MAX)
			insert_all(d, w, p + 1, p + len);
		else
			insert_anchors(d, w, p + 1, p + len);
		p += len;
		lit_start = p;
		if (nseq == BLOCK_SEQS - 1) {
			ret = write_block(d, bw, w + block_start, p - block_start, nseq, false);
			if (ret < 0)
				return ret;
			nseq = 0;
			block_start = p;
		}
	}
	/* Nothing to say (an empty block that is not the stream's end): no
	 * block at all. */
	if (nseq == 0 && lit_start == end && !final)
		return 0;
	for (uint32_t k = lit_start; k < end; k++)
		d->litlen_freq[w[k]]++;
	d->seqs[nseq].lits = end - lit_start;
	d->seqs[nseq].len = 0;
	d->seqs[nseq].dist = 0;
	nseq++;
	return write_block(d, bw, w + block_start, end - block_start, nseq, final);
}

long defl_compress(defl *d, const unsigned char *dict, size_t dictn, const unsigned char *in,
		   size_t n, bool last, unsigned char *out, size_t cap)
{
	struct bitw bw = {.p = out, .end = out + cap};
	size_t done = 0;
	int ret;

	if (dictn > WSIZE)
		return -EINVAL;
	do {
		size_t piece = n - done < PIECE ? n - done : PIECE;
		size_t need = dictn + piece + PAD;

		if (need > d->win_cap) {
			unsigned char *win = realloc(d->win, need);

			if (win == NULL)
				return -ENOMEM;
			d->win = win;
			d->win_cap = need;
		}
		if (dictn > 0)
			memmove(d->win, done == 0 ? dict : in + done - dictn, dictn);
		if (piece > 0)
			memcpy(d->win + dictn, in + done, piece);
		memset(d->win + dictn + piece, 0, PAD);
		if (d->epoch > EPOCH_MAX) {
			memset(d->tshort, 0, (1u << SHORT_BITS) * sizeof(uint32_t));
			memset(d->tlong, 0, (1u << LONG_BITS) * sizeof(uint32_t));
			d->epoch = 1;
		}
		ret = parse(d, d->win, (uint32_t)dictn, (uint32_t)(dictn + piece), &bw,
			    last && done + piece == n);
		d->epoch += (uint32_t)(dictn + piece + 1);
		if (ret < 0)
			return ret;
		done += piece;
		dictn = done < WSIZE ? done : WSIZE;
	} while (done < n);
	if (!last) {
		/* A sync flush: an empty stored block ends on a byte. */
		if (!bw_room(&bw, 3 + 7 + 32))
			return -ENOBUFS;
		bw_put(&bw, 0, 3);
		bw_align(&bw);
		memcpy(bw.p, "\0\0\xff\xff", 4);
		bw.p += 4;
	} else {
		if (!bw_room(&bw, 7))
			return -ENOBUFS;
		bw_align(&bw);
	}
	return (long)(bw.p - out);
}
