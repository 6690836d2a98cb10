/*
 * exectarget.c - will the image an exec starts load the agent?
 *
 * A fork child that has not spoken yet skips announcing its exec when the
 * new image will introduce itself: a dynamically linked ELF of our class,
 * not setuid/setgid (the loader ignores LD_PRELOAD paths there), or a
 * script (its interpreter is almost always dynamic). Anything else - a
 * static binary, a setuid program, a file we cannot read - is announced
 * by the caller's EXEC record before the exec, so the trace still names
 * the image the agent cannot enter.
 *
 * For a dynamic ELF it also names the file the way the kernel will
 * (/proc/<pid>/exe): the new image is handed that name and need not read
 * /proc, which costs a new process 5-9 us of kernel time per file.
 *
 * Runs in fork children, possibly of multithreaded programs: only raw
 * system calls (open, fstat, pread, access, readlink, getcwd, close) and
 * stack memory. They leave errno alone (agent/sys.h): a fork child that
 * touched it would fault in one more page of libc for it.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

extern char **environ;

/* image_kind takes ELFCLASS64 files only: an ILP32 agent (x32) knows no
 * machine, and announces every exec. */
#if AGENT_X86_64
#define AGENT_ELF_MACHINE EM_X86_64
#elif defined(__aarch64__) && defined(__LP64__)
#define AGENT_ELF_MACHINE EM_AARCH64
#else
#define AGENT_ELF_MACHINE EM_NONE /* unknown: always announce the exec */
#endif

/* Symbolic links followed in one path at most, as the kernel's limit. */
#define AGENT_LINKS_MAX 40

/* What exec of a file starts, as far as the agent is concerned. */
enum agent_image {
	AGENT_IMAGE_OTHER,  /* static, setuid, not ours: the agent cannot enter it */
	AGENT_IMAGE_ELF,    /* a dynamic ELF of our class: loads the agent */
	AGENT_IMAGE_SCRIPT, /* "#!": its interpreter (almost always dynamic) does */
};

/*
 * realpath(3) without malloc (glibc's may allocate, and this runs in fork
 * children of multithreaded programs): the absolute path of path with
 * every symbolic link, "." and ".." resolved, into out (cap bytes), as
 * the kernel names an exec'd file in /proc/<pid>/exe. A relative path is
 * taken from the current directory. Each component is tried with readlink
 * (EINVAL: not a link); ".." drops the last resolved component, which
 * never is a link.
 *
 * out is the only buffer (a fork child pays a page fault for each stack
 * page it writes): the resolved part grows from its start, the unresolved
 * rest sits at its end, and a link's target is read into the gap between
 * and moved to join the rest. path may be out itself: it is moved to the
 * end first. Returns 0 or -errno (out is then ""). Signal-safe.
 */
static int agent_resolve_path(const char *path, char *out, size_t cap)
{
	size_t len = strlen(path), rest, olen = 0;
	int links = 0, err;

	if (cap < 2)
		return -ENAMETOOLONG;
	if (len == 0 || len + 2 > cap) {
		err = len ? -ENAMETOOLONG : -ENOENT;
		goto fail;
	}
	rest = cap - 1 - len;
	memmove(out + rest, path, len + 1);
	if (out[rest] != '/') {
		/* glibc fails with ENOENT for a directory outside our root;
		 * the check is for others that return "(unreachable)/...". */
		if (agent_syscall(SYS_getcwd, out, rest) <= 0 || out[0] != '/') {
			err = -ENOENT;
			goto fail;
		}
		olen = strlen(out);
		if (olen == 1)
			olen = 0; /* the root: "" as below */
	}
	/* out[0..olen) is resolved, link-free and without a trailing '/';
	 * "" is the root. out[rest..cap) is the rest, '\0'-terminated. */
	for (;;) {
		const char *p = out + rest, *end;
		size_t n, gap;
		ssize_t r;

		while (*p == '/')
			p++;
		if (!*p)
			break;
		end = strchrnul(p, '/');
		n = (size_t)(end - p);
		rest = (size_t)(end - out);
		if (n == 1 && p[0] == '.')
			continue;
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			while (olen && out[olen - 1] != '/')
				olen--;
			if (olen)
				olen--;
			continue;
		}
		/* "/name", its '\0' and a gap of one byte or more must fit
		 * before the rest. */
		if (olen + 1 + n + 1 >= rest) {
			err = -ENAMETOOLONG;
			goto fail;
		}
		memmove(out + olen + 1, p, n);
		out[olen] = '/';
		out[olen + 1 + n] = '\0';
		gap = rest - (olen + 1 + n + 1);
		r = agent_syscall(SYS_readlinkat, AT_FDCWD, out, out + olen + 1 + n + 1, gap);
		if (r < 0) {
			if (r != -EINVAL) {
				err = (int)r;
				goto fail;
			}
			olen += 1 + n; /* not a link */
			continue;
		}
		if (++links > AGENT_LINKS_MAX) {
			err = -ELOOP;
			goto fail;
		}
		/* r == gap: maybe cut short. */
		if (r == 0 || (size_t)r >= gap) {
			err = r ? -ENAMETOOLONG : -ENOENT;
			goto fail;
		}
		memmove(out + rest - (size_t)r, out + olen + 1 + n + 1, (size_t)r);
		rest -= (size_t)r;
		if (out[rest] == '/')
			olen = 0; /* an absolute target starts again at the root */
	}
	if (olen == 0)
		out[olen++] = '/'; /* the root itself */
	out[olen] = '\0';
	return 0;
