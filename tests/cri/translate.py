"""Kubernetes objects → CRI requests, the way kubelet builds them.

Reads the shipped manifests (deploy/daemonset.yaml, deploy/configmap.yaml,
and the pod that scripts/new-sandbox.sh makes from deploy/sandbox-pod.yaml):
no copy of the specs lives here. What kubelet does and this reproduces:
  - QoS class from requests/limits → cgroup parent /kubepods/<qos>/pod<uid>
    (Guaranteed: /kubepods/pod<uid>), cpu shares/quota, memory limit and
    the QoS oom_score_adj;
  - pod and container security contexts merged (container wins), namespace
    modes (hostPID/hostNetwork/hostIPC, shareProcessNamespace), fsGroup as a
    supplementary group, allowPrivilegeEscalation: false → no_new_privs,
    the default masked/read-only /proc paths unless privileged, seccomp
    (RuntimeDefault, or Unconfined when none is asked for);
  - volumes on the host: hostPath (type Directory must exist,
    DirectoryOrCreate is made), emptyDir, configMap and secret as files
    (defaultMode; with fsGroup a secret's files are group-owned by it and
    group-readable), plus /etc/hosts and /dev/termination-log;
  - the labels and annotations kubelet sets (io.kubernetes.pod.*,
    io.kubernetes.container.*, kubernetes.io/config.*), ports, env, log paths.
Not done: probes (the lane runs the exec probe by ExecSync itself), DNS
config, downward API, projected volumes, image pulls.
"""
import json
import os
import re
import time

import yaml

from crilib import pb

PERIOD = 100000
MASKED = ["/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
          "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware"]
READONLY = ["/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]


def load(path):
    return [d for d in yaml.safe_load_all(open(path)) if d]


def find(docs, kind, name=None):
    for d in docs:
        if d.get("kind") == kind and (name is None or d["metadata"]["name"] == name):
            return d
    raise KeyError(f"no {kind} {name or ''}")


def cpu_milli(q):
    q = str(q)
    return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)


def mem_bytes(q):
    q = str(q)
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "k": 1000, "M": 10**6, "G": 10**9}
    m = re.fullmatch(r"(\d+)([A-Za-z]*)", q)
    return int(m.group(1)) * units.get(m.group(2), 1)


def qos(spec):
    """v1 QoS class over cpu and memory of all containers."""
    reqs, lims, guaranteed = False, False, True
    for c in spec["containers"]:
        r = c.get("resources", {})
        rq, lm = r.get("requests", {}), r.get("limits", {})
        for res in ("cpu", "memory"):
            if res in rq or res in lm:
                reqs = True
            if res in lm:
                lims = True
            if res not in lm or (res in rq and str(rq[res]) != str(lm[res])):
                guaranteed = False
    if not reqs and not lims:
        return "besteffort"
    return "guaranteed" if guaranteed else "burstable"


def cgroup_parent(spec, uid):
    q = qos(spec)
    return f"/kubepods/pod{uid}" if q == "guaranteed" else f"/kubepods/{q}/pod{uid}"


def oom_score_adj(spec, c, mem_capacity):
    q = qos(spec)
    if q == "guaranteed":
        return -997
    if q == "besteffort":
        return 1000
    req = mem_bytes(c.get("resources", {}).get("requests", {}).get("memory", 0))
    adj = 1000 - (1000 * req) // mem_capacity
    return max(2, min(999, adj))


def mem_capacity():
    for line in open("/proc/meminfo"):
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return 1 << 34


def seccomp(sc_c, sc_pod):
    prof = (sc_c or {}).get("seccompProfile") or (sc_pod or {}).get("seccompProfile")
    T = pb.SecurityProfile
    if not prof:
        return T(profile_type=T.Unconfined)
    t = prof["type"]
    if t == "RuntimeDefault":
        return T(profile_type=T.RuntimeDefault)
    if t == "Localhost":
        return T(profile_type=T.Localhost, localhost_ref=prof["localhostProfile"])
    return T(profile_type=T.Unconfined)


