/*
 * Wire vectors, C side: encode one fixed message of every type with the
 * agent's encoder (agent/encode.c) and compare byte for byte with the
 * checked-in vectors/<name>.bin (produced independently by gen_vectors.py).
 * Also checks that every encoder reports -ENOBUFS, not a short frame, when
 * the buffer is one byte too small.
 *
 * usage: wire_vectors VECTOR_DIR
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "forktrace/wire.h"
#include "encode.h"

#define T0 5000000000000ull
#define TSC0 0x123456789abcull
#define BUF 4096

/* Encode into a buffer of cap bytes; the vectors are built by these. */
typedef ssize_t (*vec_fn)(unsigned char *buf, size_t cap);

static ssize_t v_hello(unsigned char *b, size_t cap)
{
	static const char *const argv[] = {"printf", "%s\n", "h\xc3\xa9llo"};
	struct enc_hello h = {
		.ts = T0,
		.realtime = 1700000000123456789ull,
		.start_ticks = 123456,
		.pid = 4242,
		.ppid = 1,
		.tid = 4242,
		.flags = FT_HELLO_ARGV_TRUNCATED,
		.exe = "/usr/bin/printf",
		.cwd = "/tmp/a directory name longer than 31 bytes",
		.name = "printf",
		.argv = argv,
		.argc = 3,
	};

	return enc_hello(b, cap, &h);
}

/* The HELLO of an image whose exec handed over the call's time. */
static ssize_t v_hello_exec_ts(unsigned char *b, size_t cap)
{
	static const char *const argv[] = {"true"};
	struct enc_hello h = {
		.ts = T0 + 100,
		.exec_ts = T0 + 50,
		.realtime = 1700000000123556789ull,
		.start_ticks = 123460,
		.pid = 4250,
		.ppid = 4242,
		.tid = 4250,
		.exe = "/usr/bin/true",
		.cwd = "/",
		.name = "true",
		.argv = argv,
		.argc = 1,
	};

	return enc_hello(b, cap, &h);
}

/* The same image's HELLO on a connection, after it wrote in table slot 17. */
static ssize_t v_hello_resumed(unsigned char *b, size_t cap)
{
	static const char *const argv[] = {"true"};
	struct enc_hello h = {
		.ts = T0 + 200,
		.exec_ts = T0 + 50,
		.realtime = 1700000000123656789ull,
		.start_ticks = 123460,
		.from_table = true,
		.table_slot = 17,
		.pid = 4250,
		.ppid = 4242,
		.tid = 4250,
		.flags = FT_HELLO_RESUMED,
		.exe = "/usr/bin/true",
		.cwd = "/",
		.name = "true",
		.argv = argv,
		.argc = 1,
	};

	return enc_hello(b, cap, &h);
}

/* A fork child's HELLO on a connection, after it wrote in table slot 18
 * (no EXEC_TS: it was not exec'd). */
static ssize_t v_hello_forked_resumed(unsigned char *b, size_t cap)
{
	static const char *const argv[] = {"true"};
	struct enc_hello h = {
		.ts = T0 + 300,
		.realtime = 1700000000123756789ull,
		.start_ticks = 123470,
		.from_table = true,
		.table_slot = 18,
		.pid = 4251,
		.ppid = 4250,
		.tid = 4251,
		.flags = FT_HELLO_FORKED | FT_HELLO_RESUMED,
		.exe = "/usr/bin/true",
		.cwd = "/",
		.name = "true",
		.argv = argv,
		.argc = 1,
	};

	return enc_hello(b, cap, &h);
}

/* An exec'd image with a launcher's rank and local rank. */
static ssize_t v_hello_rank(unsigned char *b, size_t cap)
{
	static const char *const argv[] = {"./app"};
	struct enc_hello h = {
		.ts = T0 + 400,
		.exec_ts = T0 + 350,
		.realtime = 1700000000123856789ull,
		.start_ticks = 123480,
		.pid = 4260,
		.ppid = 4242,
		.tid = 4260,
		.exe = "/tmp/app",
		.cwd = "/",
		.name = "app",
		.argv = argv,
		.argc = 1,
		.has_rank = true,
		.rank = 3,
		.rank_var = "OMPI_COMM_WORLD_RANK",
		.has_local_rank = true,
		.local_rank = 1,
	};

	return enc_hello(b, cap, &h);
}

/* An image with a local rank only (LOCAL_RANK set, no rank variable). */
static ssize_t v_hello_local_rank(unsigned char *b, size_t cap)
{
	static const char *const argv[] = {"./app"};
	struct enc_hello h = {
		.ts = T0 + 500,
		.realtime = 1700000000123956789ull,
		.start_ticks = 123490,
		.pid = 4261,
		.ppid = 4242,
		.tid = 4261,
		.exe = "/tmp/app",
		.cwd = "/",
		.name = "app",
		.argv = argv,
		.argc = 1,
		.has_local_rank = true,
		.local_rank = 2,
	};

	return enc_hello(b, cap, &h);
}

static ssize_t v_fork(unsigned char *b, size_t cap)
{
	return enc_fork(b, cap, T0 + 1000, 4242, FT_SPAWN_FORK, 4243, 0);
}

