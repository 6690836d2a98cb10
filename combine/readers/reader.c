/*
 * reader.c - Chrome Trace Event JSON in, sink events out (reader.h).
 *
 * The document is walked by a small top-level state machine (object with
 * keys, or bare array); each event and each metadata object is scanned by
 * jsonr_value where it lies in the buffer. When a value runs past the end
 * of the buffer the scan stops with JSONR_MORE, the partial value is moved
 * to the start of the buffer, more is read, and the value is scanned again
 * from its start: with 1 MiB reads and events of a few hundred bytes that
 * re-scan costs nothing measurable, and a value larger than the buffer
 * doubles it (up to READER_MAX_EVENT), so even then the work stays linear.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "forktrace/wire.h"
#include "h5.h"
#include "jsonr.h"
#include "reader.h"
#include "regfile.h"
#include "vec.h"

/* Compressed bytes read at a time. */
#define READER_ZIN (256u * 1024u)
/* Bytes of a scratch buffer when it is first needed. */
#define BUF_FIRST 4096

/* Statuses of parse_value besides JSONR_OK / JSONR_ERR. */
enum { R_TRUNC = 2, R_TOOBIG = 3, R_IOERR = 4 };

typedef struct strpid {
	char *name;
	int64_t out;
} strpid;

/* One replacement in an event's text. */
typedef struct edit {
	const char *at; /* where, in the event text */
	size_t del;     /* bytes replaced */
	char text[40];
	size_t n;
} edit;

typedef struct reader {
	int fd;
	const reader_opts *o;
	trace_sink *sink;
	reader_info *inf;
	int sink_err;

	char *buf; /* cap + JSONR_PAD bytes */
	size_t cap, pos, len, chunk;
	uint64_t base; /* offset of buf[0] in the JSON text */
	bool eof;

	bool gz;
	z_stream z;
	bool zinit, zend;
	unsigned char *zin;
	size_t zin_cap;
	uint64_t zin_base; /* file offset of the compressed input consumed */

	char *scratch; /* rewritten event text */
	size_t scratch_cap;
	char *fix; /* sanitized event text */
	size_t fix_cap;
	char *dedup; /* event text without its duplicate keys */
	size_t dedup_cap;
	char *str; /* unescaped name and cat */
	size_t str_cap;
	char *key; /* unescaped top-level key */
	size_t key_cap;
	char *mkey; /* unescaped member of otherData */
	size_t mkey_cap;
	bool remap_ids; /* o->remap_ids, and there is a sink */

	bool have_last;
	int64_t last_pid, last_out;
	strpid *strpids;
	size_t nstrpids;
} reader;

static void set_error(reader *r, uint64_t off, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set_error(reader *r, uint64_t off, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (r->inf->error[0] != '\0')
		return;
	r->inf->error_offset = off;
	n = snprintf(r->inf->error, sizeof(r->inf->error), "byte %" PRIu64 "%s: ", off,
		     r->gz ? " (uncompressed)" : "");
	if (n < 0 || (size_t)n >= sizeof(r->inf->error))
		return;
	va_start(ap, fmt);
	vsnprintf(r->inf->error + n, sizeof(r->inf->error) - (size_t)n, fmt, ap);
	va_end(ap);
}

static ssize_t read_full(int fd, void *p, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t k = read(fd, (char *)p + got, n - got);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			break;
		got += (size_t)k;
	}
	return (ssize_t)got;
}

/*
 * Moves the unread bytes to the start of the buffer and reads more after
 * them: up to one chunk, as much as fits. Returns 0 (check r->eof), or
 * -1 after recording a read or gzip error.
 */
static int fill(reader *r)
{
	size_t room, want;
	ssize_t k;

	if (r->pos > 0) {
		memmove(r->buf, r->buf + r->pos, r->len - r->pos);
		r->len -= r->pos;
		r->base += r->pos;
		r->pos = 0;
	}
	room = r->cap - r->len;
	want = room < r->chunk ? room : r->chunk;
	if (!r->gz) {
		k = read_full(r->fd, r->buf + r->len, want);
		if (k < 0) {
			set_error(r, r->base + r->len, "read error: %s", strerror((int)-k));
			return -1;
		}
		r->inf->file_bytes += (uint64_t)k;
		if ((size_t)k < want)
			r->eof = true;
		r->len += (size_t)k;
	} else {
		size_t before = r->len;

		r->z.next_out = (unsigned char *)r->buf + r->len;
		r->z.avail_out = (uInt)want;
		while (r->z.avail_out > 0 && !r->eof) {
			int zr;

			if (r->z.avail_in == 0) {
				k = read_full(r->fd, r->zin, r->zin_cap);
				if (k < 0) {
					set_error(r, r->base + r->len, "read error: %s",
						  strerror((int)-k));
					return -1;
				}
				r->inf->file_bytes += (uint64_t)k;
				r->z.next_in = r->zin;
				r->z.avail_in = (uInt)k;
				if (k == 0) {
					if (!r->zend) {
						r->len = want - r->z.avail_out + before;
						set_error(
							r, r->base + r->len,
							"the gzip data ends early (truncated file)");
						r->inf->truncated = true;
					}
					r->eof = true;
					break;
				}
			}
			if (r->zend) {
				/* Another gzip member after the first: legal. */
				if (inflateReset(&r->z) != Z_OK)
					goto zfail;
				r->zend = false;
			}
			zr = inflate(&r->z, Z_NO_FLUSH);
			if (zr == Z_STREAM_END) {
				r->zend = true;
			} else if (zr != Z_OK && zr != Z_BUF_ERROR) {
				r->len = before + (want - r->z.avail_out);
				goto zfail;
			}
		}
		r->len = before + (want - r->z.avail_out);
	}
	memset(r->buf + r->len, 0, JSONR_PAD);
	r->inf->bytes = r->base + r->len;
	if (r->o->progress != NULL)
		r->o->progress(r->o->progress_ctx, r->inf->file_bytes);
	return 0;
zfail:
	memset(r->buf + r->len, 0, JSONR_PAD);
	set_error(r, r->base + r->len, "corrupt gzip data (%s)",
		  r->z.msg != NULL ? r->z.msg : "inflate failed");
	r->eof = true;
	return -1;
}

/* The next byte that is not whitespace, refilling; -1 at the end of the
 * file, -2 after a read error. */
static inline int peek_slow(reader *r)
{
	for (;;) {
		while (r->pos < r->len) {
			unsigned char c = (unsigned char)r->buf[r->pos];

			if (c != ' ' && c != '\n' && c != '\r' && c != '\t')
				return c;
			r->pos++;
		}
		if (r->eof)
			return -1;
		if (fill(r) < 0)
			return -2;
		if (r->pos == r->len && r->eof)
			return -1;
	}
}

/* peek, inline where the next byte is there and not whitespace (between
 * two events: every time but once a read). */
static inline int peek(reader *r)
{
	if (r->pos < r->len && (unsigned char)r->buf[r->pos] > ' ')
		return (unsigned char)r->buf[r->pos];
	return peek_slow(r);
}

/*
 * Scans one complete value at r->pos, reading more as needed. On JSONR_OK
 * the value is buf[pos .. *vend). Other results: JSONR_ERR (o->err_at),
 * R_TRUNC (the file ends inside it), R_TOOBIG, R_IOERR. greedy: the value
 * may be large (a top-level one): each read is at least as large as what
 * is already there, so that its re-scans add up to twice its size at
 * most, whatever the read size (events are small: one read size).
 */
