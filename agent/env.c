/*
 * Environment merging for exec and spawn (STYLE "never" rule 7): whatever
 * envp a program passes (its own environ, which the constructor stripped
 * of the agent's variables, or after unsetenv, `env -i`, Python's env={}),
 * the new image gets LD_PRELOAD with this agent, FORKTRACE_SOCK, and
 * FORKTRACE_SPILL and FORKTRACE_FUNCTIONS when this image had them.
 *
 * Runs in vfork children and after multithreaded forks, so it only reads
 * the strings prepared by the constructor and writes the caller's stack
 * (struct agent_env) or a private mmap: no malloc, no locks, no getenv.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

/* Is entry "<name>=..."? The first two letters decide for almost every
 * entry (a spawn or an exec checks each of the environment's entries, the
 * constructor several names against each): strncmp only after them. */
static bool agent_env_is(const char *entry, const char *name, size_t n)
{
	return entry[0] == name[0] && entry[1] == name[1] && strncmp(entry, name, n) == 0 &&
	       entry[n] == '=';
}

/* Entries agent_env_merge may add: LD_PRELOAD, FORKTRACE_SOCK,
 * FORKTRACE_SPILL, FORKTRACE_FUNCTIONS, FORKTRACE_EXEC_TS,
 * FORKTRACE_TABLE_FD, FORKTRACE_HEAD, FORKTRACE_REMOTE, FORKTRACE_RSH. */
#define AGENT_ENV_ADDED 9

/* Does an LD_PRELOAD value (space or colon separated) name this agent?
 * Compared by basename: the loader may have resolved a bare name. One
 * pass over the value. */
static bool agent_preload_has_agent(const char *v)
{
	size_t bl = strlen(agent_g.agent_base);
	const char *base = v;

	for (const char *p = v;; p++) {
		if (*p == '/') {
			base = p + 1;
		} else if (*p == ' ' || *p == ':' || *p == '\0') {
			if ((size_t)(p - base) == bl && memcmp(base, agent_g.agent_base, bl) == 0)
				return true;
			if (!*p)
				return false;
			base = p + 1;
		}
	}
}

bool agent_preload_strip(const char *v, char *out)
{
	size_t bl = strlen(agent_g.agent_base), len = strlen(v);
	const char *base = v, *start = v;

	for (const char *p = v;; p++) {
		if (*p == '/') {
			base = p + 1;
		} else if (*p == ' ' || *p == ':' || *p == '\0') {
			if ((size_t)(p - base) == bl && memcmp(base, agent_g.agent_base, bl) == 0) {
				/* [start, p) is the agent: drop it with the
				 * separator after it, else the one before. */
				size_t from = (size_t)(start - v), to = (size_t)(p - v);

				if (*p)
					to++;
				else if (from)
					from--;
				else
					return false;
				memcpy(out, v, from);
				memcpy(out + from, v + to, len - to + 1);
				return true;
			}
			if (!*p)
				break;
			base = start = p + 1;
		}
	}
	memcpy(out, v, len + 1);
	return true;
}