fail:
	out[0] = '\0';
	return err;
}

/* The kernel reads a script's "#!" line from this many first bytes. */
#define AGENT_INTERP_MAX 256

/* Does the file behind fd load an ELF interpreter (and so LD_PRELOAD)?
 * *st gets the file's status. For a script, interp (AGENT_INTERP_MAX
 * bytes) gets its interpreter's path; a "#!" line the kernel would not
 * take, or one too long for it, makes the file OTHER. */
static enum agent_image file_kind(int fd, struct stat *st, char *interp)
{
	/* The ELF header and, in the same read, the program headers that
	 * follow it in almost every file: one system call, not two. Others
	 * are read into the same buffer, 16 at a time. One buffer: every
	 * stack page a fork child writes costs it a page fault. */
	union {
		unsigned char b[sizeof(Elf64_Ehdr) + 16 * sizeof(Elf64_Phdr)];
		Elf64_Ehdr eh;
	} u;

	if (agent_syscall(SYS_fstat, fd, st) < 0 || !S_ISREG(st->st_mode) ||
	    (st->st_mode & (S_ISUID | S_ISGID)))
		return AGENT_IMAGE_OTHER;
	long n = agent_syscall(SYS_pread64, fd, u.b, sizeof(u.b), 0);
	if (n >= 2 && u.b[0] == '#' && u.b[1] == '!') {
		/* As fs/binfmt_script.c: blanks, then the name up to a blank,
		 * a newline or the end of what it reads. */
		long lim = n < AGENT_INTERP_MAX ? n : AGENT_INTERP_MAX, i = 2, j;

		while (i < lim && (u.b[i] == ' ' || u.b[i] == '\t'))
			i++;
		for (j = i;
		     j < lim && u.b[j] != ' ' && u.b[j] != '\t' && u.b[j] != '\n' && u.b[j] != '\0';
		     j++)
			;
		if (j == i || j == AGENT_INTERP_MAX)
			return AGENT_IMAGE_OTHER;
		memcpy(interp, u.b + i, (size_t)(j - i));
		interp[j - i] = '\0';
		return AGENT_IMAGE_SCRIPT;
	}
	if (n < (long)sizeof(Elf64_Ehdr) || memcmp(u.b, ELFMAG, SELFMAG) != 0 ||
	    u.b[EI_CLASS] != ELFCLASS64)
		return AGENT_IMAGE_OTHER;
	if (u.eh.e_machine != AGENT_ELF_MACHINE || u.eh.e_phentsize != sizeof(Elf64_Phdr) ||
	    u.eh.e_phnum == 0 || u.eh.e_phnum == PN_XNUM)
		return AGENT_IMAGE_OTHER;
	uint64_t phoff = u.eh.e_phoff;
	unsigned phnum = u.eh.e_phnum;
	for (unsigned i = 0; i < phnum; i += 16) {
		unsigned k = phnum - i < 16 ? phnum - i : 16;
		uint64_t off = phoff + (uint64_t)i * sizeof(Elf64_Phdr);
		size_t len = k * sizeof(Elf64_Phdr);
		const unsigned char *ph = u.b + off;

		if (off > (uint64_t)n || len > (uint64_t)n - off) {
			if (agent_syscall(SYS_pread64, fd, u.b, len, off) != (long)len)
				return AGENT_IMAGE_OTHER;
			ph = u.b;
			n = 0; /* u.b no longer holds the file's start */
		}
		for (unsigned j = 0; j < k; j++) {
			uint32_t type;

			memcpy(&type, ph + j * sizeof(Elf64_Phdr) + offsetof(Elf64_Phdr, p_type),
			       sizeof(type));
			if (type == PT_INTERP)
				return AGENT_IMAGE_ELF;
		}
	}
	return AGENT_IMAGE_OTHER;
}

