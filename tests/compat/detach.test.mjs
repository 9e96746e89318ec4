// Detached (background) turns with the real client: detach(), wait(), abort().
// "Prepare my yearly statement" makes the demo model stream for about 4 s.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { AgentError } from 'genkit/beta/client';

import { bankingAgent, sleep, textOf } from './helpers.mjs';

const SLOW = 'Prepare my yearly statement';

test('detach() returns a pending snapshot at once and wait() sees it complete', async () => {
  const agent = bankingAgent();
  const chat = agent.chat();
  const task = await chat.detach(SLOW);
  assert.ok(task.snapshotId);
  assert.equal(chat.snapshotId, task.snapshotId);

  const early = await agent.getSnapshot(task.snapshotId);
  assert.equal(early.status, 'pending', 'the detached turn is still running');

  const done = await task.wait({ intervalMs: 200 });
  assert.equal(done.snapshotId, task.snapshotId);
  assert.equal(done.status, 'completed');
  const answer = textOf(done.state.messages, 'model');
  assert.match(answer, /Your yearly statement is ready/);

  // The chat continues from the completed background turn.
  const next = await chat.send('Thanks!');
  assert.equal(next.finishReason, 'stop');
  const snap = await agent.getSnapshot(next.snapshotId);
  assert.equal(snap.parentId, task.snapshotId);
});

test('abort() stops a detached turn and the snapshot stays aborted', async () => {
  const agent = bankingAgent();
  const chat = agent.chat();
  const task = await chat.detach(SLOW);
  await sleep(300);

  const before = await task.abort();
  assert.equal(before, 'pending', 'abort reports the status before the abort');
  const aborted = await task.wait({ intervalMs: 100 });
  assert.equal(aborted.status, 'aborted');

  // Past the time the statement would have taken, nothing overwrote the abort.
  await sleep(4500);
  const later = await agent.getSnapshot(task.snapshotId);
  assert.equal(later.status, 'aborted');
  assert.doesNotMatch(textOf(later.state?.messages, 'model'), /Your yearly statement is ready/);

  // Aborting a terminal snapshot changes nothing and reports its status.
  assert.equal(await chat.abort(), 'aborted');
  assert.equal(await agent.abort(task.snapshotId), 'aborted');

  // An aborted snapshot is kept for inspection but cannot be continued.
  await assert.rejects(chat.send('Hello again'), (err) => err instanceof AgentError);
});

test('abort of a completed snapshot reports completed and changes nothing', async () => {
  const agent = bankingAgent();
  const res = await agent.chat().send('Hello');
  assert.equal(await agent.abort(res.snapshotId), 'completed');
  const snap = await agent.getSnapshot(res.snapshotId);
  assert.equal(snap.status, 'completed');
});
