/*
 * Unit tests of the agent's environment handling (agent/env.c), compiled
 * from the agent's sources into this executable: what a new image gets
 * for every kind of envp a program passes to exec or spawn (none, empty,
 * its own, with LD_PRELOAD naming the agent or not, once or twice, very
 * long), the hand-over variable FORKTRACE_EXEC_TS written and read back,
 * and the agent's variables hidden from the program at start.
 *
 * The strings merged in are prepared as the constructor prepares them
 * (agent_prepare_env, agent/startup.c), for the socket SOCK and an
 * LD_PRELOAD naming the agent at AGENT.
 */
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>

#include "check.h"
#include "internal.h"

#define SOCK "/run/ft/sock"
#define AGENT "/opt/ft/" AGENT_FILE_NAME
#define ENV_SOCK FT_ENV_SOCK "=" SOCK
#define ENV_PRELOAD FT_ENV_PRELOAD "=" AGENT

/* Checks that got (NULL-terminated) holds the n strings of want, in order;
 * prints both vectors when not. */
static void check_envp_at(int line, const char *what, char *const *got, const char *const *want,
			  size_t n)
{
	size_t i;

	for (i = 0; i < n && got[i] && strcmp(got[i], want[i]) == 0; i++)
		;
	if (i == n && !got[n])
		return;
	check_fail_at(__FILE__, line, "%s: entry %zu differs", what, i);
	for (i = 0; got[i]; i++)
		fprintf(stderr, "    got[%zu]  = %.200s\n", i, got[i]);
	for (i = 0; i < n; i++)
		fprintf(stderr, "    want[%zu] = %.200s\n", i, want[i]);
}

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define CHECK_ENVP(what, got, ...)                                                                 \
	do {                                                                                       \
		const char *const want_[] = {__VA_ARGS__};                                         \
		check_envp_at(__LINE__, what, got, want_, N(want_));                               \
	} while (0)

/* agent_env_merge(envp, extra) into e, which the caller releases. */
static char **merge(struct agent_env *e, char *const *envp, const char *extra)
{
	agent_env_merge(e, envp, extra);
	return e->envp;
}

static void test_merge_adds(void)
{
	struct agent_env e;
	char *empty[] = {NULL};
	char *plain[] = {"HOME=/root", "PATH=/bin", NULL};

	/* No envp at all (execve(path, argv, NULL)) is an empty one. */
	CHECK_ENVP("NULL envp", merge(&e, NULL, NULL), ENV_PRELOAD, ENV_SOCK);
	CHECK(e.map == NULL);
	agent_env_release(&e);
	CHECK_ENVP("empty envp", merge(&e, empty, NULL), ENV_PRELOAD, ENV_SOCK);
	agent_env_release(&e);
	/* The program's entries keep their order; the agent's go after. */
	CHECK_ENVP("plain envp", merge(&e, plain, NULL), "HOME=/root", "PATH=/bin", ENV_PRELOAD,
		   ENV_SOCK);
	agent_env_release(&e);
}

