/*
 * The output stream's pipeline (combine/io/ostream.c) and the JSON sink's
 * deferred slices (combine/sinks/sink_json.c), byte for byte.
 *
 * Random events of every shape (every phase, names with escapes, UTF-8
 * and bytes that are not, no name, empty cat, no cat, args, ids, scopes,
 * times negative, huge and JSONW_NO_TIME, ever new names and threads so
 * that the sink's cache and the stream's prefixes are forgotten and made
 * again) go through the JSON sink as the model gives them (slices without
 * args deferred: ostream_x); the file must be the bytes the sink wrote
 * before it deferred anything (a newline, then jsonw_event_write, for each
 * event), plain and through gzip (zlib reads it back). Names are handed over in one
 * buffer that is overwritten from event to event, as a region's name in a
 * reused chunk. Then the stream alone: deferred slices in a memory stream,
 * a write larger than many blocks, errors (a full disk, a descriptor not
 * open for writing) plain and gzip. ctest runs it with FORKTRACE_THREADS=1
 * and 3: the bytes are the same (check_threads compares them in one run
 * too, through a child with the other setting).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zlib.h>

#include "check.h"
#include "jsonw.h"
#include "model.h"
#include "ostream.h"
#include "sink.h"

static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static char *read_all(int fd, size_t *len)
{
	struct stat st;
	char *buf;

	MUST(fstat(fd, &st) == 0);
	buf = malloc((size_t)st.st_size + 1);
	MUST(buf != NULL);
	MUST(pread(fd, buf, (size_t)st.st_size, 0) == st.st_size);
	*len = (size_t)st.st_size;
	return buf;
}

/* Inflates a gzip file's bytes (zlib, one member). */
static char *gunzip(const char *z, size_t zn, size_t *len)
{
	z_stream s = {0};
	size_t cap = zn * 4 + 4096, n = 0;
	char *out = malloc(cap);
	int ret;

	MUST(out != NULL);
	MUST(inflateInit2(&s, 31) == Z_OK);
	s.next_in = (Bytef *)z;
	s.avail_in = (uInt)zn;
	do {
		if (cap - n < 65536) {
			cap *= 2;
			out = realloc(out, cap);
			MUST(out != NULL);
		}
		s.next_out = (Bytef *)out + n;
		s.avail_out = (uInt)(cap - n);
		ret = inflate(&s, Z_NO_FLUSH);
		n = cap - s.avail_out;
	} while (ret == Z_OK);
	CHECK_INT(ret, ==, Z_STREAM_END);
	CHECK_UINT(s.avail_in, ==, 0);
	inflateEnd(&s);
	*len = n;
	return out;
}

/* Names: a few that repeat (the common case), escapes, UTF-8, bad bytes. */
static const char *const names[] = {
	"fib",
	"main",
	"a_rather_long_function_name_that_is_longer_than_eight_bytes",
	"q\"uote",
	"back\\slash",
	"tab\there",
	"nl\nx",
	"\x01\x1f",
	"caf\xc3\xa9",
	"\xe2\x82\xac euro",
	"\xf0\x9f\x98\x80",
	"bad\xff",
	"half\xc3",
	"\xed\xa0\x80surrogate",
	"</script>",
	"",
	"fi",
	"fib2",
};
#define NNAMES (sizeof(names) / sizeof(names[0]))

static const char *const cats[] = {"function", "region", "", "func\"tion", "r"};
#define NCATS (sizeof(cats) / sizeof(cats[0]))

static int64_t rnd_time(void)
{
	switch (rnd() % 16) {
	case 0:
		return JSONW_NO_TIME;
	case 1:
		return INT64_MAX;
	case 2:
		return INT64_MIN + 1;
	case 3:
		return -(int64_t)(rnd() % 100000);
	case 4:
		return (int64_t)(rnd() % 1000);
	case 5:
		return 0;
	case 6:
		return (int64_t)(rnd() >> 1);
	case 7:
		return -(int64_t)(rnd() >> 1);
	default:
		return 1000000000000ll + (int64_t)(rnd() % 10000000000ll);
	}
}

