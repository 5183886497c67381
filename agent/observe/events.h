/* SPDX-License-Identifier: Apache-2.0 */
/* The node's event stream (`boxkitectl events`): the agent's own log lines
 * of a few kinds — an exec started (exec_start) and ended (exec), a
 * connection the BPF layer refused (denied, as it happens), self-test
 * results (selftest) — kept in a ring of the last BK_EVENTS_RING and
 * handed to followers as they come. One format for logs and events: a line
 * is published exactly as logged (lib/log.c's tap), so what `events`
 * shows is what the log says.
 *
 * Readers keep a cursor (a sequence number); one that falls more than the
 * ring behind is told how many it lost, never blocks the publisher. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BK_EVENTS_RING 1024

/* for log_set_tap() */
bool bk_events_wants(const char *name);
void bk_events_publish(const char *line, size_t len);

/* The sequence number of the newest event (0: none yet). */
uint64_t bk_events_head(void);
/* The first event after *cursor, copied into *out (malloc'd; the caller
 * frees it), *cursor advanced to it: 1. None within timeout_ms: 0.
 * *lost: how many events after *cursor were overwritten before this read. */
int bk_events_next(uint64_t *cursor, char **out, uint64_t *lost, int timeout_ms);
/* Wake every waiting reader (the agent stops). */
void bk_events_shutdown(void);
bool bk_events_stopping(void);
