/*
 * Unit tests of launch following (agent/remote.c), compiled from the
 * agent's sources: which ssh command lines are followed, where their
 * remote command starts (read as OpenSSH reads its options), the exact
 * command put in its place, the bounds past which a launch is left alone
 * (FT_REMOTE_UNTRACED), and the caller's argv never written. The
 * e2e.remote_* tests run the same through the exec hooks, with a fake ssh.
 */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "internal.h"

#define HEAD "auto:4567"
#define FT "/opt/ft/bin/forktrace"

/* s single-quoted for a shell, each ' as '\'' (written out here by
 * hand: the test's own quoting, not remote.c's). */
static void quote(char *out, const char *s)
{
	*out++ = '\'';
	for (; *s; s++) {
		if (*s == '\'') {
			memcpy(out, "'\\''", 4);
			out += 4;
		} else {
			*out++ = *s;
		}
	}
	*out++ = '\'';
	*out = '\0';
}

/* The command agent_remote_rewrite puts in place of cmd (quoted already). */
static void wrapper(char *out, size_t cap, const char *dest, const char *qcmd)
{
	char qdest[1024];

	quote(qdest, dest);
	snprintf(out, cap,
		 "if [ -x '" FT "' ]; then exec '" FT "' run --join '" HEAD "' --launcher-pid 42 "
		 "--launched-as %s -q -- \"${SHELL:-/bin/sh}\" -c %s; else exec "
		 "\"${SHELL:-/bin/sh}\" -c %s; fi",
		 qdest, qcmd, qcmd);
}

/* argv (NULL-terminated) is followed: the words before index keep are
 * kept, the rest becomes the wrapper of qcmd (CMD, quoted as expected) to
 * dest. */
static void check_followed(int line, char *const argv[], int keep, const char *dest,
			   const char *qcmd)
{
	struct agent_remote r;
	char want[4096];
	char *copy[64];
	int n = 0;

	while (argv[n])
		n++;
	memcpy(copy, argv, (size_t)(n + 1) * sizeof(char *));
	if (agent_remote_rewrite(&r, argv, 42) != 1 || !r.argv) {
		check_fail_at(__FILE__, line, "%s ... was not followed", argv[1] ? argv[1] : "");
		return;
	}
	for (int k = 0; k < keep; k++)
		if (r.argv[k] != argv[k])
			check_fail_at(__FILE__, line, "word %d not kept", k);
	wrapper(want, sizeof(want), dest, qcmd);
	if (strcmp(r.argv[keep], want) != 0)
		check_fail_at(__FILE__, line, "command\n  got  %s\n  want %s", r.argv[keep], want);
	if (r.argv[keep + 1])
		check_fail_at(__FILE__, line, "words after the command");
	if (strcmp(r.dest, dest) != 0 || r.flags != 0)
		check_fail_at(__FILE__, line, "dest %s flags %u", r.dest, r.flags);
	for (int k = 0; k <= n; k++)
		if (argv[k] != copy[k])
			check_fail_at(__FILE__, line, "the caller's argv[%d] was written", k);
	agent_remote_release(&r);
	if (r.map || r.argv)
		check_fail_at(__FILE__, line, "not released");
}

static void check_left(int line, char *const argv[])
{
	struct agent_remote r;

	if (agent_remote_rewrite(&r, argv, 42) != 0 || r.argv)
		check_fail_at(__FILE__, line, "%s ... was followed", argv[1] ? argv[1] : "");
}

#define FOLLOWED(keep, dest, qcmd, ...)                                                            \
	do {                                                                                       \
		char *argv_[] = {__VA_ARGS__, NULL};                                               \
		check_followed(__LINE__, argv_, keep, dest, qcmd);                                 \
	} while (0)
#define LEFT(...)                                                                                  \
	do {                                                                                       \
		char *argv_[] = {__VA_ARGS__, NULL};                                               \
		check_left(__LINE__, argv_);                                                       \
	} while (0)