/* One random event; its name is written into namebuf (reused). */
static void rnd_event(jsonw_event *ev, char *namebuf, unsigned i)
{
	static const char phs[] = "XXXXXXXXXiMBECsfX";
	uint64_t r = rnd();
	size_t n;

	memset(ev, 0, sizeof(*ev));
	ev->ph = phs[r % (sizeof(phs) - 1)];
	if ((r >> 8) % 64 == 0) {
		ev->name = (strview){NULL, 0};
	} else if ((r >> 8) % 64 <= 8) {
		/* Ever new names: the cache and the prefixes are forgotten
		 * (past 1 MiB of prefixes: every 20,000 events or so). */
		n = (size_t)snprintf(namebuf, 256,
				     "generated_function_name_%u_%llu_of_a_template_instance"
				     "_whose_name_is_long_as_c_plus_plus_names_are_long_in_traces",
				     i, (unsigned long long)(rnd() % 100000));
		ev->name = (strview){namebuf, n};
	} else {
		const char *s = names[(r >> 16) % NNAMES];

		n = strlen(s);
		memcpy(namebuf, s, n);
		ev->name = (strview){namebuf, n};
	}
	if ((r >> 24) % 5 == 0)
		ev->cat = (strview){NULL, 0};
	else
		ev->cat = strview_c(cats[(r >> 28) % NCATS]);
	switch ((r >> 32) % 8) {
	case 0:
		ev->pid = (int64_t)(rnd() % 100000);
		ev->tid = ev->pid + (int64_t)(rnd() % 3);
		break;
	case 1:
		ev->pid = -1;
		ev->tid = INT64_MIN;
		break;
	case 2:
		ev->pid = INT64_MAX;
		ev->tid = 0;
		break;
	default:
		ev->pid = 4242;
		ev->tid = 4242 + (int64_t)((r >> 40) % 3);
		break;
	}
	ev->ts_ns = rnd_time();
	ev->dur_ns = rnd_time();
	r = rnd();
	if (r % 10 == 0)
		ev->args = strview_c("{\"a\":1}");
	else if (r % 10 == 1)
		ev->args = (strview){"{}", 0}; /* empty text: no args written */
	if ((r >> 8) % 12 == 0) {
		ev->has_id = true;
		ev->id = rnd();
	}
	if ((r >> 16) % 15 == 0)
		ev->scope = 't';
	if ((r >> 24) % 20 == 0)
		ev->bind_enclosing = true;
}

/* Writes nevents random events (seed) through a JSON sink on fd. */
static void write_events(int fd, int level, unsigned nevents, uint64_t seed)
{
	model_trace *m = model_new();
	sink_meta meta = {.model = m};
	char *namebuf = malloc(256);
	trace_sink *s;
	int err = 0;

	MUST(m != NULL && namebuf != NULL);
	s = sink_json_new(fd, level, &err);
	MUST(s != NULL);
	CHECK_INT(s->begin(s, &meta), ==, 0);
	rng = seed;
	for (unsigned i = 0; i < nevents; i++) {
		sink_event se = {0};

		rnd_event(&se.ev, namebuf, i);
		err = s->event(s, &se);
		if (err != 0)
			break;
		/* The name's bytes are reused at once. */
		memset(namebuf, 'Z', 256);
	}
	CHECK_INT(err, ==, 0);
	CHECK_INT(s->end(s, &meta), ==, 0);
	CHECK_UINT(s->stats.events, ==, nevents);
	s->free(s);
	free(namebuf);
	model_free(m);
}

/* What the sink wrote for the same events when it formatted each one as
 * it came: its beginning and end as for no event, and between them a
 * newline and jsonw_event_write for each event. */
