/*
 * link.c - the TCP connection between a node collector and the head of a
 * multi-host run (docs/MULTIHOST.md).
 *
 * One connection per node collector. It opens with a mutual
 * challenge-response keyed by the run's secret (a 32-byte key in a 0600
 * file, never on a command line or in an environment: link_key_*); after
 * it, the node sends its model stream (combine/include/mstream.h) and
 * measures its clock against the head's (round trips NTP style, the best
 * of each burst kept as a model_clock_sample). Before authentication a peer
 * may send only a few small frames and has a few seconds; a peer that
 * fails is refused with a warning naming its address, and nothing it sent
 * is used. Frames are length-prefixed and capped as for local peers.
 */
#ifndef FT_COLLECTOR_LINK_H
#define FT_COLLECTOR_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "model.h"

#define LINK_KEY_LEN 32
#define LINK_RUN_ID_LEN 16 /* hex characters */

/* The node's send queue (link_node_queued): above the high-water mark the
 * caller stops syncing; cb->writable fires when it drops under the low. */
#define LINK_HIGH_WATER (8u * 1024u * 1024u)
#define LINK_LOW_WATER (2u * 1024u * 1024u)
/* Deadlines (link_*_set_timeouts changes them, for tests). A peer has
 * LINK_AUTH_MS to connect and prove the key; an authenticated peer silent
 * for LINK_IDLE_MS is gone. The node sends a heartbeat every
 * LINK_HEARTBEAT_MS (or a fifth of a shorter idle limit), and the head
 * answers each. The idle limit is long: a peer on a machine loaded far
 * past its cores can go unscheduled for many seconds and is alive; a
 * host that is gone is noticed sooner by TCP (the kernel's unreachable
 * reports, keepalive: LINK_KEEPALIVE_*, about 15 s). */
#define LINK_AUTH_MS 5000u
#define LINK_IDLE_MS 60000u
#define LINK_HEARTBEAT_MS 2000u
#define LINK_KEEPALIVE_IDLE_S 5
#define LINK_KEEPALIVE_INTVL_S 2
#define LINK_KEEPALIVE_CNT 5
#define LINK_USER_TIMEOUT_MS 20000u
/* Round trips per clock burst; the fastest gives the sample. */
#define LINK_BURST 16

/* ---- the run's key ------------------------------------------------------ */

/*
 * The directory that holds run keys: $FORKTRACE_KEY_DIR, else
 * $HOME/.forktrace/keys (a cluster's shared home makes it the same
 * directory on every host). Written into buf; returns 0 or -ENAMETOOLONG /
 * -ENOENT (no HOME).
 */
int link_key_dir(char *buf, size_t cap);
/* Creates a random run id and key, and the key file DIR/RUNID.key (0600,
 * in a 0700 directory of this user, created when missing). path gets the
 * file's path (the caller removes it at the end). Returns 0 or a negative
 * errno. */
int link_key_create(const char *dir, char run_id[LINK_RUN_ID_LEN + 1], uint8_t key[LINK_KEY_LEN],
		    char *path, size_t cap);
/* Reads DIR/RUNID.key: a regular file of this user that no one else may
 * read or write (refused otherwise, -EPERM). Returns 0 or a negative
 * errno; why names what is wrong ("group-readable"). */
int link_key_read(const char *dir, const char *run_id, uint8_t key[LINK_KEY_LEN], const char **why);

/* ---- the head ---------------------------------------------------------- */

typedef struct link_head link_head;

/* Who joined, as the node said after proving the key. Strings borrowed for
 * the callback. */
typedef struct link_node_info {
	const char *host;        /* the node's host name */
	const char *peer;        /* "ADDR:PORT" of the connection */
	int64_t launcher_pid;    /* see model_node_part; -1: --join */
	const char *launched_as; /* destination as the launcher named it, or NULL */
	const char *fallback;    /* where the node writes its part if the link
				  * fails ("node2:/shared/out/node2-77.ftnode") */
	/* link_node_start only: the run this node belongs to, when it knows
	 * (the run id is no secret); a head of another run is then refused.
	 * NULL: the run the head's challenge names (--join). */
	const char *run_id;
} link_node_info;

