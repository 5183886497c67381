/* SPDX-License-Identifier: Apache-2.0 */
/* agent/parse/: parsers of what the agent reads from outside, pure (no
 * system call but reading the file it is given), unit-tested and fuzzed.
 * They hand typed structs on: the JSON formats the agent reads (its
 * configuration, its exec and session records) are parsed here and
 * nowhere else (the runtime's state.json: agent/caller/identity.c).
 *
 * Files, one concern each:
 *   config.c    node configuration (JSON) -> struct bk_config
 *   policy.c    egress profiles: parse, select one for a pod, deny sets,
 *               canonical text; CIDRs and port lists
 *   cmdlex.c    command allowlist, layer 1, pass 1: the lexer of `sh -c`
 *               command strings (cmdlex.h, internal)
 *   cmdparse.c  command allowlist, layer 1, passes 2 and 3: structure and
 *               allowed_commands (the strict checker's entry points)
 *   vpath.c     virtual paths and globs of the file routes
 *   rxbound.c   the cost of a /grep pattern, bounded before it compiles
 *   text.c      command output: UTF-8 sanitizing, secret redaction
 *   records.c   exec records: struct bk_exec_record <-> its JSON text
 *   session_record.c  session records: struct bk_session_record <-> its
 *               JSON text, and the validators /configure shares with it
 *   target.c    "addr:port" probe targets (verify, the self-test)
 *   dns.c       DNS messages of the agent's DNS proxy: an exec's query,
 *               an upstream's answer (CNAME chain, addresses, TTLs), the
 *               replies the proxy builds itself
 *   mounts.c    lines of /proc/PID/mountinfo (the wipe's roots, the
 *               masks of an exec's /proc)
 *   shlex.c     /pty-exec's command: shlex.split (POSIX) into words, each
 *               single-quoted for `sh -c` (never interpreted)
 *   procstatus.c  /proc/PID/status: credentials, capability sets,
 *               no_new_privs, seccomp (the exec receipt's read-back)
 *   netdev.c    /proc/PID/net/dev: a network namespace's interfaces (the
 *               exec receipt's read-back in the child)
 */
#pragma once