bool agent_env_is_ours(const char *e)
{
	return e[0] == 'F' && strncmp(e, "FORKTRACE_", 10) == 0 &&
	       (agent_env_is(e, FT_ENV_SOCK, sizeof(FT_ENV_SOCK) - 1) ||
		agent_env_is(e, FT_ENV_SPILL_DIR, sizeof(FT_ENV_SPILL_DIR) - 1) ||
		agent_env_is(e, FT_ENV_FUNCTIONS, sizeof(FT_ENV_FUNCTIONS) - 1) ||
		agent_env_is(e, FT_ENV_EXEC_TS, sizeof(FT_ENV_EXEC_TS) - 1) ||
		agent_env_is(e, FT_ENV_TABLE_FD, sizeof(FT_ENV_TABLE_FD) - 1) ||
		agent_env_is(e, FT_ENV_HEAD, sizeof(FT_ENV_HEAD) - 1) ||
		agent_env_is(e, FT_ENV_REMOTE, sizeof(FT_ENV_REMOTE) - 1) ||
		agent_env_is(e, FT_ENV_RSH, sizeof(FT_ENV_RSH) - 1));
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
	bool has_sock = false, has_spill = false, has_functions = false, has_head = false,
	     has_remote = false, has_rsh = false, add_preload, fix_preload, add_spill,
	     add_functions, add_remote, table;
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
		else if (agent_env_is(envp[n], FT_ENV_SPILL_DIR, sizeof(FT_ENV_SPILL_DIR) - 1))
			has_spill = true;
		else if (agent_env_is(envp[n], FT_ENV_FUNCTIONS, sizeof(FT_ENV_FUNCTIONS) - 1))
			has_functions = true;
		else if (agent_env_is(envp[n], FT_ENV_HEAD, sizeof(FT_ENV_HEAD) - 1))
			has_head = true;
		else if (agent_env_is(envp[n], FT_ENV_REMOTE, sizeof(FT_ENV_REMOTE) - 1))
			has_remote = true;
		else if (agent_env_is(envp[n], FT_ENV_RSH, sizeof(FT_ENV_RSH) - 1))
			has_rsh = true;
	}
	add_preload = preload == NULL;
	fix_preload = preload && !agent_preload_has_agent(preload);
	/* Where spill files go and whether functions are recorded hold for
	 * the whole tree, whatever environment a program passes on. */
	add_spill = agent_g.env_spill && !has_spill;
	add_functions = agent_g.env_functions && !has_functions;
	/* And so does launch following, with the variables as they came. */
	add_remote = (agent_g.env_head && !has_head) || (agent_g.env_remote && !has_remote) ||
		     (agent_g.env_rsh && !has_rsh);
	/* Under a seccomp filter: the table's fd goes along (agent_exec). */
	table = __atomic_load_n(&agent_g.table_keep, __ATOMIC_ACQUIRE) != 0;
	if (has_sock && !add_preload && !fix_preload && !extra && !add_spill && !add_functions &&
	    !add_remote && !table)
		return;

	/* Room for the vector (n entries, up to six added, NULL) and for a
	 * rewritten "LD_PRELOAD=<agent> <old>". */
	need = (n + AGENT_ENV_ADDED + 1) * sizeof(char *);
	if (fix_preload) {
		plen = sizeof(FT_ENV_PRELOAD) + strlen(agent_g.agent_path) + 1 + strlen(preload) +
		       1;
		need += plen;
	}
	if (need <= sizeof(e->area)) {
		mem = e->area;
	} else {
		e->maplen = need;
		mem = agent_sys_mmap(NULL, need, PROT_READ | PROT_WRITE,
				     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (mem == MAP_FAILED) {
			/* Leave envp as it was: the child goes untraced, but
			 * the program's exec still happens. */
			e->maplen = 0;
			return;
		}
		e->map = mem;
	}
	out = (char **)mem;
	pbuf = mem + (n + AGENT_ENV_ADDED + 1) * sizeof(char *);
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
		if (table && agent_env_is(envp[i], FT_ENV_TABLE_FD, sizeof(FT_ENV_TABLE_FD) - 1))
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
	if (add_spill)
		out[j++] = agent_g.env_spill;
	if (add_functions)
		out[j++] = agent_g.env_functions;
	if (agent_g.env_head && !has_head)
		out[j++] = agent_g.env_head;
	if (agent_g.env_remote && !has_remote)
		out[j++] = agent_g.env_remote;
	if (agent_g.env_rsh && !has_rsh)
		out[j++] = agent_g.env_rsh;
	if (extra && *extra)
		out[j++] = (char *)extra;
	if (table)
		out[j++] = agent_g.env_table;
	out[j] = NULL;
	e->envp = out;
}

void agent_env_release(struct agent_env *e)
{
	int saved = errno;

	if (e->map)
		agent_sys_munmap(e->map, e->maplen);
	e->map = NULL;
	errno = saved;
}

/*
 * FORKTRACE_EXEC_TS hands a new image what it would otherwise read from
 * /proc: each /proc file a new process reads first costs it 5-9 us of
 * kernel time (its entries are made, then torn down at exit).
 *
 *   FORKTRACE_EXEC_TS=<ns>:<ticks>:<boot_before>:<P|C><pid>:[<slot>:]<exe>
 *
 * ns: when exec (or posix_spawn) was called, CLOCK_MONOTONIC (HELLO's
 * exec_ts). ticks: the process's start time in clock ticks (a fork child
 * knows it, see agent_fork_start_ticks; exec does not change it), 0 when
 * unknown. boot_before: a spawner's CLOCK_BOOTTIME reading just before
 * posix_spawn, from which the new process tells its start time the way a
 * fork child does; 0 when none. P<pid> or C<pid>: whom it is for, the
 * process that execs (P: the image's own pid) or the one that spawns (C:
 * the image's parent). The variable outlives its image when that image
 * never loads the agent (a static program, a script whose interpreter is
 * static, a secure-mode one): it stays in its environment, and every
 * process it starts inherits it. Only the image it was meant for may take
 * it; any other ignores it all, and reads /proc and claims a slot as if
 * it had none. slot: the process-table slot claimed for the image
 * (agent_table_claim_for), which then maps it without the table's header;
 * absent when none. exe: what /proc/<pid>/exe says, for an ELF only;
 * empty when unknown. exe comes last because a path may hold ':'; it
 * starts with '/', a slot with a digit. A value in any other form is
 * ignored whole.
 * Digits only, no printf: this runs in fork children. Writes all but the
 * slot and the exe into buf (AGENT_EXEC_TS_SIZE bytes) and returns the
 * length written: the exe, or nothing, goes at buf + length, and
 * agent_env_exec_ts_slot puts the slot before it.
 */
