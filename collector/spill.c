/*
 * spill.c - the agents' spill files as inputs of `forktrace combine`.
 *
 * An agent without a collector (none was started, or it died) writes the
 * frames it would have sent into a spill file of its own, one per process
 * image (docs/TRACE_FORMAT.md, "Spill files"). Reading them back is what
 * the collector does with a connection: each file's frames go through the
 * same decoder and process tree (proctree.c), and the model they make is
 * one more input of the merge, after the others, as the live run's model
 * is the one input of its own. So a spill file gives the trace `forktrace
 * run` would have written, pid remapping, --align and every output format
 * included.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "say.h"
#include "internal.h"
#include "mstream.h"
#include "spill.h"
#include "vec.h"

/* What the models built from spill and node-output files keep in memory,
 * together: past it, their event records go to a temporary file
 * (model_set_spill), so that combine's memory stays flat whatever the
 * files hold (docs/OUTPUT.md, "mem"). */
#define SPILL_MODELS_MEMORY (16u << 20)

/* Of a spill file being read, the bytes already applied are given back
 * to the kernel in steps of this: the file is mapped whole, and what was
 * read of it would otherwise stay resident until its end. */
#define SPILL_DROP_STEP (4u << 20)

static bool has_spill_name(const char *name)
{
	return fnmatch("*.ftspill", name, 0) == 0;
}

static bool has_node_name(const char *name)
{
	return fnmatch("*.ftnode", name, 0) == 0;
}

/* Does the regular file at path start with head[0..n)? A stream ("-", a
 * FIFO, a pipe, a device) is not opened: its reader opens it once, and
 * what is read here would be lost to it (a FIFO's writer even gone). */
static bool starts_with(const char *path, const void *head, size_t n)
{
	unsigned char h[16];
	struct stat st;
	int fd;
	bool yes;

	if (n > sizeof(h) || strcmp(path, "-") == 0 || stat(path, &st) < 0 || !S_ISREG(st.st_mode))
		return false;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return false;
	yes = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && pread(fd, h, n, 0) == (ssize_t)n &&
	      memcmp(h, head, n) == 0;
	close(fd);
	return yes;
}

/* A node-output file. */
static bool sniff_node(const char *path)
{
	return starts_with(path, MSTREAM_FILE_MAGIC, MSTREAM_FILE_MAGIC_LEN);
}

/* A file that starts like a frame of our protocol. */
static bool sniff_spill(const char *path)
{
	static const unsigned char frame[] = {FT_WIRE_MAGIC0, FT_WIRE_MAGIC1, FT_WIRE_VERSION};

	return starts_with(path, frame, sizeof(frame));
}

static int push(char ***v, size_t *n, size_t *cap, char *s)
{
	if (s == NULL)
		return -ENOMEM;
	if (vec_grow(v, cap, *n + 1, sizeof(**v), 16) < 0) {
		free(s);
		return -ENOMEM;
	}
	(*v)[(*n)++] = s;
	return 0;
}

/* Says so when the file open as fd is not the caller's: anyone could
 * have written it (a forged spill file is merged like a real one). */
static bool owned_by_caller(const char *path, const struct stat *st)
{
	if (st->st_uid == geteuid())
		return true;
	fprintf(stderr,
		"forktrace: warning: %s: owned by uid %u, not by you (uid %u): read "
		"anyway; another user could have written anything in it\n",
		say_esc(path), (unsigned)st->st_uid, (unsigned)geteuid());
	return false;
}

/* Bounds the memory of model t, the next model of sp: what the models
 * before it left of SPILL_MODELS_MEMORY, the rest of it in a temporary
 * file in $TMPDIR (else /tmp). Without one (it cannot be made), says so. */
static void bound_model(const spill_inputs *sp, model_trace *t)
{
	const char *dir = getenv("TMPDIR");
	uint64_t used = sp->model && sp->model != t ? sp->model->arena_mem : 0;

	for (size_t i = 0; i < sp->nnodes; i++)
		if (sp->nodes[i].model != t)
			used += sp->nodes[i].model->arena_mem;
	if (dir == NULL || *dir == '\0')
		dir = "/tmp";
	if (model_set_spill(t, dir, used < SPILL_MODELS_MEMORY ? SPILL_MODELS_MEMORY - used : 0) <
	    0)
		fprintf(stderr,
			"forktrace: warning: cannot create a temporary file in %s: the "
			"event records of the spill and node-output files stay in memory\n",
			say_esc(dir));
}