typedef struct link_head_cb {
	/* A node proved the key. Returns the node's context (its part), or
	 * NULL to refuse it (then the connection closes). */
	void *(*joined)(void *ctx, const link_node_info *info);
	/* Model stream bytes from a node, in order. Returns 0, or a negative
	 * errno to drop the node (its part keeps what came before). */
	int (*data)(void *ctx, void *node, const void *bytes, size_t len);
	/* The node's connection ended: err 0 after its END (the part is
	 * complete), else why it dropped (-ECONNRESET, -ETIMEDOUT...). */
	void (*ended)(void *ctx, void *node, int err);
	/* A peer was refused (wrong key, garbage, too slow): the link
	 * prints nothing itself; the caller says it, rate-limited. */
	void (*refused)(void *ctx, const char *peer, const char *why);
} link_head_cb;

/*
 * Listens on addr ("HOST:PORT", ":PORT", or NULL for every address and a
 * free port) for the nodes of run run_id with key. *port gets the port.
 * Returns 0 or a negative errno (and *head NULL).
 */
int link_head_start(link_head **head, uv_loop_t *loop, const char *addr, const char *run_id,
		    const uint8_t key[LINK_KEY_LEN], const link_head_cb *cb, void *ctx, int *port);
/* Connections that are authenticated and not ended. */
size_t link_head_active(const link_head *h);
/* Stops listening; authenticated connections go on until they end. */
void link_head_stop_listening(link_head *h);
/* Closes every connection (each gets its ended callback with -ECANCELED)
 * and frees h once libuv released its handles. NULL: no-op. */
void link_head_close(link_head *h);
/*
 * Frames after the handshake are sealed (AES-256-GCM, or
 * ChaCha20-Poly1305 where a side lacks AES instructions: encrypted and
 * authenticated, docs/SECURITY.md). plain: the connections accepted from
 * now on leave them in the clear and unauthenticated instead (the
 * handshake stays the same): cheaper, for a network no one else can see
 * or write into.
 */
void link_head_set_plain(link_head *h, bool plain);
/* Deadlines of the connections accepted from now on (0: keep). */
void link_head_set_timeouts(link_head *h, unsigned auth_ms, unsigned idle_ms);

/* ---- the node ---------------------------------------------------------- */

typedef struct link_node link_node;

typedef struct link_node_cb {
	/* Authenticated (err 0), or could not connect or prove the key:
	 * why says it for the user (then nothing else follows; DATA queued
	 * before was never sent). */
	void (*connected)(void *ctx, int err, const char *why);
	/* A clock burst ended: its best round trip, as a sample to add to
	 * the node's model (model_add_clock_sample). */
	void (*clock)(void *ctx, const model_clock_sample *s);
	/* The send queue went below the low-water mark: sync more. */
	void (*writable)(void *ctx);
	/* After connected(0): the head acknowledged END (err 0), or the
	 * connection failed (err < 0; -ECONNRESET, -ETIMEDOUT when the
	 * head was silent for LINK_IDLE_MS): either way the link is done. */
	void (*done)(void *ctx, int err, const char *why);
} link_node_cb;

/*
 * Connects to head ("HOST:PORT"); the head's first message names its run,
 * whose key the node reads from link_key_dir (link_key_read) to prove it
 * and to check the head's own proof; then it tells the head info. Asynchronous: cb->connected says
 * how it went. Returns 0 or a negative errno (bad address).
 */
int link_node_start(link_node **node, uv_loop_t *loop, const char *head, const link_node_info *info,
		    const link_node_cb *cb, void *ctx);
/* Queues model stream bytes (copied). Returns 0 or a negative errno. */
int link_node_send(link_node *l, const void *data, size_t len);
/* Bytes queued and not yet written: above the high-water mark the caller
 * stops syncing until cb->writable. */
size_t link_node_queued(const link_node *l);
/* Starts a clock burst (round trips, the best kept): at join, then
 * periodically and at the end. Returns 0 or a negative errno. */