static char *want_events(unsigned nevents, uint64_t seed, size_t *len)
{
	int fd = memfd_create("none", 0);
	char *none, *namebuf = malloc(256), *out;
	const char *mid;
	size_t nnone;
	ostream o;
	jsonw w;

	MUST(fd >= 0 && namebuf != NULL);
	write_events(fd, -1, 0, seed);
	none = read_all(fd, &nnone);
	close(fd);
	mid = memmem(none, nnone, "[\n]", 3);
	MUST(mid != NULL);
	MUST(ostream_open_mem(&o) == 0);
	ostream_write(&o, none, (size_t)(mid + 1 - none));
	jsonw_init(&w, &o);
	w.depth = 1; /* in traceEvents, before its first element */
	rng = seed;
	for (unsigned i = 0; i < nevents; i++) {
		jsonw_event ev;

		rnd_event(&ev, namebuf, i);
		ostream_putc(&o, '\n');
		jsonw_event_write(&w, &ev);
	}
	ostream_write(&o, mid + 1, nnone - (size_t)(mid + 1 - none));
	MUST(ostream_error(&o) == 0);
	out = malloc(o.len);
	MUST(out != NULL);
	memcpy(out, o.buf, o.len);
	*len = o.len;
	ostream_finish(&o);
	free(none);
	free(namebuf);
	return out;
}

/* The events deferred give the bytes of the events formatted one by one;
 * gzip's read back to them. Returns the plain bytes (the caller frees). */
static char *check_sink(unsigned nevents, uint64_t seed, size_t *len_out)
{
	int fd_x = memfd_create("x", 0), fd_gz = memfd_create("gz", 0);
	size_t nx, nwant, ngz, nplain;
	char *x, *want, *gz, *plain;

	MUST(fd_x >= 0 && fd_gz >= 0);
	write_events(fd_x, -1, nevents, seed);
	write_events(fd_gz, 1, nevents, seed);
	x = read_all(fd_x, &nx);
	want = want_events(nevents, seed, &nwant);
	gz = read_all(fd_gz, &ngz);
	CHECK_UINT(nx, ==, nwant);
	if (nx == nwant && memcmp(x, want, nx) != 0) {
		size_t i = 0;

		while (x[i] == want[i])
			i++;
		check_fail_at(__FILE__, __LINE__,
			      "deferred and text differ at byte %zu: %.60s | %.60s", i,
			      x + (i > 20 ? i - 20 : 0), want + (i > 20 ? i - 20 : 0));
	}
	plain = gunzip(gz, ngz, &nplain);
	CHECK(nplain == nx && memcmp(plain, x, nx) == 0);
	free(plain);
	free(gz);
	free(want);
	close(fd_x);
	close(fd_gz);
	*len_out = nx;
	return x;
}

/* The other FORKTRACE_THREADS setting (1 or 3) in a child writes the same
 * bytes. */
static void check_threads(const char *self, const char *bytes, size_t n, unsigned nevents,
			  uint64_t seed)
{
	const char *env = getenv("FORKTRACE_THREADS");
	const char *other = env != NULL && strcmp(env, "1") == 0 ? "3" : "1";
	int fd = memfd_create("other", 0);
	char fdarg[16], nev[16], sd[32];
	size_t len;
	char *got;
	int status;
	pid_t pid;

	MUST(fd >= 0);
	snprintf(fdarg, sizeof(fdarg), "%d", fd);
	snprintf(nev, sizeof(nev), "%u", nevents);
	snprintf(sd, sizeof(sd), "%llu", (unsigned long long)seed);
	fflush(stdout);
	pid = fork();
	MUST(pid >= 0);
	if (pid == 0) {
		setenv("FORKTRACE_THREADS", other, 1);
		execl(self, self, "write", fdarg, nev, sd, (char *)NULL);
		_exit(127);
	}
	MUST(waitpid(pid, &status, 0) == pid);
	CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
	got = read_all(fd, &len);
	CHECK_MSG(len == n && memcmp(got, bytes, n) == 0,
		  "FORKTRACE_THREADS=%s wrote %zu bytes, not the same %zu", other, len, n);
	free(got);
	close(fd);
}

/* Numbers as printf writes them: every power of ten and its neighbours,
 * the extremes, random values of every length. */