static void test_parse(void)
{
	FOLLOWED(2, "node2", "'echo hi'", "ssh", "node2", "echo", "hi");
	FOLLOWED(3, "node2", "'x'", "ssh", "-vvv", "node2", "x");
	FOLLOWED(3, "node2", "'x'", "ssh", "-p22", "node2", "x");
	FOLLOWED(4, "node2", "'x'", "ssh", "-p", "22", "node2", "x");
	FOLLOWED(3, "node2", "'x'", "ssh", "-vp22", "node2", "x");
	FOLLOWED(4, "node2", "'x'", "ssh", "-vp", "22", "node2", "x");
	FOLLOWED(3, "node2", "'x'", "ssh", "-lroot", "node2", "x");
	FOLLOWED(4, "node2", "'x'", "ssh", "-o", "A=b c", "node2", "x");
	FOLLOWED(4, "node2", "'x'", "ssh", "-E", "log", "node2", "x");
	FOLLOWED(4, "node2", "'x'", "ssh", "-P", "tag", "node2", "x");
	FOLLOWED(2, "ssh://u@node2:22", "'x'", "ssh", "ssh://u@node2:22", "x");
	/* Options after the destination, and "--" ending them either side. */
	FOLLOWED(4, "node2", "'x'", "ssh", "node2", "-p", "22", "x");
	FOLLOWED(3, "node2", "'-p 22'", "ssh", "--", "node2", "-p", "22");
	FOLLOWED(3, "node2", "'-t x'", "ssh", "node2", "--", "-t", "x");
	FOLLOWED(2, "node2", "'x -t'", "ssh", "node2", "x", "-t");
	/* ssh joins the words with single spaces; the quoting keeps each byte. */
	FOLLOWED(2, "node2", "'a  b c'", "ssh", "node2", "a  b", "c");
	FOLLOWED(2, "node2", "'echo '\\''it'\\''s'\\'''", "ssh", "node2", "echo 'it's'");
	FOLLOWED(2, "node2", "' x'", "ssh", "node2", "", "x");
	FOLLOWED(2, "-", "'x'", "ssh", "-", "x");
	FOLLOWED(2, "o'brien", "'x'", "rsh", "o'brien", "x");

	LEFT("ssh", NULL);
	LEFT("ssh");
	LEFT("ssh", "node2");
	LEFT("ssh", "-t", "node2");
	LEFT("ssh", "node2", "-t");
	LEFT("ssh", "node2", "");
	LEFT("ssh", "node2", "", "");
	LEFT("ssh", "-N", "node2", "x");
	LEFT("ssh", "node2", "-N", "x");
	LEFT("ssh", "-fN", "node2");
	LEFT("ssh", "-s", "node2", "sftp");
	LEFT("ssh", "-O", "exit", "node2", "x");
	LEFT("ssh", "-G", "node2", "x");
	LEFT("ssh", "-V");
	LEFT("ssh", "-W", "h:22", "node2", "x");
	LEFT("ssh", "-p");
	LEFT("ssh", "node2", "-p");
	LEFT("ssh", "-Z", "node2", "x");
	LEFT("ssh", "--x", "node2", "x");
	LEFT("ssh", "--");
}

/* Bounds: a command past one exec argument's limit, a destination of 256
 * bytes: left alone, and said so. */
static void test_bounds(void)
{
	static char big[70000], dest[300];
	struct agent_remote r;

	memset(big, 'x', sizeof(big) - 1);
	memset(dest, 'h', sizeof(dest) - 1);
	char *long_cmd[] = {"ssh", "node2", big, NULL};
	CHECK(agent_remote_rewrite(&r, long_cmd, 42) == 1);
	CHECK(!r.argv && !r.map && r.flags == FT_REMOTE_UNTRACED);
	CHECK(r.dest == long_cmd[1]);
	char *long_dest[] = {"ssh", dest, "x", NULL};
	CHECK(agent_remote_rewrite(&r, long_dest, 42) == 1);
	CHECK(!r.argv && r.flags == FT_REMOTE_UNTRACED);
	/* Just under the limit: one argument of 128 KiB - 1 at most. */
	static char half[60000];
	memset(half, 'y', sizeof(half) - 1);
	char *fits[] = {"ssh", "node2", half, NULL};
	CHECK(agent_remote_rewrite(&r, fits, 42) == 1);
	CHECK(r.argv && strlen(r.argv[2]) < 32 * 4096);
	agent_remote_release(&r);
}

/* Names: ssh and rsh by basename, FORKTRACE_RSH's names, nothing else;
 * nothing at all unless the head is set. */
static void test_names(void)
{
	CHECK(agent_remote_is_rsh("ssh") && agent_remote_is_rsh("/usr/bin/ssh"));
	CHECK(agent_remote_is_rsh("rsh") && agent_remote_is_rsh("./x/rsh"));
	CHECK(agent_remote_is_rsh("oarsh") && agent_remote_is_rsh("/a/qrsh"));
	CHECK(!agent_remote_is_rsh("sshd") && !agent_remote_is_rsh("/usr/bin/ssh-agent"));
	CHECK(!agent_remote_is_rsh("ssh/") && !agent_remote_is_rsh("") &&
	      !agent_remote_is_rsh("qr"));
}

/* No process table in this test (exectarget.c, linked beside). */
struct ft_table_target *agent_table_targets(void)
{
	return NULL;
}

int main(void)
{
	char *argv[] = {"ssh", "node2", "x", NULL};
	struct agent_remote r;

	/* Not armed: nothing is followed. */
	agent_remote_init(NULL, FT, NULL);
	CHECK(!agent_remote_armed() && agent_remote_rewrite(&r, argv, 42) == 0);
	CHECK(agent_g.env_remote && strcmp(agent_g.env_remote, "FORKTRACE_REMOTE=" FT) == 0);
	agent_remote_init(HEAD, FT, "qrsh:oarsh");
	CHECK(agent_remote_armed());
	CHECK(strcmp(agent_g.env_head, "FORKTRACE_HEAD=" HEAD) == 0);
	CHECK(strcmp(agent_g.env_rsh, "FORKTRACE_RSH=qrsh:oarsh") == 0);
	test_parse();
	test_bounds();
	test_names();
	return check_done("agent_remote");
}
