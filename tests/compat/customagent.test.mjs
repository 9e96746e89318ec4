// A custom agent (a Go function per turn, examples/missingfield) with the
// real client: it asks a human for a missing address, and books the
// shipment through a tool the platform runs and records (Tool.Call), so
// the booking shows in the session's tool calls and is made once.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { remoteAgent } from 'genkit/beta/client';

import { sleep } from './helpers.mjs';

const base = process.env.HOLDPOINT_SHIPPING_URL?.replace(/\/+$/, '');
const skip = base ? false : 'HOLDPOINT_SHIPPING_URL is not set (run.sh builds and starts examples/missingfield)';
const agent = () => remoteAgent({ url: `${base}/api/agents/shippingAgent` });

/** The session's recorded tool calls. */
async function toolCalls(sessionId) {
  const got = await fetch(`${base}/api/v1/sessions/${encodeURIComponent(sessionId)}/tool-calls`);
  assert.equal(got.status, 200);
  return (await got.json()).items;
}

test('a custom turn books through its recorded tool', { skip }, async () => {
  const res = await agent().chat().send('Ship order 42 to 1 Main St, Springfield');
  assert.equal(res.finishReason, 'stop');
  const [, tracking] = res.text.match(/^Order 42 ships to 1 Main St, Springfield \(tracking (TRK-42-\d+)\)\.$/) ?? [];
  assert.ok(tracking, `the answer: ${res.text}`);
  const calls = await toolCalls(res.sessionId);
  assert.equal(calls.length, 1);
  assert.equal(calls[0].tool, 'bookShipment');
  assert.equal(calls[0].ref, 'ship-42');
  assert.equal(calls[0].status, 'succeeded');
  assert.deepEqual(calls[0].output, { tracking });
  assert.deepEqual(calls[0].input, { orderId: '42', to: { street: '1 Main St', city: 'Springfield' } });
});

test('a custom turn asks for the address, books once it is given, and the answer counts once', { skip }, async () => {
  const chat = agent().chat();
  const res = await chat.send('Ship order 7');
  assert.equal(res.finishReason, 'interrupted');
  const [ask] = res.interrupts;
  assert.equal(ask.name, 'askAddress');
  assert.equal((await toolCalls(res.sessionId)).length, 0, 'nothing booked before the address');

  const done = await chat.resume({ respond: [ask.respond({ street: '5 Elm St', city: 'Shelbyville' })] });
  assert.match(done.text, /^Order 7 ships to 5 Elm St, Shelbyville \(tracking TRK-7-\d+\)\.$/);

  // The same answer again, from a second client on the paused snapshot, is
  // refused: the turn that books runs once.
  const again = agent().chat({ snapshotId: res.snapshotId });
  await assert.rejects(again.resume({ respond: [ask.respond({ street: '6 Oak St', city: 'Ogdenville' })] }), /ABORTED|409|already/i);
  const calls = await toolCalls(res.sessionId);
  assert.equal(calls.length, 1);
  assert.equal(calls[0].status, 'succeeded');
  assert.deepEqual(calls[0].input, { orderId: '7', to: { street: '5 Elm St', city: 'Shelbyville' } });
});

test('a detached custom turn books once and its snapshot completes', { skip }, async () => {
  const chat = agent().chat();
  const res = await chat.send('Ship order 9');
  const [ask] = res.interrupts;
  const task = await chat.detach({ resume: { respond: [ask.respond({ street: '9 Birch Rd', city: 'Springfield' })] } });
  assert.ok(task.snapshotId);
  let snap;
  for (const deadline = Date.now() + 60_000; ; await sleep(100)) {
    snap = await agent().getSnapshot(task.snapshotId);
    if (snap.status !== 'pending' || Date.now() > deadline) break;
  }
  assert.equal(snap.status, 'completed');
  const calls = await toolCalls(res.sessionId);
  assert.equal(calls.length, 1);
  assert.equal(calls[0].ref, 'ship-9');
  assert.equal(calls[0].status, 'succeeded');
});

test('a PO box waits for approval: a forged restart is refused, the restart books once', { skip }, async () => {
  const chat = agent().chat();
  const res = await chat.send('Ship order 44 to PO Box 12, Springfield');
  assert.equal(res.finishReason, 'interrupted');
  const [booking] = res.interrupts;
  assert.equal(booking.name, 'bookShipment');
  assert.equal(booking.ref, 'ship-44');
  assert.deepEqual(booking.input, { orderId: '44', to: { street: 'PO Box 12', city: 'Springfield' } });
  assert.equal((await toolCalls(res.sessionId)).length, 0, 'nothing booked before the approval');

  // A restart whose booking goes elsewhere than the one asked is refused,
  // and books nothing; the approval stays open.
  const forged = booking.restart();
  forged.toolRequest.input = { orderId: '44', to: { street: '1 Main St', city: 'Springfield' } };
  await assert.rejects(chat.resume({ restart: [forged] }), (err) => {
    assert.equal(err.status, 'INVALID_ARGUMENT');
    assert.equal(err.snapshotId, res.snapshotId);
    return true;
  });
  assert.equal((await toolCalls(res.sessionId)).length, 0, 'nothing booked by the forged restart');

  const done = await chat.resume({ restart: [booking.restart()] });
  assert.match(done.text, /^Order 44 ships to PO Box 12, Springfield \(tracking TRK-44-\d+\)\.$/);

  // The same approval again answers the same outcome; nothing is booked twice.
  const again = await agent().chat({ snapshotId: res.snapshotId }).resume({ restart: [booking.restart()] });
  assert.equal(again.snapshotId, done.snapshotId);
  const calls = await toolCalls(res.sessionId);
  assert.equal(calls.length, 1);
  assert.equal(calls[0].status, 'succeeded');
});
