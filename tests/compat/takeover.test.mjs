// A kill -9 during a detached approval, with the real client: the instance
// that takes the turn over replays the model's recorded answers instead of
// asking it again, so the transfer the killed instance made is not made a
// second time, though the model (run.sh's takeover servers) gives every
// tool request a new ref at each call, as most providers do.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { remoteAgent } from 'genkit/beta/client';

import { sleep, textOf, toolResponses } from './helpers.mjs';

const A = process.env.HOLDPOINT_TAKEOVER_A_URL;
const B = process.env.HOLDPOINT_TAKEOVER_B_URL;
const pidA = Number(process.env.HOLDPOINT_TAKEOVER_A_PID);
const ledger = process.env.HOLDPOINT_TAKEOVER_LEDGER;

/** The transfers the demo model's tool executed, on either instance. */
function transfers() {
  let text = '';
  try {
    text = readFileSync(ledger, 'utf8');
  } catch (err) {
    if (err.code !== 'ENOENT') throw err;
  }
  return text.split('\n').filter(Boolean).map((line) => JSON.parse(line));
}

/** Whether A's journal records the session's transfer as done. */
async function journaled(sessionId) {
  const got = await fetch(`${A}/api/v1/sessions/${encodeURIComponent(sessionId)}/tool-calls`);
  assert.equal(got.status, 200);
  const { items } = await got.json();
  return items.some((c) => c.tool === 'transferMoney' && c.status === 'succeeded');
}

/** Waits (bounded) until check() answers a value, and returns it. */
async function until(what, ms, check) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`no ${what} within ${ms} ms`);
    await sleep(100);
  }
}

test('a detached approval whose instance is killed after the transfer moves the money once', { skip: !A && 'run.sh starts the takeover servers' }, async () => {
  const onA = remoteAgent({ url: `${A}/api/agents/bankingAgent` });
  const onB = remoteAgent({ url: `${B}/api/agents/bankingAgent` });
  const chat = onA.chat();
  const res = await chat.send('Transfer $50 to account 24680');
  assert.equal(res.finishReason, 'interrupted');
  const [approval] = res.interrupts;
  const task = await chat.detach({ resume: { respond: [approval.respond({ approved: true })] } });
  assert.ok(task.snapshotId);

  // A runs the transfer and journals it, then its model waits 3 s: A dies
  // there. Killed between the transfer and its journal, A would leave the
  // call unknown (it may have run), and B rightly fails the turn instead
  // of moving the money again: the kill waits for the journal.
  const [moved] = await until('transfer on A', 60_000, () => (transfers().length > 0 ? transfers() : null));
  await until('the transfer journaled on A', 60_000, () => journaled(res.sessionId));
  assert.equal(moved.pid, pidA, 'A executed the transfer');
  process.kill(pidA, 'SIGKILL');

  const done = await until('completed snapshot on B', 120_000, async () => {
    const snap = await onB.getSnapshot(task.snapshotId);
    assert.ok(['pending', 'completed'].includes(snap.status), `the taken-over turn is ${snap.status}`);
    return snap.status === 'completed' ? snap : null;
  });
  assert.deepEqual(transfers().map((t) => t.pid), [pidA], 'the money moved once, on A');
  const messages = done.state.messages;
  assert.equal(toolResponses(messages, 'transferMoney').length, 1);
  assert.match(textOf(messages, 'model'), /Done: transferred \$50\.00 to account 24680/);
});