/* Gives back to the kernel the pages of data[0..off) that are not yet:
 * *dropped of them are. */
static void drop_read(const char *data, size_t off, size_t *dropped)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t to = off & ~(page - 1);

	if (to < *dropped + SPILL_DROP_STEP)
		return;
	/* The mapping is private and read-only: the pages come back from
	 * the file if anything reads them again. */
	(void)madvise((void *)(data + *dropped), to - *dropped, MADV_DONTNEED);
	*dropped = to;
}

/*
 * Applies the frames of one spill file to the tree: path (shown in
 * messages) is opened relative to dirfd as name, without following a
 * symbolic link when nofollow (a file found in a directory: the agents
 * never make links there). t (NULL: none) is the run's process table:
 * an image that wrote in a slot first goes on in its spill file. Returns
 * 0; 1 when it was read but not owned by the caller; or -1 after saying
 * what is wrong with the file (what came before the damage is kept).
 */
static int read_spill(proc_tree *pt, ptab *t, int dirfd, const char *name, const char *path,
		      bool nofollow, int64_t *last_ts)
{
	msgpack_unpacked up;
	proc_conn conn;
	struct stat st;
	const char *data;
	size_t off = 0, dropped = 0;
	int fd, rc = 0;
	wire_frame f;
	int r;

	/* O_NONBLOCK: a FIFO must not hang the reader (it is refused below). */
	fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NONBLOCK | (nofollow ? O_NOFOLLOW : 0));
	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "forktrace: %s: %s\n", say_esc(path),
			errno == ELOOP && nofollow ? "a symbolic link, not a spill file; skipped"
						   : strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		fprintf(stderr, "forktrace: %s: not a regular file; skipped\n", say_esc(path));
		close(fd);
		return -1;
	}
	if (!owned_by_caller(path, &st))
		rc = 1;
	if (st.st_size == 0) {
		fprintf(stderr, "forktrace: %s: empty spill file\n", say_esc(path));
		close(fd);
		return -1;
	}
	data = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (data == MAP_FAILED) {
		fprintf(stderr, "forktrace: %s: %s\n", say_esc(path), strerror(errno));
		return -1;
	}
	(void)madvise((void *)data, (size_t)st.st_size, MADV_SEQUENTIAL);
	memset(&conn, 0, sizeof(conn));
	msgpack_unpacked_init(&up);
	while ((r = wire_next_frame(data + off, (size_t)st.st_size - off, FT_WIRE_MAX_PAYLOAD,
				    &f)) == 1) {
		wire_msg m;

		if (wire_decode(f.payload, f.len, f.type, &up, &m) < 0) {
			fprintf(stderr,
				"forktrace: %s: byte %zu: a malformed %s message; the frames "
				"before it are kept\n",
				say_esc(path), off, wire_type_name(f.type));
			rc = -1;
			break;
		}
		if (m.type == FT_MSG_HELLO)
			ptab_before_hello(t, &m);
		if (proc_apply(pt, &conn, &m, m.ts) == -EPROTO) {
			fprintf(stderr,
				"forktrace: %s: byte %zu: expected a HELLO message first, "
				"found %s; not a spill file?\n",
				say_esc(path), off, wire_type_name(f.type));
			rc = -1;
			break;
		}
		if (m.type == FT_MSG_HELLO)
			ptab_after_hello(t, &conn, &m);
		if (m.ts > *last_ts)
			*last_ts = m.ts;
		off += f.size;
		/* What the frames before off said is in the model now. */
		drop_read(data, off, &dropped);
	}
	if (r < 0) {
		fprintf(stderr, "forktrace: %s: byte %zu: %s; the frames before it are kept\n",
			say_esc(path), off, wire_frame_strerror(r));
		rc = -1;
	} else if (r == 0 && off < (size_t)st.st_size) {
		/* A process killed while writing: everything up to its last
		 * whole frame counts. */
		fprintf(stderr,
			"forktrace: warning: %s: ends inside a frame at byte %zu (the "
			"process died while writing); the frames before it are kept\n",
			say_esc(path), off);
	}
	proc_conn_closed(pt, &conn, *last_ts);
	msgpack_unpacked_destroy(&up);
	munmap((void *)data, (size_t)st.st_size);
	return rc;
}

