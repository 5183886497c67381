/* SPDX-License-Identifier: Apache-2.0 */
/* lib/ — code shared by the three binaries (boxkite-agent, boxkite-shim,
 * boxkitectl); nothing here knows about pods, sessions or policy:
 *   proto.[ch]   the agent socket's framing (SOCK_SEQPACKET records, limits)
 *   util.[ch]    cleanup attributes, small file and number helpers
 *   log.[ch]     the one JSON-lines logger (typed fields)
 *   err.[ch]     the one error constructor (struct bk_error, bk_fail)
 *   sign.[ch]    Ed25519 receipt signatures: the node key, sign, verify
 *   missing.h    kernel constants newer than Debian 12's 6.1 headers
 *   clone3.h     clone3 running a function on the child's own stack (x86-64)
 * Included as "lib/<file>.h" from anywhere in the tree. */
#pragma once
