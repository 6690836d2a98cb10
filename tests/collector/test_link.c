/*
 * The link between a node collector and the head (collector/link.c), over
 * real TCP on the loopback: the handshake both ways, model stream bytes
 * arriving byte for byte, END and its ack, clock bursts, and every way a
 * peer can be refused or lost. Peers that die or hang are real processes
 * (fork), killed or stopped. Each scenario is its own ctest test:
 *
 *   test_link SCENARIO
 *
 * The key directory is a fresh temporary one ($FORKTRACE_KEY_DIR).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "check.h"
#include "link.h"

static char key_dir[256];
static char run_id[LINK_RUN_ID_LEN + 1];
static uint8_t key[LINK_KEY_LEN];
static char key_path[512];

/* ---- running the loop --------------------------------------------------- */

typedef bool (*cond_fn)(void *arg);

static void wake_cb(uv_timer_t *t)
{
	(void)t;
}

/* Runs loop until cond holds or ms pass. Returns whether it holds. */
static bool run_until(uv_loop_t *loop, cond_fn cond, void *arg, unsigned ms)
{
	uv_timer_t wake;
	uint64_t end;
	bool ok;

	uv_timer_init(loop, &wake);
	uv_timer_start(&wake, wake_cb, 5, 5);
	uv_update_time(loop);
	end = uv_now(loop) + ms;
	while (!(ok = cond(arg)) && uv_now(loop) < end)
		uv_run(loop, UV_RUN_ONCE);
	uv_close((uv_handle_t *)&wake, NULL);
	uv_run(loop, UV_RUN_NOWAIT);
	return ok;
}

/* Closes every handle left and checks that none leaked. */
static void loop_finish(uv_loop_t *loop)
{
	for (int i = 0; i < 100 && uv_loop_alive(loop); i++)
		uv_run(loop, UV_RUN_NOWAIT);
	uv_run(loop, UV_RUN_DEFAULT);
	CHECK_INT(uv_loop_close(loop), ==, 0);
}

/* ---- the head's side ---------------------------------------------------- */

typedef struct head_rec {
	link_head *h;
	int port;
	int joined, refused, ended;
	size_t ndata; /* calls of the data callback */
	int ended_err;
	char peer[128], why[256];
	char host[64], launched_as[64], fallback[128];
	int64_t launcher_pid;
	uint8_t *got;
	size_t got_len, got_cap;
	size_t got_at_end; /* bytes in when ended ran */
	int data_rc;       /* what the data callback returns */
	bool stop_on_data; /* a head that hangs: SIGSTOP at the first data */
	size_t die_after;  /* a head that dies: SIGKILL past this many bytes */
} head_rec;

static int node_token;
/* The head counts the bytes and keeps none (the benchmark). */
static bool head_discard;
/* The head leaves frames after the handshake in the clear. */
static bool head_plain;

static void *head_joined(void *ctx, const link_node_info *info)
{
	head_rec *r = ctx;

	r->joined++;
	snprintf(r->host, sizeof(r->host), "%s", info->host);
	snprintf(r->launched_as, sizeof(r->launched_as), "%s",
		 info->launched_as ? info->launched_as : "(null)");
	snprintf(r->fallback, sizeof(r->fallback), "%s",
		 info->fallback ? info->fallback : "(null)");
	snprintf(r->peer, sizeof(r->peer), "%s", info->peer);
	r->launcher_pid = info->launcher_pid;
	return &node_token;
}

static int head_data(void *ctx, void *node, const void *bytes, size_t len)
{
	head_rec *r = ctx;

	if (node != &node_token)
		check_fail_at(__FILE__, __LINE__, "data for a node the head never joined");
	r->ndata++;
	if (head_discard) {
		r->got_len += len;
		return 0;
	}
	if (r->got_len + len > r->got_cap) {
		size_t cap = r->got_cap ? r->got_cap : 1 << 20;
		while (cap < r->got_len + len)
			cap *= 2;
		r->got = realloc(r->got, cap);
		MUST(r->got);
		r->got_cap = cap;
	}
	memcpy(r->got + r->got_len, bytes, len);
	r->got_len += len;
	if (r->stop_on_data) {
		r->stop_on_data = false;
		raise(SIGSTOP);
	}
	if (r->die_after && r->got_len > r->die_after)
		raise(SIGKILL);
	return r->data_rc;
}

static void head_ended(void *ctx, void *node, int err)
{
	head_rec *r = ctx;

	(void)node;
	r->ended++;
	r->ended_err = err;
	r->got_at_end = r->got_len;
}

static void head_refused(void *ctx, const char *peer, const char *why)
{
	head_rec *r = ctx;

	r->refused++;
	snprintf(r->peer, sizeof(r->peer), "%s", peer);
	snprintf(r->why, sizeof(r->why), "%s", why);
}

static const link_head_cb head_cbs = {head_joined, head_data, head_ended, head_refused};

static void head_start(uv_loop_t *loop, head_rec *r, const char *addr)
{
	memset(r, 0, sizeof(*r));
	MUST(link_head_start(&r->h, loop, addr, run_id, key, &head_cbs, r, &r->port) == 0);
	link_head_set_plain(r->h, head_plain);
	MUST(r->port > 0);
}

static bool head_ended_or_refused(void *arg)
{
	head_rec *r = arg;
	return r->ended > 0 || r->refused > 0;
}

static bool head_refused_one(void *arg)
{
	return ((head_rec *)arg)->refused > 0;
}

/* ---- the node's side ---------------------------------------------------- */

typedef struct node_rec {
	link_node *l;
	int connected, connected_err;
	int done, done_err;
	char why[600];
	model_clock_sample samples[8];
	int nsamples;
	/* streaming */
	const uint8_t *src;
	size_t total, sent;
	unsigned seed;
	size_t max_piece;
	int writable;
	int bursts_left; /* clock bursts to start while streaming */
	int bursts_started;
	bool finish_when_sent;
} node_rec;

static void node_pump(node_rec *r);

static void node_connected(void *ctx, int err, const char *why)
{
	node_rec *r = ctx;

	r->connected++;
	r->connected_err = err;
	snprintf(r->why, sizeof(r->why), "%s", why ? why : "");
	if (err == 0)
		node_pump(r);
}

static void node_clock(void *ctx, const model_clock_sample *s)
{
	node_rec *r = ctx;

	if (r->nsamples < 8)
		r->samples[r->nsamples] = *s;
	r->nsamples++;
}

static void node_writable(void *ctx)
{
	node_rec *r = ctx;

	r->writable++;
	node_pump(r);
}

static void node_done(void *ctx, int err, const char *why)
{
	node_rec *r = ctx;

	r->done++;
	r->done_err = err;
	snprintf(r->why, sizeof(r->why), "%s", why ? why : "");
}

static const link_node_cb node_cbs = {node_connected, node_clock, node_writable, node_done};

/* Sends what is left in pieces of random length up to the high-water
 * mark, a clock burst now and then, and END after the last byte. */
static void node_pump(node_rec *r)
{
	while (r->sent < r->total && link_node_queued(r->l) < LINK_HIGH_WATER) {
		size_t n = 1 + (size_t)rand_r(&r->seed) % r->max_piece;
		if (n > r->total - r->sent)
			n = r->total - r->sent;
		CHECK_INT(link_node_send(r->l, r->src + r->sent, n), ==, 0);
		r->sent += n;
		/* A burst asked for while one runs joins it: start the
		 * next once the last one gave its sample. */
		if (r->bursts_left > 0 && r->nsamples == r->bursts_started &&
		    rand_r(&r->seed) % 8 == 0 && link_node_clock_burst(r->l) == 0) {
			r->bursts_left--;
			r->bursts_started++;
		}
	}
	if (r->sent == r->total && r->finish_when_sent) {
		r->finish_when_sent = false;
		CHECK_INT(link_node_finish(r->l), ==, 0);
	}
}