class Pod:
    """One pod: its metadata, spec, and where its volumes live on the host."""

    def __init__(self, meta, spec, uid, lane_dir, configmaps=None, secrets=None):
        self.meta, self.spec, self.uid = meta, spec, uid
        self.name, self.namespace = meta["name"], meta.get("namespace", "default")
        self.dir = os.path.join(lane_dir, "pods", uid)
        self.log_dir = os.path.join(lane_dir, "log", f"{self.namespace}_{self.name}_{uid}")
        self.configmaps = configmaps or {}
        self.secrets = secrets or {}
        self.volumes = {}
        self.restarts = {}

    # ---- the pod sandbox ----------------------------------------------------
    def ns_options(self, container=False):
        s = self.spec
        M = pb.NamespaceMode
        pid = M.NODE if s.get("hostPID") else (M.POD if s.get("shareProcessNamespace") else M.CONTAINER)
        return pb.NamespaceOption(network=M.NODE if s.get("hostNetwork") else M.POD, pid=pid,
                                  ipc=M.NODE if s.get("hostIPC") else M.POD)

    def supplemental(self):
        psc = self.spec.get("securityContext") or {}
        g = list(psc.get("supplementalGroups", []))
        if "fsGroup" in psc:
            g.insert(0, psc["fsGroup"])
        return g

    def sandbox_config(self):
        psc = self.spec.get("securityContext") or {}
        labels = dict(self.meta.get("labels") or {})
        labels.update({"io.kubernetes.pod.name": self.name, "io.kubernetes.pod.namespace": self.namespace,
                       "io.kubernetes.pod.uid": self.uid})
        ann = dict(self.meta.get("annotations") or {})
        ann.update({"kubernetes.io/config.source": "api",
                    "kubernetes.io/config.seen": time.strftime("%Y-%m-%dT%H:%M:%S.000000000Z", time.gmtime())})
        ports = []
        for c in self.spec["containers"]:
            for p in c.get("ports", []):
                ports.append(pb.PortMapping(protocol=pb.Protocol.Value(p.get("protocol", "TCP")),
                                            container_port=p["containerPort"], host_port=p.get("hostPort", 0)))
        sc = pb.LinuxSandboxSecurityContext(
            namespace_options=self.ns_options(),
            supplemental_groups=self.supplemental(),
            privileged=any((c.get("securityContext") or {}).get("privileged") for c in self.spec["containers"]),
            seccomp=seccomp(None, psc))
        if "runAsUser" in psc:
            sc.run_as_user.value = psc["runAsUser"]
        if "runAsGroup" in psc:
            sc.run_as_group.value = psc["runAsGroup"]
        os.makedirs(self.log_dir, exist_ok=True)
        return pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name=self.name, uid=self.uid, namespace=self.namespace, attempt=0),
            hostname="" if self.spec.get("hostNetwork") else self.name,
            log_directory=self.log_dir, port_mappings=ports, labels=labels, annotations=ann,
            linux=pb.LinuxPodSandboxConfig(cgroup_parent=cgroup_parent(self.spec, self.uid), security_context=sc,
                                           sysctls={s["name"]: s["value"] for s in psc.get("sysctls", [])}))

    # ---- volumes -------------------------------------------------------------
    def prepare_volumes(self):
        psc = self.spec.get("securityContext") or {}
        fsgroup = psc.get("fsGroup")
        for v in self.spec.get("volumes", []):
            name = v["name"]
            if "hostPath" in v:
                hp = v["hostPath"]
                t = hp.get("type", "")
                if t == "DirectoryOrCreate":
                    os.makedirs(hp["path"], mode=0o755, exist_ok=True)
                elif t == "Directory" and not os.path.isdir(hp["path"]):
                    raise RuntimeError(f"hostPath {hp['path']} of volume {name} is not a directory")
                self.volumes[name] = hp["path"]
                continue
            d = os.path.join(self.dir, "volumes", name)
            os.makedirs(d, exist_ok=True)
            if "emptyDir" in v:
                os.chmod(d, 0o777)
                if fsgroup is not None:
                    os.chown(d, 0, fsgroup)
                    os.chmod(d, 0o2777)
            elif "configMap" in v:
                data = self.configmaps[v["configMap"]["name"]]
                mode = v["configMap"].get("defaultMode", 0o644)
                for k, val in data.items():
                    self._file(os.path.join(d, k), val.encode(), mode, fsgroup)
            elif "secret" in v:
                sname = v["secret"]["secretName"]
                if sname in self.secrets:
                    data = self.secrets[sname]
                elif v["secret"].get("optional"):
                    data = {}  # as kubelet: an optional Secret that does not exist is an empty volume
                else:
                    raise RuntimeError(f"volume {name}: Secret {sname} does not exist")
                mode = v["secret"].get("defaultMode", 0o644)
                for k, val in data.items():
                    self._file(os.path.join(d, k), val, mode, fsgroup)
            else:
                raise RuntimeError(f"volume {name}: type not handled by the lane")
            self.volumes[name] = d
        hosts = os.path.join(self.dir, "etc-hosts")
        with open(hosts, "w") as f:
            f.write(f"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
        os.chmod(hosts, 0o644)

    @staticmethod
    def _file(path, data, mode, fsgroup):
        with open(path, "wb") as f:
            f.write(data)
        if fsgroup is not None:  # kubelet's SetVolumeOwnership: group fsGroup, group may read
            os.chown(path, 0, fsgroup)
            mode |= 0o040
        os.chmod(path, mode)

    # ---- containers ----------------------------------------------------------
    def container(self, name):
        return next(c for c in self.spec["containers"] if c["name"] == name)

    def container_config(self, name, image_user=None):
        c = self.container(name)
        attempt = self.restarts.get(name, 0)
        psc = self.spec.get("securityContext") or {}
        csc = c.get("securityContext") or {}
        merged = dict(psc)
        merged.update(csc)
        privileged = bool(csc.get("privileged"))
        uid = merged.get("runAsUser", image_user)
        if merged.get("runAsNonRoot") and (uid is None or int(uid) == 0):
            raise RuntimeError(f"container {name}: runAsNonRoot and the user is root")
        caps = csc.get("capabilities") or {}
        sc = pb.LinuxContainerSecurityContext(
            capabilities=pb.Capability(add_capabilities=caps.get("add", []), drop_capabilities=caps.get("drop", [])),
            privileged=privileged, namespace_options=self.ns_options(True),
            readonly_rootfs=bool(csc.get("readOnlyRootFilesystem")),
            supplemental_groups=self.supplemental(),
            no_new_privs=(merged.get("allowPrivilegeEscalation") is False) and not privileged,
            masked_paths=[] if privileged else MASKED, readonly_paths=[] if privileged else READONLY,
            seccomp=seccomp(csc, psc))
        if "runAsUser" in merged:
            sc.run_as_user.value = merged["runAsUser"]
        if "runAsGroup" in merged:
            sc.run_as_group.value = merged["runAsGroup"]
        r = c.get("resources", {})
        res = pb.LinuxContainerResources(cpu_period=PERIOD, oom_score_adj=oom_score_adj(self.spec, c, mem_capacity()))
        if "cpu" in r.get("requests", {}) or "cpu" in r.get("limits", {}):
            res.cpu_shares = max(2, cpu_milli(r.get("requests", r.get("limits"))["cpu"]) * 1024 // 1000)
        else:
            res.cpu_shares = 2
        if "cpu" in r.get("limits", {}):
            res.cpu_quota = cpu_milli(r["limits"]["cpu"]) * PERIOD // 1000
        if "memory" in r.get("limits", {}):
            res.memory_limit_in_bytes = mem_bytes(r["limits"]["memory"])
        mounts = []
        for m in c.get("volumeMounts", []):
            prop = {"Bidirectional": pb.PROPAGATION_BIDIRECTIONAL,
                    "HostToContainer": pb.PROPAGATION_HOST_TO_CONTAINER}.get(m.get("mountPropagation"),
                                                                            pb.PROPAGATION_PRIVATE)
            mounts.append(pb.Mount(container_path=m["mountPath"], host_path=self.volumes[m["name"]],
                                   readonly=bool(m.get("readOnly")), propagation=prop))
        if not self.spec.get("hostNetwork"):
            mounts.append(pb.Mount(container_path="/etc/hosts", host_path=os.path.join(self.dir, "etc-hosts")))
        term = os.path.join(self.dir, "containers", name, f"term-{attempt}")
        os.makedirs(os.path.dirname(term), exist_ok=True)
        open(term, "w").close()
        os.chmod(term, 0o666)
        mounts.append(pb.Mount(container_path=c.get("terminationMessagePath", "/dev/termination-log"),
                               host_path=term))
        labels = {"io.kubernetes.container.name": name, "io.kubernetes.pod.name": self.name,
                  "io.kubernetes.pod.namespace": self.namespace, "io.kubernetes.pod.uid": self.uid}
        ann = {"io.kubernetes.container.hash": "%08x" % (hash(json.dumps(c, sort_keys=True)) & 0xffffffff),
               "io.kubernetes.container.restartCount": str(attempt),
               "io.kubernetes.container.terminationMessagePath": "/dev/termination-log",
               "io.kubernetes.container.terminationMessagePolicy": "File",
               "io.kubernetes.pod.terminationGracePeriod": str(self.spec.get("terminationGracePeriodSeconds", 30))}
        if c.get("ports"):
            ann["io.kubernetes.container.ports"] = json.dumps(
                [{"name": p.get("name", ""), "containerPort": p["containerPort"],
                  "protocol": p.get("protocol", "TCP")} for p in c["ports"]])
        return pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name=name, attempt=attempt),
            image=pb.ImageSpec(image=c["image"]), command=c.get("command", []), args=c.get("args", []),
            working_dir=c.get("workingDir", ""),
            envs=[pb.KeyValue(key=e["name"], value=str(e.get("value", ""))) for e in c.get("env", [])],
            mounts=mounts, labels=labels, annotations=ann, log_path=f"{name}/{attempt}.log",
            linux=pb.LinuxContainerConfig(resources=res, security_context=sc))


def daemonset_pod(ds, node, uid, lane_dir, configmaps):
    """The pod the DaemonSet controller would create on NODE."""
    t = ds["spec"]["template"]
    meta = dict(t.get("metadata") or {})
    meta["name"] = f"{ds['metadata']['name']}-{node}"
    meta["namespace"] = ds["metadata"]["namespace"]
    return Pod(meta, t["spec"], uid, lane_dir, configmaps=configmaps)
