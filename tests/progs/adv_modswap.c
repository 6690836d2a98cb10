/*
 * A program that replaces a library it loaded (tests/e2e/test_adv_inputs.py):
 * the trace names the library's functions from its file when the trace
 * is written, after the program ended, and a program can put anything at
 * that path by then.
 *
 *   adv_modswap LIB MODE   dlopens LIB (libev_plugin.so, built with
 *                          -finstrument-functions), calls plugin_mul, then
 *                          puts in LIB's place, by MODE:
 *     fifo      a FIFO nobody writes to
 *     dir       a directory
 *     devzero   a symbolic link to /dev/zero
 *     sparse    a 1 TiB sparse regular file
 *     debuglink LIB stays; FIFOs where separate debuginfo is looked for
 *               (LIB.debug and .debug/LIB.debug beside it)
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "internal.h"

int main(int argc, char **argv)
{
	int (*mul)(int, int);
	char path[PATH_MAX + 32];
	const char *lib, *mode;
	void *h;
	int fd;

	if (argc != 3)
		tp_die("usage: adv_modswap LIB fifo|dir|devzero|sparse|debuglink");
	lib = argv[1];
	mode = argv[2];
	h = dlopen(lib, RTLD_NOW);
	if (!h)
		tp_die(dlerror());
	mul = (int (*)(int, int))dlsym(h, "plugin_mul");
	if (!mul || mul(6, 7) != 42)
		tp_die("plugin_mul");
	if (strcmp(mode, "debuglink") == 0) {
		char *slash = strrchr(lib, '/');

		if (!slash)
			tp_die("LIB must be a path with a directory");
		snprintf(path, sizeof(path), "%s.debug", lib);
		if (mkfifo(path, 0600) < 0)
			tp_die("mkfifo LIB.debug");
		snprintf(path, sizeof(path), "%.*s/.debug", (int)(slash - lib), lib);
		if (mkdir(path, 0700) < 0)
			tp_die("mkdir .debug");
		snprintf(path, sizeof(path), "%.*s/.debug%s.debug", (int)(slash - lib), lib, slash);
		if (mkfifo(path, 0600) < 0)
			tp_die("mkfifo .debug/LIB.debug");
		return 0;
	}
	/* The library stays mapped; only its name now leads elsewhere. */
	if (unlink(lib) < 0)
		tp_die("unlink LIB");
	if (strcmp(mode, "fifo") == 0) {
		if (mkfifo(lib, 0600) < 0)
			tp_die("mkfifo");
	} else if (strcmp(mode, "dir") == 0) {
		if (mkdir(lib, 0700) < 0)
			tp_die("mkdir");
	} else if (strcmp(mode, "devzero") == 0) {
		if (symlink("/dev/zero", lib) < 0)
			tp_die("symlink");
	} else if (strcmp(mode, "sparse") == 0) {
		fd = open(lib, O_WRONLY | O_CREAT | O_EXCL, 0600);
		if (fd < 0 || ftruncate(fd, (off_t)1 << 40) < 0)
			tp_die("sparse file");
		close(fd);
	} else {
		tp_die("unknown mode");
	}
	return 0;
}
