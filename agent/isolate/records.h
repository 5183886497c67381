/* SPDX-License-Identifier: Apache-2.0 */
/* Exec records in the state directory (the text: agent/parse/records.h),
 * written before anything can run in an exec's cgroup and removed once its
 * cgroups are gone, so that a new agent finds every exec an old one left
 * (recover.h).
 *
 * Where: a slot of the record table, <state>/execs.table, a file the agent
 * maps shared. Writing a record is a copy into a free slot and a store,
 * removing it a store: no system call on an exec's way. (A file per exec,
 * <state>/execs/<exec id>.json, cost an open(O_CREAT) before the exec and
 * an unlink after it: about 40 us of its set-up here.) The slots are the
 * file's pages, in tmpfs or the page cache, so they outlive the agent as
 * the files did; they are reserved when the table is made (4 MiB), so a
 * full tmpfs fails that, never a record's copy (a SIGBUS). A record that does not fit a slot, an exec past the
 * table's slots, or an agent without a table (it could not make one)
 * gets a file, as before; a new agent reads both.
 *
 * The table file: a header page (BK_RECORD_TABLE_MAGIC, then the slot size
 * and the number of slots, each a little-endian uint32), then the slots.
 * A slot: its state (uint32, BK_RECORD_SLOT_USED or 0), the text's length
 * (uint32), the text. The state is stored last, with release ordering: a
 * crash during the copy leaves a free slot and the exec unrecorded, with
 * nothing attached to its cgroup or running in it yet (the record comes
 * before both), as a crash before a file was written did. */
#pragma once
#include "agent/parse/config.h"

#include <stdint.h>

#define BK_RECORD_TABLE_MAGIC "BKXTABL1"
#define BK_RECORD_SLOT_SIZE 4096u
#define BK_RECORD_SLOTS 1024u
#define BK_RECORD_SLOT_USED 0x44455355u /* "USED" */

struct exec_ctx;
struct bk_records;

/* A new, empty record table, in place of any the state directory holds
 * (a previous agent's: read by the recovery before this, and replaced by
 * a rename, so an old agent still running keeps its own mapping). 0 or
 * -errno; *out NULL on failure (records then go to files). Mapped until
 * the process ends. */
int bk_records_open(const struct bk_config *c, struct bk_records **out);

/* Step "cgroup" (second half) of an exec: its record, naming its cgroups
 * and its pod. */
int bk_step_record(struct exec_ctx *x);
/* The record of an exec is gone (its cgroups are): slot, its table slot
 * (x->record_slot), or -1: its file. */
void bk_exec_record_remove(const struct bk_config *c, struct bk_records *t, const char *exec_id, int slot);
