/* SPDX-License-Identifier: Apache-2.0 */
/* Keys, their order and their types are the wire format (API.md, and
 * boxkitectl reads them): each builder follows its report field by field. */
#include "agent/api/op_observe.h"
#include "agent/api/reply.h"
#include "agent/observe/events.h"
#include "agent/isolate/cgroup.h"
#include "agent/isolate/instances.h"
#include "agent/isolate/warm.h"
#include "agent/observe/observe.h"
#include "lib/proto.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include "lib/util.h"

/* ---- the kernel ------------------------------------------------------------------------ */

cJSON *bk_api_features_json(const struct bk_features *f)
{
	cJSON *o = cJSON_CreateObject();
	for (int k = 0; k < BK_F_N; k++)
		cJSON_AddBoolToObject(o, bk_feature_desc[k].name, f->have[k]);
	cJSON_AddNumberToObject(o, "landlock_abi", f->landlock_abi);
	cJSON_AddStringToObject(o, "identity", bk_features_identity(f));
	return o;
}

/* ---- inspect / isolation ------------------------------------------------------------ */


static void add_id(const char *id, void *arr)
{
	cJSON_AddItemToArray(arr, cJSON_CreateString(id));
}
static cJSON *prog_json(const struct bk_obs_prog *p)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "id", p->id);
	if (p->known) {
		cJSON_AddStringToObject(o, "prog", p->name);
		cJSON_AddStringToObject(o, "tag", p->tag);
	}
	return o;
}

static cJSON *pinned_prog_json(const struct bk_obs_pinned_prog *pp)
{
	cJSON *o;
	if (pp->pinned) {
		o = prog_json(&pp->prog);
	} else {
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "prog", pp->expected);
		cJSON_AddStringToObject(o, "error", "not pinned");
	}
	cJSON_AddStringToObject(o, "pinned", pp->path);
	return o;
}

static cJSON *map_json(const struct bk_obs_map *m)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "map", m->name);
	cJSON_AddStringToObject(o, "pinned", m->pinned);
	if (m->open_failed) {
		cJSON_AddStringToObject(o, "error", strerror(m->open_errno));
		return o;
	}
	if (!m->have_id)
		return o;
	cJSON_AddNumberToObject(o, "id", m->id);
	if (m->digested) {
		cJSON_AddNumberToObject(o, "entries", (double)m->entries);
		cJSON_AddStringToObject(o, "digest", m->digest);
	}
	return o;
}

/* a limit file's value: a number, or its text ("max") */
static void add_value(cJSON *o, const char *key, const struct bk_obs_value *v)
{
	if (!v->present)
		return;
	if (v->is_num)
		cJSON_AddNumberToObject(o, key, (double)v->num);
	else
		cJSON_AddStringToObject(o, key, v->text);
}

static cJSON *exec_json(const struct bk_obs_exec *x)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "cgroup", x->cgroup);
	if (x->have_cgroup_id)
		cJSON_AddNumberToObject(o, "cgroup_id", (double)x->cgroup_id);
	if (x->have_bpf) {
		cJSON *arr = cJSON_AddArrayToObject(o, "bpf");
		for (int i = 0; i < x->n_bpf; i++)
			cJSON_AddItemToArray(arr, prog_json(&x->bpf[i]));
		cJSON_AddBoolToObject(o, "bpf_complete", x->bpf_complete);
	}
	if (x->have_policy) {
		if (x->policy_found) {
			const struct bk_obs_policy_entry *pe = &x->policy;
			cJSON *pj = cJSON_AddObjectToObject(o, "policy_entry");
			cJSON_AddNumberToObject(pj, "profile_id", pe->profile_id);
			if (pe->named)
				cJSON_AddStringToObject(pj, "profile", pe->profile);
			cJSON_AddBoolToObject(pj, "loopback", pe->loopback);
			cJSON_AddBoolToObject(pj, "dns", pe->dns);
			cJSON_AddBoolToObject(pj, "icmp", pe->icmp);
		} else {
			cJSON_AddNullToObject(o, "policy_entry");
		}
	}
	add_value(o, "pids_max", &x->pids_max);
	add_value(o, "pids_current", &x->pids_current);
	add_value(o, "memory_max", &x->memory_max);
	if (x->have_procs) {
		cJSON_AddNumberToObject(o, "processes", x->processes);
		if (x->setting_up) {
			cJSON_AddStringToObject(o, "state", "setting_up");
		} else {
			cJSON_AddNumberToObject(o, "netns_inode", (double)x->netns_inode);
			if (x->have_ifaces) {
				cJSON *ifs = cJSON_AddArrayToObject(o, "interfaces");
				for (int i = 0; i < x->n_ifaces; i++)
					cJSON_AddItemToArray(ifs, cJSON_CreateString(x->ifaces[i]));
			}
		}
	}
	return o;
}

