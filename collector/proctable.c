/*
 * proctable.c - the process table (ptab_): where short-lived images speak
 * without a connection (include/forktrace/wire.h, "The process table";
 * agent/slot.c is the other side).
 *
 * The collector maps the whole file and reads each slot's committed
 * frames into the process tree through the same proc_apply as a
 * connection's, with a proc_conn per slot. It reads on a timer, before a
 * connection's HELLO that resumes a slot (so the slot's frames come
 * first), and once more at the end.
 *
 * A slot is open from its HELLO until its image is known to be gone: a
 * newer image of the same process said HELLO (the exec replaced the
 * mapping), the image went on to a connection (it unmapped the slot), or
 * it said EXIT and its parent or we saw its wait status. Then its pages
 * are given back (the slot is never reused). Pages are allocated ahead of
 * the agents, `ready` slots at a time: an agent never takes a slot whose
 * page the file system could fail to provide.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "say.h"
#include "internal.h"
#include "spill.h"
#include "vec.h"

/* Slots allocated ahead of the agents: how many a fork storm may take
 * between two reads before some images fall back to connecting. */
#define PTAB_STEP 1024u
#define PTAB_LOW 512u
/* Slots ready when the command starts: allocating a whole step (4 MiB)
 * then took 0.5 ms before it could start; ptab_fill adds the step once it
 * runs. */
#define PTAB_FIRST 64u
#define PTAB_DEFAULT_CAPACITY (1u << 20)

/* The liveness mutex lies over the header's `alive` and `reserved`, its
 * lock word first (include/forktrace/wire.h, "Liveness"). */
_Static_assert(offsetof(struct ft_table_header, alive) % _Alignof(pthread_mutex_t) == 0,
	       "the liveness mutex must be aligned");
_Static_assert(offsetof(struct ft_table_header, alive) + sizeof(pthread_mutex_t) <=
		       sizeof(struct ft_table_header),
	       "the liveness mutex must fit the header");
_Static_assert(offsetof(pthread_mutex_t, __data.__lock) == 0,
	       "the agents read the mutex's lock word at `alive`");

typedef struct ptab_entry {
	proc_conn pc;
	uint32_t idx;
	uint32_t read; /* bytes of the slot's frames applied */
	bool exited;   /* its EXIT was read */
	bool broken;   /* a frame did not parse: read no further */
} ptab_entry;

struct ptab {
	proc_tree *pt;
	int fd;
	unsigned char *map;
	size_t maplen;
	struct ft_table_header *hdr;
	uint32_t capacity, slot_size;
	uint32_t ready; /* slots allocated (the header's copy is the agents') */
	uint32_t seen;  /* slots below this were taken into `open` */
	/* Slots taken and not yet retired, in index order; NULL entry: no
	 * HELLO read yet; RETIRED: dropped at the next compact(). */
	uint32_t *open_idx;
	ptab_entry **open;
	size_t nopen, open_cap;
	msgpack_unpacked up;
	char file[PATH_MAX]; /* the table file */
	char link[PATH_MAX]; /* symlink beside the socket, or "" */
	char shmdir[64];     /* its private tmpfs directory, or "" */
	bool warned;
	bool alive_held; /* the liveness mutex is ours (see hold_alive) */
	/* A table read after its run (ptab_open_salvage): never written,
	 * frames applied at their own times. */
	bool salvage;
	int64_t last_ts; /* the latest frame time seen (salvage) */
	/* The journal (ptab_set_journal): what retired slots held, written
	 * before their pages go; -1 without one. */
	int jfd;
	int (*jopen)(void *ctx); /* opens it when first needed, or NULL */
	void *jctx;
	unsigned char *jbuf;
	size_t jlen;
	/* Retired slots whose pages are not given back yet: [rel_start,
	 * rel_start + rel_len) (see release_pages). */
	uint32_t rel_start, rel_len;
};

/* A journal record: struct ptab_jrec, then len bytes of the slot's
 * frames (docs/TRACE_FORMAT.md, "Spill files"). */
#define PTAB_JOURNAL_MAGIC 0x524a5446u /* "FTJR" */
#define PTAB_JOURNAL_BUF (64u * 1024u)

struct ptab_jrec {
	uint32_t magic;
	uint32_t idx; /* the slot */
	uint32_t len; /* bytes of whole frames that follow */
};

static ptab_entry retired_mark;

static void journal_flush(ptab *t);
#define RETIRED (&retired_mark)

static struct ft_table_slot *slot_at(const ptab *t, uint32_t idx)
{
	return (struct ft_table_slot *)(t->map + FT_TABLE_SLOTS_OFFSET +
					(size_t)idx * t->slot_size);
}

/* Allocates slots [ready, ready + n) and publishes them to the agents. */
static void extend_ready(ptab *t, uint32_t n)
{
	uint32_t ready = t->ready;

	if (t->salvage || ready >= t->capacity)
		return;
	if (n > t->capacity - ready)
		n = t->capacity - ready;
	/* Mode 0: the blocks exist afterwards, so no write to a mapped page
	 * of these slots can fail (ENOSPC would be SIGBUS in the program). */
	if (fallocate(t->fd, 0, (off_t)FT_TABLE_SLOTS_OFFSET + (off_t)ready * t->slot_size,
		      (off_t)n * t->slot_size) < 0)
		return; /* full: agents connect instead */
	t->ready = ready + n;
	__atomic_store_n(&t->hdr->ready, t->ready, __ATOMIC_RELEASE);
}

