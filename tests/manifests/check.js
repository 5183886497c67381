'use strict';
// Manifest tests for deploy/ (run via tests/manifests/run.sh).
// Prints one line per check, `ok - NAME`, `not ok - NAME: WHY` or `skip - NAME: WHY`
// (a check that cannot run here: counted apart, never a pass), and as the
// last line `N passed, M failed, K skipped`. Exit status 1 if any check failed.

const fs = require('fs');
const os = require('os');
const path = require('path');
const cp = require('child_process');
const crypto = require('crypto');
const YAML = require('yaml');
const schema = require('./lib/schema');
const policy = require('./lib/policy');

const ROOT = path.resolve(__dirname, '..', '..');
const DEPLOY = path.join(ROOT, 'deploy');
const rel = (p) => path.relative(ROOT, p);

let passed = 0, failed = 0;
function ok(name) { passed++; console.log(`ok - ${name}`); }
// A check that could not run is neither a pass nor a failure: counted apart.
let skipped = 0;
function skip(name, why) { skipped++; console.log(`skip - ${name}: ${why}`); }
function notOk(name, why) { failed++; console.log(`not ok - ${name}: ${String(why).replace(/\s*\n\s*/g, ' | ')}`); }
function check(name, fn) {
  try {
    const why = fn();
    if (why === true || why === undefined || why === null || (Array.isArray(why) && !why.length)) ok(name);
    else notOk(name, Array.isArray(why) ? why.slice(0, 4).join('; ') + (why.length > 4 ? `; (+${why.length - 4} more)` : '') : why);
  } catch (e) {
    notOk(name, `exception: ${e.stack ? e.stack.split('\n').slice(0, 2).join(' ') : e}`);
  }
}

function run(cmd, args, opts = {}) {
  const r = cp.spawnSync(cmd, args, { encoding: opts.encoding === null ? null : 'utf8', timeout: 60000, ...opts });
  if (r.error) throw r.error;
  return r;
}
function have(cmd) { return run('sh', ['-c', `command -v ${cmd}`]).status === 0; }

const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'boxkite-manifests-'));
const children = [];
function cleanup() {
  for (const c of children) { try { c.kill('SIGKILL'); } catch (_) { /* already gone */ } }
  fs.rmSync(tmpRoot, { recursive: true, force: true });
}
process.on('exit', cleanup);
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => { cleanup(); process.exit(130); });

// ---------------------------------------------------------------------------
// 1. Every YAML document in deploy/ against the Kubernetes schemas.

const deployFiles = fs.readdirSync(DEPLOY).filter((f) => /\.ya?ml$/.test(f)).sort().map((f) => path.join(DEPLOY, f));
const manifestFiles = deployFiles.filter((f) => path.basename(f) !== 'kustomization.yaml');
const template = path.join(DEPLOY, 'sandbox-pod.yaml');
const entries = schema.validateFiles(manifestFiles);
for (const f of manifestFiles) {
  const mine = entries.filter((e) => e.file === f);
  const docs = mine.filter((e) => e.obj).map((e) => schema.what(e.obj));
  const errs = mine.flatMap((e) => e.errors.map((x) => (e.obj ? `${schema.what(e.obj)}: ${x}` : x)));
  check(`schema: ${rel(f)} (${docs.join(', ') || 'no documents'})`, () => errs);
}

// The reason for the second pass, shown rather than asserted: the compiled
// OpenAPI validators alone accept an unknown field; the type pass rejects it.
check('schema: an unknown field passes kubernetes-models alone and is caught by the field check', () => {
  const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'x' },
    spec: { hostPid: true, containers: [{ name: 'c', image: 'i' }] } };
  const byModel = schema.validateModel(pod);
  const byTypes = schema.validateTypes([{ key: 'k', obj: pod }]).get('k');
  if (byModel.length) return `kubernetes-models now rejects it (${byModel[0]}); the field pass may be redundant`;
  if (!byTypes.some((e) => e.includes('hostPid'))) return `field pass did not flag hostPid (${byTypes.join('; ') || 'no errors'})`;
  return [];
});

