/*
 * In-process events: the per-thread buffers, the -finstrument-functions
 * hooks and the instrumentation API (include/forktrace.h).
 *
 * Each thread records into a slot of a shared-memory region (wire.h,
 * "Event buffers"): a memfd this agent creates, maps and hands to the
 * collector, so that what a thread recorded survives the process being
 * killed. Recording is a handful of stores into the slot and a release
 * store of the slot's head: no lock, no system call, no allocation. A
 * thread sends its slot's records as one EVENTS frame when the slot is
 * full, when the flush interval has passed (checked with the time stamp
 * the event has taken anyway), and before fork, exec, posix_spawn,
 * system, popen, its own end and exit. What other threads have not sent
 * when the process ends or execs, the collector salvages from the region.
 *
 * Policy when the collector is slower than a thread: the thread blocks in
 * its send (the socket applies back-pressure); nothing is dropped. Events
 * are dropped, and counted in a LOST record, only when they cannot be
 * recorded at all: a signal handler that records while the same thread is
 * in the middle of a record, or a process whose buffers cannot be created.
 *
 * Lock order: the send lock only, and only on the slow paths (slot
 * allocation, flush).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define FT__ABI_ONLY
#include "forktrace.h"
#include "internal.h"

/* Data bytes per thread slot: a 512 KiB send costs ~50 us and carries
 * ~30,000 function calls, so the send is a few percent of recording. */
#define AGENT_SLOT_SIZE (512u * 1024u)
#define AGENT_REGION_SLOTS 64u
#define AGENT_MAX_REGIONS 64u
/* Slot data starts on the page after the header and the slot headers. */
#define AGENT_DATA_OFFSET                                                                          \
	((FT_SHM_SLOTS_OFFSET + AGENT_REGION_SLOTS * FT_SHM_SLOT_HEADER_SIZE + 4095u) & ~4095u)
/* The longest record of fixed size (FUNC_ENTER, 16 bytes) after a TIME
 * record (11 bytes), rounded up. */
#define AGENT_EV_RESERVE 32u
/* Names longer than this are cut (a name is a label, not a payload). */
#define AGENT_EV_NAME_MAX 1024u
/* Interval flush: whatever a thread recorded is sent within ~100 ms. */
#define AGENT_FLUSH_NS 100000000ull

struct agent_tev {
	unsigned char *pos;   /* where the next record goes; NULL: no slot */
	unsigned char *limit; /* data end minus AGENT_EV_RESERVE */
	unsigned char *data;  /* the slot's data */
	struct ft_shm_slot *slot;
	uint64_t last_tsc;  /* time of the previous record; 0: write TIME */
	uint64_t flush_tsc; /* interval flush due at this counter value */
	uint64_t nrec;      /* records in the slot not yet sent */
	uint32_t slot_id;
	int busy; /* inside a record (a signal handler must not nest) */
	int off;  /* this thread cannot record (no slot to be had) */
};

static AGENT_TLS struct agent_tev agent_t_ev;

struct agent_region {
	unsigned char *base;
	size_t len;
	uint32_t first_slot;
};

/* Regions of this process image, under the send lock. */
AGENT_DATA static struct agent_region agent_regions[AGENT_MAX_REGIONS];
static unsigned agent_nregions;
/* -finstrument-functions hooks record (FORKTRACE_FUNCTIONS != "0"). */
static int agent_ev_functions = 1;
/* Counter ticks per interval flush, refined at each flush. */
static uint64_t agent_flush_ticks = 300000000ull;
static uint64_t agent_calib_tsc, agent_calib_ns;
/* dl_iterate_phdr's count of loaded objects when the modules were last
 * sent; 0: never sent in this image. */
static unsigned long long agent_mod_adds;

static inline uint64_t agent_tsc(void)
{
	return __builtin_ia32_rdtsc();
}

static inline void agent_put_be32(unsigned char *p, uint32_t v)
{
	v = __builtin_bswap32(v);
	memcpy(p, &v, 4);
}

static inline void agent_put_be64(unsigned char *p, uint64_t v)
{
	v = __builtin_bswap64(v);
	memcpy(p, &v, 8);
}

