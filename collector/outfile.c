/*
 * outfile.c - the output file of every subcommand (out_file, internal.h):
 * written unnamed and put in place only when complete, in place for FIFOs,
 * devices and stdout, never one of the inputs or the other output.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "say.h"
#include "merge.h"
#include "internal.h"

/* The directory part of path ("." when there is none) into out. */
static int dir_of(const char *path, char *out, size_t outsz)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash == NULL ? 1 : slash == path ? 1 : (size_t)(slash - path);

	if (n >= outsz)
		return -ENAMETOOLONG;
	memcpy(out, slash == NULL ? "." : path, n);
	out[n] = '\0';
	return 0;
}

/* The path the kernel has for fd (symlinks resolved) into out; "" if
 * none. */
static void fd_path(int fd, char *out, size_t outsz)
{
	char proc[64];
	ssize_t n;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	n = readlink(proc, out, outsz - 1);
	out[n > 0 ? n : 0] = '\0';
}

/* Whether directory fd dfd lies at canon, the place of the first one. */
static bool at_place(int dfd, const char *canon)
{
	char now[PATH_MAX];

	fd_path(dfd, now, sizeof(now));
	return canon[0] != '\0' && strcmp(now, canon) == 0;
}

/*
 * Follows the symlinks of path's last component into out, as open(2)
 * would before it creates the file: the file written is the link's
 * target, and the link stays. (The directories' links are followed by
 * the kernel.) A link in a sticky, world-writable directory (/tmp) that
 * belongs neither to us nor to the directory's owner is refused, as the
 * kernel's protected_symlinks refuses it to open(2): another user's link
 * there must not choose the file forktrace replaces. A link into /proc
 * (/dev/stdout, /dev/fd/N) is kept as it is: its target is an open file,
 * not a name. Returns 0 or a negative errno.
 */
static int resolve_link(const char *path, char *out, size_t outsz)
{
	char cur[PATH_MAX], buf[PATH_MAX], dir[PATH_MAX];

	if ((size_t)snprintf(cur, sizeof(cur), "%s", path) >= sizeof(cur))
		return -ENAMETOOLONG;
	for (int hops = 0; hops < 40; hops++) {
		struct stat st, dst;
		ssize_t n;

		if (strncmp(cur, "/proc/", 6) == 0 || lstat(cur, &st) < 0 || !S_ISLNK(st.st_mode)) {
			if ((size_t)snprintf(out, outsz, "%s", cur) >= outsz)
				return -ENAMETOOLONG;
			return 0;
		}
		if (dir_of(cur, dir, sizeof(dir)) < 0)
			return -ENAMETOOLONG;
		if (stat(dir, &dst) == 0 && (dst.st_mode & S_ISVTX) && (dst.st_mode & S_IWOTH) &&
		    st.st_uid != geteuid() && st.st_uid != dst.st_uid)
			return -EACCES;
		n = readlink(cur, buf, sizeof(buf) - 1);
		if (n < 0)
			return -errno;
		buf[n] = '\0';
		if (buf[0] == '/')
			n = snprintf(cur, sizeof(cur), "%s", buf);
		else
			n = snprintf(cur, sizeof(cur), "%s/%s", dir, buf);
		if ((size_t)n >= sizeof(cur))
			return -ENAMETOOLONG;
	}
	return -ELOOP;
}

/* The fd N a name of an open file of ours stands for ("-": stdout,
 * /dev/stdout, /dev/fd/N, /proc/self/fd/N once resolve_link went
 * through /dev), or -1. */