/*
 * What exec of the file behind fd starts (*st: the file's status). A
 * script loads the agent only through its interpreter: a static one
 * (bash-static, busybox) never does, and would carry the hand-over meant
 * for it into every process it starts. So the interpreter is checked
 * too, and its own, as deep as the kernel follows them (4 more). Four
 * more system calls for a script, once per script in the exec-target
 * cache, whose entry for a script is checked against the script's
 * status only: an interpreter replaced by a static one during the run
 * is missed until the script changes.
 */
static enum agent_image image_kind(int fd, struct stat *st)
{
	char interp[AGENT_INTERP_MAX];
	struct stat ist;
	enum agent_image img = file_kind(fd, st, interp);

	if (img != AGENT_IMAGE_SCRIPT)
		return img;
	for (int depth = 0; depth < 5; depth++) {
		int ifd = (int)agent_syscall(SYS_openat, AT_FDCWD, interp, O_RDONLY | O_CLOEXEC);
		enum agent_image k;

		if (ifd < 0)
			return AGENT_IMAGE_OTHER;
		k = file_kind(ifd, &ist, interp);
		agent_syscall(SYS_close, ifd);
		if (k != AGENT_IMAGE_SCRIPT)
			return k == AGENT_IMAGE_ELF ? AGENT_IMAGE_SCRIPT : AGENT_IMAGE_OTHER;
	}
	return AGENT_IMAGE_OTHER;
}

/* Opens what execvp would run for a bare name: the first executable file
 * along $PATH (glibc's default when unset). Reads environ as execvp does.
 * buf (cap bytes) gets the path opened. A candidate that does not fit in
 * buf ends the search (-1): skipping it could find another file than
 * execvp will. */
static int open_in_path(const char *file, char *buf, size_t cap)
{
	const char *path = "/bin:/usr/bin";
	size_t flen = strlen(file);

	for (char **e = environ; e && *e; e++) {
		if (strncmp(*e, "PATH=", 5) == 0) {
			path = *e + 5;
			break;
		}
	}
	for (;;) {
		const char *end = strchrnul(path, ':');
		size_t dlen = (size_t)(end - path);
		size_t at = dlen ? dlen : 1; /* an empty entry is "." */

		if (at + flen + 2 > cap)
			return -1;
		memcpy(buf, dlen ? path : ".", at);
		buf[at] = '/';
		memcpy(buf + at + 1, file, flen + 1);
		if (agent_syscall(SYS_faccessat, AT_FDCWD, buf, X_OK) == 0) {
			int fd = (int)agent_syscall(SYS_openat, AT_FDCWD, buf,
						    O_RDONLY | O_CLOEXEC);
			if (fd >= 0)
				return fd;
		}
		if (!*end)
			return -1;
		path = end + 1;
	}
}

/*
 * The file exec would open: fd (owned when *own) and, when it has one the
 * agent can resolve, the path exec looks up (from the current directory
 * if relative) in *name, else NULL: path itself, or the $PATH candidate
 * written into buf (cap bytes). Returns a negative value when it cannot
 * tell.
 */
static int open_target(unsigned kind, int dirfd, const char *path, int flags, char *buf, size_t cap,
		       const char **name, bool *own)
{
	*own = true;
	*name = path;
	switch (kind) {
	case FT_EXEC_FEXECVE:
		*own = false;
		*name = NULL;
		return dirfd;
	case FT_EXEC_EXECVEAT:
		if ((flags & AT_EMPTY_PATH) && path && !*path) {
			*own = false;
			*name = NULL;
			return dirfd;
		}
		/* Relative to another directory: its name would take /proc. */
		if (path && path[0] != '/' && dirfd != AT_FDCWD)
			*name = NULL;
		return path ? (int)agent_syscall(SYS_openat, dirfd, path, O_RDONLY | O_CLOEXEC)
			    : -1;
	case FT_EXEC_EXECVP:
	case FT_EXEC_EXECVPE:
	case FT_EXEC_EXECLP:
		if (!path || !*path)
			return -1;
		if (strchr(path, '/'))
			return (int)agent_syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
		*name = buf;
		return open_in_path(path, buf, cap);
	default:
		return path ? (int)agent_syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC)
			    : -1;
	}
}