static void test_merge_preload(void)
{
	struct agent_env e;
	char *first[] = {"A=1", "LD_PRELOAD=" AGENT " /usr/lib/libfoo.so", ENV_SOCK, NULL};
	char *last[] = {"LD_PRELOAD=libfoo.so:" AGENT, ENV_SOCK, "B=2", NULL};
	char *middle[] = {"LD_PRELOAD=libfoo.so " AGENT ":libbar.so", ENV_SOCK, NULL};
	char *bare[] = {"LD_PRELOAD=" AGENT_FILE_NAME, ENV_SOCK, NULL};
	char *other_dir[] = {"LD_PRELOAD=/elsewhere/" AGENT_FILE_NAME, ENV_SOCK, NULL};
	char *without[] = {"A=1", "LD_PRELOAD=libfoo.so", "B=2", NULL};
	char *renamed[] = {"LD_PRELOAD=/opt/ft/" AGENT_FILE_NAME ".old", NULL};
	char *empty_value[] = {"LD_PRELOAD=", NULL};
	char *prefix_only[] = {"LD_PRELOADX=" AGENT, "XLD_PRELOAD=" AGENT, NULL};

	/* An envp that has it all is passed as it is, not copied: the exec
	 * hooks tell by the pointer whether the agent changed envp (a
	 * merged one that fails with E2BIG is retried without). */
	CHECK(merge(&e, first, NULL) == first);
	CHECK(merge(&e, last, NULL) == last);
	CHECK(merge(&e, middle, NULL) == middle);
	/* By its file name: the loader may have searched for a bare one. */
	CHECK(merge(&e, bare, NULL) == bare);
	CHECK(merge(&e, other_dir, NULL) == other_dir);
	/* Without the agent: the agent goes first, in the entry's place. */
	CHECK_ENVP("LD_PRELOAD without the agent", merge(&e, without, NULL), "A=1",
		   "LD_PRELOAD=" AGENT " libfoo.so", "B=2", ENV_SOCK);
	agent_env_release(&e);
	CHECK_ENVP("a renamed agent is another library", merge(&e, renamed, NULL),
		   "LD_PRELOAD=" AGENT " /opt/ft/" AGENT_FILE_NAME ".old", ENV_SOCK);
	agent_env_release(&e);
	CHECK_ENVP("empty LD_PRELOAD", merge(&e, empty_value, NULL), "LD_PRELOAD=" AGENT " ",
		   ENV_SOCK);
	agent_env_release(&e);
	CHECK_ENVP("names that only start alike", merge(&e, prefix_only, NULL),
		   "LD_PRELOADX=" AGENT, "XLD_PRELOAD=" AGENT, ENV_PRELOAD, ENV_SOCK);
	agent_env_release(&e);
}

/* The loader takes the last LD_PRELOAD of an environment (glibc's
 * process_envvars); so does the merge, and it fixes every one of them. */
static void test_merge_duplicates(void)
{
	struct agent_env e;
	char *last_has[] = {"LD_PRELOAD=libfoo.so", "LD_PRELOAD=" AGENT, ENV_SOCK, NULL};
	char *first_has[] = {"LD_PRELOAD=" AGENT, "X=1", "LD_PRELOAD=libfoo.so", ENV_SOCK, NULL};
	char *socks[] = {ENV_SOCK, "FORKTRACE_SOCK=/other", ENV_PRELOAD, NULL};

	CHECK(merge(&e, last_has, NULL) == last_has);
	CHECK_ENVP("the last LD_PRELOAD lacks the agent", merge(&e, first_has, NULL),
		   "LD_PRELOAD=" AGENT " libfoo.so", "X=1", "LD_PRELOAD=" AGENT " libfoo.so",
		   ENV_SOCK);
	agent_env_release(&e);
	/* A socket variable of the program's own is left alone. */
	CHECK(merge(&e, socks, NULL) == socks);
}

/* FORKTRACE_EXEC_TS is for one image only: an old one is dropped, the
 * new one (extra) added. FORKTRACE_SPILL and FORKTRACE_FUNCTIONS hold for
 * the whole tree; FORKTRACE_TABLE_FD goes along under a seccomp filter. */
