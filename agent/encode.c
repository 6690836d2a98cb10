/*
 * Frame encoder built on msgpack-c's static-inline packer (<msgpack/pack.h>):
 * only the header's inline functions are used, with our own write callback
 * into the caller's buffer, so the agent does not link libmsgpackc and the
 * encoder never allocates (house rule 11).
 */
#include <errno.h>
#include <string.h>
#include <sys/resource.h>

#include <msgpack/pack.h>

#include "forktrace/wire.h"
#include "encode.h"

/* Write cursor over the caller's buffer. */
struct enc_cur {
	unsigned char *buf;
	size_t len;
	size_t cap;
	/* Keys the map was opened with, less those written: a map's size is
	 * counted by hand in each enc_* function, and a count that disagrees
	 * with the keys written would make the collector misread the frame. */
	size_t keys_left;
};

/* msgpack write callback: append or fail without writing. Signal-safe. */
static int enc_append(void *data, const char *src, size_t n)
{
	struct enc_cur *c = data;

	if (n > c->cap - c->len)
		return -1;
	memcpy(c->buf + c->len, src, n);
	c->len += n;
	return 0;
}

/* Start a frame: reserve the header, open a map of nkeys entries. */
static int enc_begin(struct enc_cur *c, msgpack_packer *pk, void *buf, size_t cap, size_t nkeys)
{
	c->buf = buf;
	c->cap = cap;
	c->len = 0;
	if (cap < FT_WIRE_HEADER_SIZE)
		return -1;
	c->len = FT_WIRE_HEADER_SIZE;
	msgpack_packer_init(pk, c, enc_append);
	c->keys_left = nkeys;
	return msgpack_pack_map(pk, nkeys);
}

/* Finish a frame: fill the header now that the payload length is known.
 * Fails with -EPROTO when the keys written are not as many as the map
 * promised. */
static ssize_t enc_end(struct enc_cur *c, unsigned type, int err)
{
	size_t plen;

	if (err)
		return -ENOBUFS;
	if (c->keys_left != 0)
		return -EPROTO;
	plen = c->len - FT_WIRE_HEADER_SIZE;
	if (plen > FT_WIRE_MAX_PAYLOAD)
		return -ENOBUFS;
	ft_wire_header(c->buf, type, (uint32_t)plen);
	return (ssize_t)c->len;
}

_Static_assert(FT_K_MAX < 128, "a key is one byte: a msgpack positive fixint");

/* Write a map key, counting it against the map's size. A key is the one
 * byte msgpack_pack_uint32 would write, stored here without its call
 * through the write callback. */
static int enc_key(msgpack_packer *pk, unsigned key)
{
	struct enc_cur *c = pk->data;

	if (c->len == c->cap)
		return -1;
	c->buf[c->len++] = (unsigned char)key;
	c->keys_left--;
	return 0;
}

static int enc_kint(msgpack_packer *pk, unsigned key, int64_t v)
{
	return enc_key(pk, key) || msgpack_pack_int64(pk, v);
}

static int enc_kuint(msgpack_packer *pk, unsigned key, uint64_t v)
{
	return enc_key(pk, key) || msgpack_pack_uint64(pk, v);
}

/* A NULL string is sent as "" so the key set of a message never varies. */
static int enc_kstr(msgpack_packer *pk, unsigned key, const char *s)
{
	size_t n = s ? strlen(s) : 0;

	return enc_key(pk, key) || msgpack_pack_str(pk, n) ||
	       (n && msgpack_pack_str_body(pk, s, n));
}

static int enc_kargv(msgpack_packer *pk, unsigned key, const char *const *argv, size_t argc)
{
	size_t i;

	if (enc_key(pk, key) || msgpack_pack_array(pk, argc))
		return -1;
	for (i = 0; i < argc; i++) {
		const char *s = argv[i] ? argv[i] : "";
		size_t n = strlen(s);

		if (msgpack_pack_str(pk, n) || (n && msgpack_pack_str_body(pk, s, n)))
			return -1;
	}
	return 0;
}

