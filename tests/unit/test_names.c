/*
 * Unit test of the names of images (model_image_name, combine/model/
 * names.c; docs/INSIGHT.md "Names"): command lines as the kernel and the
 * callers give them, and the name and interpreter each must get; and the
 * launchers of rank variables.
 *
 * Usage: test_names
 */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "model.h"

#define MAXARGS 10

typedef struct tcase {
	const char *argv[MAXARGS]; /* NULL-terminated */
	const char *name;
	const char *interp; /* NULL: none */
} tcase;

static const tcase cases[] = {
	/* Programs that are no interpreter. */
	{{"make", "-j4"}, "make", NULL},
	{{"/usr/bin/cc", "-c", "x.c"}, "cc", NULL},
	{{"./a/b"}, "b", NULL},
	{{"ssh", "node1", "sh", "x"}, "ssh", NULL},
	{{"python3-config", "--libs"}, "python3-config", NULL},
	/* #! scripts, as the kernel builds their argv. */
	{{"/bin/sh", "./configure", "--prefix=/usr"}, "configure", "sh"},
	{{"/usr/bin/perl", "-w", "/usr/bin/dh_installman"}, "dh_installman", "perl"},
	{{"/usr/bin/python3", "-Es", "/usr/bin/lsb_release", "-a"}, "lsb_release", "python3"},
	{{"/bin/bash", "./build.sh"}, "build.sh", "bash"},
	{{"/bin/sh", "-e", "debian/rules", "build"}, "rules", "sh"},
	/* Interpreters run by name, with options. */
	{{"python3", "build.py"}, "build.py", "python3"},
	{{"python3.11", "-u", "-W", "ignore", "x.py"}, "x.py", "python3.11"},
	{{"python3", "-X", "dev", "-OO", "y.py"}, "y.py", "python3"},
	{{"python3", "-Wignore", "z.py"}, "z.py", "python3"},
	{{"python3", "-m", "venv", "x"}, "venv", "python3"},
	{{"python3", "-mhttp.server"}, "http.server", "python3"},
	{{"python3", "-u", "-m", "pytest", "-q"}, "pytest", "python3"},
	{{"python3", "-c", "print(1)"}, "python3", NULL},
	{{"python3", "-uc", "print(1)"}, "python3", NULL},
	{{"python3"}, "python3", NULL},
	{{"python3", "-"}, "python3", NULL},
	{{"python3", "--", "t.py"}, "t.py", "python3"},
	{{"python2.7", "old.py"}, "old.py", "python2.7"},
	{{"pypy3", "fast.py"}, "fast.py", "pypy3"},
	{{"perl", "script.pl"}, "script.pl", "perl"},
	{{"perl5.36", "-I", "lib", "t.pl"}, "t.pl", "perl5.36"},
	{{"perl", "-Ilib", "-MData::Dumper", "t.pl"}, "t.pl", "perl"},
	{{"perl", "-e", "print 1"}, "perl", NULL},
	{{"perl", "-lne", "print", "f"}, "perl", NULL},
	{{"perl", "-i.bak", "-pe", "s/a/b/", "f"}, "perl", NULL},
	{{"perl", "-x", "embedded"}, "embedded", "perl"},
	{{"sh", "-c", "echo hi"}, "sh", NULL},
	{{"sh", "-ec", "echo hi"}, "sh", NULL},
	{{"bash", "-c", "make", "bash"}, "bash", NULL},
	{{"bash", "-o", "pipefail", "-e", "ci.sh"}, "ci.sh", "bash"},
	{{"bash", "-eo", "pipefail", "ci.sh"}, "ci.sh", "bash"},
	{{"bash", "+x", "-O", "extglob", "s.sh"}, "s.sh", "bash"},
	{{"bash", "--norc", "--rcfile", "rc", "r.sh"}, "r.sh", "bash"},
	{{"bash", "-s", "arg"}, "bash", NULL},
	{{"-bash"}, "bash", NULL},
	{{"sh", "--", "dash.sh"}, "dash.sh", "sh"},
	{{"sh", "-", "x.sh"}, "x.sh", "sh"},
	{{"dash", "x"}, "x", "dash"},
	{{"zsh", "-f", "z"}, "z", "zsh"},
	{{"ksh93", "k"}, "k", "ksh93"},
	{{"ruby", "-Ilib", "-r", "json", "app.rb"}, "app.rb", "ruby"},
	{{"ruby", "-e", "puts 1"}, "ruby", NULL},
	{{"node", "--require", "ts-node/register", "index.ts"}, "index.ts", "node"},
	{{"node", "--inspect=9229", "-r", "x", "server.js"}, "server.js", "node"},
	{{"node", "-e", "1"}, "node", NULL},
	{{"node", "--eval", "1"}, "node", NULL},
	{{"tclsh8.6", "-encoding", "utf-8", "t.tcl"}, "t.tcl", "tclsh8.6"},
	{{"lua5.4", "-l", "socket", "m.lua"}, "m.lua", "lua5.4"},
	{{"lua", "-e", "x=1"}, "lua", NULL},
	{{"php", "-d", "memory_limit=1G", "artisan"}, "artisan", "php"},
	{{"php", "-f", "index.php"}, "index.php", "php"},
	{{"php", "-r", "echo 1;"}, "php", NULL},
	{{"Rscript", "--vanilla", "an.R"}, "an.R", "Rscript"},
	{{"Rscript", "-e", "1"}, "Rscript", NULL},
	{{"awk", "-F:", "-f", "/usr/share/x.awk", "f"}, "x.awk", "awk"},
	{{"gawk", "-fprog.awk", "f"}, "prog.awk", "gawk"},
	{{"gawk", "--file=p.awk", "f"}, "p.awk", "gawk"},
	{{"awk", "{print $1}", "f"}, "awk", NULL},
	{{"mawk", "-v", "x=1", "{print}"}, "mawk", NULL},
	/* busybox runs its applet; env what it names, if a script. */
	{{"busybox", "sh", "init.sh"}, "init.sh", "sh"},
	{{"busybox", "ls", "-l"}, "ls", NULL},
	{{"busybox"}, "busybox", NULL},
	{{"/usr/bin/env", "python3", "./tool.py", "x"}, "tool.py", "python3"},
	{{"env", "-i", "A=1", "-u", "B", "bash", "-e", "e.sh"}, "e.sh", "bash"},
	{{"env", "A=1", "make"}, "env", NULL},
	{{"env"}, "env", NULL},
	/* An empty script path says nothing. */
	{{"sh", ""}, "sh", NULL},
};

