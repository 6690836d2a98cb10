/*
 * Unit tests of the agent's exec-target decision (agent/exectarget.c),
 * compiled from the agent's sources into this executable: will the image
 * an exec starts load the agent itself (a dynamic ELF of our class, or a
 * script whose interpreters end in one), and what will /proc/<pid>/exe
 * name? Fixtures are written into a fresh directory: ELF headers made by
 * hand (static, dynamic, odd layouts), scripts, chains of scripts,
 * symbolic links; a static interpreter is an ELF without PT_INTERP. The
 * exec-target cache is tested on a table page of this test's own.
 */
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "internal.h"

/* The fixtures' directory, as made and as the kernel names it. */
static char dir[256];
static char real_dir[256];
/* What the kernel calls /bin/true: a dynamic ELF older than the test. */
static char true_exe[256];

/* dir/name, in a static buffer of its own for each of four calls. */
static const char *at(const char *name)
{
	static char bufs[4][PATH_MAX];
	static int next;
	char *b = bufs[next++ % 4];

	snprintf(b, PATH_MAX, "%s/%s", dir, name);
	return b;
}

static void write_file(const char *name, const void *data, size_t n, mode_t mode)
{
	int fd = open(at(name), O_WRONLY | O_CREAT | O_TRUNC, 0600);

	MUST(fd >= 0);
	MUST(write(fd, data, n) == (ssize_t)n);
	MUST(close(fd) == 0);
	MUST(chmod(at(name), mode) == 0);
}

/* An ELF file's headers as exec reads them. */
struct elf_spec {
	unsigned char cls;  /* ELFCLASS64 unless set */
	uint16_t machine;   /* the build's unless set */
	uint16_t phentsize; /* sizeof(Elf64_Phdr) unless set */
	uint16_t phnum;
	int interp_at;  /* index of PT_INTERP, or -1 */
	uint64_t phoff; /* 64 (right after the header) unless set */
	size_t size;    /* the file's size, when cut short */
};

static void write_elf(const char *name, struct elf_spec s, mode_t mode)
{
	size_t phoff = s.phoff ? s.phoff : sizeof(Elf64_Ehdr);
	size_t n = phoff + (size_t)s.phnum * sizeof(Elf64_Phdr);
	unsigned char *b = calloc(1, n);
	Elf64_Ehdr *eh = (Elf64_Ehdr *)b;

	MUST(b != NULL);
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = s.cls ? s.cls : ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_type = ET_DYN;
	eh->e_machine = s.machine ? s.machine : EM_X86_64;
	eh->e_version = EV_CURRENT;
	eh->e_phoff = phoff;
	eh->e_ehsize = sizeof(Elf64_Ehdr);
	eh->e_phentsize = s.phentsize ? s.phentsize : sizeof(Elf64_Phdr);
	eh->e_phnum = s.phnum;
	for (int i = 0; i < s.phnum; i++) {
		Elf64_Phdr *ph = (Elf64_Phdr *)(b + phoff) + i;

		ph->p_type = i == s.interp_at ? PT_INTERP : PT_LOAD;
	}
	write_file(name, b, s.size ? s.size : n, mode);
	free(b);
}

static void write_script(const char *name, const char *text)
{
	write_file(name, text, strlen(text), 0755);
}

/* agent_exec_target of path by exec kind, with cap bytes for the exe. */
static bool target(unsigned kind, int dirfd, const char *path, int flags, bool cwd_known, char *exe,
		   size_t cap)
{
	int saved = errno = 1234;
	bool r = agent_exec_target(kind, dirfd, path, flags, cwd_known, exe, cap);

	CHECK_MSG(errno == saved, "%s: errno changed to %d", path ? path : "NULL", errno);
	return r;
}

/* Checks that execve of path loads the agent (or not), with exe as the
 * name /proc/<pid>/exe will give ("" for none). */
