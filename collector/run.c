/*
 * run.c - `forktrace run [options] -- COMMAND [ARGS...]`.
 *
 * The order of work matters for the guarantees:
 *   1. everything that can fail for a reason the user controls (options,
 *      the command's existence, the output path, the agent) is checked
 *      before the command starts, so a typo never runs a build for nothing;
 *   2. the collector becomes a child subreaper before it spawns, so every
 *      orphan of the tree comes back to it;
 *   3. it leaves the loop only when waitpid says it has no children left
 *      (the whole tree is gone) or --wait-timeout expires, then drains every
 *      connection before it writes the trace.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <uv.h>

#include "say.h"
#include "internal.h"
#include "h5.h"
#include "events.h"
#include "merge.h"
#include "runsig.h"
#include "module.h"
#include "server.h"
#include "spill.h"

extern char **environ;

/* After the tree is gone, connections still open this long are cut. */
#define DRAIN_TIMEOUT_MS 5000
#define DRAIN_POLL_MS 2
#define DRAIN_AFTER_TIMEOUT_MS 200
#define PROGRESS_INTERVAL_MS 200
/* How often the process table is read while the tree runs: what it holds
 * is safe in shared memory, so this only bounds how stale progress and
 * the table's page accounting get. */
#define TABLE_INTERVAL_MS 50

/* How far run_start got: run_free undoes it, in reverse order. */
enum run_made {
	RUN_MADE_NOTHING,
	RUN_MADE_TEMPS, /* signals remove what was created; the outputs */
	RUN_MADE_SOCKET_DIR,
	RUN_MADE_MODEL,
	RUN_MADE_LOOP,
};

struct run_state {
	run_opts o; /* a copy: what its members point to is the caller's */
	enum run_made made;
	uv_loop_t loop;
	uv_signal_t sigchld;
	uv_timer_t wait_timer;
	uv_timer_t drain_timer;
	uv_timer_t progress_timer;
	uv_timer_t table_timer;
	uv_async_t sig_async;     /* a signal asked to stop waiting or to be passed on */
	uv_timer_t forward_timer; /* passes signals on after RSIG_DEFER_MS */
	bool progress_on;
	srv server;
	model_trace *model;
	proc_tree *tree;
	ptab *table;
	pid_t root;
	int root_status;
	bool root_done;
	bool tree_done;
	bool timed_out;
	int stopped_by;    /* the signal that ended the wait, or 0 */
	bool said_writing; /* a signal came as the trace was being written */
	bool finishing;
	int drain_waited_ms;
	int drain_limit_ms;
	char sock_dir[PATH_MAX];
	char sock_path[PATH_MAX];
	char spill_dir[PATH_MAX];      /* OUTPUT.spill, absolute; "" if unknown */
	spill_run sr;                  /* what the run made and merged there */
	char spill_link[PATH_MAX + 8]; /* SOCK_DIR/spill -> spill_dir, or "" */
	size_t stale_removed;          /* leftovers of killed runs removed */
	out_file out;                  /* the trace */
	out_file rep;                  /* the report, with --report */
	/* Multi-host runs (docs/MULTIHOST.md): a head takes nodes' parts, a
	 * node (--join) sends its model to its head. Neither: --no-remote, or
	 * a head without a key or listener (remote_off says why). */
	head_state *head;
	node_state *node;
	int port;                   /* the head's */
	char remote_off[512];       /* why ssh launches are not followed */
	char remote_path[PATH_MAX]; /* forktrace on the other hosts */
	char head_addr[300];        /* a node's head, auto resolved */
	char head_var[320];         /* FORKTRACE_HEAD for the agents, or "" */
	char resolve_err[128];      /* why it could not be */
	char host[256];
	char node_base[300]; /* a node's name for its spill directory */
	bool tree_finished;  /* finish_tree ran */
	bool waiting_nodes;  /* the tree is gone: nodes' turn */
	int code;            /* COMMAND's exit code */
};

/*
 * Finds COMMAND the way a shell would, so that forktrace can answer 127 or
 * 126 before anything starts. Returns 0 and the path in out, or the exit
 * code after printing why.
 */
static int resolve_command(const char *cmd, char *out, size_t outsz)
{
	struct stat st;

	if (strchr(cmd, '/')) {
		if (stat(cmd, &st) < 0) {
			fprintf(stderr, "forktrace: %s: %s\n", cmd, strerror(errno));
			return 127;
		}
		if (S_ISDIR(st.st_mode) || access(cmd, X_OK) < 0) {
			fprintf(stderr, "forktrace: %s: %s\n", cmd,
				S_ISDIR(st.st_mode) ? "Is a directory" : strerror(EACCES));
			return 126;
		}
		snprintf(out, outsz, "%s", cmd);
		return 0;
	}
	const char *path = getenv("PATH");
	bool denied = false;
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		const char *colon = strchr(path, ':');
		size_t n = colon ? (size_t)(colon - path) : strlen(path);
		snprintf(out, outsz, "%.*s%s%s", (int)n, path, n ? "/" : "", cmd);
		if (stat(out, &st) == 0 && !S_ISDIR(st.st_mode)) {
			if (access(out, X_OK) == 0)
				return 0;
			denied = true;
		}
		path += n + (colon ? 1 : 0);
	}
	if (denied) {
		fprintf(stderr, "forktrace: %s: %s\n", cmd, strerror(EACCES));
		return 126;
	}
	fprintf(stderr, "forktrace: %s: command not found\n", cmd);
	return 127;
}

/* Where the agent library is: $FORKTRACE_AGENT, or where module_beside_self
 * finds it (made canonical, so LD_PRELOAD carries no "bin/.."). A path
 * LD_PRELOAD cannot carry (it splits on spaces and colons) is refused
 * here, rather than running COMMAND without the agent. */
static int find_agent(char *out, size_t outsz)
{
	const char *env = getenv("FORKTRACE_AGENT");

	if (env && *env) {
		if (env[0] != '/' || access(env, R_OK) < 0) {
			fprintf(stderr,
				"forktrace: FORKTRACE_AGENT=%s: not an absolute path "
				"to a readable file\n",
				env);
			return -ENOENT;
		}
		snprintf(out, outsz, "%s", env);
	} else if (module_beside_self("libforktrace-agent.so", out, outsz) < 0) {
		fprintf(stderr, "forktrace: cannot find libforktrace-agent.so next to the "
				"forktrace executable or in ../lib/forktrace/ from it; set "
				"FORKTRACE_AGENT to its path\n");
		return -ENOENT;
	}
	if (strpbrk(out, " :")) {
		fprintf(stderr,
			"forktrace: the agent's path %s holds a space or a colon, which "
			"LD_PRELOAD cannot carry; install forktrace elsewhere or set "
			"FORKTRACE_AGENT to a path without them\n",
			out);
		return -EINVAL;
	}
	return 0;
}

