/*
 * report.c - what `forktrace run --report` and `forktrace report` share:
 * the report options (--include, --exclude, --pids) and writing a live
 * model's report through the HTML sink; and the output file of every
 * subcommand (written to a temporary sibling, put in place only when
 * complete).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "internal.h"
#include "sink.h"

static int push(const char ***v, size_t *n, const char *s)
{
	const char **q = realloc(*v, (*n + 2) * sizeof(*q));

	if (q == NULL)
		return -ENOMEM;
	q[(*n)++] = s;
	q[*n] = NULL;
	*v = q;
	return 0;
}

int report_opt(report_opts *ro, int opt, const char *arg)
{
	switch (opt) {
	case REPORT_OPT_INCLUDE:
		return push(&ro->include, &ro->ninclude, arg);
	case REPORT_OPT_EXCLUDE:
		return push(&ro->exclude, &ro->nexclude, arg);
	case REPORT_OPT_PIDS:
		ro->pids = arg;
		return 0;
	default:
		return -EINVAL;
	}
}

int report_check(const report_opts *ro, const char *sub)
{
	htmlw_opts ho = {ro->include, ro->exclude, ro->pids};
	char msg[512];

	if (htmlw_check_opts(&ho, msg, sizeof(msg)) < 0)
		return cli_usage_error(sub, "%s", msg);
	return 0;
}

void report_opts_free(report_opts *ro)
{
	free(ro->include);
	free(ro->exclude);
	ro->include = ro->exclude = NULL;
	ro->ninclude = ro->nexclude = 0;
}

int out_file_open(out_file *rf, const char *path, const char *what)
{
	struct stat st;
	int n;

	rf->path = path;
	rf->fd = -1;
	rf->tmp[0] = '\0';
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		fprintf(stderr, "forktrace: cannot write the %s to '%s': %s\n", what, path,
			strerror(EISDIR));
		return -EISDIR;
	}
	n = snprintf(rf->tmp, sizeof(rf->tmp), "%s.tmp-XXXXXX", path);
	if (n < 0 || (size_t)n >= sizeof(rf->tmp)) {
		rf->tmp[0] = '\0';
		fprintf(stderr, "forktrace: cannot write the %s to '%s': name too long\n", what,
			path);
		return -ENAMETOOLONG;
	}
	rf->fd = mkostemp(rf->tmp, O_CLOEXEC);
	if (rf->fd < 0) {
		int err = errno;

		rf->tmp[0] = '\0';
		fprintf(stderr, "forktrace: cannot write the %s to '%s': %s\n", what, path,
			strerror(err));
		return -err;
	}
	fchmod(rf->fd, 0644 & ~cli_umask());
	return 0;
}

/*
 * Puts the finished temporary file at path, atomically: a reader of path
 * sees the old file or the new one, whole. rename(2) would do, but when
 * path exists ext4 (auto_da_alloc) writes the new file's data out before
 * the rename returns: 6 ms for a 3 MB trace on the benchmark machine, at
 * every re-run, growing with the trace. Exchanging the two names, then
 * removing the old file under the temporary name, is as atomic for
 * readers and lets the data go out in the background. What it gives up
 * is that flush's protection against a crash soon after: the trace may
 * then be empty, as any file written without fsync may. rename where the
 * exchange cannot be done (no file at path yet, or a file system without
 * RENAME_EXCHANGE).
 */
static int replace_path(const char *tmp, const char *path)
{
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_EXCHANGE) == 0) {
		if (unlink(tmp) == 0)
			return 0;
		/* What was at path is no file (a directory made meanwhile):
		 * put it back, and fail as rename would have. Should even
		 * that fail, the trace stays at path and the directory at
		 * the temporary name, and the error is still reported. */
		int err = errno;

		(void)renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_EXCHANGE);
		return -err;
	}
	return rename(tmp, path) < 0 ? -errno : 0;
}

int out_file_commit(out_file *rf)
{
	int err = 0;

	if (close(rf->fd) < 0)
		err = -errno;
	rf->fd = -1;
	if (err == 0)
		err = replace_path(rf->tmp, rf->path);
	if (err == 0)
		rf->tmp[0] = '\0';
	return err;
}

void out_file_abort(out_file *rf)
{
	if (rf->fd >= 0)
		close(rf->fd);
	rf->fd = -1;
	if (rf->tmp[0] != '\0')
		unlink(rf->tmp);
	rf->tmp[0] = '\0';
}

int report_write_model(const model_trace *t, int fd, const report_opts *ro, merge_stats *stats)
{
	htmlw_opts ho = {ro->include, ro->exclude, ro->pids};
	trace_sink *s;
	int err = 0;

	s = sink_html_new(fd, &ho, &err);
	if (s == NULL)
		return err;
	return merge_model_write(t, s, stats);
}
