/*
 * decode.c - wire payload decoding.
 *
 * Payloads come from traced programs, which the collector does not trust to
 * be well-formed (a program can scribble over the agent's memory, or a
 * stranger with our uid can connect). So decoding checks every type and
 * rejects anything it cannot account for, instead of guessing.
 */
#include <errno.h>
#include <string.h>

#include "internal.h"
#include "mpcheck.h"

static const char *const type_names[FT_MSG_TYPE_MAX] = {
	[FT_MSG_HELLO] = "HELLO",
	[FT_MSG_FORK] = "FORK",
	[FT_MSG_EXEC] = "EXEC",
	[FT_MSG_EXEC_FAIL] = "EXEC_FAIL",
	[FT_MSG_SPAWN] = "SPAWN",
	[FT_MSG_WAIT] = "WAIT",
	[FT_MSG_THREAD_START] = "THREAD_START",
	[FT_MSG_THREAD_END] = "THREAD_END",
	[FT_MSG_THREAD_NAME] = "THREAD_NAME",
	[FT_MSG_EXIT] = "EXIT",
	[FT_MSG_SIGNAL] = "SIGNAL",
	[FT_MSG_SHELL_BEGIN] = "SHELL_BEGIN",
	[FT_MSG_SHELL_END] = "SHELL_END",
	[FT_MSG_LOST] = "LOST",
	[FT_MSG_SHM] = "SHM",
	[FT_MSG_EVENTS] = "EVENTS",
	[FT_MSG_MODULE] = "MODULE",
	[FT_MSG_REMOTE] = "REMOTE",
};

const char *wire_type_name(unsigned type)
{
	if (type < FT_MSG_TYPE_MAX && type_names[type])
		return type_names[type];
	return "unknown";
}

/* An integer of either sign into *v; false for any other type. */
static bool obj_int(const msgpack_object *o, int64_t *v)
{
	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
		if (o->via.u64 > (uint64_t)INT64_MAX)
			return false;
		*v = (int64_t)o->via.u64;
		return true;
	}
	if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		*v = o->via.i64;
		return true;
	}
	return false;
}

static bool obj_uint(const msgpack_object *o, uint64_t *v)
{
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return false;
	*v = o->via.u64;
	return true;
}

/* A rank: an unsigned integer an int64_t holds. */
static bool obj_rank(const msgpack_object *o, int64_t *v)
{
	return o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && obj_int(o, v);
}

static bool obj_str(const msgpack_object *o, wire_str *s)
{
	if (o->type != MSGPACK_OBJECT_STR)
		return false;
	s->ptr = o->via.str.ptr;
	s->len = o->via.str.size;
	return true;
}

static bool obj_bin(const msgpack_object *o, wire_str *s)
{
	if (o->type != MSGPACK_OBJECT_BIN)
		return false;
	s->ptr = o->via.bin.ptr;
	s->len = o->via.bin.size;
	return true;
}

static bool obj_argv(const msgpack_object *o, wire_msg *m)
{
	if (o->type != MSGPACK_OBJECT_ARRAY)
		return false;
	for (uint32_t i = 0; i < o->via.array.size; i++)
		if (o->via.array.ptr[i].type != MSGPACK_OBJECT_STR)
			return false;
	m->argv = o->via.array.ptr;
	m->argc = o->via.array.size;
	return true;
}

/* An FT_K_RUSAGE array: at least FT_RUSAGE_N unsigned integers an int64_t
 * holds (a newer agent may send more: ignored). */
static bool obj_rusage(const msgpack_object *o, model_rusage *ru)
{
	int64_t v[FT_RUSAGE_N];

	if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size < FT_RUSAGE_N)
		return false;
	for (size_t i = 0; i < FT_RUSAGE_N; i++)
		if (o->via.array.ptr[i].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
		    !obj_int(&o->via.array.ptr[i], &v[i]))
			return false;
	ru->user_ns = v[FT_RU_USER_NS];
	ru->sys_ns = v[FT_RU_SYS_NS];
	ru->maxrss_kb = v[FT_RU_MAXRSS_KB];
	ru->minflt = v[FT_RU_MINFLT];
	ru->majflt = v[FT_RU_MAJFLT];
	ru->nvcsw = v[FT_RU_NVCSW];
	ru->nivcsw = v[FT_RU_NIVCSW];
	ru->inblock = v[FT_RU_INBLOCK];
	ru->oublock = v[FT_RU_OUBLOCK];
	return true;
}

