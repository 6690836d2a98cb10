/*
 * server.c - the collector's Unix socket server.
 *
 * One connection per process image. Frames are assembled per connection and
 * applied to the process tree as soon as they are complete. A connection
 * that breaks the protocol is closed alone, with a warning that names its
 * pid; everything it sent before stays in the trace, and no other
 * connection is affected.
 *
 * Reads land in one loop-wide buffer; only a connection with a partial
 * frame left over keeps bytes of its own. A build with ten thousand idle
 * connections then costs ten thousand small structs, not ten thousand
 * read buffers.
 *
 * What partial frames hold is bounded: a connection's buffer grows with
 * the bytes that arrive, not with the length a header announces, and all
 * of them together stay under SRV_HELD_MAX. A peer that announces big
 * frames and trickles them (an agent writes a frame at once) would
 * otherwise make the collector hold 16 MiB per connection. Past the
 * bound, the connection holding the most is closed, with a warning.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server.h"

#define SHARED_BUF_SIZE (256 * 1024)
/* How long the loop waits, after an iteration that handled messages,
 * before it polls again (see batch_cb). */
#define SRV_BATCH_NS (300 * 1000)
/* An iteration that took more than this is bulk (event records): no pause. */
#define SRV_BATCH_BULK (64 * 1024)
/* Bytes all partial frames together may hold: some sixty agents' largest
 * frames (an event chunk, 512 KiB) at the same moment, four of the
 * largest the protocol allows. */
#define SRV_HELD_MAX (64u * 1024u * 1024u)
/* A frame up to this long is buffered whole as soon as its header is in:
 * an agent's largest (an event chunk) fits. */
#define SRV_WHOLE_FRAME (1024u * 1024u)
/* Warnings about connections closed for it; then only a count. */
#define SRV_HELD_WARNINGS 3
/* Likewise for connections closed for protocol errors. */
#define SRV_REJECT_WARNINGS 10

typedef struct srv_conn {
	uv_pipe_t pipe; /* first: the handle's address is the conn's */
	srv *s;
	pid_t peer_pid; /* from SO_PEERCRED, in our pid namespace; 0: unknown */
	uid_t peer_uid;
	bool peer_gone;      /* of another uid, and gone before its ancestry was read */
	bool acked;          /* the byte of conn_ack_hello was sent */
	uint64_t stream_off; /* bytes of this connection consumed so far */
	char *buf;           /* partial frame carried between reads */
	size_t len, cap;
	proc_conn pc;
	bool closing;
	bool over; /* to be closed for holding too much (alloc_cb) */
} srv_conn;

static char shared_buf[SHARED_BUF_SIZE];

static void conn_close_cb(uv_handle_t *h)
{
	srv_conn *c = h->data;

	c->s->held -= c->cap;
	c->s->nconns--;
	proc_conn_drop_fds(&c->pc);
	free(c->buf);
	free(c);
}

static void conn_close(srv_conn *c)
{
	if (c->closing)
		return;
	c->closing = true;
	proc_conn_closed(c->s->pt, &c->pc, proc_now_mono_ns());
	uv_close((uv_handle_t *)&c->pipe, conn_close_cb);
}

static void conn_reject(srv_conn *c, const char *why)
{
	pid_t pid = c->pc.pe ? proc_pid(c->pc.pe) : c->peer_pid;

	/* A peer that opens connection after connection of garbage must not
	 * bury the run's output: a few warnings, then a count. */
	if (++c->s->rejected <= SRV_REJECT_WARNINGS)
		fprintf(stderr,
			"forktrace: warning: process %d sent %s at byte %llu of its stream; "
			"closing its connection (what it sent before is kept)%s\n",
			(int)pid, why, (unsigned long long)c->stream_off,
			c->s->rejected == SRV_REJECT_WARNINGS ? "; further ones are only counted"
							      : "");
	conn_close(c);
}

/*
 * Reads up to cap bytes of /proc/PID/NAME into buf, '\0'-terminated.
 * Returns the length, or -1 when the process is gone (or hidden).
 */
static ssize_t proc_file(pid_t pid, const char *name, char *buf, size_t cap)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	do
		n = read(fd, buf, cap - 1);
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return n;
}