static int std_fd_of(const char *path)
{
	char self[64];
	const char *p = NULL;
	char *end;
	long n;

	if (strcmp(path, "-") == 0)
		return STDOUT_FILENO;
	snprintf(self, sizeof(self), "/proc/%d/fd/", (int)getpid());
	if (strncmp(path, "/proc/self/fd/", 14) == 0)
		p = path + 14;
	else if (strncmp(path, "/proc/thread-self/fd/", 21) == 0)
		p = path + 21;
	else if (strncmp(path, self, strlen(self)) == 0)
		p = path + strlen(self);
	else if (strncmp(path, "/dev/fd/", 8) == 0)
		p = path + 8;
	if (p == NULL || *p < '0' || *p > '9')
		return -1;
	n = strtol(p, &end, 10);
	return *end == '\0' && n <= INT32_MAX ? (int)n : -1;
}

bool out_path_in_place(const char *path)
{
	char target[PATH_MAX];
	struct stat st;

	if (resolve_link(path, target, sizeof(target)) < 0)
		return false;
	if (std_fd_of(target) >= 0)
		return true;
	return stat(target, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

static int open_fail(out_file *rf, const char *what, int err, const char *why)
{
	fprintf(stderr, "forktrace: cannot write the %s to '%s': %s\n", what, say_esc(rf->path),
		why != NULL ? why : strerror(-err));
	out_file_abort(rf);
	return err;
}

/*
 * Where a file goes that is not written in place: an unnamed file
 * (O_TMPFILE) in the target's directory, which a crash or a kill leaves
 * nowhere; a name is linked to it only when it is complete. Where the
 * file system cannot do that, a named temporary sibling.
 */
static int open_tmp(out_file *rf, mode_t mode)
{
	int n;

	rf->fd = openat(rf->dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, mode);
	if (rf->fd >= 0) {
		rf->anon = true;
		fchmod(rf->fd, mode); /* exactly: the umask took its part */
		return 0;
	}
	if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
		return -errno;
	n = snprintf(rf->tmp, sizeof(rf->tmp), "%s/%s.tmp-XXXXXX", rf->dir, rf->name);
	if (n < 0 || (size_t)n >= sizeof(rf->tmp)) {
		rf->tmp[0] = '\0';
		return -ENAMETOOLONG;
	}
	rf->fd = mkostemp(rf->tmp, O_CLOEXEC);
	if (rf->fd < 0) {
		rf->tmp[0] = '\0';
		return -errno;
	}
	snprintf(rf->tmpname, sizeof(rf->tmpname), "%s", strrchr(rf->tmp, '/') + 1);
	fchmod(rf->fd, mode);
	return 0;
}

int out_file_open(out_file *rf, const char *path, const char *what, bool seekable)
{
	char target[PATH_MAX];
	struct stat st;
	mode_t mode = 0644 & ~say_umask();
	const char *slash;
	int err, sfd;
	bool replaces = false;
	uid_t uid = 0;
	gid_t gid = 0;

	/* A file past RLIMIT_FSIZE is an error (EFBIG) naming it, not the
	 * end of forktrace by SIGXFSZ with the output lost. (run has done
	 * this already, keeping COMMAND's disposition: rsig_setup.) */
	signal(SIGXFSZ, SIG_IGN);
	memset(rf, 0, sizeof(*rf));
	rf->path = path;
	rf->what = what;
	rf->fd = -1;
	rf->dirfd = -1;
	rf->open = true;
	if (*path == '\0')
		return open_fail(rf, what, -ENOENT, NULL);
	err = resolve_link(path, target, sizeof(target));
	if (err < 0)
		return open_fail(rf, what, err,
				 err == -EACCES ? "a symlink in a sticky world-writable directory "
						  "that belongs to another user"
						: NULL);
	sfd = std_fd_of(target);
	if (sfd >= 0) {
		/* Our own stdout (or another fd we were given): written as
		 * it is, at its offset, with its flags. */
		rf->in_place = true;
		rf->fd = fcntl(sfd, F_DUPFD_CLOEXEC, 3);
		if (rf->fd < 0)
			return open_fail(rf, what, -errno, NULL);
		if (fstat(rf->fd, &st) < 0)
			return open_fail(rf, what, -errno, NULL);
		if (seekable && !S_ISREG(st.st_mode))
			return open_fail(rf, what, -ESPIPE,
					 "HDF5 is written to a regular file "
					 "only (it seeks): this is a pipe or a device");
		return 0;
	}
	if (stat(target, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return open_fail(rf, what, -EISDIR, NULL);
		if (S_ISBLK(st.st_mode))
			return open_fail(rf, what, -EINVAL,
					 "a block device: forktrace does not "
					 "write over devices");
		if (!S_ISREG(st.st_mode)) {
			/* A FIFO, a terminal, /dev/null: written in place. Replacing
			 * it would swap the node for a regular file. */
			if (seekable)
				return open_fail(
					rf, what, -ESPIPE,
					"HDF5 is written to a regular "
					"file only (it seeks): this is a FIFO or a device");
			rf->in_place = true;
			rf->fd = open(target, O_WRONLY | O_CLOEXEC | O_NOCTTY);
			if (rf->fd < 0)
				return open_fail(rf, what, -errno, NULL);
			return 0;
		}
		/* A file replaced keeps its permissions, and its owner where
		 * we may give it (root replacing a user's trace). */
		mode = st.st_mode & 0777;
		replaces = true;
		uid = st.st_uid;
		gid = st.st_gid;
	}
	slash = strrchr(target, '/');
	if ((size_t)snprintf(rf->name, sizeof(rf->name), "%s", slash ? slash + 1 : target) >=
		    sizeof(rf->name) ||
	    dir_of(target, rf->dir, sizeof(rf->dir)) < 0)
		return open_fail(rf, what, -ENAMETOOLONG, "name too long");
	if (rf->name[0] == '\0')
		return open_fail(rf, what, -EISDIR, NULL);
	rf->dirfd = open(rf->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rf->dirfd < 0)
		return open_fail(rf, what, -errno, NULL);
	fd_path(rf->dirfd, rf->canon, sizeof(rf->canon));
	err = open_tmp(rf, mode);
	if (err < 0)
		return open_fail(rf, what, err, NULL);
	/* Where we may not (another user's file): it becomes ours. */
	if (replaces && (uid != geteuid() || gid != getegid()))
		(void)!fchown(rf->fd, uid, gid);
	return 0;
}

/* A file named on the command line, for out_check_paths. */
typedef struct file_id {
	bool ok; /* could be looked at */
	bool exists;
	bool chr; /* a character device: /dev/null twice harms nothing */
	bool dir;
	dev_t dev, pdev; /* the file's, and its directory's */
	ino_t ino, pino;
	char name[256];      /* its name in that directory */
	char path[PATH_MAX]; /* with its symlinks followed */
} file_id;

/* Identifies path as the file an output (input false) or an input would
 * be: "-" is stdout or stdin; an output's symlinks are followed as
 * out_file_open follows them; a file not there yet is its directory and
 * name. */
static void id_of(const char *path, bool input, file_id *id)
{
	struct stat st;
	char dir[PATH_MAX];
	const char *slash;
	int sfd = -1;

	memset(id, 0, sizeof(*id));
	if (strcmp(path, "-") == 0)
		sfd = input ? STDIN_FILENO : STDOUT_FILENO;
	else if (input)
		snprintf(id->path, sizeof(id->path), "%s", path);
	else if (resolve_link(path, id->path, sizeof(id->path)) < 0)
		return;
	else
		sfd = std_fd_of(id->path);
	if (sfd >= 0 ? fstat(sfd, &st) == 0 : stat(id->path, &st) == 0) {
		id->exists = true;
		id->chr = S_ISCHR(st.st_mode);
		id->dir = S_ISDIR(st.st_mode);
		id->dev = st.st_dev;
		id->ino = st.st_ino;
	} else if (sfd >= 0 || errno != ENOENT) {
		return;
	}
	id->ok = true;
	if (sfd >= 0 || dir_of(id->path, dir, sizeof(dir)) < 0 || stat(dir, &st) < 0)
		return;
	id->pdev = st.st_dev;
	id->pino = st.st_ino;
	slash = strrchr(id->path, '/');
	if ((size_t)snprintf(id->name, sizeof(id->name), "%s", slash ? slash + 1 : id->path) >=
	    sizeof(id->name))
		id->name[0] = '\0';
}

static bool same_file(const file_id *a, const file_id *b)
{
	if (!a->ok || !b->ok)
		return false;
	if (a->exists && b->exists)
		return a->dev == b->dev && a->ino == b->ino && !a->chr;
	return !a->exists && !b->exists && a->pdev == b->pdev && a->pino == b->pino &&
	       a->name[0] != '\0' && strcmp(a->name, b->name) == 0;
}

int out_check_paths(const char *sub, const char *const *outs, size_t nout, const char *const *ins,
		    size_t nin)
{
	for (size_t i = 0; i < nout; i++) {
		file_id o, x;

		id_of(outs[i], false, &o);
		for (size_t j = 0; j < i; j++) {
			id_of(outs[j], false, &x);
			if (same_file(&o, &x))
				return say_usage_error(sub,
						       "'%s' and '%s' are the same file: one "
						       "output would overwrite the other",
						       say_esc(outs[j]), say_esc(outs[i]));
		}
		for (size_t j = 0; j < nin; j++) {
			id_of(ins[j], true, &x);
			if (same_file(&o, &x))
				return say_usage_error(sub,
						       "the output '%s' is the input '%s': "
						       "writing it would destroy what is read",
						       say_esc(outs[i]), say_esc(ins[j]));
			if (o.exists && !o.chr && x.ok && x.dir && o.pdev == x.dev &&
			    o.pino == x.ino && merge_dir_takes(o.path, o.name))
				return say_usage_error(sub,
						       "the output '%s' is in the input "
						       "directory '%s', which would read it as "
						       "an input; write it elsewhere",
						       say_esc(outs[i]), say_esc(ins[j]));
		}
	}
	return 0;
}

/*
 * Puts the finished temporary file tmp of directory dfd at name,
 * atomically: a reader of it sees the old file or the new one, whole.
 * rename(2) would do, but when name exists ext4 (auto_da_alloc) writes
 * the new file's data out before the rename returns: 6 ms for a 3 MB
 * trace on the benchmark machine, at every re-run, growing with the
 * trace. Exchanging the two names, then removing the old file under the
 * temporary name, is as atomic for readers and lets the data go out in
 * the background. What it gives up is that flush's protection against a
 * crash soon after: the trace may then be empty, as any file written
 * without fsync may. rename where the exchange cannot be done (no file at
 * name yet, or a file system without RENAME_EXCHANGE).
 */
static int replace_at(int dfd, const char *tmp, const char *name)
{
	if (renameat2(dfd, tmp, dfd, name, RENAME_EXCHANGE) == 0) {
		if (unlinkat(dfd, tmp, 0) == 0)
			return 0;
		/* What was at name is no file (a directory made meanwhile):
		 * put it back, and fail as rename would have. Should even
		 * that fail, the trace stays at name and the directory at
		 * the temporary name, and the error is still reported. */
		int err = errno;

		(void)renameat2(dfd, tmp, dfd, name, RENAME_EXCHANGE);
		return -err;
	}
	return renameat(dfd, tmp, dfd, name) < 0 ? -errno : 0;
}

/* Forgets the temporary name. */
static void tmp_clear(out_file *rf)
{
	rf->tmp[0] = rf->tmpname[0] = '\0';
}

/* Gives the unnamed file a temporary name in dfd (rf->tmpname). */
static int link_anon(out_file *rf, int dfd)
{
	char proc[64];
	struct timespec ts;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", rf->fd);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	for (unsigned i = 0; i < 64; i++) {
		unsigned r = (unsigned)ts.tv_nsec * 2654435761u ^ (unsigned)getpid() ^ i * 40503u;
		int n = snprintf(rf->tmpname, sizeof(rf->tmpname), "%s.tmp-%06x", rf->name,
				 r & 0xffffff);

		if (n < 0 || (size_t)n >= sizeof(rf->tmpname))
			break;
		if (linkat(AT_FDCWD, proc, dfd, rf->tmpname, AT_SYMLINK_FOLLOW) == 0 ||
		    /* No /proc: the same, where we may (CAP_DAC_READ_SEARCH). */
		    (errno == ENOENT && linkat(rf->fd, "", dfd, rf->tmpname, AT_EMPTY_PATH) == 0)) {
			if ((size_t)snprintf(rf->tmp, sizeof(rf->tmp), "%s/%s", rf->dir,
					     rf->tmpname) >= sizeof(rf->tmp))
				rf->tmp[0] = '\0';
			return 0;
		}
		if (errno != EEXIST) {
			int err = -errno;

			tmp_clear(rf);
			return err;
		}
	}
	tmp_clear(rf);
	return -EEXIST;
}

int out_file_name(out_file *rf)
{
	int err, fd;

	if (!rf->anon)
		return 0;
	err = link_anon(rf, rf->dirfd);
	if (err < 0)
		return err;
	rf->anon = false;
	/* Opened again by the name: the fd of an O_TMPFILE file keeps
	 * reading as "/dir/#123 (deleted)" in /proc, linked or not. */
	fd = openat(rf->dirfd, rf->tmpname, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	close(rf->fd);
	rf->fd = fd;
	return 0;
}

/* Puts the complete file at name in directory dfd. */
static int place(out_file *rf, int dfd)
{
	int err;

	if (rf->anon) {
		err = link_anon(rf, dfd);
		if (err < 0)
			return err;
		err = replace_at(dfd, rf->tmpname, rf->name);
		if (err < 0)
			unlinkat(dfd, rf->tmpname, 0);
		tmp_clear(rf);
		return err;
	}
	if (dfd == rf->dirfd)
		err = replace_at(dfd, rf->tmpname, rf->name);
	else
		err = renameat(rf->dirfd, rf->tmpname, dfd, rf->name) < 0 ? -errno : 0;
	if (err == 0)
		tmp_clear(rf);
	return err;
}

/* The path directory fd dfd has now, with name after it, into rf->kept. */
static void set_kept(out_file *rf, int dfd, const char *name)
{
	char proc[64], dir[PATH_MAX];
	ssize_t n;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", dfd);
	n = readlink(proc, dir, sizeof(dir) - 1);
	if (n < 0)
		return;
	dir[n] = '\0';
	if ((size_t)snprintf(rf->kept, sizeof(rf->kept), "%s%s%s", dir, strcmp(dir, "/") ? "/" : "",
			     name) >= sizeof(rf->kept))
		rf->kept[0] = '\0';
}

/* Last resort for an unnamed file that cannot be put in its directory
 * (made read-only, removed): a copy in $TMPDIR, so that the data is not
 * lost when its fd is closed. */
static void keep_copy(out_file *rf)
{
	const char *tmpdir = getenv("TMPDIR");
	char path[PATH_MAX], buf[65536];
	off_t off = 0;
	int fd;

	if (tmpdir == NULL || *tmpdir == '\0')
		tmpdir = "/tmp";
	if ((size_t)snprintf(path, sizeof(path), "%s/%s-XXXXXX", tmpdir, rf->name) >= sizeof(path))
		return;
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		return;
	for (;;) {
		ssize_t n = pread(rf->fd, buf, sizeof(buf), off), w = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n < 0)
				goto fail;
			break;
		}
		while (w < n) {
			ssize_t k = write(fd, buf + w, (size_t)(n - w));

			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0)
				goto fail;
			w += k;
		}
		off += n;
	}
	if (close(fd) < 0) {
		fd = -1;
		goto fail;
	}
	snprintf(rf->kept, sizeof(rf->kept), "%s", path);
	return;
fail:
	if (fd >= 0)
		close(fd);
	unlink(path);
}

