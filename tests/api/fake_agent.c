/*
 * A stand-in for libforktrace-agent.so, LD_PRELOADed by test_api.py: it
 * serves the forktrace.h ABI (ft__api_get) and logs every call it gets, one
 * line each, to the file named by $FT_FAKE_LOG, so the test can check that
 * each API call reached the agent with its arguments, in order. It proves
 * the header's dispatch without the real agent.
 *
 * Knobs, to play other agents:
 *   FT_FAKE_VERSION  the table's version field (default 1)
 *   FT_FAKE_SIZE     the table's size field (default: the real size)
 * The fake serves version 1 only: a request for any other gets NULL.
 *
 * Log lines: "get V", "region_begin NAME", "region_end", "instant NAME",
 * "counter NAME VALUE" (VALUE as %a, exact), "thread_name NAME".
 */
#define _POSIX_C_SOURCE 200809L /* O_CLOEXEC under -std=c11 */
#define FT__ABI_ONLY
#include <forktrace.h>

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FAKE_EXPORT __attribute__((visibility("default")))

/* A table with one more field than version 1, so that FT_FAKE_SIZE can
 * claim a later version's size honestly. */
struct fake_table {
	struct ft__api v1;
	void (*later)(void);
};

static struct fake_table table;

/* Appends one line to $FT_FAKE_LOG (opened on first use: the header may
 * call ft__api_get before this library's own constructor runs). */
__attribute__((format(printf, 1, 2))) static void fake_log(const char *fmt, ...)
{
	static int fd = -1;
	char line[512];
	va_list ap;
	int n;

	if (fd < 0) {
		const char *path = getenv("FT_FAKE_LOG");

		if (!path)
			return;
		fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (fd < 0)
			return;
	}
	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(fd, line, (size_t)n) != n)
		abort();
}

static void fake_region_begin(const char *name)
{
	fake_log("region_begin %s", name);
}

static void fake_region_end(void)
{
	fake_log("region_end");
}

static void fake_instant(const char *name)
{
	fake_log("instant %s", name);
}

static void fake_counter(const char *name, double value)
{
	fake_log("counter %s %a", name, value);
}

static void fake_thread_name(const char *name)
{
	fake_log("thread_name %s", name);
}

static void fake_later(void)
{
	fake_log("later");
}

static uint32_t env_u32(const char *name, uint32_t dflt)
{
	const char *v = getenv(name);

	return v && *v ? (uint32_t)strtoul(v, NULL, 0) : dflt;
}

FAKE_EXPORT const struct ft__api *ft__api_get(unsigned version)
{
	fake_log("get %u", version);
	if (version != 1)
		return NULL;
	table.v1.version = env_u32("FT_FAKE_VERSION", 1);
	table.v1.size = env_u32("FT_FAKE_SIZE", (uint32_t)sizeof(struct ft__api));
	table.v1.region_begin = fake_region_begin;
	table.v1.region_end = fake_region_end;
	table.v1.instant = fake_instant;
	table.v1.counter = fake_counter;
	table.v1.thread_name = fake_thread_name;
	table.later = fake_later;
	return &table.v1;
}
