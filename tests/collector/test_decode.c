/*
 * The collector's side of the wire contract: every byte-exact vector in
 * tests/wire/vectors decodes to the values tests/wire/README.md lists, and
 * malformed streams and payloads are refused, never guessed at.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "internal.h"

#define T0 5000000000000ll

static bool str_is(wire_str s, const char *want)
{
	return s.ptr && s.len == strlen(want) && memcmp(s.ptr, want, s.len) == 0;
}

static bool argv_is(const wire_msg *m, const char *const *want, uint32_t n)
{
	if (!m->argv || m->argc != n)
		return false;
	for (uint32_t i = 0; i < n; i++) {
		wire_str s = {m->argv[i].via.str.ptr, m->argv[i].via.str.size};
		if (!str_is(s, want[i]))
			return false;
	}
	return true;
}

static char *load(const char *dir, const char *name, size_t *n)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s.bin", dir, name);
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "cannot open %s\n", path);
		exit(1);
	}
	static char buf[1 << 16];
	*n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	return buf;
}

/* RU_SELF and RU_CHILDREN of tests/wire/README.md. */
static bool ru_self_is(const model_rusage *r)
{
	return r->user_ns == 1234567890123 && r->sys_ns == 250000000 && r->maxrss_kb == 204800 &&
	       r->minflt == 51234 && r->majflt == 3 && r->nvcsw == 17 && r->nivcsw == 300 &&
	       r->inblock == 0 && r->oublock == 8;
}

static bool ru_children_is(const model_rusage *r)
{
	return r->user_ns == 5000000000 && r->sys_ns == 120000 && r->maxrss_kb == 4096 &&
	       r->minflt == 70000 && r->majflt == 0 && r->nvcsw == 250 && r->nivcsw == 1 &&
	       r->inblock == 96 && r->oublock == 65536;
}

/* Splits the vector into its one frame and decodes it. */
static void decode_vector(const char *dir, const char *name, unsigned type, msgpack_unpacked *up,
			  wire_msg *m)
{
	size_t n;
	char *data = load(dir, name, &n);
	wire_frame f;

	CHECK(wire_next_frame(data, n, FT_WIRE_MAX_PAYLOAD, &f) == 1);
	CHECK(f.size == n);
	CHECK(f.type == type);
	/* Every proper prefix of a frame asks for more bytes. */
	for (size_t k = 0; k < n; k++)
		CHECK(wire_next_frame(data, k, FT_WIRE_MAX_PAYLOAD, &f) == 0);
	wire_next_frame(data, n, FT_WIRE_MAX_PAYLOAD, &f);
	CHECK(wire_decode(f.payload, f.len, f.type, up, m) == 0);
	/* Trailing garbage after the map is refused. */
	if (f.len + 1 < sizeof(char[1 << 16])) {
		char copy[1 << 16];
		msgpack_unpacked tmp;
		wire_msg m2;
		memcpy(copy, f.payload, f.len);
		copy[f.len] = (char)0xc0;
		msgpack_unpacked_init(&tmp);
		CHECK(wire_decode(copy, f.len + 1, f.type, &tmp, &m2) == -EBADMSG);
		msgpack_unpacked_destroy(&tmp);
	}
}

