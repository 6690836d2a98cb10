/*
 * ftnode_write - a node-output file (combine/include/mstream.h) from real
 * traced processes, for the e2e tests of .ftnode inputs (test_ftnode.py)
 * until a node collector writes them itself: the agents' spill files
 * INPUTS are read the way `forktrace combine` reads them (spill_prepare:
 * the collector's own decoder and process tree), and the model they make
 * is written with mstream_write_file.
 *
 * Usage: ftnode_write OUT.ftnode HOST SPILL_FILE_OR_DIR...
 * HOST becomes the model's host and the node part's launched_as, so that
 * two files of the same spill files stand for two hosts.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "mstream.h"
#include "spill.h"

int main(int argc, char **argv)
{
	spill_inputs sp;
	int fd, err;

	if (argc < 4) {
		fprintf(stderr, "usage: ftnode_write OUT.ftnode HOST SPILL_FILE_OR_DIR...\n");
		return 2;
	}
	err = spill_prepare((const char *const *)argv + 3, (size_t)(argc - 3), &sp);
	if (err < 0 || sp.model == NULL) {
		fprintf(stderr, "ftnode_write: no spill files read (%s)\n", strerror(-err));
		spill_release(&sp);
		return 1;
	}
	sp.model->host = model_strdup(sp.model, argv[2]);
	sp.model->node.is_node = true;
	sp.model->node.launched_as = sp.model->host;
	sp.model->node.run_id = model_strdup(sp.model, "e2e-run");
	fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	err = fd < 0 ? -1 : mstream_write_file(sp.model, fd, true);
	if (fd < 0 || close(fd) < 0 || err < 0) {
		fprintf(stderr, "ftnode_write: %s: cannot write (%s)\n", argv[1],
			strerror(err < -1 ? -err : 5));
		spill_release(&sp);
		return 1;
	}
	spill_release(&sp);
	return 0;
}
