/*
 * Environment merging for exec and spawn (STYLE "never" rule 7): whatever
 * envp a program passes (its own environ after unsetenv, `env -i`, Python's
 * env={}), the new image gets LD_PRELOAD with this agent and FORKTRACE_SOCK.
 *
 * Runs in vfork children and after multithreaded forks, so it only reads
 * the strings prepared by the constructor and writes the caller's stack
 * (struct agent_env) or a private mmap: no malloc, no locks, no getenv.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

static bool agent_env_is(const char *entry, const char *name, size_t n)
{
	return strncmp(entry, name, n) == 0 && entry[n] == '=';
}

/* Does an LD_PRELOAD value (space or colon separated) name this agent?
 * Compared by basename: the loader may have resolved a bare name. */
static bool agent_preload_has_agent(const char *v)
{
	size_t bl = strlen(agent_g.agent_base);

	while (*v) {
		const char *end = v + strcspn(v, " :");
		const char *base = v;
		const char *p;

		for (p = v; p < end; p++)
			if (*p == '/')
				base = p + 1;
		if ((size_t)(end - base) == bl && memcmp(base, agent_g.agent_base, bl) == 0)
			return true;
		v = *end ? end + 1 : end;
	}
	return false;
}

/*
 * extra, if not NULL, is one more "NAME=value" entry for the new image
 * (FORKTRACE_EXEC_TS); the caller keeps it alive until the exec. An entry
 * of the same name already in envp is dropped.
 */
void agent_env_merge(struct agent_env *e, char *const *envp, const char *extra)
{
	static char *const empty[] = {NULL};
	const char *preload = NULL;
	size_t n = 0, i, j, need, plen = 0;
	bool has_sock = false, add_preload, fix_preload;
	char **out, *pbuf;
	char *mem;

	e->map = NULL;
	e->maplen = 0;
	if (!envp)
		envp = empty;
	e->envp = (char **)envp;
	if (!agent_env_ready())
		return;
	for (n = 0; envp[n]; n++) {
		if (agent_env_is(envp[n], FT_ENV_EXEC_TS, sizeof(FT_ENV_EXEC_TS) - 1))
			extra = extra ? extra : "";
		else if (agent_env_is(envp[n], FT_ENV_PRELOAD, sizeof(FT_ENV_PRELOAD) - 1))
			preload = envp[n] + sizeof(FT_ENV_PRELOAD);
		else if (agent_env_is(envp[n], FT_ENV_SOCK, sizeof(FT_ENV_SOCK) - 1))
			has_sock = true;
	}
	add_preload = preload == NULL;
	fix_preload = preload && !agent_preload_has_agent(preload);
	if (has_sock && !add_preload && !fix_preload && !extra)
		return;

	/* Room for the vector (n entries, up to three added, NULL) and for a
	 * rewritten "LD_PRELOAD=<agent> <old>". */
	need = (n + 4) * sizeof(char *);
	if (fix_preload) {
		plen =
		    sizeof(FT_ENV_PRELOAD) + strlen(agent_g.agent_path) + 1 + strlen(preload) + 1;
		need += plen;
	}
	if (need <= sizeof(e->area)) {
		mem = e->area;
	} else {
		e->maplen = need;
		mem = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (mem == MAP_FAILED) {
			/* Leave envp as it was: the child goes untraced, but
			 * the program's exec still happens. */
			e->maplen = 0;
			return;
		}
		e->map = mem;
	}
	out = (char **)mem;
	pbuf = mem + (n + 4) * sizeof(char *);
	if (fix_preload) {
		char *p = pbuf;
		size_t al = strlen(agent_g.agent_path);

		memcpy(p, FT_ENV_PRELOAD "=", sizeof(FT_ENV_PRELOAD));
		p += sizeof(FT_ENV_PRELOAD);
		memcpy(p, agent_g.agent_path, al);
		p += al;
		*p++ = ' ';
		strcpy(p, preload);
	}
	for (i = 0, j = 0; i < n; i++) {
		if (agent_env_is(envp[i], FT_ENV_EXEC_TS, sizeof(FT_ENV_EXEC_TS) - 1))
			continue;
		if (fix_preload &&
		    agent_env_is(envp[i], FT_ENV_PRELOAD, sizeof(FT_ENV_PRELOAD) - 1))
			out[j++] = pbuf;
		else
			out[j++] = envp[i];
	}
	if (add_preload)
		out[j++] = agent_g.env_preload;
	if (!has_sock)
		out[j++] = agent_g.env_sock;
	if (extra && *extra)
		out[j++] = (char *)extra;
	out[j] = NULL;
	e->envp = out;
}

void agent_env_release(struct agent_env *e)
{
	int saved = errno;

	if (e->map)
		munmap(e->map, e->maplen);
	e->map = NULL;
	errno = saved;
}

/* "<ns>[:<ticks>]": a value with anything else after the digits gives no
 * ticks. */
uint64_t agent_env_take_exec_ts(char **envp, uint64_t *ticks)
{
	uint64_t v = 0;
	size_t i, j;

	*ticks = 0;
	if (!envp)
		return 0;
	for (i = 0, j = 0; envp[i]; i++) {
		if (agent_env_is(envp[i], FT_ENV_EXEC_TS, sizeof(FT_ENV_EXEC_TS) - 1)) {
			const char *p = envp[i] + sizeof(FT_ENV_EXEC_TS);
			uint64_t t = 0;

			for (v = 0; *p >= '0' && *p <= '9'; p++)
				v = v * 10 + (uint64_t)(*p - '0');
			if (*p == ':' && p[1]) {
				for (p++; *p >= '0' && *p <= '9'; p++)
					t = t * 10 + (uint64_t)(*p - '0');
				*ticks = *p ? 0 : t;
			}
			continue;
		}
		envp[j++] = envp[i];
	}
	envp[j] = NULL;
	return v;
}