/*
 * Is pid this collector or a process of its tree? The collector is a
 * child subreaper: every process of the tree, orphans and daemons
 * included, has it among its ancestors for as long as it exists, and no
 * other process has. Returns 1, 0 (not in the tree), or -1 when pid is
 * gone.
 */
static int in_tree(const srv *s, pid_t pid)
{
	for (int depth = 0; depth < 4096 && pid > 1; depth++) {
		pid_t ppid;

		if (pid == s->self)
			return 1;
		ppid = proc_stat_ppid(pid);
		if (ppid < 0)
			return depth == 0 ? -1 : 0;
		pid = ppid;
	}
	return 0;
}

/*
 * The HELLO of a traced process in a pid namespace of its own (unshare,
 * containers) gives its pid there, where SO_PEERCRED gives ours: the last
 * pid of the peer's NSpid line (innermost namespace) must then be the one
 * it claims. Returns whether it is.
 */
static bool ns_pid_matches(pid_t peer, int64_t claimed)
{
	char buf[4096];
	const char *p;
	long last = -1;
	int n = 0;

	if (proc_file(peer, "status", buf, sizeof(buf)) < 0 || !(p = strstr(buf, "\nNSpid:")))
		return false;
	p += strlen("\nNSpid:");
	for (;;) {
		char *end;
		long v = strtol(p, &end, 10);

		if (end == p)
			break;
		last = v;
		n++;
		p = end;
	}
	return n > 1 && last == claimed;
}

/*
 * May this connection's HELLO speak for m->pid? A process speaks for
 * itself only: the kernel's credentials of the connection (taken at
 * connect) name the peer, and its HELLO must give that pid, or its pid
 * in its own pid namespace. A peer of another uid that ended before
 * on_connection could read its ancestry is taken in when the parent it
 * names is of the tree (the parent is alive: it reaped the peer). Returns
 * NULL, or why not (for the warning).
 */
static const char *hello_refused(srv_conn *c, const wire_msg *m)
{
	if (c->peer_pid <= 0)
		return "no credentials";
	if (m->pid != c->peer_pid && !ns_pid_matches(c->peer_pid, m->pid))
		return "another pid";
	if (c->peer_gone &&
	    !(m->ppid > 0 && m->ppid <= INT32_MAX && in_tree(c->s, (pid_t)m->ppid) == 1))
		return "a parent outside the traced tree";
	return NULL;
}

/*
 * The agent of a process of another uid, or in a pid namespace of its
 * own, asks (FT_HELLO_ACK) for one byte saying that its HELLO was
 * checked, and waits for it before its process ends: the checks read
 * /proc, which a process gone (and reaped) no longer has. The socket's
 * buffer is empty, so the send never blocks.
 */
