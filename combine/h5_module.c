/*
 * h5_module.c - what libforktrace-h5.so exports (h5_module.h).
 */
#include "h5_module.h"

__attribute__((visibility("default"))) const struct ft_h5_api forktrace_h5_api = {
	.head = {sizeof(struct ft_h5_api), FT_VERSION_STRING},
	.sink_new = h5w_sink_new,
	.sink_new_fd = h5w_sink_new_fd,
	.set_budget = h5w_set_budget,
	.buffered = h5w_buffered,
	.meta = h5r_meta,
	.read = h5r_read,
};