// kustomization.yaml is not a Kubernetes API object: check its fields by
// hand against kustomize's Kustomization type, and render it with kustomize
// (kubectl's built-in) when kubectl is installed.
const KUSTOMIZE_FIELDS = new Set(['apiVersion', 'kind', 'metadata', 'resources', 'components', 'crds', 'images',
  'namespace', 'namePrefix', 'nameSuffix', 'labels', 'commonLabels', 'commonAnnotations', 'configMapGenerator',
  'secretGenerator', 'generatorOptions', 'patches', 'replacements', 'replicas', 'generators', 'transformers',
  'validators', 'openapi', 'buildMetadata', 'sortOptions', 'helmCharts', 'helmGlobals']);
const IMAGE_FIELDS = new Set(['name', 'newName', 'newTag', 'digest', 'tagSuffix']);
const kfile = path.join(DEPLOY, 'kustomization.yaml');
let kust = null;
check('kustomize: deploy/kustomization.yaml fields, and it lists namespace, rbac, configmap, daemonset, network-policy', () => {
  const { docs, errors } = schema.parseStream(fs.readFileSync(kfile, 'utf8'));
  if (errors.length) return errors;
  if (docs.length !== 1) return `expected one document, found ${docs.length}`;
  kust = docs[0].obj;
  const v = [];
  if (kust.apiVersion !== 'kustomize.config.k8s.io/v1beta1' || kust.kind !== 'Kustomization') v.push('not a kustomize.config.k8s.io/v1beta1 Kustomization');
  for (const k of Object.keys(kust)) if (!KUSTOMIZE_FIELDS.has(k)) v.push(`unknown field ${k}`);
  if (kust.namespace !== undefined) v.push('a top-level namespace would move every object into one namespace');
  const res = Array.isArray(kust.resources) ? kust.resources : [];
  for (const r of res) {
    if (typeof r !== 'string') v.push(`resource ${JSON.stringify(r)} is not a path`);
    else if (!fs.existsSync(path.join(DEPLOY, r))) v.push(`resource ${r} does not exist`);
  }
  for (const want of ['namespace.yaml', 'rbac.yaml', 'configmap.yaml', 'daemonset.yaml', 'network-policy.yaml']) {
    if (!res.includes(want)) v.push(`${want} is not listed`);
  }
  if (res.includes('sandbox-pod.yaml')) v.push('sandbox-pod.yaml is a template and must not be applied');
  for (const img of Array.isArray(kust.images) ? kust.images : []) {
    for (const k of Object.keys(img)) if (!IMAGE_FIELDS.has(k)) v.push(`unknown images field ${k}`);
  }
  return v;
});

if (have('kubectl')) {
  check('kustomize: `kubectl kustomize deploy/` renders offline and every rendered document validates', () => {
    const r = run('kubectl', ['kustomize', DEPLOY]);
    if (r.status !== 0) return `kubectl kustomize failed: ${r.stderr.trim()}`;
    const out = path.join(tmpRoot, 'kustomized.yaml');
    fs.writeFileSync(out, r.stdout);
    const rendered = schema.validateFiles([out]);
    const errs = rendered.flatMap((e) => e.errors.map((x) => (e.obj ? `${schema.what(e.obj)}: ${x}` : x)));
    const want = manifestFiles.filter((f) => f !== template).flatMap((f) => entries.filter((e) => e.file === f && e.obj)).length;
    if (rendered.filter((e) => e.obj).length !== want) errs.push(`rendered ${rendered.filter((e) => e.obj).length} objects, deploy/ has ${want}`);
    return errs;
  });
} else {
  skip('kustomize: `kubectl kustomize deploy/`', 'kubectl is not installed (the field check above still ran)');
}

// ---------------------------------------------------------------------------
// 2. Deliberately broken manifests must fail the validator, for the stated reason.