/* Where the file goes: beside the socket when that is tmpfs; else in a
 * private directory of /dev/shm, named by a symlink beside the socket
 * (a page written through a mapping of a disk file costs the writer
 * block allocation and write-back). */
static int open_file(ptab *t, const char *sock_dir)
{
	struct statfs sf;

	if ((size_t)snprintf(t->link, sizeof(t->link), "%s/%s", sock_dir, FT_TABLE_NAME) >=
	    sizeof(t->link))
		return -ENAMETOOLONG;
	if (statfs(sock_dir, &sf) < 0 || sf.f_type != TMPFS_MAGIC) {
		snprintf(t->shmdir, sizeof(t->shmdir), "/dev/shm/forktrace-XXXXXX");
		if (mkdtemp(t->shmdir)) {
			snprintf(t->file, sizeof(t->file), "%s/%s", t->shmdir, FT_TABLE_NAME);
			t->fd = open(t->file, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
			if (t->fd >= 0 && symlink(t->file, t->link) == 0)
				return 0;
			if (t->fd >= 0) {
				close(t->fd);
				unlink(t->file);
			}
			rmdir(t->shmdir);
		}
		t->shmdir[0] = '\0';
	}
	snprintf(t->file, sizeof(t->file), "%s", t->link);
	t->link[0] = '\0';
	t->fd = open(t->file, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	return t->fd < 0 ? -errno : 0;
}

static uint32_t capacity_from_env(void)
{
	const char *s = getenv("FORKTRACE_TABLE_SLOTS");
	char *end;
	unsigned long v;

	if (!s || !*s)
		return PTAB_DEFAULT_CAPACITY;
	v = strtoul(s, &end, 10);
	return *end || v > PTAB_DEFAULT_CAPACITY ? PTAB_DEFAULT_CAPACITY : (uint32_t)v;
}

/*
 * Takes the liveness mutex in the header, for as long as the table
 * exists: robust, so that the kernel marks its word when this process
 * dies, however it dies, and the agents stop writing into a table that
 * nobody reads. Held by the main thread, which lives as long as the
 * process. Returns 0 or a positive error number.
 */
static int hold_alive(ptab *t)
{
	pthread_mutex_t *m = (pthread_mutex_t *)(void *)&t->hdr->alive;
	pthread_mutexattr_t a;
	int rc;

	rc = pthread_mutexattr_init(&a);
	if (rc)
		return rc;
	rc = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	if (!rc)
		rc = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	if (!rc)
		rc = pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
	if (!rc)
		rc = pthread_mutex_lock(m);
	t->alive_held = rc == 0;
	return rc;
}

/*
 * The live table's mapping, guarded against a traced process that cuts the
 * file short (every process of forktrace's uid may open it): a read of a
 * page past the file's new end is SIGBUS, which would end forktrace and
 * lose the trace. The handler puts private zero pages over the mapping
 * from the faulting page on and returns; the read then sees slots that
 * hold nothing, and table_cut says so at the end. A run has one live
 * table; a fault anywhere else is given back to the default action.
 */
static unsigned char *volatile guard_base;
static size_t guard_len;
static uintptr_t guard_page;
static volatile sig_atomic_t table_cut;

/* Signal-safe. */
static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	uintptr_t a = (uintptr_t)si->si_addr, base = (uintptr_t)guard_base;
	uintptr_t page = a & ~(guard_page - 1);

	(void)uc;
	if (base && a >= base && a < base + guard_len &&
	    mmap((void *)page, base + guard_len - page, PROT_READ | PROT_WRITE,
		 MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) != MAP_FAILED) {
		table_cut = 1;
		return;
	}
	signal(sig, SIG_DFL);
}

static void guard_mapping(unsigned char *map, size_t len)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	guard_page = (uintptr_t)sysconf(_SC_PAGESIZE);
	guard_len = len;
	guard_base = map;
	sigaction(SIGBUS, &sa, NULL);
}

bool ptab_was_cut(void)
{
	return table_cut != 0;
}

ptab *ptab_create(const char *sock_dir, proc_tree *pt)
{
	ptab *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->pt = pt;
	t->fd = -1;
	t->jfd = -1;
	t->slot_size = FT_TABLE_SLOT_SIZE;
	/* FORKTRACE_TABLE_SLOTS=0 turns the table off: every image connects. */
	t->capacity = capacity_from_env();
	msgpack_unpacked_init(&t->up);
	if (t->capacity == 0 || open_file(t, sock_dir) < 0)
		goto fail;
	t->maplen = FT_TABLE_SLOTS_OFFSET + (size_t)t->capacity * t->slot_size;
	if (ftruncate(t->fd, (off_t)t->maplen) < 0 ||
	    fallocate(t->fd, 0, 0, FT_TABLE_SLOTS_OFFSET) < 0)
		goto fail;
	t->map = mmap(NULL, t->maplen, PROT_READ | PROT_WRITE, MAP_SHARED, t->fd, 0);
	if (t->map == MAP_FAILED) {
		t->map = NULL;
		goto fail;
	}
	guard_mapping(t->map, t->maplen);
	t->hdr = (struct ft_table_header *)t->map;
	t->hdr->slot_size = t->slot_size;
	t->hdr->capacity = t->capacity;
	t->hdr->version = FT_TABLE_VERSION;
	if (strlen(sock_dir) < FT_TABLE_OWNER_SIZE)
		memcpy(t->map + FT_TABLE_OWNER_OFFSET, sock_dir, strlen(sock_dir) + 1);
	/* Without it the agents would take the table for an orphan. */
	if (hold_alive(t) != 0)
		goto fail;
	extend_ready(t, PTAB_FIRST);
	/* Last: an agent checks the magic before anything else. */
	__atomic_store_n(&t->hdr->magic, FT_TABLE_MAGIC, __ATOMIC_RELEASE);
	return t;
fail:
	/* Without a table every image connects, as before it existed. */
	ptab_free(t);
	return NULL;
}