/*
 * A run needs some file descriptors it cannot do without (the output, the
 * event loop's, the socket, the process table...) and libuv aborts when
 * its signal pipe cannot be made: with too few, say so before anything
 * starts. Connections need more, but a refused one only makes its agent
 * spill to a file.
 */
#define RUN_MIN_FDS 20
static int check_fds(void)
{
	int fds[RUN_MIN_FDS], n, err = 0;
	struct rlimit rl;

	for (n = 0; n < RUN_MIN_FDS; n++) {
		fds[n] = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fds[n] < 0) {
			err = errno;
			break;
		}
	}
	while (n > 0)
		close(fds[--n]);
	if (err != EMFILE && err != ENFILE)
		return 0;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && err == EMFILE)
		fprintf(stderr,
			"forktrace: too few file descriptors: 'forktrace run' needs %d "
			"free, and the limit (ulimit -n) is %llu\n",
			RUN_MIN_FDS, (unsigned long long)rl.rlim_cur);
	else
		fprintf(stderr,
			"forktrace: too few file descriptors: 'forktrace run' needs %d "
			"free: %s\n",
			RUN_MIN_FDS, strerror(err));
	return -err;
}

/* Creates the output's temporary sibling now, so that an unwritable path
 * stops the run before COMMAND starts. */
static int open_output(run_state *rs)
{
	/* A node without -o: its trace is the head's. */
	if (!rs->o.output)
		return 0;
	/* HDF5 is written by a module loaded on demand: it must be there. */
	if (events_format_for_path(rs->o.output) == TRACE_FORMAT_H5 && sink_h5_load() < 0)
		return -ELIBACC;
	return out_file_open(&rs->out, rs->o.output, "trace",
			     events_format_for_path(rs->o.output) == TRACE_FORMAT_H5);
}

/* Where the socket directory goes: $TMPDIR when its path is short
 * enough for the socket's, else /tmp. */
static const char *sock_tmp(void)
{
	const char *tmp = getenv("TMPDIR");

	return !tmp || !*tmp || strlen(tmp) > 60 ? "/tmp" : tmp;
}

static int make_socket_dir(run_state *rs)
{
	const char *tmp = sock_tmp();

	snprintf(rs->sock_dir, sizeof(rs->sock_dir), "%s/forktrace-XXXXXX", tmp);
	/* mkdtemp makes it 0700. Others may pass through it (not list it):
	 * a process of the tree that gives up our uid (a daemon dropping
	 * root, sudo -u) connects to the socket in it, which the server
	 * lets in only if it is of the tree. The process table and the
	 * other files in it stay ours alone (0600). */
	if (!mkdtemp(rs->sock_dir) || chmod(rs->sock_dir, 0711) < 0) {
		fprintf(stderr, "forktrace: cannot create a socket directory in %s: %s\n", tmp,
			strerror(errno));
		return -errno;
	}
	/* TMPDIR was capped at 60 bytes above, so this fits sun_path. */
	if ((size_t)snprintf(rs->sock_path, sizeof(rs->sock_path), "%s/collector.sock",
			     rs->sock_dir) >= sizeof(rs->sock_path))
		return -ENAMETOOLONG;
	return 0;
}

static void remove_socket_dir(run_state *rs)
{
	if (!rs->sock_dir[0])
		return;
	unlink(rs->sock_path);
	if (rs->spill_link[0])
		unlink(rs->spill_link);
	rmdir(rs->sock_dir);
}

/* Variables of forktrace's own that environ may hold from an outer run
 * (or forged): the collector sets its own, or none. A FORKTRACE_EXEC_TS
 * or FORKTRACE_TABLE_FD is for the image an agent execs, never for
 * COMMAND; FORKTRACE_HEAD and FORKTRACE_REMOTE are this run's or absent. */
static bool own_var(const char *e)
{
	static const char *const names[] = {FT_ENV_SOCK "=", FT_ENV_EXEC_TS "=",
					    FT_ENV_TABLE_FD "=", FT_ENV_HEAD "=",
					    FT_ENV_REMOTE "="};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strncmp(e, names[i], strlen(names[i])))
			return true;
	return false;
}

/* environ with LD_PRELOAD (our agent first), FORKTRACE_SOCK and, when
 * this run follows remote launches, FORKTRACE_HEAD (head) and
 * FORKTRACE_REMOTE (remote) set. LD_PRELOAD stays where the user's was
 * (the agent gives the program back the part after "<agent>:", an empty
 * one too, so that it sees the environment it would untraced, in the same
 * order). Returns a malloc'd array whose first extra strings (counted in
 * *nown) are malloc'd too (the others borrow environ's); release it with
 * child_env_free. */
static char **child_env(const char *agent, const char *sock, const char *head, const char *remote)
{
	size_t n = 0, k = 0;
	const char *old_preload = getenv("LD_PRELOAD");
	char *preload = NULL, *vars[3] = {NULL, NULL, NULL};
	int nvars = 0;

	while (environ[n])
		n++;
	char **env = calloc(n + 5, sizeof(*env));
	if (!env || asprintf(&preload, "LD_PRELOAD=%s%s%s", agent, old_preload ? ":" : "",
			     old_preload ? old_preload : "") < 0)
		goto fail;
	if (asprintf(&vars[nvars++], "%s=%s", FT_ENV_SOCK, sock) < 0 ||
	    (head && asprintf(&vars[nvars++], "%s=%s", FT_ENV_HEAD, head) < 0) ||
	    (remote && asprintf(&vars[nvars++], "%s=%s", FT_ENV_REMOTE, remote) < 0)) {
		vars[nvars - 1] = NULL;
		goto fail;
	}
	for (size_t i = 0; i < n; i++) {
		if (!strncmp(environ[i], "LD_PRELOAD=", 11)) {
			if (preload)
				env[k++] = preload;
			preload = NULL;
			continue;
		}
		if (own_var(environ[i]))
			continue;
		env[k++] = environ[i];
	}
	if (preload)
		env[k++] = preload;
	for (int i = 0; i < nvars; i++)
		env[k++] = vars[i];
	env[k] = NULL;
	return env;

fail:
	free(preload);
	for (int i = 0; i < nvars; i++)
		free(vars[i]);
	free(env);
	return NULL;
}

static void child_env_free(char **env)
{
	if (!env)
		return;
	for (size_t i = 0; env[i]; i++)
		if (!strncmp(env[i], "LD_PRELOAD=", 11) || own_var(env[i]))
			free(env[i]);
	free(env);
}

static void close_walk(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (!uv_is_closing(h))
		uv_close(h, NULL);
}

static void progress_clear(run_state *rs)
{
	if (rs->progress_on)
		fputs("\r\033[K", stderr);
}

static void table_cb(uv_timer_t *t)
{
	run_state *rs = t->data;

	ptab_read(rs->table);
	head_rebalance(rs->head);
}

