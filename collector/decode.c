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
	default:
		/* Unknown keys are allowed: newer agents may add fields. */
		return true;
	}
	/* clang-format on */
}

/*
 * Is data[0..len) one msgpack object whose containers announce no more
 * elements than there are bytes left to hold them? msgpack-c allocates an
 * array's or map's elements from the announced count before it reads
 * them, so without this walk a 20-byte frame announcing four billion
 * elements costs tens of GiB (found by fuzz_wire). Every element takes at
 * least one byte, so `pending <= bytes left` bounds the allocation by the
 * frame size. Lengths of str/bin/ext are checked the same way.
 */
static bool msgpack_plausible(const unsigned char *p, size_t len)
{
	uint64_t pending = 1; /* objects still to read */
	size_t off = 0;

	while (pending) {
		if (off >= len || pending > len - off)
			return false;
		unsigned b = p[off];
		size_t left = len - off;
		uint64_t skip = 1, items = 0; /* bytes of this object, elements it adds */

/* clang-format off */
#define NEED(n) do { if (left < (n)) return false; } while (0)
/* clang-format on */
#define BE16(q) ((uint64_t)(q)[0] << 8 | (q)[1])
#define BE32(q) ((uint64_t)(q)[0] << 24 | (uint64_t)(q)[1] << 16 | (uint64_t)(q)[2] << 8 | (q)[3])
		if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
			skip = 1;
		} else if (b <= 0x8f) {
			items = 2ull * (b & 0x0f);
		} else if (b <= 0x9f) {
			items = b & 0x0f;
		} else if (b <= 0xbf) {
			skip = 1 + (b & 0x1f);
		} else {
			/* clang-format off */
			switch (b) {
			case 0xc4: case 0xd9: NEED(2); skip = 2 + p[off + 1]; break;
			case 0xc5: case 0xda: NEED(3); skip = 3 + BE16(p + off + 1); break;
			case 0xc6: case 0xdb: NEED(5); skip = 5 + BE32(p + off + 1); break;
			case 0xc7: NEED(2); skip = 3 + p[off + 1]; break;
			case 0xc8: NEED(3); skip = 4 + BE16(p + off + 1); break;
			case 0xc9: NEED(5); skip = 6 + BE32(p + off + 1); break;
			case 0xca: skip = 5; break;
			case 0xcb: skip = 9; break;
			case 0xcc: case 0xd0: skip = 2; break;
			case 0xcd: case 0xd1: skip = 3; break;
			case 0xce: case 0xd2: skip = 5; break;
			case 0xcf: case 0xd3: skip = 9; break;
			case 0xd4: skip = 3; break;
			case 0xd5: skip = 4; break;
			case 0xd6: skip = 6; break;
			case 0xd7: skip = 10; break;
			case 0xd8: skip = 18; break;
			case 0xdc: NEED(3); skip = 3; items = BE16(p + off + 1); break;
			case 0xdd: NEED(5); skip = 5; items = BE32(p + off + 1); break;
			case 0xde: NEED(3); skip = 3; items = 2 * BE16(p + off + 1); break;
			case 0xdf: NEED(5); skip = 5; items = 2 * BE32(p + off + 1); break;
			default: return false; /* 0xc1: never used */
			}
			/* clang-format on */
		}
#undef NEED
#undef BE16
#undef BE32
		if (skip > left)
			return false;
		off += (size_t)skip;
		pending = pending - 1 + items;
	}
	return off == len;
}

int wire_decode(const char *payload, size_t len, unsigned type, msgpack_unpacked *up, wire_msg *out)
{
	size_t off = 0;

	memset(out, 0, sizeof(*out));
	out->type = type;
	out->ppid = -1;
	if (!msgpack_plausible((const unsigned char *)payload, len))
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