static int parse_value(reader *r, jsonr_obj *o, bool keys, bool greedy, size_t *vend)
{
	for (;;) {
		const char *next;
		int st = jsonr_value(r->buf + r->pos, r->buf + r->len, &next, o, keys);

		if (st == JSONR_OK) {
			*vend = (size_t)(next - r->buf);
			return JSONR_OK;
		}
		if (st == JSONR_ERR)
			return JSONR_ERR;
		if (r->eof)
			return R_TRUNC;
		if (r->len - r->pos >= READER_MAX_EVENT)
			return R_TOOBIG;
		if (r->pos == 0 && r->len == r->cap) {
			size_t ncap = r->cap * 2;
			char *nb;

			if (ncap > READER_MAX_EVENT + r->chunk)
				ncap = READER_MAX_EVENT + r->chunk;
			nb = realloc(r->buf, ncap + JSONR_PAD);
			if (nb == NULL)
				return -ENOMEM;
			r->buf = nb;
			r->cap = ncap;
		}
		if (greedy && r->len - r->pos > r->chunk) {
			size_t chunk = r->chunk;

			r->chunk = r->len - r->pos;
			st = fill(r);
			r->chunk = chunk;
		} else {
			st = fill(r);
		}
		if (st < 0)
			return R_IOERR;
	}
}

/* Skips a value of any size (a top-level key forktrace does not keep). */
static int skip_value(reader *r)
{
	jsonr_skip s = {0};

	for (;;) {
		const char *next;
		int st = jsonr_skip_value(&s, r->buf + r->pos, r->buf + r->len, &next);

		r->pos = (size_t)(next - r->buf);
		if (st == 1)
			return JSONR_OK;
		if (st < 0)
			return JSONR_ERR;
		if (r->eof)
			return R_TRUNC;
		if (fill(r) < 0)
			return R_IOERR;
		if (r->eof && r->pos == r->len) {
			/* A scalar that ends at the end of the file. */
			if (s.scalar && s.depth == 0)
				return JSONR_OK;
			return R_TRUNC;
		}
	}
}

#define FNV_SEED 0xcbf29ce484222325ull

