/*
 * spill.c - the agents' spill files as inputs of `forktrace combine`.
 *
 * An agent without a collector (none was started, or it died) writes the
 * frames it would have sent into a spill file of its own, one per process
 * image (docs/TRACE_FORMAT.md, "Spill files"). Reading them back is what
 * the collector does with a connection: each file's frames go through the
 * same decoder and process tree (proctree.c), then the model is written
 * through the same merge as a live run, into a temporary JSON file that
 * joins the other inputs of the combine. So a spill file gives the trace
 * `forktrace run` would have written, pid remapping, --align and every
 * output format included.
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

#include "internal.h"
#include "spill.h"

static bool has_spill_name(const char *name)
{
	return fnmatch("*.ftspill", name, 0) == 0;
}

/* A regular file that starts like a frame of our protocol. A stream ("-",
 * a FIFO, a pipe, a device) is not opened: its reader opens it once, and
 * what is read here would be lost to it (a FIFO's writer even gone). */
static bool sniff_spill(const char *path)
{
	unsigned char h[3];
	struct stat st;
	int fd;
	bool yes;

	if (strcmp(path, "-") == 0 || stat(path, &st) < 0 || !S_ISREG(st.st_mode))
		return false;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return false;
	yes = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && pread(fd, h, 3, 0) == 3 &&
	      h[0] == FT_WIRE_MAGIC0 && h[1] == FT_WIRE_MAGIC1 && h[2] == FT_WIRE_VERSION;
	close(fd);
	return yes;
}

static int push(char ***v, size_t *n, size_t *cap, char *s)
{
	if (s == NULL)
		return -ENOMEM;
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		char **nv = realloc(*v, nc * sizeof(*nv));

		if (nv == NULL) {
			free(s);
			return -ENOMEM;
		}
		*v = nv;
		*cap = nc;
	}
	(*v)[(*n)++] = s;
	return 0;
}

/* Applies the frames of one spill file to the tree. Returns 0, or -1
 * after saying what is wrong with the file (what came before the damage
 * is kept). */
static int read_spill(proc_tree *pt, const char *path, int64_t *last_ts)
{
	msgpack_unpacked up;
	proc_conn conn;
	struct stat st;
	const char *data;
	size_t off = 0;
	int fd, rc = 0;
	wire_frame f;
	int r;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "forktrace: %s: %s\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (st.st_size == 0) {
		fprintf(stderr, "forktrace: %s: empty spill file\n", path);
		close(fd);
		return -1;
	}
	data = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (data == MAP_FAILED) {
		fprintf(stderr, "forktrace: %s: %s\n", path, strerror(errno));
		return -1;
	}
	memset(&conn, 0, sizeof(conn));
	msgpack_unpacked_init(&up);
	while ((r = wire_next_frame(data + off, (size_t)st.st_size - off, FT_WIRE_MAX_PAYLOAD,
				    &f)) == 1) {
		wire_msg m;

		if (wire_decode(f.payload, f.len, f.type, &up, &m) < 0) {
			fprintf(stderr,
				"forktrace: %s: byte %zu: a malformed %s message; the frames "
				"before it are kept\n",
				path, off, wire_type_name(f.type));
			rc = -1;
			break;
		}
		if (proc_apply(pt, &conn, &m, m.ts) == -EPROTO) {
			fprintf(stderr, "forktrace: %s: byte %zu: expected a HELLO message first, "
					"found %s; not a spill file?\n",
				path, off, wire_type_name(f.type));
			rc = -1;
			break;
		}
		if (m.ts > *last_ts)
			*last_ts = m.ts;
		off += f.size;
	}
	if (r < 0) {
		fprintf(stderr, "forktrace: %s: byte %zu: %s; the frames before it are kept\n", path,
			off, wire_frame_strerror(r));
		rc = -1;
	} else if (r == 0 && off < (size_t)st.st_size) {
		/* A process killed while writing: everything up to its last
		 * whole frame counts. */
		fprintf(stderr, "forktrace: warning: %s: ends inside a frame at byte %zu (the "
				"process died while writing); the frames before it are kept\n",
			path, off);
	}
	proc_conn_closed(pt, &conn, *last_ts);
	msgpack_unpacked_destroy(&up);
	munmap((void *)data, (size_t)st.st_size);
	return rc;
}