static void test_vectors(const char *dir)
{
	msgpack_unpacked up;
	wire_msg m;

	msgpack_unpacked_init(&up);

	decode_vector(dir, "hello", FT_MSG_HELLO, &up, &m);
	static const char *const hello_argv[] = {"printf", "%s\n", "h\xc3\xa9llo"};
	CHECK(m.ts == T0 && m.tid == 4242 && m.pid == 4242 && m.ppid == 1);
	CHECK(argv_is(&m, hello_argv, 3));
	CHECK(str_is(m.cwd, "/tmp/a directory name longer than 31 bytes"));
	CHECK(str_is(m.exe, "/usr/bin/printf"));
	CHECK(m.realtime == 1700000000123456789ull && m.start_ticks == 123456);
	CHECK(str_is(m.name, "printf") && m.flags == FT_HELLO_ARGV_TRUNCATED);

	CHECK(!wire_has(&m, FT_K_EXEC_TS) && !wire_has(&m, FT_K_TABLE_SLOT));

	static const char *const true_argv[] = {"true"};
	decode_vector(dir, "hello_exec_ts", FT_MSG_HELLO, &up, &m);
	CHECK(m.ts == T0 + 100 && m.tid == 4250 && m.pid == 4250 && m.ppid == 4242);
	CHECK(argv_is(&m, true_argv, 1) && str_is(m.cwd, "/") && str_is(m.exe, "/usr/bin/true"));
	CHECK(m.realtime == 1700000000123556789ull && m.start_ticks == 123460);
	CHECK(str_is(m.name, "true") && m.flags == 0);
	CHECK(wire_has(&m, FT_K_EXEC_TS) && m.exec_ts == T0 + 50);
	CHECK(!wire_has(&m, FT_K_TABLE_SLOT));

	decode_vector(dir, "hello_resumed", FT_MSG_HELLO, &up, &m);
	CHECK(m.ts == T0 + 200 && m.pid == 4250 && m.realtime == 1700000000123656789ull);
	CHECK(argv_is(&m, true_argv, 1) && m.flags == FT_HELLO_RESUMED);
	CHECK(m.exec_ts == T0 + 50);
	CHECK(wire_has(&m, FT_K_TABLE_SLOT) && m.table_slot == 17);

	decode_vector(dir, "hello_forked_resumed", FT_MSG_HELLO, &up, &m);
	CHECK(m.ts == T0 + 300 && m.pid == 4251 && m.ppid == 4250 && m.start_ticks == 123470);
	CHECK(m.flags == (FT_HELLO_FORKED | FT_HELLO_RESUMED));
	CHECK(!wire_has(&m, FT_K_EXEC_TS) && m.table_slot == 18);

	CHECK(!wire_has(&m, FT_K_RANK) && !wire_has(&m, FT_K_LOCAL_RANK) &&
	      !wire_has(&m, FT_K_RANK_VAR));

	static const char *const app_argv[] = {"./app"};
	decode_vector(dir, "hello_rank", FT_MSG_HELLO, &up, &m);
	CHECK(m.ts == T0 + 400 && m.pid == 4260 && m.ppid == 4242 && m.exec_ts == T0 + 350);
	CHECK(argv_is(&m, app_argv, 1) && str_is(m.exe, "/tmp/app") && str_is(m.name, "app"));
	CHECK(wire_has(&m, FT_K_RANK) && m.rank == 3);
	CHECK(wire_has(&m, FT_K_LOCAL_RANK) && m.local_rank == 1);
	CHECK(str_is(m.rank_var, "OMPI_COMM_WORLD_RANK"));

	decode_vector(dir, "hello_local_rank", FT_MSG_HELLO, &up, &m);
	CHECK(m.ts == T0 + 500 && m.pid == 4261 && m.start_ticks == 123490);
	CHECK(!wire_has(&m, FT_K_RANK) && !wire_has(&m, FT_K_RANK_VAR) && !m.rank_var.ptr);
	CHECK(wire_has(&m, FT_K_LOCAL_RANK) && m.local_rank == 2);

	decode_vector(dir, "fork", FT_MSG_FORK, &up, &m);
	CHECK(m.ts == T0 + 1000 && m.tid == 4242 && m.child == 4243 && m.kind == FT_SPAWN_FORK);
	CHECK(wire_has(&m, FT_K_CHILD) && !wire_has(&m, FT_K_ERRNO));

	decode_vector(dir, "fork_failed", FT_MSG_FORK, &up, &m);
	CHECK(m.ts == T0 + 1100 && m.tid == 4242 && m.err == EAGAIN && m.kind == FT_SPAWN_FORK);
	CHECK(!wire_has(&m, FT_K_CHILD) && wire_has(&m, FT_K_ERRNO));

	decode_vector(dir, "vfork_exec", FT_MSG_FORK, &up, &m);
	static const char *const echo_argv[] = {"echo", "hi"};
	CHECK(m.ts == T0 + 1400 && m.child == 4247 && m.kind == FT_SPAWN_VFORK);
	CHECK(str_is(m.path, "/bin/echo") && argv_is(&m, echo_argv, 2));
	CHECK(m.exec_ts == T0 + 1450);
	CHECK(!wire_has(&m, FT_K_CHILD_ERRNO) && !wire_has(&m, FT_K_ERRNO));

	decode_vector(dir, "vfork_exec_fail", FT_MSG_FORK, &up, &m);
	static const char *const vfork_argv[] = {"nope", "x"};
	CHECK(m.ts == T0 + 1500 && m.child == 4246 && m.kind == FT_SPAWN_VFORK);
	CHECK(str_is(m.path, "/nope") && argv_is(&m, vfork_argv, 2));
	CHECK(m.exec_ts == T0 + 1600 && m.child_err == ENOENT);
	CHECK(wire_has(&m, FT_K_CHILD_ERRNO) && !wire_has(&m, FT_K_ERRNO));

	decode_vector(dir, "exec", FT_MSG_EXEC, &up, &m);
	static const char *const exec_argv[] = {"ls", "-l", "/"};
	CHECK(m.ts == T0 + 2000 && m.tid == 4243 && str_is(m.path, "ls"));
	CHECK(argv_is(&m, exec_argv, 3) && m.kind == FT_EXEC_EXECVP);

	CHECK(!wire_has(&m, FT_K_RUSAGE));

	decode_vector(dir, "exec_rusage", FT_MSG_EXEC, &up, &m);
	CHECK(m.ts == T0 + 2100 && str_is(m.path, "ls") && m.argc == 1);
	CHECK(wire_has(&m, FT_K_RUSAGE) && ru_self_is(&m.ru));
	CHECK(!wire_has(&m, FT_K_RUSAGE_CHILDREN));

	decode_vector(dir, "exec_fail", FT_MSG_EXEC_FAIL, &up, &m);
	CHECK(m.ts == T0 + 2001 && m.err == ENOENT && str_is(m.path, "ls"));

	decode_vector(dir, "spawn", FT_MSG_SPAWN, &up, &m);
	static const char *const spawn_argv[] = {"sh", "-c", "exit 3"};
	CHECK(m.ts == T0 + 3000 && m.child == 4244 && str_is(m.path, "sh"));
	CHECK(argv_is(&m, spawn_argv, 3) && m.err == 0 && m.kind == FT_SPAWN_POSIX_SPAWNP);

	decode_vector(dir, "spawn_failed", FT_MSG_SPAWN, &up, &m);
	static const char *const spawn_failed_argv[] = {"nonexistent"};
	CHECK(m.ts == T0 + 3100 && str_is(m.path, "/nonexistent"));
	CHECK(argv_is(&m, spawn_failed_argv, 1) && m.kind == FT_SPAWN_POSIX_SPAWN);
	CHECK(m.err == ENOENT && !wire_has(&m, FT_K_CHILD));

	decode_vector(dir, "wait", FT_MSG_WAIT, &up, &m);
	CHECK(m.ts == T0 + 4000 && m.child == 4244 && m.status == 768);
	CHECK(!wire_has(&m, FT_K_RUSAGE));
	decode_vector(dir, "wait_rusage", FT_MSG_WAIT, &up, &m);
	CHECK(m.ts == T0 + 4100 && m.child == 4248 && m.status == 9);
	CHECK(wire_has(&m, FT_K_RUSAGE) && ru_children_is(&m.ru));

	decode_vector(dir, "thread_start", FT_MSG_THREAD_START, &up, &m);
	CHECK(m.ts == T0 + 5000 && m.tid == 4245);
	decode_vector(dir, "thread_end", FT_MSG_THREAD_END, &up, &m);
	CHECK(m.ts == T0 + 7000 && m.tid == 4245);
	decode_vector(dir, "thread_name", FT_MSG_THREAD_NAME, &up, &m);
	CHECK(m.ts == T0 + 6000 && str_is(m.name, "worker-1"));

	decode_vector(dir, "exit", FT_MSG_EXIT, &up, &m);
	CHECK(m.ts == T0 + 8000 && m.code == -1);
	CHECK(!wire_has(&m, FT_K_RUSAGE) && !wire_has(&m, FT_K_RUSAGE_CHILDREN));
	decode_vector(dir, "exit_rusage", FT_MSG_EXIT, &up, &m);
	CHECK(m.ts == T0 + 8100 && m.code == 0);
	CHECK(wire_has(&m, FT_K_RUSAGE) && ru_self_is(&m.ru));
	CHECK(wire_has(&m, FT_K_RUSAGE_CHILDREN) && ru_children_is(&m.ru_children));
	decode_vector(dir, "signal", FT_MSG_SIGNAL, &up, &m);
	CHECK(m.ts == T0 + 9000 && m.signo == 11);

	decode_vector(dir, "shell_begin", FT_MSG_SHELL_BEGIN, &up, &m);
	CHECK(m.ts == T0 + 10000 && m.kind == FT_SPAWN_SYSTEM && str_is(m.cmd, "echo hi | wc -c"));
	decode_vector(dir, "shell_end", FT_MSG_SHELL_END, &up, &m);
	CHECK(m.ts == T0 + 11000 && m.status == 0 && str_is(m.cmd, "echo hi | wc -c"));
	CHECK(!wire_has(&m, FT_K_ERRNO));
	decode_vector(dir, "shell_end_failed", FT_MSG_SHELL_END, &up, &m);
	CHECK(m.ts == T0 + 11500 && m.err == EMFILE && m.status == -1);
	CHECK(m.kind == FT_SPAWN_POPEN && str_is(m.cmd, "ls"));

	decode_vector(dir, "lost", FT_MSG_LOST, &up, &m);
	CHECK(m.ts == T0 + 12000 && m.count == 70000);

	decode_vector(dir, "continue", FT_MSG_CONTINUE, &up, &m);
	CHECK(m.ts == T0 + 13000 && m.tid == 4242 && m.table_slot == 17);

	decode_vector(dir, "shm", FT_MSG_SHM, &up, &m);
	CHECK(m.ts == T0 + 14000 && m.tid == 4242 && m.count == 4 && m.slot == 8);
	CHECK(m.tsc == 0x123456789abcull && m.size == 65536);

	decode_vector(dir, "events", FT_MSG_EVENTS, &up, &m);
	static const char records[] = "\x92\x00\xcf\x00\x00\x12\x34\x56\x78\x9a\xbc"
				      "\x93\x03\x0a\xa4step\x92\x04\x14";
	CHECK(m.ts == T0 + 15000 && m.tid == 4242 && m.slot == 8 && m.offset == 4096);
	CHECK(m.tsc == 0x123456789abcull + 5);
	CHECK(m.data.ptr && m.data.len == sizeof(records) - 1 &&
	      memcmp(m.data.ptr, records, sizeof(records) - 1) == 0);

	decode_vector(dir, "module", FT_MSG_MODULE, &up, &m);
	CHECK(m.ts == T0 + 16000 && str_is(m.path, "/usr/lib/libfoo.so"));
	CHECK(m.addr == 0x7f0000000000ull && m.lo == 0x7f0000001000ull &&
	      m.hi == 0x7f0000005000ull);

	decode_vector(dir, "remote", FT_MSG_REMOTE, &up, &m);
	CHECK(m.ts == T0 + 17000 && m.tid == 4270 && m.pid == 4270);
	CHECK(str_is(m.path, "/opt/forktrace/bin/forktrace") && str_is(m.name, "user@node2"));
	CHECK(wire_has(&m, FT_K_FLAGS) && m.flags == 0 && !wire_has(&m, FT_K_CHILD));

	decode_vector(dir, "remote_spawn", FT_MSG_REMOTE, &up, &m);
	CHECK(m.ts == T0 + 18000 && m.tid == 4242 && m.pid == 4242);
	CHECK(wire_has(&m, FT_K_CHILD) && m.child == 4271);
	CHECK(str_is(m.name, "node3") && m.flags == FT_REMOTE_UNTRACED);

	msgpack_unpacked_destroy(&up);
}