static void test_merge_agent_vars(void)
{
	struct agent_env e;
	char *old_ts[] = {"FORKTRACE_EXEC_TS=1:2:3:P4:", ENV_PRELOAD, ENV_SOCK, NULL};
	char *table_fd[] = {"FORKTRACE_TABLE_FD=9", ENV_PRELOAD, ENV_SOCK, NULL};
	char *spill_own[] = {"FORKTRACE_SPILL=/mine", ENV_PRELOAD, ENV_SOCK, NULL};
	char *empty[] = {NULL};
	char *envp_all[] = {ENV_PRELOAD, ENV_SOCK, NULL};

	CHECK_ENVP("an old hand-over is dropped", merge(&e, old_ts, NULL), ENV_PRELOAD, ENV_SOCK);
	agent_env_release(&e);
	CHECK_ENVP("an old hand-over is replaced", merge(&e, old_ts, "FORKTRACE_EXEC_TS=5:0:0:P9:"),
		   ENV_PRELOAD, ENV_SOCK, "FORKTRACE_EXEC_TS=5:0:0:P9:");
	agent_env_release(&e);
	CHECK_ENVP("a hand-over is added", merge(&e, envp_all, "FORKTRACE_EXEC_TS=5:0:0:C9:"),
		   ENV_PRELOAD, ENV_SOCK, "FORKTRACE_EXEC_TS=5:0:0:C9:");
	agent_env_release(&e);

	agent_g.env_spill = "FORKTRACE_SPILL=/spill";
	agent_g.env_functions = "FORKTRACE_FUNCTIONS=0";
	CHECK_ENVP("spill and functions", merge(&e, empty, NULL), ENV_PRELOAD, ENV_SOCK,
		   "FORKTRACE_SPILL=/spill", "FORKTRACE_FUNCTIONS=0");
	agent_env_release(&e);
	CHECK_ENVP("the program's own spill directory", merge(&e, spill_own, NULL),
		   "FORKTRACE_SPILL=/mine", ENV_PRELOAD, ENV_SOCK, "FORKTRACE_FUNCTIONS=0");
	agent_env_release(&e);
	agent_g.env_spill = NULL;
	agent_g.env_functions = NULL;

	/* Launch following holds for the whole tree too, with the values
	 * the program sets itself kept. */
	char *head_own[] = {"FORKTRACE_HEAD=mine:1", NULL};
	agent_g.env_head = "FORKTRACE_HEAD=auto:4000";
	agent_g.env_remote = "FORKTRACE_REMOTE=/opt/ft/bin/forktrace";
	agent_g.env_rsh = "FORKTRACE_RSH=oarsh";
	CHECK_ENVP("launch following", merge(&e, empty, NULL), ENV_PRELOAD, ENV_SOCK,
		   "FORKTRACE_HEAD=auto:4000", "FORKTRACE_REMOTE=/opt/ft/bin/forktrace",
		   "FORKTRACE_RSH=oarsh");
	agent_env_release(&e);
	CHECK_ENVP("the program's own head", merge(&e, head_own, NULL), "FORKTRACE_HEAD=mine:1",
		   ENV_PRELOAD, ENV_SOCK, "FORKTRACE_REMOTE=/opt/ft/bin/forktrace",
		   "FORKTRACE_RSH=oarsh");
	agent_env_release(&e);
	agent_g.env_head = agent_g.env_remote = agent_g.env_rsh = NULL;

	/* Without a kept table fd, the program's variable is its own. */
	CHECK(merge(&e, table_fd, NULL) == table_fd);
	agent_g.table_keep = 10;
	strcpy(agent_g.env_table, "FORKTRACE_TABLE_FD=9");
	CHECK_ENVP("the kept table fd", merge(&e, table_fd, NULL), ENV_PRELOAD, ENV_SOCK,
		   "FORKTRACE_TABLE_FD=9");
	agent_env_release(&e);
	CHECK_ENVP("the kept table fd, added", merge(&e, empty, "FORKTRACE_EXEC_TS=1:0:0:P2:"),
		   ENV_PRELOAD, ENV_SOCK, "FORKTRACE_EXEC_TS=1:0:0:P2:", "FORKTRACE_TABLE_FD=9");
	agent_env_release(&e);
	agent_g.table_keep = 0;
}

/* The vector goes in the caller's area while it fits, else in a private
 * mapping: an environment of any size, and an LD_PRELOAD of any length. */
