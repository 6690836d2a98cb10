/*
 * head.c - the head of a multi-host run (docs/MULTIHOST.md): the run's key,
 * the listener for node collectors (link.c), one part per node that joined
 * (a model of its own, filled from the node's model stream), and what the
 * head says about the hosts whose parts did not come whole.
 *
 * A part is a model_trace of its own, on its node's clock: the merge maps
 * its times and keeps its pids apart when the trace is written. Memory:
 * the run's model and every part draw from one --max-memory budget; before
 * a part takes more of the stream, its spill limit is what it holds plus
 * what the budget has left, so past the budget whatever grows goes to its
 * spill file (head_rebalance does the same for the run's own model).
 *
 * The head never fails the run: without a key or a listener, remote
 * launches are simply not followed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "internal.h"
#include "vec.h"
#include "link.h"
#include "mstream.h"
#include "say.h"

/* A launched host that never joined is missing once its launcher has
 * ended and this much more has passed (a node joins as it starts, long
 * before the ssh in front of it ends: this covers the accept queue). */
#define HEAD_JOIN_GRACE_MS 1000
#define HEAD_POLL_MS 20
/* Refused peers the head names; the rest are counted. */
#define HEAD_REFUSED_SHOWN 5

typedef struct head_part {
	model_trace *model;
	mstream_reader *rd;
	char *host;        /* the node's host name */
	char *peer;        /* ADDR:PORT of its connection */
	char *fallback;    /* where the node would write its part, or NULL */
	char *launched_as; /* or NULL */
	int64_t launcher_pid;
	bool ended;       /* its connection is gone */
	bool complete;    /* its END came */
	bool malformed;   /* its stream did not parse: dropped */
	bool launched;    /* matched to one of the head's launches */
	int err;          /* why it ended, 0: after END */
	int64_t ended_ns; /* on the head's clock */
} head_part;

struct head_state {
	uv_loop_t *loop;
	link_head *link;
	model_trace *model; /* the run's own (borrowed) */
	head_opts o;
	char key_path[4096];
	char run_id[LINK_RUN_ID_LEN + 1];
	head_part **parts;
	size_t nparts, cap;
	uint64_t refused;
	/* The wait for the nodes after the tree ended. */
	uv_timer_t wait_timer;
	bool timer_made;
	int64_t wait_start_ms, wait_deadline_ms; /* -1: no deadline */
	void (*waited)(void *ctx);
	void *waited_ctx;
	bool waiting;
	bool cut; /* the wait ended with nodes still streaming */
};

static uint64_t budget_used(const head_state *h)
{
	uint64_t used = h->model->arena_mem;

	for (size_t i = 0; i < h->nparts; i++)
		used += h->parts[i]->model->arena_mem;
	return used;
}

/* What a model may keep in memory: what it holds and what the shared
 * budget has left. */
static uint64_t budget_for(const head_state *h, const model_trace *t)
{
	uint64_t used = budget_used(h);
	uint64_t left = used < h->o.max_memory ? h->o.max_memory - used : 0;

	return t->arena_mem + left;
}

void head_rebalance(head_state *h)
{
	if (h && h->model->spill_fd >= 0)
		h->model->spill_limit = budget_for(h, h->model);
}

/* Frees a part and everything it owns. NULL: no-op. */
static void part_free(head_part *p)
{
	if (p == NULL)
		return;
	mstream_reader_free(p->rd);
	model_free(p->model);
	free(p->host);
	free(p->peer);
	free(p->fallback);
	free(p->launched_as);
	free(p);
}