/*
 * Reads the process table that the spill directory dir's FT_TABLE_NAME
 * link names (the run's collector died before reading all of it) and the
 * journal beside it (what that collector had read and freed) into pt.
 * Returns the table, or NULL after saying why it cannot be read.
 */
static ptab *salvage_table(proc_tree *pt, const char *dir, int *problems)
{
	char path[PATH_MAX], jpath[PATH_MAX];
	struct stat st;
	ptab *t;
	int fd, jfd, err;
	size_t bad;

	snprintf(path, sizeof(path), "%s/%s", dir, FT_TABLE_NAME);
	snprintf(jpath, sizeof(jpath), "%s/%s", dir, SPILL_JOURNAL_NAME);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
		close(fd);
		fd = -1;
		errno = EINVAL;
	}
	if (fd < 0 && errno != ENOENT) {
		fprintf(stderr, "forktrace: %s: %s; skipped\n", say_esc(path), strerror(errno));
		(*problems)++;
	} else if (fd < 0 && faccessat(AT_FDCWD, path, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
		fprintf(stderr,
			"forktrace: warning: %s: the run's process table is gone: what "
			"its processes wrote there last is lost\n",
			say_esc(path));
		(*problems)++;
	} else if (fd >= 0 && !owned_by_caller(path, &st)) {
		(*problems)++;
	}
	jfd = open(jpath, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
	if (jfd >= 0 && fstat(jfd, &st) == 0 && S_ISREG(st.st_mode) && !owned_by_caller(jpath, &st))
		(*problems)++;
	if (fd < 0 && jfd < 0)
		return NULL;
	t = ptab_open_salvage(fd, jfd, pt, &err, &bad);
	if (!t) {
		fprintf(stderr, "forktrace: %s: %s; skipped\n", say_esc(fd >= 0 ? path : jpath),
			err == -EPROTO ? "not a forktrace process table" : strerror(-err));
		(*problems)++;
		return NULL;
	}
	if (bad) {
		fprintf(stderr, "forktrace: %s: %zu damaged record%s; the rest is read\n",
			say_esc(jpath), bad, bad == 1 ? "" : "s");
		(*problems)++;
	}
	ptab_read(t);
	return t;
}

/* A spill file to read: its path, whether it was found in a directory
 * (then a symbolic link is refused), and the table of its directory. */
typedef struct spill_file {
	char *path;
	bool in_dir;
	size_t table; /* index in tables + 1, or 0 */
} spill_file;

/* Appends f to *v, grown as push() grows its array. Consumes f.path
 * (NULL: allocation failed), also on error. Returns 0 or -ENOMEM. */
static int push_spill(spill_file **v, size_t *n, size_t *cap, spill_file f)
{
	if (f.path == NULL)
		return -ENOMEM;
	if (vec_grow(v, cap, *n + 1, sizeof(**v), 16) < 0) {
		free(f.path);
		return -ENOMEM;
	}
	(*v)[(*n)++] = f;
	return 0;
}

/* What spill_prepare found among its paths. */
typedef struct spill_found {
	spill_file *spills;
	size_t nspills, cap_spills;
	char **tabdirs; /* spill directories with a process table */
	size_t ntabs, cap_tabs;
	size_t cap_src;
} spill_found;

/* Appends src to sp's inputs. Returns 0 or -ENOMEM. */
static int push_src(spill_inputs *sp, spill_found *f, merge_source src)
{
	if (vec_grow(&sp->src, &f->cap_src, sp->nsrc + 1, sizeof(*sp->src), 16) < 0)
		return -ENOMEM;
	sp->src[sp->nsrc++] = src;
	return 0;
}

/* Adds path to the name of the spill files' input ("a.spill, b.ftspill"). */
static int add_name(spill_inputs *sp, const char *path)
{
	char *name;

	if (asprintf(&name, "%s%s%s", sp->name ? sp->name : "", sp->name ? ", " : "", path) < 0)
		return -ENOMEM;
	free(sp->name);
	sp->name = name;
	return 0;
}

/*
 * Takes the directory path (st: its stat) when it is a spill directory:
 * spill files, the table link of a run whose collector died and its
 * journal, and nothing else; it is read here alone. Returns 1 when it was
 * one, 0 when it is another directory, -1 when it cannot be listed, or
 * -ENOMEM.
 */
static int take_spill_dir(spill_found *f, const char *path, const struct stat *st)
{
	bool others = false, found = false, table = false;
	size_t first = f->nspills;
	struct dirent *de;
	int err = 0;
	DIR *d;

	d = opendir(path);
	if (d == NULL)
		return -1;
	while ((de = readdir(d)) != NULL && err == 0) {
		if (de->d_name[0] == '.')
			continue;
		if (strcmp(de->d_name, FT_TABLE_NAME) == 0 ||
		    strcmp(de->d_name, SPILL_JOURNAL_NAME) == 0) {
			table = true;
		} else if (has_node_name(de->d_name)) {
			continue; /* read by take_node_dir */
		} else if (has_spill_name(de->d_name)) {
			char *full;

			if (asprintf(&full, "%s/%s", path, de->d_name) < 0)
				full = NULL;
			err = push_spill(&f->spills, &f->nspills, &f->cap_spills,
					 (spill_file){full, true, 0});
			found = true;
		} else {
			others = true;
		}
	}
	closedir(d);
	if (err == 0 && (found || table) && !others) {
		if (!(st->st_uid == geteuid() && (st->st_mode & 022) == 0))
			fprintf(stderr,
				"forktrace: warning: %s: a spill directory that is not yours "
				"alone (owner uid %u, mode %03o): anyone could have put files "
				"in it\n",
				path, (unsigned)st->st_uid, (unsigned)(st->st_mode & 0777));
		if (table) {
			char *dup = strdup(path);

			if (!dup || push(&f->tabdirs, &f->ntabs, &f->cap_tabs, dup) < 0)
				return -ENOMEM;
			for (size_t k = first; k < f->nspills; k++)
				f->spills[k].table = f->ntabs;
		}
		return 1;
	}
	for (size_t k = first; k < f->nspills; k++)
		free(f->spills[k].path);
	f->nspills = first;
	return err < 0 ? err : 0;
}

/*
 * Reads the node-output file name (relative to dirfd; path in messages;
 * not through a symbolic link when nofollow: a file found in a directory)
 * into a model of its own, the next input of sp. A file cut short (the
 * node died while writing) keeps what came before, with a warning; a
 * damaged one too, counted as a problem. Returns 0 or -ENOMEM.
 */
static int take_node_file(spill_inputs *sp, spill_found *f, int dirfd, const char *name,
			  const char *path, bool nofollow)
{
	mstream_reader *r;
	spill_node *n;
	struct stat st;
	int fd, err;

	fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NONBLOCK | (nofollow ? O_NOFOLLOW : 0));
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		fprintf(stderr, "forktrace: %s: %s; skipped\n", say_esc(path),
			fd >= 0                      ? "not a regular file"
			: errno == ELOOP && nofollow ? "a symbolic link, not a node-output file"
						     : strerror(errno));
		if (fd >= 0)
			close(fd);
		sp->problems++;
		return 0;
	}
	owned_by_caller(path, &st);
	if (vec_grow(&sp->nodes, &sp->nodes_cap, sp->nnodes + 1, sizeof(*sp->nodes), 4) < 0) {
		close(fd);
		return -ENOMEM;
	}
	n = &sp->nodes[sp->nnodes];
	n->model = model_new();
	if (n->model)
		bound_model(sp, n->model);
	n->path = strdup(path);
	r = n->model ? mstream_reader_new(n->model) : NULL;
	if (r == NULL || n->path == NULL) {
		mstream_reader_free(r);
		model_free(n->model);
		free(n->path);
		close(fd);
		return -ENOMEM;
	}
	sp->nnodes++;
	err = mstream_read_file(r, fd);
	close(fd);
	if (err == -ENODATA) {
		fprintf(stderr,
			"forktrace: warning: %s: %s (the node stopped writing); the %zu "
			"processes before it are kept\n",
			say_esc(path), mstream_error(r), n->model->nprocs);
	} else if (err == -EBADMSG) {
		fprintf(stderr, "forktrace: %s: %s; the %zu processes before it are kept\n",
			say_esc(path), mstream_error(r), n->model->nprocs);
		sp->problems++;
	} else if (err < 0 && err != -ENOMEM) {
		fprintf(stderr, "forktrace: %s: %s\n", say_esc(path), strerror(-err));
		sp->problems++;
	}
	mstream_reader_free(r);
	if (err == -ENOMEM)
		return err;
	if (n->model->origin == NULL)
		n->model->origin = "forktrace node output";
	return push_src(sp, f, (merge_source){.model = n->model, .name = n->path});
}