size_t agent_env_exec_ts(char *buf, uint64_t ns, uint64_t ticks, uint64_t boot_before, bool self)
{
	char *p = buf;

	memcpy(p, FT_ENV_EXEC_TS "=", sizeof(FT_ENV_EXEC_TS));
	p += sizeof(FT_ENV_EXEC_TS);
	p = agent_utoa(p, ns);
	*p++ = ':';
	p = agent_utoa(p, ticks);
	*p++ = ':';
	p = agent_utoa(p, boot_before);
	*p++ = ':';
	*p++ = self ? 'P' : 'C';
	p = agent_utoa(p, (uint64_t)agent_g.pid);
	*p++ = ':';
	*p = '\0';
	return (size_t)(p - buf);
}

void agent_env_exec_ts_slot(char *buf, size_t off, uint32_t slot)
{
	char digits[AGENT_EXEC_TS_SLOT - 1];
	size_t n = (size_t)(agent_utoa(digits, slot) - digits);

	memmove(buf + off + n + 1, buf + off, strlen(buf + off) + 1);
	memcpy(buf + off, digits, n);
	buf[off + n] = ':';
}

/* Parses the digits at *pp into *v; false if there are none, or more
 * than a uint64_t holds for sure. */
static bool agent_env_digits(const char **pp, uint64_t *v)
{
	const char *p = *pp;

	for (*v = 0; *p >= '0' && *p <= '9'; p++)
		*v = *v * 10 + (uint64_t)(*p - '0');
	if (p == *pp || p - *pp > 19)
		return false;
	*pp = p;
	return true;
}

/* The value of FORKTRACE_EXEC_TS (see agent_env_exec_ts) into h; all
 * of h stays 0 unless the whole value follows the format. */
static void agent_env_parse_exec_ts(const char *p, struct agent_handover *h)
{
	uint64_t ns, ticks, boot, pid, slot = 0;
	char who;

	if (!agent_env_digits(&p, &ns) || *p++ != ':' || !agent_env_digits(&p, &ticks) ||
	    *p++ != ':' || !agent_env_digits(&p, &boot) || *p++ != ':')
		return;
	who = *p++;
	if ((who != 'P' && who != 'C') || !agent_env_digits(&p, &pid) || *p++ != ':' || pid == 0 ||
	    pid > INT_MAX)
		return;
	bool has_slot = agent_env_digits(&p, &slot);

	if (has_slot && (*p++ != ':' || slot >= UINT32_MAX))
		return;
	if (*p && *p != '/')
		return;
	h->exec_ns = ns;
	h->ticks = ticks;
	h->boot_before = boot;
	h->slot = has_slot ? (uint32_t)slot + 1 : 0;
	h->exe = *p == '/' ? p : NULL;
	h->pid = who == 'P' ? (pid_t)pid : 0;
	h->ppid = who == 'C' ? (pid_t)pid : 0;
}

/* The value of entry if it is "<name>=value", else NULL. */
static const char *agent_env_value(const char *entry, const char *name, size_t n)
{
	return agent_env_is(entry, name, n) ? entry + n + 1 : NULL;
}

#define AGENT_ENV_VALUE(entry, name) agent_env_value(entry, name, sizeof(name) - 1)

/* The launcher's rank variables, by precedence (wire.h, "Ranks"); the
 * struct agent_start_env arrays follow this order. */
static const char *const agent_rank_vars[] = {
	"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", "RANK",
};
/* The local rank's, by precedence, are OMPI_COMM_WORLD_LOCAL_RANK,
 * MPI_LOCALRANKID, SLURM_LOCALID and LOCAL_RANK (struct agent_start_env's
 * local_rank[] in this order); no name of them is kept, so they are no
 * array here. */
_Static_assert(sizeof(agent_rank_vars) / sizeof(agent_rank_vars[0]) ==
		       sizeof(((struct agent_start_env *)0)->rank) / sizeof(char *),
	       "one value per rank variable");

/* Entry v's value into e if v is a rank variable: a switch on its first
 * letter, then the one or two names with it, as the constructor's pass
 * over the environment tests every entry. */
