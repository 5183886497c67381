/* SPDX-License-Identifier: Apache-2.0 */
/* agent/parse/: parsers of what the agent reads from outside, pure (no
 * system call but reading the file it is given), unit-tested and fuzzed.
 * They hand typed structs on: the JSON formats the agent reads (its
 * configuration, its exec records) are parsed here and nowhere else.
 *
 * Files, one concern each:
 *   config.c    node configuration (JSON) -> struct bk_config
 *   policy.c    egress profiles: parse, select one for a pod, deny sets,
 *               canonical text; CIDRs and port lists
 *   cmdparse.c  command allowlist, layer 1: the strict checker of
 *               `sh -c` command strings
 *   vpath.c     virtual paths and globs of the file routes
 *   text.c      command output: UTF-8 sanitizing, secret redaction
 *   records.c   exec records: struct bk_exec_record <-> its JSON text
 */
#pragma once
