/*
 * The encoder refuses a frame whose map announces another number of keys
 * than it holds. Each enc_* function counts its map's size by hand; this
 * test builds maps with the count wrong both ways through the encoder's
 * own helpers (encode.c is included, its static functions with it) and
 * sees them fail with -EPROTO, while an overflow still fails with
 * -ENOBUFS. The wire vectors check that every message the agent sends
 * has its count right.
 */
#include "encode.c"
#include "check.h"

/* A frame of type EXIT whose map announces `promised` keys and holds
 * `written` of TS, TID, CODE, SIGNO (in that order), into cap bytes. */
static ssize_t frame_with_keys(unsigned char *buf, size_t cap, size_t promised, size_t written)
{
	static const unsigned keys[] = {FT_K_TS, FT_K_TID, FT_K_CODE, FT_K_SIGNO};
	struct enc_cur c;
	msgpack_packer pk;
	int err = enc_begin(&c, &pk, buf, cap, promised);

	for (size_t i = 0; i < written && !err; i++)
		err = enc_kint(&pk, keys[i], 7);
	return enc_end(&c, FT_MSG_EXIT, err);
}

int main(void)
{
	unsigned char buf[256];
	ssize_t n;

	n = frame_with_keys(buf, sizeof(buf), 3, 3);
	CHECK_INT(n, ==, FT_WIRE_HEADER_SIZE + 1 + 3 * 2);
	CHECK_INT(ft_wire_payload_len(buf), ==, 1 + 3 * 2);
	/* One key short, one key over, none. */
	CHECK_INT(frame_with_keys(buf, sizeof(buf), 3, 2), ==, -EPROTO);
	CHECK_INT(frame_with_keys(buf, sizeof(buf), 3, 4), ==, -EPROTO);
	CHECK_INT(frame_with_keys(buf, sizeof(buf), 1, 0), ==, -EPROTO);
	CHECK_INT(frame_with_keys(buf, sizeof(buf), 0, 0), ==, FT_WIRE_HEADER_SIZE + 1);
	/* A frame that does not fit is an overflow, whatever its count. */
	CHECK_INT(frame_with_keys(buf, (size_t)n - 1, 3, 3), ==, -ENOBUFS);
	CHECK_INT(frame_with_keys(buf, FT_WIRE_HEADER_SIZE + 2, 3, 2), ==, -ENOBUFS);
	/* No room for a key, or for the value after it. */
	CHECK_INT(frame_with_keys(buf, FT_WIRE_HEADER_SIZE + 1, 3, 3), ==, -ENOBUFS);
	CHECK_INT(frame_with_keys(buf, FT_WIRE_HEADER_SIZE + 1 + 2 + 1, 3, 3), ==, -ENOBUFS);
	CHECK_INT(frame_with_keys(buf, FT_WIRE_HEADER_SIZE + 1 + 2 + 2, 3, 3), ==, -ENOBUFS);
	/* The public encoders keep their counts: one of them, every variant
	 * of every message is in wire_vectors. */
	CHECK_INT(enc_exit(buf, sizeof(buf), 1, 2, 3, NULL, NULL), ==, n);
	return check_done("encode_keys");
}