static void check_exec_at(int line, unsigned kind, const char *path, bool loads,
			  const char *want_exe)
{
	char exe[AGENT_EXEC_TS_EXE];
	bool r = target(kind, AT_FDCWD, path, 0, true, exe, sizeof(exe));

	if (r != loads || strcmp(exe, want_exe) != 0)
		check_fail_at(__FILE__, line, "%s: %s, exe \"%s\"; want %s, exe \"%s\"", path,
			      r ? "loads the agent" : "does not", exe, loads ? "loads" : "does not",
			      want_exe);
}

#define CHECK_EXEC(path, loads, exe) check_exec_at(__LINE__, FT_EXEC_EXECVE, path, loads, exe)
#define CHECK_EXECVP(path, loads, exe) check_exec_at(__LINE__, FT_EXEC_EXECVP, path, loads, exe)

/* realpath(dir/name): what the kernel calls the file. */
static const char *real(const char *name)
{
	static char b[PATH_MAX];

	snprintf(b, sizeof(b), "%s/%s", real_dir, name);
	return b;
}

static void test_elf(void)
{
	struct elf_spec dyn = {.phnum = 4, .interp_at = 1};
	struct elf_spec stat = {.phnum = 4, .interp_at = -1};

	write_elf("dyn", dyn, 0755);
	write_elf("static", stat, 0755);
	CHECK_EXEC(at("dyn"), true, real("dyn"));
	CHECK_EXEC(at("static"), false, "");

	/* Program headers away from the header: read on their own. */
	write_elf("far", (struct elf_spec){.phnum = 3, .interp_at = 2, .phoff = 8192}, 0755);
	CHECK_EXEC(at("far"), true, real("far"));
	/* More than one read's worth of program headers. */
	write_elf("many", (struct elf_spec){.phnum = 40, .interp_at = 37}, 0755);
	CHECK_EXEC(at("many"), true, real("many"));
	write_elf("many_static", (struct elf_spec){.phnum = 40, .interp_at = -1}, 0755);
	CHECK_EXEC(at("many_static"), false, "");

	/* Not of our class or machine, or malformed. */
	write_elf("elf32", (struct elf_spec){.cls = ELFCLASS32, .phnum = 4, .interp_at = 1}, 0755);
	CHECK_EXEC(at("elf32"), false, "");
	write_elf("arm", (struct elf_spec){.machine = EM_AARCH64, .phnum = 4, .interp_at = 1},
		  0755);
	CHECK_EXEC(at("arm"), false, "");
	write_elf("nophdr", (struct elf_spec){.phnum = 0, .interp_at = -1}, 0755);
	CHECK_EXEC(at("nophdr"), false, "");
	write_elf("phentsize", (struct elf_spec){.phentsize = 32, .phnum = 4, .interp_at = 1},
		  0755);
	CHECK_EXEC(at("phentsize"), false, "");
	write_elf("cut", (struct elf_spec){.phnum = 4, .interp_at = 1, .size = 40}, 0755);
	CHECK_EXEC(at("cut"), false, "");
	write_elf("cut_far",
		  (struct elf_spec){.phnum = 3, .interp_at = 2, .phoff = 8192, .size = 8192 + 60},
		  0755);
	CHECK_EXEC(at("cut_far"), false, "");
	write_file("empty", "", 0, 0755);
	CHECK_EXEC(at("empty"), false, "");

	/* The loader ignores LD_PRELOAD paths in setuid and setgid programs. */
	write_elf("setuid", dyn, 04755);
	CHECK_EXEC(at("setuid"), false, "");
	write_elf("setgid", dyn, 02755);
	CHECK_EXEC(at("setgid"), false, "");

	/* What exec cannot open or run. */
	CHECK_EXEC(at("missing"), false, "");
	CHECK_EXEC(dir, false, "");
	CHECK_EXEC("", false, "");
	/* A file the process may run but not read (root reads any: then a
	 * child that gave up root tries). */
	write_elf("unreadable", dyn, 0111);
	if (geteuid() != 0) {
		CHECK_EXEC(at("unreadable"), false, "");
	} else {
		pid_t pid;
		int status;
		char exe[64];

		MUST(chmod(dir, 0755) == 0);
		pid = fork();
		MUST(pid >= 0);
		if (pid == 0) {
			if (setgid(65534) != 0 || setuid(65534) != 0)
				_exit(2);
			_exit(target(FT_EXEC_EXECVE, AT_FDCWD, at("unreadable"), 0, true, exe,
				     sizeof(exe)) ||
			      exe[0]);
		}
		MUST(waitpid(pid, &status, 0) == pid);
		CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			  "an unreadable file, as uid 65534: status %#x", status);
		MUST(chmod(dir, 0700) == 0);
	}
	{
		char exe[16] = "junk";

		CHECK(!target(FT_EXEC_EXECVE, AT_FDCWD, NULL, 0, true, exe, sizeof(exe)));
		CHECK_STR_EQ(exe, "");
	}
}