int out_file_commit(out_file *rf)
{
	struct stat was, now;
	int err = 0, cur;

	if (rf->in_place || !rf->anon) {
		if (close(rf->fd) < 0)
			err = -errno;
		rf->fd = -1;
		if (err < 0 || rf->in_place)
			return err;
	}
	/* The directory as the path names it now: it may have been
	 * renamed, removed or replaced while the command ran. */
	cur = open(rf->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	bool same = cur >= 0 && fstat(cur, &now) == 0 && fstat(rf->dirfd, &was) == 0 &&
		    now.st_dev == was.st_dev && now.st_ino == was.st_ino;

	/* Another directory is used only where the first one was (made
	 * again): one the path now reaches through a new symlink may be
	 * anywhere a program of the tree chose, /etc for a root forktrace. */
	if (cur >= 0 && !same && !at_place(cur, rf->canon)) {
		close(cur);
		cur = -1;
		errno = ENOENT;
	}
	err = cur >= 0 ? place(rf, same ? rf->dirfd : cur) : -errno;
	if (err < 0 && !same && place(rf, rf->dirfd) == 0)
		/* Where the directory went: the data is whole, but not at
		 * the path given. */
		set_kept(rf, rf->dirfd, rf->name);
	if (cur >= 0)
		close(cur);
	if (err < 0 && rf->kept[0] == '\0') {
		if (!rf->anon && rf->tmpname[0] != '\0') {
			set_kept(rf, rf->dirfd, rf->tmpname);
			rf->kept_tmp = rf->kept[0] != '\0';
		} else if (rf->anon)
			keep_copy(rf);
	}
	if (rf->anon) {
		close(rf->fd);
		rf->fd = -1;
	}
	return err;
}

void out_file_abort(out_file *rf)
{
	if (!rf->open)
		return;
	if (rf->fd >= 0)
		close(rf->fd);
	rf->fd = -1;
	if (rf->kept[0] != '\0')
		fprintf(stderr, "forktrace: the complete %s is in '%s'\n", rf->what,
			say_esc(rf->kept));
	if (!rf->kept_tmp && rf->tmpname[0] != '\0')
		unlinkat(rf->dirfd, rf->tmpname, 0);
	if (rf->dirfd >= 0)
		close(rf->dirfd);
	rf->dirfd = -1;
	tmp_clear(rf);
	rf->kept[0] = '\0';
	rf->kept_tmp = false;
	rf->open = false;
}

int out_file_fallback(out_file *rf, int (*writer)(void *ctx, int fd), void *ctx)
{
	const char *tmpdir = getenv("TMPDIR");
	const char *name = rf->name[0] != '\0' ? rf->name : rf->what;
	char path[PATH_MAX];
	int fd, err, n;

	if (!rf->open || rf->kept[0] != '\0')
		return -EINVAL;
	if (tmpdir == NULL || *tmpdir == '\0')
		tmpdir = "/tmp";
	n = snprintf(path, sizeof(path), "%s/forktrace-XXXXXX-%s", tmpdir, name);
	if (n < 0 || (size_t)n >= sizeof(path))
		return -ENAMETOOLONG;
	fd = mkostemps(path, (int)strlen(name) + 1, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	err = writer(ctx, fd);
	if (close(fd) < 0 && err == 0)
		err = -errno;
	if (err < 0) {
		unlink(path);
		return err;
	}
	snprintf(rf->kept, sizeof(rf->kept), "%s", path);
	return 0;
}

void out_spool_error(int err)
{
	const char *dir = getenv("TMPDIR");

	fprintf(stderr,
		"forktrace: cannot write the temporary file of the inputs' top-level "
		"keys in %s: %s\n",
		say_esc(dir != NULL && *dir != '\0' ? dir : "/tmp"), strerror(-err));
}