/*
 * The exec-target cache (include/forktrace/wire.h, "The process table"):
 * entries shared by every traced process, two-way (a path's hash picks a
 * pair). A hit costs one stat instead of the 8 system calls above. A file
 * replaced or changed since misses: its inode, size, mode or times
 * differ. A file changed again within its timestamps' granularity could
 * keep them all, so only a file whose last change is AGENT_TARGET_SETTLED_NS
 * old is entered (git's rule for racy files). Left to chance: a symbolic
 * link along the path turned to another name of the same file (a stale
 * exe name), and wrong entries a traced program writes on purpose (every
 * traced program can write the table).
 */
#define AGENT_TARGET_SETTLED_NS 100000000LL

_Static_assert(sizeof(struct ft_table_target) == FT_TABLE_TARGET_SIZE &&
		       sizeof(struct ft_table_header) <= FT_TABLE_TARGETS_OFFSET &&
		       FT_TABLE_TARGETS % 2 == 0,
	       "the exec-target cache's layout (wire.h)");

/* What identifies a file's version: all of it must match for a hit. */
struct target_id {
	uint64_t dev, ino, size;
	int64_t mtime_sec, mtime_nsec, ctime_sec, ctime_nsec;
	uint32_t mode;
};

#define TARGET_LOAD(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)
#define TARGET_STORE(field, v) __atomic_store_n(&(field), (v), __ATOMIC_RELAXED)

static uint32_t target_hash(const char *path, size_t len)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)path[i]) * 16777619u;
	return h;
}

/* The pair of entries for a path of hash h, or NULL without the table. */
static struct ft_table_target *target_pair(uint32_t h)
{
	struct ft_table_target *e = agent_table_targets();

	return e ? e + (h % (FT_TABLE_TARGETS / 2)) * 2 : NULL;
}

/*
 * Entry e's kind if it holds path (len bytes), else 0; exe (cap bytes)
 * gets its name and id its file's identity. Other processes write e at
 * any time: each length is loaded once and bounded before use, and all
 * of it counts only if seq was even and unchanged across the copy.
 */
static uint32_t target_read(const struct ft_table_target *e, const char *path, size_t len,
			    char *exe, size_t cap, struct target_id *id)
{
	uint32_t seq = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
	uint32_t kind = TARGET_LOAD(e->kind);
	size_t plen = TARGET_LOAD(e->path_len), xlen = TARGET_LOAD(e->exe_len);

	if (seq == 0 || (seq & 1) || plen != len || len + 1 + xlen + 1 > sizeof(e->text) ||
	    xlen >= cap || (kind != FT_TARGET_ELF && kind != FT_TARGET_SCRIPT) ||
	    memcmp(e->text, path, len) != 0)
		return 0;
	id->dev = TARGET_LOAD(e->dev);
	id->ino = TARGET_LOAD(e->ino);
	id->size = TARGET_LOAD(e->size);
	id->mode = TARGET_LOAD(e->mode);
	id->mtime_sec = TARGET_LOAD(e->mtime_sec);
	id->mtime_nsec = TARGET_LOAD(e->mtime_nsec);
	id->ctime_sec = TARGET_LOAD(e->ctime_sec);
	id->ctime_nsec = TARGET_LOAD(e->ctime_nsec);
	memcpy(exe, e->text + len + 1, xlen);
	exe[xlen] = '\0';
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return __atomic_load_n(&e->seq, __ATOMIC_RELAXED) == seq ? kind : 0;
}

/* What exec of path (absolute, len bytes) starts, if its pair of entries
 * e knows the file path names now; exe (cap bytes) gets its name. */
static enum agent_image target_cache_get(const struct ft_table_target *e, const char *path,
					 size_t len, char *exe, size_t cap)
{
	struct target_id id;
	struct stat st;
	uint32_t kind = 0;

	for (int i = 0; i < 2 && !kind; i++)
		kind = target_read(e + i, path, len, exe, cap, &id);
	if (!kind || agent_syscall(SYS_newfstatat, AT_FDCWD, path, &st, 0) != 0 ||
	    (uint64_t)st.st_dev != id.dev || (uint64_t)st.st_ino != id.ino ||
	    (uint64_t)st.st_size != id.size || (uint32_t)st.st_mode != id.mode ||
	    st.st_mtim.tv_sec != id.mtime_sec || st.st_mtim.tv_nsec != id.mtime_nsec ||
	    st.st_ctim.tv_sec != id.ctime_sec || st.st_ctim.tv_nsec != id.ctime_nsec) {
		exe[0] = '\0';
		return AGENT_IMAGE_OTHER;
	}
	return kind == FT_TARGET_ELF ? AGENT_IMAGE_ELF : AGENT_IMAGE_SCRIPT;
}