static uint64_t enc_ru_ns(const struct timeval *tv)
{
	if (tv->tv_sec < 0 || tv->tv_usec < 0)
		return 0;
	return (uint64_t)tv->tv_sec * 1000000000u + (uint64_t)tv->tv_usec * 1000u;
}

static uint64_t enc_ru_count(long v)
{
	return v < 0 ? 0 : (uint64_t)v;
}

void enc_rusage_from(struct enc_rusage *out, const struct rusage *ru)
{
	out->v[FT_RU_USER_NS] = enc_ru_ns(&ru->ru_utime);
	out->v[FT_RU_SYS_NS] = enc_ru_ns(&ru->ru_stime);
	out->v[FT_RU_MAXRSS_KB] = enc_ru_count(ru->ru_maxrss);
	out->v[FT_RU_MINFLT] = enc_ru_count(ru->ru_minflt);
	out->v[FT_RU_MAJFLT] = enc_ru_count(ru->ru_majflt);
	out->v[FT_RU_NVCSW] = enc_ru_count(ru->ru_nvcsw);
	out->v[FT_RU_NIVCSW] = enc_ru_count(ru->ru_nivcsw);
	out->v[FT_RU_INBLOCK] = enc_ru_count(ru->ru_inblock);
	out->v[FT_RU_OUBLOCK] = enc_ru_count(ru->ru_oublock);
}

/* An FT_K_RUSAGE-style array under key; nothing when ru is NULL (the
 * caller counted the key only then). */
static int enc_krusage(msgpack_packer *pk, unsigned key, const struct enc_rusage *ru)
{
	if (!ru)
		return 0;
	if (enc_key(pk, key) || msgpack_pack_array(pk, FT_RUSAGE_N))
		return -1;
	for (size_t i = 0; i < FT_RUSAGE_N; i++)
		if (msgpack_pack_uint64(pk, ru->v[i]))
			return -1;
	return 0;
}

/* Common prefix of every message but HELLO: TS, TID. */
static int enc_ts_tid(msgpack_packer *pk, uint64_t ts, int32_t tid)
{
	return enc_kuint(pk, FT_K_TS, ts) || enc_kint(pk, FT_K_TID, tid);
}

ssize_t enc_hello(void *buf, size_t cap, const struct enc_hello *h)
{
	struct enc_cur c;
	msgpack_packer pk;
	int err;

	err = enc_begin(&c, &pk, buf, cap,
			11 + (h->exec_ts != 0) + h->from_table + 2 * h->has_rank +
				h->has_local_rank) ||
	      enc_ts_tid(&pk, h->ts, h->tid) || enc_kint(&pk, FT_K_PID, h->pid) ||
	      enc_kint(&pk, FT_K_PPID, h->ppid) || enc_kargv(&pk, FT_K_ARGV, h->argv, h->argc) ||
	      enc_kstr(&pk, FT_K_CWD, h->cwd) || enc_kstr(&pk, FT_K_EXE, h->exe) ||
	      enc_kuint(&pk, FT_K_REALTIME, h->realtime) ||
	      enc_kuint(&pk, FT_K_START_TICKS, h->start_ticks) ||
	      enc_kstr(&pk, FT_K_NAME, h->name) || enc_kuint(&pk, FT_K_FLAGS, h->flags) ||
	      (h->exec_ts && enc_kuint(&pk, FT_K_EXEC_TS, h->exec_ts)) ||
	      (h->from_table && enc_kuint(&pk, FT_K_TABLE_SLOT, h->table_slot)) ||
	      (h->has_rank && enc_kuint(&pk, FT_K_RANK, h->rank)) ||
	      (h->has_local_rank && enc_kuint(&pk, FT_K_LOCAL_RANK, h->local_rank)) ||
	      (h->has_rank && enc_kstr(&pk, FT_K_RANK_VAR, h->rank_var));
	return enc_end(&c, FT_MSG_HELLO, err);
}

