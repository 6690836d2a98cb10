/*
 * model_fixture.h - the hand-built model of the combine/ unit tests
 * (model_fixture.c).
 */
#ifndef FT_TESTS_MODEL_FIXTURE_H
#define FT_TESTS_MODEL_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "events.h"
#include "model.h"

/* Everything an ostream wrote to a memfd, NUL-terminated; caller frees. */
char *read_back(int fd, size_t *len);
/* A segment of p with these fields (strings copied into t). */
model_segment *add_seg(model_trace *t, model_process *p, const char *exe, const char *const *argv,
		       size_t argc, const char *cwd, int64_t start, int64_t end, bool instrumented);
/* The model check_events.py knows by heart (owned by the caller). */
model_trace *build_model(void);
/*
 * A multi-host run check_multihost.py knows by heart (each owned by the
 * caller): the head's model (host "head": bash 100 and its ssh children
 * 200, 300, 400; node4, launched by 400, is missing), node2's part
 * (launched by 200; clock samples of offset +1000 s and drift 50 ppm;
 * pids 100, 200, 201, ranks 0 and 1) and node3's part (launched by 300;
 * no samples, its realtime anchor 1500 s behind; lost at its 515 s, its
 * processes 100 and 150 host lost).
 */
model_trace *build_head_model(void);
model_trace *build_node2_part(void);
model_trace *build_node3_part(void);

/* events_write of t into a new file at path (level: gzip's, 0 for none). */
int write_file(const model_trace *t, const char *path, int level, events_stats *st);

#endif
