/*
 * critpath - the critical path of a trace (docs/INSIGHT.md, defined for
 * readers in docs/TRACE_FORMAT.md "Critical path"): the chain of processes,
 * and each parent's own time between them, that decided when the trace
 * ended.
 *
 * The merge feeds it every process it writes (from the forktrace_process
 * events, with trace pids and trace times) and every wait mark, and
 * computes it once at the end; sinks read it from sink_meta at end.
 * Memory grows with the number of processes and waits only.
 */
#ifndef FT_COMBINE_CRITPATH_H
#define FT_COMBINE_CRITPATH_H

#include <stddef.h>
#include <stdint.h>

typedef struct critpath critpath;

/* One step: process pid's own time [start_ns, end_ns), when no child of
 * it was on the path. name borrowed from the critpath. */
typedef struct critpath_step {
	int64_t pid;
	const char *name;
	int64_t start_ns;
	int64_t end_ns;
} critpath_step;

/* Constructor; NULL on allocation failure. */
critpath *critpath_new(void);
/* critpath_free(NULL) is a no-op. */
void critpath_free(critpath *cp);

/*
 * A process as the merge writes it: pid its trace pid, host_pid the pid it
 * had on its host (forktrace_process's "pid": what its parent's waits
 * name; it differs from the trace pid when the pid was reused or a
 * combine remapped it), parent its parent's trace pid (-1: none known),
 * its lifetime (-1: unknown), its name, its host (NULL: the trace's). A
 * process on another host than its parent (a node's root under its ssh)
 * was launched there, and its parent's waits never name it.
 */
typedef struct critpath_proc {
	int64_t pid;
	int64_t host_pid;
	int64_t parent;
	int64_t start_ns;
	int64_t end_ns;
	const char *name; /* copied; NULL: "?" */
	const char *host; /* copied */
} critpath_proc;

/* Adds a process (p borrowed for the call). Returns 0 or -ENOMEM. */
int critpath_add(critpath *cp, const critpath_proc *p);
/* critpath_add of a process whose host pid is its trace pid, on the
 * trace's host. */
int critpath_add_process(critpath *cp, int64_t pid, int64_t parent, int64_t start_ns,
			 int64_t end_ns, const char *name);
/* Process pid (trace pid) reaped child (the pid its wait returned: a host
 * pid, as in a wait mark's args) at ts_ns. Returns 0 or -ENOMEM. */
int critpath_add_wait(critpath *cp, int64_t pid, int64_t child, int64_t ts_ns);

/* Computes the path from what was added. Returns 0, -ENOENT when there is
 * no process tree to walk (no process with a known start), or -ENOMEM. */
int critpath_compute(critpath *cp);

/* The steps in time order (valid until critpath_free); 0 before compute. */
size_t critpath_steps(const critpath *cp, const critpath_step **out);
/* The path's span: the root's start and the trace's end (-1 before). */
int64_t critpath_start_ns(const critpath *cp);
int64_t critpath_end_ns(const critpath *cp);

#endif /* FT_COMBINE_CRITPATH_H */
