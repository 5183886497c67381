'use strict';
// Security policy checks over a set of Kubernetes objects (deploy/ plus a
// rendered sandbox pod). Each policy returns a list of violations (strings);
// an empty list means the policy holds. The negative tests in
// tests/manifests/bad-policy/ show that each one fires on a broken variant.

const AGENT_NS = 'boxkite-system';
const SANDBOX_NS = 'boxkite-sandboxes';
const AGENT_DS = 'boxkite-agent';
const AGENT_CONTAINER = 'agent';
const AGENT_SA = 'boxkite-agent';
const MANAGER = 'boxkite-manager';
const SANDBOX_LABEL = 'boxkite-sandbox';
const SHIM = 'shim';
const SHIM_PORT = 8080;
const SECRET_MOUNT = '/etc/boxkite/secret';
// the agent socket's directory: the one host path a sandbox pod mounts (in the shim)
const POD_SOCK_DIR = '/run/boxkite/pods';

const name = (o) => (o.metadata && o.metadata.name) || '';
const ns = (o) => (o.metadata && o.metadata.namespace) || '';
const id = (o) => `${o.kind}/${ns(o) ? ns(o) + '/' : ''}${name(o)}`;
const arr = (x) => (Array.isArray(x) ? x : []);
const isEmptyObj = (x) => x && typeof x === 'object' && !Array.isArray(x) && Object.keys(x).length === 0;

// Pod specs of every workload kind, with where they came from.
function podSpecs(objs) {
  const out = [];
  for (const o of objs) {
    let spec = null, meta = null;
    switch (o.kind) {
      case 'Pod': spec = o.spec; meta = o.metadata; break;
      case 'DaemonSet': case 'Deployment': case 'StatefulSet': case 'ReplicaSet': case 'Job':
      case 'ReplicationController':
        spec = o.spec && o.spec.template && o.spec.template.spec;
        meta = o.spec && o.spec.template && o.spec.template.metadata;
        break;
      case 'CronJob':
        spec = o.spec && o.spec.jobTemplate && o.spec.jobTemplate.spec && o.spec.jobTemplate.spec.template &&
          o.spec.jobTemplate.spec.template.spec;
        meta = o.spec && o.spec.jobTemplate && o.spec.jobTemplate.spec && o.spec.jobTemplate.spec.template &&
          o.spec.jobTemplate.spec.template.metadata;
        break;
      default: continue;
    }
    if (spec) out.push({ obj: o, spec, meta: meta || {} });
  }
  return out;
}

const allContainers = (spec) =>
  [...arr(spec.initContainers), ...arr(spec.containers), ...arr(spec.ephemeralContainers)];

const isAgent = (o) => o.kind === 'DaemonSet' && name(o) === AGENT_DS && ns(o) === AGENT_NS;

// Every Pod object is a sandbox pod in this project (the agent is a
// DaemonSet); so is any workload whose pods carry the sandbox label.
const isSandbox = (p) => p.obj.kind === 'Pod' ||
  ((p.meta.labels || {})['app.kubernetes.io/name'] === SANDBOX_LABEL);

function sandboxPods(objs) { return podSpecs(objs).filter(isSandbox); }

// ---------------------------------------------------------------------------

function onlyAgentPrivileged(objs) {
  const v = [];
  for (const p of podSpecs(objs)) {
    for (const c of allContainers(p.spec)) {
      const sc = c.securityContext || {};
      const agentC = isAgent(p.obj) && c.name === AGENT_CONTAINER;
      if (sc.privileged === true && !agentC) v.push(`${id(p.obj)} container ${c.name} is privileged`);
      if (arr(sc.capabilities && sc.capabilities.add).length && !agentC) {
        v.push(`${id(p.obj)} container ${c.name} adds capabilities ${sc.capabilities.add.join(',')}`);
      }
    }
  }
  return v;
}

function hostNamespacesOnlyAgent(objs) {
  const v = [];
  for (const p of podSpecs(objs)) {
    if (p.spec.hostPID === true && !isAgent(p.obj)) v.push(`${id(p.obj)} sets hostPID`);
    if (p.spec.hostNetwork === true) v.push(`${id(p.obj)} sets hostNetwork`);
    if (p.spec.hostIPC === true) v.push(`${id(p.obj)} sets hostIPC`);
  }
  return v;
}

