/*
 * Launch following (docs/MULTIHOST.md): when a traced image execs or
 * spawns ssh (or rsh, or a program named in FORKTRACE_RSH) with a remote
 * command, and the collector asked for it (FORKTRACE_HEAD and
 * FORKTRACE_REMOTE), the remote command gets a node collector in front of
 * it:
 *
 *   if [ -x 'PATH' ]; then exec 'PATH' run --join 'HEAD' --launcher-pid PID
 *   --launched-as 'DEST' -q -- "${SHELL:-/bin/sh}" -c 'CMD'; else exec
 *   "${SHELL:-/bin/sh}" -c 'CMD'; fi
 *
 * (one line), CMD being the remote command as ssh would send it: its
 * arguments joined with single spaces. The far side's login shell runs
 * CMD as it would have, through forktrace when it is installed there, and
 * untraced when it is not.
 *
 * The exec hook may run in a vfork child or in the child of a
 * multithreaded fork: the new argv is built in a private mapping (a raw
 * mmap, no malloc), from the strings the constructor copied and the
 * caller's argv, which is never written. Only the agent's own string
 * functions and system calls made inline: async-signal-safe.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

/* The kernel refuses (E2BIG) an exec with one argument longer than
 * MAX_ARG_STRLEN (32 pages, its '\0' included): the rewritten command is
 * one argument. */
#define AGENT_REMOTE_CMD_MAX (32u * 4096u - 1)
/* The arguments before the remote command that are kept (ssh and its
 * options): a longer command line is left alone. */
#define AGENT_REMOTE_ARGS_MAX 1024

/* ssh's options that take an argument (OpenSSH 9's getopt string), and
 * those after which there is no remote command for a node collector to
 * go in front of: -N (none), -s (a subsystem), -O (a control command),
 * -G and -V (print and exit), -W (stdio forwarding). The rest are
 * flags. */
static const char agent_ssh_argopts[] = "BbcDEeFIiJLlmOoPpQRSWw";
static const char agent_ssh_flags[] = "1246AaCfGgKkMNnqsTtVvXxYy";
static const char agent_ssh_leave[] = "NsOGVW";

/* Copies value (of at most max bytes) as "name=value" into the arena;
 * NULL when unset, empty, too long or the arena is full. */
static char *agent_remote_keep(const char *name, size_t nlen, const char *value, size_t max)
{
	size_t n = value ? strnlen(value, max) : 0;

	if (n == 0 || n == max)
		return NULL;
	return agent_arena_join(name, nlen, value, n);
}

void agent_remote_init(const char *head, const char *remote, const char *rsh)
{
	agent_g.env_head = agent_remote_keep(FT_ENV_HEAD "=", sizeof(FT_ENV_HEAD), head,
					     AGENT_REMOTE_HEAD_MAX);
	agent_g.env_remote = agent_remote_keep(FT_ENV_REMOTE "=", sizeof(FT_ENV_REMOTE), remote,
					       PATH_MAX);
	agent_g.env_rsh = agent_remote_keep(FT_ENV_RSH "=", sizeof(FT_ENV_RSH), rsh,
					    AGENT_REMOTE_RSH_MAX);
	if (agent_g.env_rsh)
		agent_g.remote_rsh = agent_g.env_rsh + sizeof(FT_ENV_RSH);
	/* Both or neither: a node needs a head to join and a forktrace to
	 * run. The variables still go on to the images this one starts. */
	if (agent_g.env_head && agent_g.env_remote) {
		agent_g.remote_path = agent_g.env_remote + sizeof(FT_ENV_REMOTE);
		__atomic_store_n(&agent_g.remote_head, agent_g.env_head + sizeof(FT_ENV_HEAD),
				 __ATOMIC_RELEASE);
	}
}

/* Is name (n bytes) one of the colon-separated names in list? */
static bool agent_remote_in_list(const char *list, const char *name, size_t n)
{
	while (list && *list) {
		const char *end = strchrnul(list, ':');

		if ((size_t)(end - list) == n && memcmp(list, name, n) == 0)
			return true;
		list = *end ? end + 1 : end;
	}
	return false;
}

bool agent_remote_is_rsh(const char *path)
{
	const char *base = strrchr(path, '/');
	size_t n;

	base = base ? base + 1 : path;
	n = strlen(base);
	return (n == 3 && (memcmp(base, "ssh", 3) == 0 || memcmp(base, "rsh", 3) == 0)) ||
	       agent_remote_in_list(agent_g.remote_rsh, base, n);
}

/*
 * Where ssh's command line argv puts the destination and the remote
 * command, read as OpenSSH reads it: options (bundled flags, an option's
 * argument attached or the next word, "--" ending them) before the
 * destination, and again after it unless "--" came first; the remote
 * command is every word after that. Returns the index of the command's
 * first word and sets *dest, or -1 when there is nothing to follow: no
 * destination, no command, an option in agent_ssh_leave, or one ssh
 * would refuse.
 */
static int agent_ssh_parse(char *const argv[], int *dest)
{
	bool terminated = false;
	int i = 1;

	*dest = -1;
	for (;;) {
		while (argv[i]) {
			const char *a = argv[i];

			if (a[0] != '-' || a[1] == '\0')
				break;
			if (a[1] == '-' && a[2] == '\0') {
				terminated = true;
				i++;
				break;
			}
			for (int j = 1; a[j]; j++) {
				char c = a[j];

				if (strchr(agent_ssh_leave, c))
					return -1;
				if (strchr(agent_ssh_argopts, c)) {
					/* The rest of the word is the argument,
					 * else the next word is. */
					if (!a[j + 1] && !argv[++i])
						return -1;
					break;
				}
				if (!strchr(agent_ssh_flags, c))
					return -1;
			}
			i++;
		}
		if (*dest >= 0)
			break;
		if (!argv[i])
			return -1;
		*dest = i++;
		if (!argv[i] || terminated)
			break;
	}
	/* ssh sends no command when the words join to nothing. */
	for (int k = i; argv[k]; k++)
		if (argv[k][0])
			return i;
	return -1;
}