static cJSON *pod_report_json(const struct bk_pod_report *r)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "pod", r->pod);
	cJSON_AddStringToObject(o, "namespace", r->ns);
	cJSON_AddStringToObject(o, "pod_uid", r->pod_uid);
	cJSON_AddStringToObject(o, "sandbox_container_id", r->sandbox_id);
	cJSON_AddNumberToObject(o, "uid", r->uid);
	cJSON_AddBoolToObject(o, "node_safe", r->node_safe);
	/* live policy (session/livepolicy.h): where new execs' profile comes
	 * from, and the last change this agent saw */
	if (r->policy_source)
		cJSON_AddStringToObject(o, "policy_source", r->policy_source);
	if (r->policy_changed) {
		cJSON *pc = cJSON_AddObjectToObject(o, "policy_change");
		cJSON_AddStringToObject(pc, "from", r->policy_change.from);
		cJSON_AddStringToObject(pc, "to", r->policy_change.to);
		cJSON_AddStringToObject(pc, "by", r->policy_change.by);
		cJSON_AddNumberToObject(pc, "at", (double)r->policy_change.at);
	}
	if (r->have_policy) {
		cJSON_AddStringToObject(o, "policy", r->policy);
		cJSON_AddStringToObject(o, "profile_digest", r->profile_digest);
		cJSON *layers = cJSON_AddObjectToObject(o, "layers");
		cJSON_AddStringToObject(layers, "netns",
					!r->netns_fresh ? "pod" : r->layer_netns_held ? "fresh" : "not_held");
		cJSON_AddBoolToObject(layers, "bpf", r->layer_bpf);
		cJSON_AddBoolToObject(layers, "seccomp", r->layer_seccomp);
		cJSON_AddBoolToObject(layers, "cgroup", r->layer_cgroup);
		/* what each of those was read back from */
		cJSON *ev = cJSON_AddObjectToObject(o, "layer_evidence");
		cJSON *cg = cJSON_AddObjectToObject(ev, "cgroup");
		cJSON_AddStringToObject(cg, "path", r->cg.path);
		if (r->cg.opened)
			cJSON_AddNumberToObject(cg, "cgroup_id", (double)r->cg.cgroup_id);
		else
			cJSON_AddNullToObject(cg, "cgroup_id");
		cJSON_AddStringToObject(cg, "controllers", r->cg.controllers);
		if (r->cg.pids)
			cJSON_AddStringToObject(cg, "pids", r->cg.pids);
		else
			cJSON_AddNullToObject(cg, "pids");
		if (r->cg.memory)
			cJSON_AddStringToObject(cg, "memory", r->cg.memory);
		else
			cJSON_AddNullToObject(cg, "memory");
		cJSON *bp = cJSON_AddObjectToObject(ev, "bpf");
		cJSON_AddBoolToObject(bp, "loaded", r->bpfck.loaded);
		cJSON_AddNumberToObject(bp, "programs_pinned", r->bpfck.programs_pinned);
		cJSON_AddBoolToObject(bp, "policy_map", r->bpfck.policy_map);
		cJSON_AddNumberToObject(bp, "live_execs", r->bpfck.live_execs);
		cJSON_AddNumberToObject(bp, "live_execs_complete", r->bpfck.live_execs_complete);
		cJSON *ns = cJSON_AddObjectToObject(ev, "netns");
		cJSON_AddNumberToObject(ns, "checked_unix", (double)r->nsck.checked_at);
		cJSON *fi = cJSON_AddArrayToObject(ns, "fresh_interfaces");
		char tmp[256];
		snprintf(tmp, sizeof(tmp), "%s", r->nsck.fresh_interfaces);
		for (char *sv = NULL, *t = strtok_r(tmp, ",", &sv); t; t = strtok_r(NULL, ",", &sv))
			cJSON_AddItemToArray(fi, cJSON_CreateString(t));
		cJSON_AddNumberToObject(ns, "live_execs", r->nsck.live_execs);
		cJSON_AddNumberToObject(ns, "live_execs_lo_only", r->nsck.live_execs_lo_only);
	} else {
		cJSON_AddStringToObject(o, "policy_error", r->policy_error);
	}
	if (r->node_objects) {
		cJSON *progs = cJSON_AddArrayToObject(o, "bpf_programs");
		for (int i = 0; i < BK_NPROGS; i++)
			cJSON_AddItemToArray(progs, pinned_prog_json(&r->progs[i]));
		cJSON *maps = cJSON_AddArrayToObject(o, "bpf_maps");
		for (int i = 0; i < BK_OBS_MAPS; i++)
			cJSON_AddItemToArray(maps, map_json(&r->maps[i]));
	}
	cJSON *execs = cJSON_AddArrayToObject(o, "live_execs");
	for (size_t i = 0; i < r->n_execs; i++)
		cJSON_AddItemToArray(execs, exec_json(&r->execs[i]));
	cJSON *den = cJSON_AddObjectToObject(o, "denials");
	for (int i = 0; i < r->n_denials; i++)
		cJSON_AddNumberToObject(den, r->denials[i].reason, (double)r->denials[i].count);
	cJSON *u = cJSON_AddObjectToObject(o, "usage");
	add_value(u, "pids_current", &r->pod_pids_current);
	add_value(u, "pids_max", &r->pod_pids_max);
	add_value(u, "memory_current", &r->pod_memory_current);
	add_value(u, "memory_max", &r->pod_memory_max);
	if (r->have_counts) {
		cJSON_AddNumberToObject(u, "execs_total", (double)r->execs_total);
		cJSON_AddNumberToObject(u, "execs_live", (double)r->execs_live);
		cJSON_AddNumberToObject(u, "denied_total", (double)r->denied_total);
	} else {
		cJSON_AddNumberToObject(u, "execs_total", 0);
		cJSON_AddNumberToObject(u, "execs_live", 0);
		cJSON_AddNumberToObject(u, "denied_total", 0);
	}
	return o;
}