static void agent_env_take_rank(const char *v, struct agent_start_env *e)
{
	const char *x;

	switch (v[0]) {
	case 'O':
		if ((x = AGENT_ENV_VALUE(v, "OMPI_COMM_WORLD_RANK")))
			e->rank[0] = x;
		else if ((x = AGENT_ENV_VALUE(v, "OMPI_COMM_WORLD_LOCAL_RANK")))
			e->local_rank[0] = x;
		break;
	case 'P':
		if ((x = AGENT_ENV_VALUE(v, "PMIX_RANK")))
			e->rank[1] = x;
		else if ((x = AGENT_ENV_VALUE(v, "PMI_RANK")))
			e->rank[2] = x;
		break;
	case 'S':
		if ((x = AGENT_ENV_VALUE(v, "SLURM_PROCID")))
			e->rank[3] = x;
		else if ((x = AGENT_ENV_VALUE(v, "SLURM_LOCALID")))
			e->local_rank[2] = x;
		break;
	case 'R':
		if ((x = AGENT_ENV_VALUE(v, "RANK")))
			e->rank[4] = x;
		break;
	case 'L':
		if ((x = AGENT_ENV_VALUE(v, "LOCAL_RANK")))
			e->local_rank[3] = x;
		break;
	case 'M':
		if ((x = AGENT_ENV_VALUE(v, "MPI_LOCALRANKID")))
			e->local_rank[1] = x;
		break;
	}
}

/* A rank's value: 1 to 9 decimal digits, nothing else (no sign, no
 * space), so that any value fits a uint32_t. */
static bool agent_rank_value(const char *v, uint32_t *out)
{
	uint32_t r = 0;
	size_t n = 0;

	for (; v[n] >= '0' && v[n] <= '9'; n++)
		r = r * 10 + (uint32_t)(v[n] - '0');
	if (n == 0 || n > 9 || v[n] != '\0')
		return false;
	*out = r;
	return true;
}

void agent_env_ranks(const struct agent_start_env *e)
{
	for (size_t k = 0; k < sizeof(agent_rank_vars) / sizeof(agent_rank_vars[0]); k++)
		if (e->rank[k] && agent_rank_value(e->rank[k], &agent_g.rank)) {
			agent_g.has_rank = 1;
			agent_g.rank_var = agent_rank_vars[k];
			break;
		}
	for (size_t k = 0; k < sizeof(e->local_rank) / sizeof(e->local_rank[0]); k++)
		if (e->local_rank[k] && agent_rank_value(e->local_rank[k], &agent_g.local_rank)) {
			agent_g.has_local_rank = 1;
			break;
		}
}

void agent_env_take_start(char **envp, struct agent_start_env *e)
{
	size_t i, j;

	memset(e, 0, sizeof(*e));
	if (!envp)
		return;
	for (i = 0, j = 0; envp[i]; i++) {
		const char *v = envp[i], *x;

		/* Dispatch on the first letter: most entries are no one's. */
		if (v[0] == 'F' && strncmp(v, "FORKTRACE_", 10) == 0) {
			if ((x = AGENT_ENV_VALUE(v, FT_ENV_EXEC_TS))) {
				memset(&e->ho, 0, sizeof(e->ho));
				agent_env_parse_exec_ts(x, &e->ho);
				continue; /* the program must never see it */
			}
			if ((x = AGENT_ENV_VALUE(v, FT_ENV_TABLE_FD))) {
				e->table_fd = x;
				continue; /* nor this one */
			}
			if ((x = AGENT_ENV_VALUE(v, FT_ENV_SOCK)))
				e->sock = x;
			else if ((x = AGENT_ENV_VALUE(v, FT_ENV_SPILL_DIR)))
				e->spill = x;
			else if ((x = AGENT_ENV_VALUE(v, FT_ENV_FUNCTIONS)))
				e->functions = x;
			else if ((x = AGENT_ENV_VALUE(v, FT_ENV_HEAD)))
				e->head = x;
			else if ((x = AGENT_ENV_VALUE(v, FT_ENV_REMOTE)))
				e->remote = x;
			else if ((x = AGENT_ENV_VALUE(v, FT_ENV_RSH)))
				e->rsh = x;
		} else if (v[0] == 'L' && (x = AGENT_ENV_VALUE(v, FT_ENV_PRELOAD))) {
			e->preload = x;
		} else if (v[0] == 'T' && (x = AGENT_ENV_VALUE(v, "TMPDIR"))) {
			e->tmpdir = x;
		} else {
			agent_env_take_rank(v, e);
		}
		envp[j++] = envp[i];
	}
	envp[j] = NULL;
}