static void progress_cb(uv_timer_t *t)
{
	run_state *rs = t->data;
	proc_counts pc;

	proc_get_counts(rs->tree, &pc);
	fprintf(stderr, "\r\033[Kforktrace: %llu processes (%llu running), %llu messages",
		(unsigned long long)pc.processes, (unsigned long long)pc.running,
		(unsigned long long)pc.messages);
	rs->progress_on = true;
}

/*
 * Every process has exited, but what they sent may still be in flight: in
 * connections not read to their EOF yet, and in connections still waiting
 * in the listen backlog (a process can connect, speak and exit before we
 * accept). Nothing of the tree is left to connect, so once no connection
 * is open and the backlog is empty, everything is in. One still open after
 * DRAIN_TIMEOUT_MS is held by something outside the tree: cut it, so the
 * trace gets written.
 */
static void tree_drained(run_state *rs);

static void drain_cb(uv_timer_t *t)
{
	run_state *rs = t->data;

	if (!srv_idle(&rs->server) && rs->drain_waited_ms < rs->drain_limit_ms) {
		rs->drain_waited_ms += DRAIN_POLL_MS;
		return;
	}
	if (rs->server.nconns && !rs->timed_out && !rs->stopped_by)
		fprintf(stderr,
			"forktrace: warning: %zu connections still open %d ms after "
			"the last process ended; closing them\n",
			rs->server.nconns, DRAIN_TIMEOUT_MS);
	uv_timer_stop(&rs->drain_timer);
	srv_close_all(&rs->server);
	tree_drained(rs);
}

/* The tree is gone (or we gave up waiting): stop accepting, drain what is
 * in flight, then let uv_run return. */
static void begin_finish(run_state *rs)
{
	if (rs->finishing)
		return;
	rs->finishing = true;
	/* Its handle is closed with the others at the end of the drain. */
	rsig_notify_off();
	uv_signal_stop(&rs->sigchld);
	uv_timer_stop(&rs->wait_timer);
	/* After --wait-timeout the daemons keep their connections open:
	 * read what the others sent, briefly, then cut. */
	rs->drain_limit_ms = rs->timed_out || rs->stopped_by ? DRAIN_AFTER_TIMEOUT_MS
							     : DRAIN_TIMEOUT_MS;
	/* At once: a run whose images all spoke in the table is done now. */
	uv_timer_start(&rs->drain_timer, drain_cb, 0, DRAIN_POLL_MS);
}

static void wait_timer_cb(uv_timer_t *t)
{
	run_state *rs = t->data;

	rs->timed_out = true;
	begin_finish(rs);
}

/*
 * A signal came after COMMAND exited (or as it did): stop waiting for the
 * rest of the tree, as --wait-timeout does.
 */
static void stop_waiting(run_state *rs, int sig)
{
	if (!sig || rs->stopped_by)
		return;
	if (rs->finishing && rs->waiting_nodes && rs->head && !rs->stopped_by) {
		/* The tree is gone; nodes still send: they are cut as the
		 * tree's daemons would be. */
		rs->stopped_by = sig;
		fprintf(stderr,
			"forktrace: %s: no longer waiting for the nodes still sending (their "
			"processes are marked running in the trace); send it again to stop "
			"without a trace\n",
			rsig_name(sig));
		head_stop_waiting(rs->head);
		return;
	}
	if (rs->finishing) {
		/* The tree is gone already: what is left is the writing. */
		if (!rs->said_writing)
			fprintf(stderr,
				"forktrace: %s: writing the trace; send it again to "
				"stop without it\n",
				rsig_name(sig));
		rs->said_writing = true;
		return;
	}
	rs->stopped_by = sig;
	progress_clear(rs);
	rs->progress_on = false;
	fprintf(stderr,
		"forktrace: %s: no longer waiting for the processes still running "
		"(marked running in the trace); send it again to stop without a trace\n",
		rsig_name(sig));
	/* COMMAND itself is reaped first, for its exit status. */
	if (rs->root_done)
		begin_finish(rs);
}

static void forward_cb(uv_timer_t *t)
{
	run_state *rs = t->data;

	stop_waiting(rs, rsig_forward_due());
}

static void sig_async_cb(uv_async_t *a)
{
	run_state *rs = a->data;

	if (rsig_deferred() && !uv_is_active((uv_handle_t *)&rs->forward_timer))
		uv_timer_start(&rs->forward_timer, forward_cb, RSIG_DEFER_MS, 0);
	stop_waiting(rs, rsig_stop_signal());
}

/* A struct rusage as the model keeps it: times in ns. */
static model_rusage rusage_of(const struct rusage *ru)
{
	return (model_rusage){
		.user_ns = (int64_t)ru->ru_utime.tv_sec * 1000000000 + ru->ru_utime.tv_usec * 1000,
		.sys_ns = (int64_t)ru->ru_stime.tv_sec * 1000000000 + ru->ru_stime.tv_usec * 1000,
		.maxrss_kb = ru->ru_maxrss,
		.minflt = ru->ru_minflt,
		.majflt = ru->ru_majflt,
		.nvcsw = ru->ru_nvcsw,
		.nivcsw = ru->ru_nivcsw,
		.inblock = ru->ru_inblock,
		.oublock = ru->ru_oublock,
	};
}

/* Reaps through wait4, whose figure for an orphan (and for the command)
 * is the only one when no traced parent reaps it. */
static void reap(run_state *rs)
{
	for (;;) {
		int status;
		struct rusage ru;
		pid_t pid = wait4(-1, &status, WNOHANG, &ru);

		if (pid > 0) {
			model_rusage mru = rusage_of(&ru);

			proc_reaped(rs->tree, pid, status, &mru, proc_now_mono_ns());
			if (pid == rs->root) {
				rs->root_done = true;
				rs->root_status = status;
				rsig_command_ended();
				if (rs->o.wait_timeout >= 0)
					uv_timer_start(&rs->wait_timer, wait_timer_cb,
						       (uint64_t)(rs->o.wait_timeout * 1000), 0);
			}
			continue;
		}
		if (pid < 0 && errno == EINTR)
			continue;
		if (pid < 0 && errno == ECHILD)
			rs->tree_done = true;
		break;
	}
}

static void sigchld_cb(uv_signal_t *h, int signum)
{
	run_state *rs = h->data;

	(void)signum;
	reap(rs);
	if (rs->tree_done || (rs->root_done && rs->stopped_by))
		begin_finish(rs);
}

/*
 * One fd per connected image: with the usual soft limit of 1024, a tree
 * with a thousand live instrumented processes would run the collector
 * out of fds, and the rest would have to spill. So the collector takes
 * its hard limit, once COMMAND has started with the soft limit it would
 * have had without forktrace.
 */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* Is path a program whose remote command the agent follows (ssh, rsh,
 * or a name in $FORKTRACE_RSH, as agent/remote.c decides)? */