static void test_merge_sizes(void)
{
	struct agent_env e;
	size_t fit = sizeof(e.area) / sizeof(char *) - 9 - 1, big = 100000;
	char **envp = calloc(big + 1, sizeof(char *));
	char *long_preload = malloc(200000);

	MUST(envp && long_preload);
	for (size_t i = 0; i < big; i++)
		envp[i] = "V=1";
	/* The most entries the area holds with the nine the merge may add. */
	envp[fit] = NULL;
	merge(&e, envp, NULL);
	CHECK(e.map == NULL && e.envp == (char **)e.area);
	CHECK(e.envp[fit] && strcmp(e.envp[fit], ENV_PRELOAD) == 0);
	CHECK(e.envp[fit + 1] && strcmp(e.envp[fit + 1], ENV_SOCK) == 0 && !e.envp[fit + 2]);
	agent_env_release(&e);
	envp[fit] = "V=1";
	envp[fit + 1] = NULL;
	merge(&e, envp, NULL);
	CHECK(e.map != NULL && e.envp == e.map && e.maplen >= (fit + 8) * sizeof(char *));
	CHECK(e.envp[fit + 2] && strcmp(e.envp[fit + 2], ENV_SOCK) == 0 && !e.envp[fit + 3]);
	agent_env_release(&e);
	CHECK(e.map == NULL);
	envp[fit + 1] = "V=1";

	merge(&e, envp, NULL);
	CHECK(e.map != NULL && strcmp(e.envp[big - 1], "V=1") == 0);
	CHECK(strcmp(e.envp[big], ENV_PRELOAD) == 0 && strcmp(e.envp[big + 1], ENV_SOCK) == 0);
	CHECK(e.envp[big + 2] == NULL);
	agent_env_release(&e);

	/* A 200 kB LD_PRELOAD without the agent: rewritten in the mapping. */
	memcpy(long_preload, "LD_PRELOAD=", 11);
	memset(long_preload + 11, 'x', 200000 - 12);
	long_preload[200000 - 1] = '\0';
	envp[0] = long_preload;
	envp[1] = NULL;
	merge(&e, envp, NULL);
	CHECK(e.map != NULL && e.envp[0] != long_preload);
	CHECK(strncmp(e.envp[0], "LD_PRELOAD=" AGENT " xxx",
		      sizeof("LD_PRELOAD=" AGENT " xxx") - 1) == 0);
	CHECK_UINT(strlen(e.envp[0]), ==, strlen(long_preload) + strlen(AGENT) + 1);
	CHECK(e.envp[1] && strcmp(e.envp[1], ENV_SOCK) == 0 && !e.envp[2]);
	agent_env_release(&e);
	free(long_preload);
	free(envp);
}

/* Before the strings are prepared (and after the constructor decided not
 * to prepare them), envp goes through untouched. */
static void test_merge_not_ready(void)
{
	struct agent_env e;
	char *plain[] = {"HOME=/root", NULL};

	agent_g.env_ready = 0;
	agent_g.init_done = 1;
	CHECK(merge(&e, plain, NULL) == plain && e.map == NULL);
	CHECK(merge(&e, NULL, NULL) != NULL && e.envp[0] == NULL);
	agent_g.init_done = 0;
	agent_g.env_ready = 1;
}

static void test_preload_strip(void)
{
	static const struct {
		const char *in, *out; /* out NULL: nothing of the user's */
	} cases[] = {
		{AGENT, NULL},
		{AGENT_FILE_NAME, NULL},
		{AGENT " libfoo.so", "libfoo.so"},
		{AGENT ":libfoo.so", "libfoo.so"},
		{"libfoo.so " AGENT, "libfoo.so"},
		{"libfoo.so:" AGENT, "libfoo.so"},
		{"a.so " AGENT " b.so", "a.so b.so"},
		{"a.so:" AGENT ":b.so", "a.so:b.so"},
		/* Only the first entry naming the agent is the agent's. */
		{AGENT " " AGENT, AGENT},
		{"libfoo.so", "libfoo.so"},
		{"/x/" AGENT_FILE_NAME "2", "/x/" AGENT_FILE_NAME "2"},
		{"", ""},
	};
	char out[256];

	for (size_t i = 0; i < N(cases); i++) {
		bool kept = agent_preload_strip(cases[i].in, out);

		CHECK_MSG(kept == (cases[i].out != NULL), "strip(\"%s\") kept %d", cases[i].in,
			  kept);
		if (kept && cases[i].out)
			CHECK_STR_EQ(out, cases[i].out);
	}
}

