/*
 * Checks for the C unit tests, one header for all of them (after libuv's
 * test/task.h). A failed check does not end the test: every check runs,
 * each failure prints where it is and what was seen, and check_done()
 * turns the count of failures into the exit status. A test that cannot go
 * on (no memory, a fixture missing) uses MUST, which ends it.
 *
 *   CHECK(cond)                 FILE:LINE: check failed: cond
 *   CHECK_MSG(cond, fmt, ...)   the same, then ": " and the message
 *   CHECK_INT(a, op, b)         a op b as long long; prints both values:
 *                               FILE:LINE: check failed: n == 5 (4 == 5)
 *   CHECK_UINT(a, op, b)        the same as unsigned long long
 *   CHECK_STR_EQ(a, b)          equal strings (NULL equals only NULL);
 *                               prints both, quoted
 *   MUST(cond)                  FILE:LINE: cannot go on: cond; exit(1)
 *   check_fail_at(file, line, fmt, ...)
 *                               a failure of a helper that checks on its
 *                               caller's behalf, at the caller's line
 *   check_done(name)            "NAME: all checks passed" (stdout) and 0,
 *                               or "NAME: N checks failed" (stderr) and 1:
 *                               main returns it
 *
 * Each test is one executable that includes this header once.
 */
#ifndef FT_TESTS_CHECK_H
#define FT_TESTS_CHECK_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Failed checks so far. */
static int check_nfailed __attribute__((unused));

/* Counts one failure and prints "FILE:LINE: " and the message. */
__attribute__((format(printf, 3, 4))) static inline void check_fail_at(const char *file, int line,
								       const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	check_nfailed++;
}

/* Counts one failure and prints "FILE:LINE: check failed: COND: " and
 * the message, on one line. */
__attribute__((format(printf, 4, 5))) static inline void
check_fail_msg(const char *file, int line, const char *cond, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s:%d: check failed: %s: ", file, line, cond);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	check_nfailed++;
}

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			check_fail_at(__FILE__, __LINE__, "check failed: %s", #cond);              \
	} while (0)

#define CHECK_MSG(cond, ...)                                                                       \
	do {                                                                                       \
		if (!(cond))                                                                       \
			check_fail_msg(__FILE__, __LINE__, #cond, __VA_ARGS__);                    \
	} while (0)

#define CHECK_INT(a, op, b)                                                                        \
	do {                                                                                       \
		long long check_a_ = (long long)(a), check_b_ = (long long)(b);                    \
		if (!(check_a_ op check_b_))                                                       \
			check_fail_at(__FILE__, __LINE__, "check failed: %s %s %s (%lld %s %lld)", \
				      #a, #op, #b, check_a_, #op, check_b_);                       \
	} while (0)

#define CHECK_UINT(a, op, b)                                                                       \
	do {                                                                                       \
		unsigned long long check_a_ = (unsigned long long)(a),                             \
				   check_b_ = (unsigned long long)(b);                             \
		if (!(check_a_ op check_b_))                                                       \
			check_fail_at(__FILE__, __LINE__, "check failed: %s %s %s (%llu %s %llu)", \
				      #a, #op, #b, check_a_, #op, check_b_);                       \
	} while (0)

/* Are a and b the same string, or both NULL? */
static inline bool check_str_same(const char *a, const char *b)
{
	return a == NULL || b == NULL ? a == b : strcmp(a, b) == 0;
}

/* s as three printf arguments "%s%s%s": quoted, or NULL unquoted. */
#define CHECK_QUOTED_(s) (s) ? "\"" : "", (s) ? (s) : "NULL", (s) ? "\"" : ""

#define CHECK_STR_EQ(a, b)                                                                         \
	do {                                                                                       \
		const char *check_a_ = (a), *check_b_ = (b);                                       \
		if (!check_str_same(check_a_, check_b_))                                           \
			check_fail_at(__FILE__, __LINE__,                                          \
				      "check failed: %s equals %s (%s%s%s vs %s%s%s)", #a, #b,     \
				      CHECK_QUOTED_(check_a_), CHECK_QUOTED_(check_b_));           \
	} while (0)

#define MUST(cond)                                                                                 \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: cannot go on: %s\n", __FILE__, __LINE__, #cond);   \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

/* Prints the outcome of the test called name; returns main's status. */
static inline int check_done(const char *name)
{
	if (check_nfailed) {
		fprintf(stderr, "%s: %d check%s failed\n", name, check_nfailed,
			check_nfailed == 1 ? "" : "s");
		return 1;
	}
	printf("%s: all checks passed\n", name);
	return 0;
}

#endif /* FT_TESTS_CHECK_H */
