/*
 * spill.h - reading the agents' spill files in `forktrace combine`
 * (spill.c). Internal to collector/.
 */
#ifndef FT_COLLECTOR_SPILL_H
#define FT_COLLECTOR_SPILL_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "internal.h"
#include "merge.h"

/* Beside the table link in a spill directory: the slots the collector
 * had read and freed (ptab_set_journal). */
#define SPILL_JOURNAL_NAME "table.journal"

/* A node-output file of a multi-host run read as an input (mstream.h):
 * one host's part, a model of its own. */
typedef struct spill_node {
	model_trace *model;
	char *path;
} spill_node;

typedef struct spill_inputs {
	/* The inputs of merge_inputs: the paths that are no spill files
	 * (borrowed from spill_prepare's), then the spill files' model. */
	merge_source *src;
	size_t nsrc;
	model_trace *model; /* the spill files' trace, or NULL */
	char *name;         /* its name: the spill paths given, comma-separated */
	proc_tree *pt;      /* what read them, and the tables they continue */
	ptab **tables;
	size_t nspill;  /* spill files read */
	size_t ntables; /* process tables of crashed runs read */
	int problems;   /* spill files that were damaged or unreadable */
	/* Node-output files (NAME.ftnode): one model each, among src. */
	spill_node *nodes;
	size_t nnodes, nodes_cap;
} spill_inputs;

/*
 * Sorts paths[0..n) (borrowed until spill_release) into spill files
 * (named *.ftspill, or starting with a forktrace frame; directories whose
 * files are all spill files, and the FT_TABLE_NAME link to the process
 * table of the run whose collector died), node-output files (named
 * *.ftnode, or starting with MSTREAM_FILE_MAGIC; in a directory, its
 * *.ftnode files in name order) and other inputs. The spill files are
 * read into one model, the way the collector reads connections, which is
 * the last input of sp->src; each node-output file is a model of its own
 * (sp->nodes), an input where its path was. What is wrong with a spill
 * or node-output file is printed, naming the file and where; the rest of
 * it is kept. Returns 0 or a negative errno; release sp with
 * spill_release either way.
 */
int spill_prepare(const char *const *paths, size_t n, spill_inputs *sp);

/* After merge_inputs of sp->src into res: says what of the spill files'
 * in-process events could not be read, and counts it in sp->problems. */
void spill_note_merged(spill_inputs *sp, const merge_result *res);

/* Frees what sp holds. */
void spill_release(spill_inputs *sp);

/*
 * The spill directory of `forktrace run` (OUTPUT.spill/): where agents
 * that could not reach the collector wrote, even while it ran (it had no
 * fd left for one more connection; a sandbox refused the socket), and
 * where the table's journal goes.
 */
typedef struct spill_run {
	char dir[PATH_MAX]; /* its path, for messages; "" without one */
	const char *name;   /* its last component, in dir */
	int pdirfd;         /* its parent (O_PATH), held: a rename is followed */
	int dirfd;          /* the directory once made or found, or -1 */
	ptab *t;            /* the run's table (borrowed) */
	char **merged;      /* names of the files merged (owned) */
	size_t nmerged, cap;
	size_t nread;    /* spill files merged */
	size_t unmerged; /* spill files (or the directory) that could not be */
	bool keep;       /* a file was merged but stays (not the caller's) */
} spill_run;

/* Before COMMAND starts: dir (borrowed) must be missing, or an empty
 * private directory of the caller. Prints why not and returns a
 * negative errno. */
int spill_run_check(const char *dir);
/* Once the table t exists (NULL: none), before COMMAND starts: the run's
 * spill directory is dir (absolute, checked by spill_run_check). Nothing
 * is made yet: the first time t gives a slot's pages back, the directory
 * is made with the link to t's file and the journal, so that a crash of
 * the collector loses nothing the agents wrote in the table. sr needs no
 * initialisation; release it with spill_run_finish. */
void spill_run_start(spill_run *sr, const char *dir, ptab *t);
/* After the tree ended, before the table's last read (ptab_finish):
 * applies every spill file of the directory to pt (t: the run's table,
 * or NULL), saying what could not be read. */
void spill_run_merge(spill_run *sr, proc_tree *pt, ptab *t);
/* Once the trace is written (or not; also for a run that never got to
 * spill_run_merge): the table link and journal go, the merged files too
 * when written, and the directory if empty; frees what sr holds. Again:
 * no-op. */
void spill_run_finish(spill_run *sr, bool written);

#endif