/* Publish the slot's head past the records written so far: a release
 * store, so the collector never salvages a record half-written. */
static inline void agent_ev_publish(struct agent_tev *e)
{
	__atomic_store_n(&e->slot->head,
			 __atomic_load_n(&e->slot->base, __ATOMIC_RELAXED) +
				 (uint64_t)(e->pos - e->data),
			 __ATOMIC_RELEASE);
}

/* Write TIME when the delta to the previous record does not fit 32 bits
 * (or the chunk is new), and return the delta to put in the record. */
static inline uint32_t agent_ev_dt(struct agent_tev *e, uint64_t tsc)
{
	uint64_t dt = tsc - e->last_tsc;

	if (__builtin_expect(dt > 0xffffffffull, 0)) {
		unsigned char *p = e->pos;

		p[0] = 0x92;
		p[1] = FT_EV_TIME;
		p[2] = 0xcf;
		agent_put_be64(p + 3, tsc);
		e->pos = p + 11;
		dt = 0;
	}
	e->last_tsc = tsc;
	return (uint32_t)dt;
}

/* Put DT as a msgpack uint: one byte (a positive fixint) for the gaps of a
 * busy thread, uint32 otherwise. A function call then takes 15 bytes
 * instead of 23, a third less for the socket and the collector to copy
 * (the collector's CPU time per call drops from ~10 to ~6 ns), for one
 * well-predicted branch. */
static inline unsigned char *agent_ev_put_dt(unsigned char *p, uint32_t dt)
{
	if (__builtin_expect(dt < 128, 1)) {
		p[0] = (unsigned char)dt;
		return p + 1;
	}
	p[0] = 0xce;
	agent_put_be32(p + 1, dt);
	return p + 5;
}

static void agent_ev_flush(struct agent_tev *e);
static bool agent_ev_acquire(struct agent_tev *e);

/* May this thread record now? Outside the agent, not in a vfork child,
 * not nested in its own record, and with a slot that has room (else the
 * slow path gets one or flushes). */
static inline bool agent_ev_enter(struct agent_tev *e)
{
	if (__builtin_expect(e->busy | agent_t_guard | agent_t_in_vfork |
				     (__atomic_load_n(&agent_g.fork_tid, __ATOMIC_RELAXED) != 0),
			     0)) {
		if (e->busy) {
			agent_count_lost();
			return false;
		}
		/* Another thread's fork does not stop this one. */
		if (agent_nested() || agent_t_in_vfork)
			return false;
	}
	if (__builtin_expect(e->pos >= e->limit, 0))
		return agent_ev_acquire(e);
	return true;
}

/* After a record: publish it, and flush when the interval has passed. */
static inline void agent_ev_leave(struct agent_tev *e, uint64_t tsc)
{
	e->nrec++;
	agent_ev_publish(e);
	if (__builtin_expect(tsc >= e->flush_tsc, 0))
		agent_ev_flush(e);
	e->busy = 0;
}

/* The hooks GCC and clang call on entry to and exit from every function
 * of code built with -finstrument-functions (glibc has no-op ones; the
 * preloaded agent's come first). */
void __cyg_profile_func_enter(void *fn, void *site);
void __cyg_profile_func_exit(void *fn, void *site);

AGENT_EXPORT void __cyg_profile_func_enter(void *fn, void *site)
{
	struct agent_tev *e = &agent_t_ev;
	unsigned char *p;
	uint64_t tsc;
	uint32_t dt;

	(void)site;
	if (__builtin_expect(!agent_ev_functions, 0) || !agent_ev_enter(e))
		return;
	e->busy = 1;
	tsc = agent_tsc();
	dt = agent_ev_dt(e, tsc);
	p = e->pos;
	p[0] = 0x93;
	p[1] = FT_EV_FUNC_ENTER;
	p = agent_ev_put_dt(p + 2, dt);
	p[0] = 0xcf;
	agent_put_be64(p + 1, (uint64_t)(uintptr_t)fn);
	e->pos = p + 9;
	agent_ev_leave(e, tsc);
}

