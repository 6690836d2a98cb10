/*
 * fork_tree: a binary tree of processes, three levels of forks under the
 * root (1 + 2 + 4 + 8 = 15 processes). Every node forks two children and
 * waits for both; every node exits with a code that names its place in the
 * tree, so a test can check each parent edge from the exit codes alone:
 *
 *   depth 0 (root): 0     depth 1: 20 + i    depth 2: 30 + i    leaves: 10 + i
 *
 * where i is the node's index within its depth (children of node i are
 * 2i and 2i + 1). A node whose child ended with the wrong status exits 99.
 */
#include "internal.h"

#define TREE_DEPTH 3

static int node_code(int depth, int index)
{
	switch (depth) {
	case 0:
		return 0;
	case 1:
		return 20 + index;
	case 2:
		return 30 + index;
	default:
		return 10 + index;
	}
}

/* Runs the node at (depth, index) and returns the code it must exit with. */
static int run_node(int depth, int index)
{
	pid_t kids[2];
	int i, ok = 1;

	if (depth == TREE_DEPTH)
		return node_code(depth, index);
	for (i = 0; i < 2; i++) {
		kids[i] = fork();
		if (kids[i] < 0)
			tp_die("fork");
		if (kids[i] == 0)
			exit(run_node(depth + 1, index * 2 + i));
	}
	for (i = 0; i < 2; i++) {
		int st = tp_wait(kids[i]);
		int want = node_code(depth + 1, index * 2 + i);

		if (!WIFEXITED(st) || WEXITSTATUS(st) != want) {
			fprintf(stderr,
				"fork_tree: child %d of (%d,%d): status 0x%x, expected %d\n", i,
				depth, index, st, want);
			ok = 0;
		}
	}
	return ok ? node_code(depth, index) : 99;
}

int main(void)
{
	int code = run_node(0, 0);

	if (code == 0)
		printf("fork_tree ok\n");
	return code;
}
