// A typed consumer of the package, checked by `tsc --noEmit --strict`
// (scripts/test.d/59-node.sh, with tsconfig.json beside it) against the
// declarations of the installed package (index.d.ts, through package.json
// "exports"), and run after compiling.
import * as dlb from 'dlbridge';
import { DlbBuffer, DlbError, codes, type StatusName } from 'dlbridge';

const x = new Float32Array([1, 2, 3, 4, 5, 6]);
const buf: DlbBuffer = DlbBuffer.wrap(x, 'float32', [2, 3]);
const shape: number[] = buf.shape;
const t: dlb.ManagedTensor = buf.exportVersioned({ copy: 'never' });
const address: bigint = t.address;
const back = DlbBuffer.fromTensor(t);
const view = back.typedArray();
if (!(view instanceof Float32Array)) throw new Error('a float32 buffer has a Float32Array');
view[5] = 60;
back.close();

function codeOf(e: unknown): StatusName | undefined {
  return e instanceof DlbError ? e.code : undefined;
}

buf.delete();
let code: StatusName | undefined;
try {
  buf.exportVersioned();
} catch (e) {
  code = codeOf(e);
}
buf.close();
const deleted: number = dlb.statuses.DLB_ERR_DELETED;
const live: number = dlb.liveExports();

async function viaTicket(): Promise<number> {
  const shared = DlbBuffer.allocShared('float64', [2]);
  const ticket: Buffer = shared.issueTicket();
  shared.close();
  const opened: DlbBuffer = await DlbBuffer.openTicket(ticket);
  const n = opened.nbytes;
  opened.close();
  return n;
}

viaTicket().then((n) => {
  console.log(shape, address > 0n, x[5], code === codes.DLB_ERR_DELETED, deleted, live, n, dlb.version);
});
