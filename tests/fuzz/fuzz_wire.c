/*
 * libFuzzer target: what an agent (or anything with our uid) can send the
 * collector. The input is a script of reads on up to four connections:
 *
 *   byte 0: op (low 2 bits: connection; bit 2: close it; bit 3: the
 *           collector reaps a pid: int32 pid, int32 status, then the
 *           rusage it got as a model_rusage if L has room; otherwise
 *           read data)
 *   byte 1..2: length L (little-endian), then L bytes of stream data
 *
 * Each connection assembles frames exactly as the server does, decodes them
 * and applies them to one process tree; at the end the tree is finished and
 * written as JSON. Crashes, leaks, UB, or a trace the writer refuses are
 * bugs.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "events.h"

#define NCONN 4

typedef struct fconn {
	proc_conn pc;
	char *buf;
	size_t len;
	bool dead;
} fconn;

static void feed(proc_tree *pt, msgpack_unpacked *up, fconn *c, const uint8_t *p, size_t n,
		 int64_t now)
{
	if (c->dead)
		return;
	char *nb = realloc(c->buf, c->len + n + 1);
	if (!nb)
		return;
	c->buf = nb;
	memcpy(c->buf + c->len, p, n);
	c->len += n;
	size_t off = 0;
	wire_frame f;
	int rc;
	while ((rc = wire_next_frame(c->buf + off, c->len - off, 1 << 20, &f)) == 1) {
		wire_msg m;
		if (wire_decode(f.payload, f.len, f.type, up, &m) < 0 ||
		    proc_apply(pt, &c->pc, &m, now) == -EPROTO) {
			rc = -1;
			break;
		}
		off += f.size;
	}
	if (rc < 0) {
		/* The server closes a connection that breaks the protocol. */
		proc_conn_closed(pt, &c->pc, now);
		c->dead = true;
		return;
	}
	memmove(c->buf, c->buf + off, c->len - off);
	c->len -= off;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	model_trace *t = model_new();
	proc_tree *pt = t ? proc_tree_new(t) : NULL;
	fconn conns[NCONN];
	msgpack_unpacked up;
	int64_t now = 1000;

	if (!pt) {
		model_free(t);
		return 0;
	}
	memset(conns, 0, sizeof(conns));
	msgpack_unpacked_init(&up);
	proc_add_root(pt, 100, (const char *const[]){"root", NULL}, "/bin/root", 0);
	size_t i = 0;
	while (i + 3 <= size) {
		uint8_t op = data[i];
		size_t len = data[i + 1] | (size_t)data[i + 2] << 8;
		i += 3;
		if (len > size - i)
			len = size - i;
		fconn *c = &conns[op & 3];
		now += 1000;
		if (op & 4) {
			if (!c->dead)
				proc_conn_closed(pt, &c->pc, now);
			free(c->buf);
			memset(c, 0, sizeof(*c)); /* a new connection in its place */
		} else if (op & 8) {
			if (len >= 4) {
				int32_t pid, st;
				memcpy(&pid, data + i, 4);
				st = len >= 8 ? (memcpy(&st, data + i + 4, 4), st) : 0;
				/* The subreaper's wait4 figure: what follows, if
				 * there is room for it. */
				model_rusage ru;
				bool has_ru = len >= 8 + sizeof(ru);
				if (has_ru)
					memcpy(&ru, data + i + 8, sizeof(ru));
				proc_reaped(pt, pid, st, has_ru ? &ru : NULL, now);
			}
		} else {
			feed(pt, &up, c, data + i, len, now);
		}
		i += len;
	}
	for (int k = 0; k < NCONN; k++) {
		if (!conns[k].dead)
			proc_conn_closed(pt, &conns[k].pc, now);
		free(conns[k].buf);
	}
	proc_finish(pt, now + 1, true);
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (events_write(t, fd, TRACE_FORMAT_JSON, NULL, NULL) != 0)
			abort(); /* the writer must accept whatever the tree made */
		close(fd);
	}
	msgpack_unpacked_destroy(&up);
	proc_tree_free(pt);
	model_free(t);
	return 0;
}
