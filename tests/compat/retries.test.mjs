// Retries with the real client: the same resume sent again (its first
// answer lost) gets the original outcome, never a second run.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { account, bankingAgent, toolResponses } from './helpers.mjs';

test('repeating the same resume returns the original outcome', async () => {
  const agent = bankingAgent();
  const res = await agent.chat().send(`Transfer $20 to account ${account()}`);
  const [approval] = res.interrupts;
  const resume = () =>
    agent.chat({ snapshotId: res.snapshotId }).resume({ respond: [approval.respond({ approved: true })] });
  const first = await resume(); // the answer the client lost
  const again = await resume();
  assert.equal(again.finishReason, 'stop');
  assert.equal(again.snapshotId, first.snapshotId);
  assert.equal(again.text, first.text);
  const latest = await agent.getSnapshot({ sessionId: res.sessionId });
  assert.equal(latest.snapshotId, first.snapshotId);
  assert.equal(toolResponses(latest.state.messages, 'transferMoney').length, 1, 'the transfer ran once');
});
