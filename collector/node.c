/*
 * node.c - the node collector's side of a multi-host run (`forktrace run
 * --join HEAD:PORT`, docs/MULTIHOST.md): the same run as on one host, whose
 * model also goes to the head as a model stream (mstream.h) over the link
 * (link.h), with the node's clock measured against the head's.
 *
 * While the tree runs, a timer (and the link's writable callback) syncs
 * what changed in the model into the link, as long as less than
 * NODE_HIGH_WATER bytes wait in its queue: a slow head slows nothing but
 * this; the model keeps everything meanwhile. Clock bursts run at join,
 * every NODE_CLOCK_MS and at the end; their samples go into the model and
 * travel in the stream. At the end (node_deliver) the last samples and
 * records, END, and the head's acknowledgement; a link that failed at any
 * point (refused, key, dropped, stalled) leaves the whole part to a file:
 * --node-output DIR/HOST-PID.ftnode, else the spill directory.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <uv.h>

#include "internal.h"
#include "link.h"
#include "mstream.h"
#include "say.h"

#define NODE_SYNC_MS 50
#define NODE_CLOCK_MS 2000
/* Bytes queued on the link past which the node stops syncing. */
#define NODE_HIGH_WATER (4u << 20)
/* The end: a delivery whose queue does not move for this long is given up
 * (the part then goes to its file), and the last clock burst is waited for
 * at most this long. */
#define NODE_STALL_MS 5000
#define NODE_LAST_BURST_MS 1000

enum node_phase {
	NODE_RUNNING,    /* the tree runs */
	NODE_LAST_BURST, /* the tree ended: the last clock burst */
	NODE_DRAINING,   /* END sent, waiting for the head's acknowledgement */
	NODE_DONE,
};

struct node_state {
	uv_loop_t *loop;
	model_trace *model; /* the run's (borrowed) */
	node_opts o;
	link_node *link;
	mstream_writer *w;
	uv_timer_t sync_timer, clock_timer, end_timer;
	bool timers_made;
	bool connected; /* authenticated */
	bool end_sent;  /* END is queued */
	bool failed;    /* the link will carry nothing more */
	char why[512];  /* why it failed */
	enum node_phase phase;
	size_t last_queued;
	int64_t stall_since_ms;
	void (*delivered)(void *ctx);
	void *delivered_ctx;
	char fallback[4096]; /* where the part goes if the link fails */
	bool wrote_file;
};

static int emit_link(void *ctx, const void *data, size_t len)
{
	node_state *n = ctx;

	return link_node_send(n->link, data, len);
}

/* Syncs the model into the link while its queue has room. Returns true
 * when everything the model holds is in the link's queue. */
static bool sync_some(node_state *n)
{
	bool more = true;

	/* The parents as the tree knows them now: a part cut short must
	 * not hold processes without the parents they had. */
	if (!n->failed && n->connected && n->o.tree)
		proc_link_parents(n->o.tree);
	while (!n->failed && n->connected && more) {
		size_t q = link_node_queued(n->link);
		int rc;

		if (q >= NODE_HIGH_WATER)
			return false;
		rc = mstream_sync(n->w, emit_link, n, NODE_HIGH_WATER - q, &more);
		if (rc < 0) {
			n->failed = true;
			snprintf(n->why, sizeof(n->why), "cannot send: %s", strerror(-rc));
			return false;
		}
	}
	return !more;
}

static void fail_link(node_state *n, const char *why)
{
	if (n->failed)
		return;
	n->failed = true;
	snprintf(n->why, sizeof(n->why), "%s", why && *why ? why : "the link failed");
}

static void finish_delivery(node_state *n);
static void end_stream(node_state *n);

/* The head's run, as its challenge named it: the part belongs to it. */
static void take_run_id(node_state *n)
{
	const char *id = link_node_run_id(n->link);

	if (id && !n->model->node.run_id)
		n->model->node.run_id = model_strdup(n->model, id);
}

static void on_connected(void *ctx, int err, const char *why)
{
	node_state *n = ctx;

	take_run_id(n);
	if (err < 0) {
		fail_link(n, why);
		if (n->phase != NODE_RUNNING)
			finish_delivery(n);
		return;
	}
	n->connected = true;
	/* A tree that ended before the connection was up is waiting for its
	 * last burst: this one is it, and it gets its full time from now. */
	if (n->phase == NODE_LAST_BURST)
		n->stall_since_ms = (int64_t)uv_now(n->loop);
	link_node_clock_burst(n->link);
	sync_some(n);
	if (n->phase == NODE_DRAINING)
		end_stream(n);
}