/* The rewritten command, built into [p, end) as far as it fits while
 * counting every byte: a first pass with an empty buffer gives the
 * length. */
struct agent_remote_out {
	char *p, *end;
	size_t len;
};

static void agent_remote_put(struct agent_remote_out *o, const char *s, size_t n)
{
	if (o->p && n <= (size_t)(o->end - o->p)) {
		memcpy(o->p, s, n);
		o->p += n;
	} else {
		o->p = NULL;
	}
	o->len += n;
}

#define AGENT_REMOTE_PUT(o, lit) agent_remote_put(o, lit, sizeof(lit) - 1)

/* n bytes of s inside single quotes, each ' as '\'' (shell quoting). */
static void agent_remote_quoted_part(struct agent_remote_out *o, const char *s, size_t n)
{
	for (const char *q; n && (q = memchr(s, '\'', n));) {
		agent_remote_put(o, s, (size_t)(q - s));
		AGENT_REMOTE_PUT(o, "'\\''");
		n -= (size_t)(q - s) + 1;
		s = q + 1;
	}
	agent_remote_put(o, s, n);
}

static void agent_remote_quoted(struct agent_remote_out *o, const char *s)
{
	AGENT_REMOTE_PUT(o, "'");
	agent_remote_quoted_part(o, s, strlen(s));
	AGENT_REMOTE_PUT(o, "'");
}

/* CMD, argv's words joined with single spaces, quoted as one. */
static void agent_remote_cmd(struct agent_remote_out *o, char *const words[])
{
	AGENT_REMOTE_PUT(o, "'");
	for (int k = 0; words[k]; k++) {
		if (k)
			AGENT_REMOTE_PUT(o, " ");
		agent_remote_quoted_part(o, words[k], strlen(words[k]));
	}
	AGENT_REMOTE_PUT(o, "'");
}

static void agent_remote_command(struct agent_remote_out *o, const char *dest, pid_t launcher,
				 char *const words[])
{
	char pid[24];

	*agent_utoa(pid, (uint64_t)launcher) = '\0';
	AGENT_REMOTE_PUT(o, "if [ -x ");
	agent_remote_quoted(o, agent_g.remote_path);
	AGENT_REMOTE_PUT(o, " ]; then exec ");
	agent_remote_quoted(o, agent_g.remote_path);
	AGENT_REMOTE_PUT(o, " run --join ");
	agent_remote_quoted(o, agent_g.remote_head);
	AGENT_REMOTE_PUT(o, " --launcher-pid ");
	agent_remote_put(o, pid, strlen(pid));
	AGENT_REMOTE_PUT(o, " --launched-as ");
	agent_remote_quoted(o, dest);
	AGENT_REMOTE_PUT(o, " -q -- \"${SHELL:-/bin/sh}\" -c ");
	agent_remote_cmd(o, words);
	AGENT_REMOTE_PUT(o, "; else exec \"${SHELL:-/bin/sh}\" -c ");
	agent_remote_cmd(o, words);
	AGENT_REMOTE_PUT(o, "; fi");
}

int agent_remote_rewrite(struct agent_remote *r, char *const argv[], pid_t launcher)
{
	struct agent_remote_out o = {NULL, NULL, 0};
	int cmd, dest;
	size_t vec;
	char *mem;

	r->argv = NULL;
	r->dest = NULL;
	r->flags = 0;
	r->map = NULL;
	r->maplen = 0;
	if (!__atomic_load_n(&agent_g.remote_head, __ATOMIC_ACQUIRE) || !argv || !argv[0])
		return 0;
	cmd = agent_ssh_parse(argv, &dest);
	if (cmd < 0)
		return 0;
	r->dest = argv[dest];
	agent_remote_command(&o, r->dest, launcher, argv + cmd);
	vec = ((size_t)cmd + 2) * sizeof(char *);
	if (o.len > AGENT_REMOTE_CMD_MAX || cmd > AGENT_REMOTE_ARGS_MAX ||
	    strlen(r->dest) >= AGENT_REMOTE_DEST_MAX) {
		r->flags = FT_REMOTE_UNTRACED;
		return 1;
	}
	r->maplen = vec + o.len + 1;
	mem = agent_sys_mmap(NULL, r->maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			     -1, 0);
	if (mem == MAP_FAILED) {
		r->maplen = 0;
		r->flags = FT_REMOTE_UNTRACED;
		return 1;
	}
	r->map = mem;
	r->argv = (char **)(void *)mem;
	for (int k = 0; k < cmd; k++)
		r->argv[k] = argv[k];
	r->argv[cmd] = mem + vec;
	r->argv[cmd + 1] = NULL;
	o = (struct agent_remote_out){mem + vec, mem + vec + o.len, 0};
	agent_remote_command(&o, r->dest, launcher, argv + cmd);
	*o.p = '\0';
	return 1;
}

void agent_remote_release(struct agent_remote *r)
{
	int saved = errno;

	if (r->map)
		agent_sys_munmap(r->map, r->maplen);
	r->map = NULL;
	r->argv = NULL;
	agent_errno_restore(saved);
}