function sandboxNoServiceAccountToken(objs) {
  const v = [];
  const pods = sandboxPods(objs);
  if (!pods.length) v.push('no sandbox pod found');
  for (const p of pods) {
    if (p.spec.automountServiceAccountToken !== false) {
      v.push(`${id(p.obj)} does not set automountServiceAccountToken: false`);
    }
    for (const vol of arr(p.spec.volumes)) {
      for (const s of arr(vol.projected && vol.projected.sources)) {
        if (s.serviceAccountToken) v.push(`${id(p.obj)} volume ${vol.name} projects a service-account token`);
      }
    }
  }
  return v;
}

function selectorIsEmpty(sel) {
  if (!sel || typeof sel !== 'object') return false;
  return Object.keys(sel).every((k) =>
    (k === 'matchLabels' && isEmptyObj(sel[k])) || (k === 'matchExpressions' && arr(sel[k]).length === 0));
}

function defaultDenyPolicy(objs) {
  const nps = objs.filter((o) => o.kind === 'NetworkPolicy' && ns(o) === SANDBOX_NS);
  const why = [];
  for (const np of nps) {
    const s = np.spec || {};
    const reasons = [];
    if (!selectorIsEmpty(s.podSelector)) reasons.push('podSelector is not empty ({})');
    const types = arr(s.policyTypes);
    if (!types.includes('Ingress') || !types.includes('Egress')) {
      reasons.push(`policyTypes is [${types.join(', ')}], not both Ingress and Egress`);
    }
    if (arr(s.ingress).length) reasons.push('it has ingress rules');
    if (arr(s.egress).length) reasons.push('it has egress rules');
    if (!reasons.length) return []; // found one that denies everything
    why.push(`${id(np)}: ${reasons.join('; ')}`);
  }
  return [`no deny-all NetworkPolicy in ${SANDBOX_NS}` + (why.length ? ` (${why.join(' | ')})` : '')];
}

// Every NetworkPolicy in the sandbox namespace may only add: ingress from
// the manager's pods (namespace AND pod selector, in one peer) to TCP 8080.
function sandboxNetworkAllowsOnlyManager(objs) {
  const v = [];
  const nps = objs.filter((o) => o.kind === 'NetworkPolicy' && ns(o) === SANDBOX_NS);
  let managerRule = false;
  for (const np of nps) {
    const s = np.spec || {};
    if (arr(s.egress).length) v.push(`${id(np)} allows egress`);
    for (const rule of arr(s.ingress)) {
      const peers = arr(rule.from);
      const ports = arr(rule.ports);
      if (!peers.length) v.push(`${id(np)} has an ingress rule from anywhere`);
      for (const peer of peers) {
        const nsSel = peer.namespaceSelector && peer.namespaceSelector.matchLabels;
        const podSel = peer.podSelector && peer.podSelector.matchLabels;
        if (peer.ipBlock) v.push(`${id(np)} admits an ipBlock`);
        if (!nsSel || nsSel['kubernetes.io/metadata.name'] !== AGENT_NS ||
            arr(peer.namespaceSelector.matchExpressions).length || Object.keys(nsSel).length !== 1) {
          v.push(`${id(np)} ingress peer is not exactly the namespace ${AGENT_NS}`);
        }
        if (!podSel || podSel['app.kubernetes.io/name'] !== MANAGER) {
          v.push(`${id(np)} ingress peer is not restricted to pods labelled ${MANAGER}`);
        }
      }
      if (ports.length !== 1 || ports[0].port !== SHIM_PORT || (ports[0].protocol || 'TCP') !== 'TCP' ||
          ports[0].endPort !== undefined) {
        v.push(`${id(np)} ingress is not limited to TCP ${SHIM_PORT}`);
      }
      const sel = (s.podSelector && s.podSelector.matchLabels) || {};
      if (sel['app.kubernetes.io/name'] !== SANDBOX_LABEL) {
        v.push(`${id(np)} ingress rule applies to pods other than ${SANDBOX_LABEL}`);
      }
      managerRule = true;
    }
  }
  if (!managerRule) v.push(`no NetworkPolicy admits the manager to the shim port ${SHIM_PORT}`);
  return v;
}

