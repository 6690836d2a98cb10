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
 */
#include <errno.h>
#include <unistd.h>

#include "internal.h"

#if AGENT_X86_64

void agent_vfork_prepare(void);
pid_t agent_vfork_parent(long ret);

/* When the vfork call began: FORK carries the time before the child
 * exists, so the collector can order it before anything the child does. */
static AGENT_TLS uint64_t agent_t_vfork_ts;
/* CLOCK_BOOTTIME then: the child's image tells its start time from it. */
static AGENT_TLS uint64_t agent_t_vfork_boot;

/* Called by the assembly before the syscall. */
__attribute__((used)) void agent_vfork_prepare(void)
{
	/* FORK must go out on this process's connection. */
	if (!agent_bypass() && !agent_silent_fork_child())
		(void)agent_same_process();
	agent_resolve_all(); /* the child may exec: no dlsym there */
	agent_t_vfork_ts = agent_now();
	agent_t_vfork_boot = agent_boot_now();
	agent_t_in_vfork++;
}

uint64_t agent_vfork_boot_before(void)
{
	return agent_t_vfork_boot;
}

/* Tail of vfork in the parent: ret is the raw syscall result. */
__attribute__((used)) pid_t agent_vfork_parent(long ret)
{
	int err = 0;

	agent_t_in_vfork--;
	if (ret < 0) {
		err = (int)-ret;
		ret = -1;
	}
	if (!agent_bypass())
		AGENT_EMIT(enc_fork(agent_buf, AGENT_BUF_SIZE, agent_t_vfork_ts, agent_tid(),
				    FT_SPAWN_VFORK, (int32_t)(ret > 0 ? ret : 0), err));
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
	"	popq %rdx\n"	  /* return address, out of the shared stack */
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

#endif