static void check_case(const tcase *tc)
{
	model_segment seg = {.argv = (const char **)tc->argv};
	model_name n;
	char line[256];
	size_t len = 0;

	for (size_t i = 0; tc->argv[i] != NULL && len < sizeof(line); i++)
		len += (size_t)snprintf(line + len, sizeof(line) - len, "%s%s", i ? " " : "",
					tc->argv[i]);
	while (seg.argv[seg.argc] != NULL)
		seg.argc++;
	n = model_image_name(&seg);
	CHECK_MSG(check_str_same(n.name, tc->name) && check_str_same(n.interp, tc->interp),
		  "[%s]: got %s (%s), expected %s (%s)", line, n.name, n.interp ? n.interp : "-",
		  tc->name, tc->interp ? tc->interp : "-");
}

int main(void)
{
	model_segment none = {0}, exe_only = {.exe = "/usr/lib/x/prog"};
	const char *empty_argv[] = {"", NULL};
	model_segment empty = {.argv = empty_argv, .argc = 1, .exe = "/bin/true"};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_case(&cases[i]);

	CHECK_STR_EQ(model_image_name(&none).name, "?");
	CHECK(model_image_name(&none).interp == NULL);
	CHECK_STR_EQ(model_image_name(&exe_only).name, "prog");
	CHECK_STR_EQ(model_image_name(&empty).name, "true");

	CHECK_STR_EQ(model_launcher_name("OMPI_COMM_WORLD_RANK"), "Open MPI");
	CHECK_STR_EQ(model_launcher_name("PMIX_RANK"), "PMIx");
	CHECK_STR_EQ(model_launcher_name("PMI_RANK"), "MPICH/PMI");
	CHECK_STR_EQ(model_launcher_name("SLURM_PROCID"), "Slurm");
	CHECK_STR_EQ(model_launcher_name("RANK"), "torchrun");
	CHECK_STR_EQ(model_launcher_name("LOCAL_RANK"), "torchrun");
	CHECK(model_launcher_name("HOME") == NULL);
	CHECK(model_launcher_name(NULL) == NULL);
	return check_done("test_names");
}