static void on_clock(void *ctx, const model_clock_sample *s)
{
	node_state *n = ctx;

	model_add_clock_sample(n->model, s->node_ns, s->offset_ns, s->err_ns);
	/* The link wrote what it held during the burst before this: the
	 * rest of the stream and END follow it. */
	if (n->phase == NODE_LAST_BURST)
		end_stream(n);
}

static void on_writable(void *ctx)
{
	node_state *n = ctx;

	sync_some(n);
	if (n->phase == NODE_DRAINING)
		end_stream(n);
}

static void on_done(void *ctx, int err, const char *why)
{
	node_state *n = ctx;

	if (err < 0)
		fail_link(n, why);
	else
		n->phase = NODE_DONE;
	if (n->phase != NODE_RUNNING)
		finish_delivery(n);
}

static void sync_cb(uv_timer_t *t)
{
	sync_some(t->data);
}

static void clock_cb(uv_timer_t *t)
{
	node_state *n = t->data;

	if (n->connected && !n->failed)
		link_node_clock_burst(n->link);
}

/* Where the part goes when the link fails: DIR/HOST-PID.ftnode. */
static void fallback_path(node_state *n)
{
	const char *dir = n->o.node_output ? n->o.node_output : n->o.spill_dir;

	snprintf(n->fallback, sizeof(n->fallback), "%s/%s-%d.ftnode", dir ? dir : ".", n->o.host,
		 (int)getpid());
}

/*
 * Writes the whole part (the stream from its start, as a reader that saw
 * nothing needs it) to path, under a temporary name until it is complete.
 * Returns 0 or a negative errno.
 */
static int write_part_file(const model_trace *t, const char *path)
{
	char tmp[4096 + 16];
	int fd, rc;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.part", path) >= sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	rc = mstream_write_file(t, fd, true);
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc < 0)
		unlink(tmp);
	return rc;
}

static void write_fallback(node_state *n)
{
	int rc;

	if (n->o.spill_dir && !n->o.node_output)
		mkdir(n->o.spill_dir, 0700);
	rc = write_part_file(n->model, n->fallback);
	if (rc < 0 && n->o.node_output && n->o.spill_dir) {
		/* The shared directory refused: the spill directory, which
		 * is the node's own. */
		n->o.node_output = NULL;
		fallback_path(n);
		mkdir(n->o.spill_dir, 0700);
		rc = write_part_file(n->model, n->fallback);
	}
	if (rc < 0) {
		fprintf(stderr,
			"forktrace: node %s: cannot reach the head at %s (%s), and cannot "
			"write its part to %s: %s; this host's part of the trace is lost\n",
			say_esc(n->o.host), say_esc(n->o.head), say_esc(n->why),
			say_esc(n->fallback), strerror(-rc));
		return;
	}
	n->wrote_file = true;
	fprintf(stderr,
		"forktrace: node %s: cannot reach the head at %s (%s); its part is in %s "
		"('forktrace combine' reads it)\n",
		say_esc(n->o.host), say_esc(n->o.head), say_esc(n->why), say_esc(n->fallback));
}

static void stop_timers(node_state *n)
{
	if (!n->timers_made)
		return;
	uv_timer_stop(&n->sync_timer);
	uv_timer_stop(&n->clock_timer);
	uv_timer_stop(&n->end_timer);
}

/* The link is done (acknowledged, failed or given up): the part goes to
 * its file if the head does not have it whole, then the run goes on. */
static void finish_delivery(node_state *n)
{
	void (*done)(void *) = n->delivered;

	if (!done)
		return;
	n->delivered = NULL;
	stop_timers(n);
	if (n->phase != NODE_DONE || n->failed)
		write_fallback(n);
	n->phase = NODE_DONE;
	done(n->delivered_ctx);
}

/* After the last burst: every record, END, and the wait for the head. */
static void end_stream(node_state *n)
{
	bool all;
	int rc;

	if (n->failed) {
		finish_delivery(n);
		return;
	}
	n->phase = NODE_DRAINING;
	if (n->end_sent || !n->connected)
		return; /* on_connected comes back here */
	all = sync_some(n);
	if (n->failed) {
		finish_delivery(n);
		return;
	}
	/* Not all of it fit under the high-water mark: on_writable goes on. */
	if (!all)
		return;
	n->end_sent = true;
	rc = mstream_end(n->w, emit_link, n);
	if (rc == 0)
		rc = link_node_finish(n->link);
	if (rc < 0) {
		fail_link(n, strerror(-rc));
		finish_delivery(n);
	}
}

