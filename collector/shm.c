/*
 * shm.c - the event buffers of one process image, as the collector sees
 * them (include/forktrace/wire.h, "Event buffers").
 *
 * The agent hands over each region's memfd once (FT_MSG_SHM). The
 * collector remembers, per slot, up to which stream offset it received
 * the slot's EVENTS frames; when the image ends, whatever a slot holds
 * beyond that is salvaged from the region: the records of a process
 * killed before it could send them, and of threads still running when
 * the process exited or exec'd.
 *
 * The regions belong to a process the collector does not trust: every
 * header field is checked, and the memory is read with pread, never
 * mapped, so a region that shrank or lies about its size cannot fault the
 * collector.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "vec.h"

/* Bounds on what an agent may announce (ours: 64 regions of 64 slots of
 * 512 KiB). */
#define SHM_MAX_REGIONS 64u
#define SHM_MAX_SLOTS 65536u
#define SHM_MAX_SLOT_SIZE (64u << 20)

typedef struct shm_region {
	int fd;
	uint32_t first, count;
	uint64_t slot_size;
} shm_region;

struct shm_image {
	int refs;
	shm_region regions[SHM_MAX_REGIONS];
	unsigned nregions;
	uint64_t *received; /* per slot: stream offset received so far */
	int64_t *last_tid;  /* per slot: the thread of its last frame */
	size_t nslots;
};

shm_image *shm_image_new(void)
{
	shm_image *si = calloc(1, sizeof(*si));

	if (si)
		si->refs = 1;
	return si;
}

void shm_image_ref(shm_image *si)
{
	si->refs++;
}

void shm_image_unref(shm_image *si)
{
	if (si == NULL || --si->refs > 0)
		return;
	for (unsigned i = 0; i < si->nregions; i++)
		close(si->regions[i].fd);
	free(si->received);
	free(si->last_tid);
	free(si);
}

/* Makes room for slot ids below n. */
static int shm_grow(shm_image *si, size_t n)
{
	size_t cap = si->nslots, last_tid_cap = si->nslots;

	if (vec_grow(&si->received, &cap, n, sizeof(*si->received), 64) < 0 ||
	    vec_grow(&si->last_tid, &last_tid_cap, n, sizeof(*si->last_tid), 64) < 0)
		return -ENOMEM;
	memset(si->received + si->nslots, 0, (cap - si->nslots) * sizeof(*si->received));
	memset(si->last_tid + si->nslots, 0, (cap - si->nslots) * sizeof(*si->last_tid));
	si->nslots = cap;
	return 0;
}

int shm_add_region(shm_image *si, int fd, uint64_t first, uint64_t count, uint64_t slot_size)
{
	struct stat st;
	shm_region *r;

	if (si->nregions == SHM_MAX_REGIONS || count == 0 || count > SHM_MAX_SLOTS ||
	    first > SHM_MAX_SLOTS - count || slot_size == 0 || slot_size > SHM_MAX_SLOT_SIZE ||
	    fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	if (shm_grow(si, (size_t)(first + count)) < 0) {
		close(fd);
		return -ENOMEM;
	}
	r = &si->regions[si->nregions++];
	r->fd = fd;
	r->first = (uint32_t)first;
	r->count = (uint32_t)count;
	r->slot_size = slot_size;
	return 0;
}

uint64_t shm_accept(shm_image *si, uint64_t slot, uint64_t offset, uint64_t len, int64_t tid)
{
	uint64_t skip = 0;

	if (slot >= SHM_MAX_SLOTS || shm_grow(si, (size_t)slot + 1) < 0)
		return 0;
	si->last_tid[slot] = tid;
	if (offset < si->received[slot])
		skip = si->received[slot] - offset < len ? si->received[slot] - offset : len;
	if (offset + len > si->received[slot])
		si->received[slot] = offset + len;
	return skip;
}

/* Reads n bytes at off, all or nothing. */
static bool shm_read(int fd, void *buf, size_t n, uint64_t off)
{
	unsigned char *p = buf;

	while (n) {
		ssize_t r = pread(fd, p, n, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		p += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	return true;
}

int shm_salvage(shm_image *si, int (*fn)(void *arg, int64_t tid, const void *data, size_t len),
		void *arg, uint64_t *salvaged)
{
	unsigned char *buf = NULL;
	size_t bufcap = 0;
	int rc = 0;

	*salvaged = 0;
	for (unsigned ri = 0; ri < si->nregions; ri++) {
		shm_region *r = &si->regions[ri];
		struct ft_shm_header h;

		if (!shm_read(r->fd, &h, sizeof(h), 0) || h.magic != FT_SHM_MAGIC ||
		    h.version != FT_SHM_VERSION || h.first_slot != r->first ||
		    h.count != r->count || h.slot_size != r->slot_size ||
		    h.data_offset <
			    FT_SHM_SLOTS_OFFSET + (uint64_t)h.count * FT_SHM_SLOT_HEADER_SIZE)
			continue;
		for (uint32_t i = 0; i < r->count; i++) {
			uint64_t g = (uint64_t)r->first + i;
			struct ft_shm_slot s;
			uint64_t from, n;

			if (!shm_read(r->fd, &s, sizeof(s),
				      FT_SHM_SLOTS_OFFSET + (uint64_t)i * FT_SHM_SLOT_HEADER_SIZE))
				break;
			from = si->received[g] > s.base ? si->received[g] : s.base;
			if (s.head <= from || s.head - s.base > r->slot_size)
				continue;
			n = s.head - from;
			if (n > bufcap) {
				unsigned char *nb = realloc(buf, (size_t)n);

				if (nb == NULL) {
					rc = -ENOMEM;
					goto out;
				}
				buf = nb;
				bufcap = (size_t)n;
			}
			if (!shm_read(r->fd, buf, (size_t)n,
				      h.data_offset + (uint64_t)i * r->slot_size + (from - s.base)))
				continue;
			rc = fn(arg, s.tid ? s.tid : si->last_tid[g], buf, (size_t)n);
			if (rc < 0)
				goto out;
			si->received[g] = s.head;
			*salvaged += n;
		}
	}
out:
	free(buf);
	return rc;
}