static const link_node_info node_info = {.host = "node7",
					 .launcher_pid = 4242,
					 .launched_as = "node7.cluster",
					 .fallback = "node7:/shared/x"};

static void node_start(uv_loop_t *loop, node_rec *r, const char *head)
{
	memset(r, 0, sizeof(*r));
	r->seed = 7;
	r->max_piece = 300 * 1024;
	MUST(link_node_start(&r->l, loop, head, &node_info, &node_cbs, r) == 0);
}

static bool node_finished(void *arg)
{
	node_rec *r = arg;
	return r->done > 0 || r->connected_err != 0;
}

static bool node_connected_any(void *arg)
{
	node_rec *r = arg;
	return r->connected > 0;
}

static uint8_t *random_bytes(size_t n)
{
	uint8_t *p = malloc(n);

	MUST(p);
	randombytes_buf(p, n);
	return p;
}

/* ---- scenarios ---------------------------------------------------------- */

/*
 * A node streams 24 MiB in pieces of random size (some queued before it
 * is accepted, some held during clock bursts), then finishes: the head
 * gets every byte in order, ended(0) after the last, and the node done(0)
 * after the head's ack. addr is where the node dials.
 */
static void stream_to(const char *listen, const char *dial_host, size_t total, size_t max_piece)
{
	uv_loop_t loop;
	head_rec hr;
	node_rec nr;
	char dial[300];
	uint8_t *src = random_bytes(total);

	uv_loop_init(&loop);
	head_start(&loop, &hr, listen);
	snprintf(dial, sizeof(dial), "%s:%d", dial_host, hr.port);
	node_start(&loop, &nr, dial);
	nr.src = src;
	nr.total = total;
	nr.max_piece = max_piece;
	/* Small pieces without bursts: what a burst holds goes in big frames. */
	nr.bursts_left = max_piece < 1024 ? 0 : 3;
	nr.finish_when_sent = true;
	/* Before the handshake: held, and sent first once accepted. */
	CHECK_INT(link_node_send(nr.l, src, 1000), ==, 0);
	nr.sent = 1000;
	CHECK_UINT(link_node_queued(nr.l), ==, 1000);
	CHECK(run_until(&loop, node_finished, &nr, 20000));
	CHECK_MSG(nr.connected == 1 && nr.connected_err == 0, "connected %d err %d: %s",
		  nr.connected, nr.connected_err, nr.why);
	CHECK_MSG(nr.done == 1 && nr.done_err == 0, "done %d err %d: %s", nr.done, nr.done_err,
		  nr.why);
	CHECK_INT(hr.joined, ==, 1);
	CHECK_INT(hr.refused, ==, 0);
	CHECK_INT(hr.ended, ==, 1);
	CHECK_INT(hr.ended_err, ==, 0);
	CHECK_UINT(hr.got_at_end, ==, total);
	CHECK_UINT(hr.got_len, ==, total);
	CHECK(hr.got && memcmp(hr.got, src, total) == 0);
	CHECK_STR_EQ(hr.host, "node7");
	CHECK_STR_EQ(hr.launched_as, "node7.cluster");
	CHECK_STR_EQ(hr.fallback, "node7:/shared/x");
	CHECK_INT(hr.launcher_pid, ==, 4242);
	CHECK_MSG(nr.writable > 0, "the queue never went over the high-water mark and back");
	/* Small pieces travel gathered into frames of up to 256 KiB. */
	if (max_piece < 1024)
		CHECK_MSG(hr.ndata < total / (64 * 1024), "%zu pieces came in %zu frames",
			  total / (max_piece / 2), hr.ndata);
	/* Every burst started gave its sample, even one that ran into the
	 * finish. */
	CHECK_INT(nr.bursts_started, >=, max_piece < 1024 ? 0 : 1);
	CHECK_INT(nr.nsamples, ==, nr.bursts_started);
	CHECK_UINT(link_head_active(hr.h), ==, 0);
	link_node_close(nr.l);
	link_head_close(hr.h);
	loop_finish(&loop);
	free(hr.got);
	free(src);
}

static void t_stream(void)
{
	stream_to(NULL, "127.0.0.1", 24u << 20, 300 * 1024);
}

/* A model stream is mostly records of tens of bytes: 12 MiB of them. */
static void t_small_pieces(void)
{
	stream_to(NULL, "127.0.0.1", 12u << 20, 100);
}

/* IPv6 when the host has it, and a name that resolves to ::1 and
 * 127.0.0.1 (the first address refused, the next one taken). */
static void t_addresses(void)
{
	int fd = socket(AF_INET6, SOCK_STREAM, 0);
	struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
	bool v6 = fd >= 0 && bind(fd, (struct sockaddr *)&a6, sizeof(a6)) == 0;

	if (fd >= 0)
		close(fd);
	if (v6) {
		stream_to("[::1]:0", "[::1]", 24u << 20, 300 * 1024);
		stream_to(":0", "[::1]", 24u << 20, 300 * 1024);
	} else {
		printf("link: no IPv6 on this host; IPv6 cases skipped\n");
	}
	stream_to("127.0.0.1:0", "localhost", 24u << 20, 300 * 1024);
	stream_to(":0", "127.0.0.1", 24u << 20, 300 * 1024);
}

/* Rewrites the run's key file with another key, as a node of another run
 * (or one with a stale key) would have it. */
static void key_file_write(const uint8_t *k)
{
	char hex[2 * LINK_KEY_LEN + 2];
	int fd = open(key_path, O_WRONLY | O_TRUNC);

	MUST(fd >= 0);
	sodium_bin2hex(hex, sizeof(hex), k, LINK_KEY_LEN);
	hex[2 * LINK_KEY_LEN] = '\n';
	MUST(write(fd, hex, 2 * LINK_KEY_LEN + 1) == 2 * LINK_KEY_LEN + 1);
	close(fd);
}

/* A node with the wrong key: refused, with its address named; nothing it
 * queued reaches the data callback; the node is told. */
static void t_wrong_key(void)
{
	uv_loop_t loop;
	head_rec hr;
	node_rec nr;
	char dial[64];
	uint8_t other[LINK_KEY_LEN];

	randombytes_buf(other, sizeof(other));
	key_file_write(other);
	uv_loop_init(&loop);
	head_start(&loop, &hr, "127.0.0.1:0");
	snprintf(dial, sizeof(dial), "127.0.0.1:%d", hr.port);
	node_start(&loop, &nr, dial);
	CHECK_INT(link_node_send(nr.l, "secret stuff", 12), ==, 0);
	CHECK(run_until(&loop, node_finished, &nr, 5000));
	CHECK(run_until(&loop, head_refused_one, &hr, 5000));
	CHECK_INT(hr.refused, ==, 1);
	CHECK_MSG(strncmp(hr.peer, "127.0.0.1:", 10) == 0, "peer %s", hr.peer);
	CHECK_MSG(strstr(hr.why, "key") != NULL, "why: %s", hr.why);
	CHECK_INT(hr.joined, ==, 0);
	CHECK_UINT(hr.got_len, ==, 0);
	CHECK_INT(nr.connected, ==, 1);
	CHECK_INT(nr.connected_err, <, 0);
	CHECK_MSG(strstr(nr.why, "refused") != NULL, "node says: %s", nr.why);
	CHECK_INT(nr.done, ==, 0);
	link_node_close(nr.l);
	link_head_close(hr.h);
	loop_finish(&loop);
	key_file_write(key);
}

/*
 * A node that knows its run refuses the head of another run of the same
 * user (whose key it also has), and one of its own run joins.
 */