const FORBIDDEN_RESOURCES = new Set([
  'pods/exec', 'pods/attach', 'pods/portforward', 'pods/proxy', 'pods/ephemeralcontainers',
  'nodes', 'nodes/proxy', 'serviceaccounts/token', 'roles', 'rolebindings', 'clusterroles',
  'clusterrolebindings',
]);
const MANAGER_RESOURCES = { pods: ['get', 'list', 'watch', 'create', 'delete'], 'pods/log': ['get'],
  secrets: ['get', 'list', 'watch', 'create', 'delete'] };

function managerRoleMinimal(objs) {
  const v = [];
  for (const o of objs) {
    if (o.kind === 'ClusterRole' || o.kind === 'ClusterRoleBinding') v.push(`${id(o)}: nothing cluster-wide is allowed`);
  }
  const roles = objs.filter((o) => o.kind === 'Role');
  const mgr = roles.find((r) => name(r) === MANAGER);
  if (!mgr) v.push(`no namespaced Role ${MANAGER}`);
  else if (ns(mgr) !== SANDBOX_NS) v.push(`Role ${MANAGER} is in ${ns(mgr) || '(no namespace)'}, not ${SANDBOX_NS}`);
  for (const r of roles) {
    arr(r.rules).forEach((rule, i) => {
      const at = `${id(r)} rule ${i}`;
      for (const f of ['apiGroups', 'resources', 'verbs', 'resourceNames']) {
        if (arr(rule[f]).some((x) => typeof x === 'string' && x.includes('*'))) v.push(`${at}: wildcard in ${f}`);
      }
      if (arr(rule.nonResourceURLs).length) v.push(`${at}: nonResourceURLs`);
      if (arr(rule.apiGroups).some((g) => g !== '')) v.push(`${at}: API groups other than core: ${rule.apiGroups.join(',')}`);
      for (const res of arr(rule.resources)) {
        if (FORBIDDEN_RESOURCES.has(res)) v.push(`${at}: grants ${res}`);
        else if (!MANAGER_RESOURCES[res]) v.push(`${at}: grants ${res}, which the manager does not need`);
        for (const verb of arr(rule.verbs)) {
          if (MANAGER_RESOURCES[res] && !MANAGER_RESOURCES[res].includes(verb)) v.push(`${at}: verb ${verb} on ${res}`);
        }
      }
      for (const verb of arr(rule.verbs)) {
        if (['escalate', 'bind', 'impersonate'].includes(verb)) v.push(`${at}: verb ${verb}`);
      }
    });
  }
  for (const b of objs.filter((o) => o.kind === 'RoleBinding')) {
    if (!b.roleRef || b.roleRef.kind !== 'Role') v.push(`${id(b)} binds a ${b.roleRef && b.roleRef.kind}, not a namespaced Role`);
  }
  return v;
}

function agentHasNoApiAccess(objs) {
  const v = [];
  for (const b of objs.filter((o) => o.kind === 'RoleBinding' || o.kind === 'ClusterRoleBinding')) {
    for (const s of arr(b.subjects)) {
      if (s.kind === 'ServiceAccount' && s.name === AGENT_SA) v.push(`${id(b)} binds the agent's ServiceAccount`);
      if (s.kind === 'Group' && /^system:serviceaccounts(:boxkite-system)?$/.test(s.name)) {
        v.push(`${id(b)} binds every ServiceAccount (${s.name})`);
      }
    }
  }
  const sa = objs.find((o) => o.kind === 'ServiceAccount' && name(o) === AGENT_SA);
  if (!sa) v.push(`no ServiceAccount ${AGENT_SA}`);
  else if (sa.automountServiceAccountToken !== false) v.push(`ServiceAccount ${AGENT_SA} does not set automountServiceAccountToken: false`);
  const ds = objs.find(isAgent);
  if (ds) {
    const spec = ds.spec.template.spec;
    if (spec.automountServiceAccountToken !== false) v.push(`${id(ds)} does not set automountServiceAccountToken: false`);
    if (spec.serviceAccountName !== AGENT_SA) v.push(`${id(ds)} does not run as ServiceAccount ${AGENT_SA}`);
  }
  return v;
}