static bool is_rsh(const char *path)
{
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	const char *list = getenv("FORKTRACE_RSH");
	size_t n = strlen(base);

	if (!strcmp(base, "ssh") || !strcmp(base, "rsh"))
		return true;
	for (const char *p = list; p != NULL && *p != '\0';) {
		const char *colon = strchr(p, ':');
		size_t len = colon ? (size_t)(colon - p) : strlen(p);
		if (len == n && !strncmp(p, base, n))
			return true;
		p += len + (colon ? 1 : 0);
	}
	return false;
}

static int spawn_root(run_state *rs, const char *path, char **env)
{
	posix_spawnattr_t attr;
	char **argv = rs->o.command;
	char **shim = NULL;
	sigset_t old;
	int rc;

	/* The agent follows a remote launch where an image execs ssh: when
	 * COMMAND is ssh itself, no image of the tree would, so it starts
	 * through a shell that execs it at once (one short image of the
	 * root, shown in the trace as what it is). */
	if (rs->head_var[0] && is_rsh(path)) {
		size_t n = 0;
		while (argv[n])
			n++;
		shim = calloc(n + 4, sizeof(*shim));
		if (shim == NULL)
			return -ENOMEM;
		shim[0] = "sh";
		shim[1] = "-c";
		shim[2] = "exec \"$0\" \"$@\"";
		shim[3] = (char *)path;
		for (size_t i = 1; i < n; i++)
			shim[3 + i] = argv[i];
		argv = shim;
		path = "/bin/sh";
	}

	posix_spawnattr_init(&attr);
	/* We ignore SIGPIPE to survive dead connections and catch the
	 * signals we pass on; COMMAND gets what we were given (`yes | head`
	 * relies on SIGPIPE, nohup on an ignored SIGHUP). */
	rsig_spawn_attr(&attr);
	/* A signal that comes during the spawn finds COMMAND's pid known. */
	rsig_block(&old);
	rc = posix_spawn(&rs->root, path, NULL, &attr, argv, env);
	posix_spawnattr_destroy(&attr);
	free(shim);
	if (rc == 0)
		rsig_command_started(rs->root, &old);
	else
		sigprocmask(SIG_SETMASK, &old, NULL);
	/* COMMAND got the environment as it was. Naming functions later must
	 * not go to the network: elfutils would ask debuginfod servers for
	 * every library without local debug info. */
	unsetenv("DEBUGINFOD_URLS");
	return -rc;
}

/* The sink of the trace, in the format its name says, on fd. */
static trace_sink *trace_sink_for(run_state *rs, int fd, int *err)
{
	events_opts mo = {.gzip_level = rs->o.gzip_level};

	return events_sink_for(events_format_for_path(rs->o.output), fd, &mo, err);
}

/* The sink of the report (--report), with the report options, on fd. */
static trace_sink *report_sink_for(run_state *rs, int fd, int *err)
{
	htmlw_opts ho = {rs->o.ro.include, rs->o.ro.exclude, rs->o.ro.pids, rs->o.ro.hosts};

	return sink_html_new(fd, &ho, err);
}

/*
 * Writes the run's model into sink (borrowed): through the merge, as
 * every trace is written, with the model its only input and the output
 * its own trace. stats (may be NULL) gets what the sink wrote. Returns 0
 * or a negative errno.
 */
static int write_model(run_state *rs, trace_sink *sink, events_stats *stats)
{
	size_t np = head_nparts(rs->head);
	merge_source *src = calloc(np + 1, sizeof(*src));
	model_trace **parts = calloc(np + 1, sizeof(*parts));
	merge_opts mo = {.model_as_trace = true};
	merge_result res;
	int err = -ENOMEM;

	if (src && parts) {
		np = head_parts(rs->head, parts, np);
		src[0] = (merge_source){.model = rs->model,
					.name = rs->o.output ? rs->o.output : rs->host};
		for (size_t i = 0; i < np; i++)
			src[i + 1] = (merge_source){.model = parts[i], .name = parts[i]->host};
		err = merge_inputs(src, np + 1, &mo, sink, &res);
		if (stats)
			*stats = res.out;
		merge_result_free(&res);
	}
	free(src);
	free(parts);
	return err;
}

/* out_file_fallback's writers: the trace and the report of the run
 * again, into fd. */
static int write_trace_fd(void *ctx, int fd)
{
	run_state *rs = ctx;
	trace_sink *s;
	int err;

	s = trace_sink_for(rs, fd, &err);
	if (s == NULL)
		return err;
	err = write_model(rs, s, NULL);
	s->free(s);
	return err;
}

static int write_report_fd(void *ctx, int fd)
{
	run_state *rs = ctx;
	trace_sink *s;
	int err;

	s = report_sink_for(rs, fd, &err);
	if (s == NULL)
		return err;
	err = write_model(rs, s, NULL);
	s->free(s);
	return err;
}

/*
 * Writes the trace and, with --report, the report in one walk of the
 * model: both sinks behind a tee. *trace_err and *report_err get each
 * output's first error (0: written whole; then committed by the caller),
 * *ms what the trace's sink wrote and *rs_stats the report's.
 */
static void write_both(run_state *rs, int *trace_err, int *report_err, events_stats *ms,
		       events_stats *rstats)
{
	trace_sink *ts = NULL, *hs = NULL, *sink;
	int err;

	*report_err = 0;
	*trace_err = rs->o.output && events_format_for_path(rs->o.output) == TRACE_FORMAT_H5
			     ? out_file_name(&rs->out)
			     : 0;
	rsig_add_temp(rs->out.tmp, false);
	if (*trace_err == 0 && rs->o.output)
		ts = trace_sink_for(rs, rs->out.fd, trace_err);
	if (rs->o.report)
		hs = report_sink_for(rs, rs->rep.fd, report_err);
	if (ts != NULL && hs != NULL) {
		sink = sink_tee_new(ts, hs, &err);
		if (sink == NULL)
			*trace_err = *report_err = err;
	} else {
		sink = ts != NULL ? ts : hs;
	}
	if (sink == NULL)
		return;
	err = write_model(rs, sink, sink == hs ? rstats : ms);
	if (sink == ts) {
		*trace_err = err;
	} else if (sink == hs) {
		*report_err = err;
	} else {
		*trace_err = sink_tee_result(sink, 0, NULL);
		*report_err = sink_tee_result(sink, 1, rstats);
		/* The merge's own failure (no memory) is both outputs'. */
		if (err < 0 && *trace_err == 0)
			*trace_err = err;
		if (err < 0 && *report_err == 0)
			*report_err = err;
	}
	sink->free(sink);
}

/*
 * Writes the trace and the report (write_both) and puts them in place.
 * An output that failed is written again from the model into $TMPDIR
 * (out_file_fallback), the other is kept all the same, and *code becomes
 * 1 if it was 0. Returns the trace's result: 0 or a negative errno; *ms
 * gets what its sink wrote.
 */