/* Copies the journal's records (the slots' frames the dead collector had
 * read and then given the pages of back) into the private copy of the
 * table. Returns how many records were damaged or out of place. */
static size_t apply_journal(ptab *t, const unsigned char *j, size_t n)
{
	uint32_t room = t->slot_size - (uint32_t)sizeof(struct ft_table_slot);
	size_t off = 0, bad = 0;

	while (n - off >= sizeof(struct ptab_jrec)) {
		struct ptab_jrec r;

		memcpy(&r, j + off, sizeof(r));
		if (r.magic != PTAB_JOURNAL_MAGIC || r.len > room || r.len > n - off - sizeof(r))
			return bad + 1; /* cut short or damaged: the rest is lost */
		if (r.idx < t->capacity) {
			struct ft_table_slot *s = slot_at(t, r.idx);

			memcpy(s + 1, j + off + sizeof(r), r.len);
			s->committed = r.len;
		} else {
			bad++;
		}
		off += sizeof(r) + r.len;
	}
	return bad + (off != n);
}

/* The whole file fd (malloc'd; *n its size), or NULL. */
static unsigned char *read_all(int fd, size_t *n)
{
	struct stat st;
	unsigned char *b;
	size_t got = 0;

	*n = 0;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0)
		return NULL;
	b = malloc((size_t)st.st_size);
	while (b && got < (size_t)st.st_size) {
		ssize_t r = pread(fd, b + got, (size_t)st.st_size - got, (off_t)got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	*n = got;
	return b;
}

/* The highest slot a journal names + 1 (for a journal without its table). */
static uint32_t journal_slots(const unsigned char *j, size_t n)
{
	uint32_t max = 0;

	for (size_t off = 0; n - off >= sizeof(struct ptab_jrec);) {
		struct ptab_jrec r;

		memcpy(&r, j + off, sizeof(r));
		if (r.magic != PTAB_JOURNAL_MAGIC || r.len > FT_TABLE_SLOT_SIZE ||
		    r.len > n - off - sizeof(r) || r.idx >= PTAB_DEFAULT_CAPACITY)
			break;
		if (r.idx + 1 > max)
			max = r.idx + 1;
		off += sizeof(r) + r.len;
	}
	return max;
}

ptab *ptab_open_salvage(int fd, int jfd, proc_tree *pt, int *err, size_t *bad)
{
	struct ft_table_header h;
	struct stat st;
	ptab *t = calloc(1, sizeof(*t));
	unsigned char *j = NULL;
	size_t jn = 0;

	*err = -ENOMEM;
	*bad = 0;
	if (jfd >= 0) {
		j = read_all(jfd, &jn);
		close(jfd);
	}
	if (!t) {
		if (fd >= 0)
			close(fd);
		free(j);
		return NULL;
	}
	t->pt = pt;
	t->fd = fd;
	t->jfd = -1;
	t->salvage = true;
	msgpack_unpacked_init(&t->up);
	*err = -EPROTO;
	if (fd >= 0) {
		size_t room;

		if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
		    st.st_size < FT_TABLE_SLOTS_OFFSET ||
		    pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
		    h.magic != FT_TABLE_MAGIC || h.version != FT_TABLE_VERSION ||
		    h.slot_size < 1024 || h.slot_size % 4096 != 0 || h.slot_size > (1u << 20))
			goto fail;
		/* Only what the file holds: a table cut short is read as far
		 * as it goes. */
		room = ((size_t)st.st_size - FT_TABLE_SLOTS_OFFSET) / h.slot_size;
		t->slot_size = h.slot_size;
		t->capacity = h.capacity < room ? h.capacity : (uint32_t)room;
		t->maplen = FT_TABLE_SLOTS_OFFSET + (size_t)t->capacity * t->slot_size;
		/* A private copy: the journal goes into it, the file never
		 * changes. */
		t->map = mmap(NULL, t->maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE,
			      fd, 0);
	} else {
		/* The table is gone (a reboot, a cleaner): the journal alone. */
		t->slot_size = FT_TABLE_SLOT_SIZE;
		t->capacity = j ? journal_slots(j, jn) : 0;
		if (!t->capacity)
			goto fail;
		t->maplen = FT_TABLE_SLOTS_OFFSET + (size_t)t->capacity * t->slot_size;
		t->map = mmap(NULL, t->maplen, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	}
	if (t->map == MAP_FAILED) {
		t->map = NULL;
		*err = -errno;
		goto fail;
	}
	t->hdr = (struct ft_table_header *)t->map;
	if (fd < 0) {
		t->hdr->magic = FT_TABLE_MAGIC;
		t->hdr->claimed = t->hdr->ready = t->capacity;
	}
	t->ready = t->hdr->ready < t->capacity ? t->hdr->ready : t->capacity;
	if (j)
		*bad = apply_journal(t, j, jn);
	free(j);
	*err = 0;
	return t;
fail:
	free(j);
	ptab_free(t);
	return NULL;
}

const char *ptab_file(const ptab *t)
{
	return t ? t->file : NULL;
}

int64_t ptab_last_ts(const ptab *t)
{
	return t ? t->last_ts : 0;
}

void ptab_free(ptab *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nopen; i++) {
		if (t->open[i] && t->open[i] != RETIRED) {
			proc_conn_drop_fds(&t->open[i]->pc);
			free(t->open[i]);
		}
	}
	free(t->open);
	free(t->open_idx);
	/* Out of this thread's robust list before the memory goes: glibc
	 * walks the list when it unlocks another robust mutex. */
	if (t->alive_held)
		pthread_mutex_unlock((pthread_mutex_t *)(void *)&t->hdr->alive);
	if (t->map) {
		if (t->map == guard_base)
			guard_base = NULL;
		munmap(t->map, t->maplen);
	}
	if (t->fd >= 0) {
		close(t->fd);
		if (!t->salvage)
			unlink(t->file);
	}
	if (t->link[0])
		unlink(t->link);
	if (t->shmdir[0])
		rmdir(t->shmdir);
	journal_flush(t);
	if (t->jfd >= 0)
		close(t->jfd);
	free(t->jbuf);
	msgpack_unpacked_destroy(&t->up);
	free(t);
}