static void test_bad_frames(void)
{
	wire_frame f;
	unsigned char h[FT_WIRE_HEADER_SIZE];

	CHECK(wire_next_frame("GET / HTTP/1.1\r\n", 16, 1024, &f) == WIRE_ERR_MAGIC);
	CHECK(wire_next_frame("G", 1, 1024, &f) == WIRE_ERR_MAGIC);
	CHECK(wire_next_frame("FT\x02", 3, 1024, &f) == WIRE_ERR_VERSION);
	ft_wire_header(h, FT_MSG_HELLO, 1025);
	CHECK(wire_next_frame((char *)h, sizeof(h), 1024, &f) == WIRE_ERR_TOO_BIG);
	ft_wire_header(h, FT_MSG_HELLO, 0xffffffffu);
	CHECK(wire_next_frame((char *)h, sizeof(h), FT_WIRE_MAX_PAYLOAD, &f) == WIRE_ERR_TOO_BIG);
	CHECK(strcmp(wire_frame_strerror(WIRE_ERR_TOO_BIG), "an oversized frame") == 0);
}

static void test_bad_payloads(void)
{
	static const struct {
		const char *bytes;
		size_t n;
		const char *what;
	} bad[] = {
		{"\x90", 1, "an array, not a map"},
		{"\x81\xa1k\x01", 4, "a string key"},
		{"\x81\x01\xa1x", 4, "TS as a string"},
		{"\x81\x07\x91\x01", 4, "ARGV with an integer element"},
		{"\x81\x06\x01", 3, "PATH as an integer"},
		{"\x82\x01", 2, "a map cut short"},
		{"", 0, "nothing"},
		{"\x81\x01\xcf\xff\xff\xff\xff\xff\xff\xff\xff", 11, "TS above INT64_MAX"},
		/* Found by fuzz_wire: announced sizes far beyond the frame. */
		{"\x81\x07\xdd\xdd\xdd\xdd\xdd\x01", 8, "an array of 3.7e9 elements"},
		{"\xdf\xff\xff\xff\xff", 5, "a map of 4e9 pairs"},
		{"\x81\x06\xdb\x7f\xff\xff\xff", 7, "a 2 GiB string in 7 bytes"},
		{"\x81\x01\xc1", 3, "the never-used byte 0xc1"},
		{"\x81\x20\xff", 3, "a negative RANK"},
		{"\x81\x21\xa1x", 4, "LOCAL_RANK as a string"},
		{"\x81\x22\x01", 3, "RANK_VAR as an integer"},
		{"\x81\x23\x98\x01\x01\x01\x01\x01\x01\x01\x01", 11, "RUSAGE of 8 entries"},
		{"\x81\x24\x99\x01\x01\x01\x01\xff\x01\x01\x01\x01", 12,
		 "RUSAGE_CHILDREN with a negative entry"},
		{"\x81\x23\x01", 3, "RUSAGE as an integer"},
	};
	msgpack_unpacked up;
	wire_msg m;

	msgpack_unpacked_init(&up);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_MSG(wire_decode(bad[i].bytes, bad[i].n, FT_MSG_EXEC, &up, &m) == -EBADMSG,
			  "accepted a payload with %s", bad[i].what);
	}
	/* Unknown keys are skipped: a newer agent may send more. */
	CHECK(wire_decode("\x82\x01\x05\x3f\xa3new", 8, FT_MSG_EXIT, &up, &m) == 0 && m.ts == 5);
	/* So are entries of a RUSAGE past the nine this collector knows. */
	CHECK(wire_decode("\x81\x23\x9a\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a", 13, FT_MSG_EXIT,
			  &up, &m) == 0 &&
	      m.ru.user_ns == 1 && m.ru.oublock == 9);
	msgpack_unpacked_destroy(&up);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: test_decode VECTOR_DIR\n");
		return 2;
	}
	test_vectors(argv[1]);
	test_bad_frames();
	test_bad_payloads();
	return check_done("decode");
}
