// The Genkit guide's flows, word for word where they can be, against the
// guide's banking agent written in Go as a user's own program
// (examples/banking built outside this module; run.sh starts it).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { remoteAgent } from 'genkit/beta/client';

import { textOf, toolResponses } from './helpers.mjs';

const seedURL = process.env.HOLDPOINT_SEED_URL?.replace(/\/+$/, '');
const skip = seedURL ? false : 'HOLDPOINT_SEED_URL is not set (run.sh builds and starts the program)';
const agent = () => remoteAgent({ url: `${seedURL}/api/agents/bankingAgent` });

test('send, interrupt, approve, answer', { skip }, async () => {
  const chat = agent().chat();
  let res = await chat.send('Transfer $500 to my savings account.');
  const approval = res.interrupts.find((i) => i.name === 'userApproval');
  assert.ok(approval, 'the turn paused on userApproval');
  assert.deepEqual(approval.input, { action: 'transferMoney', details: 'Transfer $500.00 to your savings account' });
  res = await chat.resume({ respond: [approval.respond({ approved: true, feedback: 'Looks good' })] });
  assert.equal(res.interrupts.length, 0);
  assert.match(res.text, /^Done: transferred \$500\.00 to your savings account \(transaction txn-[A-Za-z0-9]+\)\.$/);
  const snap = await agent().getSnapshot(res.snapshotId);
  assert.equal(toolResponses(snap.state.messages, 'transferMoney').length, 1);
});

test('deny: the transfer is not executed', { skip }, async () => {
  const chat = agent().chat();
  const res = await chat.send('Transfer $500 to savings.');
  const [pending] = res.interrupts;
  const final = await chat.resume({ respond: [pending.respond({ approved: false, feedback: 'not now' })] });
  assert.match(final.text, /^Cancelled: the transfer of \$500\.00 to your savings account was not executed\. Your feedback: "not now"\.$/);
  const snap = await agent().getSnapshot(final.snapshotId);
  assert.equal(toolResponses(snap.state.messages, 'transferMoney').length, 0);
});

test('resumeStream: chunks, then the final response', { skip }, async () => {
  const chat = agent().chat();
  const res = await chat.send('Transfer $500 to savings.');
  const pending = res.interrupts.find((i) => i.name === 'userApproval');
  const turn = chat.resumeStream({ respond: [pending.respond({ approved: true, feedback: 'ok' })] });
  let streamed = '';
  const toolChunks = [];
  for await (const chunk of turn.stream) {
    streamed += chunk.text ?? '';
    toolChunks.push(...chunk.toolRequests);
  }
  const final = await turn.response;
  assert.equal(final.interrupts.length, 0, 'the agent did not pause again');
  assert.match(streamed, /Done: transferred \$500\.00/);
  assert.ok(toolChunks.some((p) => p.toolRequest.name === 'transferMoney'), 'the transferMoney request streamed');
  assert.match(textOf(final.messages, 'model'), /Done: transferred/);
});

test('several approvals resumed at once, mixing respond and restart', { skip }, async () => {
  const chat = agent().chat();
  let res = await chat.send('Send $5 to Alice and $6 to Bob');
  const [a, b] = res.interrupts;
  res = await chat.resume({ respond: [a.respond({ approved: true })], restart: [b.restart()] });
  // The restarted approval is asked again; loop until nothing is pending.
  while (res.interrupts.length > 0) {
    res = await chat.resume({ respond: res.interrupts.map((i) => i.respond({ approved: true })) });
  }
  assert.equal((res.text.match(/Done: transferred/g) ?? []).length, 2);
});
