/*
 * say.h - what the `forktrace` command says to its user (say_). The only
 * place, with the subcommands' own usage texts, that prints: modules below
 * return codes.
 */
#ifndef FT_COLLECTOR_SAY_H
#define FT_COLLECTOR_SAY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "model.h"

/* parse_opts of a subcommand returns this after printing --help. */
#define SAY_EXIT_OK_DONE (-1)
/* Exit code of a usage error. */
#define SAY_EXIT_USAGE 2

/* Prints "forktrace SUB: MESSAGE" and a hint to --help; returns
 * SAY_EXIT_USAGE. */
int say_usage_error(const char *sub, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The process umask, read without changing it for good. */
mode_t say_umask(void);

/*
 * Strict parsers for option values. Each takes the whole string: no
 * leading blanks or sign, no trailing junk, no hexadecimal, no overflow
 * (strtoull reads "-1" as 2^64-1 and strtod reads "nan", "inf" and
 * "0x1p4"). They return 0 or -EINVAL (-ERANGE for a value past max).
 */
/* Decimal digits only, at most max. */
int say_parse_uint(const char *s, uint64_t max, uint64_t *out);
/* A size: digits, then an optional K, M, G or T (powers of 1024) and an
 * optional B. Zero and sizes past 2^64-1 bytes are refused. */
int say_parse_size(const char *s, uint64_t *out);
/* Seconds: a decimal number ("2", "0.5", ".5", "1e3").
 * "inf" (or "infinity", any case) means no limit: *out is -1. Values past
 * SAY_SECONDS_MAX are clamped to it. */
#define SAY_SECONDS_MAX 1e9
int say_parse_seconds(const char *s, double *out);

/*
 * A string that came from a trace, an agent, a file's content or a file
 * name, made safe to print on a terminal: C0 and C1 control characters,
 * DEL, invalid UTF-8, and the Unicode characters that reorder text or
 * break lines (bidi controls, U+2028, U+2029) come out as \n, \r, \t,
 * \xHH (a byte) or \uHHHH, so that a program's name can neither move the
 * cursor, retitle the terminal, nor forge a line of forktrace's own.
 * Anything else, valid UTF-8 included, is printed as is. say_esc_n takes
 * n bytes (NUL included). The result is valid until the eighth call after
 * (a ring of buffers: enough for the arguments of one message); NULL
 * gives "(null)".
 */
#define SAY_ESC_RING 8
const char *say_esc(const char *s);
const char *say_esc_n(const char *s, size_t n);

/*
 * s as a JSON string literal (quotes included) that is as safe on a
 * terminal as say_esc's text: the controls say_esc escapes are \uXXXX
 * escapes (C0, DEL, C1, bidi controls, U+2028, U+2029), invalid UTF-8
 * is U+FFFD. Returns a string the caller frees, or NULL (no memory).
 */
char *say_json_str(const char *s);

/*
 * Times, sizes and counts for people: "12 us", "350 ms", "1.24 s",
 * "2 min 13 s", "1 h 02 min"; "512 KiB", "350 MiB", "1.24 GiB"; "1,996".
 * Three significant digits below a minute (and for sizes), rounded. A
 * negative time or size is "?". Each result is valid until the
 * SAY_FMT_RING-th call after (of any of the three).
 */
#define SAY_FMT_RING 16
const char *say_duration(int64_t ns);
const char *say_size_kib(int64_t kib);
const char *say_count(uint64_t n);

/*
 * A warning a traced process can repeat at will (one per frame it sends):
 * each source (a pid) gets SAY_LIMIT_EACH lines, all of them together
 * SAY_LIMIT_ALL; the rest are counted, and say_limit_end says how many
 * there were ("... and 1933 more like it from 1 process"). Zero-initialise
 * one per kind of warning.
 */
#define SAY_LIMIT_EACH 3
#define SAY_LIMIT_ALL 20
#define SAY_LIMIT_SOURCES 256
typedef struct say_limit {
	int64_t pid[SAY_LIMIT_SOURCES]; /* 1 + pid, 0: free */
	uint32_t count[SAY_LIMIT_SOURCES];
	bool hid[SAY_LIMIT_SOURCES]; /* a warning of it was not shown */
	uint64_t shown, hidden;
	uint64_t hidden_sources; /* sources with a warning not shown */
} say_limit;
/* Whether the next warning of source may be printed (else it is counted). */
bool say_limit_take(say_limit *l, int64_t source);
/* Prints "forktrace: warning: WHAT: N more not shown (from M UNITs)"
 * when warnings were counted, and starts over. unit: what a source is
 * ("process"). */
void say_limit_end(say_limit *l, const char *what, const char *unit);

/* After --wait-timeout or a signal: names the processes that were still
 * running; why says when ("after --wait-timeout 5s"). */
void say_report_running(const model_trace *t, const char *why);

/* How many processes of t ended as kind says (MODEL_EXIT_HOST_LOST: the
 * processes a lost host's part closed). */
size_t say_count_exits(const model_trace *t, enum model_exit_kind kind);

#endif
