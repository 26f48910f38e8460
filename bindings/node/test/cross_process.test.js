'use strict';
// Tickets between this process and a Python process (the build's dlbridge
// package, DLB_TEST_PYTHONPATH; /usr/bin/python3 or DLB_TEST_PYTHON): each
// side maps the other's memory without a copy, writes into it, and the
// other sees the write. Each ticket is opened once.

const assert = require('node:assert/strict');
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');
const { test } = require('node:test');
const { dlb, settle } = require('./common');

function python(code, args = []) {
  const pythonpath = process.env.DLB_TEST_PYTHONPATH;
  assert.ok(pythonpath, 'DLB_TEST_PYTHONPATH must name the build\'s Python package (scripts/test.d/59-node.sh)');
  return spawn(process.env.DLB_TEST_PYTHON || '/usr/bin/python3', ['-c', code, ...args], {
    env: { ...process.env, PYTHONPATH: pythonpath, PYTHONDONTWRITEBYTECODE: '1' },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
}

function exited(child) {
  return new Promise((resolve) => child.on('close', (code) => resolve(code)));
}

// The receiver opens the ticket as unpickling a multiprocessing pickle does
// (dlb_share_ticket_open), checks that numpy's DLPack view is the mapping
// itself, and writes through ctypes at that address.
const RECEIVER = `
import ctypes, sys, numpy as np, dlbridge
t = dlbridge._share._rebuild(bytes.fromhex(sys.argv[1]))
assert t.shape == (4,), t.shape
assert np.from_dlpack(t).ctypes.data == t.data_ptr
a = np.ctypeslib.as_array((ctypes.c_float * 4).from_address(t.data_ptr))
assert a.tolist() == [1.0, 2.0, 3.0, 4.0], a
a *= -1
print('ok')
`;

test('a ticket to a Python process, which writes back', async () => {
  const b = dlb.DlbBuffer.allocShared('float32', [4]);
  const x = b.typedArray();
  x.set([1, 2, 3, 4]);
  const child = python(RECEIVER, [b.issueTicket().toString('hex')]);
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  assert.equal(await exited(child), 0, out);
  assert.equal(out.trim(), 'ok');
  assert.deepEqual(Array.from(x), [-1, -2, -3, -4], 'JavaScript sees Python\'s write');
  b.close();
});

// The producer: a shared tensor 0..7, the ticket its multiprocessing reducer
// pickles, on stdout; after "done", the values it sees now.
const PRODUCER = `
import sys, numpy as np, dlbridge
t = dlbridge.share(np.arange(8, dtype=np.float32))
rebuild, (ticket,) = dlbridge._share._reduce(t)
print(ticket.hex(), flush=True)
sys.stdin.readline()
print(' '.join(str(x) for x in np.from_dlpack(t).tolist()), flush=True)
`;

test('a ticket from a Python process, written here', async () => {
  const child = python(PRODUCER);
  const status = exited(child);
  const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const ticket = (await lines.next()).value;
  const b = await dlb.DlbBuffer.openTicket(Buffer.from(ticket.trim(), 'hex'));
  assert.deepEqual(b.shape, [8]);
  assert.equal(b.dtype, 'float32');
  const x = b.typedArray();
  assert.deepEqual(Array.from(x), [0, 1, 2, 3, 4, 5, 6, 7], 'Python\'s values');
  for (let i = 0; i < 8; i++) x[i] = 10 * i;
  b.close();
  child.stdin.end('done\n');
  assert.equal((await lines.next()).value, '0.0 10.0 20.0 30.0 40.0 50.0 60.0 70.0', 'Python sees the writes');
  assert.equal(await status, 0);
});

test('openTicket waits for its issuer off the event loop', async () => {
  const child = python(PRODUCER);
  const status = exited(child);
  const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const ticket = Buffer.from((await lines.next()).value.trim(), 'hex');
  // The issuer stopped: its ticket server cannot answer until it resumes.
  // kill() returns before every thread of the child has stopped: wait until
  // the kernel says it is stopped (state T), or the open may be answered.
  child.kill('SIGSTOP');
  const state = () => fs.readFileSync(`/proc/${child.pid}/stat`, 'utf8').replace(/^.*\) /s, '')[0];
  for (let i = 0; i < 500 && state() !== 'T'; i++) await new Promise((resolve) => setTimeout(resolve, 10));
  let settled = false;
  let opening;
  try {
    assert.equal(state(), 'T', 'the issuer stopped');
    opening = dlb.DlbBuffer.openTicket(ticket).finally(() => { settled = true; });
    let ticks = 0;
    const timer = setInterval(() => { ticks++; }, 10);
    await new Promise((resolve) => setTimeout(resolve, 600));
    clearInterval(timer);
    assert.ok(ticks >= 5, `the event loop ran on while the open waited (${ticks} ticks)`);
    assert.equal(settled, false, 'the open is still waiting for the stopped issuer');
  } catch (e) {
    child.kill('SIGKILL'); // never leave a stopped child behind a failure
    throw e;
  }
  child.kill('SIGCONT');
  const b = await opening;
  assert.deepEqual(Array.from(b.typedArray()), [0, 1, 2, 3, 4, 5, 6, 7], 'the issuer\'s memory, once it answered');
  b.typedArray()[0] = -1;
  b.close();
  child.stdin.end('done\n');
  assert.equal((await lines.next()).value, '-1.0 1.0 2.0 3.0 4.0 5.0 6.0 7.0');
  assert.equal(await status, 0);
  await assert.rejects(dlb.DlbBuffer.openTicket(ticket), (e) => e instanceof dlb.DlbError &&
    e.code === dlb.codes.DLB_ERR_DELETED, 'opened already (and its issuer is gone)');
});

// Another user's process may not open this process's ticket. Needs root (to
// start the receiver as nobody with setpriv) and a package nobody can read.
test('a ticket refused to a process of another user', async (t) => {
  const setpriv = ['/usr/bin/setpriv', '/bin/setpriv'].find((f) => fs.existsSync(f));
  if (process.getuid() !== 0 || !setpriv) return t.skip('needs root and setpriv');
  const pkg = path.dirname(require.resolve(process.env.DLBRIDGE_NODE || path.join(__dirname, '..')));
  const b = dlb.DlbBuffer.allocShared('float32', [4]);
  const ticket = b.issueTicket();
  const script = `
    const dlb = require(${JSON.stringify(pkg)});
    console.log('loaded');
    dlb.DlbBuffer.openTicket(Buffer.from(process.argv[1], 'hex')).then(
      () => console.log('opened'), (e) => console.log('refused', e.code, e.message));`;
  const r = spawnSync(setpriv, ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, '-e', script,
    ticket.toString('hex')], { encoding: 'utf8', cwd: '/' });
  if (!/^loaded/.test(r.stdout)) return t.skip(`the package is not readable by nobody: ${r.stderr.split('\n')[0]}`);
  assert.match(r.stdout, /^refused DLB_ERR_INVALID_ARGUMENT .*permission denied/m, r.stdout + r.stderr);
  const mine = await dlb.DlbBuffer.openTicket(ticket); // still this user's to open
  assert.deepEqual(mine.shape, [4]);
  mine.close();
  b.close();
});

test('nothing left', async () => {
  await settle(() => dlb.liveExports() === 0);
  assert.equal(dlb.liveExports(), 0);
});
