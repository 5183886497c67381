'use strict';
// Offline schema validation of Kubernetes manifests, in two passes:
//
//  1. kubernetes-models (4.5.1): the OpenAPI schema compiled to ajv validators.
//     Catches wrong types, bad enum values, bad quantities, missing required
//     fields, and an apiVersion/kind it does not know. It does NOT catch
//     unknown fields (the schemas allow additional properties), so a
//     misspelled `hostPid` passes it.
//  2. TypeScript (5.9.3) type-checks every document, as an object literal,
//     against the same package's interfaces (kubernetes-models/<gv>/<Kind>.d.ts).
//     Object literals get excess-property checks at every depth, so an
//     unknown or misspelled key anywhere in the document is an error.
//
// Documents are parsed as YAML 1.1, as kubectl and the API server's
// sigs.k8s.io/yaml do: `0400` is octal (256), `yes` is a boolean.

const fs = require('fs');
const path = require('path');
const YAML = require('yaml');
const ts = require('typescript');

const MODELS_DIR = path.dirname(require.resolve('kubernetes-models/package.json'));

// Parse a YAML stream into documents. Returns { docs: [{index, obj}], errors }.
function parseStream(text) {
  const out = { docs: [], errors: [] };
  let parsed;
  try {
    parsed = YAML.parseAllDocuments(text, { version: '1.1', uniqueKeys: true, prettyErrors: true });
  } catch (e) {
    out.errors.push(`YAML: ${e.message}`);
    return out;
  }
  if (!Array.isArray(parsed)) parsed = [parsed]; // an empty stream
  parsed.forEach((doc, index) => {
    for (const e of doc.errors) out.errors.push(`YAML document ${index}: ${e.message.split('\n')[0]}`);
    if (doc.errors.length) return;
    const obj = doc.toJS({ maxAliasCount: 0 });
    if (obj === null || obj === undefined) return; // comment-only document
    out.docs.push({ index, obj });
  });
  return out;
}

function modelFor(apiVersion, kind) {
  if (typeof apiVersion !== 'string' || typeof kind !== 'string') return null;
  if (!/^([a-z0-9.-]+\/)?v[0-9]+((alpha|beta)[0-9]+)?$/.test(apiVersion)) return null;
  if (!/^[A-Z][A-Za-z0-9]*$/.test(kind)) return null;
  const rel = `${apiVersion}/${kind}`;
  if (!fs.existsSync(path.join(MODELS_DIR, `${rel}.js`))) return null;
  const Model = require(`kubernetes-models/${rel}`)[kind];
  // Only top-level API resources carry static apiVersion/kind (PodSpec etc. do not).
  if (!Model || Model.apiVersion !== apiVersion || Model.kind !== kind) return null;
  return { Model, module: `kubernetes-models/${rel}`, iface: `I${kind}` };
}

function what(obj) {
  const m = (obj && obj.metadata) || {};
  return `${obj && obj.kind}/${m.name || '?'}`;
}

// Pass 1 for one document: returns an array of error strings.
function validateModel(obj) {
  if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) return ['document is not a mapping'];
  // kubernetes-models also ships beta group-versions that Kubernetes no
  // longer serves (extensions/v1beta1, batch/v1beta1, ...). deploy/ uses GA
  // versions only, which are never removed, so accept nothing else.
  if (typeof obj.apiVersion === 'string' && /\/?v[0-9]+(alpha|beta)[0-9]+$/.test(obj.apiVersion)) {
    return [`pre-GA apiVersion "${obj.apiVersion}" (only GA API versions are accepted; many betas are no longer served)`];
  }
  const model = modelFor(obj.apiVersion, obj.kind);
  if (!model) return [`unknown apiVersion/kind "${obj.apiVersion}" "${obj.kind}" (not a Kubernetes API resource)`];
  try {
    new model.Model(obj).validate();
    return [];
  } catch (e) {
    return [`schema: ${e.message}`];
  }
}