static void *on_joined(void *ctx, const link_node_info *info)
{
	head_state *h = ctx;
	head_part *p = calloc(1, sizeof(*p));

	if (!p || vec_grow(&h->parts, &h->cap, h->nparts + 1, sizeof(*h->parts), 4) < 0)
		goto fail;
	p->model = model_new();
	p->rd = p->model ? mstream_reader_new(p->model) : NULL;
	p->host = strdup(info->host ? info->host : "?");
	p->peer = strdup(info->peer ? info->peer : "?");
	p->fallback = info->fallback ? strdup(info->fallback) : NULL;
	p->launched_as = info->launched_as ? strdup(info->launched_as) : NULL;
	if (!p->rd || !p->host || !p->peer || (info->fallback && !p->fallback) ||
	    (info->launched_as && !p->launched_as))
		goto fail;
	p->launcher_pid = info->launcher_pid;
	p->ended_ns = -1;
	if (h->o.write_opts)
		run_set_write_opts(p->model, h->o.write_opts);
	if (h->o.spill_dir &&
	    model_set_spill(p->model, h->o.spill_dir, budget_for(h, p->model)) < 0)
		fprintf(stderr,
			"forktrace: warning: cannot create a spill file for the part of %s; "
			"--max-memory is not enforced for it\n",
			say_esc(p->host));
	h->parts[h->nparts++] = p;
	return p;

fail:
	part_free(p);
	fprintf(stderr, "forktrace: warning: out of memory: node %s not taken\n",
		say_esc(info->host));
	return NULL;
}

static int on_data(void *ctx, void *node, const void *bytes, size_t len)
{
	head_state *h = ctx;
	head_part *p = node;
	int rc;

	if (p->malformed)
		return -EBADMSG;
	if (p->model->spill_fd >= 0)
		p->model->spill_limit = budget_for(h, p->model);
	rc = mstream_feed(p->rd, bytes, len);
	if (rc == -EBADMSG) {
		p->malformed = true;
		fprintf(stderr,
			"forktrace: warning: node %s (%s) sent a model stream that does not "
			"parse (%s): dropped, what came before is kept\n",
			say_esc(p->host), say_esc(p->peer), say_esc(mstream_error(p->rd)));
	}
	return rc;
}

static void on_ended(void *ctx, void *node, int err)
{
	head_part *p = node;

	(void)ctx;
	p->ended = true;
	p->ended_ns = proc_now_mono_ns();
	p->complete = mstream_complete(p->rd);
	p->err = err;
}

static void on_refused(void *ctx, const char *peer, const char *why)
{
	head_state *h = ctx;

	if (h->refused++ < HEAD_REFUSED_SHOWN)
		fprintf(stderr,
			"forktrace: warning: refused a connection from %s: %s; nothing it "
			"sent is in the trace\n",
			say_esc(peer), say_esc(why));
}

int head_start(head_state **out, uv_loop_t *loop, model_trace *model, const head_opts *o, int *port,
	       char *why, size_t whycap)
{
	static const link_head_cb cb = {on_joined, on_data, on_ended, on_refused};
	head_state *h = calloc(1, sizeof(*h));
	uint8_t key[LINK_KEY_LEN];
	char dir[4096], addr[512];
	int rc;

	*out = NULL;
	why[0] = '\0';
	if (!h)
		return -ENOMEM;
	h->loop = loop;
	h->model = model;
	h->o = *o;
	rc = link_key_dir(dir, sizeof(dir));
	if (rc == 0)
		rc = link_key_create(dir, h->run_id, key, h->key_path, sizeof(h->key_path));
	if (rc < 0) {
		snprintf(why, whycap, "cannot create the run's key in %s: %s",
			 rc == -ENOENT && !getenv("HOME") ? "$HOME/.forktrace/keys (no HOME)" : dir,
			 strerror(-rc));
		h->key_path[0] = '\0';
		goto fail;
	}
	/* link_head_start wants HOST:PORT or :PORT. */
	if (o->listen && !strchr(o->listen, ':'))
		snprintf(addr, sizeof(addr), ":%s", o->listen);
	else
		snprintf(addr, sizeof(addr), "%s", o->listen ? o->listen : "");
	rc = link_head_start(&h->link, loop, o->listen ? addr : NULL, h->run_id, key, &cb, h, port);
	memset(key, 0, sizeof(key));
	if (rc < 0) {
		snprintf(why, whycap, "cannot listen on %s: %s",
			 o->listen ? o->listen : "a TCP port", uv_strerror(rc));
		goto fail;
	}
	model->node.run_id = model_strdup(model, h->run_id);
	*out = h;
	return 0;

fail:
	if (h->key_path[0])
		unlink(h->key_path);
	free(h);
	return rc;
}

const char *head_key_path(const head_state *h)
{
	return h ? h->key_path : "";
}

/* A launch after which a node is to join. */
static bool launch_expected(const proc_remote *r)
{
	return !r->untraced && !r->failed;
}