const badDir = path.join(__dirname, 'bad');
const badFiles = fs.readdirSync(badDir).filter((f) => /\.ya?ml$/.test(f)).sort().map((f) => path.join(badDir, f));
const badEntries = schema.validateFiles(badFiles);
for (const f of badFiles) {
  const text = fs.readFileSync(f, 'utf8');
  const m = text.match(/^# expect: (.+)$/m);
  const errs = badEntries.filter((e) => e.file === f).flatMap((e) => e.errors);
  check(`validator rejects ${rel(f)}${m ? ` (${m[1]})` : ''}`, () => {
    if (!m) return 'fixture has no "# expect: <error text>" line';
    if (!errs.length) return 'the validator accepted it';
    if (!errs.some((e) => e.includes(m[1]))) return `rejected, but not for "${m[1]}": ${errs.join('; ')}`;
    return [];
  });
}
check('validator: tests/manifests/bad/ holds at least 15 broken manifests', () =>
  badFiles.length >= 15 ? [] : `only ${badFiles.length}`);

// ---------------------------------------------------------------------------
// 3. Policy checks over deploy/ plus the sandbox pod template rendered with
//    test values, and over broken variants (tests/manifests/bad-policy/).

function renderTemplate(vals) {
  let t = fs.readFileSync(template, 'utf8');
  for (const [k, v] of vals) t = t.split(k).join(v);
  return t;
}
const TEST_VALUES = [['SANDBOX_NAMESPACE', 'boxkite-sandboxes'], ['SANDBOX_NAME', 'policy-test'],
  ['SANDBOX_IMAGE', 'debian:12-slim'], ['SHIM_IMAGE', 'boxkite-shim:dev']];
const renderedPod = schema.parseStream(renderTemplate(TEST_VALUES)).docs.map((d) => d.obj);
const deployObjs = entries.filter((e) => e.obj && e.file !== template).map((e) => e.obj);
const baseObjs = [...deployObjs, ...renderedPod];

for (const p of policy.runPolicies(baseObjs)) {
  check(`policy: ${p.desc}`, () => p.violations);
}

const key = (o) => `${o.kind}/${(o.metadata || {}).namespace || ''}/${(o.metadata || {}).name || ''}`;
const bpDir = path.join(__dirname, 'bad-policy');
const bpFiles = fs.readdirSync(bpDir).filter((f) => /\.ya?ml$/.test(f)).sort().map((f) => path.join(bpDir, f));
const bpEntries = schema.validateFiles(bpFiles);
for (const f of bpFiles) {
  const text = fs.readFileSync(f, 'utf8');
  const m = text.match(/^# expect-policy: ([a-z-]+): (.+)$/m);
  check(`policy flags ${rel(f)}${m ? ` (${m[1]}: ${m[2]})` : ''}`, () => {
    if (!m) return 'fixture has no "# expect-policy: <id>: <violation text>" line';
    const mine = bpEntries.filter((e) => e.file === f);
    const schemaErrs = mine.flatMap((e) => e.errors);
    if (schemaErrs.length) return `variant is not schema-valid, so it proves nothing: ${schemaErrs.join('; ')}`;
    // The variant replaces the objects of the same kind/namespace/name.
    const variant = mine.map((e) => e.obj);
    const replaced = new Set(variant.map(key));
    const objs = [...baseObjs.filter((o) => !replaced.has(key(o))), ...variant];
    const pol = policy.POLICIES.find(([pid]) => pid === m[1]);
    if (!pol) return `no policy ${m[1]}`;
    const v = pol[2](objs);
    if (!v.length) return `policy ${m[1]} did not flag it`;
    if (!v.some((x) => x.includes(m[2]))) return `flagged, but not for "${m[2]}": ${v.join('; ')}`;
    return [];
  });
}
check('policy: tests/manifests/bad-policy/ covers every policy that guards the sandbox boundary', () => {
  const covered = new Set(bpFiles.map((f) => (fs.readFileSync(f, 'utf8').match(/^# expect-policy: ([a-z-]+):/m) || [])[1]));
  const must = ['only-agent-privileged', 'host-namespaces', 'sandbox-no-sa-token', 'default-deny', 'manager-only-ingress',
    'manager-role', 'agent-no-api', 'secret-only-shim', 'sandbox-hardened', 'sandbox-no-host', 'agent-daemonset', 'agent-config'];
  return must.filter((p) => !covered.has(p)).map((p) => `no variant for ${p}`);
});

// ---------------------------------------------------------------------------
// 4. scripts/new-sandbox.sh

const script = path.join(ROOT, 'scripts', 'new-sandbox.sh');
const sbOut = path.join(tmpRoot, 'sb');
const sb = run(script, ['sb-test', 'boxkite-sandboxes', sbOut], { cwd: tmpRoot });
const pinRe = /^sha256\/\/[A-Za-z0-9+/]{43}=$/;
const printedPin = sb.stdout.trim();
const sbFile = (n) => path.join(sbOut, n);
let sbObjs = [];

check('new-sandbox.sh: exits 0 and prints exactly one line, the sha256// pin', () => {
  if (sb.status !== 0) return `exit ${sb.status}: ${sb.stderr.trim()}`;
  const lines = sb.stdout.split('\n').filter(Boolean);
  if (lines.length !== 1 || !pinRe.test(lines[0])) return `stdout was ${JSON.stringify(sb.stdout)}`;
  return [];
});

check('new-sandbox.sh: secret.yaml and pod.yaml validate against the schemas', () => {
  const files = [sbFile('secret.yaml'), sbFile('pod.yaml')];
  for (const f of files) if (!fs.existsSync(f)) return `${path.basename(f)} was not written`;
  const es = schema.validateFiles(files);
  sbObjs = es.filter((e) => e.obj).map((e) => e.obj);
  const errs = es.flatMap((e) => e.errors.map((x) => `${path.basename(e.file)}: ${x}`));
  if (sbObjs.length !== 2) errs.push(`expected 2 objects, got ${sbObjs.length}`);
  if (/SANDBOX_(NAME|NAMESPACE|IMAGE)|SHIM_IMAGE/.test(fs.readFileSync(sbFile('pod.yaml'), 'utf8'))) errs.push('placeholder left in pod.yaml');
  return errs;
});

function spkiPin(args, input) {
  const der = run('openssl', [...args, '-pubout', '-outform', 'DER'], { input, encoding: null });
  if (der.status !== 0) throw new Error(`openssl ${args.join(' ')} failed: ${der.stderr}`);
  return `sha256//${crypto.createHash('sha256').update(der.stdout).digest('base64')}`;
}

check('new-sandbox.sh: printed pin = SHA-256 of the key\'s SPKI, recomputed from tls.key and from the Secret\'s tls.crt', () => {
  const secret = sbObjs.find((o) => o.kind === 'Secret');
  if (!secret) return 'no Secret';
  const fromKey = spkiPin(['pkey', '-in', sbFile('tls.key')]);
  const certPem = Buffer.from(secret.data['tls.crt'], 'base64');
  const pub = run('openssl', ['x509', '-noout', '-pubkey'], { input: certPem, encoding: null });
  if (pub.status !== 0) return 'Secret tls.crt is not a certificate';
  const fromCert = spkiPin(['pkey', '-pubin'], pub.stdout);
  const v = [];
  if (fromKey !== printedPin) v.push(`pin from tls.key ${fromKey} != printed ${printedPin}`);
  if (fromCert !== printedPin) v.push(`pin from the Secret's certificate ${fromCert} != printed ${printedPin}`);
  const keyInSecret = Buffer.from(secret.data['tls.key'], 'base64');
  if (!keyInSecret.equals(fs.readFileSync(sbFile('tls.key')))) v.push('Secret tls.key differs from OUTDIR/tls.key');
  if (fs.readFileSync(sbFile('pin'), 'utf8').trim() !== printedPin) v.push('OUTDIR/pin differs from the printed pin');
  return v;
});

check('new-sandbox.sh: Secret is Opaque with token (256-bit hex), tls.crt, tls.key (EC P-256); the pod mounts it', () => {
  const secret = sbObjs.find((o) => o.kind === 'Secret');
  const pod = sbObjs.find((o) => o.kind === 'Pod');
  if (!secret || !pod) return 'Secret or Pod missing';
  const v = [];
  if (secret.type !== 'Opaque') v.push(`type ${secret.type}`);
  const keys = Object.keys(secret.data || {}).sort().join(',');
  if (keys !== 'tls.crt,tls.key,token') v.push(`data keys ${keys}`);
  if (secret.stringData) v.push('stringData is set');
  const tok = Buffer.from(secret.data.token, 'base64').toString('utf8');
  if (!/^[0-9a-f]{64}$/.test(tok)) v.push('token is not 64 hex characters (256 bits)');
  if (fs.readFileSync(sbFile('token'), 'utf8') !== tok) v.push('OUTDIR/token differs from the Secret');
  const txt = run('openssl', ['pkey', '-in', sbFile('tls.key'), '-noout', '-text']).stdout;
  if (!/prime256v1|P-256/.test(txt)) v.push('key is not EC P-256');
  const crt = run('openssl', ['x509', '-in', sbFile('tls.crt'), '-noout', '-text']).stdout;
  if (!/ecdsa-with-SHA256/.test(crt)) v.push('certificate is not signed with ecdsa-with-SHA256');
  const vol = (pod.spec.volumes || []).find((x) => x.secret);
  if (!vol || vol.secret.secretName !== secret.metadata.name) v.push('pod does not mount this Secret');
  if (pod.metadata.namespace !== secret.metadata.namespace) v.push('pod and Secret are in different namespaces');
  if (pod.metadata.name !== 'sb-test' || pod.metadata.namespace !== 'boxkite-sandboxes') v.push('name/namespace not substituted');
  return v;
});

check('new-sandbox.sh: key material is mode 0600 (secret.yaml, token, tls.key)', () => {
  const v = [];
  for (const f of ['secret.yaml', 'token', 'tls.key']) {
    const mode = fs.statSync(sbFile(f)).mode & 0o777;
    if (mode !== 0o600) v.push(`${f} is ${mode.toString(8)}`);
  }
  if ((fs.statSync(sbFile('pod.yaml')).mode & 0o077) === 0) v.push('pod.yaml is not readable by others (expected 0644)');
  return v;
});

check('new-sandbox.sh: never prints the token or the key', () => {
  const all = sb.stdout + sb.stderr;
  const tok = fs.readFileSync(sbFile('token'), 'utf8');
  const keyPem = fs.readFileSync(sbFile('tls.key'), 'utf8');
  const keyBody = keyPem.split('\n').filter((l) => l && !l.startsWith('-----'));
  const v = [];
  if (all.includes(tok)) v.push('token printed');
  if (all.includes(Buffer.from(tok).toString('base64'))) v.push('base64 token printed');
  if (keyBody.some((l) => all.includes(l))) v.push('key printed');
  if (all.includes('PRIVATE KEY')) v.push('a PEM private key printed');
  return v;
});

check('new-sandbox.sh: the generated pod passes every sandbox policy', () => {
  if (!sbObjs.length) return 'no output';
  const objs = [...deployObjs, ...sbObjs];
  return policy.runPolicies(objs).flatMap((p) => p.violations.map((x) => `${p.id}: ${x}`));
});

check('new-sandbox.sh: refuses to overwrite existing output and rejects a bad name, printing nothing', () => {
  const v = [];
  const again = run(script, ['sb-test', 'boxkite-sandboxes', sbOut], { cwd: tmpRoot });
  if (again.status === 0) v.push('second run into the same OUTDIR succeeded');
  if (again.stdout) v.push('second run printed to stdout');
  const bad = run(script, ['Bad_Name', 'boxkite-sandboxes', path.join(tmpRoot, 'bad')], { cwd: tmpRoot });
  if (bad.status === 0) v.push('accepted NAME Bad_Name');
  if (fs.existsSync(path.join(tmpRoot, 'bad', 'secret.yaml'))) v.push('wrote files for a bad name');
  const badNs = run(script, ['ok', 'x;rm', path.join(tmpRoot, 'bad2')], { cwd: tmpRoot });
  if (badNs.status === 0) v.push('accepted NAMESPACE "x;rm"');
  const usage = run(script, [], { cwd: tmpRoot });
  if (usage.status === 0) v.push('ran without arguments');
  const dflt = run(script, ['dflt', 'boxkite-sandboxes'], { cwd: tmpRoot });
  if (dflt.status !== 0 || !fs.existsSync(path.join(tmpRoot, 'dflt', 'pod.yaml'))) v.push('default OUTDIR ./NAME not used');
  return v;
});

// ---------------------------------------------------------------------------
// 5. Images: pinned bases, a non-root shim holding only its binary and
//    libraries, and the library collector proven with chroot.

check('images: Dockerfiles pin every base by digest placeholder; shim is FROM scratch, USER 65532', () => {
  const v = [];
  for (const f of ['agent.Dockerfile', 'shim.Dockerfile']) {
    const t = fs.readFileSync(path.join(DEPLOY, 'images', f), 'utf8');
    const args = Object.fromEntries([...t.matchAll(/^ARG ([A-Z_]+)=(\S+)$/gm)].map((x) => [x[1], x[2]]));
    const froms = [...t.matchAll(/^FROM (\S+)/gm)].map((x) => x[1]);
    if (!froms.length) v.push(`${f}: no FROM`);
    for (const fr of froms) {
      const ref = fr.replace(/^\$\{(\w+)\}$/, (_, a) => args[a] || fr);
      if (ref !== 'scratch' && !/@sha256:(<PINNED_DIGEST>|[0-9a-f]{64})$/.test(ref)) v.push(`${f}: FROM ${ref} is not pinned by digest`);
    }
    if (!/scripts\/install-deps\.sh/.test(t) || !/\bmake\b/.test(t)) v.push(`${f}: builder does not use scripts/install-deps.sh and make`);
    const last = t.slice(t.lastIndexOf('\nFROM '));
    if (f === 'shim.Dockerfile') {
      if (!/^FROM scratch/m.test(last)) v.push('shim runtime stage is not FROM scratch');
      if (!/^USER 65532:65532$/m.test(last)) v.push('shim does not run as USER 65532:65532');
      const copies = [...last.matchAll(/^COPY (.*)$/gm)].map((x) => x[1]);
      if (copies.length !== 1 || !/--from=build \/rootfs\/ \//.test(copies[0])) v.push(`shim copies more than the collected root: ${copies.join(' | ')}`);
    }
  }
  return v;
});

check('images: collect-libs.sh builds a root with one program and its libraries that runs as 65532 under chroot', () => {
  const collect = path.join(DEPLOY, 'images', 'collect-libs.sh');
  const rootfs = path.join(tmpRoot, 'rootfs');
  // A stand-in linked like the shim (OpenSSL, libmicrohttpd, cJSON) when the
  // toolchain is there; the real shim when it has been built; else openssl.
  let bin = '/usr/bin/openssl', runArgs = ['version'], note = 'openssl';
  const c = path.join(tmpRoot, 'standin.c');
  fs.writeFileSync(c, '#include <stdio.h>\n#include <openssl/crypto.h>\n#include <microhttpd.h>\n#include <cjson/cJSON.h>\n' +
    'int main(void){printf("%s %s %s\\n", OpenSSL_version(OPENSSL_VERSION), MHD_get_version(), cJSON_Version());return 0;}\n');
  const flags = run('sh', ['-c', 'pkg-config --cflags --libs openssl libmicrohttpd libcjson 2>/dev/null']);
  if (have('cc') && flags.status === 0) {
    const out = path.join(tmpRoot, 'standin');
    const b = run('sh', ['-c', `cc -O1 -o '${out}' '${c}' ${flags.stdout.trim()}`]);
    if (b.status === 0) { bin = out; runArgs = []; note = 'a program linked against OpenSSL, libmicrohttpd, cJSON'; }
  }
  const r = run(collect, [rootfs, bin, '/usr/local/bin/prog']);
  if (r.status !== 0) return `collect-libs.sh failed: ${r.stderr.trim()}`;
  const v = [];
  const exe = run('chroot', ['--userspec=65532:65532', rootfs, '/usr/local/bin/prog', ...runArgs]);
  if (exe.status !== 0) v.push(`${note} does not run from the collected root: ${exe.stderr.trim()}`);
  const files = run('find', [rootfs, '-type', 'f']).stdout.split('\n').filter(Boolean).map((x) => x.slice(rootfs.length));
  const extra = files.filter((x) => x !== '/usr/local/bin/prog' && !/\.so(\.[0-9]+)*$/.test(x));
  if (extra.length) v.push(`non-library files in the root: ${extra.join(', ')}`);
  if (fs.existsSync(path.join(rootfs, 'bin', 'sh'))) v.push('the root has a shell');
  const shim = path.join(ROOT, 'build', 'boxkite-shim');
  if (fs.existsSync(shim)) {
    const sroot = path.join(tmpRoot, 'shimroot');
    const s = run(collect, [sroot, shim, '/usr/local/bin/boxkite-shim']);
    if (s.status !== 0) v.push(`collect-libs.sh failed on build/boxkite-shim: ${s.stderr.trim()}`);
    else {
      const interp = run('sh', ['-c', `ls '${sroot}'/lib64/ld-linux-* '${sroot}'/lib/ld-linux-* 2>/dev/null | head -1`]).stdout.trim();
      const list = interp && run('chroot', [sroot, interp.slice(sroot.length), '--list', '/usr/local/bin/boxkite-shim']);
      if (!list || list.status !== 0 || /not found/.test(list.stdout)) v.push('build/boxkite-shim does not resolve all its libraries in the collected root');
    }
  }
  return v;
});

// ---------------------------------------------------------------------------
// 6. Shell scripts

for (const s of ['scripts/new-sandbox.sh', 'tests/manifests/run.sh', 'deploy/images/collect-libs.sh']) {
  check(`shell: ${s} parses${have('shellcheck') ? ' and passes shellcheck' : ''}`, () => {
    const f = path.join(ROOT, s);
    const st = fs.statSync(f);
    if (!(st.mode & 0o100)) return 'not executable';
    const sh = fs.readFileSync(f, 'utf8').startsWith('#!/bin/sh') ? 'sh' : 'bash';
    const n = run(sh, ['-n', f]);
    if (n.status !== 0) return n.stderr.trim();
    if (have('shellcheck')) {
      const sc = run('shellcheck', [f]);
      if (sc.status !== 0) return sc.stdout.trim().split('\n').slice(0, 6).join(' ');
    }
    return [];
  });
}

// ---------------------------------------------------------------------------
// 7. The pin in practice: a TLS 1.3 server with the generated key and cert on
//    127.0.0.1; curl --pinnedpubkey with the printed pin succeeds and with
//    another key's pin fails. Loopback only, bounded, and killed at the end.

function startServer(port) {
  return new Promise((resolve) => {
    const srv = cp.spawn('openssl', ['s_server', '-accept', `127.0.0.1:${port}`, '-cert', sbFile('tls.crt'),
      '-key', sbFile('tls.key'), '-tls1_3', '-www', '-naccept', '3'], { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(srv);
    let done = false, buf = '';
    const finish = (v) => { if (!done) { done = true; clearTimeout(t); resolve(v); } };
    const t = setTimeout(() => { srv.kill('SIGKILL'); finish(null); }, 5000);
    const onData = (d) => { buf += d; if (/ACCEPT/.test(buf)) finish(srv); };
    srv.stdout.on('data', onData);
    srv.stderr.on('data', (d) => { buf += d; });
    srv.on('exit', () => finish(null));
  });
}

async function pinLive() {
  const name = 'new-sandbox.sh: curl --pinnedpubkey accepts the printed pin over TLS 1.3 and refuses another key\'s';
  if (sb.status !== 0) return notOk(name, 'new-sandbox.sh failed');
  if (!have('curl')) return notOk(name, 'curl is not installed');
  let srv = null, port = 0;
  for (let i = 0; i < 5 && !srv; i++) {
    port = 20000 + crypto.randomInt(30000);
    srv = await startServer(port);
  }
  if (!srv) return notOk(name, 'could not start openssl s_server on 127.0.0.1');
  const url = `https://127.0.0.1:${port}/`;
  const curl = (pin) => new Promise((resolve) => {
    const c = cp.spawn('curl', ['-sS', '--max-time', '5', '--noproxy', '*', '--tlsv1.3', '--insecure',
      '--pinnedpubkey', pin, url], { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(c);
    let out = '', err = '';
    c.stdout.on('data', (d) => { out += d; });
    c.stderr.on('data', (d) => { err += d; });
    c.on('exit', (code) => resolve({ code, out, err }));
  });
  const other = path.join(tmpRoot, 'other.key');
  run('openssl', ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', other]);
  const good = await curl(printedPin);
  const bad = await curl(spkiPin(['pkey', '-in', other]));
  srv.kill('SIGKILL');
  const v = [];
  if (good.code !== 0) v.push(`right pin: curl exit ${good.code} ${good.err.trim()}`);
  else if (!/TLSv1\.3/.test(good.out)) v.push('the session was not TLS 1.3');
  if (bad.code !== 90) v.push(`wrong pin: curl exit ${bad.code}, expected 90 (pinned public key mismatch)`);
  return v.length ? notOk(name, v.join('; ')) : ok(name);
}

pinLive().catch((e) => notOk('pin live check', e.message)).finally(() => {
  console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
  process.exitCode = failed ? 1 : 0;
});
