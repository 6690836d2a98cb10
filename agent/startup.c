/*
 * Start-up strings: the arena they are carved from, and the ones exec and
 * spawn merge into a new image's environment (the socket's address, the
 * process table's path, this agent's path, LD_PRELOAD), prepared by the
 * constructor, or before it from /proc/self/environ when a hook runs
 * first.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "internal.h"

/* The alen bytes at a and the blen at b, joined and '\0'-terminated in
 * the arena; NULL when it is full. */
char *agent_arena_join(const char *a, size_t alen, const char *b, size_t blen)
{
	char *p = agent_arena_take(alen + blen + 1, false);

	if (p) {
		memcpy(p, a, alen);
		memcpy(p + alen, b, blen);
		p[alen + blen] = '\0';
	}
	return p;
}

/*
 * This agent's path, as the loader opened it, is almost always an absolute
 * entry of LD_PRELOAD named like the library we build: forktrace run puts
 * it there. Taking it from there saves every image dladdr, one more
 * import for the loader to look up and a walk of its maps. Returns the
 * entry's length, 0 when there is no such entry (a renamed copy, a bare name the loader searched
 * for, /etc/ld.so.preload): the caller asks dladdr.
 */
static size_t agent_preload_entry(const char *preload, const char **entry)
{
	static const char name[] = AGENT_FILE_NAME;

	while (preload && *preload) {
		size_t n = 0;

		while (preload[n] && preload[n] != ' ' && preload[n] != ':')
			n++;
		if (preload[0] == '/' && n < PATH_MAX && n >= sizeof(name) &&
		    preload[n - sizeof(name)] == '/' &&
		    memcmp(preload + n - (sizeof(name) - 1), name, sizeof(name) - 1) == 0) {
			*entry = preload;
			return n;
		}
		preload += n + (preload[n] != '\0');
	}
	return 0;
}

/* Prepare the env strings used by exec/spawn merging. Returns 0 or -1. */
int agent_prepare_env(const char *sock, const char *preload)
{
	Dl_info info;
	const char *slash, *entry;
	size_t n = strlen(sock), len;

	if (n >= sizeof(agent_g.addr.sun_path))
		return -1;
	agent_g.addr.sun_family = AF_UNIX;
	memcpy(agent_g.addr.sun_path, sock, n + 1);
	agent_g.addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
	agent_g.env_sock = agent_arena_join(FT_ENV_SOCK "=", sizeof(FT_ENV_SOCK), sock, n);
	/* The process table lives beside the socket. */
	slash = strrchr(sock, '/');
	if (slash)
		agent_g.table_path = agent_arena_join(sock, (size_t)(slash - sock) + 1,
						      FT_TABLE_NAME, sizeof(FT_TABLE_NAME) - 1);

	len = agent_preload_entry(preload, &entry);
	if (!len) {
		if (!dladdr((void *)agent_prepare_env, &info) || !info.dli_fname)
			return -1;
		entry = info.dli_fname;
		len = strlen(entry);
		if (len >= PATH_MAX)
			return -1;
	}
	agent_g.agent_path = agent_arena_join(entry, len, "", 0);
	if (!agent_g.env_sock || !agent_g.agent_path)
		return -1;
	slash = strrchr(agent_g.agent_path, '/');
	agent_g.agent_base = slash ? slash + 1 : agent_g.agent_path;

	/* An envp without LD_PRELOAD gets the value this process started
	 * with (if it fits; else just this agent). */
	if (!preload || strlen(preload) >= PATH_MAX)
		preload = agent_g.agent_path;
	agent_g.env_preload = agent_arena_join(FT_ENV_PRELOAD "=", sizeof(FT_ENV_PRELOAD), preload,
					       strlen(preload));
	if (!agent_g.env_preload)
		return -1;
	__atomic_store_n(&agent_g.env_ready, 1, __ATOMIC_RELEASE);
	return 0;
}

/* Copies the value of entry e into out if e is "name=value" and it fits. */
static void agent_env_pick(const char *e, const char *name, char *out, size_t cap, bool *found)
{
	size_t n = strlen(name);

	if (strncmp(e, name, n) != 0 || e[n] != '=' || strlen(e + n + 1) >= cap)
		return;
	strcpy(out, e + n + 1);
	*found = true;
}

/*
 * A hook ran before the constructor: a .preinit_array function, or the
 * constructor of a library initialised before us (a program's DT_NEEDED
 * libraries are, LD_PRELOAD objects come later), started a process. Its
 * child must not lose the agent (STYLE "never" rule 7), and before libc's
 * own initialisation even environ is still NULL. So the exec strings are
 * prepared here, once, from /proc/self/environ: the environment the
 * process started with, which is what the constructor will read. Nothing
 * else is set up: recording starts with the constructor.
 */
static __attribute__((noinline)) bool agent_env_load(void);

bool agent_env_ready(void)
{
	static int tried;

	if (__atomic_load_n(&agent_g.env_ready, __ATOMIC_ACQUIRE))
		return true;
	if (__atomic_load_n(&agent_g.init_done, __ATOMIC_ACQUIRE) ||
	    __atomic_exchange_n(&tried, 1, __ATOMIC_ACQ_REL) || getauxval(AT_SECURE))
		return false;
	return agent_env_load();
}

/* The slow path of agent_env_ready, apart so that its 8 KiB of buffers
 * are not on the stack of every exec (a fork child pays a page fault for
 * each stack page it touches). */
static bool agent_env_load(void)
{
	char sock[sizeof(agent_g.addr.sun_path)];
	char preload[PATH_MAX];
	bool has_sock = false, has_preload = false;
	char buf[4096];
	size_t len = 0, start;
	bool skipping = false;
	ssize_t n;
	int fd, saved;

	saved = errno;
	fd = agent_sys_open("/proc/self/environ", O_RDONLY | O_CLOEXEC, 0);
	while (fd >= 0) {
		n = agent_sys_read(fd, buf + len, sizeof(buf) - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		/* Whole entries; one longer than buf is skipped (ours are
		 * shorter). */
		for (start = 0;;) {
			char *nul = memchr(buf + start, '\0', len - start);

			if (!nul)
				break;
			if (!skipping) {
				agent_env_pick(buf + start, FT_ENV_SOCK, sock, sizeof(sock),
					       &has_sock);
				agent_env_pick(buf + start, FT_ENV_PRELOAD, preload,
					       sizeof(preload), &has_preload);
			}
			skipping = false;
			start = (size_t)(nul - buf) + 1;
		}
		if (start == 0 && len == sizeof(buf)) {
			skipping = true;
			len = 0;
		} else {
			memmove(buf, buf + start, len - start);
			len -= start;
		}
	}
	if (fd >= 0)
		agent_sys_close(fd);
	if (has_sock && *sock)
		agent_prepare_env(sock, has_preload ? preload : NULL);
	errno = saved;
	return __atomic_load_n(&agent_g.env_ready, __ATOMIC_ACQUIRE);
}