static char *out_of_memory(void)
{
	return bk_api_error(503, "out_of_memory", "out of memory");
}

/* The node key that signs every exec receipt (public half). */
static cJSON *receipt_key_json(const struct bk_agent *a)
{
	cJSON *k = cJSON_CreateObject();
	cJSON_AddStringToObject(k, "key_id", bk_signer_key_id(a->signer));
	cJSON_AddStringToObject(k, "public_key", bk_signer_pubkey_pem(a->signer));
	cJSON_AddStringToObject(k, "algorithm", "ed25519");
	return k;
}

char *bk_api_inspect(struct bk_agent *a, const struct bk_pod *p)
{
	struct bk_pod_report *r = malloc(sizeof(*r));
	if (!r)
		return out_of_memory();
	cJSON *body = NULL;
	if (bk_obs_pod_report(a, p, true, r) == 0 && (body = pod_report_json(r)))
		cJSON_AddItemToObject(body, "receipt_key", receipt_key_json(a));
	char *out = body ? bk_api_respond(200, body) : out_of_memory();
	bk_pod_report_free(r);
	free(r);
	return out;
}

/* ---- status ---------------------------------------------------------------------------- */

char *bk_api_status(struct bk_agent *a)
{
	struct bk_node_status s;
	if (bk_obs_status(a, &s) < 0) {
		bk_node_status_free(&s);
		return out_of_memory();
	}
	cJSON *b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "version", BK_VERSION);
	cJSON_AddStringToObject(b, "node", a->node_name);
	cJSON_AddItemToObject(b, "receipt_key", receipt_key_json(a));
	cJSON_AddBoolToObject(b, "node_safe", s.node_safe);
	cJSON *st = cJSON_AddObjectToObject(b, "selftest");
	cJSON_AddNumberToObject(st, "runs", (double)s.selftest_runs);
	cJSON_AddNumberToObject(st, "failures", (double)s.selftest_failures);
	cJSON_AddNumberToObject(st, "last_success_unix", (double)s.selftest_last_ok);
	if (!s.node_safe)
		cJSON_AddStringToObject(st, "error", s.selftest_error);
	cJSON *layers = cJSON_AddObjectToObject(b, "layers");
	cJSON_AddBoolToObject(layers, "netns", s.layer_netns);
	cJSON_AddBoolToObject(layers, "bpf", s.layer_bpf);
	cJSON_AddBoolToObject(layers, "seccomp", s.layer_seccomp);
	cJSON_AddStringToObject(b, "kernel", s.features.kernel);
	cJSON_AddItemToObject(b, "features", bk_api_features_json(&s.features));
	cJSON_AddNumberToObject(b, "live_execs", (double)s.live_execs);
	cJSON_AddNumberToObject(b, "execs_ok", (double)s.execs_ok);
	cJSON_AddNumberToObject(b, "execs_failed", (double)s.execs_failed);
	cJSON_AddNumberToObject(b, "refused_callers", (double)s.refused_callers);
	cJSON_AddNumberToObject(b, "requests", (double)s.requests);
	cJSON *rt = cJSON_AddObjectToObject(b, "request_threads");
	cJSON_AddNumberToObject(rt, "serving", __atomic_load_n(&a->req_serving, __ATOMIC_RELAXED));
	cJSON_AddNumberToObject(rt, "waiting", __atomic_load_n(&a->req_waiting, __ATOMIC_RELAXED));
	const struct bk_limits *L = &a->limits;
	cJSON *lim = cJSON_AddObjectToObject(b, "limits");
	cJSON_AddNumberToObject(lim, "nofile", (double)L->nofile);
	cJSON_AddNumberToObject(lim, "conns_max", L->conns_max);
	cJSON_AddNumberToObject(lim, "conns_per_peer", L->conns_per_peer);
	cJSON_AddNumberToObject(lim, "admin_max", L->admin_max);
	cJSON_AddNumberToObject(lim, "first_frame_ms", L->first_frame_ms);
	cJSON_AddNumberToObject(lim, "idle_ms", L->idle_ms);
	cJSON_AddNumberToObject(lim, "exec_budget", L->exec_budget);
	cJSON_AddNumberToObject(lim, "exec_per_pod", L->exec_per_pod);
	cJSON_AddNumberToObject(lim, "refused_connections", (double)__atomic_load_n(&a->refused_conns, __ATOMIC_RELAXED));
	cJSON_AddNumberToObject(lim, "dropped_connections", (double)__atomic_load_n(&a->dropped_conns, __ATOMIC_RELAXED));
	cJSON_AddNumberToObject(lim, "refused_execs", (double)__atomic_load_n(&a->refused_execs_budget, __ATOMIC_RELAXED));
	/* the sandbox container instances kept (a pidfd each), their v1
	 * cgroup.procs (hybrid hosts) and mount tables kept open */
	struct bk_instances_count ic;
	bk_instances_count(&ic);
	cJSON_AddNumberToObject(lim, "kept_containers", ic.entries);
	cJSON_AddNumberToObject(lim, "kept_cgroup_fds", ic.cgroup_fds);
	cJSON_AddNumberToObject(lim, "kept_mask_fds", ic.mask_fds);
	struct bk_warm_stats ws;
	bk_warm_stats(&a->engine, &ws);
	cJSON *wo = cJSON_AddObjectToObject(b, "warm_slots");
	cJSON_AddNumberToObject(wo, "per_pod", (double)a->cfg.warm_slots);
	cJSON_AddNumberToObject(wo, "ready", ws.ready);
	cJSON_AddNumberToObject(wo, "made", (double)ws.made);
	cJSON_AddNumberToObject(wo, "taken", (double)ws.taken);
	cJSON_AddNumberToObject(wo, "expired", (double)ws.expired);
	cJSON_AddNumberToObject(wo, "gone", (double)ws.gone);
	cJSON_AddNumberToObject(wo, "failed", (double)ws.failed);
	/* which exec cgroups (boxkite-exec-<id>) are slots: they hold no
	 * process until their request */
	bk_warm_each_id(&a->engine, add_id, cJSON_AddArrayToObject(wo, "exec_ids"));
	if (s.have_bpf) {
		cJSON_AddNumberToObject(b, "denied_total", (double)s.denied_total);
		cJSON_AddNumberToObject(b, "events_lost", (double)s.events_lost);
		cJSON_AddNumberToObject(b, "events_suppressed", (double)s.events_suppressed);
	}
	cJSON *arr = cJSON_AddArrayToObject(b, "sandboxes");
	for (size_t i = 0; i < s.n_sandboxes; i++) {
		const struct bk_status_sandbox *sb = &s.sandboxes[i];
		if (sb->resolved) {
			cJSON_AddItemToArray(arr, pod_report_json(&sb->report));
		} else {
			cJSON *o = cJSON_CreateObject();
			cJSON_AddStringToObject(o, "pod", sb->pod);
			cJSON_AddStringToObject(o, "error", sb->error);
			cJSON_AddItemToArray(arr, o);
		}
	}
	bk_node_status_free(&s);
	return bk_api_respond(200, b);
}