static void end_timer_cb(uv_timer_t *t)
{
	node_state *n = t->data;
	int64_t now = (int64_t)uv_now(n->loop);
	size_t q;

	if (n->phase == NODE_LAST_BURST && now - n->stall_since_ms >= NODE_LAST_BURST_MS) {
		end_stream(n);
		return;
	}
	if (n->phase != NODE_DRAINING)
		return;
	q = n->link ? link_node_queued(n->link) : 0;
	if (q != n->last_queued) {
		n->last_queued = q;
		n->stall_since_ms = now;
		return;
	}
	if (now - n->stall_since_ms >= NODE_STALL_MS) {
		fail_link(n, "the head stopped taking the part");
		finish_delivery(n);
	}
}

int node_start(node_state **out, uv_loop_t *loop, model_trace *model, const node_opts *o)
{
	static const link_node_cb cb = {on_connected, on_clock, on_writable, on_done};
	node_state *n = calloc(1, sizeof(*n));
	char fb[4096 + 300];
	link_node_info info;
	int rc;

	*out = NULL;
	if (!n)
		return -ENOMEM;
	n->loop = loop;
	n->model = model;
	n->o = *o;
	fallback_path(n);
	model->node.is_node = true;
	model->node.launcher_pid = o->launcher_pid;
	model->node.launched_as = model_strdup(model, o->launched_as);
	model->node.head_host = model_strndup(model, o->head, strcspn(o->head, ":"));
	n->w = mstream_writer_new(model);
	if (!n->w) {
		free(n);
		return -ENOMEM;
	}
	uv_timer_init(loop, &n->sync_timer);
	uv_timer_init(loop, &n->clock_timer);
	uv_timer_init(loop, &n->end_timer);
	n->sync_timer.data = n->clock_timer.data = n->end_timer.data = n;
	n->timers_made = true;
	*out = n;
	if (o->resolve_error) {
		fail_link(n, o->resolve_error);
		return 0;
	}
	snprintf(fb, sizeof(fb), "%s:%s", o->host, n->fallback);
	info = (link_node_info){.host = o->host,
				.launcher_pid = o->launcher_pid,
				.launched_as = o->launched_as,
				.fallback = fb};
	rc = link_node_start(&n->link, loop, o->head, &info, &cb, n);
	if (rc < 0) {
		char why[256];

		snprintf(why, sizeof(why), "%s", uv_strerror(rc));
		fail_link(n, why);
		return 0;
	}
	uv_timer_start(&n->sync_timer, sync_cb, NODE_SYNC_MS, NODE_SYNC_MS);
	uv_timer_start(&n->clock_timer, clock_cb, NODE_CLOCK_MS, NODE_CLOCK_MS);
	/* Neither keeps the loop alive on its own: the tree does. */
	uv_unref((uv_handle_t *)&n->sync_timer);
	uv_unref((uv_handle_t *)&n->clock_timer);
	return 0;
}

void node_deliver(node_state *n, void (*done)(void *ctx), void *ctx)
{
	n->delivered = done;
	n->delivered_ctx = ctx;
	uv_ref((uv_handle_t *)&n->sync_timer);
	if (n->failed || !n->link) {
		finish_delivery(n);
		return;
	}
	n->phase = NODE_LAST_BURST;
	n->stall_since_ms = (int64_t)uv_now(n->loop);
	n->last_queued = SIZE_MAX;
	uv_timer_start(&n->end_timer, end_timer_cb, 50, 50);
	/* Not connected yet (a slow head, a busy machine): on_connected
	 * starts the burst, which is the part's only clock measurement when
	 * the tree was this short; the end goes on after NODE_LAST_BURST_MS
	 * either way. */
	if (n->connected && link_node_clock_burst(n->link) < 0)
		n->stall_since_ms -= NODE_LAST_BURST_MS;
}

const char *node_part_file(const node_state *n)
{
	return n && n->wrote_file ? n->fallback : NULL;
}

void node_close(node_state *n)
{
	if (!n)
		return;
	if (n->timers_made) {
		uv_close((uv_handle_t *)&n->sync_timer, NULL);
		uv_close((uv_handle_t *)&n->clock_timer, NULL);
		uv_close((uv_handle_t *)&n->end_timer, NULL);
		n->timers_made = false;
	}
	link_node_close(n->link);
	n->link = NULL;
}

void node_free(node_state *n)
{
	if (!n)
		return;
	mstream_writer_free(n->w);
	free(n);
}