/* Does entry e hold path, or nothing? A hint: e may change meanwhile. */
static bool target_free_for(const struct ft_table_target *e, const char *path, size_t len)
{
	return TARGET_LOAD(e->seq) == 0 ||
	       (TARGET_LOAD(e->path_len) == len && memcmp(e->text, path, len) == 0);
}

/* Remembers in its pair e (path's hash h) what exec of path starts: img
 * (not OTHER) of the file st describes, named exe. Skipped while another
 * process writes the entry. */
static void target_cache_put(struct ft_table_target *e, uint32_t h, const char *path, size_t len,
			     enum agent_image img, const struct stat *st, const char *exe)
{
	size_t xlen = strlen(exe);
	int64_t changed = (int64_t)st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec;
	uint32_t seq;

	if (len + 1 + xlen + 1 > sizeof(e->text) ||
	    (int64_t)agent_clock_ns(CLOCK_REALTIME) - changed < AGENT_TARGET_SETTLED_NS)
		return;
	/* The way that holds path or nothing, else one the hash picks. */
	if (!target_free_for(e, path, len))
		e += target_free_for(e + 1, path, len) ? 1 : (h >> 31);
	seq = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);
	if ((seq & 1) || !__atomic_compare_exchange_n(&e->seq, &seq, seq + 1, false,
						      __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return;
	/* No store below may be seen before the odd seq (smp_wmb in the
	 * kernel's write_seqcount_begin). */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	TARGET_STORE(e->kind, img == AGENT_IMAGE_ELF ? FT_TARGET_ELF : FT_TARGET_SCRIPT);
	TARGET_STORE(e->dev, (uint64_t)st->st_dev);
	TARGET_STORE(e->ino, (uint64_t)st->st_ino);
	TARGET_STORE(e->size, (uint64_t)st->st_size);
	TARGET_STORE(e->mode, (uint32_t)st->st_mode);
	TARGET_STORE(e->mtime_sec, (int64_t)st->st_mtim.tv_sec);
	TARGET_STORE(e->mtime_nsec, (int64_t)st->st_mtim.tv_nsec);
	TARGET_STORE(e->ctime_sec, (int64_t)st->st_ctim.tv_sec);
	TARGET_STORE(e->ctime_nsec, (int64_t)st->st_ctim.tv_nsec);
	TARGET_STORE(e->path_len, (uint16_t)len);
	TARGET_STORE(e->exe_len, (uint16_t)xlen);
	memcpy(e->text, path, len + 1);
	memcpy(e->text + len + 1, exe, xlen + 1);
	__atomic_store_n(&e->seq, seq + 2, __ATOMIC_RELEASE);
}

bool agent_exec_target(unsigned kind, int dirfd, const char *path, int flags, bool cwd_known,
		       char *exe, size_t cap)
{
	const char *name;
	enum agent_image img = AGENT_IMAGE_OTHER;
	struct stat st;
	int fd;
	bool own;
	/* An absolute path that exec opens as open(2) would. */
	size_t cached_len = path && path[0] == '/' && kind != FT_EXEC_FEXECVE &&
					    kind != FT_EXEC_EXECVEAT
				    ? strlen(path)
				    : 0;
	/* Its pair of cache entries, found once for the lookup and the fill. */
	uint32_t h = cached_len ? target_hash(path, cached_len) : 0;
	struct ft_table_target *pair = cached_len ? target_pair(h) : NULL;

	if (pair && target_cache_get(pair, path, cached_len, exe, cap) != AGENT_IMAGE_OTHER)
		return true;
	/* exe doubles as the buffer of the $PATH search: no other buffer on
	 * the stack of a fork child. */
	fd = open_target(kind, dirfd, path, flags, exe, cap, &name, &own);
	if (fd >= 0) {
		img = image_kind(fd, &st);
		if (own)
			agent_syscall(SYS_close, fd); /* not through our close hook */
	}
	/* posix_spawn file actions may change directory before the exec:
	 * what a relative name would open there is unknown here. */
	if (!cwd_known && name && name[0] != '/')
		img = AGENT_IMAGE_OTHER;
	/* A script's /proc/<pid>/exe is its interpreter: left to the image. */
	if (img == AGENT_IMAGE_ELF && name)
		(void)agent_resolve_path(name, exe, cap);
	else
		exe[0] = '\0';
	if (pair && (img == AGENT_IMAGE_SCRIPT || (img == AGENT_IMAGE_ELF && exe[0])))
		target_cache_put(pair, h, path, cached_len, img, &st, exe);
	return img != AGENT_IMAGE_OTHER;
}