static void t_other_run(void)
{
	char id2[LINK_RUN_ID_LEN + 1], path2[600], dial[64];
	uint8_t key2[LINK_KEY_LEN];
	link_node_info info = node_info;
	link_node *bad;
	uv_loop_t loop;
	head_rec hr;
	node_rec nr;

	MUST(link_key_create(key_dir, id2, key2, path2, sizeof(path2)) == 0);
	uv_loop_init(&loop);
	head_start(&loop, &hr, "127.0.0.1:0");
	snprintf(dial, sizeof(dial), "127.0.0.1:%d", hr.port);
	info.run_id = id2;
	memset(&nr, 0, sizeof(nr));
	MUST(link_node_start(&nr.l, &loop, dial, &info, &node_cbs, &nr) == 0);
	CHECK(run_until(&loop, node_finished, &nr, 5000));
	CHECK_INT(nr.connected_err, ==, -EACCES);
	CHECK_MSG(strstr(nr.why, "another run") != NULL, "node says: %s", nr.why);
	CHECK_INT(hr.joined, ==, 0);
	link_node_close(nr.l);
	info.run_id = run_id;
	memset(&nr, 0, sizeof(nr));
	MUST(link_node_start(&nr.l, &loop, dial, &info, &node_cbs, &nr) == 0);
	CHECK(run_until(&loop, node_connected_any, &nr, 5000));
	CHECK_INT(nr.connected_err, ==, 0);
	CHECK_INT(hr.joined, ==, 1);
	info.run_id = "not a run id";
	CHECK_INT(link_node_start(&bad, &loop, dial, &info, &node_cbs, NULL), ==, -EINVAL);
	link_node_close(nr.l);
	link_head_close(hr.h);
	loop_finish(&loop);
}

/* A raw TCP peer of the head's: connects and sends bytes (blocking; the
 * head's loop runs afterwards). Returns the fd. */
static int raw_connect(int port, const void *bytes, size_t len)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	MUST(fd >= 0);
	MUST(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	if (len)
		MUST(write(fd, bytes, len) == (ssize_t)len);
	return fd;
}

/* What a raw peer sends; the head must refuse it for why_part. */
static void refuse_raw(const char *what, const void *bytes, size_t len, const char *why_part)
{
	uv_loop_t loop;
	head_rec hr;

	uv_loop_init(&loop);
	head_start(&loop, &hr, "127.0.0.1:0");
	link_head_set_timeouts(hr.h, 300, 0);
	int fd = raw_connect(hr.port, bytes, len);
	uv_update_time(&loop);
	uint64_t t0 = uv_now(&loop);
	CHECK_MSG(run_until(&loop, head_ended_or_refused, &hr, 3000), "%s: not refused", what);
	CHECK_MSG(hr.refused == 1 && strstr(hr.why, why_part), "%s: refused %d: %s", what,
		  hr.refused, hr.why);
	CHECK_MSG(strncmp(hr.peer, "127.0.0.1:", 10) == 0, "%s: peer %s", what, hr.peer);
	CHECK_INT(hr.joined, ==, 0);
	CHECK_UINT(hr.got_len, ==, 0);
	if (strstr(why_part, "within"))
		CHECK_MSG(uv_now(&loop) - t0 >= 250, "%s: refused after %llu ms", what,
			  (unsigned long long)(uv_now(&loop) - t0));
	/* The head closed its end: the peer reads the CHALLENGE and a REFUSE
	 * (unless its unread bytes made the close a reset), then EOF. */
	uint8_t buf[1024];
	ssize_t n = 0, total = 0;
	while (total < (ssize_t)sizeof(buf) && (n = read(fd, buf + total, sizeof(buf) - total)) > 0)
		total += n;
	CHECK_MSG(n == 0 || errno == ECONNRESET, "%s: the head kept the connection", what);
	CHECK_MSG(total >= 56 && buf[3] == LINK_CHALLENGE, "%s: no challenge", what);
	if (n == 0)
		CHECK_MSG(total > 56 + 8 && buf[56 + 3] == LINK_REFUSE, "%s: not told", what);
	close(fd);
	link_head_close(hr.h);
	loop_finish(&loop);
}