/* ---- verify ---------------------------------------------------------------------------- */

char *bk_api_verify(struct bk_agent *a, const struct bk_pod *p, const cJSON *args, int client_fd)
{
	double hold = 0;
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(args, "hold");
	if (cJSON_IsNumber(h) && h->valuedouble >= 0 && h->valuedouble <= 60)
		hold = h->valuedouble;
	struct bk_verify_result v;
	struct bk_error err = { 0 };
	if (bk_obs_verify(a, p, hold, client_fd, &v, &err) < 0)
		return bk_api_error(500, "bad_config", "%s", err.msg);
	cJSON *out = cJSON_CreateObject();
	cJSON_AddStringToObject(out, "pod", p->pod_name);
	cJSON_AddStringToObject(out, "namespace", p->pod_namespace);
	if (!v.ran) {
		/* the context itself could not be built: that is a failed verify */
		cJSON_AddBoolToObject(out, "passed", false);
		cJSON_AddItemToObject(out, "probes", cJSON_CreateArray());
		cJSON_AddStringToObject(out, "error", v.error);
		return bk_api_respond(200, out);
	}
	cJSON_AddStringToObject(out, "exec_id", v.exec_id);
	cJSON_AddStringToObject(out, "policy", v.policy);
	cJSON *layers = cJSON_AddObjectToObject(out, "layers");
	cJSON *ln = cJSON_AddObjectToObject(layers, "netns");
	cJSON_AddStringToObject(ln, "mode", v.netns.fresh ? "fresh" : "pod");
	cJSON_AddStringToObject(ln, "interfaces", v.netns.interfaces);
	cJSON_AddBoolToObject(ln, "held", v.netns.held);
	cJSON *lb = cJSON_AddObjectToObject(layers, "bpf");
	cJSON_AddNumberToObject(lb, "programs_attached", v.bpf.programs_attached);
	cJSON_AddBoolToObject(lb, "held_to_end", v.bpf.held_to_end);
	cJSON_AddBoolToObject(lb, "held", v.bpf.held);
	cJSON *ls = cJSON_AddObjectToObject(layers, "seccomp");
	cJSON_AddNumberToObject(ls, "mode", v.seccomp.mode);
	cJSON_AddNumberToObject(ls, "filters", v.seccomp.filters);
	cJSON_AddBoolToObject(ls, "held", v.seccomp.held);
	/* {"name", "address", "outcome", "layer"?, "reason"?, "ms"}: the shape scripts rely on (docs/api.md) */
	cJSON *probes = cJSON_AddArrayToObject(out, "probes");
	for (int i = 0; i < v.n_probes; i++) {
		const struct bk_verify_probe *pr = &v.probes[i];
		cJSON *pj = cJSON_CreateObject();
		cJSON_AddStringToObject(pj, "name", pr->name);
		cJSON_AddStringToObject(pj, "address", pr->address);
		cJSON_AddStringToObject(pj, "outcome", bk_probe_outcome_name(pr->outcome));
		if (pr->layer)
			cJSON_AddStringToObject(pj, "layer", pr->layer);
		if (pr->reason[0])
			cJSON_AddStringToObject(pj, "reason", pr->reason);
		cJSON_AddNumberToObject(pj, "ms", pr->ms);
		cJSON_AddItemToArray(probes, pj);
	}
	cJSON_AddBoolToObject(out, "passed", v.passed);
	return bk_api_respond(200, out);
}

