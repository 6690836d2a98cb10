/*
 * spill.h - reading the agents' spill files in `forktrace combine`
 * (spill.c). Internal to collector/.
 */
#ifndef FT_COLLECTOR_SPILL_H
#define FT_COLLECTOR_SPILL_H

#include <limits.h>
#include <stddef.h>

typedef struct spill_inputs {
	const char **paths; /* the inputs for combine_files (owned) */
	size_t npaths;
	char tmp[PATH_MAX]; /* the spill files' trace, "" when none */
	size_t nspill;      /* spill files read */
	int problems;       /* spill files that were damaged or unreadable */
} spill_inputs;

/*
 * Sorts paths[0..n) (borrowed) into spill files (named *.ftspill, or
 * starting with a forktrace frame; directories whose files are all spill
 * files) and other inputs. The spill files are read into one trace, the
 * way the collector reads connections, and written to a temporary JSON
 * file that takes their place among the inputs. What is wrong with a
 * spill file is printed, naming the file and the byte offset; the rest
 * of it is kept. Returns 0 or a negative errno; release sp with
 * spill_release either way.
 */
int spill_prepare(const char *const *paths, size_t n, spill_inputs *sp);

/* Frees sp and removes the temporary file. */
void spill_release(spill_inputs *sp);

#endif