static void t_refuse_raw(void)
{
	const char http[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	/* A PROVE header that announces 2 GiB. */
	const uint8_t huge[] = {'F', 'L', 1, LINK_PROVE, 0, 0, 0, 0x80};
	/* DATA before authentication. */
	const uint8_t early[] = {'F', 'L', 1, LINK_DATA, 4, 0, 0, 0, 'a', 'b', 'c', 'd'};
	/* A version of the future. */
	const uint8_t v9[] = {'F', 'L', 9, LINK_PROVE, 64, 0, 0, 0};
	/* Half a header, then nothing: the deadline, not a wait forever. */
	const uint8_t half[] = {'F', 'L', 1};
	/* A well-formed PROVE (info {1: "x"}) whose MAC is made up. */
	uint8_t forged[8 + 68];

	memcpy(forged, (const uint8_t[]){'F', 'L', 1, LINK_PROVE, 68, 0, 0, 0}, 8);
	randombytes_buf(forged + 8, 64);
	memcpy(forged + 8 + 64, (const uint8_t[]){0x81, 0x01, 0xa1, 'x'}, 4);
	refuse_raw("http", http, sizeof(http) - 1, "not a link frame");
	refuse_raw("huge", huge, sizeof(huge), "length");
	refuse_raw("early data", early, sizeof(early), "may not send");
	refuse_raw("version", v9, sizeof(v9), "version");
	refuse_raw("nothing", NULL, 0, "within 300 ms");
	refuse_raw("half a header", half, sizeof(half), "within 300 ms");
	refuse_raw("forged", forged, sizeof(forged), "did not prove the run's key");
}

/*
 * A listener that knows the run id (it is not secret) but not the key:
 * it sends a CHALLENGE, reads the PROVE and answers an ACCEPT it cannot
 * have made. The node must refuse it and send it nothing more. Runs in a
 * child; writes the bytes it got after the PROVE to out.
 */
static void fake_head(int lfd, int out)
{
	uint8_t ch[8 + LINK_RUN_ID_LEN + 32], acc[8 + 33], buf[4096];
	int fd = accept(lfd, NULL, NULL);
	ssize_t n, after = 0;
	uint32_t len;

	memcpy(ch, (const uint8_t[]){'F', 'L', 1, LINK_CHALLENGE, 48, 0, 0, 0}, 8);
	memcpy(ch + 8, run_id, LINK_RUN_ID_LEN);
	randombytes_buf(ch + 8 + LINK_RUN_ID_LEN, 32);
	if (fd < 0 || write(fd, ch, sizeof(ch)) != sizeof(ch))
		_exit(2);
	/* The PROVE: header, then its length. */
	if (recv(fd, buf, 8, MSG_WAITALL) != 8)
		_exit(3);
	len = buf[4] | buf[5] << 8 | buf[6] << 16 | (uint32_t)buf[7] << 24;
	if (buf[3] != LINK_PROVE || len > sizeof(buf) || recv(fd, buf, len, MSG_WAITALL) != len)
		_exit(4);
	memcpy(acc, (const uint8_t[]){'F', 'L', 1, LINK_ACCEPT, 33, 0, 0, 0}, 8);
	randombytes_buf(acc + 8, 32);
	acc[8 + 32] = 1; /* ChaCha20-Poly1305, which every node has */
	if (write(fd, acc, sizeof(acc)) != sizeof(acc))
		_exit(5);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		after += n;
	if (write(out, &after, sizeof(after)) != sizeof(after))
		_exit(6);
	_exit(0);
}

static void t_mutual(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), pfd[2];
	uv_loop_t loop;
	node_rec nr;
	char dial[64];
	ssize_t after = -1;
	pid_t pid;

	MUST(lfd >= 0 && bind(lfd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(lfd, 4) == 0);
	MUST(getsockname(lfd, (struct sockaddr *)&a, &alen) == 0);
	MUST(pipe(pfd) == 0);
	pid = fork();
	MUST(pid >= 0);
	if (pid == 0)
		fake_head(lfd, pfd[1]);
	close(lfd);
	close(pfd[1]);
	uv_loop_init(&loop);
	snprintf(dial, sizeof(dial), "127.0.0.1:%d", ntohs(a.sin_port));
	node_start(&loop, &nr, dial);
	CHECK_INT(link_node_send(nr.l, "not for strangers", 17), ==, 0);
	CHECK(run_until(&loop, node_finished, &nr, 5000));
	CHECK_INT(nr.connected, ==, 1);
	CHECK_INT(nr.connected_err, ==, -EACCES);
	CHECK_MSG(strstr(nr.why, "did not prove") != NULL, "node says: %s", nr.why);
	CHECK_INT(link_node_send(nr.l, "more", 4), <, 0);
	link_node_close(nr.l);
	loop_finish(&loop);
	CHECK(read(pfd[0], &after, sizeof(after)) == sizeof(after));
	CHECK_INT(after, ==, 0);
	close(pfd[0]);
	int st;
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static bool head_got_ten(void *arg)
{
	return ((head_rec *)arg)->got_len >= 10;
}

typedef struct want_samples {
	node_rec *r;
	int want;
} want_samples;

static bool have_samples(void *arg)
{
	want_samples *w = arg;
	return w->r->nsamples >= w->want;
}

/* Clock bursts on one host: both ends read the same CLOCK_MONOTONIC, so
 * every offset is 0 within its error bound, and the error is the
 * loopback's round trip. */
static void t_clock(void)
{
	uv_loop_t loop;
	head_rec hr;
	node_rec nr;
	char dial[64];

	uv_loop_init(&loop);
	head_start(&loop, &hr, "127.0.0.1:0");
	snprintf(dial, sizeof(dial), "127.0.0.1:%d", hr.port);
	node_start(&loop, &nr, dial);
	CHECK(run_until(&loop, node_connected_any, &nr, 5000));
	MUST(nr.connected_err == 0);
	/* A lone small send is gathered, and written before the loop
	 * waits: it arrives with nothing after it. */
	CHECK_INT(link_node_send(nr.l, "0123456789", 10), ==, 0);
	CHECK(run_until(&loop, head_got_ten, &hr, 2000));
	CHECK(hr.got_len == 10 && memcmp(hr.got, "0123456789", 10) == 0);
	CHECK_INT(link_node_clock_burst(nr.l), ==, 0);
	CHECK_INT(link_node_clock_burst(nr.l), ==, 0); /* joins the running one */
	for (int i = 0; i < 4; i++) {
		want_samples w = {&nr, i + 1};
		CHECK(run_until(&loop, have_samples, &w, 5000));
		if (i < 3)
			CHECK_INT(link_node_clock_burst(nr.l), ==, 0);
	}
	CHECK_INT(nr.nsamples, ==, 4);
	for (int i = 0; i < nr.nsamples && i < 8; i++) {
		const model_clock_sample *s = &nr.samples[i];
		printf("link: sample %d: node %lld offset %lld err %lld ns\n", i,
		       (long long)s->node_ns, (long long)s->offset_ns, (long long)s->err_ns);
		CHECK_INT(s->err_ns, >, 0);
		CHECK_INT(s->err_ns, <, 1000000);
		CHECK_INT(llabs(s->offset_ns), <=, s->err_ns);
		CHECK_INT(s->node_ns, >, 0);
		if (i > 0)
			CHECK_INT(s->node_ns, >, nr.samples[i - 1].node_ns);
	}
	CHECK_INT(link_node_finish(nr.l), ==, 0);
	CHECK_INT(link_node_clock_burst(nr.l), ==, -ENOTCONN);
	CHECK(run_until(&loop, node_finished, &nr, 5000));
	CHECK_INT(nr.done_err, ==, 0);
	CHECK_INT(hr.ended_err, ==, 0);
	link_node_close(nr.l);
	link_head_close(hr.h);
	loop_finish(&loop);
	free(hr.got);
}

/* ---- a head written from the protocol's description ---------------------- */

static int64_t mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* HMAC-SHA-256(key, tag NUL | run id | first | second | info | extra),
 * as docs/TRACE_FORMAT.md, "Link frames", says. */
static void proof(const char *tag, const uint8_t *first, const uint8_t *second, const uint8_t *info,
		  size_t info_len, const uint8_t *extra, size_t extra_len, uint8_t out[32])
{
	crypto_auth_hmacsha256_state st;

	crypto_auth_hmacsha256_init(&st, key, sizeof(key));
	crypto_auth_hmacsha256_update(&st, (const uint8_t *)tag, strlen(tag) + 1);
	crypto_auth_hmacsha256_update(&st, (const uint8_t *)run_id, LINK_RUN_ID_LEN);
	crypto_auth_hmacsha256_update(&st, first, 32);
	crypto_auth_hmacsha256_update(&st, second, 32);
	crypto_auth_hmacsha256_update(&st, info, info_len);
	if (extra_len)
		crypto_auth_hmacsha256_update(&st, extra, extra_len);
	crypto_auth_hmacsha256_final(&st, out);
}

static bool read_frame(int fd, uint8_t *type, uint8_t *buf, uint32_t cap, uint32_t *len)
{
	uint8_t h[8];

	if (recv(fd, h, 8, MSG_WAITALL) != 8 || h[0] != 'F' || h[1] != 'L' || h[2] != 1)
		return false;
	*type = h[3];
	*len = h[4] | h[5] << 8 | h[6] << 16 | (uint32_t)h[7] << 24;
	return *len <= cap && (*len == 0 || recv(fd, buf, *len, MSG_WAITALL) == (ssize_t)*len);
}

static bool write_frame(int fd, uint8_t type, const void *payload, uint32_t len)
{
	uint8_t f[8 + 80];

	memcpy(f, (const uint8_t[]){'F', 'L', 1, type, (uint8_t)len, 0, 0, 0}, 8);
	if (len)
		memcpy(f + 8, payload, len);
	return write(fd, f, 8 + len) == (ssize_t)(8 + len);
}

#define CLOCK_AHEAD 1000000000ll /* the made-up head's clock: 1 s ahead */

/* One direction of ChaCha20-Poly1305 (IETF) after the handshake: the
 * nonce is the frame's number (64-bit little-endian, then 4 zero bytes),
 * the additional data the frame's 8-byte header. */
typedef struct sealer {
	uint8_t key[32];
	uint64_t count;
} sealer;

static void sealer_nonce(sealer *s, uint8_t nonce[12])
{
	memset(nonce, 0, 12);
	for (int i = 0; i < 8; i++)
		nonce[i] = (uint8_t)(s->count >> (8 * i));
	s->count++;
}

static bool open_frame(sealer *s, uint8_t type, const uint8_t *c, uint32_t len, uint8_t *out)
{
	uint8_t nonce[12], head[8] = {'F',
				      'L',
				      1,
				      type,
				      (uint8_t)len,
				      (uint8_t)(len >> 8),
				      (uint8_t)(len >> 16),
				      (uint8_t)(len >> 24)};

	sealer_nonce(s, nonce);
	return crypto_aead_chacha20poly1305_ietf_decrypt(out, NULL, NULL, c, len, head, 8, nonce,
							 s->key) == 0;
}

static bool write_sealed(int fd, sealer *s, uint8_t type, const uint8_t *m, uint32_t len)
{
	uint8_t f[8 + 64], nonce[12];
	uint32_t clen = len + 16;

	memcpy(f, (const uint8_t[]){'F', 'L', 1, type, (uint8_t)clen, 0, 0, 0}, 8);
	sealer_nonce(s, nonce);
	crypto_aead_chacha20poly1305_ietf_encrypt(f + 8, NULL, m, len, f, 8, NULL, nonce, s->key);
	return write(fd, f, 8 + clen) == (ssize_t)(8 + clen);
}

/*
 * A head in a child whose clock reads 1 s ahead of the node's, and which
 * answers every ping of a burst late (3 ms) but the eighth: the sample
 * must be that fastest round trip, with the offset of 1 s. It checks the
 * node's proof itself. Exits 0 when the node proved the key and ended.
 */
static void clock_head(int lfd)
{
	static uint8_t buf[LINK_DATA_MAX], plain[LINK_DATA_MAX];
	uint8_t ch[48], mac[33], type, cipher = 1;
	uint32_t len;
	int fd = accept(lfd, NULL, NULL), pings = 0;
	sealer rx = {.count = 0}, tx = {.count = 0};

	memcpy(ch, run_id, LINK_RUN_ID_LEN);
	randombytes_buf(ch + LINK_RUN_ID_LEN, 32);
	if (fd < 0 || !write_frame(fd, LINK_CHALLENGE, ch, 48) ||
	    !read_frame(fd, &type, buf, sizeof(buf), &len) || type != LINK_PROVE || len < 64)
		_exit(2);
	const uint8_t *hn = ch + LINK_RUN_ID_LEN, *nn = buf, *info = buf + 64;
	proof("forktrace link node", hn, nn, info, len - 64, NULL, 0, mac);
	if (sodium_memcmp(mac, buf + 32, 32) != 0)
		_exit(3);
	proof("forktrace link head", nn, hn, info, len - 64, &cipher, 1, mac);
	mac[32] = cipher;
	proof("forktrace link node to head", hn, nn, info, len - 64, NULL, 0, rx.key);
	proof("forktrace link head to node", hn, nn, info, len - 64, NULL, 0, tx.key);
	if (!write_frame(fd, LINK_ACCEPT, mac, 33))
		_exit(4);
	while (read_frame(fd, &type, buf, sizeof(buf), &len)) {
		if (len < 16 || !open_frame(&rx, type, buf, len, plain))
			_exit(9);
		if (type == LINK_END) {
			_exit(write_sealed(fd, &tx, LINK_END_ACK, NULL, 0) ? 0 : 5);
		} else if (type == LINK_PING && len == 8 + 16) {
			uint8_t pong[16];
			if (pings++ % LINK_BURST != 7)
				usleep(3000);
			int64_t t2 = mono_now() + CLOCK_AHEAD;
			memcpy(pong, plain, 8);
			for (int i = 0; i < 8; i++)
				pong[8 + i] = (uint8_t)((uint64_t)t2 >> (8 * i));
			if (!write_sealed(fd, &tx, LINK_PONG, pong, 16))
				_exit(6);
		} else if (type != LINK_DATA) {
			_exit(7);
		}
	}
	_exit(8);
}

static void finish_on_sample(void *ctx, const model_clock_sample *s)
{
	node_rec *r = ctx;

	node_clock(ctx, s);
	CHECK_INT(link_node_finish(r->l), ==, 0);
}

static void burst_on_connect(void *ctx, int err, const char *why)
{
	node_rec *r = ctx;

	node_connected(ctx, err, why);
	if (err == 0)
		CHECK_INT(link_node_clock_burst(r->l), ==, 0);
}

static void t_clock_offset(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), st;
	const link_node_cb cbs = {burst_on_connect, finish_on_sample, node_writable, node_done};
	uv_loop_t loop;
	node_rec nr;
	char dial[64];
	pid_t pid;

	MUST(lfd >= 0 && bind(lfd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(lfd, 4) == 0);
	MUST(getsockname(lfd, (struct sockaddr *)&a, &alen) == 0);
	pid = fork();
	MUST(pid >= 0);
	if (pid == 0)
		clock_head(lfd);
	close(lfd);
	uv_loop_init(&loop);
	snprintf(dial, sizeof(dial), "127.0.0.1:%d", ntohs(a.sin_port));
	memset(&nr, 0, sizeof(nr));
	MUST(link_node_start(&nr.l, &loop, dial, &node_info, &cbs, &nr) == 0);
	CHECK(run_until(&loop, node_finished, &nr, 5000));
	CHECK_MSG(nr.connected_err == 0 && nr.done_err == 0, "connected %d done %d: %s",
		  nr.connected_err, nr.done_err, nr.why);
	CHECK_INT(nr.nsamples, ==, 1);
	const model_clock_sample *s = &nr.samples[0];
	printf("link: a head 1 s ahead: offset %lld err %lld ns\n", (long long)s->offset_ns,
	       (long long)s->err_ns);
	CHECK_INT(s->err_ns, <, 1000000); /* the prompt round trip, not a late one */
	CHECK_INT(llabs(s->offset_ns - CLOCK_AHEAD), <=, s->err_ns);
	link_node_close(nr.l);
	loop_finish(&loop);
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st));
	CHECK_INT(WEXITSTATUS(st), ==, 0);
}