static void check_numbers(void)
{
	char got[OSTREAM_NUM_MAX + 1], want[64];
	uint64_t p10 = 1;

	for (int i = 0; i < 100000; i++) {
		uint64_t u;
		int64_t s;
		size_t n;
		int wn;

		if (i < 60) {
			u = p10 + (uint64_t)(i % 3) - 1;
			if (i % 3 == 2)
				p10 = p10 > UINT64_MAX / 10 ? p10 : p10 * 10;
		} else if (i < 70) {
			u = UINT64_MAX - (uint64_t)(i - 60);
		} else {
			u = rnd() >> (rnd() % 64);
		}
		n = ostream_fmt_u64(got, u);
		wn = snprintf(want, sizeof(want), "%llu", (unsigned long long)u);
		if (n != (size_t)wn || memcmp(got, want, n) != 0) {
			check_fail_at(__FILE__, __LINE__, "u64 %s: %.*s", want, (int)n, got);
			break;
		}
		s = (int64_t)u;
		if (i == 70)
			s = INT64_MIN;
		n = ostream_fmt_i64(got, s);
		wn = snprintf(want, sizeof(want), "%lld", (long long)s);
		if (n != (size_t)wn || memcmp(got, want, n) != 0) {
			check_fail_at(__FILE__, __LINE__, "i64 %s: %.*s", want, (int)n, got);
			break;
		}
		n = ostream_fmt_ts(got, s);
		{
			uint64_t m = s < 0 ? (uint64_t)0 - (uint64_t)s : (uint64_t)s;

			wn = snprintf(want, sizeof(want), "%s%llu.%03u", s < 0 ? "-" : "",
				      (unsigned long long)(m / 1000), (unsigned)(m % 1000));
		}
		if (n != (size_t)wn || memcmp(got, want, n) != 0) {
			check_fail_at(__FILE__, __LINE__, "ts %s: %.*s", want, (int)n, got);
			break;
		}
	}
}

/* Deferred slices in a memory stream are expanded at once, the same text. */
static void check_mem_stream(void)
{
	ostream a, b;
	uint32_t p0, p1;

	MUST(ostream_open_mem(&a) == 0 && ostream_open_mem(&b) == 0);
	p0 = ostream_prefix(&a, "<pre0 ts=", 9);
	p1 = ostream_prefix(&a, "", 0);
	CHECK_UINT(p0, ==, 0);
	CHECK_UINT(p1, ==, 1);
	for (int i = 0; i < 20000; i++) {
		int64_t ts = (int64_t)(rnd() >> 2) - (INT64_MAX >> 3), dur = -i;

		ostream_x(&a, i % 2 ? p1 : p0, ts, dur);
		ostream_puts(&a, "|");
		if (i % 2 == 0)
			ostream_write(&b, "<pre0 ts=", 9);
		ostream_ts(&b, ts);
		ostream_write(&b, ",\"dur\":", 7);
		ostream_ts(&b, dur);
		ostream_write(&b, "}|", 2);
		if (i == 10000) {
			ostream_prefix_reset(&a);
			CHECK_UINT(ostream_prefix_bytes(&a), ==, 0);
			CHECK_UINT(ostream_prefix(&a, "<pre0 ts=", 9), ==, 0);
			CHECK_UINT(ostream_prefix(&a, "", 0), ==, 1);
		}
	}
	CHECK(ostream_error(&a) == 0 && a.len == b.len && memcmp(a.buf, b.buf, a.len) == 0);
	CHECK_UINT(ostream_prefix(&a, "x", OSTREAM_PREFIX_MAX + 1), ==, OSTREAM_NO_PREFIX);
	ostream_finish(&a);
	ostream_finish(&b);
}

/* Text and deferred slices across many blocks, and one write of many
 * blocks, to a file: plain and gzip read back the same. Without text:
 * blocks of deferred slices alone. */