static void test_scripts(void)
{
	char text[512];

	/* dash is dynamic: a script's exe is its interpreter, left to it. */
	write_script("sh_script", "#!/bin/sh\nexit 0\n");
	CHECK_EXEC(at("sh_script"), true, "");
	write_script("blanks", "#! \t/bin/sh -e\n");
	CHECK_EXEC(at("blanks"), true, "");
	snprintf(text, sizeof(text), "#!%s", at("dyn"));
	write_script("no_newline", text);
	CHECK_EXEC(at("no_newline"), true, "");
	/* A static interpreter never loads the agent. */
	snprintf(text, sizeof(text), "#!%s\n", at("static"));
	write_script("static_interp", text);
	CHECK_EXEC(at("static_interp"), false, "");
	snprintf(text, sizeof(text), "#!%s arg\n", at("missing"));
	write_script("missing_interp", text);
	CHECK_EXEC(at("missing_interp"), false, "");
	snprintf(text, sizeof(text), "#!%s\n", at("setuid"));
	write_script("setuid_interp", text);
	CHECK_EXEC(at("setuid_interp"), false, "");
	/* The static shell of e2e static_interp_bash (Debian's bash-static). */
	if (access("/bin/bash-static", X_OK) == 0) {
		write_script("bash_static", "#!/bin/bash-static\n");
		CHECK_EXEC(at("bash_static"), false, "");
	}
	/* "#!" lines the kernel would not take. */
	write_script("no_name", "#!\n/bin/sh\n");
	CHECK_EXEC(at("no_name"), false, "");
	write_script("blank_name", "#!   \n");
	CHECK_EXEC(at("blank_name"), false, "");
	memset(text, 'x', 300);
	memcpy(text, "#!/", 3);
	text[300] = '\0';
	write_script("long_name", text);
	CHECK_EXEC(at("long_name"), false, "");

	/* Chains of scripts: followed four interpreters deep past the first. */
	snprintf(text, sizeof(text), "#!%s\n", at("dyn"));
	write_script("chain5", text);
	for (int i = 4; i >= 0; i--) {
		char name[16], next[16];

		snprintf(name, sizeof(name), "chain%d", i);
		snprintf(next, sizeof(next), "chain%d", i + 1);
		snprintf(text, sizeof(text), "#!%s\n", at(next));
		write_script(name, text);
	}
	CHECK_EXEC(at("chain1"), true, "");
	CHECK_EXEC(at("chain0"), false, "");
	snprintf(text, sizeof(text), "#!%s\n", at("static_interp"));
	write_script("to_static_chain", text);
	CHECK_EXEC(at("to_static_chain"), false, "");
	snprintf(text, sizeof(text), "#!%s\n", at("loop"));
	write_script("loop", text);
	CHECK_EXEC(at("loop"), false, "");
}

