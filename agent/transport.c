/*
 * The transport: how a frame reaches the collector. An image introduces
 * itself (HELLO) in a slot of the process table (slot.c) or on a
 * connection; frames go where it speaks, a connection when the slot is
 * full or an fd travels with them; when the collector cannot be reached,
 * a spill file takes them. Whoever writes holds the send lock, which
 * lock.c, the layer above, takes and releases.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* HELLO has its own buffer: a reconnect sends it while agent_buf still
 * holds the frame that failed. */
AGENT_DATA static unsigned char agent_hello_buf[AGENT_ARGV_BYTES + 3 * PATH_MAX + 512];

static int agent_spill_open(void);

void agent_on_collector_gone(void)
{
	if (!agent_g.spilling && agent_spill_open() == 0) {
		__atomic_store_n(&agent_g.active, 1, __ATOMIC_RELAXED);
		return;
	}
	__atomic_store_n(&agent_g.active, 0, __ATOMIC_RELAXED);
}

/* Write all of iov on our socket, looping on partial writes and EINTR.
 * MSG_NOSIGNAL: a dead collector must never raise SIGPIPE in the program.
 * passfd >= 0 travels with the first bytes as SCM_RIGHTS. The fd is read
 * again for each send: a signal handler of this thread that dup2()s onto
 * our fd moves the socket without the send lock (see agent_fd_evacuate),
 * and a send to the old number then fails with EBADF or ENOTSOCK; what was
 * sent so far went to the same socket, so the rest goes to the new number.
 * iov is consumed (changed). Returns 0 or -errno. Signal-safe. */