static void test_is_ours(void)
{
	CHECK(agent_env_is_ours(ENV_SOCK));
	CHECK(agent_env_is_ours("FORKTRACE_SPILL=/x"));
	CHECK(agent_env_is_ours("FORKTRACE_FUNCTIONS=0"));
	CHECK(agent_env_is_ours("FORKTRACE_EXEC_TS=1:2:3:P4:"));
	CHECK(agent_env_is_ours("FORKTRACE_TABLE_FD=3"));
	CHECK(agent_env_is_ours("FORKTRACE_SOCK="));
	CHECK(agent_env_is_ours("FORKTRACE_HEAD=auto:4000"));
	CHECK(agent_env_is_ours("FORKTRACE_REMOTE=/x"));
	CHECK(agent_env_is_ours("FORKTRACE_RSH=oarsh"));
	CHECK(!agent_env_is_ours("FORKTRACE_HEADS=1"));
	CHECK(!agent_env_is_ours("FORKTRACE_SOCKX=1"));
	CHECK(!agent_env_is_ours("FORKTRACE_SOCK"));
	CHECK(!agent_env_is_ours("FORKTRACE_OTHER=1"));
	CHECK(!agent_env_is_ours(ENV_PRELOAD));
	CHECK(!agent_env_is_ours(""));
}

/* The constructor's one pass over environ: it finds the variables it
 * reads, and takes the hand-over and the table fd out of the program's
 * sight; the rest stays, in order. */
static void test_take_start(void)
{
	char *envp[] = {"A=1",
			"FORKTRACE_EXEC_TS=123:456:789:P4242:7:/usr/bin/true",
			ENV_PRELOAD,
			"TMPDIR=/tmp/x",
			ENV_SOCK,
			"FORKTRACE_TABLE_FD=5",
			"FORKTRACE_SPILL=/spill",
			"FORKTRACE_FUNCTIONS=0",
			"B=2",
			NULL};
	struct agent_start_env s;

	agent_env_take_start(envp, &s);
	CHECK_ENVP("what the program sees", envp, "A=1", ENV_PRELOAD, "TMPDIR=/tmp/x", ENV_SOCK,
		   "FORKTRACE_SPILL=/spill", "FORKTRACE_FUNCTIONS=0", "B=2");
	CHECK_STR_EQ(s.sock, SOCK);
	CHECK_STR_EQ(s.preload, AGENT);
	CHECK_STR_EQ(s.tmpdir, "/tmp/x");
	CHECK_STR_EQ(s.spill, "/spill");
	CHECK_STR_EQ(s.functions, "0");
	CHECK_STR_EQ(s.table_fd, "5");
	CHECK_UINT(s.ho.exec_ns, ==, 123);
	CHECK_UINT(s.ho.ticks, ==, 456);
	CHECK_UINT(s.ho.boot_before, ==, 789);
	CHECK_INT(s.ho.pid, ==, 4242);
	CHECK_INT(s.ho.ppid, ==, 0);
	CHECK_UINT(s.ho.slot, ==, 8);
	CHECK_STR_EQ(s.ho.exe, "/usr/bin/true");

	agent_env_take_start(NULL, &s);
	CHECK(s.sock == NULL && s.ho.exec_ns == 0);
}

/* The launcher's rank: read in the same pass, each list's first variable
 * with a plain number wins (wire.h, "Ranks"), and the environment stays
 * as it was (agent_hide_env hides the agent's variables later). */
