/*
 * jsonargs - the args objects of the marks the collector adds to the model
 * (model_mark.args_json). Each returns a JSON object text in t's arena, or
 * NULL on allocation failure.
 */
#ifndef FT_COLLECTOR_JSONARGS_H
#define FT_COLLECTOR_JSONARGS_H

#include <stdbool.h>
#include <stdint.h>

#include "model.h"

const char *args_exec_fail(model_trace *t, const char *path, int err);
const char *args_fork_fail(model_trace *t, const char *kind, int err);
const char *args_wait(model_trace *t, int64_t child, int status);
/* err > 0: the call failed with it (status -1). */
const char *args_shell(model_trace *t, const char *cmd, int status, int err);
const char *args_signal(model_trace *t, int signo);
/* A remote launch to host; untraced: its command was left as it was. */
const char *args_remote(model_trace *t, const char *host, bool untraced);

#endif
