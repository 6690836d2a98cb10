/*
 * exectarget.c - will the image an exec starts load the agent?
 *
 * A fork child that has not spoken yet skips announcing its exec when the
 * new image will introduce itself: a dynamically linked ELF of our class,
 * not setuid/setgid (the loader ignores LD_PRELOAD paths there), or a
 * script (its interpreter is almost always dynamic). Anything else - a
 * static binary, a setuid program, a file we cannot read - is announced
 * the old way, so the trace still names the image the agent cannot enter.
 *
 * Runs in fork children, possibly of multithreaded programs: only
 * async-signal-safe calls (open, fstat, pread, access, close) and stack
 * memory.
 */
#include <elf.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

extern char **environ;

#if defined(__x86_64__)
#define AGENT_ELF_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define AGENT_ELF_MACHINE EM_AARCH64
#else
#define AGENT_ELF_MACHINE EM_NONE /* unknown: always announce the exec */
#endif

/* Does the file behind fd load an ELF interpreter (and so LD_PRELOAD)? */
static bool image_loads_agent(int fd)
{
	struct stat st;
	unsigned char hdr[sizeof(Elf64_Ehdr)];
	Elf64_Ehdr eh;
	Elf64_Phdr ph[16];

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (st.st_mode & (S_ISUID | S_ISGID)))
		return false;
	ssize_t n = pread(fd, hdr, sizeof(hdr), 0);
	if (n >= 2 && hdr[0] == '#' && hdr[1] == '!')
		return true;
	if (n < (ssize_t)sizeof(hdr) || memcmp(hdr, ELFMAG, SELFMAG) != 0 ||
	    hdr[EI_CLASS] != ELFCLASS64)
		return false;
	memcpy(&eh, hdr, sizeof(eh));
	if (eh.e_machine != AGENT_ELF_MACHINE || eh.e_phentsize != sizeof(Elf64_Phdr) ||
	    eh.e_phnum == 0 || eh.e_phnum == PN_XNUM)
		return false;
	for (unsigned i = 0; i < eh.e_phnum; i += 16) {
		unsigned k = eh.e_phnum - i < 16 ? eh.e_phnum - i : 16;
		off_t off = (off_t)eh.e_phoff + (off_t)i * (off_t)sizeof(Elf64_Phdr);
		if (pread(fd, ph, k * sizeof(Elf64_Phdr), off) != (ssize_t)(k * sizeof(Elf64_Phdr)))
			return false;
		for (unsigned j = 0; j < k; j++)
			if (ph[j].p_type == PT_INTERP)
				return true;
	}
	return false;
}

/* Opens what execvp would run for a bare name: the first executable file
 * along $PATH (glibc's default when unset). Reads environ as execvp does. */
static int open_in_path(const char *file)
{
	const char *path = "/bin:/usr/bin";
	size_t flen = strlen(file);
	char buf[PATH_MAX];

	for (char **e = environ; e && *e; e++) {
		if (strncmp(*e, "PATH=", 5) == 0) {
			path = *e + 5;
			break;
		}
	}
	for (;;) {
		const char *end = strchrnul(path, ':');
		size_t dlen = (size_t)(end - path);

		if (dlen + flen + 2 <= sizeof(buf)) {
			memcpy(buf, dlen ? path : ".", dlen ? dlen : 1);
			size_t at = dlen ? dlen : 1;
			buf[at] = '/';
			memcpy(buf + at + 1, file, flen + 1);
			if (access(buf, X_OK) == 0) {
				int fd = open(buf, O_RDONLY | O_CLOEXEC);
				if (fd >= 0)
					return fd;
			}
		}
		if (!*end)
			return -1;
		path = end + 1;
	}
}

bool agent_exec_target_traced(unsigned kind, int dirfd, const char *path, int flags)
{
	int fd;
	bool own = true;

	switch (kind) {
	case FT_EXEC_FEXECVE:
		fd = dirfd;
		own = false;
		break;
	case FT_EXEC_EXECVEAT:
		if ((flags & AT_EMPTY_PATH) && path && !*path) {
			fd = dirfd;
			own = false;
		} else {
			fd = path ? openat(dirfd, path, O_RDONLY | O_CLOEXEC) : -1;
		}
		break;
	case FT_EXEC_EXECVP:
	case FT_EXEC_EXECVPE:
	case FT_EXEC_EXECLP:
		if (!path || !*path)
			return false;
		fd = strchr(path, '/') ? open(path, O_RDONLY | O_CLOEXEC) : open_in_path(path);
		break;
	default:
		fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
		break;
	}
	if (fd < 0)
		return false;
	bool traced = image_loads_agent(fd);
	if (own)
		syscall(SYS_close, fd); /* not through our close hook */
	return traced;
}