AGENT_EXPORT void __cyg_profile_func_exit(void *fn, void *site)
{
	struct agent_tev *e = &agent_t_ev;
	unsigned char *p;
	uint64_t tsc;
	uint32_t dt;

	(void)fn;
	(void)site;
	if (__builtin_expect(!agent_ev_functions, 0) || !agent_ev_enter(e))
		return;
	e->busy = 1;
	tsc = agent_tsc();
	dt = agent_ev_dt(e, tsc);
	p = e->pos;
	p[0] = 0x92;
	p[1] = FT_EV_FUNC_EXIT;
	e->pos = agent_ev_put_dt(p + 2, dt);
	agent_ev_leave(e, tsc);
}

/* A record of type with a name and (counter) a value. The slot must have
 * room for the whole record: flush first when it does not. */
static void agent_ev_named(unsigned type, const char *name, bool has_value, double value)
{
	struct agent_tev *e = &agent_t_ev;
	size_t n = name ? strnlen(name, AGENT_EV_NAME_MAX) : 0;
	size_t need = 11 + 7 + 5 + n + 9;
	unsigned char *p;
	uint64_t tsc, bits;
	uint32_t dt;

	if (!agent_ev_enter(e))
		return;
	if (e->pos + need > e->data + AGENT_SLOT_SIZE) {
		e->busy = 1;
		agent_ev_flush(e);
		e->busy = 0;
		if (e->pos + need > e->data + AGENT_SLOT_SIZE) {
			agent_count_lost();
			return;
		}
	}
	e->busy = 1;
	tsc = agent_tsc();
	dt = agent_ev_dt(e, tsc);
	p = e->pos;
	*p++ = (unsigned char)(0x90 | (has_value ? 4 : 3));
	*p++ = (unsigned char)type;
	p = agent_ev_put_dt(p, dt);
	if (n < 32) {
		*p++ = (unsigned char)(0xa0 | n);
	} else if (n < 256) {
		*p++ = 0xd9;
		*p++ = (unsigned char)n;
	} else {
		*p++ = 0xda;
		*p++ = (unsigned char)(n >> 8);
		*p++ = (unsigned char)n;
	}
	memcpy(p, name ? name : "", n);
	p += n;
	if (has_value) {
		*p++ = 0xcb;
		memcpy(&bits, &value, 8);
		agent_put_be64(p, bits);
		p += 8;
	}
	e->pos = p;
	agent_ev_leave(e, tsc);
}

static void agent_ev_plain(unsigned type)
{
	struct agent_tev *e = &agent_t_ev;
	unsigned char *p;
	uint64_t tsc;
	uint32_t dt;

	if (!agent_ev_enter(e))
		return;
	e->busy = 1;
	tsc = agent_tsc();
	dt = agent_ev_dt(e, tsc);
	p = e->pos;
	p[0] = 0x92;
	p[1] = (unsigned char)type;
	e->pos = agent_ev_put_dt(p + 2, dt);
	agent_ev_leave(e, tsc);
}

/* ---- the instrumentation API (include/forktrace.h) ------------------- */

static void agent_api_region_begin(const char *name)
{
	agent_ev_named(FT_EV_REGION_BEGIN, name, false, 0);
}

static void agent_api_region_end(void)
{
	agent_ev_plain(FT_EV_REGION_END);
}

static void agent_api_instant(const char *name)
{
	agent_ev_named(FT_EV_INSTANT, name, false, 0);
}

static void agent_api_counter(const char *name, double value)
{
	agent_ev_named(FT_EV_COUNTER, name, true, value);
}

/* A thread name is rare and belongs to the thread, not to its stream:
 * it goes out at once as THREAD_NAME. */
static void agent_api_thread_name(const char *name)
{
	char buf[AGENT_EV_NAME_MAX + 1];
	size_t n;

	if (agent_bypass() || !name)
		return;
	n = strnlen(name, AGENT_EV_NAME_MAX);
	memcpy(buf, name, n);
	buf[n] = '\0';
	AGENT_EMIT(enc_thread_name(agent_buf, AGENT_BUF_SIZE, agent_now(), agent_tid(), buf));
}