static int node_filter(const struct dirent *de)
{
	return de->d_name[0] != '.' && has_node_name(de->d_name);
}

/* Takes the *.ftnode files of the directory path, in name order. Sets
 * *others when it holds other files too. Returns how many it took, -1
 * when it cannot be listed, or -ENOMEM. */
static int take_node_dir(spill_inputs *sp, spill_found *f, const char *path, bool *others)
{
	struct dirent **names = NULL;
	struct dirent *de;
	int n, dirfd, err = 0;
	DIR *d;

	*others = false;
	d = opendir(path);
	if (d == NULL)
		return -1;
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.' && !has_node_name(de->d_name))
			*others = true;
	closedir(d);
	n = scandir(path, &names, node_filter, alphasort);
	if (n <= 0)
		return n < 0 ? -1 : 0;
	dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (int i = 0; i < n; i++) {
		char *full = NULL;

		if (err == 0 && dirfd >= 0 && asprintf(&full, "%s/%s", path, names[i]->d_name) < 0)
			err = -ENOMEM;
		if (err == 0 && dirfd >= 0)
			err = take_node_file(sp, f, dirfd, names[i]->d_name, full, true);
		free(full);
		free(names[i]);
	}
	free(names);
	if (dirfd >= 0)
		close(dirfd);
	return err < 0 ? err : n;
}