/* Writes the journal's buffer out. A journal that cannot be written is
 * dropped (the run goes on; only recovery after a crash loses it). */
static void journal_flush(ptab *t)
{
	size_t off = 0;

	while (t->jfd >= 0 && off < t->jlen) {
		ssize_t w = write(t->jfd, t->jbuf + off, t->jlen - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			close(t->jfd);
			t->jfd = -1;
			break;
		}
		off += (size_t)w;
	}
	t->jlen = 0;
}

/* Copies what slot idx holds into the journal's buffer: its pages are
 * about to be given back, and the collector's memory of them dies with
 * it. */
static void journal_slot(ptab *t, uint32_t idx)
{
	const struct ft_table_slot *s = slot_at(t, idx);
	uint32_t n = __atomic_load_n(&s->committed, __ATOMIC_ACQUIRE);
	uint32_t room = t->slot_size - (uint32_t)sizeof(*s);
	struct ptab_jrec r = {PTAB_JOURNAL_MAGIC, idx, 0};

	if (n == 0)
		return;
	if (t->jfd < 0 && t->jopen) {
		/* Once: a journal that cannot be made is done without. */
		t->jfd = t->jopen(t->jctx);
		t->jopen = NULL;
		t->jbuf = t->jfd >= 0 ? malloc(PTAB_JOURNAL_BUF) : NULL;
		if (t->jfd >= 0 && !t->jbuf) {
			close(t->jfd);
			t->jfd = -1;
		}
	}
	if (t->jfd < 0)
		return;
	r.len = n < room ? n : room;
	if (t->jlen + sizeof(r) + r.len > PTAB_JOURNAL_BUF)
		journal_flush(t);
	memcpy(t->jbuf + t->jlen, &r, sizeof(r));
	memcpy(t->jbuf + t->jlen + sizeof(r), s + 1, r.len);
	t->jlen += sizeof(r) + r.len;
}

void ptab_set_journal(ptab *t, int (*open_journal)(void *ctx), void *ctx)
{
	if (!t || t->salvage)
		return;
	t->jopen = open_journal;
	t->jctx = ctx;
}

/* Gives the pages of the retired slots gathered so far back, once the
 * journal has what they held. */
static void release_flush(ptab *t)
{
	if (t->rel_len)
		journal_flush(t);
	if (t->rel_len && !t->salvage)
		fallocate(t->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			  (off_t)FT_TABLE_SLOTS_OFFSET + (off_t)t->rel_start * t->slot_size,
			  (off_t)t->rel_len * t->slot_size);
	t->rel_len = 0;
}

/* The slot's pages can go: its image can write it no more. Slots retire
 * mostly in the order they were claimed, so neighbours are punched out in
 * one call, at the end of a read: each call takes locks of the file that
 * an agent mapping its slot waits for (a loop of 2000 children: ~130
 * calls, not 2000). */
static void release_pages(ptab *t, uint32_t idx)
{
	journal_slot(t, idx);
	if (t->rel_len && idx == t->rel_start + t->rel_len) {
		t->rel_len++;
		return;
	}
	release_flush(t);
	t->rel_start = idx;
	t->rel_len = 1;
}

static void after_hello(ptab *t, proc_conn *pc, const wire_msg *m, ptab_entry *self);

static size_t find_open(const ptab *t, uint32_t idx);
static ptab_entry *continue_from(ptab *t, const wire_msg *m, uint32_t idx);