function secretVolumes(spec) {
  const names = new Set();
  for (const vol of arr(spec.volumes)) {
    if (vol.secret) names.add(vol.name);
    if (arr(vol.projected && vol.projected.sources).some((s) => s.secret)) names.add(vol.name);
  }
  return names;
}

function secretOnlyInShim(objs) {
  const v = [];
  const pods = sandboxPods(objs);
  if (!pods.length) v.push('no sandbox pod found');
  for (const p of pods) {
    const secrets = secretVolumes(p.spec);
    if (!secrets.size) v.push(`${id(p.obj)} has no Secret volume for the shim`);
    for (const c of allContainers(p.spec)) {
      for (const m of arr(c.volumeMounts)) {
        if (secrets.has(m.name) && c.name !== SHIM) v.push(`${id(p.obj)} mounts Secret volume ${m.name} into ${c.name}`);
      }
      for (const e of arr(c.env)) {
        if (e.valueFrom && e.valueFrom.secretKeyRef && c.name !== SHIM) {
          v.push(`${id(p.obj)} passes a Secret to ${c.name} in env ${e.name}`);
        }
      }
      for (const ef of arr(c.envFrom)) {
        if (ef.secretRef) v.push(`${id(p.obj)} passes Secret ${ef.secretRef.name} to ${c.name} via envFrom`);
      }
    }
    const shim = arr(p.spec.containers).find((c) => c.name === SHIM);
    if (!shim) { v.push(`${id(p.obj)} has no ${SHIM} container`); continue; }
    const m = arr(shim.volumeMounts).find((x) => secrets.has(x.name));
    if (!m) v.push(`${id(p.obj)}: the Secret is not mounted into ${SHIM}`);
    else {
      if (m.mountPath !== SECRET_MOUNT) v.push(`${id(p.obj)}: Secret mounted at ${m.mountPath}, not ${SECRET_MOUNT}`);
      if (m.readOnly !== true) v.push(`${id(p.obj)}: Secret mount is not readOnly`);
      const vol = arr(p.spec.volumes).find((x) => x.name === m.name);
      if (vol.secret && vol.secret.defaultMode !== 0o400) {
        v.push(`${id(p.obj)}: Secret volume defaultMode is ${vol.secret.defaultMode === undefined ? 'unset' : '0' + vol.secret.defaultMode.toString(8)}, not 0400`);
      }
    }
    const env = Object.fromEntries(arr(shim.env).map((e) => [e.name, e.value]));
    const want = {
      SIDECAR_AUTH_TOKEN_FILE: `${SECRET_MOUNT}/token`, SIDECAR_TLS_CERT: `${SECRET_MOUNT}/tls.crt`,
      SIDECAR_TLS_KEY: `${SECRET_MOUNT}/tls.key`, SIDECAR_LISTEN: `0.0.0.0:${SHIM_PORT}`,
      BOXKITE_AGENT_SOCKET: `${POD_SOCK_DIR}/agent.sock`,
    };
    for (const [k, val] of Object.entries(want)) {
      if (env[k] !== val) v.push(`${id(p.obj)}: shim env ${k} is ${JSON.stringify(env[k])}, not ${val}`);
    }
    if ('SIDECAR_TLS_DISABLED' in env) v.push(`${id(p.obj)}: shim sets SIDECAR_TLS_DISABLED`);
  }
  return v;
}