/* FNV-1a of p[0..n) continuing from h (FNV_SEED to start). */
static uint64_t fnv1a_from(uint64_t h, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static uint64_t fnv1a(const char *p, size_t n)
{
	return fnv1a_from(FNV_SEED, p, n);
}

/* The file-local id of a non-numeric pid (its text as given), asking the
 * mapper once per distinct string. */
static int64_t map_strpid(reader *r, strview v, bool *err)
{
	char *name;
	size_t n;
	strpid *ns;
	int64_t local;

	if (v.n >= 2 && v.p[0] == '"') {
		name = malloc(v.n + 1);
		if (name == NULL)
			goto oom;
		n = jsonr_unescape(name, v);
	} else {
		name = malloc(v.n + 1);
		if (name == NULL)
			goto oom;
		memcpy(name, v.p, v.n);
		n = v.n;
	}
	name[n] = '\0';
	for (size_t i = 0; i < r->nstrpids; i++)
		if (!strcmp(r->strpids[i].name, name)) {
			free(name);
			return r->strpids[i].out;
		}
	ns = realloc(r->strpids, (r->nstrpids + 1) * sizeof(*ns));
	if (ns == NULL) {
		free(name);
		goto oom;
	}
	r->strpids = ns;
	local = READER_STRPID_BASE + (int64_t)r->nstrpids;
	ns[r->nstrpids].name = name;
	ns[r->nstrpids].out = r->o->map_pid != NULL ? r->o->map_pid(r->o->map_ctx, local, name)
						    : local;
	return ns[r->nstrpids++].out;
oom:
	*err = true;
	return 0;
}

static int64_t map_pid(reader *r, int64_t pid)
{
	if (r->have_last && pid == r->last_pid)
		return r->last_out;
	r->last_pid = pid;
	r->last_out = r->o->map_pid != NULL ? r->o->map_pid(r->o->map_ctx, pid, NULL) : pid;
	r->have_last = true;
	return r->last_out;
}

static void add_edit(edit *e, size_t *ne, const char *at, size_t del, const char *text, size_t n)
{
	edit *x = &e[(*ne)++];

	x->at = at;
	x->del = del;
	memcpy(x->text, text, n);
	x->n = n;
}

/* A string value's content: a slice of the text, or unescaped into out. */
static inline strview str_of(strview v, bool esc, char **out)
{
	strview s;

	if (v.p == NULL || v.n < 2 || v.p[0] != '"')
		return (strview){NULL, 0};
	if (!esc)
		return (strview){v.p + 1, v.n - 2};
	s.p = *out;
	s.n = jsonr_unescape(*out, v);
	*out += s.n;
	return s;
}

static bool sv_is(strview s, const char *lit)
{
	size_t n = strlen(lit);

	return s.p != NULL && s.n == n && !memcmp(s.p, lit, n);
}

/* An id as a number: decimal, "0x..." hex strings, other strings hashed. */
static uint64_t parse_id(strview v, bool esc, char *tmp)
{
	int64_t x;
	char *t = tmp;
	strview s;

	if (jsonr_parse_int(v, &x))
		return (uint64_t)x;
	s = str_of(v, esc, &t);
	if (s.p == NULL)
		return fnv1a(v.p, v.n);
	if (s.n > 2 && s.n <= 18 && s.p[0] == '0' && (s.p[1] | 0x20) == 'x') {
		uint64_t h = 0;
		size_t i;

		for (i = 2; i < s.n; i++) {
			char c = s.p[i];
			int d = c >= '0' && c <= '9'                     ? c - '0'
				: (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10
									 : -1;
			if (d < 0)
				break;
			h = h << 4 | (uint64_t)d;
		}
		if (i == s.n)
			return h;
	}
	return fnv1a(s.p, s.n);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Whether the string s is a hexadecimal number of at most 64 bits, with
 * or without "0x" (as Perfetto reads string flow ids); its value in *v. */
static bool hex_id(strview s, bool *prefix, uint64_t *v)
{
	size_t i = 0, sig = 0;
	uint64_t h = 0;

	*prefix = s.n > 2 && s.p[0] == '0' && (s.p[1] | 0x20) == 'x';
	if (*prefix)
		i = 2;
	if (s.p == NULL || i == s.n)
		return false;
	for (; i < s.n; i++) {
		int d = hexval(s.p[i]);

		if (d < 0)
			return false;
		if (sig > 0 || d > 0)
			sig++;
		if (sig > 16)
			return false;
		h = h << 4 | (uint64_t)d;
	}
	*v = h;
	return true;
}

/*
 * Rewrites the id value v (an "id", a "bind_id" or id2's "global"; esc:
 * a string with escapes) into the namespace of input k (reader.h,
 * READER_ID_SHIFT) with an edit, and returns the id as parse_id reads
 * the new text. Strings that are hex numbers keep being hex numbers
 * (Perfetto parses string flow ids so); other strings get a prefix that
 * ends in ':', which no hex number has and which keeps the prefixes of
 * two inputs apart. Numbers that are not integers stay. tmp: room for
 * v's content.
 */
static uint64_t remap_id(uint64_t k, strview v, bool esc, char *tmp, edit *edits, size_t *ne)
{
	const uint64_t tag = k << READER_ID_SHIFT;
	char text[OSTREAM_NUM_MAX + 8], *t = tmp;
	size_t n = 0;
	strview s;
	int64_t x;
	uint64_t h;
	bool prefix;

	if (v.p[0] != '"') {
		if (tag == 0 || !jsonr_parse_int(v, &x))
			return parse_id(v, esc, tmp);
		x = (int64_t)((uint64_t)x ^ tag);
		add_edit(edits, ne, v.p, v.n, text, ostream_fmt_i64(text, x));
		return (uint64_t)x;
	}
	s = str_of(v, esc, &t);
	if (hex_id(s, &prefix, &h)) {
		static const char digits[] = "0123456789abcdef";
		int top = 60;

		if (tag == 0)
			return parse_id(v, esc, tmp);
		h ^= tag;
		text[n++] = '"';
		if (prefix) {
			text[n++] = '0';
			text[n++] = 'x';
		}
		while (top > 0 && (h >> top & 0xf) == 0)
			top -= 4;
		for (; top >= 0; top -= 4)
			text[n++] = digits[h >> top & 0xf];
		text[n++] = '"';
		add_edit(edits, ne, v.p, v.n, text, n);
		return parse_id((strview){text, n}, false, tmp);
	}
	text[n++] = 'i';
	n += ostream_fmt_u64(text + n, k);
	text[n++] = ':';
	add_edit(edits, ne, v.p + 1, 0, text, n);
	return fnv1a_from(fnv1a(text, n), s.p, s.n);
}

/* The flow and async ids of an event into the namespace of its input
 * (reader_opts.remap_ids); ev->id follows its "id". Out of line: most
 * events have no id, and emit is the hot path. */
static __attribute__((noinline)) void remap_ids(reader *r, const jsonr_obj *o, jsonw_event *ev,
						char *tmp, edit *edits, size_t *ne)
{
	uint64_t k = r->o->id_input;

	if (reader_pairs_by_id(ev->ph)) {
		if (o->v[JSONR_K_ID].p != NULL)
			ev->id = remap_id(k, o->v[JSONR_K_ID], o->esc >> JSONR_K_ID & 1, tmp, edits,
					  ne);
		if (o->v[JSONR_K_ID2].p != NULL) {
			/* "local" ids are the process's own: the pid keeps them apart. */
			strview g = jsonr_find_key(o->v[JSONR_K_ID2], "global");

			if (g.p != NULL)
				remap_id(k, g, memchr(g.p, '\\', g.n) != NULL, tmp, edits, ne);
		}
	}
	if (o->v[JSONR_K_BIND_ID].p != NULL)
		remap_id(k, o->v[JSONR_K_BIND_ID], o->esc >> JSONR_K_BIND_ID & 1, tmp, edits, ne);
}

/* The event text as the sink gets it: with o->fix, malformed UTF-8
 * replaced; with o->dup, duplicate keys left out; o rescanned on the new
 * text. */
static int repair_text(reader *r, jsonr_obj *o, size_t start, strview *text)
{
	if (o->fix) {
		const char *next;

		if (vec_grow(&r->fix, &r->fix_cap, jsonr_sanitize_size(text->n), 1, BUF_FIRST) < 0)
			return -ENOMEM;
		text->n = jsonr_sanitize(r->fix, *text);
		text->p = r->fix;
		if (jsonr_value(text->p, text->p + text->n, &next, o, true) != JSONR_OK)
			return -EINVAL; /* cannot happen: sanitizing keeps the structure */
		if (r->inf->utf8_fixed++ == 0)
			r->inf->utf8_offset = r->base + start;
	}
	if (o->dup) {
		const char *next;
		size_t n;

		if (vec_grow(&r->dedup, &r->dedup_cap, text->n + JSONR_PAD, 1, BUF_FIRST) < 0)
			return -ENOMEM;
		bool dup = false;

		n = jsonr_dedup(r->dedup, *text, &dup);
		if (n == (size_t)-1)
			return -ENOMEM;
		if (n > 0) {
			*text = (strview){r->dedup, n};
			if (jsonr_value(text->p, text->p + text->n, &next, o, true) != JSONR_OK)
				return -EINVAL; /* cannot happen: members were left out whole */
			if (dup && r->inf->dup_fixed++ == 0)
				r->inf->dup_offset = r->base + start;
		}
	}
	return 0;
}

/* ev's ph, name, cat, s, bp, id and args from o; strings with escapes are
 * unescaped at *sp, which moves past them. Ids are remapped into the
 * input's namespace (reader_opts.remap_ids), with their edits. */
static void decode_fields(reader *r, const jsonr_obj *o, jsonw_event *ev, char **sp, edit *edits,
			  size_t *ne)
{
	/* Every field of ev is set here or by the caller; these are the
	 * ones set only sometimes. Not a memset: gcc makes it a rep stos,
	 * whose start-up costs a tenth of the scan of a typical event. */
	ev->scope = 0;
	ev->has_id = false;
	ev->bind_enclosing = false;
	ev->id = 0;
	ev->args = (strview){NULL, 0};
	{
		strview ph = str_of(o->v[JSONR_K_PH], o->esc >> JSONR_K_PH & 1, sp);

		ev->ph = ph.p != NULL && ph.n > 0 ? ph.p[0] : 0;
	}
	ev->name = str_of(o->v[JSONR_K_NAME], o->esc >> JSONR_K_NAME & 1, sp);
	ev->cat = str_of(o->v[JSONR_K_CAT], o->esc >> JSONR_K_CAT & 1, sp);
	{
		strview s = str_of(o->v[JSONR_K_S], o->esc >> JSONR_K_S & 1, sp);

		ev->scope = s.p != NULL && s.n > 0 ? s.p[0] : 0;
	}
	{
		strview bp = str_of(o->v[JSONR_K_BP], o->esc >> JSONR_K_BP & 1, sp);

		ev->bind_enclosing = sv_is(bp, "e");
	}
	if (o->v[JSONR_K_ID].p != NULL) {
		ev->has_id = true;
		ev->id = parse_id(o->v[JSONR_K_ID], o->esc >> JSONR_K_ID & 1, *sp);
	}
	if (o->v[JSONR_K_ARGS].p != NULL && o->v[JSONR_K_ARGS].p[0] == '{')
		ev->args = o->v[JSONR_K_ARGS];
	/* One test for the three (most events have none of them). */
	if (__builtin_expect(((uintptr_t)o->v[JSONR_K_ID].p | (uintptr_t)o->v[JSONR_K_ID2].p |
			      (uintptr_t)o->v[JSONR_K_BIND_ID].p) != 0,
			     0) &&
	    r->remap_ids)
		remap_ids(r, o, ev, *sp, edits, ne);
}

/*
 * ev's pid and tid: the pid mapped into the merged trace (map_pid,
 * map_strpid), the tid a number, a hash of a string, or the pid. When
 * the pid changes, edits put the new one into the text (and into the tid
 * of the main thread, which follows its process). Returns 0 or -ENOMEM.
 */
static int map_event_pid(reader *r, const jsonr_obj *o, strview text, jsonw_event *ev, edit *edits,
			 size_t *ne)
{
	int64_t pid = 0, out_pid, tid = 0;
	bool is_strpid = false, err = false, pid_num;

	/* pid: a number, a string of digits, or any other string. */
	pid_num = jsonr_obj_int(o, JSONR_K_PID, &pid);
	if (!pid_num && o->v[JSONR_K_PID].p != NULL) {
		is_strpid = true;
		pid = 0;
	}
	if (is_strpid)
		out_pid = map_strpid(r, o->v[JSONR_K_PID], &err);
	else
		out_pid = map_pid(r, pid);
	if (err)
		return -ENOMEM;
	ev->pid = out_pid;

	if (jsonr_obj_int(o, JSONR_K_TID, &tid)) {
		ev->tid = tid;
	} else if (o->v[JSONR_K_TID].p != NULL) {
		ev->tid = (int64_t)(fnv1a(o->v[JSONR_K_TID].p, o->v[JSONR_K_TID].n) & 0x7fffffff);
	} else {
		ev->tid = ev->pid;
	}

	if (r->sink != NULL && (is_strpid || out_pid != pid)) {
		char num[OSTREAM_NUM_MAX + 16];
		size_t n = ostream_fmt_i64(num, out_pid);

		if (o->v[JSONR_K_PID].p != NULL) {
			add_edit(edits, ne, o->v[JSONR_K_PID].p, o->v[JSONR_K_PID].n, num, n);
		} else {
			char ins[OSTREAM_NUM_MAX + 16];

			memcpy(ins, "\"pid\":", 6);
			memcpy(ins + 6, num, n);
			ins[6 + n] = ',';
			/* After the '{': an object with keys (it has "ph"). */
			if (text.n > 2 && o->v[JSONR_K_PH].p != NULL)
				add_edit(edits, ne, text.p + 1, 0, ins, n + 7);
		}
		/* The main thread carries the pid as its tid (forktrace and
		 * VizTracer both): it follows the process. */
		if (pid_num && o->v[JSONR_K_TID].p != NULL && tid == pid && !is_strpid) {
			add_edit(edits, ne, o->v[JSONR_K_TID].p, o->v[JSONR_K_TID].n, num, n);
			ev->tid = out_pid;
		}
	}
	/* forktrace_process names its parent by trace pid: follow remaps. */
	if (r->sink != NULL && ev->ph == 'M' && ev->args.p != NULL &&
	    sv_is(ev->name, "forktrace_process")) {
		strview pv = jsonr_find_key(ev->args, "parent");
		int64_t parent, mapped;

		if (jsonr_parse_int(pv, &parent) && parent > 0 &&
		    (mapped = map_pid(r, parent)) != parent) {
			char num[OSTREAM_NUM_MAX];

			add_edit(edits, ne, pv.p, pv.n, num, ostream_fmt_i64(num, mapped));
		}
	}
	return 0;
}

/* ev's ts and dur, shifted by reader_opts.shift_ns (with an edit of the
 * text when it goes to a sink), and the time range of the input. */
static void set_event_times(reader *r, const jsonr_obj *o, jsonw_event *ev, edit *edits, size_t *ne)
{
	int64_t v;

	ev->ts_ns = JSONW_NO_TIME;
	ev->dur_ns = JSONW_NO_TIME;
	if (jsonr_obj_us_ns(o, JSONR_K_TS, &v))
		ev->ts_ns = v;
	if (jsonr_obj_us_ns(o, JSONR_K_DUR, &v))
		ev->dur_ns = v;

	if (r->sink != NULL && r->o->shift_ns != 0 && ev->ts_ns != JSONW_NO_TIME) {
		char num[OSTREAM_NUM_MAX];

		ev->ts_ns += r->o->shift_ns;
		add_edit(edits, ne, o->v[JSONR_K_TS].p, o->v[JSONR_K_TS].n, num,
			 ostream_fmt_ts(num, ev->ts_ns));
	} else if (ev->ts_ns != JSONW_NO_TIME) {
		ev->ts_ns += r->o->shift_ns;
	}

	if (ev->ts_ns != JSONW_NO_TIME && ev->ph != 'M') {
		int64_t e = ev->ts_ns +
			    (ev->dur_ns != JSONW_NO_TIME && ev->dur_ns > 0 ? ev->dur_ns : 0);

		if (ev->ts_ns < r->inf->min_ts)
			r->inf->min_ts = ev->ts_ns;
		if (e > r->inf->max_ts)
			r->inf->max_ts = e;
	}
}

/* se->raw: text with the ne edits applied, in text order, in the scratch
 * copy; se->ev.args follows where it moved. Returns 0 or -ENOMEM. */
static int apply_edits(reader *r, strview text, edit *edits, size_t ne, sink_event *se)
{
	/* Apply the edits in text order into the scratch copy. */
	size_t need = text.n + ne * sizeof(edits[0].text) + JSONR_PAD, n = 0;
	const char *from = text.p;

	for (size_t i = 1; i < ne; i++)
		for (size_t j = i; j > 0 && edits[j].at < edits[j - 1].at; j--) {
			edit t = edits[j];

			edits[j] = edits[j - 1];
			edits[j - 1] = t;
		}
	if (vec_grow(&r->scratch, &r->scratch_cap, need, 1, BUF_FIRST) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < ne; i++) {
		memcpy(r->scratch + n, from, (size_t)(edits[i].at - from));
		n += (size_t)(edits[i].at - from);
		memcpy(r->scratch + n, edits[i].text, edits[i].n);
		n += edits[i].n;
		from = edits[i].at + edits[i].del;
	}
	memcpy(r->scratch + n, from, (size_t)(text.p + text.n - from));
	n += (size_t)(text.p + text.n - from);
	memset(r->scratch + n, 0, JSONR_PAD);
	se->raw = (strview){r->scratch, n};
	if (se->ev.args.p != NULL) {
		/* args may have moved (an edit before it or inside it). */
		strview a = jsonr_find_key(se->raw, "args");

		se->ev.args = a.p != NULL && a.p[0] == '{' ? a : (strview){NULL, 0};
	}
	return 0;
}

/* Turns the event at buf[start..end) into a sink event and sends it. */
static int emit(reader *r, jsonr_obj *o, size_t start, size_t end)
{
	strview text = {r->buf + start, end - start};
	sink_event se;
	edit edits[8];
	size_t ne = 0;
	char *sp;
	int err;

	err = repair_text(r, o, start, &text);
	if (err < 0)
		return err;
	if (vec_grow(&r->str, &r->str_cap, text.n + 64, 1, BUF_FIRST) < 0)
		return -ENOMEM;
	sp = r->str;
	decode_fields(r, o, &se.ev, &sp, edits, &ne);
	err = map_event_pid(r, o, text, &se.ev, edits, &ne);
	if (err < 0)
		return err;
	set_event_times(r, o, &se.ev, edits, &ne);

	se.raw = text;
	if (ne > 0) {
		err = apply_edits(r, text, edits, ne, &se);
		if (err < 0)
			return err;
	}

	r->inf->events++;
	if (r->sink == NULL)
		return 0;
	return r->sink->event(r->sink, &se);
}

/* Reads what forktrace needs from otherData / viztracer_metadata. */
static void read_meta(reader *r, strview key, strview val)
{
	reader_info *inf = r->inf;
	int64_t x;

	if (sv_is(key, "otherData")) {
		strview ft = jsonr_find_key(val, "forktrace");
		strview anchor = jsonr_find_key(ft, "anchor");
		strview origin = jsonr_find_key(ft, "origin");
		int64_t mono, real;

		if (ft.p == NULL) {
			if (inf->origin[0] == '\0')
				snprintf(inf->origin, sizeof(inf->origin), "other");
			return;
		}
		if (origin.p != NULL && origin.n >= 2 && origin.p[0] == '"' &&
		    origin.n < sizeof(inf->origin)) {
			size_t n = jsonr_unescape(inf->origin, origin);

			inf->origin[n] = '\0';
		} else {
			snprintf(inf->origin, sizeof(inf->origin), "forktrace");
		}
		if (r->o->run_meta != NULL)
			r->o->run_meta(r->o->run_meta_ctx, ft);
		if (jsonr_parse_int(jsonr_find_key(anchor, "monotonic_ns"), &mono) &&
		    jsonr_parse_int(jsonr_find_key(anchor, "realtime_ns"), &real) && real > 0) {
			inf->has_anchor = true;
			inf->anchor_mono_ns = mono;
			inf->anchor_real_ns = real;
		}
		if (jsonr_parse_int(jsonr_find_key(ft, "lost_events"), &x))
			inf->lost_events = x;
	} else if (sv_is(key, "viztracer_metadata")) {
		strview ver = jsonr_find_key(val, "version");
		strview ov = jsonr_find_key(val, "overflow");
		char v[32] = "";

		inf->viztracer = true;
		if (ver.p != NULL && ver.n >= 2 && ver.p[0] == '"' && ver.n < sizeof(v)) {
			size_t n = jsonr_unescape(v, ver);

			v[n] = '\0';
		}
		snprintf(inf->origin, sizeof(inf->origin), "VizTracer%s%s", v[0] ? " " : "", v);
		inf->viztracer_overflow = ov.n == 4 && !memcmp(ov.p, "true", 4);
		/* Newer VizTracer: the realtime of ts 0, for lining hosts up. */
		if (jsonr_parse_int(jsonr_find_key(val, "baseTimeNanoseconds"), &x) && x > 0) {
			inf->has_anchor = true;
			inf->anchor_mono_ns = 0;
			inf->anchor_real_ns = x;
		}
	}
}

static void note_skipped(reader *r, strview key)
{
	reader_info *inf = r->inf;
	size_t len = strlen(inf->skipped);
	size_t room = sizeof(inf->skipped) - len;

	inf->skipped_keys++;
	if (room > key.n + 3) {
		if (len > 0) {
			memcpy(inf->skipped + len, ", ", 2);
			len += 2;
		}
		memcpy(inf->skipped + len, key.p, key.n);
		inf->skipped[len + key.n] = '\0';
	}
}

static const char *skip_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
		p++;
	return p;
}

/* Hands one key to reader_opts.top_key; returns 0 or its error. */
static int give_key(reader *r, strview key, bool in_other_data, strview val)
{
	int st;

	/* Inside the value, a key twice in an object keeps its last value,
	 * as in events (the key itself twice at the top: the first counts).
	 * val may lie in r->fix; the copy goes to r->dedup. */
	if (val.p[0] == '{' || val.p[0] == '[') {
		bool dup = false;
		size_t n;

		if (vec_grow(&r->dedup, &r->dedup_cap, val.n + JSONR_PAD, 1, BUF_FIRST) < 0)
			return -ENOMEM;
		n = jsonr_dedup(r->dedup, val, &dup);
		if (n == (size_t)-1)
			return -ENOMEM;
		if (n > 0)
			val = (strview){r->dedup, n};
		if (dup && r->inf->dup_fixed++ == 0)
			r->inf->dup_offset = r->base + r->pos;
	}
	st = r->o->top_key(r->o->top_key_ctx, key, in_other_data, val);

	if (st < 0)
		return st;
	if (st > 0)
		note_skipped(r, key);
	return 0;
}

/*
 * The members of the otherData object obj (complete and valid) but
 * forktrace, which read_meta read, to reader_opts.top_key. Returns 0 or
 * its error.
 */
/*
 * Unescapes the key literal lit into *buf (grown) as *out, with every byte
 * that is not part of well-formed UTF-8 replaced by U+FFFD, as the writer
 * will write it: two keys that differ only there are one key in the
 * output, and must be seen as one. Returns 0 or -ENOMEM.
 */
static int unescape_key(char **buf, size_t *cap, strview lit, strview *out)
{
	size_t n, w = 0, at = 2 * lit.n;
	char *b;

	/* Unescaped behind where it is copied to: at most 3 bytes out for
	 * each byte in, so the copy never overtakes what it reads. */
	if (vec_grow(buf, cap, 3 * lit.n + 1, 1, BUF_FIRST) < 0)
		return -ENOMEM;
	b = *buf;
	n = jsonr_unescape(b + at, lit);
	for (size_t i = 0; i < n;) {
		size_t k = (unsigned char)b[at + i] < 0x80 ? 1
							   : ostream_utf8_len(b + at + i, n - i);

		if (k == 0) {
			memcpy(b + w, "\xef\xbf\xbd", 3);
			w += 3;
			i++;
		} else {
			memmove(b + w, b + at + i, k);
			w += k;
			i += k;
		}
	}
	*out = (strview){b, w};
	return 0;
}

static int give_members(reader *r, strview obj)
{
	const char *p = obj.p + 1, *end = obj.p + obj.n, *q;
	jsonr_obj o;

	for (;;) {
		strview name, val;
		int st;

		p = skip_ws(p, end);
		/* obj is valid: anything else than a key is its '}'. */
		if (p >= end || *p != '"' || jsonr_value(p, end, &q, &o, false) != JSONR_OK)
			return 0;
		if (unescape_key(&r->mkey, &r->mkey_cap, (strview){p, (size_t)(q - p)}, &name) < 0)
			return -ENOMEM;
		p = skip_ws(skip_ws(q, end) + 1, end); /* past the ':' */
		if (jsonr_value(p, end, &q, &o, false) != JSONR_OK)
			return 0;
		val = (strview){p, (size_t)(q - p)};
		if (!sv_is(name, "forktrace")) {
			st = give_key(r, name, true, val);
			if (st < 0)
				return st;
		}
		p = skip_ws(q, end);
		if (p >= end || *p != ',')
			return 0;
		p++;
	}
}

/*
 * One top-level value other than traceEvents, complete and valid at
 * val (in the buffer at offset at): repaired if its strings need it
 * (fix), read if it is metadata forktrace reads, and handed over or
 * counted as skipped (reader_opts.top_key). Returns 0 or a negative
 * errno.
 */
static int top_value(reader *r, strview key, strview val, bool fix, uint64_t at)
{
	bool meta = (sv_is(key, "otherData") || sv_is(key, "viztracer_metadata")) &&
		    val.p[0] == '{';

	if (fix) {
		if (vec_grow(&r->fix, &r->fix_cap, jsonr_sanitize_size(val.n), 1, BUF_FIRST) < 0)
			return -ENOMEM;
		val.n = jsonr_sanitize(r->fix, val);
		val.p = r->fix;
		if (r->inf->utf8_fixed++ == 0)
			r->inf->utf8_offset = at;
	}
	if (meta)
		read_meta(r, key, val);
	if (r->o->top_key == NULL) {
		/* displayTimeUnit is a viewer's hint, not data. */
		if (!meta && !sv_is(key, "displayTimeUnit"))
			note_skipped(r, key);
		return 0;
	}
	if (meta && sv_is(key, "otherData"))
		return give_members(r, val);
	return give_key(r, key, false, val);
}

/* Reports why a value could not be read; returns 2 (stop reading). */
static int value_problem(reader *r, int st, const jsonr_obj *o, const char *what)
{
	uint64_t at = r->base + r->pos;

	switch (st) {
	case JSONR_ERR:
		set_error(r, r->base + (uint64_t)(o->err_at - r->buf), "expected %s (in %s)",
			  o->expected, what);
		break;
	case R_TRUNC:
		if (r->inf->error[0] == '\0') {
			set_error(r, at,
				  "the file ends inside %s (truncated?); kept the %" PRIu64
				  " complete events before it",
				  what, r->inf->events);
			r->inf->truncated = true;
		}
		break;
	case R_TOOBIG:
		set_error(r, at, "%s larger than %u MiB", what, READER_MAX_EVENT >> 20);
		break;
	default:
		break;
	}
	return 2;
}

/* The events of traceEvents (or of a bare array), r->pos just after '['.
 * Returns 0 at the closing ']', 1 when the file ends where a bare array
 * may end, 2 on a problem of the input (recorded in info), or a negative
 * errno (the sink's, or -ENOMEM). */
static int read_events(reader *r, bool bare)
{
	jsonr_obj o;
	int c, st;
	size_t vend;

	c = peek(r);
	if (c == ']') {
		r->pos++;
		return 0;
	}
	for (;;) {
		if (c == -2)
			return 2;
		if (c == -1) {
			if (bare)
				return 1; /* the Array Format may omit the ']' */
			set_error(r, r->base + r->pos,
				  "the file ends inside traceEvents (truncated?); kept the %" PRIu64
				  " complete events before it",
				  r->inf->events);
			r->inf->truncated = true;
			return 2;
		}
		if (c != '{') {
			set_error(r, r->base + r->pos, "expected '{' (an event)");
			return 2;
		}
		st = parse_value(r, &o, true, false, &vend);
		if (st == -ENOMEM)
			return -ENOMEM;
		if (st != JSONR_OK)
			return value_problem(r, st, &o, "an event");
		st = emit(r, &o, r->pos, vend);
		if (st < 0) {
			r->sink_err = st;
			return st;
		}
		r->pos = vend;
		c = peek(r);
		if (c == ',') {
			r->pos++;
			c = peek(r);
			continue;
		}
		if (c == ']') {
			r->pos++;
			return 0;
		}
		if (c == -1 && bare)
			return 1;
		if (c == -1) {
			set_error(r, r->base + r->pos,
				  "the file ends after an event (truncated?); kept the %" PRIu64
				  " complete events before it",
				  r->inf->events);
			r->inf->truncated = true;
			return 2;
		}
		if (c == -2)
			return 2;
		set_error(r, r->base + r->pos, "expected ',' or ']' after an event");
		return 2;
	}
}

/* The end of the document: only whitespace may follow. */
static void expect_end(reader *r)
{
	int c = peek(r);

	if (c >= 0)
		set_error(r, r->base + r->pos, "expected the end of the file after the trace");
}

/* A key of the trace object and its ':', r->pos at the key's opening
 * quote (c, peeked). The key is copied out of the buffer into r->key:
 * reading on may move the buffer. Returns 0, or what read_object returns
 * on a problem. */
static int read_top_key(reader *r, int c, strview *key)
{
	jsonr_obj o;
	size_t vend;
	int st;

	if (c == -1 || c == -2) {
		if (c == -1) {
			set_error(r, r->base + r->pos,
				  "the file ends before the end of the trace object (truncated?)");
			r->inf->truncated = true;
		}
		return 2;
	}
	if (c != '"') {
		set_error(r, r->base + r->pos, "expected a key (a string) in the trace object");
		return 2;
	}
	st = parse_value(r, &o, false, false, &vend);
	if (st == -ENOMEM)
		return st;
	if (st != JSONR_OK)
		return value_problem(r, st, &o, "a key");
	/* Out of the buffer: reading on may move it. */
	if (unescape_key(&r->key, &r->key_cap, (strview){r->buf + r->pos, vend - r->pos}, key) < 0)
		return -ENOMEM;
	r->pos = vend;
	c = peek(r);
	if (c != ':') {
		if (c == -1) {
			set_error(r, r->base + r->pos, "the file ends after a key (truncated?)");
			r->inf->truncated = true;
		} else if (c != -2) {
			set_error(r, r->base + r->pos, "expected ':' after a key");
		}
		return 2;
	}
	r->pos++;
	return 0;
}

/* The value of "traceEvents", c peeked at its start. */
static int read_trace_events(reader *r, int c)
{
	if (c != '[') {
		if (c == -1) {
			set_error(r, r->base + r->pos,
				  "the file ends after \"traceEvents\" (truncated?)");
			r->inf->truncated = true;
		} else {
			set_error(r, r->base + r->pos, "expected '[' after \"traceEvents\"");
		}
		return 2;
	}
	r->pos++;
	return read_events(r, false);
}

/* A top-level value to keep (reader_opts.top_key) or metadata to read
 * (meta): checked whole, in the buffer, and handed to top_value; one too
 * big, or not valid JSON and not metadata, is skipped and noted. */
static int read_top_value(reader *r, strview key, bool meta)
{
	jsonr_obj o;
	size_t vend;
	int st;

	st = parse_value(r, &o, false, true, &vend);
	if (st == -ENOMEM)
		return st;
	if (st == R_TOOBIG) {
		note_skipped(r, key);
		st = skip_value(r);
	} else if (st == JSONR_ERR && !meta) {
		/* Not valid JSON: it cannot be kept, but the events
		 * after it are read when it can be skipped. */
		note_skipped(r, key);
		st = skip_value(r);
		if (st == JSONR_ERR) {
			set_error(r, r->base + r->pos, "expected a value");
			return 2;
		}
		o.err_at = NULL;
	} else if (st == JSONR_OK) {
		strview val = {r->buf + r->pos, vend - r->pos};

		st = top_value(r, key, val, o.fix, r->base + r->pos);
		if (st < 0)
			return st;
		r->pos = vend;
	}
	if (st != JSONR_OK)
		return value_problem(r, st, &o, meta ? "metadata" : "a top-level value");
	return 0;
}

/* A top-level value forktrace neither keeps nor reads: skipped, and
 * noted unless it is displayTimeUnit (a viewer's hint, not data). */
static int skip_top_value(reader *r, strview key)
{
	jsonr_obj o;
	int st;

	if (!sv_is(key, "displayTimeUnit"))
		note_skipped(r, key);
	st = skip_value(r);
	if (st == JSONR_ERR) {
		set_error(r, r->base + r->pos, "expected a value");
		return 2;
	}
	if (st != JSONR_OK) {
		o.err_at = NULL;
		return value_problem(r, st, &o, "a top-level value");
	}
	return 0;
}

/* After a member of the trace object: 1 at ',' (another member follows),
 * 0 at '}' (the end), 2 on a problem. */
static int after_top_member(reader *r)
{
	int c = peek(r);

	if (c == ',') {
		r->pos++;
		return 1;
	}
	if (c == '}') {
		r->pos++;
		return 0;
	}
	if (c == -1) {
		set_error(r, r->base + r->pos,
			  "the file ends before the end of the trace object (truncated?)");
		r->inf->truncated = true;
	} else if (c != -2) {
		set_error(r, r->base + r->pos, "expected ',' or '}' after a top-level value");
	}
	return 2;
}

/* The object form: keys, traceEvents among them. */
static int read_object(reader *r)
{
	/* Where the object starts, for errors about the whole object: the
	 * buffer's base moves as the file streams past. */
	uint64_t start = r->base + r->pos;
	bool seen_events = false, meta;
	int c, st;

	r->pos++; /* '{' */
	c = peek(r);
	if (c == '}') {
		r->pos++;
		set_error(r, r->base + r->pos - 1,
			  "expected \"traceEvents\" (an empty object is not a trace)");
		return 2;
	}
	for (;;) {
		strview key;

		st = read_top_key(r, c, &key);
		if (st != 0)
			return st;
		c = peek(r);
		/* Metadata forktrace reads (read_meta). */
		meta = sv_is(key, "otherData") || sv_is(key, "viztracer_metadata");
		if (sv_is(key, "traceEvents")) {
			st = read_trace_events(r, c);
			if (st != 0)
				return st;
			seen_events = true;
		} else if (c < 0) {
			if (c == -1) {
				set_error(r, r->base + r->pos,
					  "the file ends after a key (truncated?)");
				r->inf->truncated = true;
			}
			return 2;
		} else if (r->o->top_key != NULL || (meta && c == '{')) {
			st = read_top_value(r, key, meta);
			if (st != 0)
				return st;
		} else {
			st = skip_top_value(r, key);
			if (st != 0)
				return st;
		}
		st = after_top_member(r);
		if (st == 0)
			break;
		if (st != 1)
			return st;
		c = peek(r);
	}
	if (!seen_events) {
		set_error(r, start, "expected \"traceEvents\" (no events in this object)");
		return 2;
	}
	expect_end(r);
	return 0;
}

static void reader_release(reader *r)
{
	if (r->zinit)
		inflateEnd(&r->z);
	free(r->zin);
	free(r->buf);
	free(r->scratch);
	free(r->fix);
	free(r->dedup);
	free(r->str);
	free(r->key);
	free(r->mkey);
	for (size_t i = 0; i < r->nstrpids; i++)
		free(r->strpids[i].name);
	free(r->strpids);
}

/* The bytes that tell an input's kind, read before its reader starts. */
#define HEAD_MAX 8

/* The first read buffer's size: a chunk of compressed input, and room
 * for the bytes that were read to tell the input's kind. */
static size_t first_read_size(const reader *r)
{
	return r->zin_cap > HEAD_MAX ? r->zin_cap : HEAD_MAX;
}

/* r and info ready to read fd: options, buffer sizes and buffers.
 * Returns 0 or -ENOMEM. */
static int reader_setup(reader *r, int fd, const reader_opts *o, trace_sink *sink,
			reader_info *info)
{
	static const reader_opts none;

	*r = (reader){.fd = fd, .o = o != NULL ? o : &none, .sink = sink, .inf = info};
	memset(info, 0, sizeof(*info));
	info->min_ts = INT64_MAX;
	info->max_ts = INT64_MIN;
	info->lost_events = -1;
	r->chunk = r->o->chunk ? r->o->chunk : READER_CHUNK;
	r->remap_ids = r->o->remap_ids && sink != NULL;
	r->cap = r->chunk;
	r->zin_cap = r->chunk < READER_ZIN ? r->chunk : READER_ZIN;
	r->buf = malloc(r->cap + JSONR_PAD);
	r->zin = malloc(first_read_size(r));
	if (r->buf == NULL || r->zin == NULL)
		return -ENOMEM;
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	return 0;
}

/* The first read, after the nhead bytes already read into head: gzip is
 * told by content (the first two bytes) and gets an inflate stream; plain
 * input goes into the buffer. Returns 0, 1 on a read error (recorded in
 * info), or -ENOMEM. */
static int read_first(reader *r, const unsigned char *head, size_t nhead)
{
	size_t first = first_read_size(r);
	reader_info *info = r->inf;
	ssize_t k;

	if (nhead > 0)
		memcpy(r->zin, head, nhead);
	k = read_full(r->fd, r->zin + nhead, first - nhead);
	if (k < 0) {
		set_error(r, 0, "read error: %s", strerror((int)-k));
		return 1;
	}
	k += (ssize_t)nhead;
	info->file_bytes = (uint64_t)k;
	if (k >= 2 && r->zin[0] == 0x1f && r->zin[1] == 0x8b) {
		r->gz = true;
		info->gzip = true;
		if (inflateInit2(&r->z, 15 + 16) != Z_OK)
			return -ENOMEM;
		r->zinit = true;
		r->z.next_in = r->zin;
		r->z.avail_in = (uInt)k;
	} else {
		if ((size_t)k > r->cap) {
			char *nb = realloc(r->buf, (size_t)k + JSONR_PAD);

			if (nb == NULL)
				return -ENOMEM;
			r->buf = nb;
			r->cap = (size_t)k;
		}
		memcpy(r->buf, r->zin, (size_t)k);
		r->len = (size_t)k;
		if ((size_t)k < first)
			r->eof = true;
		memset(r->buf + r->len, 0, JSONR_PAD);
		info->bytes = r->len;
	}
	return 0;
}

/* The document: an optional byte order mark, then the array form or the
 * object form. Returns a negative errno, or 0 (problems of the input are
 * recorded in info). */
static int read_document(reader *r)
{
	int c, st = 0;

	c = peek(r);
	/* A UTF-8 byte order mark is allowed before the document. */
	if (c == 0xef && r->len - r->pos >= 3 && !memcmp(r->buf + r->pos, "\xef\xbb\xbf", 3)) {
		r->pos += 3;
		c = peek(r);
	}
	if (c == -1) {
		set_error(r, 0, "empty file (expected a trace: '{' or '[')");
		return 0;
	}
	if (c == -2)
		return 0;
	if (c == '[') {
		r->inf->array_form = true;
		r->pos++;
		st = read_events(r, true);
		if (st == 0)
			expect_end(r);
	} else if (c == '{') {
		st = read_object(r);
	} else {
		set_error(r, r->base + r->pos,
			  "expected '{' or '[' (this is not a Chrome trace JSON file)");
		return 0;
	}
	return st < 0 ? st : 0;
}

/*
 * reader_read_fd, where the first nhead bytes of the input were already
 * read from fd into head (a stream, which cannot be read again).
 */
static int read_fd_head(int fd, const unsigned char *head, size_t nhead, const reader_opts *o,
			trace_sink *sink, reader_info *info)
{
	reader r;
	int err;

	err = reader_setup(&r, fd, o, sink, info);
	if (err == 0)
		err = read_first(&r, head, nhead);
	if (err == 0)
		err = read_document(&r);
	if (err > 0)
		err = 0;
	if (r.sink_err < 0)
		err = r.sink_err;
	reader_release(&r);
	return err;
}

int reader_read_fd(int fd, const reader_opts *o, trace_sink *sink, reader_info *info)
{
	return read_fd_head(fd, NULL, 0, o, sink, info);
}

/*
 * An HDF5 trace (docs/HDF5_LAYOUT.md) is read by writing it as JSON into
 * an unlinked temporary file and reading that: every input then goes
 * through the one JSON path (pid remapping, --align, accounting, UTF-8
 * checks), and memory stays flat. HDF5 inputs are rare and about ten
 * times smaller than their JSON, so the extra pass over the disk is cheap.
 * Returns an fd positioned at 0, or a negative errno.
 */
static int h5_as_json(const char *path)
{
	const char *tmpdir = getenv("TMPDIR");
	model_trace *meta = model_new();
	uint64_t processes = 0;
	trace_sink *js = NULL;
	sink_host *hosts = NULL;
	size_t nhosts = 0;
	int fd, err;

	if (meta == NULL)
		return -ENOMEM;
	fd = open(tmpdir && *tmpdir ? tmpdir : "/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0) {
		err = -errno;
		goto fail_meta;
	}
	err = reader_h5_meta(path, meta, &processes);
	if (err == 0)
		err = reader_h5_hosts(path, meta, &hosts, &nhosts);
	if (err < 0)
		goto fail_fd;
	js = sink_json_new(fd, -1, &err);
	if (js == NULL)
		goto fail_fd;
	sink_meta sm = {.model = meta, .processes = processes, .hosts = hosts, .nhosts = nhosts};
	err = js->begin(js, &sm);
	if (err == 0)
		err = reader_h5_read(path, js, NULL);
	if (err == 0)
		err = js->end(js, &sm);
	js->free(js);
	if (err < 0)
		goto fail_fd;
	if (lseek(fd, 0, SEEK_SET) < 0) {
		err = -errno;
		goto fail_fd;
	}
	free(hosts);
	model_free(meta);
	return fd;

fail_fd:
	close(fd);
	free(hosts);
fail_meta:
	model_free(meta);
	return err;
}

static const unsigned char h5_signature[HEAD_MAX] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

static void info_problem(reader_info *info, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* An input that could not be read at all: info says why. */
static void info_problem(reader_info *info, const char *fmt, ...)
{
	va_list ap;

	memset(info, 0, sizeof(*info));
	info->min_ts = INT64_MAX;
	info->max_ts = INT64_MIN;
	info->lost_events = -1;
	va_start(ap, fmt);
	vsnprintf(info->error, sizeof(info->error), fmt, ap);
	va_end(ap);
}

/*
 * Opens what path names: "-" is standard input; a path found in a
 * directory must lead to a regular file; one the user named is opened as
 * it is (a FIFO waits for its writer, as cat(1) does). Returns an fd or a
 * negative errno.
 */
static int open_input(const char *path, const reader_opts *o)
{
	int fd;

	if (o->use_fd) {
		fd = fcntl(o->fd, F_DUPFD_CLOEXEC, 0);
		if (fd >= 0 && lseek(fd, 0, SEEK_SET) < 0) {
			close(fd);
			return -errno;
		}
		return fd < 0 ? -errno : fd;
	}
	if (strcmp(path, "-") == 0) {
		fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0);
		return fd < 0 ? -errno : fd;
	}
	if (o->regular_only)
		return regfile_open(path);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	return fd < 0 ? -errno : fd;
}

/* Copies head and the rest of fd into a temporary file in $TMPDIR (else
 * /tmp): unlinked, or when named != NULL (PATH_MAX bytes) a new file whose
 * name is put there, for the caller to remove (HDF5 opens files by a name
 * it resolves, which an unlinked file does not have). Returns its fd at
 * offset 0, or a negative errno. */
static int spool_fd(int fd, const unsigned char *head, size_t nhead, char *named)
{
	const char *tmpdir = getenv("TMPDIR");
	char *buf = malloc(READER_ZIN);
	int out, err = 0;
	ssize_t k = (ssize_t)nhead;

	if (buf == NULL)
		return -ENOMEM;
	if (tmpdir == NULL || *tmpdir == '\0')
		tmpdir = "/tmp";
	if (named == NULL) {
		out = open(tmpdir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	} else if (snprintf(named, PATH_MAX, "%s/forktrace-input-XXXXXX", tmpdir) >= PATH_MAX) {
		out = -1;
		errno = ENAMETOOLONG;
	} else {
		out = mkostemp(named, O_CLOEXEC);
	}
	if (out < 0) {
		free(buf);
		return -errno;
	}
	if (nhead > 0)
		memcpy(buf, head, nhead);
	for (;;) {
		for (ssize_t done = 0; done < k;) {
			ssize_t w = write(out, buf + done, (size_t)(k - done));

			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0) {
				err = -errno;
				goto out;
			}
			done += w;
		}
		k = read_full(fd, buf, READER_ZIN);
		if (k <= 0) {
			err = (int)k;
			break;
		}
	}
	if (err == 0 && lseek(out, 0, SEEK_SET) < 0)
		err = -errno;
out:
	free(buf);
	if (err < 0) {
		close(out);
		if (named != NULL)
			unlink(named);
		return err;
	}
	return out;
}

bool reader_is_stream(const char *path)
{
	struct stat st;

	return strcmp(path, "-") == 0 ||
	       (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode));
}

int reader_spool(const char *path)
{
	static const reader_opts none;
	int fd = open_input(path, &none), out;

	if (fd < 0)
		return fd;
	out = spool_fd(fd, NULL, 0, NULL);
	close(fd);
	return out;
}

int reader_read(const char *path, const reader_opts *o, trace_sink *sink, reader_info *info)
{
	static const reader_opts none;
	unsigned char head[HEAD_MAX];
	struct stat st;
	ssize_t n;
	bool h5 = false;
	int fd, h5fd = -1, err;

	if (o == NULL)
		o = &none;
	fd = open_input(path, o);
	if (fd < 0) {
		if (fd == -EINVAL && o->regular_only)
			info_problem(info, "not a regular file (a FIFO, a device or a socket); "
					   "not read");
		else
			info_problem(info, "cannot open: %s", strerror(-fd));
		return 0;
	}
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		/* What merge_expand leaves of a directory without traces. */
		close(fd);
		info_problem(info, "a directory with no trace files (*.json, *.gz, or files "
				   "whose content is a trace) in it");
		return 0;
	}
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		n = pread(fd, head, sizeof(head), 0);
		if (n == (ssize_t)sizeof(head) && !memcmp(head, h5_signature, sizeof(head))) {
			/* HDF5 opens by name: this one is the file already open. */
			char proc[48];

			snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
			h5 = true;
			h5fd = h5_as_json(proc);
		} else {
			err = reader_read_fd(fd, o, sink, info);
			close(fd);
			return err;
		}
	} else {
		/* A stream: its first bytes are read once, here. */
		n = read_full(fd, head, sizeof(head));
		if (n == (ssize_t)sizeof(head) && !memcmp(head, h5_signature, sizeof(head))) {
			char tmp[PATH_MAX];
			int copy = spool_fd(fd, head, (size_t)n, tmp);

			h5 = true;
			h5fd = copy < 0 ? copy : h5_as_json(tmp);
			if (copy >= 0) {
				close(copy);
				unlink(tmp);
			}
		} else if (n >= 3 && head[0] == FT_WIRE_MAGIC0 && head[1] == FT_WIRE_MAGIC1 &&
			   head[2] == FT_WIRE_VERSION) {
			close(fd);
			info_problem(info,
				     "a forktrace spill file in a pipe or FIFO: combine reads "
				     "spill files from regular files only (save it first)");
			return 0;
		} else if (n < 0) {
			close(fd);
			info_problem(info, "read error: %s", strerror((int)-n));
			return 0;
		} else {
			err = read_fd_head(fd, head, (size_t)n, o, sink, info);
			close(fd);
			return err;
		}
	}
	close(fd);
	if (h5fd < 0) {
		info_problem(info, "not a readable forktrace HDF5 trace: %s", strerror(-h5fd));
		return h5fd == -ENOMEM ? h5fd : 0;
	}
	err = reader_read_fd(h5fd, o, sink, info);
	info->hdf5 = h5;
	close(h5fd);
	return err;
}

bool reader_sniff(const char *path)
{
	unsigned char b[64];
	int fd = regfile_open(path);
	ssize_t n;

	if (fd < 0)
		return false;
	n = read_full(fd, b, sizeof(b));
	close(fd);
	if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b)
		return true;
	for (ssize_t i = 0; i < n; i++) {
		if (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t')
			continue;
		return b[i] == '{' || b[i] == '[';
	}
	return false;
}