/* Applies the frames the slot's image committed since the last read. */
static void read_slot(ptab *t, size_t k)
{
	uint32_t idx = t->open_idx[k];
	struct ft_table_slot *s = slot_at(t, idx);
	uint32_t committed = __atomic_load_n(&s->committed, __ATOMIC_ACQUIRE);
	const char *data = (const char *)(s + 1);
	ptab_entry *e = t->open[k];
	uint32_t room = t->slot_size - (uint32_t)sizeof(*s);

	if (e == RETIRED)
		return;
	if (committed > room)
		committed = room; /* a program wrote over it: read what can be */
	while (!(e && e->broken) && (e ? e->read : 0) < committed) {
		uint32_t at = e ? e->read : 0;
		wire_frame f;
		wire_msg m;
		int rc = wire_next_frame(data + at, committed - at, FT_WIRE_MAX_PAYLOAD, &f);

		if (rc == 1 && wire_decode(f.payload, f.len, f.type, &t->up, &m) < 0)
			rc = -EBADMSG;
		if (rc == 1 && !e && m.type == FT_MSG_CONTINUE) {
			/* The image's slot before is full: go on with it here. */
			e = continue_from(t, &m, idx);
			t->open[k] = e ? e : RETIRED;
			if (!e)
				return;
			e->read = at + (uint32_t)f.size;
			continue;
		}
		if (rc == 1 && (e ? m.type == FT_MSG_CONTINUE : m.type != FT_MSG_HELLO))
			rc = -EPROTO;
		if (rc != 1) {
			/* Whole frames only are committed: this one was
			 * overwritten. What came before stays. */
			if (!t->warned)
				fprintf(stderr,
					"forktrace: warning: slot %u of the process table "
					"holds a frame that does not parse at byte %u; the "
					"rest of it is skipped\n",
					idx, at);
			t->warned = true;
			if (!e)
				return; /* nothing of it was read: it stays empty */
			e->broken = true;
			return;
		}
		if (!e) {
			e = calloc(1, sizeof(*e));
			if (!e)
				return;
			e->idx = idx;
			t->open[k] = e;
		}
		e->read = at + (uint32_t)f.size;
		if (t->salvage && m.ts > t->last_ts)
			t->last_ts = m.ts;
		if (proc_apply(t->pt, &e->pc, &m, t->salvage ? m.ts : proc_now_mono_ns()) < 0) {
			e->broken = true;
			return;
		}
		if (m.type == FT_MSG_HELLO)
			after_hello(t, &e->pc, &m, e);
		if (m.type == FT_MSG_EXIT)
			e->exited = true;
	}
}

static size_t find_open(const ptab *t, uint32_t idx)
{
	size_t lo = 0, hi = t->nopen;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->open_idx[mid] < idx)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < t->nopen && t->open_idx[lo] == idx ? lo : SIZE_MAX;
}

/* The slot's image is over for us: forget it (the array is compacted by
 * the next ptab_read). */
static void retire(ptab *t, ptab_entry *e, bool pages)
{
	size_t k = find_open(t, e->idx);

	if (pages)
		release_pages(t, e->idx);
	proc_conn_drop_fds(&e->pc);
	if (k != SIZE_MAX)
		t->open[k] = RETIRED;
	free(e);
}

/* The slot's image ended (or the run did): its connection-like state
 * closes as a connection's would, at the last time it was heard of. */
static void close_entry(ptab *t, ptab_entry *e, bool pages)
{
	if (e->pc.pe) {
		void **ref = proc_table_ref(e->pc.pe);

		if (*ref == e)
			*ref = NULL;
		proc_conn_closed(t->pt, &e->pc, proc_last_seen(e->pc.pe));
	}
	retire(t, e, pages);
}

/*
 * Slot idx begins with CONTINUE m: its image filled the slot m names and
 * goes on here. The entry moves over (after the full slot's last frames)
 * and the full slot's pages are freed. NULL when m names no open slot of
 * an image: then idx is skipped.
 */
/* Any process of the tree can write such slots, as many as the table
 * has: the warnings are limited (ptab_finish counts the rest). */
static say_limit continues_none;

static ptab_entry *continue_from(ptab *t, const wire_msg *m, uint32_t idx)
{
	size_t k = wire_has(m, FT_K_TABLE_SLOT) && m->table_slot < idx
			   ? find_open(t, (uint32_t)m->table_slot)
			   : SIZE_MAX;
	ptab_entry *e = k != SIZE_MAX ? t->open[k] : NULL;

	if (!e || e == RETIRED || !e->pc.pe) {
		if (say_limit_take(&continues_none, idx))
			fprintf(stderr,
				"forktrace: warning: slot %u of the process table "
				"continues no open slot; skipped\n",
				idx);
		return NULL;
	}
	read_slot(t, k);
	release_pages(t, e->idx);
	t->open[k] = RETIRED;
	e->idx = idx;
	e->read = 0;
	return e;
}

/*
 * A HELLO was applied for pc (a slot's or a connection's). If the process
 * had an open slot of an image before, that image is over: a new image
 * superseded it (exec), or it resumed on this connection. Its remaining
 * frames come first either way.
 */
