/* SPDX-License-Identifier: Apache-2.0 */
#include "session.h"

char *bk_session_configure(struct bk_agent *a, const struct bk_pod *pod, const cJSON *args)
{
	return bk_api_error(501, "not_implemented", "configure is not implemented yet");
}

char *bk_tool_call(struct bk_agent *a, const struct bk_pod *pod, const cJSON *args)
{
	return bk_api_error(501, "not_implemented", "tool_call is not implemented yet");
}
