/*
 * regfile - opening for reading a file that someone else named: a module
 * path from a traced program's MODULE frame, an entry of a directory of
 * traces. Such a path may name a FIFO (whose open blocks until a writer
 * comes, forever), a device (whose open alone may act: a watchdog, a
 * tape, a terminal), a socket or a directory. Only a regular file is
 * opened, and nothing else is ever opened for I/O.
 *
 * Used by combine/'s readers and the symbol module (built into both); the
 * collector does not use it (tests/layout checks it).
 */
#ifndef FT_COMBINE_REGFILE_H
#define FT_COMBINE_REGFILE_H

/*
 * Opens path read-only (O_CLOEXEC) if it is a regular file: the path is
 * resolved once with O_PATH (which opens no device and waits for no FIFO
 * writer), that very inode is checked with fstat, and reopened through
 * /proc/self/fd; without /proc, it is opened O_NONBLOCK and must be the
 * same inode. Returns the fd (the caller owns it), -EINVAL when path is
 * not a regular file, or another negative errno.
 */
int regfile_open(const char *path);

#endif /* FT_COMBINE_REGFILE_H */
