// Protocol fidelity with the real client: what the reference runtime does,
// the server does too.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { AgentError } from 'genkit/beta/client';

import { account, BANKING_URL, bankingAgent, post } from './helpers.mjs';

test('an empty resume on a paused session fails with INVALID_ARGUMENT naming the open request', async () => {
  const chat = bankingAgent().chat();
  const to = account();
  const res = await chat.send(`Transfer $25 to account ${to}`);
  assert.equal(res.finishReason, 'interrupted');
  const [approval] = res.interrupts;
  const name = 'userApproval';

  for (const resume of [{}, { respond: [] }, { respond: [], restart: [] }]) {
    await assert.rejects(chat.resume(resume), (err) => {
      assert.ok(err instanceof AgentError, `want an AgentError, got ${err}`);
      assert.equal(err.status, 'INVALID_ARGUMENT', JSON.stringify(resume));
      assert.match(err.message, new RegExp(`'${name}`));
      assert.equal(err.snapshotId, res.snapshotId);
      return true;
    });
  }

  // An input with neither message nor resume, as curl would send it.
  const raw = await post(BANKING_URL, { data: {}, init: { snapshotId: res.snapshotId } });
  assert.equal(raw.status, 200, JSON.stringify(raw.body));
  assert.equal(raw.body.result.finishReason, 'failed', JSON.stringify(raw.body));
  assert.equal(raw.body.result.error.status, 'INVALID_ARGUMENT');
  assert.match(raw.body.result.error.message, new RegExp(`'${name}`));

  // None of them consumed the approval: the real answer goes through.
  const done = await chat.resume({ respond: [approval.respond({ approved: true })] });
  assert.match(done.text, new RegExp(`^Done: transferred \\$25\\.00 to account ${to}`));
});

test('an input with neither message nor resume on a new session fails with INVALID_ARGUMENT and stores nothing', async () => {
  const raw = await post(BANKING_URL, { data: {} });
  assert.equal(raw.status, 200, JSON.stringify(raw.body));
  assert.equal(raw.body.result.finishReason, 'failed', JSON.stringify(raw.body));
  assert.equal(raw.body.result.error.status, 'INVALID_ARGUMENT');
  assert.match(raw.body.result.error.message, /neither a message nor a resume/);
  assert.equal(raw.body.result.snapshotId, undefined, 'no snapshot is written for it');
});
