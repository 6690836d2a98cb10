/*
 * regfile.c - opening a file only if it is a regular one (regfile.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "regfile.h"

/* The fallback without /proc: the open itself may then reach a device
 * that was swapped in after the check, but never blocks on a FIFO. */
static int open_same(const char *path, const struct stat *want)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	int fl;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || st.st_dev != want->st_dev || st.st_ino != want->st_ino ||
	    !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	return fd;
}

int regfile_open(const char *path)
{
	char proc[48];
	struct stat st;
	int pfd, fd;

	pfd = open(path, O_PATH | O_CLOEXEC);
	if (pfd < 0)
		return -errno;
	if (fstat(pfd, &st) < 0) {
		fd = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		fd = -EINVAL;
		goto out;
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
	fd = open(proc, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		fd = errno == ENOENT ? open_same(path, &st) : -errno;
out:
	close(pfd);
	return fd;
}