static int agent_writev_all(struct iovec *iov, int cnt, int passfd)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cm;

	while (cnt > 0) {
		int fd = __atomic_load_n(&agent_g.fd, __ATOMIC_RELAXED);
		struct msghdr mh;
		ssize_t w;

		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = iov;
		mh.msg_iovlen = (size_t)cnt;
		if (passfd >= 0) {
			memset(&cm, 0, sizeof(cm));
			mh.msg_control = cm.b;
			mh.msg_controllen = sizeof(cm.b);
			cm.h.cmsg_level = SOL_SOCKET;
			cm.h.cmsg_type = SCM_RIGHTS;
			cm.h.cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(&cm.h), &passfd, sizeof(int));
		}
		/* A spill file takes the same bytes, without fds. */
		w = agent_g.spilling ? agent_sys_writev(fd, iov, cnt)
				     : agent_sys_sendmsg(fd, &mh, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if ((errno == EBADF || errno == ENOTSOCK) &&
			    fd != __atomic_load_n(&agent_g.fd, __ATOMIC_RELAXED))
				continue;
			/* The fd to pass was closed behind our back: send
			 * the bytes without it (nothing to salvage then). */
			if (errno == EBADF && passfd >= 0 &&
			    agent_sys_fcntl(passfd, F_GETFD, 0) < 0) {
				passfd = -1;
				continue;
			}
			return -errno;
		}
		passfd = -1;
		while (cnt > 0 && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			cnt--;
		}
		if (cnt > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

static int agent_write_all(const void *buf, size_t n)
{
	struct iovec iov = {(void *)buf, n};

	return agent_writev_all(&iov, 1, -1);
}

/* Will the collector at the other end of fd acknowledge our HELLO (see
 * agent_await_ack)? It does when it is of a uid other than ours, or
 * outside our pid namespace (its pid, as the listener's credentials give
 * it to us, is 0). Connect path only. */
static int agent_peer_foreign(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (agent_syscall(SYS_getsockopt, fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0)
		return 0;
	return cr.pid == 0 || cr.uid != agent_sys_geteuid();
}

void agent_await_ack(void)
{
	struct pollfd p;
	char b;

	if (!agent_g.ack_wait || agent_g.spilling || agent_g.fd < 0)
		return;
	agent_g.ack_wait = 0;
	p.fd = agent_g.fd;
	p.events = POLLIN;
	p.revents = 0;
	struct timespec ts = {1, 0};
	if (agent_syscall(SYS_ppoll, &p, 1, &ts, NULL, 0) == 1)
		agent_syscall(SYS_recvfrom, agent_g.fd, &b, 1, MSG_DONTWAIT, NULL, NULL);
}

/*
 * May the agent call socket() and connect()? Not under a seccomp filter:
 * the program's filter may kill the process on them (systemd's
 * SystemCallFilter=, sandboxes) where, untraced, it never makes them. The
 * kernel is asked before each connection: filters are inherited across
 * fork and exec, and a program may install one at any time by any means
 * (they are only ever added to, so one seen is remembered). A filter may
 * refuse prctl too: any answer but "none" counts as a filter. Only the
 * connect path asks: an image that speaks in the table never does. Strict
 * mode, where PR_GET_SECCOMP itself kills, is entered through the prctl
 * hook, which stops the agent first. Signal-safe.
 */
bool agent_may_connect(void)
{
	long mode;

	if (__atomic_load_n(&agent_g.seccomp, __ATOMIC_RELAXED))
		return false;
	mode = agent_syscall(SYS_prctl, PR_GET_SECCOMP, 0, 0, 0, 0);
	if (mode == 0 || mode == -EINVAL)
		return true;
	agent_seccomp_seen();
	return false;
}

/* Connect to the collector and move the socket high, out of the way of
 * programs that dup2 onto low fds. Returns 0 or -errno. Signal-safe. */
static int agent_connect(void)
{
	int fd, hi, err;

	if (!agent_may_connect())
		return -EPERM;
	fd = agent_sys_socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	while (agent_sys_connect(fd, (struct sockaddr *)&agent_g.addr, agent_g.addrlen) < 0) {
		if (errno == EINTR)
			continue;
		err = -errno;
		agent_sys_close(fd);
		return err;
	}
	hi = agent_sys_fcntl(fd, F_DUPFD_CLOEXEC, AGENT_FD_MIN);
	if (hi >= 0) {
		agent_sys_close(fd);
		fd = hi;
	}
	agent_g.fd = fd;
	agent_g.ack_wait = agent_peer_foreign(fd);
	return 0;
}

/* HELLO with the current directory cwd into buf (see agent_encode_hello). */
static ssize_t agent_encode_hello_in(unsigned char *buf, size_t cap, uint32_t flags,
				     const char *cwd)
{
	struct enc_hello h;

	h.ts = agent_now();
	/* An exec time after this HELLO is no exec time (a forged one). */
	h.exec_ts = agent_g.forked || agent_g.exec_ts > h.ts ? 0 : agent_g.exec_ts;
	h.realtime = agent_clock_ns(CLOCK_REALTIME);
	h.start_ticks = agent_g.start_ticks;
	h.pid = agent_g.pid;
	h.ppid = agent_g.ppid;
	h.tid = agent_tid();
	h.flags = flags | (agent_g.argv_truncated ? FT_HELLO_ARGV_TRUNCATED : 0) |
		  (agent_g.forked ? FT_HELLO_FORKED : 0);
	/* The collector reads the slot up to here before this connection. */
	h.from_table = (flags & FT_HELLO_RESUMED) && agent_g.table_left;
	h.table_slot = agent_g.table_idx;
	h.exe = agent_g.exe;
	h.cwd = cwd;
	h.name = agent_g.name;
	h.argv = agent_g.argv;
	h.argc = agent_g.argc;
	h.has_rank = agent_g.has_rank;
	h.rank = agent_g.rank;
	h.rank_var = agent_g.rank_var;
	h.has_local_rank = agent_g.has_local_rank;
	h.local_rank = agent_g.local_rank;
	return enc_hello(buf, cap, &h);
}

static __attribute__((noinline)) ssize_t agent_encode_hello_long_cwd(unsigned char *buf, size_t cap,
								     uint32_t flags)
{
	char cwd[PATH_MAX];

	if (!agent_sys_getcwd(cwd, sizeof(cwd)))
		cwd[0] = '\0';
	return agent_encode_hello_in(buf, cap, flags, cwd);
}

/* Encode HELLO for the current image into buf; flags are added to its
 * FT_K_FLAGS. Returns the frame's length or -errno (-ENOBUFS: buf is too
 * small). Signal-safe. The constructor runs near the top of the stack,
 * where every further page is a page fault: a directory longer than 256
 * bytes gets the PATH_MAX buffer, in a frame of its own. */
static ssize_t agent_encode_hello(unsigned char *buf, size_t cap, uint32_t flags)
{
	char cwd[256];

	if (agent_sys_getcwd(cwd, sizeof(cwd)))
		return agent_encode_hello_in(buf, cap, flags, cwd);
	if (errno == ERANGE)
		return agent_encode_hello_long_cwd(buf, cap, flags);
	cwd[0] = '\0';
	return agent_encode_hello_in(buf, cap, flags, cwd);
}

/* Encode and write HELLO on agent_g.fd. Caller holds the send lock or is
 * single-threaded. Returns 0 or -errno. Signal-safe. */
static int agent_send_hello(uint32_t flags)
{
	ssize_t n = agent_encode_hello(agent_hello_buf, sizeof(agent_hello_buf), flags);

	if (n < 0)
		return (int)n;
	return agent_write_all(agent_hello_buf, (size_t)n);
}

/* Connect and say HELLO (with flags). Returns 0 or -errno. Caller holds
 * the send lock or is single-threaded. Signal-safe. */
static int agent_connect_hello(uint32_t flags)
{
	int err;

	if (agent_g.addr.sun_path[0] == '\0')
		return -ENOENT;
	err = agent_connect();
	return err < 0 ? err : agent_send_hello(flags | (agent_g.ack_wait ? FT_HELLO_ACK : 0));
}

bool agent_frame_needs_cut(ssize_t n)
{
	return n > 0 && agent_g.table_slot && (size_t)n > agent_table_frame_max() &&
	       !agent_may_connect();
}

/* Starts the table slot with a HELLO whose argv is cut (by halves, and
 * flagged) until it fits. Returns 0 or -errno. */
static int agent_table_start_short(void)
{
	int err = -E2BIG;

	while (err == -E2BIG && agent_g.argc > 1) {
		ssize_t n;

		agent_g.argc /= 2;
		agent_g.argv_truncated = 1;
		n = agent_encode_hello(agent_hello_buf, sizeof(agent_hello_buf), 0);
		err = n < 0 ? (int)n : agent_table_start(agent_hello_buf, (size_t)n);
	}
	return err;
}

/*
 * The image introduces itself: in a slot of the collector's process
 * table if it can, else on a new connection; if neither works, through
 * agent_on_collector_gone. Caller holds the send lock or is
 * single-threaded. Signal-safe.
 */
void agent_open_channel(void)
{
	/* Most HELLOs are a few hundred bytes: encoded on the stack, they
	 * spare the image a page fault in agent_hello_buf. */
	unsigned char small[1024];
	const unsigned char *hello = small;
	ssize_t n = agent_g.table_path ? agent_encode_hello(small, sizeof(small), 0) : -1;

	/* A longer one (a compiler's argv) still fits a slot, and that page
	 * fault costs far less than a connection (~40 us). */
	if (n == -ENOBUFS) {
		hello = agent_hello_buf;
		n = agent_encode_hello(agent_hello_buf, sizeof(agent_hello_buf), 0);
	}
	int err = n > 0 ? agent_table_start(hello, (size_t)n) : -ENOENT;

	if (err == 0) {
		agent_g.introduced = 1;
		__atomic_store_n(&agent_g.active, 1, __ATOMIC_RELAXED);
		return;
	}
	/* Under a seccomp filter, a HELLO too long for a slot goes there with
	 * a shorter argv rather than on a connection. */
	if (err == -E2BIG && !agent_may_connect() && agent_table_start_short() == 0) {
		agent_g.introduced = 1;
		__atomic_store_n(&agent_g.active, 1, __ATOMIC_RELAXED);
		return;
	}
	if (agent_connect_hello(0) < 0) {
		agent_on_collector_gone();
		return;
	}
	agent_g.introduced = 1;
	__atomic_store_n(&agent_g.active, 1, __ATOMIC_RELAXED);
}

/*
 * Opens the spill directory path (made 0700 when missing), refusing a
 * symbolic link (O_NOFOLLOW) and a directory that is not this process's
 * user's alone (checked on the opened directory, so it cannot be
 * swapped in between): another user's directory, made in advance in
 * /tmp, would get our trace, could delete it, or slip forged spill files
 * in beside ours. Returns the directory's fd or -errno (-EPERM:
 * refused). Signal-safe.
 */
static int agent_spill_dir_open(const char *path)
{
	struct stat st;
	int dfd;

	if (agent_sys_mkdir(path, 0700) < 0 && errno != EEXIST)
		return -errno;
	dfd = agent_sys_open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
	if (dfd < 0)
		return errno == ELOOP || errno == ENOTDIR ? -EPERM : -errno;
	if (agent_sys_fstat(dfd, &st) < 0 || st.st_uid != agent_sys_geteuid() ||
	    (st.st_mode & 077)) {
		agent_sys_close(dfd);
		return -EPERM;
	}
	return dfd;
}

/* The one line about a spill directory the agent will not use. */
static void agent_spill_refused(const char *path)
{
	char msg[200];
	size_t n = strlen(path);
	static const char tail[] = ": a symbolic link, or not a private directory of this "
				   "user; nothing is spilled there";

	if (n > sizeof(msg) - sizeof(tail))
		n = sizeof(msg) - sizeof(tail);
	memcpy(msg, path, n);
	memcpy(msg + n, tail, sizeof(tail));
	agent_fail(msg);
}

/*
 * Opens this image's spill file, SPILL_DIR/<pid>-<start ticks>-<ns>.ftspill
 * (created 0600 with O_EXCL and O_NOFOLLOW, relative to the checked
 * directory), moves it high like the socket, and writes HELLO into it:
 * the file then holds the frames the connection would have carried, and
 * `forktrace combine` reads it. An image that spoke before (in a table
 * slot, on a connection) says so (FT_HELLO_RESUMED): its spill file goes
 * on from there. Returns 0 or -errno. Signal-safe (no stdio, no malloc).
 */
static int agent_spill_open(void)
{
	char path[PATH_MAX + 80];
	char name[80];
	const char *dir = agent_g.spill_dir;
	size_t n;
	char *p;
	int fd, hi, dfd;

	/* $FORKTRACE_SPILL, else <$TMPDIR or /tmp>/forktrace-spill-<uid>: made
	 * here, not in every image's constructor. */
	if (dir) {
		n = strlen(dir);
		memcpy(path, dir, n);
	} else {
		dir = agent_g.spill_tmp ? agent_g.spill_tmp : "/tmp";
		p = stpcpy(stpcpy(path, dir), "/forktrace-spill-");
		p = agent_utoa(p, (uint64_t)agent_sys_getuid());
		n = (size_t)(p - path);
	}
	path[n] = '\0';
	dfd = agent_spill_dir_open(path);
	if (dfd == -EPERM)
		agent_spill_refused(path);
	if (dfd < 0)
		return dfd;
	p = agent_utoa(name, (uint64_t)agent_g.pid);
	*p++ = '-';
	p = agent_utoa(p, agent_g.start_ticks);
	*p++ = '-';
	p = agent_utoa(p, agent_now());
	memcpy(p, ".ftspill", sizeof(".ftspill"));
	fd = agent_sys_openat(
		dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND | O_CLOEXEC, 0600);
	agent_sys_close(dfd);
	if (fd < 0)
		return -errno;
	hi = agent_sys_fcntl(fd, F_DUPFD_CLOEXEC, AGENT_FD_MIN);
	if (hi >= 0) {
		agent_sys_close(fd);
		fd = hi;
	}
	if (agent_g.fd >= 0)
		agent_sys_close(agent_g.fd);
	__atomic_store_n(&agent_g.fd, fd, __ATOMIC_RELAXED);
	agent_g.spilling = 1;
	if (agent_send_hello(agent_g.introduced ? FT_HELLO_RESUMED : 0) < 0) {
		agent_g.spilling = 0;
		agent_g.fd = -1;
		agent_sys_close(fd);
		return -EIO;
	}
	agent_g.introduced = 1;
	return 0;
}

/* Report pending losses where the last frame went. Best effort. */
static void agent_flush_lost(void)
{
	unsigned char buf[64];
	uint64_t n = __atomic_exchange_n(&agent_g.lost, 0, __ATOMIC_RELAXED);
	ssize_t len;
	struct iovec iov;

	if (!n)
		return;
	len = enc_lost(buf, sizeof(buf), agent_now(), agent_tid(), n);
	iov.iov_base = buf;
	iov.iov_len = len > 0 ? (size_t)len : 0;
	if (len < 0 || (agent_g.table_slot ? agent_table_append(&iov, 1, iov.iov_len)
					   : agent_write_all(buf, (size_t)len)) < 0)
		__atomic_add_fetch(&agent_g.lost, n, __ATOMIC_RELAXED);
}

/* A copy of iov for one attempt (a failed attempt consumes its copy). */
#define AGENT_IOV_MAX 4

static int agent_writev_try(const struct iovec *iov, int cnt, int passfd)
{
	struct iovec v[AGENT_IOV_MAX];

	memcpy(v, iov, sizeof(*iov) * (size_t)cnt);
	return agent_writev_all(v, cnt, passfd);
}

int agent_writev_locked(const struct iovec *iov, int cnt, ssize_t n, int passfd, uint64_t nevents)
{
	int saved = errno;
	int err;

	if (n < 0 || cnt > AGENT_IOV_MAX || !__atomic_load_n(&agent_g.active, __ATOMIC_RELAXED)) {
		err = n < 0 ? (int)n : -ENOTCONN;
		goto lost;
	}
	/* A frame about to go on a connection or a spill file, or a fork
	 * child's first words: whose (agent_same_process)? The caller holds
	 * the lock, which a reset hands back to nobody: it is this thread's
	 * alone in the new process, and its unlock finds it free. */
	if ((agent_g.pending_connect || !agent_g.table_slot) && !agent_same_process()) {
		/* Its parent's memory: not even the loss count is ours. */
		agent_errno_restore(saved);
		return -ENOTCONN;
	}
	if (agent_g.pending_connect) {
		/* A fork child's first words: connect (or open its own spill
		 * file) and introduce itself. */
		agent_g.pending_connect = 0;
		if (!agent_g.start_ticks)
			agent_g.start_ticks = agent_read_stat(NULL, 0);
		if (agent_g.spilling) {
			agent_g.spilling = 0;
			agent_on_collector_gone();
		} else {
			agent_open_channel();
		}
		if (!__atomic_load_n(&agent_g.active, __ATOMIC_RELAXED)) {
			err = -ENOTCONN;
			goto lost;
		}
	}
	if (agent_g.table_slot) {
		if (passfd < 0 && (agent_table_append(iov, cnt, (size_t)n) == 0 ||
				   agent_table_continue(iov, cnt, (size_t)n) == 0))
			goto written;
		/* More to say than a slot holds, or an fd to pass: the image
		 * goes on over a connection, or, under a seccomp filter, stays
		 * in the table without this frame, counted lost. */
		if (!agent_may_connect()) {
			err = -EPERM;
			goto lost;
		}
		agent_table_leave();
		if (agent_connect_hello(FT_HELLO_RESUMED) < 0) {
			agent_on_collector_gone();
			if (!__atomic_load_n(&agent_g.active, __ATOMIC_RELAXED)) {
				err = -ENOTCONN;
				goto lost;
			}
		}
	}
	err = agent_writev_try(iov, cnt, passfd);
	if (!agent_g.spilling &&
	    (err == -EBADF || err == -EPIPE || err == -ENOTSOCK || err == -ECONNRESET)) {
		/* Our fd was closed behind our back (raw syscalls) or the
		 * connection broke: try one new connection before giving up. */
		if (!agent_g.reconnected) {
			agent_g.reconnected = 1;
			if (err != -EBADF && err != -ENOTSOCK)
				agent_sys_close(agent_g.fd);
			agent_g.fd = -1;
			if (agent_connect_hello(FT_HELLO_RESUMED) == 0)
				err = agent_writev_try(iov, cnt, passfd);
		}
	}
	if (err < 0 && !agent_g.spilling) {
		/* The collector is gone: the spill file takes this frame and
		 * everything after it. */
		agent_on_collector_gone();
		if (agent_g.spilling)
			err = agent_writev_try(iov, cnt, -1);
	}
	if (err < 0) {
		__atomic_store_n(&agent_g.active, 0, __ATOMIC_RELAXED);
		goto lost;
	}
written:
	if (__atomic_load_n(&agent_g.lost, __ATOMIC_RELAXED))
		agent_flush_lost();
	agent_errno_restore(saved);
	return 0;
lost:
	__atomic_add_fetch(&agent_g.lost, nevents ? nevents : 1, __ATOMIC_RELAXED);
	agent_errno_restore(saved);
	return err;
}

void agent_write_locked(const void *frame, ssize_t n)
{
	struct iovec iov = {(void *)frame, n > 0 ? (size_t)n : 0};

	(void)agent_writev_locked(&iov, 1, n, -1, 1);
}