/* Sorts one path of spill_prepare: a spill file or directory (added to
 * the name of their input), a node-output file or a directory of them
 * (inputs of their own), or another input. Returns 0 or -ENOMEM. */
static int sort_path(spill_inputs *sp, spill_found *f, const char *path)
{
	struct stat st;
	bool dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
	bool others = true;
	int r = -1;

	if (dir) {
		int nodes = take_node_dir(sp, f, path, &others);

		if (nodes < -1)
			return nodes;
		if (nodes > 0 && !others)
			return 0;
		r = take_spill_dir(f, path, &st);
	} else if (has_node_name(path) || sniff_node(path)) {
		return take_node_file(sp, f, AT_FDCWD, path, path, false);
	}
	if (r < 0 && r != -1)
		return r;
	if (r == -1 && (has_spill_name(path) || sniff_spill(path))) {
		if (push_spill(&f->spills, &f->nspills, &f->cap_spills,
			       (spill_file){strdup(path), false, 0}) < 0)
			return -ENOMEM;
		r = 1;
	}
	if (r == 1)
		return add_name(sp, path);
	return push_src(sp, f, (merge_source){.path = path});
}

/* Reads the spill files found (and the process tables of their
 * directories) into sp->model, the way the collector reads connections.
 * Returns 0 or -ENOMEM. */
static int read_spills(spill_inputs *sp, const spill_found *f)
{
	int64_t last_ts = 0;
	model_trace *t;

	t = sp->model = model_new();
	if (t)
		bound_model(sp, t);
	sp->pt = t ? proc_tree_new(t) : NULL;
	sp->tables = f->ntabs ? calloc(f->ntabs, sizeof(*sp->tables)) : NULL;
	if (!sp->pt || (f->ntabs && !sp->tables))
		return -ENOMEM;
	sp->ntables = f->ntabs;
	t->origin = "forktrace spill files";
	/* The tables first: an image that wrote in a slot and then spilled
	 * goes on in its spill file (its HELLO names the slot). */
	for (size_t k = 0; k < f->ntabs; k++) {
		sp->tables[k] = salvage_table(sp->pt, f->tabdirs[k], &sp->problems);
		if (ptab_last_ts(sp->tables[k]) > last_ts)
			last_ts = ptab_last_ts(sp->tables[k]);
	}
	for (size_t i = 0; i < f->nspills; i++) {
		const spill_file *sf = &f->spills[i];
		ptab *tab = sf->table ? sp->tables[sf->table - 1] : NULL;

		if (read_spill(sp->pt, tab, AT_FDCWD, sf->path, sf->path, sf->in_dir, &last_ts) !=
		    0)
			sp->problems++;
	}
	for (size_t k = 0; k < f->ntabs; k++)
		ptab_finish(sp->tables[k]);
	sp->nspill = f->nspills;
	proc_finish(sp->pt, last_ts, true);
	t->start_ns = -1;
	t->end_ns = last_ts;
	return 0;
}

