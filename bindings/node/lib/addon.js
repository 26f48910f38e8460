'use strict';
// Finds the addon of this package, as node-gyp-build does, in this order:
//   1. build/Release/dlbridge_node.node: built here from source by
//      lib/install.js (against the libdlbridge pkg-config found);
//   2. prebuilds/<platform>-<arch>/dlbridge_node.node: the prebuilt addon the
//      package carries, with its libdlbridge beside it (run path $ORIGIN).
// DLBRIDGE_NODE_ADDON names another file. lib/install.js asks this module
// which addons exist and checks the one it selects; index.js loads it.

const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
const built = path.join(root, 'build', 'Release', 'dlbridge_node.node');
const prebuildDir = path.join(root, 'prebuilds', `${process.platform}-${process.arch}`);
const prebuilt = path.join(prebuildDir, 'dlbridge_node.node');

function candidates() {
  if (process.env.DLBRIDGE_NODE_ADDON) return [process.env.DLBRIDGE_NODE_ADDON];
  return [built, prebuilt].filter((f) => fs.existsSync(f));
}

function load() {
  const found = candidates();
  if (found.length === 0) {
    const err = new Error(`dlbridge: no addon in ${root}: neither ${path.relative(root, built)} (built on install) ` +
      `nor ${path.relative(root, prebuilt)} (prebuilt for linux-x64); reinstall the package (npm rebuild dlbridge)`);
    err.code = 'MODULE_NOT_FOUND';
    throw err;
  }
  return require(found[0]);
}

module.exports = { load, candidates, built, prebuilt, prebuildDir, root };
