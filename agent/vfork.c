/*
 * vfork. A C wrapper cannot call the real vfork: the child would return from
 * the wrapper and then run on (and clobber) the frame the parent still
 * needs. So on x86_64 vfork is a few instructions of assembly, in the style
 * of glibc's own: the return address is kept in a register across the
 * syscall, the child returns 0 straight to the caller, and only the parent
 * (once the child has exec'd or exited) continues into C to send FORK.
 *
 * agent_t_in_vfork counts vfork calls in flight on this thread. The child
 * shares our memory and this thread's TLS, so it sees the marker: its hooks
 * record nothing, take no lock and leave our fd alone; exec hooks only
 * merge the environment and hand the new image what it would otherwise
 * read from /proc (agent_exec).
 *
 * What the child exec'd, or that its exec failed, the parent tells in
 * its FORK record: the child writes it into a note the vfork call
 * claimed (agent_vfork_note_exec/_fail), which the parent reads when it
 * resumes. The note is the claiming call's alone, and the parent thread
 * is suspended while the child writes it, as glibc's posix_spawn child
 * writes its errno for its parent: no shared event buffer is touched.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#if AGENT_X86_64

void agent_vfork_prepare(void);
pid_t agent_vfork_parent(long ret);

/* Notes of vforks in flight, claimed in agent_vfork_prepare. In .data
 * (see AGENT_DATA): only a process that vforks touches their pages. */
#define AGENT_VFORK_NOTES 8
#define AGENT_VFORK_TEXT 1024
#define AGENT_VFORK_ARGS 64

enum { AGENT_NOTE_NONE, AGENT_NOTE_EXEC, AGENT_NOTE_FAILED };

struct agent_vfork_note {
	uint32_t busy;                 /* claimed (atomic) */
	uint32_t state;                /* AGENT_NOTE_* of the last exec call */
	int32_t err;                   /* its errno, when it failed */
	uint32_t argc;                 /* strings in text after the path */
	uint64_t ts;                   /* when it was made */
	struct agent_vfork_note *prev; /* an outer vfork's, on this thread */
	char text[AGENT_VFORK_TEXT];   /* path '\0' argv[0] '\0' ... (a prefix) */
	/* A launch the exec call followed (agent_vfork_note_remote): the
	 * mapping of its argv, for the parent to unmap, and what REMOTE
	 * says. remote_pid 0: none. */
	void *remote_map;
	size_t remote_maplen;
	int32_t remote_pid;
	uint32_t remote_flags;
	char remote_dest[AGENT_REMOTE_DEST_MAX];
};

AGENT_DATA static struct agent_vfork_note agent_vfork_notes[AGENT_VFORK_NOTES];

/* The note of the innermost vfork in flight on this thread (the child
 * shares it), and how many vforks inside it found no free note. */
static AGENT_TLS struct agent_vfork_note *agent_t_vfork_note;
static AGENT_TLS int agent_t_vfork_nonote;

/* When the vfork call began: FORK carries the time before the child
 * exists, so the collector can order it before anything the child does. */
static AGENT_TLS uint64_t agent_t_vfork_ts;
/* CLOCK_BOOTTIME then: the child's image tells its start time from it. */
static AGENT_TLS uint64_t agent_t_vfork_boot;

/* Called by the assembly before the syscall. */
__attribute__((used)) void agent_vfork_prepare(void)
{
	struct agent_vfork_note *n = NULL;

	/* FORK must go out on this process's connection. */
	if (!agent_bypass() && !agent_silent_fork_child())
		(void)agent_same_process();
	agent_resolve_all(); /* the child may exec: no dlsym there */
	for (int i = 0; i < AGENT_VFORK_NOTES && !n; i++)
		if (!__atomic_exchange_n(&agent_vfork_notes[i].busy, 1, __ATOMIC_ACQUIRE))
			n = &agent_vfork_notes[i];
	if (n) {
		n->state = AGENT_NOTE_NONE;
		n->remote_map = NULL;
		n->remote_pid = 0;
		n->prev = agent_t_vfork_note;
		agent_t_vfork_note = n;
	} else {
		agent_t_vfork_nonote++;
	}
	agent_t_vfork_ts = agent_now();
	agent_t_vfork_boot = agent_boot_now();
	agent_t_in_vfork++;
}

uint64_t agent_vfork_boot_before(void)
{
	return agent_t_vfork_boot;
}

/* In the vfork child, before its exec call: path and argv into the
 * note, as much as fits (whole strings). Signal-safe. */
void agent_vfork_note_exec(uint64_t ts, const char *path, char *const argv[])
{
	struct agent_vfork_note *n = agent_t_vfork_note;
	size_t len = 0, k;

	if (!n || agent_t_vfork_nonote)
		return;
	n->state = AGENT_NOTE_NONE;
	n->argc = 0;
	for (k = 0; path && path[k] && k < AGENT_VFORK_TEXT - 1; k++)
		n->text[k] = path[k];
	n->text[k] = '\0';
	len = k + 1;
	for (size_t i = 0; argv && argv[i] && n->argc < AGENT_VFORK_ARGS; i++) {
		for (k = 0; argv[i][k] && len + k < AGENT_VFORK_TEXT - 1; k++)
			n->text[len + k] = argv[i][k];
		if (argv[i][k])
			break; /* does not fit: a prefix of argv */
		n->text[len + k] = '\0';
		len += k + 1;
		n->argc++;
	}
	n->ts = ts;
	n->err = 0;
	n->state = AGENT_NOTE_EXEC;
}