/* Stores one key/value pair; false when the value has the wrong type. */
static bool decode_field(wire_msg *m, uint64_t key, const msgpack_object *v)
{
	/* clang-format off */
	switch (key) {
	case FT_K_TS: return obj_int(v, &m->ts);
	case FT_K_TID: return obj_int(v, &m->tid);
	case FT_K_PID: return obj_int(v, &m->pid);
	case FT_K_PPID: return obj_int(v, &m->ppid);
	case FT_K_CHILD: return obj_int(v, &m->child);
	case FT_K_PATH: return obj_str(v, &m->path);
	case FT_K_ARGV: return obj_argv(v, m);
	case FT_K_CWD: return obj_str(v, &m->cwd);
	case FT_K_EXE: return obj_str(v, &m->exe);
	case FT_K_REALTIME: return obj_uint(v, &m->realtime);
	case FT_K_START_TICKS: return obj_uint(v, &m->start_ticks);
	case FT_K_ERRNO: return obj_int(v, &m->err);
	case FT_K_STATUS: return obj_int(v, &m->status);
	case FT_K_CODE: return obj_int(v, &m->code);
	case FT_K_SIGNO: return obj_int(v, &m->signo);
	case FT_K_NAME: return obj_str(v, &m->name);
	case FT_K_KIND: return obj_uint(v, &m->kind);
	case FT_K_COUNT: return obj_uint(v, &m->count);
	case FT_K_CMD: return obj_str(v, &m->cmd);
	case FT_K_FLAGS: return obj_uint(v, &m->flags);
	case FT_K_EXEC_TS: return obj_uint(v, &m->exec_ts);
	case FT_K_SLOT: return obj_uint(v, &m->slot);
	case FT_K_TABLE_SLOT: return obj_uint(v, &m->table_slot);
	case FT_K_OFFSET: return obj_uint(v, &m->offset);
	case FT_K_TSC: return obj_uint(v, &m->tsc);
	case FT_K_DATA: return obj_bin(v, &m->data);
	case FT_K_ADDR: return obj_uint(v, &m->addr);
	case FT_K_LO: return obj_uint(v, &m->lo);
	case FT_K_HI: return obj_uint(v, &m->hi);
	case FT_K_SIZE: return obj_uint(v, &m->size);
	case FT_K_CHILD_ERRNO: return obj_int(v, &m->child_err);
	case FT_K_RANK: return obj_rank(v, &m->rank);
	case FT_K_LOCAL_RANK: return obj_rank(v, &m->local_rank);
	case FT_K_RANK_VAR: return obj_str(v, &m->rank_var);
	case FT_K_RUSAGE: return obj_rusage(v, &m->ru);
	case FT_K_RUSAGE_CHILDREN: return obj_rusage(v, &m->ru_children);
	default:
		/* Unknown keys are allowed: newer agents may add fields. */
		return true;
	}
	/* clang-format on */
}

int wire_decode(const char *payload, size_t len, unsigned type, msgpack_unpacked *up, wire_msg *out)
{
	size_t off = 0;

	memset(out, 0, sizeof(*out));
	out->type = type;
	out->ppid = -1;
	if (!mpcheck_plausible(payload, len))
		return -EBADMSG;
	if (msgpack_unpack_next(up, payload, len, &off) != MSGPACK_UNPACK_SUCCESS || off != len)
		return -EBADMSG;
	const msgpack_object *root = &up->data;
	if (root->type != MSGPACK_OBJECT_MAP)
		return -EBADMSG;
	for (uint32_t i = 0; i < root->via.map.size; i++) {
		const msgpack_object_kv *kv = &root->via.map.ptr[i];
		uint64_t key;

		if (!obj_uint(&kv->key, &key))
			return -EBADMSG;
		if (!decode_field(out, key, &kv->val))
			return -EBADMSG;
		if (key < 64)
			out->present |= 1ull << key;
	}
	return 0;
}

int wire_next_frame(const char *data, size_t n, uint32_t max_payload, wire_frame *f)
{
	const unsigned char *h = (const unsigned char *)data;

	/* Judge the magic as soon as its bytes are there, so garbage is
	 * refused at once instead of after waiting for a header's worth. */
	if ((n >= 1 && h[0] != FT_WIRE_MAGIC0) || (n >= 2 && h[1] != FT_WIRE_MAGIC1))
		return WIRE_ERR_MAGIC;
	if (n >= 3 && h[2] != FT_WIRE_VERSION)
		return WIRE_ERR_VERSION;
	if (n < FT_WIRE_HEADER_SIZE)
		return 0;
	uint32_t len = ft_wire_payload_len(h);
	if (len > max_payload)
		return WIRE_ERR_TOO_BIG;
	if (n - FT_WIRE_HEADER_SIZE < len)
		return 0;
	f->type = h[3];
	f->payload = data + FT_WIRE_HEADER_SIZE;
	f->len = len;
	f->size = FT_WIRE_HEADER_SIZE + (size_t)len;
	return 1;
}

const char *wire_frame_strerror(int err)
{
	/* clang-format off */
	switch (err) {
	case WIRE_ERR_MAGIC: return "a frame without the FT magic";
	case WIRE_ERR_VERSION: return "a frame of an unknown protocol version";
	case WIRE_ERR_TOO_BIG: return "an oversized frame";
	default: return "a malformed frame";
	}
	/* clang-format on */
}