int link_node_clock_burst(link_node *l);
/* Sends END after everything queued; cb->done follows. */
int link_node_finish(link_node *l);
/* Closes and frees once libuv released the handle; no callback runs after
 * it. NULL: no-op. */
void link_node_close(link_node *l);
/* Deadlines from now on (0: keep): auth_ms to connect and be accepted,
 * idle_ms of silence from the head that ends the link. */
void link_node_set_timeouts(link_node *l, unsigned auth_ms, unsigned idle_ms);
/* The run the head named in its challenge (it names the key), or NULL
 * before one came (or for l NULL). Borrowed from l. */
const char *link_node_run_id(const link_node *l);

/* ---- frames (docs/TRACE_FORMAT.md, "Link frames") ---------------------- */

#define LINK_MAGIC0 0x46 /* 'F' */
#define LINK_MAGIC1 0x4c /* 'L' */
#define LINK_VERSION 1
#define LINK_HEADER_SIZE 8
/* A frame's payload before authentication (the PROVE and its info). */
#define LINK_AUTH_MAX 1024u
/* A DATA frame's payload (sealed: model stream bytes and the tag); the
 * head holds one at a time per node. */
#define LINK_DATA_MAX (1024u * 1024u)
/* What sealing adds to each frame after the handshake. */
#define LINK_AEAD_TAG 16u

enum link_frame_type {
	LINK_CHALLENGE = 1, /* head: run id (16 hex), head nonce (32) */
	LINK_PROVE = 2,     /* node: node nonce (32), HMAC (32), info (msgpack map) */
	LINK_ACCEPT = 3,    /* head: HMAC (32), cipher (1) */
	LINK_REFUSE = 4,    /* head: why, text (the peer then closes) */
	/* Sealed (AEAD, the header as additional data) from here on. */
	LINK_DATA = 5,    /* node: model stream bytes */
	LINK_PING = 6,    /* node: t1, its CLOCK_MONOTONIC ns (u64 LE) */
	LINK_PONG = 7,    /* head: t1, t2 its CLOCK_MONOTONIC ns */
	LINK_END = 8,     /* node: its part is complete (empty) */
	LINK_END_ACK = 9, /* head: the part is in (empty) */
	LINK_TYPE_MAX = 10
};

/* Errors of link_parse (negative, apart from errnos). */
#define LINK_ERR_MAGIC (-1001)
#define LINK_ERR_VERSION (-1002)
#define LINK_ERR_TYPE (-1003)   /* a type not expected now */
#define LINK_ERR_LENGTH (-1004) /* a length the type does not allow */

/*
 * Called for each frame: once with the whole payload (last true), except
 * DATA, whose payload comes in the slices it arrives in (last true on the
 * final one; an empty DATA frame gives one empty slice). bytes are
 * borrowed for the call. Returns 0 to go on, or a negative value that
 * link_parse returns.
 */
typedef int (*link_frame_fn)(void *arg, unsigned type, const uint8_t *bytes, size_t len, bool last);

/* The state of one direction of a stream. allowed: bit (1 << type) for
 * each type that may come now; the callback may change it. */
typedef struct link_parser {
	uint32_t allowed;
	uint8_t head[LINK_HEADER_SIZE];
	unsigned head_len;
	unsigned type;
	uint32_t len, got;
	uint8_t small[LINK_AUTH_MAX]; /* the payload of a frame other than DATA */
} link_parser;

/* The payload a type may have: [min, max] bytes. */
void link_frame_limits(unsigned type, uint32_t *min, uint32_t *max);
/*
 * Consumes n bytes of a stream: frames go to fn as they complete (DATA as
 * it arrives). Buffers at most LINK_AUTH_MAX bytes of a frame. Returns 0,
 * a LINK_ERR_* when the stream breaks the protocol (the connection must
 * close), or what fn returned.
 */
int link_parse(link_parser *p, const uint8_t *bytes, size_t n, link_frame_fn fn, void *arg);
/* What a LINK_ERR_* (or errno) means, for a refusal's reason. */
const char *link_strerror(int err);

#endif /* FT_COLLECTOR_LINK_H */