static bool same_launch(const proc_remote *r, int64_t pid, const char *dest)
{
	return r->pid == pid && dest && strcmp(r->dest, dest) == 0;
}

/*
 * The part of the node that launch i (of the n in r) started, or NULL
 * when none joined (yet). A node says its launcher's pid and destination;
 * the pid alone is ambiguous: a process that posix_spawns ssh is the
 * launcher of every ssh it spawns, to one host or to several. Launches
 * that share both are told apart by their order: the k-th of them has
 * the k-th part that names them (which of two ssh to one host started
 * which node cannot be known, and does not matter but for the parent).
 */
static head_part *launch_part(const head_state *h, const proc_remote *r, size_t i)
{
	size_t k = 0;

	if (!launch_expected(&r[i]))
		return NULL;
	for (size_t j = 0; j < i; j++)
		if (launch_expected(&r[j]) && same_launch(&r[j], r[i].pid, r[i].dest))
			k++;
	for (size_t j = 0; j < h->nparts; j++) {
		head_part *p = h->parts[j];

		if (same_launch(&r[i], p->launcher_pid, p->launched_as) && k-- == 0)
			return p;
	}
	return NULL;
}

/* Nodes still sending, or (within the grace after the tree ended, when
 * every launcher has ended) launches whose node has not joined yet. */
static bool nodes_busy(head_state *h, int64_t now_ms)
{
	const proc_remote *r = NULL;
	size_t n = h->o.tree ? proc_remotes(h->o.tree, &r) : 0;

	for (size_t i = 0; i < h->nparts; i++)
		if (!h->parts[i]->ended)
			return true;
	if (now_ms - h->wait_start_ms >= HEAD_JOIN_GRACE_MS)
		return false;
	for (size_t i = 0; i < n; i++)
		if (launch_expected(&r[i]) && !launch_part(h, r, i))
			return true;
	return false;
}

static void wait_cb(uv_timer_t *t)
{
	head_state *h = t->data;
	int64_t now = (int64_t)uv_now(h->loop);

	if (!h->waiting)
		return;
	if (nodes_busy(h, now) && (h->wait_deadline_ms < 0 || now < h->wait_deadline_ms))
		return;
	h->cut = nodes_busy(h, now);
	h->waiting = false;
	uv_timer_stop(&h->wait_timer);
	h->waited(h->waited_ctx);
}

void head_wait(head_state *h, int64_t limit_ms, void (*done)(void *ctx), void *ctx)
{
	link_head_stop_listening(h->link);
	h->waited = done;
	h->waited_ctx = ctx;
	h->waiting = true;
	h->wait_start_ms = (int64_t)uv_now(h->loop);
	h->wait_deadline_ms = limit_ms < 0 ? -1 : h->wait_start_ms + limit_ms;
	if (!h->timer_made) {
		uv_timer_init(h->loop, &h->wait_timer);
		h->wait_timer.data = h;
		h->timer_made = true;
	}
	/* At once: nodes that ended before the tree did are done. */
	uv_timer_start(&h->wait_timer, wait_cb, 0, HEAD_POLL_MS);
}

void head_stop_waiting(head_state *h)
{
	if (h && h->waiting) {
		h->wait_deadline_ms = 0;
		uv_timer_start(&h->wait_timer, wait_cb, 0, HEAD_POLL_MS);
	}
}

/* The head's time t on the node's clock, by the inverse of the part's
 * clock map (trace = ns + offset + drift * (ns - ref)). */
static int64_t head_to_node_ns(const model_trace *part, int64_t t)
{
	model_clock_map m;

	model_clock_fit(part, &m);
	if (strcmp(m.method, "measured") != 0)
		return t;
	return (int64_t)(((double)(t - m.offset_ns) + m.drift * (double)m.ref_ns) /
			 (1.0 + m.drift));
}

/*
 * Matches the parts to the head's launches: a part goes under the
 * process that ran its ssh (the launcher itself for an exec, its child
 * for a spawn), and a launch no part matched is a missing host.
 */