/* The table include/forktrace.h looks up (version 1). */
static const struct ft__api agent_api = {
	1,
	sizeof(struct ft__api),
	agent_api_region_begin,
	agent_api_region_end,
	agent_api_instant,
	agent_api_counter,
	agent_api_thread_name,
};

AGENT_EXPORT const struct ft__api *ft__api_get(unsigned version)
{
	return version == 1 ? &agent_api : NULL;
}

/* ---- slow paths ------------------------------------------------------- */

struct agent_mod_ctx {
	unsigned char *buf;
	size_t len;
	size_t cap;
	unsigned index;
};

/* dl_iterate_phdr callback: encode one MODULE frame per loaded object.
 * The first object is the executable, which has no name there: it is
 * named by /proc/self/exe. Objects without a name (the vDSO) are left
 * out. */
static int agent_mod_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct agent_mod_ctx *m = arg;
	uint64_t lo = UINT64_MAX, hi = 0;
	const char *path = info->dlpi_name;
	ssize_t n;
	int i;

	(void)size;
	if ((!path || !*path) && m->index == 0)
		path = agent_g.exe;
	m->index++;
	if (!path || !*path)
		return 0;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type != PT_LOAD)
			continue;
		if (info->dlpi_addr + ph->p_vaddr < lo)
			lo = info->dlpi_addr + ph->p_vaddr;
		if (info->dlpi_addr + ph->p_vaddr + ph->p_memsz > hi)
			hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
	}
	if (hi <= lo)
		return 0;
	n = enc_module(m->buf + m->len, m->cap - m->len, agent_now(), agent_tid(), path,
		       info->dlpi_addr, lo, hi);
	if (n < 0)
		return 1; /* the rest does not fit: sent next time */
	m->len += (size_t)n;
	return 0;
}

static int agent_adds_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	*(unsigned long long *)arg = info->dlpi_adds;
	return 1;
}

/* Send the module map when objects were loaded since it was last sent
 * (the first time, and after a dlopen); the collector ignores modules it
 * knows. dlopen itself is not hooked: a wrapper would change which object
 * is "the caller", and with it the library search path. Caller holds the
 * send lock. */
static void agent_ev_modules_locked(void)
{
	unsigned long long adds = 0;
	struct agent_mod_ctx m = {agent_buf, 0, AGENT_BUF_SIZE, 0};

	dl_iterate_phdr(agent_adds_cb, &adds);
	if (adds == agent_mod_adds)
		return;
	dl_iterate_phdr(agent_mod_cb, &m);
	agent_mod_adds = adds;
	if (m.len)
		agent_write_locked(agent_buf, (ssize_t)m.len);
}

/*
 * A library about to be unloaded takes its symbols with it: the module map
 * goes out first (if it changed since it was last sent), so that the
 * functions the library recorded still get their names.
 */
AGENT_EXPORT int dlclose(void *handle)
{
	agent_dlclose_fn f = AGENT_REAL(dlclose);

	if (!agent_bypass() && __atomic_load_n(&agent_nregions, __ATOMIC_RELAXED)) {
		agent_t_guard++;
		agent_lock();
		agent_ev_modules_locked();
		agent_unlock();
		agent_t_guard--;
	}
	return f ? f(handle) : -1;
}

/* Create a region of slots, map it, and hand its memfd to the collector.
 * Caller holds the send lock. Returns 0 or -errno. */