ssize_t enc_fork(void *buf, size_t cap, uint64_t ts, int32_t tid, uint32_t kind, int32_t child,
		 int32_t errnum)
{
	struct enc_cur c;
	msgpack_packer pk;
	int err;

	err = enc_begin(&c, &pk, buf, cap, 4) || enc_ts_tid(&pk, ts, tid) ||
	      (errnum == 0 ? enc_kint(&pk, FT_K_CHILD, child)
			   : enc_kint(&pk, FT_K_ERRNO, errnum)) ||
	      enc_kuint(&pk, FT_K_KIND, kind);
	return enc_end(&c, FT_MSG_FORK, err);
}

ssize_t enc_vfork(void *buf, size_t cap, uint64_t ts, int32_t tid, int32_t child, uint64_t exec_ts,
		  const char *path, const char *const *argv, size_t argc, int32_t child_err)
{
	struct enc_cur c;
	msgpack_packer pk;
	int err;

	err = enc_begin(&c, &pk, buf, cap, child_err ? 8 : 7) || enc_ts_tid(&pk, ts, tid) ||
	      enc_kint(&pk, FT_K_CHILD, child) || enc_kstr(&pk, FT_K_PATH, path) ||
	      enc_kargv(&pk, FT_K_ARGV, argv, argc) || enc_kuint(&pk, FT_K_KIND, FT_SPAWN_VFORK) ||
	      enc_kuint(&pk, FT_K_EXEC_TS, exec_ts) ||
	      (child_err && enc_kint(&pk, FT_K_CHILD_ERRNO, child_err));
	return enc_end(&c, FT_MSG_FORK, err);
}

ssize_t enc_exec(void *buf, size_t cap, uint64_t ts, int32_t tid, uint32_t kind, const char *path,
		 const char *const *argv, size_t argc, const struct enc_rusage *ru)
{
	struct enc_cur c;
	msgpack_packer pk;
	int err;

	err = enc_begin(&c, &pk, buf, cap, 5 + (ru != NULL)) || enc_ts_tid(&pk, ts, tid) ||
	      enc_kstr(&pk, FT_K_PATH, path) || enc_kargv(&pk, FT_K_ARGV, argv, argc) ||
	      enc_kuint(&pk, FT_K_KIND, kind) || enc_krusage(&pk, FT_K_RUSAGE, ru);
	return enc_end(&c, FT_MSG_EXEC, err);
}

ssize_t enc_exec_fail(void *buf, size_t cap, uint64_t ts, int32_t tid, int32_t errnum,
		      const char *path)
{
	struct enc_cur c;
	msgpack_packer pk;
	int err;

	err = enc_begin(&c, &pk, buf, cap, 4) || enc_ts_tid(&pk, ts, tid) ||
	      enc_kstr(&pk, FT_K_PATH, path) || enc_kint(&pk, FT_K_ERRNO, errnum);
	return enc_end(&c, FT_MSG_EXEC_FAIL, err);
}

ssize_t enc_spawn(void *buf, size_t cap, uint64_t ts, int32_t tid, uint32_t kind, int32_t child,
		  int32_t ret, const char *path, const char *const *argv, size_t argc)
{
	struct enc_cur c;
	msgpack_packer pk;
	int err;

	err = enc_begin(&c, &pk, buf, cap, ret == 0 ? 7 : 6) || enc_ts_tid(&pk, ts, tid) ||
	      (ret == 0 && enc_kint(&pk, FT_K_CHILD, child)) || enc_kstr(&pk, FT_K_PATH, path) ||
	      enc_kargv(&pk, FT_K_ARGV, argv, argc) || enc_kint(&pk, FT_K_ERRNO, ret) ||
	      enc_kuint(&pk, FT_K_KIND, kind);
	return enc_end(&c, FT_MSG_SPAWN, err);
}

ssize_t enc_wait(void *buf, size_t cap, uint64_t ts, int32_t tid, int32_t child, int32_t status,
		 const struct enc_rusage *ru)
{
	struct enc_cur c;
	msgpack_packer pk;
	int err;

	err = enc_begin(&c, &pk, buf, cap, 4 + (ru != NULL)) || enc_ts_tid(&pk, ts, tid) ||
	      enc_kint(&pk, FT_K_CHILD, child) || enc_kint(&pk, FT_K_STATUS, status) ||
	      enc_krusage(&pk, FT_K_RUSAGE, ru);
	return enc_end(&c, FT_MSG_WAIT, err);
}

