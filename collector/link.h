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
int link_key_create(const char *dir, char run_id[LINK_RUN_ID_LEN + 1],
		    uint8_t key[LINK_KEY_LEN], char *path, size_t cap);
/* Reads DIR/RUNID.key: a regular file of this user that no one else may
 * read or write (refused otherwise, -EPERM). Returns 0 or a negative
 * errno; why names what is wrong ("group-readable"). */
int link_key_read(const char *dir, const char *run_id, uint8_t key[LINK_KEY_LEN],
		  const char **why);

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

/* ---- the node ---------------------------------------------------------- */

typedef struct link_node link_node;

typedef struct link_node_cb {
	/* Authenticated (err 0), or could not connect or prove the key:
	 * why says it for the user. */
	void (*connected)(void *ctx, int err, const char *why);
	/* A clock burst ended: its best round trip, as a sample to add to
	 * the node's model (model_add_clock_sample). */
	void (*clock)(void *ctx, const model_clock_sample *s);
	/* The send queue went below the low-water mark: sync more. */
	void (*writable)(void *ctx);
	/* The head acknowledged END (err 0), or the connection failed (err
	 * < 0): either way the link is done. */
	void (*done)(void *ctx, int err, const char *why);
} link_node_cb;

/*
 * Connects to head ("HOST:PORT"); the head's first message names its run,
 * whose key the node reads from link_key_dir (link_key_read) to prove it
 * and to check the head's own proof; then it tells the head info. Asynchronous: cb->connected says
 * how it went. Returns 0 or a negative errno (bad address).
 */
int link_node_start(link_node **node, uv_loop_t *loop, const char *head,
		    const link_node_info *info, const link_node_cb *cb, void *ctx);
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
/* Closes and frees once libuv released the handle. NULL: no-op. */
void link_node_close(link_node *l);

#endif /* FT_COLLECTOR_LINK_H */
