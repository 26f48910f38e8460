'use strict';
// The package's install script (npm runs it on `npm install`). It selects
// the addon, in this order:
//   1. libdlbridge installed on this machine (pkg-config finds dlbridge.pc):
//      the addon is built from source against it with node-gyp, offline
//      (the Node headers of this node's prefix, the node-gyp npm bundles);
//   2. else, or when that cannot be built: the prebuilt addon for linux-x64
//      that the package carries, with libdlbridge beside it, when it loads
//      on this machine (glibc recent enough);
//   3. else it fails, with a message naming what is missing.
// DLBRIDGE_NODE_INSTALL=source or `npm install --build-from-source` asks for
// 1 only, DLBRIDGE_NODE_INSTALL=prebuilt for 2 only.
//
// A source build happens in a scratch folder inside the package and replaces
// build/Release/dlbridge_node.node only once the new addon has loaded: a
// failed build never removes an addon built before. On failure npm removes
// the package it was installing: nothing is left half-installed.

const { spawnSync, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const addon = require('./addon');

const say = (line) => process.stderr.write(`dlbridge: ${line}\n`);

function onPath(name) {
  if (name.includes('/')) return fs.existsSync(name) ? name : null;
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    const f = path.join(dir || '.', name);
    try {
      fs.accessSync(f, fs.constants.X_OK);
      return f;
    } catch { /* next */ }
  }
  return null;
}

// The addon at `file` loads in a fresh node: null, or why not.
function loadError(file) {
  const r = spawnSync(process.execPath, ['-e', `require(${JSON.stringify(file)})`], { encoding: 'utf8' });
  if (r.status === 0) return null;
  const line = (r.stderr || '').split('\n').find((l) => /Error|error:|not found/.test(l)) || `exit status ${r.status}`;
  return line.trim();
}

function versionLess(a, b) {
  const x = a.split('.').map(Number);
  const y = b.split('.').map(Number);
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    if ((x[i] || 0) !== (y[i] || 0)) return (x[i] || 0) < (y[i] || 0);
  }
  return false;
}