// JSON-ish path of the innermost property at `pos` in the generated source.
function pathAt(sf, pos) {
  const parts = [];
  let node = sf;
  for (;;) {
    let next = null;
    ts.forEachChild(node, (c) => {
      if (!next && c.getStart(sf) <= pos && pos < c.getEnd()) next = c;
    });
    if (!next) break;
    if (ts.isArrayLiteralExpression(node)) parts.push(`[${node.elements.indexOf(next)}]`);
    if (ts.isPropertyAssignment(next)) {
      const n = next.name;
      parts.push(`.${ts.isStringLiteral(n) ? n.text : n.getText(sf)}`);
    }
    node = next;
  }
  return parts.join('').replace(/^\./, '');
}

// Pass 2 for many documents at once (one TypeScript program, ~1 s).
// items: [{ key, obj }] with a modelFor()-known apiVersion/kind.
// Returns Map key -> [error strings].
function validateTypes(items) {
  const result = new Map();
  const files = new Map();
  const vdir = path.join(__dirname, '..', '__typecheck__');
  items.forEach((it, i) => {
    result.set(it.key, []);
    const model = modelFor(it.obj.apiVersion, it.obj.kind);
    if (!model) return;
    const fname = path.join(vdir, `doc${i}.ts`);
    files.set(fname, {
      key: it.key,
      text: `import type { ${model.iface} } from "${model.module}";\n` +
            `const doc: ${model.iface} = ${JSON.stringify(it.obj, null, 2)};\n` +
            'export { doc };\n',
    });
  });
  if (files.size === 0) return result;

  const options = {
    strict: true, noEmit: true, skipLibCheck: true, types: [],
    target: ts.ScriptTarget.ES2020, module: ts.ModuleKind.CommonJS,
    moduleResolution: ts.ModuleResolutionKind.Node10,
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  const fileExists = host.fileExists.bind(host);
  const readFile = host.readFile.bind(host);
  host.getSourceFile = (f, lang, ...rest) =>
    files.has(f) ? ts.createSourceFile(f, files.get(f).text, lang, true) : getSourceFile(f, lang, ...rest);
  host.fileExists = (f) => files.has(f) || fileExists(f);
  host.readFile = (f) => (files.has(f) ? files.get(f).text : readFile(f));

  const program = ts.createProgram([...files.keys()], options, host);
  for (const d of ts.getPreEmitDiagnostics(program)) {
    const msg = ts.flattenDiagnosticMessageText(d.messageText, '\n').split('\n')[0];
    const f = d.file && files.get(d.file.fileName);
    if (!f) {
      // A problem outside the generated files (e.g. a broken install) fails everything.
      for (const errs of result.values()) errs.push(`typecheck: ${msg}`);
      continue;
    }
    const where = pathAt(d.file, d.start);
    result.get(f.key).push(`fields: ${where ? where + ': ' : ''}${msg}`);
  }
  return result;
}

// Validate a list of files. Returns [{ file, index, obj, errors }], plus
// file-level parse errors as entries with obj === null.
function validateFiles(fileList, { textOf } = {}) {
  const entries = [];
  for (const file of fileList) {
    const text = textOf ? textOf(file) : fs.readFileSync(file, 'utf8');
    const { docs, errors } = parseStream(text);
    if (errors.length) entries.push({ file, index: -1, obj: null, errors });
    if (!docs.length && !errors.length) entries.push({ file, index: -1, obj: null, errors: ['no YAML documents'] });
    for (const d of docs) entries.push({ file, index: d.index, obj: d.obj, errors: validateModel(d.obj) });
  }
  const typed = validateTypes(entries.filter((e) => e.obj).map((e) => ({ key: e, obj: e.obj })));
  for (const [e, errs] of typed) e.errors.push(...errs);
  return entries;
}

module.exports = { parseStream, validateModel, validateTypes, validateFiles, modelFor, what };