static ssize_t v_fork_failed(unsigned char *b, size_t cap)
{
	return enc_fork(b, cap, T0 + 1100, 4242, FT_SPAWN_FORK, -1, EAGAIN);
}

static ssize_t v_vfork_exec(unsigned char *b, size_t cap)
{
	static const char *const argv[] = {"echo", "hi"};

	return enc_vfork(b, cap, T0 + 1400, 4242, 4247, T0 + 1450, "/bin/echo", argv, 2, 0);
}

static ssize_t v_vfork_exec_fail(unsigned char *b, size_t cap)
{
	static const char *const argv[] = {"nope", "x"};

	return enc_vfork(b, cap, T0 + 1500, 4242, 4246, T0 + 1600, "/nope", argv, 2, ENOENT);
}

static ssize_t v_exec(unsigned char *b, size_t cap)
{
	static const char *const argv[] = {"ls", "-l", "/"};

	return enc_exec(b, cap, T0 + 2000, 4243, FT_EXEC_EXECVP, "ls", argv, 3, NULL);
}

/* Resource use in each integer form: CPU times past 2^32 ns (uint64) and
 * below (uint32), counts as uint32, uint16, uint8 and fixint. */
static const struct enc_rusage ru_self = {
	{1234567890123ull, 250000000, 204800, 51234, 3, 17, 300, 0, 8}};
static const struct enc_rusage ru_children = {
	{5000000000ull, 120000, 4096, 70000, 0, 250, 1, 96, 65536}};

static ssize_t v_exec_rusage(unsigned char *b, size_t cap)
{
	static const char *const argv[] = {"ls"};

	return enc_exec(b, cap, T0 + 2100, 4243, FT_EXEC_EXECVP, "ls", argv, 1, &ru_self);
}

static ssize_t v_exec_fail(unsigned char *b, size_t cap)
{
	return enc_exec_fail(b, cap, T0 + 2001, 4243, ENOENT, "ls");
}

static ssize_t v_spawn(unsigned char *b, size_t cap)
{
	static const char *const argv[] = {"sh", "-c", "exit 3"};

	return enc_spawn(b, cap, T0 + 3000, 4242, FT_SPAWN_POSIX_SPAWNP, 4244, 0, "sh", argv, 3);
}

static ssize_t v_spawn_failed(unsigned char *b, size_t cap)
{
	static const char *const argv[] = {"nonexistent"};

	return enc_spawn(b, cap, T0 + 3100, 4242, FT_SPAWN_POSIX_SPAWN, 4249, ENOENT,
			 "/nonexistent", argv, 1);
}

static ssize_t v_wait(unsigned char *b, size_t cap)
{
	return enc_wait(b, cap, T0 + 4000, 4242, 4244, 3 << 8, NULL);
}

/* A child killed by SIGKILL, reaped through wait4. */
static ssize_t v_wait_rusage(unsigned char *b, size_t cap)
{
	return enc_wait(b, cap, T0 + 4100, 4242, 4248, 9, &ru_children);
}

static ssize_t v_thread_start(unsigned char *b, size_t cap)
{
	return enc_thread(b, cap, FT_MSG_THREAD_START, T0 + 5000, 4245, NULL);
}

static ssize_t v_thread_end(unsigned char *b, size_t cap)
{
	return enc_thread(b, cap, FT_MSG_THREAD_END, T0 + 7000, 4245, NULL);
}

static ssize_t v_thread_name(unsigned char *b, size_t cap)
{
	return enc_thread_name(b, cap, T0 + 6000, 4245, "worker-1");
}

static ssize_t v_exit(unsigned char *b, size_t cap)
{
	return enc_exit(b, cap, T0 + 8000, 4242, -1, NULL, NULL);
}

static ssize_t v_exit_rusage(unsigned char *b, size_t cap)
{
	return enc_exit(b, cap, T0 + 8100, 4242, 0, &ru_self, &ru_children);
}

static ssize_t v_signal(unsigned char *b, size_t cap)
{
	return enc_signal(b, cap, T0 + 9000, 4242, 11);
}

static ssize_t v_shell_begin(unsigned char *b, size_t cap)
{
	return enc_shell(b, cap, 0, T0 + 10000, 4242, FT_SPAWN_SYSTEM, "echo hi | wc -c", 0);
}

static ssize_t v_shell_end(unsigned char *b, size_t cap)
{
	return enc_shell(b, cap, 1, T0 + 11000, 4242, FT_SPAWN_SYSTEM, "echo hi | wc -c", 0);
}

static ssize_t v_shell_end_failed(unsigned char *b, size_t cap)
{
	return enc_shell_fail(b, cap, T0 + 11500, 4242, FT_SPAWN_POPEN, "ls", -1, EMFILE);
}

static ssize_t v_lost(unsigned char *b, size_t cap)
{
	return enc_lost(b, cap, T0 + 12000, 4242, 70000);
}

static ssize_t v_continue(unsigned char *b, size_t cap)
{
	return enc_continue(b, cap, T0 + 13000, 4242, 17);
}

