/*
 * h5_module.h - the HDF5 writer and reader live in a module of their own,
 * libforktrace-h5.so, loaded with dlopen the first time a trace is written
 * or read as HDF5 (h5load.c). libhdf5 pulls in about forty libraries
 * (curl, TLS, Kerberos, LDAP for its remote drivers); linked into the
 * forktrace binary they cost every run, JSON or not, 5-6 ms of loading
 * before the traced command even starts.
 *
 * The module exports one symbol, H5_MODULE_SYMBOL, a struct h5_module_api.
 * Its functions are those of h5.h, without the signature check that
 * h5load.c makes before it loads the module. The contract between the
 * module (sinks/sink_h5.c, readers/reader_h5.c, modules/h5_module.c) and
 * its loader (modules/h5load.c): the collector does not use it
 * (tests/layout checks it).
 */
#ifndef FT_COMBINE_H5_MODULE_H
#define FT_COMBINE_H5_MODULE_H

#include "h5.h"
#include "module.h"

#define H5_MODULE_NAME "libforktrace-h5.so"
#define H5_MODULE_SYMBOL "forktrace_h5_api"

struct h5_module_api {
	/* sizeof(struct h5_module_api) and the version of the build that made
	 * the module: a module of another build is refused. */
	struct module_head head;
	trace_sink *(*sink_new)(const char *path, const events_opts *opts, int *err);
	trace_sink *(*sink_new_fd)(int fd, const events_opts *opts, int *err);
	void (*set_budget)(trace_sink *s, size_t bytes);
	size_t (*buffered)(const trace_sink *s);
	int (*meta)(const char *path, model_trace *meta, uint64_t *processes);
	int (*read)(const char *path, trace_sink *sink, model_trace *meta);
	int (*hosts)(const char *path, model_trace *arena, sink_host **hosts, size_t *n);
};

/* In the module (sink_h5.c, reader_h5.c): h5.h's functions. */
trace_sink *h5w_sink_new(const char *path, const events_opts *opts, int *err);
trace_sink *h5w_sink_new_fd(int fd, const events_opts *opts, int *err);
void h5w_set_budget(trace_sink *s, size_t bytes);
size_t h5w_buffered(const trace_sink *s);
int h5r_meta(const char *path, model_trace *meta, uint64_t *processes);
int h5r_read(const char *path, trace_sink *sink, model_trace *meta);
int h5r_hosts(const char *path, model_trace *arena, sink_host **hosts, size_t *n);

#endif /* FT_COMBINE_H5_MODULE_H */