static int write_outputs(run_state *rs, events_stats *ms, int *code)
{
	events_stats rstats = {0};
	int rc, rrc;

	write_both(rs, &rc, &rrc, ms, &rstats);
	if (rc == 0 && rs->o.output)
		rc = out_file_commit(&rs->out);
	if (rc < 0) {
		fprintf(stderr, "forktrace: cannot write the trace to '%s': %s\n", rs->o.output,
			strerror(-rc));
		/* The model is still here: the trace need not be lost. */
		out_file_fallback(&rs->out, write_trace_fd, rs);
		out_file_abort(&rs->out);
		if (*code == 0)
			*code = 1;
	}
	if (!rs->o.report)
		return rc;
	if (rrc == 0)
		rrc = out_file_commit(&rs->rep);
	if (rrc < 0) {
		fprintf(stderr, "forktrace: cannot write the report to '%s': %s\n", rs->o.report,
			strerror(-rrc));
		out_file_fallback(&rs->rep, write_report_fd, rs);
		out_file_abort(&rs->rep);
		if (*code == 0)
			*code = 1;
	} else if (!rs->o.quiet) {
		fprintf(stderr, "forktrace: report written to %s (%llu bytes)\n", rs->o.report,
			(unsigned long long)rstats.bytes);
	}
	return rc;
}

/* Everything the user controls that can fail before anything is made,
 * after the options: COMMAND (into cmd_path), the agent (into agent),
 * enough file descriptors. */
static int check_before_start(run_state *rs, char *cmd_path, char *agent)
{
	int rc = resolve_command(rs->o.command[0], cmd_path, PATH_MAX);

	if (rc)
		return rc;
	if (find_agent(agent, PATH_MAX) < 0 || check_fds() < 0)
		return 1;
	return RUN_GO_ON;
}

/*
 * The outputs' temporary files, and the spill directory: should forktrace
 * die, or an agent fail to reach it, the agents write what they record
 * next to the trace it would have written: OUTPUT.spill/, merged at the
 * end of the run; with an output that is no file (stdout, a FIFO,
 * /dev/null: no directory of its own to write beside), forktrace.spill/.
 * Returns 0 or a negative errno, said.
 */
static int open_outputs(run_state *rs)
{
	char cwd[PATH_MAX], *dir = NULL;
	const char *base;
	int n;

	if (open_output(rs) < 0)
		return -EIO;
	rsig_add_temp(rs->out.tmp, false);
	if (rs->o.report && out_file_open(&rs->rep, rs->o.report, "report", false) < 0)
		return -EIO;
	rsig_add_temp(rs->rep.tmp, false);
	base = rs->out.in_place ? "forktrace" : rs->o.output;
	/* A node without -o: its own name, for the nodes that share a
	 * home directory. */
	if (!rs->o.output)
		base = rs->node_base;
	n = base[0] == '/'             ? asprintf(&dir, "%s.spill", base)
	    : getcwd(cwd, sizeof(cwd)) ? asprintf(&dir, "%s/%s.spill", cwd, base)
				       : -1;
	if (n >= 0 && (size_t)n < sizeof(rs->spill_dir)) {
		snprintf(rs->spill_dir, sizeof(rs->spill_dir), "%s", dir);
		setenv(FT_ENV_SPILL_DIR, dir, 1);
	}
	free(n >= 0 ? dir : NULL);
	/* What runs that were killed left goes first, their tables'
	 * last frames to their spill directories: one of them may be
	 * ours, which the check then finds holding them. */
	rs->stale_removed = ptab_clean_stale(sock_tmp(), NULL);
	if (rs->spill_dir[0] && spill_run_check(rs->spill_dir) < 0)
		return -EEXIST;
	return 0;
}

void run_set_write_opts(model_trace *t, const run_opts *o)
{
	t->fn_include = o->fn_filter;
	t->fn_exclude = o->ro.exclude;
	t->no_functions = o->no_functions;
}

/*
 * Of --max-memory, what the collector needs whatever the trace holds: the
 * program and its libraries (HDF5's too), the writers' blocks in flight,
 * the decoding of event records, symbol tables, frames being received.
 * The rest is the models' (their event records and strings); past it,
 * they go to the spill file. So the collector's peak RSS stays within
 * --max-memory, or within this reserve when --max-memory is smaller
 * (docs/OUTPUT.md, "mem").
 */
#define RUN_MEMORY_RESERVE (32ull << 20)

/* What of max_memory the models (the run's and a head's parts) share. */
static uint64_t models_budget(uint64_t max_memory)
{
	return max_memory > RUN_MEMORY_RESERVE ? max_memory - RUN_MEMORY_RESERVE : 0;
}

/* The model of the run and its tree, with the run's metadata. Returns 0
 * or -ENOMEM, said. */
static int make_model(run_state *rs)
{
	size_t ncmd = 0;

	rs->model = model_new();
	rs->tree = rs->model ? proc_tree_new(rs->model) : NULL;
	if (!rs->tree) {
		fprintf(stderr, "forktrace: out of memory\n");
		return -ENOMEM;
	}
	rs->model->origin = "forktrace run";
	run_set_write_opts(rs->model, &rs->o);
	/* The agents skip function calls altogether (and the trace writer
	 * again, for images that lost the variable with a cleared env). */
	if (rs->o.no_functions)
		setenv("FORKTRACE_FUNCTIONS", "0", 1);
	if (model_set_spill(rs->model, rs->sock_dir, models_budget(rs->o.max_memory)) < 0)
		fprintf(stderr,
			"forktrace: warning: cannot create a spill file in %s; "
			"--max-memory is not enforced\n",
			rs->sock_dir);
	rs->model->anchor_mono_ns = proc_now_mono_ns();
	rs->model->anchor_real_ns = proc_now_real_ns();
	proc_add_clock_pair(rs->model);
	rs->model->host = model_strdup(rs->model, rs->host);
	while (rs->o.command[ncmd])
		ncmd++;
	rs->model->command = model_strvdup(rs->model, (const char *const *)rs->o.command, ncmd);
	return 0;
}

/*
 * The server on the socket, the signals and timers of the loop (already
 * initialised), the process table, and the spill directory that is made
 * with the table's journal when the table first gives pages back.
 * Returns 0 or a negative errno, said.
 */
