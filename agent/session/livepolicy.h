/* SPDX-License-Identifier: Apache-2.0 */
/* Live policy: which egress profile a pod's NEW execs get, and changes of
 * it while the pod runs (issue 17).
 *
 * In order: an operator's override for the pod (`boxkitectl policy set
 * NAME PROFILE`, kept in agent memory and in <state_dir>/policy/<pod_uid>
 * so it survives an agent restart), else the pod annotation
 * `boxkite.dev/egress-policy` as the runtime's state holds it now (read at
 * every request, agent/caller/pod.c), else the node config's selectors,
 * else its default. Every exec, inspect and verify asks here, so a change
 * applies to the next exec at once.
 *
 * Running execs keep the profile they started with: their policy entry,
 * network namespace, DNS proxy endpoint and receipt stay what they were
 * (an exec's namespace cannot be swapped under it, and its receipt must
 * stay a true account of the whole exec). Ending one is the operator's
 * call (its timeout, a /configure of the pod, deleting the sandbox).
 *
 * A change is logged once: "policy_set" (by the operator) when it is made,
 * "policy_changed" (annotation, selector, default) when the agent first
 * gives a pod another profile than the last one it gave it; the last change
 * shows in inspect (policy_source, policy_change). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/agent.h"
#include "agent/caller/pod.h"
#include "agent/parse/policy.h"
#include "lib/err.h"

enum bk_profile_source { BK_PSRC_OVERRIDE, BK_PSRC_ANNOTATION, BK_PSRC_SELECTOR, BK_PSRC_DEFAULT };
extern const char *const bk_profile_source_names[]; /* "policy_set", "annotation", "selector", "default" */

struct bk_profile_change {
	char from[64], to[64];
	const char *by;  /* bk_profile_source_names[] */
	int64_t at;      /* unix seconds */
};

/* The profile the pod's new execs get now, and where it came from; NULL
 * with a sentence in err when the override or annotation names no
 * profile of this node. Notices (and logs) a change. */
const struct bk_profile *bk_session_profile(struct bk_agent *a, const struct bk_pod *pod,
					    enum bk_profile_source *src, char *err, size_t errlen);

/* The operator's override for the pod: profile (NULL or "": removed, the
 * annotation/selectors/default apply again). Persisted before it takes
 * effect; logged as "policy_set" with the profile new execs got before
 * (old) and get now (now). 0, or -errno with err. */
int bk_session_policy_set(struct bk_agent *a, const struct bk_pod *pod, const char *profile, char *old,
			  size_t oldlen, char *now, size_t nowlen, struct bk_error *err);

/* The pod's last change this agent saw; false when none. */
bool bk_session_policy_change(const char *pod_uid, struct bk_profile_change *out);