/*
 * What a node sends from inside its clock callback comes after what it
 * sent before: the bytes held during the burst, then a small send and a
 * large one (which is written at once, not gathered) from the callback,
 * then END. The node collector ends its stream from that callback.
 */
#define ORDER_HELD (200u * 1024u)
#define ORDER_LARGE (100u * 1024u)
static uint8_t order_src[1000 + ORDER_HELD + 10 + ORDER_LARGE];

static void send_on_sample(void *ctx, const model_clock_sample *s)
{
	node_rec *r = ctx;
	const uint8_t *after = order_src + 1000 + ORDER_HELD;

	node_clock(ctx, s);
	CHECK_INT(link_node_send(r->l, after, 10), ==, 0);
	CHECK_INT(link_node_send(r->l, after + 10, ORDER_LARGE), ==, 0);
	CHECK_INT(link_node_finish(r->l), ==, 0);
}

static void t_clock_order(void)
{
	const link_node_cb cbs = {node_connected, send_on_sample, node_writable, node_done};
	uv_loop_t loop;
	head_rec hr;
	node_rec nr;
	char dial[64];

	randombytes_buf(order_src, sizeof(order_src));
	uv_loop_init(&loop);
	head_start(&loop, &hr, "127.0.0.1:0");
	snprintf(dial, sizeof(dial), "127.0.0.1:%d", hr.port);
	memset(&nr, 0, sizeof(nr));
	MUST(link_node_start(&nr.l, &loop, dial, &node_info, &cbs, &nr) == 0);
	CHECK(run_until(&loop, node_connected_any, &nr, 5000));
	MUST(nr.connected_err == 0);
	CHECK_INT(link_node_send(nr.l, order_src, 1000), ==, 0);
	CHECK(run_until(&loop, head_got_ten, &hr, 2000));
	CHECK_INT(link_node_clock_burst(nr.l), ==, 0);
	/* Held while the burst runs: records of tens of bytes. */
	for (size_t off = 0; off < ORDER_HELD; off += 50)
		CHECK_INT(link_node_send(nr.l, order_src + 1000 + off, 50), ==, 0);
	CHECK(run_until(&loop, node_finished, &nr, 10000));
	CHECK_MSG(nr.done == 1 && nr.done_err == 0, "done %d err %d: %s", nr.done, nr.done_err,
		  nr.why);
	CHECK_INT(nr.nsamples, ==, 1);
	CHECK_INT(hr.ended_err, ==, 0);
	CHECK_UINT(hr.got_len, ==, sizeof(order_src));
	CHECK_MSG(hr.got && memcmp(hr.got, order_src, sizeof(order_src)) == 0,
		  "the head got the bytes in another order");
	link_node_close(nr.l);
	link_head_close(hr.h);
	loop_finish(&loop);
	free(hr.got);
}

/* ---- someone on the path ------------------------------------------------- */

#define MARKER "argv: --password=hunter2"

/*
 * A relay in a child between a node and the head, which sees every byte
 * and flips one bit of the node's stream at byte flip_at (0: none). It
 * writes to out whether MARKER ever crossed it in the clear.
 */