ssize_t enc_thread(void *buf, size_t cap, unsigned type, uint64_t ts, int32_t tid, const char *name)
{
	struct enc_cur c;
	msgpack_packer pk;
	int err;

	err = enc_begin(&c, &pk, buf, cap, name ? 3 : 2) || enc_ts_tid(&pk, ts, tid) ||
	      (name && enc_kstr(&pk, FT_K_NAME, name));
	return enc_end(&c, type, err);
}

ssize_t enc_thread_name(void *buf, size_t cap, uint64_t ts, int32_t tid, const char *name)
{
	struct enc_cur c;
	msgpack_packer pk;
	int err;

	err = enc_begin(&c, &pk, buf, cap, 3) || enc_ts_tid(&pk, ts, tid) ||
	      enc_kstr(&pk, FT_K_NAME, name);
	return enc_end(&c, FT_MSG_THREAD_NAME, err);
}

ssize_t enc_exit(void *buf, size_t cap, uint64_t ts, int32_t tid, int32_t code,
		 const struct enc_rusage *self, const struct enc_rusage *children)
{
	struct enc_cur c;
	msgpack_packer pk;
	int err;

	err = enc_begin(&c, &pk, buf, cap, 3 + (self != NULL) + (children != NULL)) ||
	      enc_ts_tid(&pk, ts, tid) || enc_kint(&pk, FT_K_CODE, code) ||
	      enc_krusage(&pk, FT_K_RUSAGE, self) ||
	      enc_krusage(&pk, FT_K_RUSAGE_CHILDREN, children);
	return enc_end(&c, FT_MSG_EXIT, err);
}

ssize_t enc_signal(void *buf, size_t cap, uint64_t ts, int32_t tid, int32_t signo)
{
	struct enc_cur c;
	msgpack_packer pk;
	int err;

	err = enc_begin(&c, &pk, buf, cap, 3) || enc_ts_tid(&pk, ts, tid) ||
	      enc_kint(&pk, FT_K_SIGNO, signo);
	return enc_end(&c, FT_MSG_SIGNAL, err);
}

ssize_t enc_shell(void *buf, size_t cap, int end, uint64_t ts, int32_t tid, uint32_t kind,
		  const char *cmd, int32_t status)
{
	struct enc_cur c;
	msgpack_packer pk;
	int err;

	err = enc_begin(&c, &pk, buf, cap, end ? 5 : 4) || enc_ts_tid(&pk, ts, tid) ||
	      (end && enc_kint(&pk, FT_K_STATUS, status)) || enc_kuint(&pk, FT_K_KIND, kind) ||
	      enc_kstr(&pk, FT_K_CMD, cmd);
	return enc_end(&c, end ? FT_MSG_SHELL_END : FT_MSG_SHELL_BEGIN, err);
}

ssize_t enc_shell_fail(void *buf, size_t cap, uint64_t ts, int32_t tid, uint32_t kind,
		       const char *cmd, int32_t status, int32_t errnum)
{
	struct enc_cur c;
	msgpack_packer pk;
	int err;

	err = enc_begin(&c, &pk, buf, cap, 6) || enc_ts_tid(&pk, ts, tid) ||
	      enc_kint(&pk, FT_K_ERRNO, errnum) || enc_kint(&pk, FT_K_STATUS, status) ||
	      enc_kuint(&pk, FT_K_KIND, kind) || enc_kstr(&pk, FT_K_CMD, cmd);
	return enc_end(&c, FT_MSG_SHELL_END, err);
}

ssize_t enc_lost(void *buf, size_t cap, uint64_t ts, int32_t tid, uint64_t count)
{
	struct enc_cur c;
	msgpack_packer pk;
	int err;

	err = enc_begin(&c, &pk, buf, cap, 3) || enc_ts_tid(&pk, ts, tid) ||
	      enc_kuint(&pk, FT_K_COUNT, count);
	return enc_end(&c, FT_MSG_LOST, err);
}