static int start_server(run_state *rs)
{
	int rc = srv_start(&rs->server, &rs->loop, rs->sock_path, rs->tree);

	if (rc < 0) {
		fprintf(stderr, "forktrace: cannot listen on %s: %s\n", rs->sock_path,
			uv_strerror(rc));
		return rc;
	}
	rs->sigchld.data = rs;
	rc = uv_signal_init(&rs->loop, &rs->sigchld);
	if (rc == 0)
		rc = uv_signal_start(&rs->sigchld, sigchld_cb, SIGCHLD);
	if (rc == 0)
		rc = uv_async_init(&rs->loop, &rs->sig_async, sig_async_cb);
	if (rc < 0) {
		fprintf(stderr, "forktrace: cannot set up the event loop: %s\n", uv_strerror(rc));
		return rc;
	}
	rs->sig_async.data = rs;
	uv_unref((uv_handle_t *)&rs->sig_async);
	rsig_set_notify(&rs->sig_async);
	uv_timer_init(&rs->loop, &rs->wait_timer);
	rs->wait_timer.data = rs;
	uv_timer_init(&rs->loop, &rs->forward_timer);
	rs->forward_timer.data = rs;
	uv_timer_init(&rs->loop, &rs->drain_timer);
	rs->drain_timer.data = rs;
	uv_timer_init(&rs->loop, &rs->progress_timer);
	rs->progress_timer.data = rs;
	rsig_add_temp(rs->sock_path, false);
	rs->table = ptab_create(rs->sock_dir, rs->tree);
	rs->server.tab = rs->table;
	{
		const char *file, *link, *dir;

		ptab_temp_paths(rs->table, &file, &link, &dir);
		rsig_add_temp(dir, true);
		rsig_add_temp(file, false);
		rsig_add_temp(link, false);
	}
	if (rs->spill_dir[0]) {
		char p[PATH_MAX + 32];

		spill_run_start(&rs->sr, rs->spill_dir, rs->table);
		/* A run ended by a signal leaves no trace to recover into. */
		rsig_add_temp(rs->spill_dir, true);
		snprintf(p, sizeof(p), "%s/%s", rs->spill_dir, SPILL_JOURNAL_NAME);
		rsig_add_temp(p, false);
		snprintf(p, sizeof(p), "%s/%s", rs->spill_dir, FT_TABLE_NAME);
		rsig_add_temp(p, false);
		/* Should this run die, the next one finds its spill directory
		 * from here (ptab_clean_stale). */
		snprintf(rs->spill_link, sizeof(rs->spill_link), "%s/spill", rs->sock_dir);
		if (symlink(rs->spill_dir, rs->spill_link) == 0)
			rsig_add_temp(rs->spill_link, false);
		else
			rs->spill_link[0] = '\0';
	}
	uv_timer_init(&rs->loop, &rs->table_timer);
	rs->table_timer.data = rs;
	if (rs->table) {
		uv_timer_start(&rs->table_timer, table_cb, TABLE_INTERVAL_MS, TABLE_INTERVAL_MS);
		/* It must not keep the loop alive on its own. */
		uv_unref((uv_handle_t *)&rs->table_timer);
	}
	return 0;
}

/* The path of this forktrace, for the other hosts (same path there). */
static void self_path(run_state *rs)
{
	ssize_t n;

	if (rs->o.remote_forktrace) {
		snprintf(rs->remote_path, sizeof(rs->remote_path), "%s", rs->o.remote_forktrace);
		return;
	}
	n = readlink("/proc/self/exe", rs->remote_path, sizeof(rs->remote_path) - 1);
	rs->remote_path[n > 0 ? n : 0] = '\0';
}

/* A node's head: HOST:PORT as given, or auto:PORT with the address the
 * ssh session came from ($SSH_CONNECTION: "CLIENT PORT SERVER PORT"). */
static void resolve_head(run_state *rs)
{
	const char *j = rs->o.join, *port = strrchr(j, ':') + 1;
	const char *sc = getenv("SSH_CONNECTION");
	char ip[64];

	snprintf(rs->head_addr, sizeof(rs->head_addr), "%s", j);
	if (strncmp(j, "auto:", 5) != 0)
		return;
	if (!sc || sscanf(sc, "%63s", ip) != 1) {
		snprintf(rs->resolve_err, sizeof(rs->resolve_err),
			 "--join auto: no $SSH_CONNECTION to find the head's address in");
		return;
	}
	snprintf(rs->head_addr, sizeof(rs->head_addr), strchr(ip, ':') ? "[%s]:%s" : "%s:%s", ip,
		 port);
}

/* Is addr ("[ADDR:]PORT" of --listen) every address of the host? */
static bool listen_any(const char *addr)
{
	const char *colon = addr ? strrchr(addr, ':') : NULL;

	return !colon || !strncmp(addr, "0.0.0.0:", 8) || !strncmp(addr, "[::]:", 5);
}

/*
 * What this run does with other hosts: a node starts its link to the
 * head; a head makes its key and listens, and its agents learn where
 * nodes join (FORKTRACE_HEAD). A head that cannot is no failure unless
 * --listen asked for it: remote launches are then not followed, and the
 * summary says so when one happened. Returns 0, or -1 after saying why.
 */
static int start_remote(run_state *rs)
{
	head_opts ho = {.listen = rs->o.listen,
			.max_memory = models_budget(rs->o.max_memory),
			.spill_dir = rs->sock_dir,
			.tree = rs->tree,
			.write_opts = &rs->o,
			.quiet = rs->o.quiet};
	int rc;

	if (rs->o.no_remote)
		return 0;
	self_path(rs);
	ho.remote_path = rs->remote_path;
	if (rs->o.join) {
		node_opts no = {.head = rs->head_addr,
				.host = rs->host,
				.launcher_pid = rs->o.launcher_pid,
				.launched_as = rs->o.launched_as,
				.node_output = rs->o.node_output,
				.spill_dir = rs->spill_dir[0] ? rs->spill_dir : NULL,
				.tree = rs->tree};

		resolve_head(rs);
		no.resolve_error = rs->resolve_err[0] ? rs->resolve_err : NULL;
		if (node_start(&rs->node, &rs->loop, rs->model, &no) < 0) {
			fprintf(stderr, "forktrace: out of memory\n");
			return -1;
		}
		/* Nested hops join the same head, directly. */
		if (!rs->resolve_err[0])
			snprintf(rs->head_var, sizeof(rs->head_var), "%s", rs->head_addr);
		return 0;
	}
	rc = head_start(&rs->head, &rs->loop, rs->model, &ho, &rs->port, rs->remote_off,
			sizeof(rs->remote_off));
	if (rc < 0 && rs->o.listen) {
		fprintf(stderr, "forktrace: --listen %s: %s\n", rs->o.listen, rs->remote_off);
		return -1;
	}
	if (rc < 0)
		return 0;
	rsig_add_temp(head_key_path(rs->head), false);
	if (listen_any(rs->o.listen))
		snprintf(rs->head_var, sizeof(rs->head_var), "auto:%d", rs->port);
	else
		snprintf(rs->head_var, sizeof(rs->head_var), "%.*s:%d",
			 (int)(strrchr(rs->o.listen, ':') - rs->o.listen), rs->o.listen, rs->port);
	if (rs->o.listen && !rs->o.quiet) {
		char where[sizeof(rs->head_var) + 16];

		if (listen_any(rs->o.listen))
			snprintf(where, sizeof(where), "%s:%d", rs->host, rs->port);
		else
			snprintf(where, sizeof(where), "%s", rs->head_var);
		fprintf(stderr,
			"forktrace: nodes join with: forktrace run --join %s -- CMD (or "
			"FORKTRACE_JOIN=%s in their environment)\n",
			where, where);
	}
	return 0;
}

