'use strict';
// One export + deleter from Node.js, for bindings/bench/export-ratio:
// b.exportVersioned().close() (an addon call making a tensor handle, and
// one running the deleter) on a 2x3x4x5 float32 buffer. Rounds of N after
// warm-up rounds (for the JIT); prints the median, min and max nanoseconds
// per export + deleter. The package: DLBRIDGE_NODE (a built package folder).

const dlb = require(process.env.DLBRIDGE_NODE || require('node:path').join(__dirname, '..'));

const n = Number(process.argv[2] || 1000000);
const rounds = 7;
const warmup = 3;
const b = dlb.Buffer.alloc('float32', [2, 3, 4, 5]);
const per = [];
for (let r = -warmup; r < rounds; r++) {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) b.exportVersioned().close();
  if (r >= 0) per.push(Number(process.hrtime.bigint() - t0) / n);
}
per.sort((x, y) => x - y);
console.log(`ns ${per[rounds >> 1].toFixed(1)} ${per[0].toFixed(1)} ${per[rounds - 1].toFixed(1)}`);
b.close();
process.exitCode = dlb.liveExports() === 0 ? 0 : 1;