/* In the vfork child: that exec call returned err. Signal-safe. */
void agent_vfork_note_fail(int err)
{
	struct agent_vfork_note *n = agent_t_vfork_note;

	if (!n || agent_t_vfork_nonote || n->state != AGENT_NOTE_EXEC)
		return;
	n->err = err;
	n->state = AGENT_NOTE_FAILED;
}

bool agent_vfork_note_remote(const struct agent_remote *r, pid_t launcher)
{
	struct agent_vfork_note *n = agent_t_vfork_note;
	size_t k;

	if (!n || agent_t_vfork_nonote)
		return false;
	if (!r) {
		n->remote_map = NULL;
		n->remote_pid = 0;
		return true;
	}
	for (k = 0; r->dest[k] && k < sizeof(n->remote_dest) - 1; k++)
		n->remote_dest[k] = r->dest[k];
	n->remote_dest[k] = '\0';
	n->remote_map = r->map;
	n->remote_maplen = r->maplen;
	n->remote_flags = r->flags;
	n->remote_pid = launcher;
	return true;
}

/* Tail of vfork in the parent: ret is the raw syscall result. */
__attribute__((used)) pid_t agent_vfork_parent(long ret)
{
	struct agent_vfork_note *n = NULL;
	int err = 0;

	agent_t_in_vfork--;
	if (agent_t_vfork_nonote > 0)
		agent_t_vfork_nonote--;
	else
		n = agent_t_vfork_note;
	if (ret < 0) {
		err = (int)-ret;
		ret = -1;
	}
	if (!agent_bypass()) {
		if (n && ret > 0 && n->state != AGENT_NOTE_NONE) {
			const char *argv[AGENT_VFORK_ARGS + 1];
			const char *s = n->text;

			for (uint32_t i = 0; i <= n->argc; i++) {
				if (i > 0)
					argv[i - 1] = s;
				s += strlen(s) + 1;
			}
			argv[n->argc] = NULL;
			AGENT_EMIT(enc_vfork(agent_buf, AGENT_BUF_SIZE, agent_t_vfork_ts,
					     agent_tid(), (int32_t)ret, n->ts, n->text, argv,
					     n->argc, n->state == AGENT_NOTE_FAILED ? n->err : 0));
		} else {
			AGENT_EMIT(enc_fork(agent_buf, AGENT_BUF_SIZE, agent_t_vfork_ts,
					    agent_tid(), FT_SPAWN_VFORK,
					    (int32_t)(ret > 0 ? ret : 0), err));
		}
		/* The child's exec of ssh went through: a node is to join. */
		if (n && ret > 0 && n->remote_pid && n->state == AGENT_NOTE_EXEC)
			AGENT_EMIT(enc_remote(agent_buf, AGENT_BUF_SIZE, agent_now(), agent_tid(),
					      n->remote_pid, (int32_t)ret, n->remote_dest,
					      agent_g.remote_path, n->remote_flags));
	}
	if (n && n->remote_map)
		agent_sys_munmap(n->remote_map, n->remote_maplen);
	if (n) {
		agent_t_vfork_note = n->prev;
		__atomic_store_n(&n->busy, 0, __ATOMIC_RELEASE);
	}
	if (err)
		errno = err;
	return (pid_t)ret;
}

__asm__(".text\n"
	".globl vfork\n"
	".type vfork, @function\n"
	".p2align 4\n"
	"vfork:\n"
	"	endbr64\n"
	"	subq $8, %rsp\n" /* keep the call 16-byte aligned */
	"	call agent_vfork_prepare\n"
	"	addq $8, %rsp\n"
	"	popq %rdx\n"      /* return address, out of the shared stack */
	"	movl $58, %eax\n" /* SYS_vfork */
	"	syscall\n"
	"	pushq %rdx\n"
	"	testq %rax, %rax\n"
	"	jz 1f\n" /* child: return 0 to the caller */
	"	movq %rax, %rdi\n"
	"	jmp agent_vfork_parent\n" /* parent (or error): tail call */
	"1:	ret\n"
	".size vfork, .-vfork\n");

#else /* not x86-64 LP64 */

/* Without an assembly vfork, fork semantics (through the fork hook) are
 * the safe substitute: the child gets its own memory. */
AGENT_EXPORT pid_t vfork(void)
{
	return fork();
}

uint64_t agent_vfork_boot_before(void)
{
	return 0; /* no vfork child is ever in flight */
}

void agent_vfork_note_exec(uint64_t ts, const char *path, char *const argv[])
{
	(void)ts;
	(void)path;
	(void)argv;
}

void agent_vfork_note_fail(int err)
{
	(void)err;
}

bool agent_vfork_note_remote(const struct agent_remote *r, pid_t launcher)
{
	(void)r;
	(void)launcher;
	return false;
}

#endif