static int agent_region_new(void)
{
	size_t data_off = AGENT_DATA_OFFSET;
	size_t len = data_off + (size_t)AGENT_REGION_SLOTS * AGENT_SLOT_SIZE;
	struct agent_region *r;
	struct ft_shm_header *h;
	struct iovec iov;
	unsigned char frame[128];
	uint64_t tsc, ns;
	ssize_t n;
	void *base;
	int fd;

	if (agent_nregions == AGENT_MAX_REGIONS)
		return -ENOSPC;
	fd = (int)agent_syscall(SYS_memfd_create, "forktrace-events", MFD_CLOEXEC);
	if (fd < 0)
		return fd;
	if (agent_sys_ftruncate(fd, (off_t)len) < 0)
		goto fail_fd;
	base = agent_sys_mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
	if (base == MAP_FAILED)
		goto fail_fd;
	/* A fork child must not write into the parent's buffers (it gets
	 * regions of its own): it does not inherit the mapping at all. */
	agent_sys_madvise(base, len, MADV_DONTFORK);
	h = base;
	h->magic = FT_SHM_MAGIC;
	h->version = FT_SHM_VERSION;
	h->first_slot = agent_nregions * AGENT_REGION_SLOTS;
	h->count = AGENT_REGION_SLOTS;
	h->slot_size = AGENT_SLOT_SIZE;
	h->data_offset = data_off;
	if (agent_nregions == 0)
		agent_ev_modules_locked();
	ft_wire_clock_pair(4, &tsc, &ns);
	n = enc_shm(frame, sizeof(frame), ns, agent_tid(), h->first_slot, h->count, h->slot_size,
		    tsc);
	iov.iov_base = frame;
	iov.iov_len = n > 0 ? (size_t)n : 0;
	if (agent_writev_locked(&iov, 1, n, fd, 0) < 0) {
		agent_sys_munmap(base, len);
		goto fail_fd;
	}
	/* The collector has its own reference now, and the mapping keeps the
	 * memory: no fd of ours for the program to trip over. */
	agent_sys_close(fd);
	r = &agent_regions[agent_nregions++];
	r->base = base;
	r->len = len;
	r->first_slot = h->first_slot;
	return 0;

fail_fd:
	agent_sys_close(fd);
	return -EIO;
}