int spill_prepare(const char *const *paths, size_t n, spill_inputs *sp)
{
	spill_found f = {0};
	int err = 0;

	memset(sp, 0, sizeof(*sp));
	for (size_t i = 0; i < n && err == 0; i++)
		err = sort_path(sp, &f, paths[i]);
	if (err == 0 && (f.nspills > 0 || f.ntabs > 0)) {
		err = read_spills(sp, &f);
		if (err == 0)
			err = push_src(sp, &f,
				       (merge_source){.model = sp->model, .name = sp->name});
	}
	for (size_t i = 0; i < f.nspills; i++)
		free(f.spills[i].path);
	free(f.spills);
	for (size_t k = 0; k < f.ntabs; k++)
		free(f.tabdirs[k]);
	free(f.tabdirs);
	return err;
}

void spill_note_merged(spill_inputs *sp, const merge_result *res)
{
	const merge_input *in;

	if (sp->model == NULL || res->ninputs == 0)
		return;
	in = &res->inputs[res->ninputs - 1];
	if (in->corrupt_chunks == 0)
		return;
	fprintf(stderr,
		"forktrace: %llu chunks of in-process events in the spill files held a "
		"record that does not parse; their events from there on are missing\n",
		(unsigned long long)in->corrupt_chunks);
	sp->problems++;
}

void spill_release(spill_inputs *sp)
{
	free(sp->src);
	free(sp->name);
	for (size_t k = 0; k < sp->ntables; k++)
		ptab_free(sp->tables[k]);
	free(sp->tables);
	proc_tree_free(sp->pt);
	model_free(sp->model);
	for (size_t k = 0; k < sp->nnodes; k++) {
		model_free(sp->nodes[k].model);
		free(sp->nodes[k].path);
	}
	free(sp->nodes);
	memset(sp, 0, sizeof(*sp));
}

/*
 * The run's spill directory must be the agents' alone: a directory of
 * someone else, a symbolic link, or one that still holds an earlier
 * run's spill files (which this run's end would merge as its own, or
 * lose) stops the run before COMMAND starts. A directory left with only
 * the link to a table that is gone holds nothing: it is removed.
 */
int spill_run_check(const char *dir)
{
	struct stat st;
	struct dirent *de;
	bool leftover = false, dead_link = false;
	DIR *d;
	int fd;

	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0) {
		fprintf(stderr,
			"forktrace: %s: %s; the agents spill there should forktrace die: "
			"remove it or choose another output\n",
			dir,
			errno == ELOOP || errno == ENOTDIR ? "exists and is not a directory"
							   : strerror(errno));
		return -EEXIST;
	}
	if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 077)) {
		fprintf(stderr,
			"forktrace: %s: not a private directory of yours (owner uid %u, "
			"mode %03o); the agents spill there should forktrace die: remove it "
			"or choose another output\n",
			dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777));
		close(fd);
		return -EPERM;
	}
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (strcmp(de->d_name, FT_TABLE_NAME) == 0 &&
		    faccessat(dirfd(d), FT_TABLE_NAME, F_OK, 0) < 0 && errno == ENOENT)
			dead_link = true;
		else
			leftover = true;
	}
	if (!leftover && dead_link)
		unlinkat(dirfd(d), FT_TABLE_NAME, 0);
	closedir(d);
	if (leftover) {
		fprintf(stderr,
			"forktrace: %s holds what the processes of an earlier run wrote "
			"after its forktrace died: get that trace back first with 'forktrace "
			"combine %s -o TRACE', or remove it\n",
			dir, dir);
		return -EEXIST;
	}
	rmdir(dir);
	return 0;
}

/* Opens the run's spill directory (made if missing), relative to the
 * parent held since the start: a directory renamed during the run is
 * still found. Only a private directory of the caller. Returns its fd or
 * -1. */
static int spill_run_open(spill_run *sr, bool make)
{
	struct stat st;
	int fd;

	if (sr->pdirfd < 0) {
		errno = ENOENT;
		return -1;
	}
	if (make && mkdirat(sr->pdirfd, sr->name, 0700) < 0 && errno != EEXIST)
		return -1;
	fd = openat(sr->pdirfd, sr->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 077))) {
		close(fd);
		errno = EPERM;
		return -1;
	}
	return fd;
}