/* Writes the model of the spill files to an unlinked-on-release temporary
 * JSON file. */
static int write_model(spill_inputs *sp, model_trace *t)
{
	const char *dir = getenv("TMPDIR");
	merge_stats stats;
	int fd, err;

	snprintf(sp->tmp, sizeof(sp->tmp), "%s/forktrace-spill-XXXXXX.json",
		 dir && *dir ? dir : "/tmp");
	fd = mkstemps(sp->tmp, 5);
	if (fd < 0) {
		err = -errno;
		fprintf(stderr, "forktrace: cannot create a temporary file in %s: %s\n",
			dir && *dir ? dir : "/tmp", strerror(errno));
		sp->tmp[0] = '\0';
		return err;
	}
	err = merge_write(t, fd, TRACE_FORMAT_JSON, NULL, &stats);
	if (close(fd) < 0 && err == 0)
		err = -errno;
	if (err < 0)
		fprintf(stderr, "forktrace: cannot write the spill files' trace to %s: %s\n",
			sp->tmp, strerror(-err));
	if (err == 0 && stats.corrupt_chunks) {
		fprintf(stderr, "forktrace: %llu chunks of in-process events in the spill files "
				"held a record that does not parse; their events from there on are "
				"missing\n",
			(unsigned long long)stats.corrupt_chunks);
		sp->problems++;
	}
	return err;
}

int spill_prepare(const char *const *paths, size_t n, spill_inputs *sp)
{
	char **spills = NULL;
	size_t nspills = 0, cap_spills = 0, cap_paths = 0;
	model_trace *t = NULL;
	proc_tree *pt = NULL;
	int64_t last_ts = 0;
	int err = 0;

	memset(sp, 0, sizeof(*sp));
	for (size_t i = 0; i < n && err == 0; i++) {
		struct stat st;
		bool others = false, found = false;
		DIR *d;
		struct dirent *de;

		if (stat(paths[i], &st) == 0 && S_ISDIR(st.st_mode) && (d = opendir(paths[i]))) {
			while ((de = readdir(d)) != NULL && err == 0) {
				if (de->d_name[0] == '.')
					continue;
				if (has_spill_name(de->d_name)) {
					char *full;

					if (asprintf(&full, "%s/%s", paths[i], de->d_name) < 0)
						full = NULL;
					err = push(&spills, &nspills, &cap_spills, full);
					found = true;
				} else {
					others = true;
				}
			}
			closedir(d);
			if (found && !others)
				continue; /* a spill directory: read here alone */
		} else if (has_spill_name(paths[i]) || sniff_spill(paths[i])) {
			err = push(&spills, &nspills, &cap_spills, strdup(paths[i]));
			continue;
		}
		if (err == 0)
			err = push((char ***)&sp->paths, &sp->npaths, &cap_paths, strdup(paths[i]));
	}
	if (err < 0 || nspills == 0)
		goto out;
	t = model_new();
	pt = t ? proc_tree_new(t) : NULL;
	if (!pt) {
		err = -ENOMEM;
		goto out;
	}
	t->origin = "forktrace spill files";
	for (size_t i = 0; i < nspills; i++)
		if (read_spill(pt, spills[i], &last_ts) < 0)
			sp->problems++;
	sp->nspill = nspills;
	proc_finish(pt, last_ts, true);
	t->start_ns = -1;
	t->end_ns = last_ts;
	err = write_model(sp, t);
	if (err == 0)
		err = push((char ***)&sp->paths, &sp->npaths, &cap_paths, strdup(sp->tmp));
out:
	for (size_t i = 0; i < nspills; i++)
		free(spills[i]);
	free(spills);
	proc_tree_free(pt);
	model_free(t);
	return err;
}

void spill_release(spill_inputs *sp)
{
	for (size_t i = 0; i < sp->npaths; i++)
		free((char *)sp->paths[i]);
	free(sp->paths);
	if (sp->tmp[0])
		unlink(sp->tmp);
	memset(sp, 0, sizeof(*sp));
}