// The system's libdlbridge: { version } or { why }.
function systemLibrary() {
  try {
    const version = execFileSync('pkg-config', ['--modversion', 'dlbridge'],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    return { version };
  } catch (e) {
    return { why: e.code === 'ENOENT' ? 'no pkg-config to find libdlbridge with'
      : 'no libdlbridge found by pkg-config (dlbridge.pc; PKG_CONFIG_PATH)' };
  }
}

// The prebuilt addon: { ok: true } or { why }.
function prebuiltFits() {
  const where = `${process.platform}-${process.arch}`;
  if (!fs.existsSync(addon.prebuilt)) {
    return { why: where === 'linux-x64' ? 'this copy of the package carries no prebuilt addon (the tarball scripts/node-package makes has one)'
      : `the package carries no prebuilt addon for ${where} (only for linux-x64)` };
  }
  let meta = {};
  try {
    meta = JSON.parse(fs.readFileSync(path.join(addon.prebuildDir, 'prebuild.json'), 'utf8'));
  } catch { /* checked by loading */ }
  if (meta.glibc) {
    const glibc = process.report.getReport().header.glibcVersionRuntime;
    if (!glibc) return { why: `this machine's C library is not glibc; the prebuilt addon needs glibc ${meta.glibc} or later` };
    if (versionLess(glibc, meta.glibc)) {
      return { why: `this machine's glibc ${glibc} is older than the glibc ${meta.glibc} the prebuilt addon needs` };
    }
  }
  const err = loadError(addon.prebuilt);
  return err ? { why: `the prebuilt addon does not load here: ${err}` } : { ok: true };
}

// What building from source needs: { gyp, nodedir } or { why }.
function sourceTools() {
  const missing = [];
  const bundled = path.join(path.dirname(fs.realpathSync(process.execPath)), '..', 'lib', 'node_modules', 'npm',
    'node_modules', 'node-gyp', 'bin', 'node-gyp.js');
  const gyp = [process.env.npm_config_node_gyp, bundled].find((f) => f && f.endsWith('.js') && fs.existsSync(f));
  if (!gyp) missing.push('node-gyp (npm bundles it)');
  const nodedir = [process.env.npm_config_nodedir, path.join(path.dirname(fs.realpathSync(process.execPath)), '..')]
    .find((d) => d && fs.existsSync(path.join(d, 'include', 'node', 'node_api.h')));
  if (!nodedir) missing.push(`the Node.js headers (include/node/node_api.h beside ${process.execPath}, or npm_config_nodedir)`);
  const cc = process.env.CC || 'cc';
  if (!onPath(cc)) missing.push(`a C compiler (${cc})`);
  if (!onPath('make')) missing.push('make');
  const python = process.env.npm_config_python || process.env.PYTHON || 'python3';
  if (!onPath(python)) missing.push(`Python 3 for node-gyp (${python})`);
  return missing.length ? { why: `missing ${missing.join(', ')}` } : { gyp, nodedir };
}

// Builds in a scratch folder; moves the addon into build/Release only once it
// loads. { ok: true } or { why }.
function buildFromSource(tools) {
  const scratch = fs.mkdtempSync(path.join(addon.root, '.build-'));
  try {
    for (const f of ['binding.gyp', 'src', 'lib']) fs.cpSync(path.join(addon.root, f), path.join(scratch, f), { recursive: true });
    const jobs = String(Math.max(1, Math.min(os.availableParallelism ? os.availableParallelism() : 2, 4)));
    const r = spawnSync(process.execPath, [tools.gyp, 'rebuild', `--nodedir=${tools.nodedir}`, '--jobs', jobs,
      '--loglevel', 'warn'], { cwd: scratch, stdio: ['ignore', 'inherit', 'inherit'] });
    if (r.status !== 0) return { why: `node-gyp failed (exit status ${r.status}; its output is above)` };
    const made = path.join(scratch, 'build', 'Release', 'dlbridge_node.node');
    const err = loadError(made);
    if (err) return { why: `the addon built from source does not load: ${err}` };
    fs.mkdirSync(path.dirname(addon.built), { recursive: true });
    fs.renameSync(made, addon.built);
    return { ok: true };
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

function main() {
  const fromSource = /^(1|true)$/i.test(process.env.npm_config_build_from_source || '');
  const mode = process.env.DLBRIDGE_NODE_INSTALL || (fromSource ? 'source' : 'auto');
  if (!['auto', 'source', 'prebuilt'].includes(mode)) {
    say(`DLBRIDGE_NODE_INSTALL is '${mode}': use auto, source or prebuilt`);
    return 1;
  }
  let sourceWhy = null;
  if (mode !== 'prebuilt') {
    const lib = systemLibrary();
    const tools = lib.version ? sourceTools() : null;
    if (!lib.version) {
      sourceWhy = lib.why;
    } else if (tools.why) {
      sourceWhy = `cannot build against the system's libdlbridge ${lib.version}: ${tools.why}`;
    } else {
      say(`building the addon against the system's libdlbridge ${lib.version} (pkg-config)`);
      const built = buildFromSource(tools);
      if (built.ok) {
        say(`built ${path.relative(addon.root, addon.built)} against the system's libdlbridge ${lib.version}`);
        return 0;
      }
      sourceWhy = `building against the system's libdlbridge ${lib.version} failed: ${built.why}`;
    }
    if (mode === 'source') {
      say(`cannot install from source: ${sourceWhy}`);
      return 1;
    }
  }
  const pre = prebuiltFits();
  if (pre.ok) {
    say(`using the prebuilt addon for linux-x64 with its bundled libdlbridge${sourceWhy ? ` (${sourceWhy})` : ''}`);
    return 0;
  }
  say('cannot install: no addon fits this machine');
  say(`  prebuilt: ${pre.why}`);
  if (sourceWhy) say(`  from source: ${sourceWhy}`);
  say('  install libdlbridge with its dlbridge.pc (and a C compiler, make, Python 3), or use a machine the prebuilt addon fits');
  return 1;
}

process.exitCode = main();
