/* SPDX-License-Identifier: Apache-2.0 */
/* The JSON edge of the file operations (API.md /file-create, /view,
 * /str-replace, /ls, /glob, /grep, /present-files): a request's arguments
 * become a validated struct bk_file_req, agent/files/ runs it, and its
 * struct bk_file_result becomes the response. */
#pragma once
#include <stdbool.h>

#include "agent/api/api.h"

bool bk_files_is_op(const char *op);
/* op is one for which bk_files_is_op() holds; returns the response text. */
char *bk_files_op(struct bk_agent *a, const struct bk_pod *pod, const char *op, const cJSON *args);