static void test_names(void)
{
	char exe[AGENT_EXEC_TS_EXE];

	/* The kernel names the file, not the links to it. */
	MUST(symlink("dyn", at("rel_link")) == 0);
	MUST(symlink(at("rel_link"), at("abs_link")) == 0);
	MUST(mkdir(at("sub"), 0755) == 0);
	MUST(symlink("../dyn", at("sub/up_link")) == 0);
	MUST(symlink("loop_b", at("loop_a")) == 0);
	MUST(symlink("loop_a", at("loop_b")) == 0);
	CHECK_EXEC(at("rel_link"), true, real("dyn"));
	CHECK_EXEC(at("abs_link"), true, real("dyn"));
	CHECK_EXEC(at("sub/up_link"), true, real("dyn"));
	CHECK_EXEC(at("sub/.././/sub/../dyn"), true, real("dyn"));
	CHECK_EXEC(at("loop_a"), false, "");
	CHECK_EXEC("/bin/true", true, true_exe);

	/* A relative name, from the current directory; unknown when file
	 * actions of posix_spawn may change it first. */
	MUST(chdir(dir) == 0);
	CHECK_EXEC("dyn", true, real("dyn"));
	CHECK_EXEC("./sub/../rel_link", true, real("dyn"));
	CHECK(!target(FT_EXEC_EXECVE, AT_FDCWD, "dyn", 0, false, exe, sizeof(exe)));
	CHECK(target(FT_EXEC_EXECVE, AT_FDCWD, at("dyn"), 0, false, exe, sizeof(exe)));

	/* A name longer than the room for it is left to /proc. */
	CHECK(target(FT_EXEC_EXECVE, AT_FDCWD, at("dyn"), 0, true, exe, 8));
	CHECK_STR_EQ(exe, "");
}

static void test_kinds(void)
{
	char exe[AGENT_EXEC_TS_EXE];
	char path[3 * PATH_MAX];
	int fd = open(at("dyn"), O_RDONLY), dfd = open(dir, O_RDONLY | O_DIRECTORY);

	MUST(fd >= 0 && dfd >= 0);
	/* By fd: no name to hand over. */
	CHECK(target(FT_EXEC_FEXECVE, fd, NULL, 0, true, exe, sizeof(exe)));
	CHECK_STR_EQ(exe, "");
	CHECK(target(FT_EXEC_EXECVEAT, fd, "", AT_EMPTY_PATH, true, exe, sizeof(exe)));
	CHECK_STR_EQ(exe, "");
	CHECK(fcntl(fd, F_GETFD) >= 0); /* the caller's fd stays open */
	CHECK(target(FT_EXEC_EXECVEAT, dfd, "dyn", 0, true, exe, sizeof(exe)));
	CHECK_STR_EQ(exe, "");
	CHECK(!target(FT_EXEC_EXECVEAT, dfd, "static", 0, true, exe, sizeof(exe)));
	CHECK(target(FT_EXEC_EXECVEAT, dfd, at("dyn"), 0, true, exe, sizeof(exe)));
	CHECK_STR_EQ(exe, real("dyn"));
	close(fd);
	close(dfd);

	/* The p-variants search $PATH as execvp does: the first executable
	 * file along it. */
	write_elf("bin1/tool", (struct elf_spec){.phnum = 2, .interp_at = 0}, 0644);
	write_elf("bin2/tool", (struct elf_spec){.phnum = 2, .interp_at = 0}, 0755);
	write_elf("bin2/stool", (struct elf_spec){.phnum = 2, .interp_at = -1}, 0755);
	snprintf(path, sizeof(path), "%s:/nonexistent:%s", at("bin1"), at("bin2"));
	MUST(setenv("PATH", path, 1) == 0);
	CHECK_EXECVP("tool", true, real("bin2/tool"));
	CHECK_EXECVP("stool", false, "");
	CHECK_EXECVP("nothere", false, "");
	CHECK_EXECVP("", false, "");
	/* With a '/' it is a path, not searched. */
	CHECK_EXECVP("bin2/tool", true, real("bin2/tool"));
	/* An empty entry is the current directory. */
	MUST(setenv("PATH", ":/nonexistent", 1) == 0);
	CHECK_EXECVP("dyn", true, real("dyn"));
	CHECK(!target(FT_EXEC_EXECVP, AT_FDCWD, "dyn", 0, false, exe, sizeof(exe)));
	/* A candidate longer than the buffer ends the search: skipping it
	 * could find another file than execvp will. */
	snprintf(path, sizeof(path), "/%0*d:%s", 200, 0, at("bin2"));
	MUST(setenv("PATH", path, 1) == 0);
	CHECK(!target(FT_EXEC_EXECVP, AT_FDCWD, "tool", 0, true, exe, 128));
	CHECK(target(FT_EXEC_EXECVP, AT_FDCWD, "tool", 0, true, exe, sizeof(exe)));
	/* No PATH: glibc's default. */
	MUST(unsetenv("PATH") == 0);
	CHECK_EXECVP("true", true, true_exe);
}

