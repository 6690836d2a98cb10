/*
 * run_cmd.c - `forktrace run`'s command line: its help text, the parser that
 * checks every option before the command starts, and run_main, which hands
 * the options to run.c's steps.
 */
#include <errno.h>
#include <getopt.h>
#include <ctype.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "say.h"
#include "internal.h"

static const char run_usage[] =
	"Usage: forktrace run [OPTIONS] -- COMMAND [ARGS...]\n"
	"\n"
	"Run COMMAND with the forktrace agent in it and in every process it\n"
	"starts, wait until the whole process tree has ended, and write one\n"
	"trace of all of it (Chrome Trace Event JSON: open it in\n"
	"https://ui.perfetto.dev or chrome://tracing).\n"
	"\n"
	"COMMAND runs as it would without forktrace: same input, output and\n"
	"exit code. forktrace exits with COMMAND's exit code, 128+N when COMMAND\n"
	"was killed by signal N, 127 when COMMAND does not exist, 126 when it\n"
	"cannot be executed, 2 for a usage error and 1 when the trace cannot be\n"
	"written.\n"
	"\n"
	"Options:\n"
	"  -o, --output FILE        where to write the trace (default:\n"
	"                           forktrace.json). A name ending in .gz is\n"
	"                           written gzip-compressed, one ending in .h5\n"
	"                           as HDF5 (docs/HDF5_LAYOUT.md). The path is\n"
	"                           checked before COMMAND starts. '-' is\n"
	"                           stdout (after COMMAND's own output); a\n"
	"                           FIFO or device is written in place, a\n"
	"                           symlink's target is written.\n"
	"      --level N            compression level, 1 (fast) to 9 (small):\n"
	"                           gzip for .gz (default 6), deflate for .h5\n"
	"                           (default 2).\n"
	"      --wait-timeout SECS  after COMMAND exits, wait at most SECS for\n"
	"                           the rest of the tree (daemons); processes\n"
	"                           still alive then are marked running in the\n"
	"                           trace. SECS is a decimal number (30, 0.5);\n"
	"                           inf, the default, waits for all of them.\n"
	"      --max-memory SIZE    the collector's peak memory (RSS; 32M at\n"
	"                           least): the events and data it keeps of the\n"
	"                           processes that do not fit go to a temporary\n"
	"                           file in $TMPDIR (suffixes K, M, G, T;\n"
	"                           default 256M).\n"
	"      --report FILE        also write an HTML report of the run to FILE:\n"
	"                           one self-contained page (no network needed)\n"
	"                           with the process timeline, per-program and\n"
	"                           per-function tables, concurrency and\n"
	"                           counters. Same page as 'forktrace report'.\n"
	"                           Checked before COMMAND starts.\n"
	"      --include REGEX      report only processes whose program or\n"
	"                           command line matches REGEX (POSIX extended),\n"
	"                           and regions/functions that match; repeatable.\n"
	"      --exclude REGEX      leave out instrumented functions whose name\n"
	"                           matches REGEX, from the trace and the report;\n"
	"                           the report also leaves out processes whose\n"
	"                           program matches, and regions and counters\n"
	"                           that match. Repeatable.\n"
	"      --pids RANGES        report only these trace pids, e.g. 0-3,7,10-.\n"
	"      --hosts LIST         report only the processes of these hosts of a\n"
	"                           multi-host run, e.g. node1,node2.\n"
	"                           --include, --pids and --hosts apply to the report\n"
	"                           only; the trace holds every process.\n"
	"\n"
	"In-process events (see include/forktrace.h): regions, instants and\n"
	"counters that programs record with the forktrace API, and every call\n"
	"of code built with -finstrument-functions, named from the symbol\n"
	"tables of the executable and its libraries:\n"
	"      --no-functions       do not record -finstrument-functions calls.\n"
	"      --filter REGEX       keep only instrumented functions whose name\n"
	"                           (C++ demangled) matches REGEX (POSIX\n"
	"                           extended); repeatable: any may match.\n"
	"                           Example: --filter '^(solve|mylib_)'.\n"
	"  -q, --quiet              no progress and no summary on stderr.\n"
	"  -h, --help               show this help.\n"
	"\n"
	"Several hosts (docs/MULTIHOST.md): when a traced process runs a\n"
	"command on another host with ssh or rsh (mpirun, pdsh, parallel\n"
	"--sshlogin, a script), forktrace starts a node collector there in\n"
	"front of it, which streams that host's part of the trace back to this\n"
	"run over TCP (authenticated with a per-run key in a 0600 file,\n"
	"$FORKTRACE_KEY_DIR or ~/.forktrace/keys/: the hosts need the same\n"
	"home directory, and forktrace at the same path). The trace then holds\n"
	"every host's processes on this host's clock.\n"
	"      --listen [ADDR:]PORT listen for node collectors on PORT (of ADDR,\n"
	"                           default every address; 0: a free port) and\n"
	"                           print how nodes join; without it a free\n"
	"                           port is used for the ssh launches.\n"
	"      --join HEAD:PORT     be a node collector: trace COMMAND here and\n"
	"                           send it to the run on HEAD that listens on\n"
	"                           PORT (for launchers forktrace cannot follow:\n"
	"                           srun, batch scripts). FORKTRACE_JOIN=HEAD:PORT\n"
	"                           in the environment does the same, unless\n"
	"                           --listen or --no-remote is given. With\n"
	"                           --join, -o is optional (a local copy).\n"
	"      --node-output DIR    a node that cannot reach the head (or loses\n"
	"                           it) writes its part to DIR/HOST-PID.ftnode\n"
	"                           (else to its spill directory), for\n"
	"                           'forktrace combine'. With --join only.\n"
	"      --remote-forktrace PATH\n"
	"                           forktrace's path on the other hosts\n"
	"                           (default: this one's).\n"
	"      --no-remote          trace this host only: no listener, no key,\n"
	"                           ssh and rsh run untouched.\n"
	"\n"
	"Signals: COMMAND runs in forktrace's process group, so what is sent\n"
	"to the group (Ctrl-C, Ctrl-Z, kill -TERM -PGID) reaches it directly;\n"
	"SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGTSTP and\n"
	"SIGCONT sent to forktrace alone are passed to COMMAND. Either way\n"
	"COMMAND gets each signal once, and the trace is written. Once\n"
	"COMMAND has exited, the first SIGINT, SIGTERM, SIGHUP or SIGQUIT\n"
	"stops the wait for the rest of the tree as --wait-timeout does; a\n"
	"second SIGINT, SIGTERM or SIGQUIT ends forktrace at once, by that\n"
	"signal, without a trace.\n"
	"\n"
	"If forktrace itself is killed, the traced processes go on and write\n"
	"what they record to spill files in OUTPUT.spill/ (forktrace.spill/\n"
	"when OUTPUT is stdout, a FIFO or a device), beside a journal of what\n"
	"forktrace had read; get the trace back with\n"
	"'forktrace combine OUTPUT.spill -o OUTPUT'. A run does not start over\n"
	"such a directory, and removes what killed runs of the same user left\n"
	"in TMPDIR and /dev/shm. Processes that cannot reach forktrace while it\n"
	"runs spill there too, and the run merges their files.\n"
	"\n"
	"Environment:\n"
	"  TMPDIR            where the private socket directory is made.\n"
	"  FORKTRACE_JOIN    HEAD:PORT: as --join (srun forktrace run -- CMD).\n"
	"  FORKTRACE_KEY_DIR where run keys are (default ~/.forktrace/keys).\n"
	"  FORKTRACE_AGENT   path of libforktrace-agent.so (default: next to\n"
	"                    the forktrace executable, or ../lib/forktrace/\n"
	"                    from it when installed).\n"
	"\n"
	"Examples:\n"
	"  forktrace run -- make -j4\n"
	"  forktrace run -o build.json.gz -- bash build.sh\n"
	"  forktrace run --report build.html -- make -j8\n"
	"  forktrace run --wait-timeout 5 -- ./start-daemons.sh\n"
	"  forktrace run -- mpirun -np 4 ./solver\n"
	"  forktrace run -- mpirun -np 8 --host node1:4,node2:4 ./solver\n"
	"  forktrace run --listen 7070 -o job.json -- srun forktrace run \\\n"
	"      --join head1:7070 -- ./solver\n";

