/*
 * h5load.c - h5.h's functions, forwarded to libforktrace-h5.so, which is
 * loaded on first use (why: h5_module.h). Only reader_h5_is is answered
 * here: telling an HDF5 file by its signature needs no HDF5.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h5_module.h"
#include "module.h"

static const char h5_signature[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};

static const struct h5_module_api *h5_api;
static pthread_once_t h5_once = PTHREAD_ONCE_INIT;

/* Loads the module once; says why on stderr when it cannot. Never
 * closed: its sinks may live until exit. */
static void h5_load(void)
{
	h5_api = module_load(H5_MODULE_NAME, H5_MODULE_SYMBOL, sizeof(*h5_api),
			     "HDF5 support is missing");
}

/* The module, or NULL (with *err = -ELIBACC) when it cannot be loaded. */
static const struct h5_module_api *h5_get(int *err)
{
	pthread_once(&h5_once, h5_load);
	if (!h5_api)
		*err = -ELIBACC;
	return h5_api;
}

int sink_h5_load(void)
{
	int err = 0;

	return h5_get(&err) ? 0 : err;
}

trace_sink *sink_h5_new(const char *path, const events_opts *opts, int *err)
{
	const struct h5_module_api *api = h5_get(err);

	return api ? api->sink_new(path, opts, err) : NULL;
}

trace_sink *sink_h5_new_fd(int fd, const events_opts *opts, int *err)
{
	const struct h5_module_api *api = h5_get(err);

	return api ? api->sink_new_fd(fd, opts, err) : NULL;
}

/* s is a sink of the module, so the module is loaded. */
void sink_h5_set_budget(trace_sink *s, size_t bytes)
{
	h5_api->set_budget(s, bytes);
}

size_t sink_h5_buffered(const trace_sink *s)
{
	return h5_api->buffered(s);
}

int reader_h5_is(const char *path)
{
	char buf[8];
	ssize_t n;
	struct stat st;
	int fd;

	/* Not a stream: a FIFO would wait here for its writer, and what is
	 * read here would be lost to its reader. */
	if (stat(path, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return 0;
	}
	n = pread(fd, buf, sizeof(buf), 0);
	if (n < 0) {
		n = -errno;
		close(fd);
		return (int)n;
	}
	close(fd);
	return n == (ssize_t)sizeof(buf) && memcmp(buf, h5_signature, sizeof(buf)) == 0;
}

/* Ours to read: an HDF5 file (-EINVAL if not), and the module loads. */
static const struct h5_module_api *h5_for_reading(const char *path, int *err)
{
	int is = reader_h5_is(path);

	if (is <= 0) {
		*err = is < 0 ? is : -EINVAL;
		return NULL;
	}
	return h5_get(err);
}

int reader_h5_meta(const char *path, model_trace *meta, uint64_t *processes)
{
	int err = 0;
	const struct h5_module_api *api = h5_for_reading(path, &err);

	return api ? api->meta(path, meta, processes) : err;
}

int reader_h5_hosts(const char *path, model_trace *arena, sink_host **hosts, size_t *n)
{
	int err = 0;
	const struct h5_module_api *api = h5_for_reading(path, &err);

	*hosts = NULL;
	*n = 0;
	return api ? api->hosts(path, arena, hosts, n) : err;
}

int reader_h5_read(const char *path, trace_sink *sink, model_trace *meta)
{
	int err = 0;
	const struct h5_module_api *api = h5_for_reading(path, &err);

	return api ? api->read(path, sink, meta) : err;
}