/* COMMAND started with the agent, as a child of a subreaper, and its
 * root process in the tree. Returns RUN_GO_ON, or the exit code. */
static int start_command(run_state *rs, const char *cmd_path, const char *agent)
{
	int64_t start;
	char **env;
	int rc;

	/* Orphans of the tree are reparented to us, not to init. */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		fprintf(stderr,
			"forktrace: warning: cannot become a child subreaper (%s); "
			"orphans will not be waited for\n",
			strerror(errno));

	env = child_env(agent, rs->sock_path, rs->head_var[0] ? rs->head_var : NULL,
			rs->head_var[0] ? rs->remote_path : NULL);
	if (!env) {
		fprintf(stderr, "forktrace: out of memory\n");
		return 1;
	}
	start = proc_now_mono_ns();
	rc = spawn_root(rs, cmd_path, env);
	child_env_free(env);
	if (rc < 0) {
		fprintf(stderr, "forktrace: %s: %s\n", rs->o.command[0], strerror(-rc));
		return rc == -ENOENT ? 127 : 126;
	}
	raise_nofile();
	/* While the command loads. */
	ptab_fill(rs->table);
	proc_add_root(rs->tree, rs->root, (const char *const *)rs->o.command, cmd_path, start);
	if (!rs->o.quiet && isatty(STDERR_FILENO))
		uv_timer_start(&rs->progress_timer, progress_cb, PROGRESS_INTERVAL_MS,
			       PROGRESS_INTERVAL_MS);
	/* A SIGCHLD may have come before the handler saw the root's pid. */
	reap(rs);
	if (rs->tree_done)
		begin_finish(rs);
	return RUN_GO_ON;
}

/* The tree is gone: what agents that could not reach us spilled joins
 * it, after the slots it may continue; the table's last read; the end of
 * the model. Returns the exit code: COMMAND's. */
static int finish_tree(run_state *rs)
{
	int64_t end;
	int code;

	ptab_read(rs->table);
	spill_run_merge(&rs->sr, rs->tree, rs->table);
	ptab_finish(rs->table);
	end = proc_now_mono_ns();
	proc_add_clock_pair(rs->model);
	proc_finish(rs->tree, end, rs->tree_done);
	if (!rs->root_done)
		code = 1;
	else if (WIFEXITED(rs->root_status))
		code = WEXITSTATUS(rs->root_status);
	else if (WIFSIGNALED(rs->root_status))
		code = 128 + WTERMSIG(rs->root_status);
	else
		code = 1;
	rs->model->exit_status = code;
	rs->tree_finished = true;
	return code;
}

/* Everything of the run's is closed: uv_run returns. */
static void close_loop(run_state *rs)
{
	head_close(rs->head);
	node_close(rs->node);
	uv_walk(&rs->loop, close_walk, NULL);
}

static void nodes_waited(void *ctx)
{
	run_state *rs = ctx;

	head_finish(rs->head);
	close_loop(rs);
}

static void part_delivered(void *ctx)
{
	close_loop(ctx);
}

/* How long the head waits for nodes once its own tree is gone: what
 * --wait-timeout gives (-1: as long as they send), or a moment when the
 * wait was cut already. */
static int64_t nodes_limit_ms(const run_state *rs)
{
	if (rs->timed_out || rs->stopped_by)
		return DRAIN_AFTER_TIMEOUT_MS;
	return rs->o.wait_timeout < 0 ? -1 : (int64_t)(rs->o.wait_timeout * 1000);
}

/*
 * The tree is gone and everything it sent is in: the model is finished.
 * Then a node delivers its part to its head (or its file), and a head
 * waits for its nodes, before the loop ends.
 */
static void tree_drained(run_state *rs)
{
	uv_timer_stop(&rs->progress_timer);
	progress_clear(rs);
	rs->progress_on = false;
	rs->code = finish_tree(rs);
	rs->waiting_nodes = true;
	if (rs->node)
		node_deliver(rs->node, part_delivered, rs);
	else if (rs->head)
		head_wait(rs->head, nodes_limit_ms(rs), nodes_waited, rs);
	else
		close_loop(rs);
}

/* Did an image of the run exec ssh or rsh? */
static bool ran_ssh(const model_trace *t)
{
	for (size_t i = 0; i < t->nprocs; i++)
		for (size_t k = 0; k < t->procs[i]->nsegs; k++) {
			const model_segment *sg = &t->procs[i]->segs[k];
			const char *name = sg->argv && sg->argv[0] ? sg->argv[0] : sg->exe;
			const char *base = name ? strrchr(name, '/') : NULL;

			base = base ? base + 1 : name;
			if (base && (!strcmp(base, "ssh") || !strcmp(base, "rsh")))
				return true;
		}
	return false;
}

/* A head that could not follow remote launches says so once, when the
 * run made one. */
static void say_remote_off(const run_state *rs)
{
	if (!rs->remote_off[0] || rs->o.no_remote || !ran_ssh(rs->model))
		return;
	fprintf(stderr,
		"forktrace: note: ssh was run, but its remote commands were not traced: %s "
		"(--no-remote silences this)\n",
		rs->remote_off);
}

/* The hosts whose parts are not in the trace, and where they went. */
static void say_missing_hosts(const model_trace *t)
{
	for (size_t i = 0; i < t->nmissing; i++) {
		const model_missing_host *m = &t->missing[i];

		fprintf(stderr, "forktrace: host %s: part missing: %s%s%s\n", say_esc(m->host),
			say_esc(m->why), m->where ? "; it went to " : "",
			m->where ? say_esc(m->where) : "");
	}
}

/* What the run ends with on stderr, after the outputs (rc: the trace's
 * result; ms: what it holds). */
