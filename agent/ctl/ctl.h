/* SPDX-License-Identifier: Apache-2.0 */
/* agent/ctl/ — boxkitectl, the operator's tool (a separate binary; it uses
 * lib/ only, never the agent's rooms):
 *   boxkitectl.c      the CLI: status, inspect, verify, exec, ready, sandbox
 *                     create|delete|list; talks to the admin socket (root)
 *   local/local.[ch]  local mode: sandbox pods run by runc in kubelet's
 *                     cgroup layout with CRI annotations (no Kubernetes) */
#pragma once
/*   events.c          boxkitectl events: the node's event stream */

/* boxkitectl events [--follow] [--pod NAME] [--json] [--last N] */
int ctl_events(int argc, char **argv, const char *admin_socket);
/*   top.c             boxkitectl top: per sandbox usage and rates */

/* boxkitectl top [--interval S] [-n N] [--json] */
int ctl_top(int argc, char **argv, const char *admin_socket);
/*   tty.c             boxkitectl exec -it: the sandbox's terminal (op "pty") */

/* exec -it NAME [-- CMD...]: cmd NULL is the sandbox's shell. Returns the
 * shell's exit code, 125 when the agent refused or the stream broke. */
int ctl_exec_tty(const char *admin_socket, const char *name, const char *cmd);