static void check_blocks(int level, bool text)
{
	static char big[3 * OSTREAM_BLOCK + 17];
	int fd = memfd_create("blocks", 0);
	ostream o, want;
	char *got, *plain;
	size_t len, plen;
	uint32_t id;

	MUST(fd >= 0);
	memset(big, 'x', sizeof(big));
	big[0] = '<';
	big[sizeof(big) - 1] = '>';
	MUST(ostream_open(&o, fd, level) == 0);
	MUST(ostream_open_mem(&want) == 0);
	id = ostream_prefix(&o, "\n,{\"p\":", 7);
	for (int i = 0; i < 100000; i++) {
		ostream_x(&o, id, i, -i);
		ostream_write(&want, "\n,{\"p\":", 7);
		ostream_ts(&want, i);
		ostream_write(&want, ",\"dur\":", 7);
		ostream_ts(&want, -i);
		ostream_putc(&want, '}');
		if (text && i % 1000 == 0) {
			ostream_u64(&o, (uint64_t)i);
			ostream_u64(&want, (uint64_t)i);
		}
		if (i == 50000) {
			if (text) {
				ostream_write(&o, big, sizeof(big));
				ostream_write(&want, big, sizeof(big));
			}
			/* Prefixes forgotten while blocks that use them are in
			 * flight: theirs stay until they are written. */
			ostream_prefix_reset(&o);
			id = ostream_prefix(&o, "\n,{\"p\":", 7);
		}
	}
	CHECK_INT(ostream_finish(&o), ==, 0);
	got = read_all(fd, &len);
	if (level >= 0) {
		plain = gunzip(got, len, &plen);
		CHECK_UINT(ostream_bytes(&o), ==, len);
		free(got);
		got = plain;
		len = plen;
	} else {
		CHECK_UINT(ostream_bytes(&o), ==, len);
	}
	CHECK_MSG(len == want.len && memcmp(got, want.buf, len) == 0,
		  "level %d: %zu bytes, want %zu", level, len, want.len);
	free(got);
	ostream_finish(&want);
	close(fd);
}

/* Write errors stick: seen by ostream_error once the pipeline has had a
 * few blocks, always by ostream_finish. */
static void check_errors(int level)
{
	static char block[OSTREAM_BLOCK];
	ostream o;
	int fd = open("/dev/full", O_WRONLY);

	if (fd >= 0) {
		CHECK(ostream_open(&o, fd, level) == 0);
		for (int i = 0; i < 4 * (int)OSTREAM_INFLIGHT && ostream_error(&o) == 0; i++)
			ostream_write(&o, block, sizeof(block));
		CHECK_INT(ostream_error(&o), ==, -ENOSPC);
		ostream_write(&o, block, sizeof(block));
		CHECK_INT(ostream_finish(&o), ==, -ENOSPC);
		close(fd);
	}
	fd = open("/dev/null", O_RDONLY);
	MUST(fd >= 0);
	CHECK(ostream_open(&o, fd, level) == 0);
	ostream_puts(&o, "x");
	CHECK_INT(ostream_finish(&o), ==, -EBADF);
	CHECK_INT(ostream_finish(&o), ==, -EBADF); /* twice: no-op */
	close(fd);
	CHECK_INT(ostream_open(&o, 1, 10), ==, -EINVAL);
}

int main(int argc, char **argv)
{
	const unsigned nevents = 60000;
	const uint64_t seed = 12345;
	char *bytes;
	size_t n;

	if (argc == 5 && strcmp(argv[1], "write") == 0) {
		/* The child of check_threads. */
		write_events(atoi(argv[2]), -1, (unsigned)atoi(argv[3]),
			     strtoull(argv[4], NULL, 10));
		return check_done("ostream write");
	}
	bytes = check_sink(nevents, seed, &n);
	check_threads(argv[0], bytes, n, nevents, seed);
	free(bytes);
	free(check_sink(3000, 7, &n));
	check_numbers();
	check_mem_stream();
	check_blocks(-1, true);
	check_blocks(1, true);
	check_blocks(-1, false);
	check_blocks(6, false);
	check_errors(-1);
	check_errors(6);
	return check_done("ostream");
}