static void print_summary(run_state *rs, int rc, const events_stats *ms)
{
	spill_run *sr = &rs->sr;

	if (rs->timed_out || rs->stopped_by) {
		char why[64];

		if (rs->stopped_by)
			snprintf(why, sizeof(why), "when %s came", rsig_name(rs->stopped_by));
		else
			snprintf(why, sizeof(why), "after --wait-timeout %gs", rs->o.wait_timeout);
		say_report_running(rs->model, why);
	}
	if (!rs->o.quiet && rs->model->arena_spilled)
		fprintf(stderr,
			"forktrace: process data past --max-memory (%llu bytes) was spilled "
			"to disk: %llu bytes\n",
			(unsigned long long)rs->o.max_memory,
			(unsigned long long)rs->model->arena_spilled);
	if (rs->model->spill_error)
		fprintf(stderr,
			"forktrace: warning: cannot spill process data past --max-memory "
			"to %.*s (%s): the rest of it was kept in memory\n",
			(int)(strrchr(rs->sock_dir, '/') - rs->sock_dir), rs->sock_dir,
			strerror(rs->model->spill_error));
	if (rc == 0 && ms->corrupt_chunks)
		fprintf(stderr,
			"forktrace: warning: %llu chunks of in-process events held a record "
			"that does not parse (a program wrote over its buffer?); their events "
			"from there on are missing\n",
			(unsigned long long)ms->corrupt_chunks);
	if (!rs->o.quiet && rs->stale_removed)
		fprintf(stderr,
			"forktrace: removed %zu director%s left by forktrace runs that were "
			"killed (what their processes wrote went to their spill directories)\n",
			rs->stale_removed, rs->stale_removed == 1 ? "y" : "ies");
	if (!rs->o.quiet && rc == 0 && sr->nread)
		fprintf(stderr,
			"forktrace: merged %zu spill file%s of processes that could not "
			"reach forktrace\n",
			sr->nread, sr->nread == 1 ? "" : "s");
	if (ptab_was_cut())
		fprintf(stderr, "forktrace: warning: a traced process cut the process table short: "
				"what images wrote in it from then on is missing, uncounted\n");
	say_remote_off(rs);
	/* Never "0 lost" when something was left out: the summary says what,
	 * even with -q. One write: stderr is unbuffered. */
	if (rc == 0 && (!rs->o.quiet || sr->unmerged || ptab_was_cut() || rs->model->nmissing)) {
		char more[PATH_MAX + 128], hosts[64] = "", dest[PATH_MAX + 64] = "";
		size_t np = head_nparts(rs->head);
		uint64_t lost = rs->model->lost_events;
		model_trace **parts = np ? calloc(np, sizeof(*parts)) : NULL;
		int n = 0;

		more[0] = '\0';
		if (sr->unmerged)
			n = snprintf(more, sizeof(more),
				     " and %zu spill file%s not merged (kept in %s)", sr->unmerged,
				     sr->unmerged == 1 ? "" : "s", sr->dir);
		if (ptab_was_cut() && n >= 0 && (size_t)n < sizeof(more))
			snprintf(more + n, sizeof(more) - (size_t)n,
				 " and the rest of the process table (cut short)");
		np = parts ? head_parts(rs->head, parts, np) : 0;
		for (size_t i = 0; i < np; i++)
			lost = model_count_add(lost, parts[i]->lost_events);
		free(parts);
		if (np || rs->model->nmissing)
			snprintf(hosts, sizeof(hosts), "%zu host%s, ", np + 1, np ? "s" : "");
		if (node_part_file(rs->node))
			snprintf(dest, sizeof(dest), ", part written to %s",
				 node_part_file(rs->node));
		else if (rs->node)
			snprintf(dest, sizeof(dest), ", part sent to the head at %s",
				 rs->head_addr);
		if (rs->o.output)
			fprintf(stderr,
				"forktrace: %s%llu processes, %llu events, %llu lost%s, trace "
				"written to %s%s\n",
				hosts, (unsigned long long)ms->processes,
				(unsigned long long)ms->events, (unsigned long long)lost, more,
				rs->o.output, dest);
		else
			fprintf(stderr, "forktrace: %zu processes, %llu lost%s%s\n",
				rs->model->nprocs, (unsigned long long)lost, more, dest);
		say_missing_hosts(rs->model);
	}
}

run_state *run_new(const run_opts *o)
{
	run_state *rs = calloc(1, sizeof(*rs));

	if (!rs)
		return NULL;
	rs->o = *o;
	rs->out.fd = -1;
	rs->rep.fd = -1;
	rs->sr.dirfd = rs->sr.pdirfd = -1;
	return rs;
}

int run_start(run_state *rs)
{
	char cmd_path[PATH_MAX], agent[PATH_MAX];
	int rc, code;

	code = check_before_start(rs, cmd_path, agent);
	if (code != RUN_GO_ON)
		return code;
	/* From here on a signal removes what was created. */
	gethostname(rs->host, sizeof(rs->host) - 1);
	snprintf(rs->node_base, sizeof(rs->node_base), "forktrace-%s-%d", rs->host, (int)getpid());
	rsig_setup(!rs->o.output                     ? rs->node_base
		   : out_path_in_place(rs->o.output) ? "forktrace"
						     : rs->o.output);
	rs->made = RUN_MADE_TEMPS;
	if (open_outputs(rs) < 0)
		return 1;
	if (make_socket_dir(rs) < 0)
		return 1;
	rs->made = RUN_MADE_SOCKET_DIR;
	rsig_add_temp(rs->sock_dir, true);
	if (make_model(rs) < 0)
		return 1;
	rs->made = RUN_MADE_MODEL;
	rc = uv_loop_init(&rs->loop);
	if (rc < 0) {
		fprintf(stderr, "forktrace: cannot start the event loop: %s\n", uv_strerror(rc));
		return 1;
	}
	rs->made = RUN_MADE_LOOP;
	if (start_server(rs) < 0)
		return 1;
	if (start_remote(rs) < 0)
		return 1;
	return start_command(rs, cmd_path, agent);
}

int run_wait(run_state *rs)
{
	uv_run(&rs->loop, UV_RUN_DEFAULT);
	progress_clear(rs);
	if (!rs->tree_finished)
		rs->code = finish_tree(rs);
	return rs->code;
}

int run_write_outputs(run_state *rs, int code)
{
	events_stats ms = {0};
	int rc = write_outputs(rs, &ms, &code);

	print_summary(rs, rc, &ms);
	/* A node's part that could not reach its head may be there. */
	if (node_part_file(rs->node))
		rs->sr.keep = true;
	spill_run_finish(&rs->sr, rc == 0);
	return code;
}

void run_free(run_state *rs)
{
	if (!rs)
		return;
	if (rs->made >= RUN_MADE_LOOP) {
		/* A run that never got to the end: what it made in
		 * OUTPUT.spill. */
		spill_run_finish(&rs->sr, false);
		rsig_notify_off();
		srv_close_all(&rs->server);
		head_close(rs->head);
		node_close(rs->node);
		uv_walk(&rs->loop, close_walk, NULL);
		uv_run(&rs->loop, UV_RUN_DEFAULT);
		srv_free(&rs->server);
		uv_loop_close(&rs->loop);
	}
	if (rs->made >= RUN_MADE_MODEL) {
		head_free(rs->head);
		node_free(rs->node);
		ptab_free(rs->table);
		proc_tree_free(rs->tree);
		model_free(rs->model);
	}
	if (rs->made >= RUN_MADE_SOCKET_DIR)
		remove_socket_dir(rs);
	if (rs->made >= RUN_MADE_TEMPS) {
		out_file_abort(&rs->out);
		out_file_abort(&rs->rep);
	}
	rsig_finish();
	free(rs);
}