static void relay(int lfd, int head_port, size_t flip_at, int out)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)head_port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int nfd = accept(lfd, NULL, NULL), hfd = socket(AF_INET, SOCK_STREAM, 0);
	static uint8_t buf[65536], seen[65536 + sizeof(MARKER)];
	size_t up = 0, keep = 0;
	bool clear = false;

	if (nfd < 0 || hfd < 0 || connect(hfd, (struct sockaddr *)&a, sizeof(a)) < 0)
		_exit(2);
	for (;;) {
		struct pollfd p[2] = {{nfd, POLLIN, 0}, {hfd, POLLIN, 0}};
		if (poll(p, 2, 5000) <= 0)
			break;
		if (p[1].revents) {
			ssize_t n = read(hfd, buf, sizeof(buf));
			if (n <= 0 || write(nfd, buf, (size_t)n) != n)
				break;
		}
		if (p[0].revents) {
			ssize_t n = read(nfd, buf, sizeof(buf));
			if (n <= 0)
				break;
			/* The marker may straddle two reads. */
			memcpy(seen + keep, buf, (size_t)n);
			if (memmem(seen, keep + (size_t)n, MARKER, sizeof(MARKER) - 1))
				clear = true;
			keep = (size_t)n < sizeof(MARKER) ? (size_t)n : sizeof(MARKER);
			memcpy(seen, buf + n - keep, keep);
			if (flip_at && up <= flip_at && flip_at < up + (size_t)n)
				buf[flip_at - up] ^= 0x10;
			up += (size_t)n;
			if (write(hfd, buf, (size_t)n) != n)
				break;
		}
	}
	if (write(out, &clear, sizeof(clear)) != sizeof(clear))
		_exit(3);
	_exit(0);
}

/*
 * A node streams, through the relay, 4 MiB that say MARKER again and
 * again. Nothing of it crosses in the clear; with a bit flipped at 1 MiB,
 * the head ends the node (-EBADMSG) and what reached its data callback is
 * a prefix of what was sent, without the changed frame. With a plain head
 * (head_plain) it all crosses in the clear, and arrives.
 */
static void through_relay(size_t flip_at)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), pfd[2], st;
	size_t total = 4u << 20;
	uint8_t *src = malloc(total);
	uv_loop_t loop;
	head_rec hr;
	node_rec nr;
	char dial[64];
	bool clear = true;
	pid_t pid;

	MUST(src);
	for (size_t i = 0; i < total; i++)
		src[i] = (uint8_t)MARKER[i % (sizeof(MARKER) - 1)];
	MUST(lfd >= 0 && bind(lfd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(lfd, 4) == 0);
	MUST(getsockname(lfd, (struct sockaddr *)&a, &alen) == 0);
	MUST(pipe(pfd) == 0);
	uv_loop_init(&loop);
	head_start(&loop, &hr, "127.0.0.1:0");
	pid = fork();
	MUST(pid >= 0);
	if (pid == 0)
		relay(lfd, hr.port, flip_at, pfd[1]);
	close(lfd);
	close(pfd[1]);
	snprintf(dial, sizeof(dial), "127.0.0.1:%d", ntohs(a.sin_port));
	node_start(&loop, &nr, dial);
	nr.src = src;
	nr.total = total;
	nr.finish_when_sent = true;
	CHECK(run_until(&loop, node_finished, &nr, 10000));
	CHECK(run_until(&loop, head_ended_or_refused, &hr, 5000));
	CHECK_INT(hr.joined, ==, 1);
	CHECK_INT(hr.ended, ==, 1);
	if (flip_at && !head_plain) {
		CHECK_INT(hr.ended_err, ==, -EBADMSG);
		CHECK_UINT(hr.got_len, <, flip_at);
		CHECK_INT(nr.done_err, <, 0);
	} else {
		CHECK_INT(hr.ended_err, ==, 0);
		CHECK_UINT(hr.got_len, ==, total);
		CHECK_INT(nr.done_err, ==, 0);
	}
	CHECK(hr.got_len == 0 || memcmp(hr.got, src, hr.got_len) == 0);
	link_node_close(nr.l);
	link_head_close(hr.h);
	loop_finish(&loop);
	CHECK(read(pfd[0], &clear, sizeof(clear)) == sizeof(clear));
	CHECK_MSG(clear == head_plain, "the stream crossed the relay %s",
		  clear ? "in the clear" : "sealed");
	close(pfd[0]);
	kill(pid, SIGKILL);
	CHECK(waitpid(pid, &st, 0) == pid);
	free(hr.got);
	free(src);
}

static void t_sealed(void)
{
	through_relay(0);
	through_relay(1u << 20);
	head_plain = true;
	through_relay(0);
}

/* Reports a head_rec from a child through a pipe. */
typedef struct head_report {
	int joined, ended, ended_err, refused;
	size_t got;
} head_report;

/* A head in a child process (so that it can die or hang): the port goes
 * to port_fd, the result to out when its node ended. */
static pid_t head_child(int *port, int *out, bool stop_on_data, size_t die_after)
{
	int pfd[2], rfd[2];
	pid_t pid;

	MUST(pipe(pfd) == 0 && pipe(rfd) == 0);
	pid = fork();
	MUST(pid >= 0);
	if (pid == 0) {
		uv_loop_t loop;
		head_rec hr;
		head_report rep;
		close(pfd[0]);
		close(rfd[0]);
		uv_loop_init(&loop);
		head_start(&loop, &hr, "127.0.0.1:0");
		hr.stop_on_data = stop_on_data;
		hr.die_after = die_after;
		if (write(pfd[1], &hr.port, sizeof(int)) != sizeof(int))
			_exit(2);
		run_until(&loop, head_ended_or_refused, &hr, 20000);
		rep = (head_report){hr.joined, hr.ended, hr.ended_err, hr.refused, hr.got_len};
		if (write(rfd[1], &rep, sizeof(rep)) != sizeof(rep))
			_exit(3);
		_exit(0);
	}
	close(pfd[1]);
	close(rfd[1]);
	MUST(read(pfd[0], port, sizeof(int)) == sizeof(int));
	close(pfd[0]);
	*out = rfd[0];
	return pid;
}

/* The head dies mid-stream (SIGKILL): the node's link is done with an
 * error, not hung; the head hangs (SIGSTOP): done(-ETIMEDOUT) once it
 * was silent for the idle time. */
static void head_lost(bool hang)
{
	uv_loop_t loop;
	node_rec nr;
	char dial[64];
	int port, out, st;
	size_t total = 64u << 20;
	uint8_t *src = random_bytes(total);
	pid_t pid = head_child(&port, &out, hang, hang ? 0 : 1u << 20);

	uv_loop_init(&loop);
	snprintf(dial, sizeof(dial), "127.0.0.1:%d", port);
	node_start(&loop, &nr, dial);
	link_node_set_timeouts(nr.l, 0, 600);
	nr.src = src;
	nr.total = total;
	nr.finish_when_sent = true;
	uv_update_time(&loop);
	uint64_t t0 = uv_now(&loop);
	CHECK(run_until(&loop, node_finished, &nr, 10000));
	CHECK_INT(nr.connected_err, ==, 0);
	CHECK_INT(nr.done, ==, 1);
	CHECK_MSG(nr.done_err < 0, "done(%d): %s", nr.done_err, nr.why);
	if (hang) {
		CHECK_INT(nr.done_err, ==, -ETIMEDOUT);
		CHECK_MSG(uv_now(&loop) - t0 >= 500, "gave up after %llu ms",
			  (unsigned long long)(uv_now(&loop) - t0));
	}
	CHECK_UINT(nr.sent, <, total);
	printf("link: head %s: node done(%d) after %llu ms: %s\n", hang ? "hung" : "killed",
	       nr.done_err, (unsigned long long)(uv_now(&loop) - t0), nr.why);
	link_node_close(nr.l);
	loop_finish(&loop);
	kill(pid, SIGKILL);
	CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st));
	close(out);
	free(src);
}

/*
 * A head that does not run for 11 s (stopped, as a process starved of
 * CPU on a loaded machine is, and its kernel still takes the node's
 * bytes): with the default deadlines the node waits for it, and the
 * part arrives whole once it runs again.
 */