function sandboxContainersHardened(objs) {
  const v = [];
  const pods = sandboxPods(objs);
  if (!pods.length) v.push('no sandbox pod found');
  for (const p of pods) {
    const psc = p.spec.securityContext || {};
    for (const c of allContainers(p.spec)) {
      const sc = c.securityContext || {};
      const at = `${id(p.obj)} container ${c.name}`;
      const drop = arr(sc.capabilities && sc.capabilities.drop);
      if (!drop.includes('ALL')) v.push(`${at} does not drop ALL capabilities`);
      if (arr(sc.capabilities && sc.capabilities.add).length) v.push(`${at} adds capabilities`);
      const nonRoot = sc.runAsNonRoot !== undefined ? sc.runAsNonRoot : psc.runAsNonRoot;
      if (nonRoot !== true) v.push(`${at} is not runAsNonRoot`);
      const uid = sc.runAsUser !== undefined ? sc.runAsUser : psc.runAsUser;
      if (typeof uid !== 'number' || uid === 0) v.push(`${at} runAsUser is ${uid === undefined ? 'unset' : uid}, not a non-zero uid`);
      if (sc.readOnlyRootFilesystem !== true) v.push(`${at} root filesystem is not read-only`);
      if (sc.allowPrivilegeEscalation !== false) v.push(`${at} does not set allowPrivilegeEscalation: false`);
      if (sc.privileged === true) v.push(`${at} is privileged`);
      const sp = sc.seccompProfile || psc.seccompProfile || {};
      if (sp.type !== 'RuntimeDefault' && sp.type !== 'Localhost') v.push(`${at} has no seccomp profile (RuntimeDefault)`);
      if (sc.procMount === 'Unmasked') v.push(`${at} unmasks /proc`);
      const r = c.resources || {};
      for (const k of ['cpu', 'memory']) {
        if (!(r.limits && r.limits[k] !== undefined)) v.push(`${at} has no ${k} limit`);
        if (!(r.requests && r.requests[k] !== undefined)) v.push(`${at} has no ${k} request`);
      }
    }
  }
  return v;
}

function sandboxNoHostAccess(objs) {
  const v = [];
  const pods = sandboxPods(objs);
  if (!pods.length) v.push('no sandbox pod found');
  for (const p of pods) {
    const s = p.spec;
    if (s.hostNetwork === true || s.hostPID === true || s.hostIPC === true) v.push(`${id(p.obj)} uses a host namespace`);
    if (s.shareProcessNamespace === true) v.push(`${id(p.obj)} shares the process namespace between containers`);
    if (s.enableServiceLinks !== false) v.push(`${id(p.obj)} does not set enableServiceLinks: false`);
    const hostVols = new Map(arr(s.volumes).filter((x) => x.hostPath).map((x) => [x.name, x.hostPath]));
    for (const [vn, hp] of hostVols) {
      // the agent socket's directory only: never /run/boxkite itself (the
      // admin socket, the state)
      if (hp.path !== POD_SOCK_DIR) v.push(`${id(p.obj)} volume ${vn} mounts host path ${hp.path}, not ${POD_SOCK_DIR}`);
      else if (hp.type !== 'Directory') v.push(`${id(p.obj)} hostPath ${POD_SOCK_DIR} has type ${hp.type}, not Directory`);
    }
    for (const c of allContainers(s)) {
      for (const m of arr(c.volumeMounts)) {
        if (!hostVols.has(m.name)) continue;
        if (c.name !== SHIM) v.push(`${id(p.obj)} mounts host path ${hostVols.get(m.name).path} into ${c.name}`);
        else if (m.mountPath !== POD_SOCK_DIR || m.readOnly !== true) {
          v.push(`${id(p.obj)} ${c.name}: host path mounted at ${m.mountPath}${m.readOnly === true ? '' : ' writable'}, not read-only at ${POD_SOCK_DIR}`);
        }
        if (m.mountPropagation && m.mountPropagation !== 'None') v.push(`${id(p.obj)} ${c.name}: mount propagation ${m.mountPropagation}`);
      }
      for (const port of arr(c.ports)) {
        if (port.hostPort !== undefined) v.push(`${id(p.obj)} container ${c.name} uses hostPort ${port.hostPort}`);
      }
    }
    if (!arr(s.containers).some((c) => c.name === 'sandbox')) v.push(`${id(p.obj)} has no container named sandbox`);
  }
  return v;
}

