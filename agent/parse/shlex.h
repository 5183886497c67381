/* SPDX-License-Identifier: Apache-2.0 */
/* /pty-exec's command (issue 18): split as the reference sidecar does
 * (Python's shlex.split, POSIX mode: whitespace, '...', "..." with \" and
 * \\ escapes, a backslash outside quotes) and never run through a shell:
 * the words come back as one `sh -c` text in which every word is
 * single-quoted, so nothing in them is interpreted. */
#pragma once
#include <stddef.h>

/* in: NUL-terminated. Returns the number of words (0: none) and *out
 * (malloc'd, "exec 'w1' 'w2' ..."; NULL when there is no word), or
 * -EINVAL with err set to shlex's own sentence ("No closing quotation",
 * "No escaped character"), or -ENOMEM. */
int bk_shlex_sh(const char *in, char **out, char *err, size_t errlen);