static ssize_t v_shm(unsigned char *b, size_t cap)
{
	return enc_shm(b, cap, T0 + 14000, 4242, 8, 4, 65536, TSC0);
}

/* EVENTS is sent as its head and the records behind it: the vector is
 * both, and does not fit when the records do not. */
static ssize_t v_events(unsigned char *b, size_t cap)
{
	/* [TIME, TSC0], [REGION_BEGIN, 10, "step"], [REGION_END, 20] */
	static const unsigned char records[] = {
		0x92,
		FT_EV_TIME,
		0xcf,
		0x00,
		0x00,
		0x12,
		0x34,
		0x56,
		0x78,
		0x9a,
		0xbc,
		0x93,
		FT_EV_REGION_BEGIN,
		0x0a,
		0xa4,
		's',
		't',
		'e',
		'p',
		0x92,
		FT_EV_REGION_END,
		0x14,
	};
	ssize_t n = enc_events_head(b, cap, T0 + 15000, 4242, 8, 4096, TSC0 + 5,
				    (uint32_t)sizeof(records));

	if (n < 0)
		return n;
	if (sizeof(records) > cap - (size_t)n)
		return -ENOBUFS;
	memcpy(b + n, records, sizeof(records));
	return n + (ssize_t)sizeof(records);
}

static ssize_t v_module(unsigned char *b, size_t cap)
{
	return enc_module(b, cap, T0 + 16000, 4242, "/usr/lib/libfoo.so", 0x7f0000000000ull,
			  0x7f0000001000ull, 0x7f0000005000ull);
}

/* An image about to exec ssh, and one that spawned it (not rewritten). */
static ssize_t v_remote(unsigned char *b, size_t cap)
{
	return enc_remote(b, cap, T0 + 17000, 4270, 4270, 0, "user@node2",
			  "/opt/forktrace/bin/forktrace", 0);
}

static ssize_t v_remote_spawn(unsigned char *b, size_t cap)
{
	return enc_remote(b, cap, T0 + 18000, 4242, 4242, 4271, "node3",
			  "/opt/forktrace/bin/forktrace", FT_REMOTE_UNTRACED);
}

static const struct {
	const char *name;
	vec_fn fn;
} vectors[] = {
	{"hello", v_hello},
	{"hello_exec_ts", v_hello_exec_ts},
	{"hello_resumed", v_hello_resumed},
	{"hello_forked_resumed", v_hello_forked_resumed},
	{"hello_rank", v_hello_rank},
	{"hello_local_rank", v_hello_local_rank},
	{"fork", v_fork},
	{"fork_failed", v_fork_failed},
	{"vfork_exec", v_vfork_exec},
	{"vfork_exec_fail", v_vfork_exec_fail},
	{"exec", v_exec},
	{"exec_rusage", v_exec_rusage},
	{"exec_fail", v_exec_fail},
	{"spawn", v_spawn},
	{"spawn_failed", v_spawn_failed},
	{"wait", v_wait},
	{"wait_rusage", v_wait_rusage},
	{"thread_start", v_thread_start},
	{"thread_end", v_thread_end},
	{"thread_name", v_thread_name},
	{"exit", v_exit},
	{"exit_rusage", v_exit_rusage},
	{"signal", v_signal},
	{"shell_begin", v_shell_begin},
	{"shell_end", v_shell_end},
	{"shell_end_failed", v_shell_end_failed},
	{"lost", v_lost},
	{"continue", v_continue},
	{"shm", v_shm},
	{"events", v_events},
	{"module", v_module},
	{"remote", v_remote},
	{"remote_spawn", v_remote_spawn},
};

static void check(const char *dir, const char *name, vec_fn fn)
{
	unsigned char got[BUF], want[BUF];
	char path[1024];
	ssize_t n, m;
	size_t i;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.bin", dir, name);
	f = fopen(path, "rb");
	if (!f) {
		check_fail_at(__FILE__, __LINE__, "%s: %s", path, strerror(errno));
		return;
	}
	m = (ssize_t)fread(want, 1, sizeof(want), f);
	fclose(f);
	n = fn(got, sizeof(got));
	if (n != m || memcmp(got, want, (size_t)n) != 0) {
		for (i = 0; n > 0 && i < (size_t)n && i < (size_t)m && got[i] == want[i]; i++)
			;
		check_fail_at(
			__FILE__, __LINE__,
			"%s: encoder gives %zd bytes, vector has %zd; first difference at byte %zu",
			path, n, m, i);
		return;
	}
	CHECK_MSG(fn(got, (size_t)n - 1) == -ENOBUFS,
		  "%s: encoding into %zd bytes did not fail with -ENOBUFS", name, n - 1);
	CHECK_MSG(ft_wire_payload_len(got) == (uint32_t)(n - FT_WIRE_HEADER_SIZE),
		  "%s: header length does not match the payload", name);
}

int main(int argc, char **argv)
{
	size_t i;

	if (argc != 2) {
		fprintf(stderr, "usage: %s VECTOR_DIR\n", argv[0]);
		return 2;
	}
	for (i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++)
		check(argv[1], vectors[i].name, vectors[i].fn);
	return check_done("wire_vectors");
}
