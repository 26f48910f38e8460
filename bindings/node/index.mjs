// The ES module face of the package: the same objects as require('dlbridge'),
// each a named export (import * as dlb from 'dlbridge' sees them all).
import { createRequire } from 'node:module';

const dlb = createRequire(import.meta.url)('./index.js');

export const {
  DlbBuffer, ManagedTensor, DlbError, codes, statuses, version, liveExports, keptArrayBuffers,
} = dlb;
export default dlb;