static void conn_ack_hello(srv_conn *c, const wire_msg *m)
{
	uv_os_fd_t fd;

	if (c->acked || !(m->flags & FT_HELLO_ACK))
		return;
	c->acked = true;
	if (uv_fileno((uv_handle_t *)&c->pipe, &fd) == 0 &&
	    send(fd, "", 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
	}
}

static void conn_refuse_hello(srv_conn *c, const wire_msg *m, const char *why)
{
	fprintf(stderr,
		"forktrace: warning: process %d (uid %u) said HELLO as pid %lld (%s); closing "
		"its connection, nothing of it is kept\n",
		(int)c->peer_pid, (unsigned)c->peer_uid, (long long)m->pid, why);
	c->s->rejected++;
	conn_close(c);
}

/*
 * Applies every complete frame in data[0..n) and returns how many bytes it
 * consumed, or -1 after closing the connection for a protocol error.
 */
static ssize_t conn_frames(srv_conn *c, const char *data, size_t n)
{
	srv *s = c->s;
	size_t off = 0;
	wire_frame f;
	int rc;

	while ((rc = wire_next_frame(data + off, n - off, s->max_payload, &f)) == 1) {
		wire_msg m;

		if (wire_decode(f.payload, f.len, f.type, &s->up, &m) < 0) {
			conn_reject(c, "a malformed message payload");
			return -1;
		}
		if (m.type == FT_MSG_HELLO) {
			const char *why = hello_refused(c, &m);

			if (why) {
				conn_refuse_hello(c, &m, why);
				return -1;
			}
			conn_ack_hello(c, &m);
			ptab_before_hello(s->tab, &m);
		}
		if (proc_apply(s->pt, &c->pc, &m, proc_now_mono_ns()) == -EPROTO) {
			conn_reject(c, "a message before its HELLO");
			return -1;
		}
		if (m.type == FT_MSG_HELLO)
			ptab_after_hello(s->tab, &c->pc, &m);
		s->frames++;
		s->bytes += f.size;
		off += f.size;
		c->stream_off += f.size;
	}
	if (rc < 0) {
		conn_reject(c, wire_frame_strerror(rc));
		return -1;
	}
	return (ssize_t)off;
}

/* Resizes c's buffer to cap bytes (0: frees it), keeping the count of
 * what all connections hold. */
static int conn_resize(srv_conn *c, size_t cap)
{
	char *nb = NULL;

	if (cap) {
		nb = realloc(c->buf, cap);
		if (!nb)
			return -ENOMEM;
	} else {
		free(c->buf);
	}
	c->s->held = c->s->held - c->cap + cap;
	c->buf = nb;
	c->cap = cap;
	return 0;
}

typedef struct held_max {
	srv *s;
	srv_conn *top;
} held_max;

static void find_top(uv_handle_t *h, void *arg)
{
	held_max *m = arg;
	srv_conn *c = h->data;

	if (h->type != UV_NAMED_PIPE || h == (uv_handle_t *)&m->s->listener || uv_is_closing(h) ||
	    !c || c->closing)
		return;
	if (!m->top || c->cap > m->top->cap)
		m->top = c;
}

static void conn_over(srv_conn *c)
{
	srv *s = c->s;
	pid_t pid = c->pc.pe ? proc_pid(c->pc.pe) : c->peer_pid;

	if (++s->over_held <= SRV_HELD_WARNINGS)
		fprintf(stderr,
			"forktrace: warning: process %d holds %zu bytes of an unfinished frame "
			"while unfinished frames together pass %u MiB; closing its connection "
			"(what it sent before is kept)%s\n",
			(int)pid, c->len, SRV_HELD_MAX >> 20,
			s->over_held == SRV_HELD_WARNINGS ? "; further ones are only counted" : "");
	conn_close(c);
	/* At once: the bound counts what is held now. */
	conn_resize(c, 0);
	c->len = 0;
}

/*
 * Makes room for c to hold want bytes: while all partial frames together
 * would pass SRV_HELD_MAX, the connection that holds the most is closed.
 * Returns false when that is c itself: closed then, unless in_alloc (libuv
 * calls the read callback of the handle whose alloc_cb this is even so:
 * c->over asks it to close c).
 */
static bool conn_room(srv_conn *c, size_t want, bool in_alloc)
{
	srv *s = c->s;

	while (s->held - c->cap + want > SRV_HELD_MAX) {
		held_max m = {s, NULL};

		uv_walk(s->loop, find_top, &m);
		if (!m.top || m.top->cap <= c->cap || m.top == c) {
			if (in_alloc)
				c->over = true;
			else
				conn_over(c);
			return false;
		}
		conn_over(m.top);
	}
	return true;
}

/* Grows c's buffer to at least want bytes, in steps of half its size. */
static int conn_grow(srv_conn *c, size_t want, bool in_alloc)
{
	size_t ncap = c->cap ? c->cap + c->cap / 2 : 4096;

	if (want <= c->cap)
		return 0;
	if (ncap < want)
		ncap = want;
	if (!conn_room(c, ncap, in_alloc))
		return -ENOBUFS;
	return conn_resize(c, ncap);
}

static int conn_keep(srv_conn *c, const char *data, size_t n)
{
	int rc = conn_grow(c, n, false);

	if (rc < 0)
		return rc;
	memmove(c->buf, data, n);
	c->len = n;
	return 0;
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	srv_conn *c = h->data;

	(void)suggested;
	if (c->len == 0) {
		*buf = uv_buf_init(shared_buf, sizeof(shared_buf));
		return;
	}
	/* A partial frame: read the rest behind it in the conn's buffer,
	 * which grows with what arrives, not to the announced length (but
	 * at once to the length of a frame an agent sends whole). */
	size_t want = c->len + SHARED_BUF_SIZE;
	if (c->len >= FT_WIRE_HEADER_SIZE) {
		size_t frame = FT_WIRE_HEADER_SIZE +
			       ft_wire_payload_len((const unsigned char *)c->buf);
		if (frame > want && frame <= SRV_WHOLE_FRAME)
			want = frame;
	}
	if (conn_grow(c, want, true) < 0) {
		*buf = uv_buf_init(NULL, 0); /* libuv reports UV_ENOBUFS */
		return;
	}
	*buf = uv_buf_init(c->buf + c->len, (unsigned)(c->cap - c->len));
}

static void fd_close_cb(uv_handle_t *h)
{
	free(h);
}

/* Keeps a received fd for the frame that will claim it; closes it when
 * the connection already holds as many as an agent ever sends at once. */
static void conn_keep_fd(srv_conn *c, int fd)
{
	if (c->pc.nfds == (int)(sizeof(c->pc.fds) / sizeof(c->pc.fds[0])))
		close(fd);
	else
		c->pc.fds[c->pc.nfds++] = fd;
}

/*
 * Takes the fds that came with the bytes just read (an agent's SHM frame
 * carries its memfd as SCM_RIGHTS) into the connection, for the frame that
 * claims them. libuv queues received fds on an IPC pipe and hands them out
 * through uv_accept into a handle; the fd is duplicated out of that handle,
 * which is then closed.
 */
static void conn_take_fds(srv_conn *c)
{
	while (uv_pipe_pending_count(&c->pipe) > 0) {
		uv_pipe_t *h = malloc(sizeof(*h));
		uv_os_fd_t fd;
		int dup = -1;

		if (!h || uv_pipe_init(c->s->loop, h, 0) < 0) {
			free(h);
			return;
		}
		if (uv_accept((uv_stream_t *)&c->pipe, (uv_stream_t *)h) == 0 &&
		    uv_fileno((uv_handle_t *)h, &fd) == 0)
			dup = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		uv_close((uv_handle_t *)h, fd_close_cb);
		if (dup >= 0)
			conn_keep_fd(c, dup);
	}
}

/* Keeps fds that came as SCM_RIGHTS in a message read by conn_drain. */
static void conn_keep_cmsg_fds(srv_conn *c, struct msghdr *mh)
{
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
		size_t n;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			conn_keep_fd(c, fd);
		}
	}
}