static void test_ranks(void)
{
	char *envp[] = {"RANK=7",
			"SLURM_PROCID=0",
			"PMI_RANK=x1",
			"OMPI_COMM_WORLD_RANK=-1",
			"PMIX_RANK=5",
			"LOCAL_RANK=3",
			"SLURM_LOCALID=1234567890",
			"MPI_LOCALRANKID=2",
			"FORKTRACE_HEAD=auto:4000",
			"PATH=/bin",
			NULL};
	char *torch[] = {"RANK=12", "LOCAL_RANK=0", NULL};
	char *bad[] = {"RANK= 1", "LOCAL_RANK=", "SLURM_PROCID=+2", "PMI_RANK=0x1", NULL};
	struct agent_start_env s;

	agent_env_take_start(envp, &s);
	CHECK_ENVP("ranks stay", envp, "RANK=7", "SLURM_PROCID=0", "PMI_RANK=x1",
		   "OMPI_COMM_WORLD_RANK=-1", "PMIX_RANK=5", "LOCAL_RANK=3",
		   "SLURM_LOCALID=1234567890", "MPI_LOCALRANKID=2", "FORKTRACE_HEAD=auto:4000",
		   "PATH=/bin");
	CHECK_STR_EQ(s.head, "auto:4000");
	agent_g.has_rank = agent_g.has_local_rank = 0;
	agent_env_ranks(&s);
	CHECK(agent_g.has_rank && agent_g.rank == 5);
	CHECK_STR_EQ(agent_g.rank_var, "PMIX_RANK");
	CHECK(agent_g.has_local_rank && agent_g.local_rank == 2);

	agent_g.has_rank = agent_g.has_local_rank = 0;
	agent_env_take_start(torch, &s);
	agent_env_ranks(&s);
	CHECK(agent_g.has_rank && agent_g.rank == 12);
	CHECK_STR_EQ(agent_g.rank_var, "RANK");
	CHECK(agent_g.has_local_rank && agent_g.local_rank == 0);

	agent_g.has_rank = agent_g.has_local_rank = 0;
	agent_env_take_start(bad, &s);
	agent_env_ranks(&s);
	CHECK(!agent_g.has_rank && !agent_g.has_local_rank);
}

/* A hand-over in any other form than agent_env_exec_ts writes is
 * ignored whole: the image then reads /proc as if it had none. */
static void test_handover_forms(void)
{
	static const struct {
		const char *v;
		bool taken;
	} cases[] = {
		{"1:2:3:P4:", true},
		{"1:2:3:C4:", true},
		{"1:2:3:P4:5:", true},
		{"1:2:3:P4:/a:b", true},
		{"1:2:3:P4:5:/a", true},
		{"", false},
		{"1:2:3:X4:", false},
		{"1:2:3:P0:", false},
		{"1:2:3:P2147483648:", false},
		{"1:2:3:P4", false},
		{"1:2:3:P4:5", false},
		{"1:2:3:P4:4294967295:", false},
		{"1:2:3:P4:x", false},
		{"1::3:P4:", false},
		{"12345678901234567890:2:3:P4:", false},
		{"-1:2:3:P4:", false},
	};

	for (size_t i = 0; i < N(cases); i++) {
		char entry[128] = "FORKTRACE_EXEC_TS=";
		char *envp[] = {entry, NULL};
		struct agent_start_env s;

		strcat(entry, cases[i].v);
		agent_env_take_start(envp, &s);
		CHECK_MSG((s.ho.pid != 0 || s.ho.ppid != 0) == cases[i].taken, "\"%s\": %s",
			  cases[i].v, cases[i].taken ? "ignored" : "taken");
		CHECK_MSG(envp[0] == NULL, "\"%s\": left in the environment", cases[i].v);
	}
}

/* What agent_env_exec_ts and agent_env_exec_ts_slot write, the image's
 * agent_env_take_start reads back. */
