/*
 * jsonargs.c - small JSON objects for marks, built in a bounded stack
 * buffer and copied into the model's arena. Escaping is delegated to
 * combine's writer (jsonw_escape) so there is one definition of how
 * forktrace writes a JSON string.
 */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "jsonargs.h"
#include "jsonw.h"

#define ARGS_MAX 8192
/* Room kept after a string for the fixed text that may follow it: a key,
 * a number, "null", the closing braces. */
#define ARGS_TAIL 64

/* Users set only len: an initialiser would zero all ARGS_MAX bytes, once per
 * WAIT record, a fifth of the collector's work in a fork loop (callgrind). */
typedef struct abuf {
	char buf[ARGS_MAX];
	size_t len;
} abuf;

/* JSON text of ours. It always fits: every string before it kept the room
 * (put_str's keep). */
static void put(abuf *b, const char *s)
{
	size_t n = strlen(s);

	if (b->len + n < ARGS_MAX) {
		memcpy(b->buf + b->len, s, n);
		b->len += n;
	}
}

/* s as a JSON string, cut to leave keep bytes free for what the caller
 * writes after it (a string cut short still ends in a quote); null if
 * even "" would not fit. */
static void put_str(abuf *b, const char *s, size_t keep)
{
	size_t room = ARGS_MAX - b->len;

	if (s && room >= keep + 2)
		b->len += jsonw_escape(b->buf + b->len, room - keep, s, strlen(s));
	else
		put(b, "null");
}

static void put_int(abuf *b, long long v)
{
	char num[32];

	snprintf(num, sizeof(num), "%lld", v);
	put(b, num);
}

static const char *done(model_trace *t, abuf *b)
{
	put(b, "}");
	return model_strndup(t, b->buf, b->len);
}

static void put_exit(abuf *b, int status)
{
	if (WIFEXITED(status)) {
		put(b, "{\"kind\":\"code\",\"code\":");
		put_int(b, WEXITSTATUS(status));
		put(b, "}");
	} else if (WIFSIGNALED(status)) {
		const char *name = sigabbrev_np(WTERMSIG(status));
		put(b, "{\"kind\":\"signal\",\"signal\":");
		put_int(b, WTERMSIG(status));
		put(b, ",\"name\":\"SIG");
		put(b, name ? name : "UNKNOWN");
		put(b, "\"}");
	} else {
		put(b, "{\"kind\":\"unknown\"}");
	}
}

const char *args_exec_fail(model_trace *t, const char *path, int err)
{
	abuf b;

	b.len = 0;

	put(&b, "{\"path\":");
	put_str(&b, path, ARGS_TAIL + 128); /* the errno and its message */
	put(&b, ",\"errno\":");
	put_int(&b, err);
	put(&b, ",\"error\":");
	put_str(&b, strerror(err), ARGS_TAIL);
	return done(t, &b);
}

const char *args_fork_fail(model_trace *t, const char *kind, int err)
{
	abuf b;

	b.len = 0;

	put(&b, "{\"kind\":");
	put_str(&b, kind, ARGS_TAIL);
	put(&b, ",\"errno\":");
	put_int(&b, err);
	put(&b, ",\"error\":");
	put_str(&b, strerror(err), ARGS_TAIL);
	return done(t, &b);
}

const char *args_wait(model_trace *t, int64_t child, int status)
{
	abuf b;

	b.len = 0;

	put(&b, "{\"child\":");
	put_int(&b, child);
	put(&b, ",\"status\":");
	put_int(&b, status);
	put(&b, ",\"exit\":");
	put_exit(&b, status);
	return done(t, &b);
}

const char *args_shell(model_trace *t, const char *cmd, int status, int err)
{
	abuf b;

	b.len = 0;

	put(&b, "{\"cmd\":");
	put_str(&b, cmd, ARGS_TAIL + 128); /* and the errno and its message */
	put(&b, ",\"status\":");
	put_int(&b, status);
	if (err > 0) {
		put(&b, ",\"errno\":");
		put_int(&b, err);
		put(&b, ",\"error\":");
		put_str(&b, strerror(err), ARGS_TAIL);
	}
	return done(t, &b);
}

const char *args_signal(model_trace *t, int signo)
{
	abuf b;

	b.len = 0;

	put(&b, "{\"signal\":");
	put_int(&b, signo);
	return done(t, &b);
}

const char *args_remote(model_trace *t, const char *host, bool untraced)
{
	abuf b;

	b.len = 0;

	put(&b, "{\"host\":");
	put_str(&b, host, ARGS_TAIL);
	if (untraced)
		put(&b, ",\"untraced\":true");
	return done(t, &b);
}