/*
 * libuv said EOF, but there may be bytes it never read. A Unix socket
 * read stops early at a message that carries fds (SCM_RIGHTS), and when
 * the peer has hung up by then, libuv takes that short read for the last
 * one and reports EOF (the POLLHUP short-cut in uv__stream_io). An agent
 * that sent its buffers' memfd and exited at once would lose everything
 * after it. So the socket is read to its real end here.
 */
static void conn_drain(srv_conn *c)
{
	uv_os_fd_t fd;

	if (uv_fileno((uv_handle_t *)&c->pipe, &fd) < 0)
		return;
	while (!c->closing) {
		union {
			struct cmsghdr h;
			char b[CMSG_SPACE(sizeof(int) * 8)];
		} cm;
		struct iovec iov;
		struct msghdr mh;
		ssize_t n, used;

		if (conn_grow(c, c->len + SHARED_BUF_SIZE, false) < 0)
			return;
		iov.iov_base = c->buf + c->len;
		iov.iov_len = c->cap - c->len;
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cm.b;
		mh.msg_controllen = sizeof(cm.b);
		n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		conn_keep_cmsg_fds(c, &mh);
		c->len += (size_t)n;
		used = conn_frames(c, c->buf, c->len);
		if (used < 0)
			return;
		memmove(c->buf, c->buf + used, c->len - (size_t)used);
		c->len -= (size_t)used;
	}
}

