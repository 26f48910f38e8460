'use strict';
// One export + deleter from Node.js, for bindings/bench/export-ratio, and
// its floor in the same process:
//   export   b.exportVersioned().close() on a 2x3x4x5 float32 buffer (an
//            addon call making a tensor handle, and one running the deleter)
//   external a bare napi_create_external with a finalizer (floor_addon.c),
//            the least N-API asks for one JavaScript object owning memory
//   call     an addon call doing nothing
// Rounds of N after warm-up rounds (for the JIT), each kind in turn; prints
// one line per kind: its name, the median, min and max nanoseconds per
// operation. The package: DLBRIDGE_NODE (an installed package folder); the
// floor addon: DLB_BENCH_FLOOR_ADDON.
//
//   node bench/export.js [N] [export|external|call ...]

const path = require('node:path');

const dlb = require(process.env.DLBRIDGE_NODE || path.join(__dirname, '..'));
const floor = process.env.DLB_BENCH_FLOOR_ADDON ? require(process.env.DLB_BENCH_FLOOR_ADDON) : null;

const n = Number(process.argv[2] || 1000000);
const kinds = process.argv.length > 3 ? process.argv.slice(3) : floor ? ['export', 'external', 'call'] : ['export'];
const rounds = 7;
const warmup = 3;
const b = dlb.DlbBuffer.alloc('float32', [2, 3, 4, 5]);
const loops = {
  export() { for (let i = 0; i < n; i++) b.exportVersioned().close(); },
  external() { for (let i = 0; i < n; i++) floor.external(); },
  call() { for (let i = 0; i < n; i++) floor.call(); },
};
const per = Object.fromEntries(kinds.map((k) => [k, []]));
for (let r = -warmup; r < rounds; r++) {
  for (const k of kinds) {
    const t0 = process.hrtime.bigint();
    loops[k]();
    if (r >= 0) per[k].push(Number(process.hrtime.bigint() - t0) / n);
  }
}
for (const k of kinds) {
  const v = per[k].sort((x, y) => x - y);
  console.log(`${k} ${v[rounds >> 1].toFixed(1)} ${v[0].toFixed(1)} ${v[rounds - 1].toFixed(1)}`);
}
b.close();
process.exitCode = dlb.liveExports() === 0 ? 0 : 1;