static void match_launches(head_state *h)
{
	const proc_remote *r = NULL;
	size_t n = h->o.tree ? proc_remotes(h->o.tree, &r) : 0;

	for (size_t i = 0; i < n; i++) {
		head_part *p = launch_part(h, r, i);
		char why[512];

		if (p) {
			p->launched = true;
			p->model->node.launcher_pid = r[i].mp ? r[i].mp->pid : r[i].pid;
			continue;
		}
		if (r[i].failed)
			continue;
		if (r[i].untraced)
			snprintf(why, sizeof(why),
				 "its remote command was too long to put a node collector in "
				 "front of: it ran untraced");
		else
			snprintf(why, sizeof(why),
				 "no node collector joined (forktrace not at %s on %s?)",
				 r[i].forktrace ? r[i].forktrace : h->o.remote_path, r[i].dest);
		model_add_missing_host(h->model, r[i].dest, r[i].pid, why, NULL);
	}
}

void head_finish(head_state *h)
{
	int64_t now = proc_now_mono_ns();

	if (!h)
		return;
	match_launches(h);
	for (size_t i = 0; i < h->nparts; i++) {
		head_part *p = h->parts[i];
		int64_t at = p->ended ? p->ended_ns : now;

		p->model->node.is_node = true;
		/* A part of none of the head's launches whose launcher pid
		 * is known ran on another node (a nested hop: its pid is that
		 * node's): the part's root goes under the launch of that pid
		 * to its destination in the part that made it, never under
		 * whichever of the head's processes has the same pid. */
		if (!p->launched && p->model->node.launcher_pid >= 0)
			p->model->node.launched_by_node = true;
		/* Named by what it said at join if its stream never did. */
		if (!p->model->host)
			p->model->host = model_strdup(p->model, p->host);
		if (p->complete && !p->malformed)
			continue;
		/* A node still streaming when the wait ended was cut by the
		 * head, as a local daemon is: running. One whose connection
		 * dropped (or whose stream broke) is lost. */
		if (!p->ended) {
			p->model->node.lost_ns = head_to_node_ns(p->model, at);
			p->model->node.cut = true;
			model_close_open(p->model, MODEL_EXIT_RUNNING, p->model->node.lost_ns);
		} else {
			model_mark_lost(p->model, head_to_node_ns(p->model, at));
		}
		/* Its part is in the trace as far as it came; a node
		 * collector that lived on writes the whole of it there. */
		if (!p->ended)
			fprintf(stderr,
				"forktrace: warning: node %s (%s): still sending when the head "
				"stopped waiting for it; its part is in the trace as far as it "
				"came, its processes still open then marked running%s%s\n",
				say_esc(p->host), say_esc(p->peer),
				p->fallback ? "; if it lives on, its whole part goes to " : "",
				p->fallback ? say_esc(p->fallback) : "");
		if (p->ended) {
			size_t lost = say_count_exits(p->model, MODEL_EXIT_HOST_LOST);

			fprintf(stderr,
				"forktrace: warning: node %s (%s): %s; %zu of its processes, "
				"still open then, are marked host lost%s%s\n",
				say_esc(p->host), say_esc(p->peer),
				p->malformed ? "its model stream did not parse" : "connection lost",
				lost, p->fallback ? "; if it lived on, its whole part is in " : "",
				p->fallback ? say_esc(p->fallback) : "");
		}
	}
}

size_t head_parts(const head_state *h, model_trace **parts, size_t cap)
{
	size_t n = 0;

	for (size_t i = 0; h && i < h->nparts && n < cap; i++)
		parts[n++] = h->parts[i]->model;
	return n;
}

size_t head_nparts(const head_state *h)
{
	return h ? h->nparts : 0;
}

void head_close(head_state *h)
{
	if (!h)
		return;
	if (h->timer_made && !uv_is_closing((uv_handle_t *)&h->wait_timer))
		uv_close((uv_handle_t *)&h->wait_timer, NULL);
	link_head_close(h->link);
	h->link = NULL;
}

void head_free(head_state *h)
{
	if (!h)
		return;
	if (h->key_path[0])
		unlink(h->key_path);
	if (h->refused > HEAD_REFUSED_SHOWN)
		fprintf(stderr, "forktrace: warning: refused %" PRIu64 " more connections\n",
			h->refused - HEAD_REFUSED_SHOWN);
	for (size_t i = 0; i < h->nparts; i++) {
		part_free(h->parts[i]);
	}
	free(h->parts);
	free(h);
}