static void read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
	srv_conn *c = stream->data;
	ssize_t used;

	conn_take_fds(c);

	if (c->over && !c->closing) {
		conn_over(c);
		return;
	}
	if (nread == UV_EOF)
		conn_drain(c);
	if (c->closing)
		return;
	if (nread < 0) {
		if (nread != UV_EOF && nread != UV_ECONNRESET)
			fprintf(stderr, "forktrace: warning: reading from process %d: %s\n",
				c->pc.pe ? (int)proc_pid(c->pc.pe) : (int)c->peer_pid,
				uv_strerror((int)nread));
		else if (c->len)
			c->s->truncated++;
		conn_close(c);
		return;
	}
	if (nread == 0)
		return;
	if (buf->base == shared_buf) {
		used = conn_frames(c, shared_buf, (size_t)nread);
		if (used < 0)
			return;
		if ((size_t)used < (size_t)nread &&
		    conn_keep(c, shared_buf + used, (size_t)nread - (size_t)used) < 0 &&
		    !c->closing)
			conn_reject(c, "more than the collector could buffer");
		return;
	}
	c->len += (size_t)nread;
	used = conn_frames(c, c->buf, c->len);
	if (used < 0)
		return;
	memmove(c->buf, c->buf + used, c->len - (size_t)used);
	c->len -= (size_t)used;
	/* Give back a big buffer once the frame that needed it is done. */
	if (c->len == 0 && c->cap > 64 * 1024)
		conn_resize(c, 0);
}

static void on_connection(uv_stream_t *server, int status)
{
	srv *s = server->data;
	struct ucred cred;
	socklen_t clen = sizeof(cred);
	uv_os_fd_t fd;

	if (status < 0) {
		/* Out of fds, say: the agents whose connections libuv had to
		 * refuse spill to files. Once per kind would do; a few, then
		 * a count. */
		if (++s->accept_failed <= SRV_HELD_WARNINGS)
			fprintf(stderr, "forktrace: warning: accept: %s%s\n", uv_strerror(status),
				s->accept_failed == SRV_HELD_WARNINGS ? " (further ones are only "
									"counted)"
								      : "");
		return;
	}
	srv_conn *c = calloc(1, sizeof(*c));
	if (!c) {
		fprintf(stderr, "forktrace: warning: out of memory accepting a connection\n");
		return;
	}
	c->s = s;
	/* IPC mode: the agent passes its event buffers' memfd. */
	if (uv_pipe_init(s->loop, &c->pipe, 1) < 0) {
		free(c);
		return;
	}
	c->pipe.data = c;
	s->nconns++;
	s->accepted++;
	c->closing = false;
	if (uv_accept(server, (uv_stream_t *)&c->pipe) < 0) {
		c->closing = true;
		uv_close((uv_handle_t *)&c->pipe, conn_close_cb);
		return;
	}
	if (uv_fileno((uv_handle_t *)&c->pipe, &fd) == 0 &&
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0) {
		int member = 1;

		c->peer_pid = cred.pid;
		c->peer_uid = cred.uid;
		/* The socket is open to every uid, for the processes of the
		 * tree that gave up our uid (a daemon dropping root): a peer
		 * of another uid must be of the tree. */
		if (cred.uid != s->uid)
			member = in_tree(s, cred.pid);
		c->peer_gone = member < 0;
		if (member == 0) {
			fprintf(stderr,
				"forktrace: warning: refused a connection from pid %d of uid %u "
				"(not a process of the traced tree)\n",
				(int)cred.pid, (unsigned)cred.uid);
			c->closing = true;
			uv_close((uv_handle_t *)&c->pipe, conn_close_cb);
			return;
		}
	}
	if (uv_read_start((uv_stream_t *)&c->pipe, alloc_cb, read_cb) < 0)
		conn_close(c);
}

/*
 * Runs just before the loop polls. A traced build sends a few small
 * messages per process; woken for each, the collector takes a CPU away
 * from the tree several times per process, and on a machine with few
 * cores every wake-up costs the traced processes more than the work it
 * does (measured on 2 cores: a fork+exec loop ran 0.15x slower with a
 * wake-up per message than with this pause). So after an iteration that
 * handled something, the loop waits a moment and then takes everything
 * that arrived meanwhile in one poll. Nothing waits for the collector's
 * answer: only what it learns is delayed, by at most this pause per
 * iteration. An idle loop polls at once (and blocks there until
 * something arrives).
 */