static void t_head_starved(void)
{
	uv_loop_t loop;
	node_rec nr;
	char dial[64];
	int port, out, st;
	size_t total = 4u << 20;
	uint8_t *src = random_bytes(total);
	pid_t pid = head_child(&port, &out, true, 0);
	head_report rep;

	uv_loop_init(&loop);
	snprintf(dial, sizeof(dial), "127.0.0.1:%d", port);
	node_start(&loop, &nr, dial);
	nr.src = src;
	nr.total = total;
	nr.finish_when_sent = true;
	CHECK(!run_until(&loop, node_finished, &nr, 11000));
	CHECK(waitpid(pid, &st, WNOHANG | WUNTRACED) == pid && WIFSTOPPED(st));
	kill(pid, SIGCONT);
	CHECK(run_until(&loop, node_finished, &nr, 10000));
	CHECK_MSG(nr.done == 1 && nr.done_err == 0, "done %d err %d: %s", nr.done, nr.done_err,
		  nr.why);
	CHECK(read(out, &rep, sizeof(rep)) == sizeof(rep));
	CHECK_INT(rep.ended, ==, 1);
	CHECK_INT(rep.ended_err, ==, 0);
	CHECK_UINT(rep.got, ==, total);
	link_node_close(nr.l);
	loop_finish(&loop);
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(out);
	free(src);
}

static void t_head_killed(void)
{
	head_lost(false);
}

static void t_head_hangs(void)
{
	head_lost(true);
}

/* A node in a child that streams some bytes and then dies (SIGKILL) or
 * hangs (SIGSTOP): the head keeps what came and ends the node with an
 * error (ECONNRESET; ETIMEDOUT after the idle time). */
static void node_lost(bool hang)
{
	uv_loop_t loop;
	head_rec hr;
	int st;
	pid_t pid;
	size_t sent = 3u << 20;

	uv_loop_init(&loop);
	head_start(&loop, &hr, "127.0.0.1:0");
	link_head_set_timeouts(hr.h, 0, 600);
	pid = fork();
	MUST(pid >= 0);
	if (pid == 0) {
		uv_loop_t cl;
		node_rec nr;
		char dial[64];
		uint8_t *src = random_bytes(sent);
		uv_loop_init(&cl);
		snprintf(dial, sizeof(dial), "127.0.0.1:%d", hr.port);
		node_start(&cl, &nr, dial);
		nr.src = src;
		nr.total = sent;
		run_until(&cl, node_connected_any, &nr, 5000);
		while (link_node_queued(nr.l) > 0)
			uv_run(&cl, UV_RUN_ONCE);
		raise(hang ? SIGSTOP : SIGKILL);
		_exit(1);
	}
	uv_update_time(&loop);
	uint64_t t0 = uv_now(&loop);
	CHECK(run_until(&loop, head_ended_or_refused, &hr, 10000));
	CHECK_INT(hr.joined, ==, 1);
	CHECK_INT(hr.ended, ==, 1);
	CHECK_INT(hr.ended_err, ==, hang ? -ETIMEDOUT : -ECONNRESET);
	CHECK_UINT(hr.got_len, ==, sent);
	if (hang)
		CHECK_MSG(uv_now(&loop) - t0 >= 500, "gave up after %llu ms",
			  (unsigned long long)(uv_now(&loop) - t0));
	CHECK_UINT(link_head_active(hr.h), ==, 0);
	kill(pid, SIGKILL);
	CHECK(waitpid(pid, &st, 0) == pid);
	link_head_close(hr.h);
	loop_finish(&loop);
	free(hr.got);
}

static void t_node_killed(void)
{
	node_lost(false);
}

static void t_node_hangs(void)
{
	node_lost(true);
}

/* The data callback refuses (the head cannot take the part): the node
 * ends with an error at once, and the link is done on both sides. */
static void t_data_refused(void)
{
	uv_loop_t loop;
	head_rec hr;
	node_rec nr;
	char dial[64];
	uint8_t *src = random_bytes(1 << 20);

	uv_loop_init(&loop);
	head_start(&loop, &hr, "127.0.0.1:0");
	hr.data_rc = -ENOSPC;
	snprintf(dial, sizeof(dial), "127.0.0.1:%d", hr.port);
	node_start(&loop, &nr, dial);
	nr.src = src;
	nr.total = 1 << 20;
	nr.finish_when_sent = true;
	CHECK(run_until(&loop, node_finished, &nr, 5000));
	CHECK_INT(hr.ended, ==, 1);
	CHECK_INT(hr.ended_err, ==, -ENOSPC);
	CHECK_INT(nr.done, ==, 1);
	CHECK_INT(nr.done_err, <, 0);
	link_node_close(nr.l);
	link_head_close(hr.h);
	loop_finish(&loop);
	free(hr.got);
	free(src);
}

/* Closing the head with a node joined: ended(-ECANCELED); the node's link
 * is done with an error. */
static void t_head_close(void)
{
	uv_loop_t loop;
	head_rec hr;
	node_rec nr;
	char dial[64];

	uv_loop_init(&loop);
	head_start(&loop, &hr, "127.0.0.1:0");
	snprintf(dial, sizeof(dial), "127.0.0.1:%d", hr.port);
	node_start(&loop, &nr, dial);
	CHECK(run_until(&loop, node_connected_any, &nr, 5000));
	CHECK_INT(nr.connected_err, ==, 0);
	CHECK_UINT(link_head_active(hr.h), ==, 1);
	link_head_stop_listening(hr.h);
	CHECK_UINT(link_head_active(hr.h), ==, 1);
	link_head_close(hr.h);
	CHECK_INT(hr.ended, ==, 1);
	CHECK_INT(hr.ended_err, ==, -ECANCELED);
	CHECK(run_until(&loop, node_finished, &nr, 5000));
	CHECK_INT(nr.done_err, <, 0);
	link_node_close(nr.l);
	loop_finish(&loop);
}

/* Nothing listens: connected reports it; a name that does not resolve;
 * an address that is not one. */