/* Claim a free slot for the calling thread. Caller holds the send lock. */
static bool agent_slot_claim(struct agent_tev *e)
{
	pid_t tid = agent_tid();
	unsigned r, i;

	for (r = 0;; r++) {
		if (r == agent_nregions && agent_region_new() < 0)
			return false;
		for (i = 0; i < AGENT_REGION_SLOTS; i++) {
			unsigned char *base = agent_regions[r].base;
			struct ft_shm_slot *s =
				(struct ft_shm_slot *)(base + FT_SHM_SLOTS_OFFSET +
						       (size_t)i * FT_SHM_SLOT_HEADER_SIZE);
			int32_t zero = 0;

			if (!__atomic_compare_exchange_n(&s->tid, &zero, tid, false,
							 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
				continue;
			/* The stream goes on where the slot's last owner left
			 * it (everything it recorded was sent). */
			__atomic_store_n(&s->base, __atomic_load_n(&s->head, __ATOMIC_RELAXED),
					 __ATOMIC_RELEASE);
			e->slot = s;
			e->slot_id = agent_regions[r].first_slot + i;
			e->data = base + AGENT_DATA_OFFSET + (size_t)i * AGENT_SLOT_SIZE;
			e->pos = e->data;
			e->limit = e->data + AGENT_SLOT_SIZE - AGENT_EV_RESERVE;
			/* Fault the first page in now, not between the time
			 * stamp of the first record and its bytes. */
			__atomic_store_n(e->data, 0, __ATOMIC_RELAXED);
			e->last_tsc = 0;
			e->nrec = 0;
			e->flush_tsc = agent_tsc() + agent_flush_ticks;
			return true;
		}
	}
}

/* Send the slot's unsent records as one EVENTS frame, with a calibration
 * pair. Caller holds the send lock and e->busy is set (or e is not in
 * use). */
static void agent_ev_send_locked(struct agent_tev *e)
{
	unsigned char head[96];
	struct iovec iov[2];
	uint64_t t0, ns, base;
	size_t len;
	ssize_t n;

	if (!e->pos || e->pos == e->data)
		return;
	len = (size_t)(e->pos - e->data);
	agent_ev_modules_locked();
	ft_wire_clock_pair(4, &t0, &ns);
	base = __atomic_load_n(&e->slot->base, __ATOMIC_RELAXED);
	n = enc_events_head(head, sizeof(head), ns, agent_tid(), e->slot_id, base, t0,
			    (uint32_t)len);
	iov[0].iov_base = head;
	iov[0].iov_len = n > 0 ? (size_t)n : 0;
	iov[1].iov_base = e->data;
	iov[1].iov_len = len;
	/* Sent or counted lost: the slot starts over either way (a buffer
	 * that cannot be sent must not stop the program). */
	(void)agent_writev_locked(iov, 2, n < 0 ? n : (ssize_t)(iov[0].iov_len + len), -1, e->nrec);
	__atomic_store_n(&e->slot->base, base + len, __ATOMIC_RELEASE);
	e->pos = e->data;
	e->last_tsc = 0;
	e->nrec = 0;
	if (agent_calib_ns && ns > agent_calib_ns + 1000000 && t0 > agent_calib_tsc)
		agent_flush_ticks = (uint64_t)((double)(t0 - agent_calib_tsc) /
					       (double)(ns - agent_calib_ns) * AGENT_FLUSH_NS);
	else if (!agent_calib_ns) {
		agent_calib_ns = ns;
		agent_calib_tsc = t0;
	}
	e->flush_tsc = t0 + agent_flush_ticks;
}

/* Send e's records under the send lock: the slot is full, the interval
 * passed, or fork, exec or exit is next. The caller has set e->busy. */
static void agent_ev_flush(struct agent_tev *e)
{
	if (!__atomic_load_n(&agent_g.active, __ATOMIC_RELAXED))
		return;
	agent_t_guard++;
	agent_lock();
	agent_ev_send_locked(e);
	agent_unlock();
	agent_t_guard--;
}

/* No room (or no slot yet): get a slot, or flush the full one. */
static bool agent_ev_acquire(struct agent_tev *e)
{
	bool ok;

	if (!__atomic_load_n(&agent_g.active, __ATOMIC_RELAXED))
		return false;
	if (e->off) {
		agent_count_lost();
		return false;
	}
	e->busy = 1;
	agent_t_guard++;
	agent_lock();
	agent_g.ev_used = 1;
	if (!e->pos) {
		ok = agent_slot_claim(e);
		if (!ok)
			e->off = 1;
	} else {
		agent_ev_send_locked(e);
		ok = true;
	}
	agent_unlock();
	agent_t_guard--;
	e->busy = 0;
	if (!ok)
		agent_count_lost();
	return ok;
}

void agent_ev_flush_self(void)
{
	struct agent_tev *e = &agent_t_ev;

	if (!e->pos || e->pos == e->data || e->busy || agent_t_in_vfork)
		return;
	e->busy = 1;
	agent_ev_flush(e);
	e->busy = 0;
}

void agent_ev_flush_self_locked(void)
{
	struct agent_tev *e = &agent_t_ev;

	if (!e->pos || e->pos == e->data || e->busy)
		return;
	e->busy = 1;
	agent_ev_send_locked(e);
	e->busy = 0;
}

void agent_ev_thread_end(void)
{
	struct agent_tev *e = &agent_t_ev;

	if (!e->slot || agent_t_in_vfork)
		return;
	agent_ev_flush_self();
	e->busy = 1;
	e->pos = e->limit = e->data = NULL;
	__atomic_store_n(&e->slot->tid, 0, __ATOMIC_RELEASE);
	e->slot = NULL;
	e->busy = 0;
}

void agent_ev_fork_child(void)
{
	struct agent_tev *e = &agent_t_ev;

	if (!agent_g.ev_used)
		return; /* nothing recorded, nothing to reset (agent_fork_child) */
	agent_g.ev_used = 0;
	/* The regions were not inherited (MADV_DONTFORK): what the parent
	 * recorded is the parent's to send. */
	memset(e, 0, sizeof(*e));
	agent_nregions = 0;
	agent_mod_adds = 0;
	agent_calib_ns = 0;
}

void agent_ev_init(const char *functions)
{
	if (functions && functions[0] == '0' && functions[1] == '\0')
		agent_ev_functions = 0;
}