static void after_hello(ptab *t, proc_conn *pc, const wire_msg *m, ptab_entry *self)
{
	if (!pc->pe)
		return;
	/* The image of the slot it names goes on here, whether or not a
	 * later image of the process (one a fork child exec'd) spoke first. */
	if ((m->flags & FT_HELLO_RESUMED) && wire_has(m, FT_K_TABLE_SLOT)) {
		size_t k = find_open(t, (uint32_t)m->table_slot);
		ptab_entry *from = k != SIZE_MAX ? t->open[k] : NULL;

		if (from && from != RETIRED && from != self && from->pc.pe == pc->pe &&
		    !proc_conn_current(pc)) {
			proc_conn_handover(&from->pc, pc);
			retire(t, from, true);
			return;
		}
	}
	/* A fork child's HELLO read after its exec'd image's speaks for an
	 * image before the current one: the current one's slot stays. */
	if (!proc_conn_current(pc))
		return;
	void **ref = proc_table_ref(pc->pe);
	ptab_entry *old = *ref;

	*ref = self;
	if (!old || old == self)
		return;
	size_t k = find_open(t, old->idx);
	if (k != SIZE_MAX)
		read_slot(t, k);
	if ((m->flags & FT_HELLO_RESUMED) && wire_has(m, FT_K_TABLE_SLOT) &&
	    m->table_slot == old->idx) {
		/* The same image goes on here: the connection takes over. */
		proc_conn_handover(&old->pc, pc);
		retire(t, old, true);
	} else {
		close_entry(t, old, true);
	}
}

/* Drops retired entries, keeping index order. */
static void compact(ptab *t)
{
	size_t j = 0;

	for (size_t i = 0; i < t->nopen; i++) {
		if (t->open[i] == RETIRED)
			continue;
		t->open_idx[j] = t->open_idx[i];
		t->open[j] = t->open[i];
		j++;
	}
	t->nopen = j;
}

void ptab_read(ptab *t)
{
	if (!t)
		return;
	/* The header is writable by every traced program: trust only our
	 * own count of what exists. */
	uint32_t claimed = __atomic_load_n(&t->hdr->claimed, __ATOMIC_ACQUIRE);
	uint32_t ready = t->ready;

	if (claimed > ready)
		claimed = ready;
	if (claimed > t->seen) {
		size_t need = t->nopen + (claimed - t->seen);

		if (need > t->open_cap) {
			size_t cap = t->open_cap, idx_cap = t->open_cap;

			if (vec_grow(&t->open_idx, &idx_cap, need, sizeof(*t->open_idx), 1024) <
				    0 ||
			    vec_grow(&t->open, &cap, need, sizeof(*t->open), 1024) < 0)
				return; /* try again next time */
			t->open_cap = cap;
		}
		for (uint32_t i = t->seen; i < claimed; i++) {
			t->open_idx[t->nopen] = i;
			t->open[t->nopen++] = NULL;
		}
		t->seen = claimed;
	}
	for (size_t k = 0; k < t->nopen; k++) {
		read_slot(t, k);
		ptab_entry *e = t->open[k];
		if (e == RETIRED)
			continue;
		/* Exited and waited for: nobody writes this slot again. */
		if (e && e->exited && e->pc.pe && proc_status_known(e->pc.pe))
			close_entry(t, e, true);
	}
	compact(t);
	release_flush(t);
	if (ready - claimed < PTAB_LOW)
		extend_ready(t, PTAB_STEP);
}

void ptab_fill(ptab *t)
{
	if (t)
		extend_ready(t, PTAB_STEP);
}

void ptab_before_hello(ptab *t, const wire_msg *m)
{
	/* The slot's HELLO must be known before the image resumes here. */
	if (t && (m->flags & FT_HELLO_RESUMED) && wire_has(m, FT_K_TABLE_SLOT))
		ptab_read(t);
}

void ptab_after_hello(ptab *t, proc_conn *pc, const wire_msg *m)
{
	if (t && pc->pe)
		after_hello(t, pc, m, NULL);
}

void ptab_finish(ptab *t)
{
	if (!t)
		return;
	ptab_read(t);
	for (size_t k = 0; k < t->nopen; k++) {
		ptab_entry *e = t->open[k];

		/* A daemon still running may write its slot: keep the pages. */
		if (e && e != RETIRED)
			close_entry(t, e, false);
	}
	compact(t);
	say_limit_end(&continues_none, "process table slots that continue no open slot", "slot");
}

void ptab_temp_paths(const ptab *t, const char **file, const char **link, const char **dir)
{
	*file = t && t->fd >= 0 ? t->file : "";
	*link = t ? t->link : "";
	*dir = t ? t->shmdir : "";
}

/*
 * Leftovers of runs whose collector died (item: a SIGKILLed forktrace
 * leaves its socket directory in TMPDIR and, off tmpfs, a table of
 * 4 MiB and more in /dev/shm, for good).
 */

/* Is name "forktrace-" and six more characters (mkdtemp's)? */
static bool stale_name(const char *name)
{
	return strncmp(name, "forktrace-", 10) == 0 && strlen(name) == 16;
}

/* Opens dir/name (a directory of this user that only it may write, not
 * a link), or -1. */
static int stale_open_dir(int dir, const char *name)
{
	struct stat st;
	int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd >= 0 && (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 022))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* The table open as fd: this user's, and the liveness word has no holder
 * (its collector died, or ended without removing it). died: the kernel
 * marked the death itself (FUTEX_OWNER_DIED). */
