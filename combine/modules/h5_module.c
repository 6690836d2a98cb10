/*
 * h5_module.c - what libforktrace-h5.so exports (h5_module.h).
 */
#include <hdf5.h>

#include "h5_module.h"

/*
 * libhdf5 closes what is still open from an atexit handler. A file whose
 * H5Fclose failed (its last writes met a full disk: ENOSPC, EDQUOT, EFBIG)
 * stays half-closed in the library's tables, and that handler then
 * crashes on it (SIGSEGV in H5F__close_cb, 1.10.8): forktrace would die
 * of a signal after it has said the write failed, instead of exiting 1.
 * Every file and object is closed by the sinks and readers themselves,
 * so the handler has nothing to do: it is never installed. This must run
 * before the first other HDF5 call, hence a constructor of the module.
 */
__attribute__((constructor)) static void h5_module_init(void)
{
	H5dont_atexit();
}

__attribute__((visibility("default"))) const struct h5_module_api forktrace_h5_api = {
	.head = {sizeof(struct h5_module_api), FT_VERSION_STRING},
	.sink_new = h5w_sink_new,
	.sink_new_fd = h5w_sink_new_fd,
	.set_budget = h5w_set_budget,
	.buffered = h5w_buffered,
	.meta = h5r_meta,
	.read = h5r_read,
	.hosts = h5r_hosts,
};