function agentDaemonSetShape(objs) {
  const v = [];
  const ds = objs.find(isAgent);
  if (!ds) return [`no DaemonSet ${AGENT_NS}/${AGENT_DS}`];
  const spec = ds.spec.template.spec;
  const c = arr(spec.containers).find((x) => x.name === AGENT_CONTAINER);
  if (!c) return [`${id(ds)} has no container ${AGENT_CONTAINER}`];
  if (!(c.securityContext && c.securityContext.privileged === true)) v.push('agent container is not privileged');
  if (spec.hostPID !== true) v.push('agent does not set hostPID');
  const cmd = JSON.stringify(c.command);
  if (cmd !== JSON.stringify(['/usr/local/bin/boxkite-agent', '--config', '/etc/boxkite/config.json'])) v.push(`agent command is ${cmd}`);
  const probe = c.readinessProbe && c.readinessProbe.exec && c.readinessProbe.exec.command;
  if (JSON.stringify(probe) !== JSON.stringify(['/usr/local/bin/boxkitectl', 'ready'])) v.push('readiness probe is not exec boxkitectl ready');
  const r = c.resources || {};
  for (const k of ['cpu', 'memory']) {
    if (!(r.requests && r.requests[k])) v.push(`agent has no ${k} request`);
    if (!(r.limits && r.limits[k])) v.push(`agent has no ${k} limit`);
  }
  if (!arr(spec.tolerations).some((t) => t.operator === 'Exists' && !t.key && !t.effect)) v.push('agent does not tolerate every taint (operator: Exists)');
  if (spec.priorityClassName !== 'system-node-critical') v.push('priorityClassName is not system-node-critical');
  const us = ds.spec.updateStrategy || {};
  if (us.type !== 'RollingUpdate' || !us.rollingUpdate || us.rollingUpdate.maxUnavailable !== 1) v.push('updateStrategy is not RollingUpdate with maxUnavailable 1');
  if (us.rollingUpdate && us.rollingUpdate.maxSurge !== undefined && us.rollingUpdate.maxSurge !== 0) v.push('maxSurge is not 0 (two agents would share one socket)');
  const vols = new Map(arr(spec.volumes).map((x) => [x.name, x]));
  const mounts = new Map(arr(c.volumeMounts).map((m) => [m.mountPath, m]));
  const want = [
    ['/sys/fs/bpf', '/sys/fs/bpf', { propagation: 'Bidirectional' }],
    ['/sys/fs/cgroup', '/sys/fs/cgroup', {}],
    ['/run/boxkite', '/run/boxkite', { type: 'DirectoryOrCreate' }],
    ['/run/containerd/runc/k8s.io', '/run/containerd/runc/k8s.io', { readOnly: true }],
    ['/run/runc', '/run/runc', { readOnly: true }],
  ];
  for (const [mp, hostPath, o] of want) {
    const m = mounts.get(mp);
    if (!m) { v.push(`agent does not mount ${mp}`); continue; }
    const vol = vols.get(m.name);
    if (!vol || !vol.hostPath || vol.hostPath.path !== hostPath) { v.push(`${mp} is not the host's ${hostPath}`); continue; }
    if (o.propagation && m.mountPropagation !== o.propagation) v.push(`${mp} mountPropagation is ${m.mountPropagation}, not ${o.propagation}`);
    if (o.type && vol.hostPath.type !== o.type) v.push(`${hostPath} hostPath type is ${vol.hostPath.type}, not ${o.type}`);
    if (o.readOnly && m.readOnly !== true) v.push(`${mp} is not mounted read-only`);
  }
  const cfg = mounts.get('/etc/boxkite');
  const cfgVol = cfg && vols.get(cfg.name);
  if (!cfgVol || !cfgVol.configMap || cfgVol.configMap.name !== 'boxkite-agent-config') v.push('ConfigMap boxkite-agent-config is not mounted at /etc/boxkite');
  return v;
}

