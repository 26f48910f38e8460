'use strict';
// Prints the compiler or linker flags of libdlbridge for binding.gyp:
//   node lib/gyp-flags.js include   the header folders
//   node lib/gyp-flags.js libs      the linker flags
//   node lib/gyp-flags.js rpath     the run path, as one linker flag
// From DLBRIDGE_INCLUDE_DIR / DLBRIDGE_LIB_DIR when set (a build of the
// repository), else from pkg-config (the installed libdlbridge, dlbridge.pc).
// DLBRIDGE_RPATH replaces the run path (lib/install.js and scripts/node-package
// pass '$ORIGIN' for a prebuilt addon next to its library).

const { execFileSync } = require('node:child_process');

function pkgConfig(...args) {
  try {
    return execFileSync('pkg-config', [...args, 'dlbridge'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
  } catch (e) {
    const why = e.code === 'ENOENT' ? 'pkg-config is not installed' : `pkg-config found no dlbridge.pc (PKG_CONFIG_PATH=${process.env.PKG_CONFIG_PATH || ''})`;
    process.stderr.write(`dlbridge: cannot locate libdlbridge: ${why}; or set DLBRIDGE_INCLUDE_DIR and DLBRIDGE_LIB_DIR\n`);
    process.exit(1);
  }
}

const what = process.argv[2];
const env = process.env;
if (what === 'include') {
  const dirs = env.DLBRIDGE_INCLUDE_DIR ? [env.DLBRIDGE_INCLUDE_DIR]
    : pkgConfig('--cflags-only-I').split(/\s+/).filter(Boolean).map((f) => f.replace(/^-I/, ''));
  console.log(dirs.join(' '));
} else if (what === 'libs') {
  console.log(env.DLBRIDGE_LIB_DIR ? `-L${env.DLBRIDGE_LIB_DIR} -ldlbridge` : pkgConfig('--libs'));
} else if (what === 'rpath') {
  // The folders the linker is given (-L), else pkg-config's libdir. In the
  // Makefile node-gyp writes, $$ is a dollar; the quotes keep the shell from
  // expanding $ORIGIN.
  const dirs = env.DLBRIDGE_RPATH ? [env.DLBRIDGE_RPATH] : env.DLBRIDGE_LIB_DIR ? [env.DLBRIDGE_LIB_DIR]
    : pkgConfig('--libs-only-L').split(/\s+/).filter(Boolean).map((f) => f.replace(/^-L/, ''));
  if (dirs.length === 0) dirs.push(pkgConfig('--variable=libdir'));
  console.log(`'-Wl,-rpath,${dirs.join(':').replace(/\$/g, '$$$$')}'`);
} else {
  process.stderr.write('usage: node lib/gyp-flags.js include|libs|rpath\n');
  process.exit(2);
}
