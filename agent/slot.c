/*
 * slot.c - an image's slot in the collector's process table.
 *
 * A Unix socket connection costs a short-lived image ~40 us, more than all
 * the rest of the agent (docs/BENCHMARKS.md, "Why a process table, not a
 * connection per image"); a build starts thousands of
 * images that say nothing but HELLO and EXIT. So an image first writes its
 * frames into a slot of a file the collector shares with every agent
 * (include/forktrace/wire.h, "The process table"), and connects only when
 * it has more to say than its slot holds, or an fd to pass.
 *
 * Mappings: the table's header page stays mapped for the life of the
 * process once mapped (a fork child claims its own slot through it); the
 * slot is mapped while the image writes there. Both go away at exec. An
 * image whose exec'ing parent claimed its slot for it maps only the slot.
 * Only async-signal-safe calls: a fork child of a multithreaded program, or a
 * fatal-signal handler, may be the first to write.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

/* Room for frames in a slot of the mapped table. */
static size_t agent_table_room(void)
{
	return agent_g.table_slot_size - sizeof(struct ft_table_slot);
}

size_t agent_table_frame_max(void)
{
	/* A CONTINUE frame opens every slot after the first. */
	return agent_table_room() - AGENT_SMALL_FRAME;
}

/* Maps the header page once per process. Returns 0 or -errno. */
static int agent_table_map_header(int fd)
{
	struct ft_table_header *h;
	long r;

	if (agent_g.table_hdr)
		return 0;
	/* errno stays as it was: this also runs on the way to exec. */
	/* A page past the file's end would raise SIGBUS when read: the
	 * file's size bounds what is mapped and every slot claimed. Once
	 * per process (a process that starts others). */
	struct stat st;
	uint64_t slots;
	uint32_t size;

	r = agent_syscall(SYS_fstat, fd, &st);
	if (r < 0)
		return (int)r;
	if (st.st_size < (off_t)FT_TABLE_SLOTS_OFFSET)
		return -EPROTO;
	r = agent_syscall(SYS_mmap, NULL, FT_TABLE_SLOTS_OFFSET, PROT_READ | PROT_WRITE, MAP_SHARED,
			  fd, 0);
	if (r < 0 && r > -4096)
		return (int)r;
	h = (struct ft_table_header *)r;
	/* The collector writes the header before it names the file to
	 * anyone; any traced program can write it after: each field is
	 * loaded once and checked. */
	size = __atomic_load_n(&h->slot_size, __ATOMIC_RELAXED);
	slots = size ? ((uint64_t)st.st_size - FT_TABLE_SLOTS_OFFSET) / size : 0;
	if (h->magic != FT_TABLE_MAGIC || h->version != FT_TABLE_VERSION || size < 1024 ||
	    size % 4096 != 0) {
		agent_syscall(SYS_munmap, h, FT_TABLE_SLOTS_OFFSET);
		return -EPROTO;
	}
	/* Kept apart from the shared header, which any program can write,
	 * and which a fork child would fault in to read. */
	agent_g.table_slot_size = size;
	agent_g.table_capacity = slots > UINT32_MAX ? UINT32_MAX : (uint32_t)slots;
	/* Two threads may map it at once (agent_table_need_header). */
	struct ft_table_header *none = NULL;
	if (!__atomic_compare_exchange_n(&agent_g.table_hdr, &none, h, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		agent_syscall(SYS_munmap, h, FT_TABLE_SLOTS_OFFSET);
	return 0;
}

int agent_table_kept_fd(void)
{
	int fd = agent_g.table_keep - 1;
	struct stat st;

	if (fd < 0)
		return -1;
	if (agent_syscall(SYS_fstat, fd, &st) == 0 && (uint64_t)st.st_dev == agent_g.table_dev &&
	    (uint64_t)st.st_ino == agent_g.table_ino)
		return fd;
	/* The program closed it, or put a file of its own at its number. */
	if (!agent_t_in_vfork)
		agent_g.table_keep = 0;
	return -1;
}

/* An fd on the table: the kept one, or a new one (give it back with
 * agent_table_fd_done). Returns -errno on failure. errno-free. */
static int agent_table_fd(void)
{
	int fd = agent_table_kept_fd();

	if (fd >= 0)
		return fd;
	if (!agent_g.table_path)
		return -ENOENT;
	return (int)agent_syscall(SYS_openat, AT_FDCWD, agent_g.table_path, O_RDWR | O_CLOEXEC, 0);
}

static void agent_table_fd_done(int fd)
{
	if (fd != agent_g.table_keep - 1)
		agent_syscall(SYS_close, fd);
}

/* fd (on the table, st its fstat) is kept from now on. */
static void agent_table_keep_fd(int fd, const struct stat *st)
{
	char *p = agent_g.env_table;

	agent_g.table_dev = (uint64_t)st->st_dev;
	agent_g.table_ino = (uint64_t)st->st_ino;
	memcpy(p, FT_ENV_TABLE_FD "=", sizeof(FT_ENV_TABLE_FD));
	*agent_utoa(p + sizeof(FT_ENV_TABLE_FD), (uint64_t)fd) = '\0';
	__atomic_store_n(&agent_g.table_keep, fd + 1, __ATOMIC_RELEASE);
}

void agent_table_keep(void)
{
	struct stat st;
	int fd, hi;

	if (!agent_g.table_path || agent_table_kept_fd() >= 0)
		return;
	fd = (int)agent_syscall(SYS_openat, AT_FDCWD, agent_g.table_path, O_RDWR | O_CLOEXEC, 0);
	if (fd < 0)
		return;
	/* High, as the socket: out of the way of programs that dup2 onto
	 * low numbers. */
	hi = (int)agent_syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, AGENT_FD_MIN);
	if (hi >= 0) {
		agent_syscall(SYS_close, fd);
		fd = hi;
	}
	if (agent_syscall(SYS_fstat, fd, &st) == 0 && agent_table_map_header(fd) == 0)
		agent_table_keep_fd(fd, &st);
	else
		agent_syscall(SYS_close, fd);
}

void agent_table_take_fd(const char *v)
{
	struct ft_table_header h;
	struct stat st;
	uint64_t fd = 0;
	const char *p;

	for (p = v; *p >= '0' && *p <= '9' && p - v < 9; p++)
		fd = fd * 10 + (uint64_t)(*p - '0');
	if (p == v || *p)
		return;
	/* Only a regular file that starts with a table header: anything
	 * else at that number is the program's. */
	if (agent_syscall(SYS_fstat, (int)fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    agent_syscall(SYS_pread64, (int)fd, &h, sizeof(h), 0) != (long)sizeof(h) ||
	    h.magic != FT_TABLE_MAGIC || h.version != FT_TABLE_VERSION)
		return;
	agent_syscall(SYS_fcntl, (int)fd, F_SETFD, FD_CLOEXEC);
	agent_table_keep_fd((int)fd, &st);
	/* Only a filtered image hands the fd over: filters are inherited. */
	agent_seccomp_seen();
}

/* Is the collector that reads the table gone? Its liveness word lost
 * its holder's thread id (include/forktrace/wire.h, "Liveness"). One
 * load from the header page, which the caller has touched already. */
static bool agent_table_orphaned(const struct ft_table_header *h)
{
	return (__atomic_load_n(&h->alive, __ATOMIC_RELAXED) & FT_TABLE_ALIVE_TID_MASK) == 0;
}

/* Takes the next slot, if the collector has allocated it. Never takes one
 * it has not: a write there could raise SIGBUS. Nor one that nobody will
 * read: the collector died (then the image spills). Returns 0, -ENOSPC
 * or -EPIPE. */
static int agent_table_claim(uint32_t *idx)
{
	struct ft_table_header *h = agent_g.table_hdr;
	uint32_t c = __atomic_load_n(&h->claimed, __ATOMIC_RELAXED);

	if (agent_table_orphaned(h))
		return -EPIPE;

	do {
		if (c >= __atomic_load_n(&h->ready, __ATOMIC_ACQUIRE) ||
		    c >= __atomic_load_n(&h->capacity, __ATOMIC_RELAXED) ||
		    c >= agent_g.table_capacity)
			return -ENOSPC;
	} while (!__atomic_compare_exchange_n(&h->claimed, &c, c + 1, true, __ATOMIC_ACQ_REL,
					      __ATOMIC_RELAXED));
	*idx = c;
	return 0;
}

/* Unmaps a slot a fork child inherited (agent_table_fork_child). */
static void agent_table_drop_inherited(void)
{
	if (agent_g.table_inherited) {
		agent_sys_munmap(agent_g.table_inherited, agent_g.table_slot_size);
		agent_g.table_inherited = NULL;
	}
}

/* Maps slot idx of the open table fd and takes it: its owner word goes
 * from 0 to our pid, so that a slot handed over twice (a hand-over that
 * two images inherited, or a forged one) is written by one image only.
 * Returns it or NULL (errno set: EBUSY when another image has it).
 * MAP_POPULATE maps its page (FT_TABLE_SLOT_SIZE is one) in the same
 * system call: it is written at once, and a page fault of its own costs
 * a short-lived image ~0.3 us more. */
static struct ft_table_slot *agent_table_map_slot(int fd, uint32_t idx)
{
	off_t off = (off_t)FT_TABLE_SLOTS_OFFSET + (off_t)idx * (off_t)agent_g.table_slot_size;
	struct ft_table_slot *s = agent_sys_mmap(NULL, agent_g.table_slot_size,
						 PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
						 fd, off);
	uint32_t none = 0;

	if (s == MAP_FAILED)
		return NULL;
	if (!__atomic_compare_exchange_n(&s->owner, &none, (uint32_t)agent_g.pid, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&s->committed, __ATOMIC_RELAXED) != 0) {
		agent_sys_munmap(s, agent_g.table_slot_size);
		errno = EBUSY;
		return NULL;
	}
	return s;
}

/* Opens the table, maps its header once, claims a slot and maps it.
 * Returns the slot or NULL (errno set). */
static struct ft_table_slot *agent_table_new_slot(size_t need, uint32_t *idx)
{
	struct ft_table_slot *s = NULL;
	int fd, err;

	fd = agent_table_fd();
	if (fd < 0) {
		errno = -fd;
		return NULL;
	}
	err = agent_table_map_header(fd);
	if (err == 0 && need > agent_table_room())
		err = -E2BIG; /* a long argv: the frame goes on a connection */
	if (err == 0)
		err = agent_table_claim(idx);
	if (err == 0 && !(s = agent_table_map_slot(fd, *idx)))
		err = -errno; /* the slot stays empty; the collector skips it */
	agent_table_fd_done(fd);
	if (err < 0)
		errno = -err;
	else
		agent_table_drop_inherited();
	return s;
}

/*
 * Maps the slot the exec's caller claimed for this image: the header, one
 * mapping and a page fault more, is left unmapped until something needs
 * it (a fork child's or a second slot). The caller claimed it only for
 * slots of FT_TABLE_SLOT_SIZE. Returns the slot or NULL (errno set; the
 * slot then stays empty, and the collector skips it).
 */
static struct ft_table_slot *agent_table_handed_slot(size_t need, uint32_t *idx)
{
	struct ft_table_slot *s = NULL;
	struct stat st;
	int fd;

	if (need > FT_TABLE_SLOT_SIZE - sizeof(*s)) {
		errno = E2BIG;
		return NULL;
	}
	fd = agent_table_fd();
	if (fd < 0) {
		errno = -fd;
		return NULL;
	}
	*idx = agent_g.table_handed - 1;
	/* The index comes from the environment: a slot past the file's end
	 * would raise SIGBUS at the first write. One fstat per image, the
	 * price of never trusting it. */
	if (agent_sys_fstat(fd, &st) == 0 &&
	    (uint64_t)st.st_size >=
		    (uint64_t)FT_TABLE_SLOTS_OFFSET + ((uint64_t)*idx + 1) * FT_TABLE_SLOT_SIZE) {
		agent_g.table_slot_size = FT_TABLE_SLOT_SIZE;
		s = agent_table_map_slot(fd, *idx);
	} else {
		errno = ERANGE;
	}
	agent_table_fd_done(fd);
	return s;
}

void agent_table_need_header(void)
{
	int fd;

	if (__atomic_load_n(&agent_g.table_hdr, __ATOMIC_ACQUIRE) || !agent_g.table_slot ||
	    !agent_g.table_path)
		return;
	/* errno-free system calls: a vfork child may be here, on its way to
	 * exec, with its parent's errno. */
	fd = agent_table_fd();
	if (fd >= 0) {
		(void)agent_table_map_header(fd);
		agent_table_fd_done(fd);
	}
}

struct ft_table_target *agent_table_targets(void)
{
	struct ft_table_header *h;

	agent_table_need_header();
	h = __atomic_load_n(&agent_g.table_hdr, __ATOMIC_ACQUIRE);
	return h ? (struct ft_table_target *)((char *)h + FT_TABLE_TARGETS_OFFSET) : NULL;
}

int agent_table_claim_for(uint32_t *idx)
{
	agent_table_need_header();
	if (!__atomic_load_n(&agent_g.table_hdr, __ATOMIC_ACQUIRE) ||
	    agent_g.table_slot_size != FT_TABLE_SLOT_SIZE)
		return -ENOENT;
	return agent_table_claim(idx);
}

int agent_table_start(const void *hello, size_t n)
{
	uint32_t idx = 0;
	struct ft_table_slot *s = NULL;

	if (agent_g.table_handed)
		s = agent_table_handed_slot(n, &idx);
	agent_g.table_handed = 0;
	if (!s) {
		/* The slot size of a rejected hand-over is not the table's. */
		if (!agent_g.table_hdr)
			agent_g.table_slot_size = 0;
		s = agent_table_new_slot(n, &idx);
	}

	if (!s)
		return -errno;
	agent_g.table_slot = s;
	agent_g.table_idx = idx;
	memcpy(s + 1, hello, n);
	agent_g.table_used = (uint32_t)n;
	__atomic_store_n(&s->committed, (uint32_t)n, __ATOMIC_RELEASE);
	return 0;
}

int agent_table_continue(const struct iovec *iov, int cnt, size_t n)
{
	unsigned char head[AGENT_SMALL_FRAME];
	ssize_t hn = enc_continue(head, sizeof(head), agent_now(), agent_tid(), agent_g.table_idx);
	uint32_t idx = 0;
	struct ft_table_slot *s;

	if (hn < 0)
		return (int)hn;
	s = agent_table_new_slot((size_t)hn + n, &idx);
	if (!s)
		return -errno;
	agent_sys_munmap(agent_g.table_slot, agent_g.table_slot_size);
	agent_g.table_slot = s;
	agent_g.table_idx = idx;
	memcpy(s + 1, head, (size_t)hn);
	agent_g.table_used = (uint32_t)hn;
	__atomic_store_n(&s->committed, (uint32_t)hn, __ATOMIC_RELEASE);
	return agent_table_append(iov, cnt, n);
}

int agent_table_append(const struct iovec *iov, int cnt, size_t n)
{
	struct ft_table_slot *s = agent_g.table_slot;
	/* Our own count, not the slot's word: any traced program can write
	 * the table, and a committed word past the slot would send the copy
	 * over other slots, or past the file's end (SIGBUS). */
	uint32_t at = agent_g.table_used;
	const struct ft_table_header *h = agent_g.table_hdr;
	char *p;

	/* An image that mapped the header checks, at each frame, that the
	 * collector still reads the table; one handed its slot does not map
	 * it (what it writes is salvaged from the table after a crash). */
	if (h && agent_table_orphaned(h))
		return -EPIPE;
	if (n > agent_table_room() - at)
		return -ENOSPC;
	p = (char *)(s + 1) + at;
	for (int i = 0; i < cnt; i++) {
		memcpy(p, iov[i].iov_base, iov[i].iov_len);
		p += iov[i].iov_len;
	}
	agent_g.table_used = at + (uint32_t)n;
	__atomic_store_n(&s->committed, at + (uint32_t)n, __ATOMIC_RELEASE);
	return 0;
}

void agent_table_leave(void)
{
	agent_sys_munmap(agent_g.table_slot, agent_g.table_slot_size);
	agent_g.table_slot = NULL;
	agent_g.table_left = 1; /* its resumed HELLO names table_idx */
}

void agent_table_fork_child(void)
{
	/* The parent's slot is the parent's: the child claims its own when
	 * it first has something to say, and only then unmaps the parent's.
	 * Most fork children exec first, which unmaps it for free. */
	if (agent_g.table_slot) {
		agent_g.table_inherited = agent_g.table_slot;
		agent_g.table_slot = NULL;
	}
	agent_g.table_left = 0;
}