/*
 * PORT, ADDR:PORT or [ADDR6]:PORT (host_needed: not PORT alone). A port
 * of 0 is only for --listen (a free one). Returns 0 or -EINVAL.
 */
static int check_host_port(const char *s, bool host_needed, bool zero_ok)
{
	const char *colon = strrchr(s, ':');
	const char *port = colon ? colon + 1 : s;
	uint64_t n;

	if (!colon && host_needed)
		return -EINVAL;
	if (colon == s)
		return -EINVAL;
	if (colon && s[0] == '[' && (colon - s < 3 || colon[-1] != ']'))
		return -EINVAL;
	if (colon && s[0] != '[' && memchr(s, ':', (size_t)(colon - s)))
		return -EINVAL; /* an IPv6 address needs its brackets */
	if (say_parse_uint(port, 65535, &n) < 0 || (n == 0 && !zero_ok))
		return -EINVAL;
	return 0;
}

/* A path the remote shell takes without quoting: absolute, and of the
 * characters file names of installed programs use. */
static bool plain_abs_path(const char *p)
{
	if (p[0] != '/')
		return false;
	for (; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("/._+-,@%=~", *p))
			return false;
	return true;
}

int run_parse_opts(int argc, char **argv, run_opts *o)
{
	enum {
		OPT_WAIT = 256,
		OPT_MAXMEM,
		OPT_LEVEL,
		OPT_REPORT,
		OPT_NOFUNC,
		OPT_FILTER,
		OPT_LISTEN,
		OPT_JOIN,
		OPT_NODE_OUTPUT,
		OPT_REMOTE_FT,
		OPT_NO_REMOTE,
		OPT_LAUNCHER_PID,
		OPT_LAUNCHED_AS,
	};
	static const struct option longopts[] = {
		{"output", required_argument, NULL, 'o'},
		{"wait-timeout", required_argument, NULL, OPT_WAIT},
		{"max-memory", required_argument, NULL, OPT_MAXMEM},
		{"level", required_argument, NULL, OPT_LEVEL},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{"report", required_argument, NULL, OPT_REPORT},
		{"include", required_argument, NULL, REPORT_OPT_INCLUDE},
		{"exclude", required_argument, NULL, REPORT_OPT_EXCLUDE},
		{"pids", required_argument, NULL, REPORT_OPT_PIDS},
		{"hosts", required_argument, NULL, REPORT_OPT_HOSTS},
		{"no-functions", no_argument, NULL, OPT_NOFUNC},
		{"filter", required_argument, NULL, OPT_FILTER},
		{"listen", required_argument, NULL, OPT_LISTEN},
		{"join", required_argument, NULL, OPT_JOIN},
		{"node-output", required_argument, NULL, OPT_NODE_OUTPUT},
		{"remote-forktrace", required_argument, NULL, OPT_REMOTE_FT},
		{"no-remote", no_argument, NULL, OPT_NO_REMOTE},
		/* Hidden: what the agent's rewrite of a remote command
		 * passes to the node collector it starts. */
		{"launcher-pid", required_argument, NULL, OPT_LAUNCHER_PID},
		{"launched-as", required_argument, NULL, OPT_LAUNCHED_AS},
		{NULL, 0, NULL, 0},
	};
	const char *join_env = getenv("FORKTRACE_JOIN");
	int c;

	o->output = "forktrace.json";
	o->launcher_pid = -1;
	o->wait_timeout = -1;
	o->max_memory = 256ull << 20;
	o->gzip_level = 0; /* the format's own default */
	opterr = 0;
	optind = 1;
	/* '+': stop at the first non-option, the start of COMMAND. */
	while ((c = getopt_long(argc, argv, "+o:qh", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			o->output = optarg;
			o->output_given = true;
			break;
		case OPT_WAIT:
			if (say_parse_seconds(optarg, &o->wait_timeout) < 0)
				return say_usage_error("run",
						       "--wait-timeout takes a number of "
						       "seconds such as 5 or 0.5 (or inf), "
						       "got '%s'",
						       optarg);
			break;
		case OPT_MAXMEM: {
			int prc = say_parse_size(optarg, &o->max_memory);

			if (prc < 0)
				return say_usage_error(
					"run",
					"--max-memory takes a size such as "
					"512M%s, got '%s'",
					prc == -ERANGE ? " (at most 2^64-1 bytes)" : "", optarg);
			break;
		}
		case OPT_LEVEL: {
			uint64_t l;

			if (say_parse_uint(optarg, 9, &l) < 0 || l < 1)
				return say_usage_error("run", "--level takes 1 to 9, got '%s'",
						       optarg);
			o->gzip_level = (int)l;
			break;
		}
		case 'q':
			o->quiet = true;
			break;
		case OPT_REPORT:
			o->report = optarg;
			break;
		case OPT_NOFUNC:
			o->no_functions = true;
			break;
		case OPT_LISTEN:
			if (check_host_port(optarg, false, true) < 0)
				return say_usage_error("run",
						       "--listen takes [ADDR:]PORT (a port 0 "
						       "to 65535; an IPv6 ADDR in brackets), "
						       "got '%s'",
						       optarg);
			o->listen = optarg;
			break;
		case OPT_JOIN:
			if (check_host_port(optarg, true, false) < 0)
				return say_usage_error("run",
						       "--join takes HEAD:PORT (the host of "
						       "the run that listens, and its port "
						       "1 to 65535), got '%s'",
						       optarg);
			o->join = optarg;
			break;
		case OPT_NODE_OUTPUT:
			if (!*optarg)
				return say_usage_error("run", "--node-output takes a directory");
			o->node_output = optarg;
			break;
		case OPT_REMOTE_FT:
			if (!plain_abs_path(optarg))
				return say_usage_error("run",
						       "--remote-forktrace takes an absolute "
						       "path without spaces or quotes, got "
						       "'%s'",
						       optarg);
			o->remote_forktrace = optarg;
			break;
		case OPT_NO_REMOTE:
			o->no_remote = true;
			break;
		case OPT_LAUNCHER_PID: {
			uint64_t pid;

			if (say_parse_uint(optarg, INT32_MAX, &pid) < 0 || pid == 0)
				return say_usage_error("run",
						       "--launcher-pid takes a process id, "
						       "got '%s'",
						       optarg);
			o->launcher_pid = (int64_t)pid;
			break;
		}
		case OPT_LAUNCHED_AS:
			o->launched_as = optarg;
			break;
		case OPT_FILTER: {
			const char **v = realloc(o->fn_filter, (o->nfilter + 2) * sizeof(*v));
			regex_t re;

			if (!v)
				return 1;
			o->fn_filter = v;
			v[o->nfilter++] = optarg;
			v[o->nfilter] = NULL;
			if (regcomp(&re, optarg, REG_EXTENDED | REG_NOSUB) != 0)
				return say_usage_error("run",
						       "--filter takes a POSIX extended "
						       "regular expression, got '%s'",
						       optarg);
			regfree(&re);
			break;
		}
		case REPORT_OPT_INCLUDE:
		case REPORT_OPT_EXCLUDE:
		case REPORT_OPT_PIDS:
		case REPORT_OPT_HOSTS:
			if (report_opt(&o->ro, c, optarg) < 0)
				return 1;
			break;
		case 'h':
			fputs(run_usage, stdout);
			return SAY_EXIT_OK_DONE;
		case '?':
		default:
			if (optopt)
				return say_usage_error("run", "unknown option '-%c'", optopt);
			return say_usage_error("run", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return say_usage_error("run", "no COMMAND given (forktrace run [OPTIONS] -- "
					      "COMMAND [ARGS...])");
	o->command = argv + optind;
	if (o->join && (o->listen || o->no_remote))
		return say_usage_error("run", "--join makes this run a node of another one: "
					      "it takes neither --listen nor --no-remote");
	if (o->listen && o->no_remote)
		return say_usage_error("run", "--listen and --no-remote contradict each other");
	if (o->remote_forktrace && o->no_remote)
		return say_usage_error("run", "--remote-forktrace and --no-remote contradict "
					      "each other");
	/* The variable makes a node of a run that was not told otherwise:
	 * `srun forktrace run -- CMD` on every node of an allocation whose
	 * environment the head's user exported it in. The head itself, run
	 * from the same shell, has --listen. */
	if (!o->join && !o->listen && !o->no_remote && join_env && *join_env) {
		if (check_host_port(join_env, true, false) < 0)
			return say_usage_error("run",
					       "FORKTRACE_JOIN takes HEAD:PORT as --join does, "
					       "got '%s'",
					       join_env);
		o->join = join_env;
	}
	if (o->node_output && !o->join)
		return say_usage_error("run", "--node-output is where a node collector (--join) "
					      "writes its part when it cannot reach its head");
	if ((o->launcher_pid >= 0 || o->launched_as) && !o->join)
		return say_usage_error("run", "--launcher-pid and --launched-as are for a node "
					      "collector (--join)");
	if ((o->ro.ninclude || o->ro.pids || o->ro.hosts) && !o->report)
		return say_usage_error("run", "--include, --pids and --hosts filter the report: "
					      "give --report FILE too");
	/* A node's trace goes to the head; a file of its own only when
	 * asked for. */
	if (o->join && !o->output_given)
		o->output = NULL;
	if (o->output || o->report) {
		const char *outs[] = {o->output ? o->output : o->report, o->report};
		int rc = out_check_paths("run", outs, o->output && o->report ? 2 : 1, NULL, 0);

		if (rc)
			return rc;
	}
	return report_check(&o->ro, "run");
}

int run_main(int argc, char **argv)
{
	run_opts o = {0};
	int code = run_parse_opts(argc, argv, &o);

	if (code == 0) {
		run_state *rs = run_new(&o);

		code = rs ? run_start(rs) : 1;
		if (code == RUN_GO_ON)
			code = run_write_outputs(rs, run_wait(rs));
		run_free(rs);
	} else if (code == SAY_EXIT_OK_DONE) {
		code = 0;
	}
	report_opts_free(&o.ro);
	free(o.fn_filter);
	return code;
}
