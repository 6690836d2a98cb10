/*
 * server.h - the collector's Unix socket server (srv_). Internal to
 * collector/.
 */
#ifndef FT_COLLECTOR_SERVER_H
#define FT_COLLECTOR_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

#include "internal.h"

typedef struct srv {
	uv_loop_t *loop;
	uv_pipe_t listener;
	uv_prepare_t batch; /* sleeps briefly after a busy iteration */
	bool listening;
	proc_tree *pt;       /* borrowed */
	ptab *tab;           /* the process table (borrowed), or NULL */
	msgpack_unpacked up; /* scratch for decoding, reused per frame */
	uid_t uid;           /* our uid: its peers need no ancestry check */
	pid_t self;          /* our pid: the root of the traced tree */
	uint32_t max_payload;
	size_t nconns;          /* connections open (or closing) now */
	uint64_t accepted;      /* connections accepted so far */
	uint64_t frames;        /* frames applied */
	uint64_t rejected;      /* connections closed for protocol errors */
	uint64_t truncated;     /* connections that ended inside a frame */
	uint64_t over_held;     /* connections closed for holding too much */
	uint64_t accept_failed; /* connections libuv could not accept */
	size_t held;            /* bytes of partial frames' buffers, all conns */
	uint64_t batch_mark;    /* accepted + frames when the loop last polled */
	uint64_t bytes;         /* frame bytes applied */
	uint64_t batch_bytes;   /* bytes when the loop last polled */
} srv;

/* Binds and listens on path (which must not exist). Returns 0 or a
 * negative libuv error. On success s must be released with srv_free after
 * the loop has closed its handles. */
int srv_start(srv *s, uv_loop_t *loop, const char *path, proc_tree *pt);
/* Stops accepting new connections. */
void srv_stop(srv *s);
/* Is everything that connected already in: no connection open and none
 * waiting in the listen backlog? */
bool srv_idle(const srv *s);
/* Stops accepting and closes every connection (each counts as ended). */
void srv_close_all(srv *s);
void srv_free(srv *s);

#endif