static void t_no_head(void)
{
	uv_loop_t loop;
	node_rec nr;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	char dial[64];
	link_node *l;

	/* A port just freed: nothing listens there. */
	MUST(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	MUST(getsockname(fd, (struct sockaddr *)&a, &alen) == 0);
	close(fd);
	uv_loop_init(&loop);
	snprintf(dial, sizeof(dial), "127.0.0.1:%d", ntohs(a.sin_port));
	node_start(&loop, &nr, dial);
	CHECK(run_until(&loop, node_finished, &nr, 5000));
	CHECK_INT(nr.connected_err, ==, UV_ECONNREFUSED);
	CHECK_MSG(strstr(nr.why, dial) != NULL, "node says: %s", nr.why);
	link_node_close(nr.l);
	node_start(&loop, &nr, "no-such-host.invalid:4000");
	CHECK(run_until(&loop, node_finished, &nr, 10000));
	CHECK_INT(nr.connected_err, <, 0);
	link_node_close(nr.l);
	CHECK_INT(link_node_start(&l, &loop, "no port", &node_info, &node_cbs, NULL), ==, -EINVAL);
	CHECK_INT(link_node_start(&l, &loop, "host:99999", &node_info, &node_cbs, NULL), ==,
		  -EINVAL);
	CHECK_INT(link_node_start(&l, &loop, ":4000", &node_info, &node_cbs, NULL), ==, -EINVAL);
	CHECK(l == NULL);
	loop_finish(&loop);
}

/*
 * Not a test (not in ctest): a node streams $LINK_BENCH_MB MiB (default
 * 2048) to a head in another process over the loopback; prints MB/s.
 * $LINK_BENCH_PLAIN: a plain head (link_head_set_plain).
 */
static void t_bench(void)
{
	const char *env = getenv("LINK_BENCH_MB");
	size_t total = (size_t)(env ? atol(env) : 2048) << 20, chunk = 4u << 20;
	uint8_t *src = random_bytes(chunk);
	int port, out, st;
	uv_loop_t loop;
	node_rec nr;
	char dial[64];
	head_report rep;
	pid_t pid;

	head_discard = true;
	head_plain = getenv("LINK_BENCH_PLAIN") != NULL;
	pid = head_child(&port, &out, false, 0);

	uv_loop_init(&loop);
	snprintf(dial, sizeof(dial), "127.0.0.1:%d", port);
	node_start(&loop, &nr, dial);
	CHECK(run_until(&loop, node_connected_any, &nr, 5000));
	int64_t t0 = mono_now();
	size_t sent = 0;
	while (sent < total && nr.done == 0) {
		while (sent < total && link_node_queued(nr.l) < LINK_HIGH_WATER) {
			CHECK_INT(link_node_send(nr.l, src, chunk), ==, 0);
			sent += chunk;
		}
		uv_run(&loop, UV_RUN_ONCE);
	}
	CHECK_INT(link_node_finish(nr.l), ==, 0);
	CHECK(run_until(&loop, node_finished, &nr, 60000));
	int64_t t1 = mono_now();
	CHECK(read(out, &rep, sizeof(rep)) == sizeof(rep));
	CHECK_UINT(rep.got, ==, total);
	printf("link: %zu MiB in %.3f s: %.0f MB/s\n", total >> 20, (t1 - t0) / 1e9,
	       total / ((t1 - t0) / 1e9) / 1e6);
	link_node_close(nr.l);
	loop_finish(&loop);
	CHECK(waitpid(pid, &st, 0) == pid);
	close(out);
	free(src);
}

/* ---- key files ---------------------------------------------------------- */

static void read_refused(const char *what, int want_rc, const char *why_part)
{
	uint8_t k[LINK_KEY_LEN];
	const char *why = NULL;
	int rc = link_key_read(key_dir, run_id, k, &why);

	CHECK_MSG(rc == want_rc && why && strstr(why, why_part), "%s: rc %d (want %d), why %s",
		  what, rc, want_rc, why ? why : "(null)");
}

static void t_key_files(void)
{
	char dir[600], path[700], id2[LINK_RUN_ID_LEN + 1], moved[600];
	uint8_t k[LINK_KEY_LEN], k2[LINK_KEY_LEN];
	const char *why;
	struct stat st;

	/* Created where missing, 0700; the file 0600 with the key. */
	snprintf(dir, sizeof(dir), "%s/home/.forktrace/keys", key_dir);
	CHECK_INT(link_key_create(dir, id2, k2, path, sizeof(path)), ==, 0);
	CHECK(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700);
	CHECK(lstat(path, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0600);
	CHECK_INT(st.st_size, ==, 2 * LINK_KEY_LEN + 1);
	CHECK_INT(strlen(id2), ==, LINK_RUN_ID_LEN);
	CHECK(strcmp(id2, run_id) != 0);
	CHECK_INT(link_key_read(dir, id2, k, &why), ==, 0);
	CHECK(memcmp(k, k2, sizeof(k)) == 0);
	CHECK_INT(link_key_read(key_dir, run_id, k, &why), ==, 0);
	CHECK(memcmp(k, key, sizeof(k)) == 0);
	/* $HOME/.forktrace/keys, unless $FORKTRACE_KEY_DIR says otherwise. */
	char buf[700];
	CHECK_INT(link_key_dir(buf, sizeof(buf)), ==, 0);
	CHECK_STR_EQ(buf, key_dir);
	unsetenv("FORKTRACE_KEY_DIR");
	setenv("HOME", "/home/someone", 1);
	CHECK_INT(link_key_dir(buf, sizeof(buf)), ==, 0);
	CHECK_STR_EQ(buf, "/home/someone/.forktrace/keys");
	setenv("FORKTRACE_KEY_DIR", key_dir, 1);

	/* A key directory others may write to is not used. */
	snprintf(dir, sizeof(dir), "%s/open", key_dir);
	MUST(mkdir(dir, 0700) == 0 && chmod(dir, 0777) == 0);
	CHECK_INT(link_key_create(dir, id2, k2, path, sizeof(path)), ==, -EPERM);

	MUST(chmod(key_path, 0640) == 0);
	read_refused("group-readable", -EPERM, "group");
	MUST(chmod(key_path, 0604) == 0);
	read_refused("world-readable", -EPERM, "other users");
	MUST(chmod(key_path, 0602) == 0);
	read_refused("world-writable", -EPERM, "other users");
	MUST(chmod(key_path, 0600) == 0);
	if (chown(key_path, 65534, 65534) == 0) {
		read_refused("another user's", -EPERM, "another user");
		MUST(chown(key_path, geteuid(), getegid()) == 0);
	} else {
		printf("link: cannot chown (not root): the other-owner case is skipped\n");
	}
	/* A symbolic link to the real key: refused, not followed. */
	snprintf(moved, sizeof(moved), "%s/real.key", key_dir);
	MUST(rename(key_path, moved) == 0 && symlink(moved, key_path) == 0);
	read_refused("symlink", -EPERM, "symbolic link");
	MUST(unlink(key_path) == 0);
	/* A FIFO must not hang the read. */
	MUST(mkfifo(key_path, 0600) == 0);
	read_refused("fifo", -EPERM, "regular");
	MUST(unlink(key_path) == 0);
	MUST(rename(moved, key_path) == 0);
	/* Not a key. */
	MUST(truncate(key_path, 10) == 0);
	read_refused("truncated", -EINVAL, "not a key file");
	key_file_write(key);
	CHECK_INT(link_key_read(key_dir, run_id, k, &why), ==, 0);
	/* Run ids come from the network: nothing but 16 hex digits. */
	CHECK_INT(link_key_read(key_dir, "../../etc/passwd", k, &why), ==, -EINVAL);
	CHECK_INT(link_key_read(key_dir, "0123456789abcdeF", k, &why), ==, -EINVAL);
	CHECK_INT(link_key_read(key_dir, "0123456789abcdef0", k, &why), ==, -EINVAL);
	CHECK_INT(link_key_read(key_dir, "0123456789abcdef", k, &why), ==, -ENOENT);
}

/* ---- main --------------------------------------------------------------- */

static const struct {
	const char *name;
	void (*fn)(void);
} scenarios[] = {
	{"stream", t_stream},
	{"small_pieces", t_small_pieces},
	{"addresses", t_addresses},
	{"wrong_key", t_wrong_key},
	{"refuse_raw", t_refuse_raw},
	{"mutual", t_mutual},
	{"other_run", t_other_run},
	{"clock", t_clock},
	{"clock_offset", t_clock_offset},
	{"clock_order", t_clock_order},
	{"sealed", t_sealed},
	{"head_killed", t_head_killed},
	{"head_hangs", t_head_hangs},
	{"head_starved", t_head_starved},
	{"node_killed", t_node_killed},
	{"node_hangs", t_node_hangs},
	{"data_refused", t_data_refused},
	{"head_close", t_head_close},
	{"no_head", t_no_head},
	{"key_files", t_key_files},
	{"bench", t_bench},
};

static void remove_tree(const char *dir)
{
	char cmd[400];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "link: cannot remove %s\n", dir);
}

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR");
	char name[64];

	if (argc != 2) {
		fprintf(stderr, "usage: test_link SCENARIO\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	MUST(sodium_init() >= 0);
	snprintf(key_dir, sizeof(key_dir), "%s/ftlink.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	MUST(mkdtemp(key_dir));
	MUST(chmod(key_dir, 0700) == 0);
	setenv("FORKTRACE_KEY_DIR", key_dir, 1);
	MUST(link_key_create(key_dir, run_id, key, key_path, sizeof(key_path)) == 0);
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
		if (strcmp(argv[1], scenarios[i].name) == 0) {
			scenarios[i].fn();
			remove_tree(key_dir);
			snprintf(name, sizeof(name), "link.%s", argv[1]);
			return check_done(name);
		}
	remove_tree(key_dir);
	fprintf(stderr, "test_link: no scenario %s\n", argv[1]);
	return 2;
}
