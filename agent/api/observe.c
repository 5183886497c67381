/* SPDX-License-Identifier: Apache-2.0 */
/* Keys, their order and their types are the wire format (API.md, and
 * boxkitectl reads them): each builder follows its report field by field. */
#include "agent/api/observe.h"
#include "agent/observe/observe.h"
#include "agent/parse/target.h"
#include "lib/log.h"
#include "lib/util.h"

#include <arpa/inet.h>

/* ---- inspect / isolation ------------------------------------------------------------ */

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
	if (r->have_policy) {
		cJSON_AddStringToObject(o, "policy", r->policy);
		cJSON_AddStringToObject(o, "profile_digest", r->profile_digest);
		cJSON *layers = cJSON_AddObjectToObject(o, "layers");
		cJSON_AddStringToObject(layers, "netns", r->netns_fresh ? "fresh" : "pod");
		cJSON_AddBoolToObject(layers, "bpf", r->layer_bpf);
		cJSON_AddBoolToObject(layers, "cgroup", true);
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
	return o;
}

static char *out_of_memory(void)
{
	return bk_api_error(503, "out_of_memory", "out of memory");
}

char *bk_api_inspect(struct bk_agent *a, const struct bk_pod *p)
{
	struct bk_pod_report *r = malloc(sizeof(*r));
	if (!r)
		return out_of_memory();
	char *out = bk_obs_pod_report(a, p, true, r) < 0 ? out_of_memory() : bk_api_respond(200, pod_report_json(r));
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
	cJSON_AddNumberToObject(b, "live_execs", (double)s.live_execs);
	cJSON_AddNumberToObject(b, "execs_ok", (double)s.execs_ok);
	cJSON_AddNumberToObject(b, "execs_failed", (double)s.execs_failed);
	cJSON_AddNumberToObject(b, "refused_callers", (double)s.refused_callers);
	cJSON_AddNumberToObject(b, "requests", (double)s.requests);
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

/* ---- verify ---------------------------------------------------------------------- */

static const char VERIFY_PY[] =
	"import errno, socket, sys, time\n"
	"time.sleep(float(sys.argv[1]))\n"
	"print('IFACES ' + ','.join(n for _, n in socket.if_nameindex()), flush=True)\n"
	"for spec in sys.argv[2:]:\n"
	"    name, fam, addr, port = spec.split(',')\n"
	"    s = socket.socket(socket.AF_INET6 if fam == '6' else socket.AF_INET)\n"
	"    s.settimeout(3)\n"
	"    t0 = time.monotonic()\n"
	"    try:\n"
	"        s.connect((addr, int(port))); r = 'connected'\n"
	"    except socket.timeout:\n"
	"        r = 'timeout'\n"
	"    except OSError as e:\n"
	"        r = errno.errorcode.get(e.errno, str(e.errno))\n"
	"    print('PROBE %s %s %.2f' % (name, r, (time.monotonic() - t0) * 1000), flush=True)\n";

char *bk_api_verify(struct bk_agent *a, const struct bk_pod *p, const cJSON *args)
{
	double hold = 0;
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(args, "hold");
	if (cJSON_IsNumber(h) && h->valuedouble >= 0 && h->valuedouble <= 60)
		hold = h->valuedouble;
	/* python3 -c SCRIPT HOLD name,fam,addr,port... through the normal exec path */
	char cmd[8192];
	size_t off = (size_t)snprintf(cmd, sizeof(cmd), "exec python3 -c \"$BK_VERIFY\" %.1f", hold);
	/* a profile that allows egress is expected to reach public addresses:
	 * the public probe is only meaningful (and only sent) under deny-all */
	char perr[256];
	const struct bk_profile *prof =
		bk_policy_select(&a->cfg.policy, p->pod_namespace, p->pod_name, p->policy_annotation, perr, sizeof(perr));
	int nprobe = prof && prof->n_allow > 0 ? 3 : 4;
	for (int i = 0; i < nprobe; i++) {
		int fam;
		unsigned char ad[16];
		uint16_t port;
		char as[INET6_ADDRSTRLEN];
		if (bk_parse_target(a->cfg.targets[i], &fam, ad, &port) < 0)
			return bk_api_error(500, "bad_config", "verify target %s is not addr:port", bk_target_names[i]);
		inet_ntop(fam, ad, as, sizeof(as));
		off += (size_t)snprintf(cmd + off, sizeof(cmd) - off, " %s,%c,%s,%u", bk_target_names[i],
					fam == AF_INET ? '4' : '6', as, port);
	}
	/* the script travels in the environment of this one exec (not a secret) */
	cJSON *ea = cJSON_CreateObject();
	cJSON_AddStringToObject(ea, "command", cmd);
	cJSON_AddNumberToObject(ea, "timeout", 30 + (int)hold);
	cJSON *env = cJSON_AddObjectToObject(ea, "secret_env");
	cJSON_AddStringToObject(env, "BK_VERIFY", VERIFY_PY);
	char *resp = bk_api_exec(a, p, ea);
	cJSON_Delete(ea);
	cJSON *r = resp ? cJSON_Parse(resp) : NULL;
	free(resp);
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(r, "status");
	cJSON *body = cJSON_GetObjectItemCaseSensitive(r, "body");
	cJSON *out = cJSON_CreateObject();
	cJSON_AddStringToObject(out, "pod", p->pod_name);
	cJSON_AddStringToObject(out, "namespace", p->pod_namespace);
	if (!cJSON_IsNumber(st) || st->valueint != 200) {
		/* the context itself could not be built: that is a failed verify */
		cJSON_AddBoolToObject(out, "passed", false);
		cJSON *det = cJSON_GetObjectItemCaseSensitive(body, "detail");
		cJSON_AddStringToObject(out, "error", cJSON_IsString(det) ? det->valuestring : "exec failed");
		cJSON_Delete(r);
		return bk_api_respond(200, out);
	}
	const cJSON *iso = cJSON_GetObjectItemCaseSensitive(body, "isolation");
	const cJSON *stdout_ = cJSON_GetObjectItemCaseSensitive(body, "stdout");
	const cJSON *denied = cJSON_GetObjectItemCaseSensitive(body, "denied");
	bool fresh = streq(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(iso, "netns")) ?: "", "fresh");
	bool held = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(iso, "bpf_held_to_end"));
	int nprogs = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(iso, "bpf"));
	cJSON_AddStringToObject(out, "exec_id", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(body, "exec_id")) ?: "");
	cJSON_AddStringToObject(out, "policy", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(iso, "policy")) ?: "");
	bool passed = true;
	cJSON *layers = cJSON_AddObjectToObject(out, "layers");
	/* netns: what the command itself saw */
	char ifaces[256] = "";
	const char *so = cJSON_GetStringValue(stdout_) ?: "";
	const char *il = strstr(so, "IFACES ");
	if (il)
		sscanf(il + 7, "%255s", ifaces);
	cJSON *ln = cJSON_AddObjectToObject(layers, "netns");
	cJSON_AddStringToObject(ln, "mode", fresh ? "fresh" : "pod");
	cJSON_AddStringToObject(ln, "interfaces", ifaces);
	bool netns_ok = !fresh || streq(ifaces, "lo");
	cJSON_AddBoolToObject(ln, "held", netns_ok);
	if (!netns_ok)
		passed = false;
	cJSON *lb = cJSON_AddObjectToObject(layers, "bpf");
	cJSON_AddNumberToObject(lb, "programs_attached", nprogs);
	cJSON_AddBoolToObject(lb, "held_to_end", held);
	bool bpf_ok = nprogs == BK_NPROGS && held;
	cJSON_AddBoolToObject(lb, "held", bpf_ok);
	if (!bpf_ok)
		passed = false;
	cJSON *probes = cJSON_AddArrayToObject(out, "probes");
	for (int i = 0; i < 4; i++) {
		char key[64], res[32] = "missing";
		if (i >= nprobe) {
			cJSON *pj = cJSON_CreateObject();
			cJSON_AddStringToObject(pj, "target", bk_target_names[i]);
			cJSON_AddStringToObject(pj, "address", a->cfg.targets[i]);
			cJSON_AddStringToObject(pj, "result", "skipped");
			cJSON_AddNumberToObject(pj, "ms", 0);
			cJSON_AddStringToObject(pj, "layer", "profile allows public egress");
			cJSON_AddBoolToObject(pj, "stopped", true);
			cJSON_AddItemToArray(probes, pj);
			continue;
		}
		double ms = -1;
		snprintf(key, sizeof(key), "PROBE %s ", bk_target_names[i]);
		const char *pl = strstr(so, key);
		if (pl)
			sscanf(pl + strlen(key), "%31s %lf", res, &ms);
		cJSON *pj = cJSON_CreateObject();
		cJSON_AddStringToObject(pj, "target", bk_target_names[i]);
		cJSON_AddStringToObject(pj, "address", a->cfg.targets[i]);
		cJSON_AddStringToObject(pj, "result", res);
		cJSON_AddNumberToObject(pj, "ms", ms);
		/* which layer stopped it: a BPF denial of that address, or no route */
		int fam;
		unsigned char ad[16];
		uint16_t port;
		char as[INET6_ADDRSTRLEN] = "";
		if (bk_parse_target(a->cfg.targets[i], &fam, ad, &port) == 0)
			inet_ntop(fam, ad, as, sizeof(as));
		bool bpf_denied = false;
		const cJSON *dj;
		cJSON_ArrayForEach(dj, denied)
		{
			const char *dst = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(dj, "dst"));
			if (dst && streq(dst, as))
				bpf_denied = true;
		}
		const char *layer = "none";
		bool stopped = false;
		if (streq(res, "EPERM") && bpf_denied)
			layer = "bpf", stopped = true;
		else if (streq(res, "ENETUNREACH") || streq(res, "EHOSTUNREACH"))
			layer = fresh ? "netns" : "routing", stopped = true;
		else if (streq(res, "EPERM") || streq(res, "EACCES"))
			layer = "bpf", stopped = true;
		if (stopped && ms > 1000)
			stopped = false; /* a slow failure looks like a hang to a caller */
		cJSON_AddStringToObject(pj, "layer", layer);
		cJSON_AddBoolToObject(pj, "stopped", stopped);
		if (!stopped)
			passed = false;
		cJSON_AddItemToArray(probes, pj);
	}
	cJSON_AddBoolToObject(out, "passed", passed);
	cJSON_Delete(r);
	bk_log_obj(passed ? "info" : "error", "verify", cJSON_Duplicate(out, true));
	return bk_api_respond(200, out);
}