ssize_t enc_continue(void *buf, size_t cap, uint64_t ts, int32_t tid, uint32_t slot)
{
	struct enc_cur c;
	msgpack_packer pk;
	int err;

	err = enc_begin(&c, &pk, buf, cap, 3) || enc_ts_tid(&pk, ts, tid) ||
	      enc_kuint(&pk, FT_K_TABLE_SLOT, slot);
	return enc_end(&c, FT_MSG_CONTINUE, err);
}

ssize_t enc_shm(void *buf, size_t cap, uint64_t ts, int32_t tid, uint32_t first_slot,
		uint32_t count, uint64_t slot_size, uint64_t tsc)
{
	struct enc_cur c;
	msgpack_packer pk;
	int err;

	err = enc_begin(&c, &pk, buf, cap, 6) || enc_ts_tid(&pk, ts, tid) ||
	      enc_kuint(&pk, FT_K_COUNT, count) || enc_kuint(&pk, FT_K_SLOT, first_slot) ||
	      enc_kuint(&pk, FT_K_TSC, tsc) || enc_kuint(&pk, FT_K_SIZE, slot_size);
	return enc_end(&c, FT_MSG_SHM, err);
}

ssize_t enc_events_head(void *buf, size_t cap, uint64_t ts, int32_t tid, uint32_t slot,
			uint64_t offset, uint64_t tsc, uint32_t data_len)
{
	struct enc_cur c;
	msgpack_packer pk;
	size_t plen;
	int err;

	err = enc_begin(&c, &pk, buf, cap, 6) || enc_ts_tid(&pk, ts, tid) ||
	      enc_kuint(&pk, FT_K_SLOT, slot) || enc_kuint(&pk, FT_K_OFFSET, offset) ||
	      enc_kuint(&pk, FT_K_TSC, tsc) || enc_key(&pk, FT_K_DATA) ||
	      msgpack_pack_bin(&pk, data_len);
	if (err)
		return -ENOBUFS;
	if (c.keys_left != 0)
		return -EPROTO;
	plen = c.len - FT_WIRE_HEADER_SIZE + data_len;
	if (plen > FT_WIRE_MAX_PAYLOAD)
		return -ENOBUFS;
	ft_wire_header(c.buf, FT_MSG_EVENTS, (uint32_t)plen);
	return (ssize_t)c.len;
}

ssize_t enc_module(void *buf, size_t cap, uint64_t ts, int32_t tid, const char *path, uint64_t bias,
		   uint64_t lo, uint64_t hi)
{
	struct enc_cur c;
	msgpack_packer pk;
	int err;

	err = enc_begin(&c, &pk, buf, cap, 6) || enc_ts_tid(&pk, ts, tid) ||
	      enc_kstr(&pk, FT_K_PATH, path) || enc_kuint(&pk, FT_K_ADDR, bias) ||
	      enc_kuint(&pk, FT_K_LO, lo) || enc_kuint(&pk, FT_K_HI, hi);
	return enc_end(&c, FT_MSG_MODULE, err);
}

ssize_t enc_remote(void *buf, size_t cap, uint64_t ts, int32_t tid, int32_t pid, int32_t child,
		   const char *dest, const char *forktrace, uint32_t flags)
{
	struct enc_cur c;
	msgpack_packer pk;
	int err;

	err = enc_begin(&c, &pk, buf, cap, child > 0 ? 7 : 6) || enc_ts_tid(&pk, ts, tid) ||
	      enc_kint(&pk, FT_K_PID, pid) || (child > 0 && enc_kint(&pk, FT_K_CHILD, child)) ||
	      enc_kstr(&pk, FT_K_PATH, forktrace) || enc_kstr(&pk, FT_K_NAME, dest) ||
	      enc_kuint(&pk, FT_K_FLAGS, flags);
	return enc_end(&c, FT_MSG_REMOTE, err);
}
