/*
 * runsig.h - the signals of `forktrace run` (rsig_): passing them on to
 * COMMAND once, ending the wait for daemons, stopping with COMMAND.
 * Internal to collector/. See runsig.c for the phases.
 */
#ifndef FT_COLLECTOR_RUNSIG_H
#define FT_COLLECTOR_RUNSIG_H

#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <sys/types.h>

#include <uv.h>

/* Records the inherited signal mask and dispositions, starts the sentinel
 * (one fork per run, a child waitpid(-1) does not see) and installs the
 * handlers:
 * from now on INT/TERM/HUP/QUIT remove the registered temporaries and end
 * forktrace by the signal. output names the trace in messages
 * (borrowed: copied). */
int rsig_setup(const char *output);
/* COMMAND's signal mask and dispositions: forktrace's inherited ones. */
void rsig_spawn_attr(posix_spawnattr_t *attr);
/* Blocks the handled signals around the spawn; *old for the next call. */
void rsig_block(sigset_t *old);
/* COMMAND runs as pid: signals go on to it. Restores the mask *old. */
void rsig_command_started(pid_t pid, const sigset_t *old);
/* COMMAND was reaped: the next signal ends the wait, the one after that
 * ends forktrace. */
void rsig_command_ended(void);
/* The loop's wake-up for a signal that ends the wait (borrowed until
 * rsig_notify_off, which must come before the handle is closed). */
void rsig_set_notify(uv_async_t *a);
void rsig_notify_off(void);
/* How long a signal sent to forktrace waits before it is passed on: what
 * was sent to the whole group reaches the sentinel meanwhile. */
#define RSIG_DEFER_MS 100
/* Does a signal wait to be passed on (the loop was woken for it)? */
bool rsig_deferred(void);
/* Passes on to COMMAND the waiting signals that the group did not get.
 * Returns the signal that asks forktrace to stop waiting when COMMAND has
 * exited meanwhile (as rsig_stop_signal would), or 0. */
int rsig_forward_due(void);
/* The signal that ended the wait, or 0. */
int rsig_stop_signal(void);
/* "SIGINT", ... */
const char *rsig_name(int sig);
/* path (copied) is removed if forktrace ends by a signal: a file, or a
 * directory removed after the files. */
void rsig_add_temp(const char *path, bool is_dir);
/* Ends the sentinel and forgets COMMAND and the temporaries. */
void rsig_finish(void);

#endif