static void test_exec_ts_round_trip(void)
{
	char buf[AGENT_EXEC_TS_SIZE];
	char *envp[] = {buf, NULL};
	struct agent_start_env s;
	size_t n;

	agent_g.pid = 4242;
	/* The largest time read back: 19 digits (CLOCK_MONOTONIC reaches
	 * 20 after 317 years; test_handover_forms refuses those). */
	n = agent_env_exec_ts(buf, 9999999999999999999ull, 77, 88, true);
	CHECK_STR_EQ(buf, "FORKTRACE_EXEC_TS=9999999999999999999:77:88:P4242:");
	CHECK_UINT(n, ==, strlen(buf));
	strcpy(buf + n, "/usr/bin/true");
	agent_env_exec_ts_slot(buf, n, UINT32_MAX - 1);
	CHECK_STR_EQ(buf,
		     "FORKTRACE_EXEC_TS=9999999999999999999:77:88:P4242:4294967294:/usr/bin/true");
	agent_env_take_start(envp, &s);
	CHECK_UINT(s.ho.exec_ns, ==, 9999999999999999999ull);
	CHECK_UINT(s.ho.ticks, ==, 77);
	CHECK_UINT(s.ho.boot_before, ==, 88);
	CHECK_UINT(s.ho.slot, ==, UINT32_MAX);
	CHECK_INT(s.ho.pid, ==, 4242);
	CHECK_STR_EQ(s.ho.exe, "/usr/bin/true");

	/* A spawn: the parent's pid, no slot, no exe. */
	n = agent_env_exec_ts(buf, 5, 0, 6, false);
	CHECK_STR_EQ(buf, "FORKTRACE_EXEC_TS=5:0:6:C4242:");
	envp[0] = buf;
	agent_env_take_start(envp, &s);
	CHECK_INT(s.ho.ppid, ==, 4242);
	CHECK(s.ho.pid == 0 && s.ho.slot == 0 && s.ho.exe == NULL);
	/* The longest form leaves the room the slot and the exe were
	 * promised. */
	n = agent_env_exec_ts(buf, UINT64_MAX, UINT64_MAX, UINT64_MAX, false);
	CHECK_UINT(n + AGENT_EXEC_TS_SLOT + AGENT_EXEC_TS_EXE, <=, sizeof(buf));
}

/* No process table in this test. */
struct ft_table_target *agent_table_targets(void)
{
	return NULL;
}

/* The strings the constructor prepares: an envp without LD_PRELOAD gets
 * the value this process started with, the agent found in it by name. */
static void test_prepare(void)
{
	MUST(agent_prepare_env(SOCK, "/usr/lib/libother.so:" AGENT) == 0);
	CHECK_STR_EQ(agent_g.agent_path, AGENT);
	CHECK_STR_EQ(agent_g.agent_base, AGENT_FILE_NAME);
	CHECK_STR_EQ(agent_g.env_sock, ENV_SOCK);
	CHECK_STR_EQ(agent_g.env_preload, "LD_PRELOAD=/usr/lib/libother.so:" AGENT);
	CHECK_STR_EQ(agent_g.table_path, "/run/ft/" FT_TABLE_NAME);
	CHECK(agent_env_ready());
}

/* An agent under another file name (e2e env_i_renamed_agent) is not found
 * in LD_PRELOAD by name: its path comes from the loader (dladdr), here
 * this executable's. The value the process started with is still what an
 * envp without LD_PRELOAD gets. */
static void test_prepare_renamed(void)
{
	MUST(agent_prepare_env(SOCK, "/opt/ft/libft-renamed.so") == 0);
	CHECK_MSG(agent_g.agent_path && strstr(agent_g.agent_path, "test_agent_env"),
		  "the agent's path from dladdr: %s", agent_g.agent_path);
	CHECK_STR_EQ(agent_g.env_preload, "LD_PRELOAD=/opt/ft/libft-renamed.so");
	/* A socket path longer than sun_path cannot be used. */
	{
		char sock[sizeof(agent_g.addr.sun_path) + 1];

		memset(sock, 's', sizeof(sock) - 1);
		sock[sizeof(sock) - 1] = '\0';
		CHECK(agent_prepare_env(sock, AGENT) == -1);
	}
}

int main(void)
{
	test_prepare_renamed();
	test_prepare();
	/* The other tests' process started with the agent alone. */
	MUST(agent_prepare_env(SOCK, AGENT) == 0);
	CHECK_STR_EQ(agent_g.env_preload, ENV_PRELOAD);
	test_merge_adds();
	test_merge_preload();
	test_merge_duplicates();
	test_merge_agent_vars();
	test_merge_sizes();
	test_merge_not_ready();
	test_preload_strip();
	test_is_ours();
	test_take_start();
	test_ranks();
	test_handover_forms();
	test_exec_ts_round_trip();
	return check_done("agent_env");
}