function agentConfig(objs) {
  const v = [];
  const cm = objs.find((o) => o.kind === 'ConfigMap' && name(o) === 'boxkite-agent-config' && ns(o) === AGENT_NS);
  if (!cm) return [`no ConfigMap ${AGENT_NS}/boxkite-agent-config`];
  let cfg;
  try { cfg = JSON.parse((cm.data || {})['config.json']); } catch (e) { return [`config.json is not JSON: ${e.message}`]; }
  if (cfg.sandbox_container !== 'sandbox') v.push(`sandbox_container is ${cfg.sandbox_container}`);
  if (cfg.shim_container !== SHIM) v.push(`shim_container is ${cfg.shim_container}`);
  for (const layer of ['netns', 'bpf']) {
    if (!cfg.layers || cfg.layers[layer] !== true) v.push(`layer ${layer} is not on`);
  }
  const e = cfg.exec || {};
  for (const k of ['pids_max', 'memory_max', 'timeout_default']) {
    if (!Number.isInteger(e[k]) || e[k] <= 0) v.push(`exec.${k} is not a positive integer`);
  }
  const ds = objs.find(isAgent);
  const mounted = ds ? arr(arr(ds.spec.template.spec.containers).find((x) => x.name === AGENT_CONTAINER)?.volumeMounts).map((m) => m.mountPath) : [];
  for (const root of arr(cfg.runtime_roots)) {
    if (!mounted.includes(root)) v.push(`runtime root ${root} is not mounted into the agent`);
  }
  if (!arr(cfg.runtime_roots).length) v.push('no runtime_roots');
  // the sockets where the pods' hostPath and the agent's mount expect them
  const dir = (f) => f.slice(0, f.lastIndexOf('/'));
  if (cfg.socket !== undefined && dir(cfg.socket) !== POD_SOCK_DIR) v.push(`socket ${cfg.socket} is not in ${POD_SOCK_DIR}, the directory sandbox pods mount`);
  for (const k of ['admin_socket', 'state_dir']) {
    if (cfg[k] !== undefined && (cfg[k] + '/').startsWith(POD_SOCK_DIR + '/')) v.push(`${k} ${cfg[k]} is inside ${POD_SOCK_DIR}, which sandbox pods mount`);
  }
  return v;
}

function namespaces(objs) {
  const v = [];
  const have = new Set(objs.filter((o) => o.kind === 'Namespace').map(name));
  for (const n of [AGENT_NS, SANDBOX_NS]) if (!have.has(n)) v.push(`no Namespace ${n}`);
  const clusterScoped = new Set(['Namespace', 'ClusterRole', 'ClusterRoleBinding', 'PriorityClass']);
  for (const o of objs) {
    if (clusterScoped.has(o.kind)) continue;
    if (![AGENT_NS, SANDBOX_NS].includes(ns(o))) v.push(`${id(o)} is not in ${AGENT_NS} or ${SANDBOX_NS}`);
  }
  return v;
}

const POLICIES = [
  ['only-agent-privileged', 'only the agent container is privileged (or adds capabilities)', onlyAgentPrivileged],
  ['host-namespaces', 'hostPID only on the agent; no hostNetwork/hostIPC anywhere', hostNamespacesOnlyAgent],
  ['sandbox-no-sa-token', 'sandbox pods mount no service-account token', sandboxNoServiceAccountToken],
  ['default-deny', 'sandbox namespace has a deny-all NetworkPolicy (empty podSelector, Ingress+Egress)', defaultDenyPolicy],
  ['manager-only-ingress', 'sandbox NetworkPolicies admit only manager pods to TCP 8080, no egress', sandboxNetworkAllowsOnlyManager],
  ['manager-role', 'manager Role is namespaced, minimal, no wildcard, no exec/attach', managerRoleMinimal],
  ['agent-no-api', 'agent ServiceAccount has no permissions and no token', agentHasNoApiAccess],
  ['secret-only-shim', 'the per-pod Secret is mounted only into the shim', secretOnlyInShim],
  ['sandbox-hardened', 'sandbox pod containers drop ALL, non-root, read-only root, no escalation, seccomp, limits', sandboxContainersHardened],
  ['sandbox-no-host', `sandbox pod: no host namespaces, hostPath only ${POD_SOCK_DIR} (read-only) in the shim`, sandboxNoHostAccess],
  ['agent-daemonset', 'agent DaemonSet: privileged, hostPID, mounts, probe, tolerations, priority, rollout', agentDaemonSetShape],
  ['agent-config', 'agent config parses, both layers on, runtime roots mounted', agentConfig],
  ['namespaces', 'objects live in boxkite-system / boxkite-sandboxes', namespaces],
];

function runPolicies(objs) {
  return POLICIES.map(([pid, desc, fn]) => ({ id: pid, desc, violations: fn(objs) }));
}

module.exports = { POLICIES, runPolicies, podSpecs, sandboxPods };