static void batch_cb(uv_prepare_t *h)
{
	srv *s = h->data;
	uint64_t mark = s->accepted + s->frames;

	uint64_t bytes = s->bytes - s->batch_bytes;

	if (mark == s->batch_mark)
		return;
	s->batch_mark = mark;
	s->batch_bytes = s->bytes;
	/* Streams of in-process events are the opposite case: a thread
	 * blocks on its full socket until the collector reads, so a loop
	 * that is moving bulk data polls again at once. */
	if (bytes > SRV_BATCH_BULK)
		return;
	struct timespec ts = {0, SRV_BATCH_NS};
	nanosleep(&ts, NULL);
}

int srv_start(srv *s, uv_loop_t *loop, const char *path, proc_tree *pt)
{
	int rc;

	memset(s, 0, sizeof(*s));
	s->loop = loop;
	s->pt = pt;
	s->uid = getuid();
	s->self = getpid();
	s->max_payload = FT_WIRE_MAX_PAYLOAD;
	msgpack_unpacked_init(&s->up);
	rc = uv_pipe_init(loop, &s->listener, 0);
	if (rc < 0)
		goto fail_unpacked;
	s->listener.data = s;
	rc = uv_pipe_bind(&s->listener, path);
	if (rc < 0)
		goto fail_pipe;
	/* Writable by all, for the processes of the tree that gave up our
	 * uid; on_connection refuses a peer of another uid that is not of
	 * the tree. */
	rc = uv_pipe_chmod(&s->listener, UV_READABLE | UV_WRITABLE);
	if (rc < 0)
		goto fail_pipe;
	rc = uv_listen((uv_stream_t *)&s->listener, 4096, on_connection);
	if (rc < 0)
		goto fail_pipe;
	s->listening = true;
	uv_prepare_init(loop, &s->batch);
	s->batch.data = s;
	rc = uv_prepare_start(&s->batch, batch_cb);
	if (rc < 0) {
		srv_stop(s);
		goto fail_unpacked;
	}
	/* The pause must not keep the loop alive on its own. */
	uv_unref((uv_handle_t *)&s->batch);
	return 0;

fail_pipe:
	uv_close((uv_handle_t *)&s->listener, NULL);
fail_unpacked:
	msgpack_unpacked_destroy(&s->up);
	return rc;
}

void srv_stop(srv *s)
{
	if (s->listening) {
		uv_close((uv_handle_t *)&s->listener, NULL);
		uv_close((uv_handle_t *)&s->batch, NULL);
		s->listening = false;
	}
}

bool srv_idle(const srv *s)
{
	uv_os_fd_t fd;
	struct pollfd p;

	if (s->nconns)
		return false;
	if (!s->listening || uv_fileno((const uv_handle_t *)&s->listener, &fd) < 0)
		return true;
	/* A listening socket is readable while its backlog holds a
	 * connection; that one may carry frames of a process now gone. */
	p.fd = fd;
	p.events = POLLIN;
	p.revents = 0;
	return poll(&p, 1, 0) == 0;
}

static void close_walk(uv_handle_t *h, void *arg)
{
	srv *s = arg;

	if (h->type == UV_NAMED_PIPE && h != (uv_handle_t *)&s->listener && !uv_is_closing(h))
		conn_close(h->data);
}

void srv_close_all(srv *s)
{
	srv_stop(s);
	uv_walk(s->loop, close_walk, s);
	if (s->over_held > SRV_HELD_WARNINGS)
		fprintf(stderr,
			"forktrace: warning: %llu connections in all were closed for "
			"holding unfinished frames past %u MiB together\n",
			(unsigned long long)s->over_held, SRV_HELD_MAX >> 20);
	if (s->accept_failed > SRV_HELD_WARNINGS)
		fprintf(stderr,
			"forktrace: warning: %llu connections in all could not be "
			"accepted (what their processes sent on them is missing)\n",
			(unsigned long long)s->accept_failed);
	if (s->rejected > SRV_REJECT_WARNINGS)
		fprintf(stderr,
			"forktrace: warning: %llu connections in all were closed for "
			"protocol errors\n",
			(unsigned long long)s->rejected);
	s->over_held = s->accept_failed = s->rejected = 0;
}

void srv_free(srv *s)
{
	msgpack_unpacked_destroy(&s->up);
}