/* The table's journal opener (ptab_set_journal): the first time the
 * table gives pages back, the spill directory is made, with the link to
 * the table and the journal. */
static int spill_run_journal(void *ctx)
{
	spill_run *sr = ctx;
	int jfd;

	if (sr->dirfd < 0)
		sr->dirfd = spill_run_open(sr, true);
	if (sr->dirfd < 0)
		return -1;
	if (symlinkat(ptab_file(sr->t), sr->dirfd, FT_TABLE_NAME) < 0 && errno != EEXIST)
		return -1;
	jfd = openat(sr->dirfd, SPILL_JOURNAL_NAME,
		     O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND | O_CLOEXEC, 0600);
	return jfd;
}

void spill_run_start(spill_run *sr, const char *dir, ptab *t)
{
	char parent[PATH_MAX];
	const char *slash = strrchr(dir, '/');

	memset(sr, 0, sizeof(*sr));
	sr->pdirfd = sr->dirfd = -1;
	if (!slash || slash == dir || strlen(dir) >= sizeof(sr->dir))
		return;
	snprintf(sr->dir, sizeof(sr->dir), "%s", dir);
	sr->name = sr->dir + (slash - dir) + 1;
	memcpy(parent, dir, (size_t)(slash - dir));
	parent[slash - dir] = '\0';
	sr->pdirfd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
	sr->t = t;
	if (sr->pdirfd >= 0 && t)
		ptab_set_journal(t, spill_run_journal, sr);
}

static void spill_run_add(spill_run *sr, const char *name)
{
	char *dup = strdup(name);

	if (!dup || push(&sr->merged, &sr->nmerged, &sr->cap, dup) < 0)
		sr->keep = true; /* cannot remember it: it stays */
}

void spill_run_merge(spill_run *sr, proc_tree *pt, ptab *t)
{
	struct dirent *de;
	int64_t last_ts = 0;
	DIR *d;
	int fd;

	if (sr->dirfd < 0)
		sr->dirfd = spill_run_open(sr, false);
	if (sr->dirfd < 0) {
		if (sr->dir[0] && errno != ENOENT) {
			fprintf(stderr,
				"forktrace: warning: %s: %s; its spill files, if any, are "
				"not merged\n",
				sr->dir,
				errno == EPERM ? "not a private directory of yours"
					       : strerror(errno));
			sr->unmerged++;
		}
		return;
	}
	fd = openat(sr->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		char path[PATH_MAX + 256];
		int rc;

		if (!has_spill_name(de->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s", sr->dir, de->d_name);
		rc = read_spill(pt, t, dirfd(d), de->d_name, path, true, &last_ts);
		if (rc < 0) {
			sr->unmerged++;
			continue;
		}
		sr->nread++;
		if (rc == 0)
			spill_run_add(sr, de->d_name);
		else
			sr->keep = true;
	}
	closedir(d);
}

void spill_run_finish(spill_run *sr, bool written)
{
	if (sr->dirfd < 0)
		sr->dirfd = spill_run_open(sr, false);
	if (sr->dirfd >= 0) {
		/* In the trace now. Without a trace, they are all there is. */
		for (size_t i = 0; written && i < sr->nmerged; i++)
			unlinkat(sr->dirfd, sr->merged[i], 0);
		/* The table goes with the run; what the journal kept of it is
		 * in the trace, or went with a trace that could not be
		 * written. */
		unlinkat(sr->dirfd, FT_TABLE_NAME, 0);
		unlinkat(sr->dirfd, SPILL_JOURNAL_NAME, 0);
		if (unlinkat(sr->pdirfd, sr->name, AT_REMOVEDIR) < 0 && errno == ENOTEMPTY &&
		    written && !sr->unmerged && !sr->keep)
			fprintf(stderr,
				"forktrace: warning: %s: files written there after the run "
				"ended are left there\n",
				sr->dir);
		close(sr->dirfd);
	}
	for (size_t i = 0; i < sr->nmerged; i++)
		free(sr->merged[i]);
	free(sr->merged);
	if (sr->pdirfd >= 0)
		close(sr->pdirfd);
	memset(sr, 0, sizeof(*sr));
	sr->pdirfd = sr->dirfd = -1;
}
