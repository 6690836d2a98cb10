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

#include "../check.h"
#include "forktrace/wire.h"
#include "encode.h"

#define T0 5000000000000ull
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

static ssize_t v_fork(unsigned char *b, size_t cap)
{
	return enc_fork(b, cap, T0 + 1000, 4242, FT_SPAWN_FORK, 4243, 0);
}

static ssize_t v_vfork_exec_fail(unsigned char *b, size_t cap)
{
	static const char *const argv[] = {"nope", "x"};

	return enc_vfork(b, cap, T0 + 1500, 4242, 4246, T0 + 1600, "/nope", argv, 2, ENOENT);
}

static ssize_t v_exec(unsigned char *b, size_t cap)
{
	static const char *const argv[] = {"ls", "-l", "/"};

	return enc_exec(b, cap, T0 + 2000, 4243, FT_EXEC_EXECVP, "ls", argv, 3);
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

static ssize_t v_wait(unsigned char *b, size_t cap)
{
	return enc_wait(b, cap, T0 + 4000, 4242, 4244, 3 << 8);
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
	return enc_exit(b, cap, T0 + 8000, 4242, -1);
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

static ssize_t v_lost(unsigned char *b, size_t cap)
{
	return enc_lost(b, cap, T0 + 12000, 4242, 70000);
}

static const struct {
	const char *name;
	vec_fn fn;
} vectors[] = {
    {"hello", v_hello},
    {"fork", v_fork},
    {"vfork_exec_fail", v_vfork_exec_fail},
    {"exec", v_exec},
    {"exec_fail", v_exec_fail},
    {"spawn", v_spawn},
    {"wait", v_wait},
    {"thread_start", v_thread_start},
    {"thread_end", v_thread_end},
    {"thread_name", v_thread_name},
    {"exit", v_exit},
    {"signal", v_signal},
    {"shell_begin", v_shell_begin},
    {"shell_end", v_shell_end},
    {"lost", v_lost},
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
		check_fail_at(__FILE__, __LINE__,
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