/* The table page of this test: its exec-target cache, when enabled. */
static struct ft_table_target cache[FT_TABLE_TARGETS];
static bool cache_on;

struct ft_table_target *agent_table_targets(void)
{
	return cache_on ? cache : NULL;
}

/* The cache entry that holds path, or NULL. */
static struct ft_table_target *cached(const char *path)
{
	for (size_t i = 0; i < FT_TABLE_TARGETS; i++)
		if (cache[i].seq && cache[i].path_len == strlen(path) &&
		    memcmp(cache[i].text, path, cache[i].path_len) == 0)
			return &cache[i];
	return NULL;
}

static void test_cache(void)
{
	struct ft_table_target *e;
	uint64_t size;

	cache_on = true;
	/* A file changed in the last 100 ms is not entered. */
	CHECK_EXEC(at("dyn"), true, real("dyn"));
	CHECK(cached(at("dyn")) == NULL);
	CHECK_EXEC(true_exe, true, true_exe);
	e = cached(true_exe);
	CHECK(e && e->kind == FT_TARGET_ELF && e->seq % 2 == 0);
	if (!e)
		return;
	CHECK_STR_EQ(e->text + e->path_len + 1, true_exe);
	/* A hit answers from the entry (its name changed here shows it). */
	e->text[e->path_len + 1 + 1] = 'X';
	CHECK_EXEC(true_exe, true, e->text + e->path_len + 1);
	/* An entry whose file differs now is not used, and is replaced. */
	size = e->size++;
	CHECK_EXEC(true_exe, true, true_exe);
	CHECK(cached(true_exe) == e && e->size == size);
	/* An entry being written (odd seq) is not used. */
	e->text[e->path_len + 1 + 1] = 'X';
	e->seq++;
	CHECK_EXEC(true_exe, true, true_exe);
	e->seq++;
	/* What does not load the agent is not entered. */
	if (access("/bin/bash-static", F_OK) == 0) {
		CHECK_EXEC("/bin/bash-static", false, "");
		CHECK(cached("/bin/bash-static") == NULL);
	}
	memset(cache, 0, sizeof(cache));
	cache_on = false;
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");
	char resolved[PATH_MAX];

	if (!tmp || !*tmp || strlen(tmp) > 200)
		tmp = "/tmp";
	snprintf(dir, sizeof(dir), "%s/ft-exectarget-XXXXXX", tmp);
	MUST(mkdtemp(dir) != NULL);
	MUST(realpath(dir, resolved) != NULL && strlen(resolved) < sizeof(real_dir));
	strcpy(real_dir, resolved);
	MUST(realpath("/bin/true", resolved) != NULL && strlen(resolved) < sizeof(true_exe));
	strcpy(true_exe, resolved);
	MUST(mkdir(at("bin1"), 0755) == 0 && mkdir(at("bin2"), 0755) == 0);

	test_elf();
	test_scripts();
	test_names();
	test_kinds();
	test_cache();

	if (check_nfailed == 0) {
		char cmd[PATH_MAX + 16];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
	} else {
		fprintf(stderr, "fixtures left in %s\n", dir);
	}
	return check_done("agent_exectarget");
}