/* ---- events ---------------------------------------------------------------------------- */

/* The event line as an object, if it is of the pod asked for (NULL: all). */
static cJSON *event_of(const char *line, const char *pod)
{
	cJSON *ev = cJSON_Parse(line);
	if (!ev)
		return NULL;
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(ev, "pod");
	if (pod && !(cJSON_IsString(p) && streq(p->valuestring, pod))) {
		cJSON_Delete(ev);
		return NULL;
	}
	return ev;
}

/* One frame on the requester's connection; <0 when it is gone. */
static int send_frame(int fd, cJSON *body)
{
	char *txt = bk_api_respond(200, body);
	if (!txt)
		return -ENOMEM;
	int r = bk_send_msg(fd, txt, strlen(txt));
	free(txt);
	return r;
}

static bool client_gone(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };
	/* the client says nothing after its request: any byte, a hang-up or
	 * an error ends the stream */
	return poll(&p, 1, 0) != 0;
}

char *bk_api_events(struct bk_agent *a, const cJSON *args, int client_fd)
{
	(void)a;
	const cJSON *follow = cJSON_GetObjectItemCaseSensitive(args, "follow");
	const cJSON *pod = cJSON_GetObjectItemCaseSensitive(args, "pod");
	const cJSON *last = cJSON_GetObjectItemCaseSensitive(args, "last");
	if (follow && !cJSON_IsBool(follow))
		return bk_api_invalid("follow", "bool_type", "follow must be true or false");
	if (pod && !cJSON_IsString(pod))
		return bk_api_invalid("pod", "string_type", "pod must be a pod name");
	if (last && !(cJSON_IsNumber(last) && last->valuedouble >= 0 && last->valuedouble <= BK_EVENTS_RING))
		return bk_api_invalid("last", "int_type", "last must be a number of events, 0 to %d", BK_EVENTS_RING);
	bool fol = cJSON_IsTrue(follow);
	const char *podname = pod ? pod->valuestring : NULL;
	uint64_t n = last ? (uint64_t)last->valuedouble : fol ? 0 : 50;
	uint64_t head = bk_events_head();
	uint64_t cur = head > n ? head - n : 0;

	if (!fol) {
		cJSON *body = cJSON_CreateObject();
		cJSON *arr = cJSON_AddArrayToObject(body, "events");
		uint64_t lost_total = 0;
		char *line;
		uint64_t lost;
		while (cur < head && bk_events_next(&cur, &line, &lost, 0) == 1) {
			lost_total += lost;
			cJSON *ev = event_of(line, podname);
			free(line);
			if (ev)
				cJSON_AddItemToArray(arr, ev);
		}
		cJSON_AddNumberToObject(body, "lost", (double)lost_total);
		return bk_api_respond(200, body);
	}
	if (client_fd < 0)
		return bk_api_error(400, "no_stream", "follow needs a connection to stream on");
	cJSON *hello = cJSON_CreateObject();
	cJSON_AddBoolToObject(hello, "following", true);
	if (send_frame(client_fd, hello) < 0)
		return NULL;
	for (;;) {
		char *line = NULL;
		uint64_t lost = 0;
		int r = bk_events_next(&cur, &line, &lost, 250);
		if (lost) {
			cJSON *l = cJSON_CreateObject();
			cJSON_AddStringToObject(l, "event", "events_lost");
			cJSON_AddNumberToObject(l, "lost", (double)lost);
			if (send_frame(client_fd, l) < 0) {
				free(line);
				return NULL;
			}
		}
		if (r == 1) {
			cJSON *ev = event_of(line, podname);
			free(line);
			if (ev && send_frame(client_fd, ev) < 0)
				return NULL;
			continue;
		}
		if (bk_events_stopping()) {
			cJSON *end = cJSON_CreateObject();
			cJSON_AddStringToObject(end, "event", "end");
			cJSON_AddStringToObject(end, "msg", "agent stopping");
			send_frame(client_fd, end);
			return NULL;
		}
		if (client_gone(client_fd))
			return NULL;
	}
}