static bool stale_table(int fd, bool *died, struct ft_table_header *h)
{
	struct stat st;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    pread(fd, h, sizeof(*h), 0) != (ssize_t)sizeof(*h) || h->magic != FT_TABLE_MAGIC ||
	    h->version != FT_TABLE_VERSION || h->slot_size != FT_TABLE_SLOT_SIZE)
		return false;
	*died = (h->alive & 0x40000000u) != 0; /* FUTEX_OWNER_DIED */
	return (h->alive & FT_TABLE_ALIVE_TID_MASK) == 0;
}

/*
 * Appends every slot of the dead run's table that still holds frames to
 * the journal of its spill directory (named by the socket directory's
 * "spill" link; made, with the journal, if the run had not needed it
 * yet): they are all that is left of the processes that were running
 * when the collector died. Returns 0, or -1 when the journal cannot take
 * them (then the table stays).
 */
static int stale_keep(int tfd, const struct ft_table_header *h, int sockdir)
{
	char spill[PATH_MAX];
	ssize_t n = readlinkat(sockdir, "spill", spill, sizeof(spill) - 1);
	unsigned char slot[FT_TABLE_SLOT_SIZE];
	const struct ft_table_slot *s = (const void *)slot;
	uint32_t count = h->claimed < h->ready ? h->claimed : h->ready;
	struct stat st;
	int dfd = -1, jfd = -1, rc = 0;

	if (n <= 0)
		return 0; /* the run had no spill directory: nothing reads it */
	spill[n] = '\0';
	if (count > h->capacity)
		count = h->capacity;
	for (uint32_t i = 0; i < count && rc == 0; i++) {
		off_t off = (off_t)FT_TABLE_SLOTS_OFFSET + (off_t)i * FT_TABLE_SLOT_SIZE;
		struct ptab_jrec r = {PTAB_JOURNAL_MAGIC, i, 0};
		struct iovec v[2];

		if (pread(tfd, slot, sizeof(slot), off) != (ssize_t)sizeof(slot) || !s->committed)
			continue;
		if (jfd < 0) {
			/* The output's directory is gone: nobody will recover
			 * into it. */
			if (mkdir(spill, 0700) < 0 && errno != EEXIST)
				return errno == ENOENT ? 0 : -1;
			dfd = open(spill, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (dfd < 0 || fstat(dfd, &st) < 0 || st.st_uid != geteuid() ||
			    (st.st_mode & 077)) {
				if (dfd >= 0)
					close(dfd);
				return -1;
			}
			jfd = openat(dfd, SPILL_JOURNAL_NAME,
				     O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
			if (jfd < 0) {
				close(dfd);
				return -1;
			}
		}
		r.len = s->committed < sizeof(slot) - sizeof(*s)
				? s->committed
				: (uint32_t)(sizeof(slot) - sizeof(*s));
		v[0] = (struct iovec){&r, sizeof(r)};
		v[1] = (struct iovec){slot + sizeof(*s), r.len};
		if (writev(jfd, v, 2) != (ssize_t)(sizeof(r) + r.len))
			rc = -1;
	}
	if (jfd < 0) {
		/* Nothing left in it: only the link to it goes. */
		dfd = open(spill, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dfd >= 0 && fstat(dfd, &st) == 0 && st.st_uid == geteuid() &&
		    !(st.st_mode & 077))
			unlinkat(dfd, FT_TABLE_NAME, 0);
		if (dfd >= 0)
			close(dfd);
		return 0;
	}
	/* The journal has it all now: the link would name a table that is
	 * about to go. */
	if (rc == 0)
		unlinkat(dfd, FT_TABLE_NAME, 0);
	close(jfd);
	close(dfd);
	return rc;
}

/*
 * Does a process still map the table file at path (a process of the dead
 * run that goes on, writing into its slot)? Then its last frames are yet
 * to come: the table stays until it is gone. Reads /proc/PID/maps of the
 * processes this user may read: only when a dead run was found.
 */
static bool stale_in_use(const char *path)
{
	size_t plen = strlen(path);
	struct dirent *de;
	bool used = false;
	DIR *proc = opendir("/proc");

	while (proc && !used && (de = readdir(proc)) != NULL) {
		char maps[300], line[PATH_MAX + 256];
		FILE *f;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(maps, sizeof(maps), "/proc/%s/maps", de->d_name);
		f = fopen(maps, "re");
		while (f && !used && fgets(line, sizeof(line), f)) {
			char *p = strchr(line, '/');

			used = p && strncmp(p, path, plen) == 0 &&
			       (p[plen] == '\n' || p[plen] == ' ' || p[plen] == '\0');
		}
		if (f)
			fclose(f);
	}
	if (proc)
		closedir(proc);
	return used;
}

/* Removes the table file a socket directory's link names, with its
 * private /dev/shm directory, if it is one of ours. */
static void stale_remove_shm(const char *file)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(file, '/');

	if (strncmp(file, "/dev/shm/", 9) != 0 || !slash || strcmp(slash + 1, FT_TABLE_NAME) != 0 ||
	    (size_t)(slash - file) >= sizeof(dir))
		return;
	memcpy(dir, file, (size_t)(slash - file));
	dir[slash - file] = '\0';
	if (!stale_name(dir + 9))
		return;
	unlink(file);
	rmdir(dir);
}

/* One socket directory tmp/name: removed if its collector is provably
 * dead, after its table's live slots went to the run's journal. */
static bool stale_sockdir(int tmp, const char *tmpdir, const char *name)
{
	char sock[PATH_MAX], link[PATH_MAX];
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct ft_table_header h;
	bool died = false, dead;
	int d, s, tfd, err, terr;
	ssize_t n;

	d = stale_open_dir(tmp, name);
	if (d < 0)
		return false;
	/* Its table's liveness word has no holder (a live collector's
	 * holds its thread id: no need to go further)... */
	tfd = openat(d, FT_TABLE_NAME, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	terr = tfd < 0 ? errno : 0;
	dead = tfd >= 0 && stale_table(tfd, &died, &h);
	if (tfd >= 0 && !dead)
		goto keep;
	/* ... and its socket refuses connections: a live collector of any
	 * version listens. */
	if ((size_t)snprintf(sock, sizeof(sock), "%s/%s/collector.sock", tmpdir, name) >=
	    sizeof(sa.sun_path))
		goto keep;
	memcpy(sa.sun_path, sock, strlen(sock) + 1);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		goto keep;
	err = connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? errno : 0;
	close(s);
	if (err != ECONNREFUSED && err != ENOENT)
		goto keep;
	if (tfd < 0) {
		/* A run without a table (killed before it made one) holds
		 * nothing: taken once it is a minute old, a run starting now
		 * looks the same. */
		struct stat st;

		if (terr != ENOENT || fstat(d, &st) < 0 || time(NULL) - st.st_mtime < 60)
			goto keep;
	} else {
		char file[PATH_MAX];
		ssize_t fl = readlinkat(d, FT_TABLE_NAME, file, sizeof(file) - 1);

		if (fl > 0)
			file[fl] = '\0';
		else
			snprintf(file, sizeof(file), "%s/%s/%s", tmpdir, name, FT_TABLE_NAME);
		if (err != ECONNREFUSED || stale_in_use(file) || stale_keep(tfd, &h, d) < 0)
			goto keep;
	}
	if (tfd >= 0)
		close(tfd);
	tfd = -1;
	n = readlinkat(d, FT_TABLE_NAME, link, sizeof(link) - 1);
	if (n > 0) {
		link[n] = '\0';
		stale_remove_shm(link);
	}
	unlinkat(d, FT_TABLE_NAME, 0);
	unlinkat(d, "spill", 0);
	unlinkat(d, "collector.sock", 0);
	close(d);
	return unlinkat(tmp, name, AT_REMOVEDIR) == 0;
keep:
	if (tfd >= 0)
		close(tfd);
	close(d);
	return false;
}

/* A /dev/shm/forktrace-XXXXXX whose table the kernel marked: its
 * collector died. Taken only once its socket directory (named in the
 * header) is gone: the cleaning of that one, by a run with its TMPDIR,
 * saves the table's last frames first. */
static bool stale_shmdir(int shm, const char *name)
{
	char owner[FT_TABLE_OWNER_SIZE];
	struct ft_table_header h;
	struct stat st;
	bool died = false;
	int d = stale_open_dir(shm, name), tfd;

	if (d < 0)
		return false;
	tfd = openat(d, FT_TABLE_NAME, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	if (tfd < 0 || !stale_table(tfd, &died, &h) || !died ||
	    pread(tfd, owner, sizeof(owner), FT_TABLE_OWNER_OFFSET) != (ssize_t)sizeof(owner) ||
	    !memchr(owner, '\0', sizeof(owner)) || owner[0] != '/' || lstat(owner, &st) == 0 ||
	    errno != ENOENT) {
		if (tfd >= 0)
			close(tfd);
		close(d);
		return false;
	}
	close(tfd);
	snprintf(owner, sizeof(owner), "/dev/shm/%s/%s", name, FT_TABLE_NAME);
	if (stale_in_use(owner)) {
		close(d);
		return false;
	}
	unlinkat(d, FT_TABLE_NAME, 0);
	close(d);
	return unlinkat(shm, name, AT_REMOVEDIR) == 0;
}

size_t ptab_clean_stale(const char *tmpdir, const char *own)
{
	const char *own_name = own ? strrchr(own, '/') : NULL;
	size_t removed = 0;
	struct dirent *de;
	DIR *dir;

	own_name = own_name ? own_name + 1 : own ? own : "";
	dir = opendir(tmpdir);
	while (dir && (de = readdir(dir)) != NULL)
		if (stale_name(de->d_name) && strcmp(de->d_name, own_name) != 0 &&
		    (de->d_type == DT_DIR || de->d_type == DT_UNKNOWN))
			removed += stale_sockdir(dirfd(dir), tmpdir, de->d_name);
	if (dir)
		closedir(dir);
	dir = opendir("/dev/shm");
	while (dir && (de = readdir(dir)) != NULL)
		if (stale_name(de->d_name) && (de->d_type == DT_DIR || de->d_type == DT_UNKNOWN))
			removed += stale_shmdir(dirfd(dir), de->d_name);
	if (dir)
		closedir(dir);
	return removed;
}
