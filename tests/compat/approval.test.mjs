// Approvals with the real client: send -> res.interrupts -> respond / restart.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { restartTool } from 'genkit/beta';
import { AgentError } from 'genkit/beta/client';

import {
  account,
  bankingAgent,
  textOf,
  toolRequests,
  toolResponses,
} from './helpers.mjs';

test('send, interrupt, resume with an approval executes the transfer', async () => {
  const agent = bankingAgent();
  const chat = agent.chat();

  const res = await chat.send('Transfer $50 to account 12345');
  assert.equal(res.finishReason, 'interrupted');
  assert.ok(res.snapshotId, 'a server-managed agent returns a snapshotId');
  assert.ok(res.sessionId, 'the output names the session');
  assert.equal(chat.snapshotId, res.snapshotId);
  assert.equal(res.interrupts.length, 1);
  const [approval] = res.interrupts;
  assert.equal(approval.name, 'userApproval');
  assert.ok(approval.ref, 'the interrupt has a ref');
  assert.deepEqual(approval.input, {
    action: 'transferMoney',
    details: 'Transfer $50.00 to account 12345',
  });

  const done = await chat.resume({
    respond: [approval.respond({ approved: true })],
  });
  assert.equal(done.finishReason, 'stop');
  assert.match(
    done.text,
    /^Done: transferred \$50\.00 to account 12345 \(transaction tx-[0-9a-f]+\)\.$/
  );
  assert.equal(done.interrupts.length, 0);
  assert.notEqual(done.snapshotId, res.snapshotId);
  assert.equal(done.sessionId, res.sessionId);

  // The stored history: the approval request is resolved, the transfer ran once.
  const snap = await agent.getSnapshot(done.snapshotId);
  const messages = snap.state.messages;
  const [approvalRequest] = toolRequests(messages, 'userApproval');
  assert.ok(approvalRequest, 'the approval request is in the history');
  assert.ok(
    !approvalRequest.metadata?.interrupt,
    'a resolved request no longer carries metadata.interrupt'
  );
  assert.ok(
    approvalRequest.metadata && 'resolvedInterrupt' in approvalRequest.metadata,
    'a resolved request carries metadata.resolvedInterrupt'
  );
  assert.deepEqual(toolResponses(messages, 'userApproval')[0].toolResponse.output, {
    approved: true,
  });
  const transfers = toolResponses(messages, 'transferMoney');
  assert.equal(transfers.length, 1);
  assert.equal(transfers[0].toolResponse.output.success, true);
  assert.match(done.text, new RegExp(transfers[0].toolResponse.output.transactionId));
});

test('sendStream streams text, the tool request and turnEnd', async () => {
  const chat = bankingAgent().chat();
  const turn = chat.sendStream('Transfer $50 to account 12345');
  const chunks = [];
  for await (const chunk of turn.stream) chunks.push(chunk);
  const res = await turn.response;

  assert.equal(res.finishReason, 'interrupted');
  const textChunks = chunks.filter((c) => c.text);
  assert.ok(textChunks.length >= 2, `text arrives in several chunks, got ${textChunks.length}`);
  assert.equal(textChunks.map((c) => c.text).join(''), res.text);
  assert.ok(
    chunks.some(
      (c) =>
        c.raw.modelChunk?.role === 'tool' &&
        c.toolRequests.some((p) => p.toolRequest.name === 'userApproval' && p.metadata?.interrupt)
    ),
    'the interrupted request is streamed as a tool-role chunk'
  );
  assert.ok(
    chunks.some((c) => c.raw.turnEnd?.snapshotId === res.snapshotId),
    'a turnEnd chunk names the snapshot'
  );
  assert.equal(res.interrupts[0].name, 'userApproval');
});

test('resumeStream streams the confirmation, then resolves the response', async () => {
  const chat = bankingAgent().chat();
  const to = account();
  const res = await chat.send(`Transfer $120 to account ${to}`);
  const [approval] = res.interrupts;
  assert.equal(approval.name, 'userApproval');

  const turn = chat.resumeStream({
    respond: [approval.respond({ approved: true })],
  });
  const chunks = [];
  for await (const chunk of turn.stream) chunks.push(chunk);
  const done = await turn.response;

  assert.equal(done.finishReason, 'stop');
  assert.match(done.text, new RegExp(`^Done: transferred \\$120\\.00 to account ${to} \\(transaction tx-`));
  const streamed = chunks.map((c) => c.text).join('');
  assert.ok(
    streamed.includes(done.text),
    `the streamed text ${JSON.stringify(streamed)} contains the answer`
  );
  assert.ok(chunks.filter((c) => c.text).length >= 2, 'the answer is streamed in several chunks');
  assert.ok(
    chunks.some((c) => c.toolRequests.some((p) => p.toolRequest.name === 'transferMoney')),
    'the transferMoney request is streamed'
  );
  assert.ok(chunks.some((c) => c.raw.turnEnd?.snapshotId === done.snapshotId));
});

test('a denied approval cancels and does not transfer', async () => {
  const agent = bankingAgent();
  const chat = agent.chat();
  const to = account();
  const res = await chat.send(`Transfer $50 to account ${to}`);
  const [approval] = res.interrupts;

  const done = await chat.resume({
    respond: [approval.respond({ approved: false, feedback: 'wrong account' })],
  });
  assert.equal(done.finishReason, 'stop');
  assert.match(done.text, /^Cancelled/);
  assert.match(done.text, /wrong account/);
  assert.equal(done.toolRequests.length, 0);

  const snap = await agent.getSnapshot(done.snapshotId);
  assert.equal(snap.status, 'completed');
  assert.equal(toolRequests(snap.state.messages, 'transferMoney').length, 0);
  assert.equal(toolResponses(snap.state.messages, 'transferMoney').length, 0);
  assert.doesNotMatch(textOf(snap.state.messages, 'model'), /Done: transferred/);
});

test('restart(): a transfer over the limit runs after a second confirmation', async () => {
  const agent = bankingAgent();
  const chat = agent.chat();
  const to = account();
  const res = await chat.send(`Transfer $25,000 to account ${to}`);
  const [approval] = res.interrupts;
  assert.equal(approval.input.details, `Transfer $25,000.00 to account ${to}`);

  const limited = await chat.resume({
    respond: [approval.respond({ approved: true })],
  });
  assert.equal(limited.finishReason, 'interrupted');
  assert.equal(limited.interrupts.length, 1);
  const [transfer] = limited.interrupts;
  assert.equal(transfer.name, 'transferMoney');
  assert.deepEqual(transfer.input, { amount: 25000, toAccount: to });
  const request = limited.toolRequests.find((p) => p.toolRequest.name === 'transferMoney');
  assert.deepEqual(request.metadata.interrupt, { reason: 'over daily limit', limit: 10000 });

  // A restart without `resumed` metadata reaches the tool without it (as in
  // Genkit), and the tool asks again; restartTool, the way Genkit restarts
  // a tool, sends it: the confirmation the tool waits for.
  const again = await chat.resume({ restart: [transfer.restart()] });
  assert.equal(again.finishReason, 'interrupted');
  assert.equal(again.interrupts[0].name, 'transferMoney');
  const repeated = again.toolRequests.find((p) => p.toolRequest.name === 'transferMoney');
  const done = await chat.resume({ restart: [restartTool(repeated, { confirmed: true })] });
  assert.equal(done.finishReason, 'stop');
  assert.match(
    done.text,
    new RegExp(`^Done: transferred \\$25,000\\.00 to account ${to} \\(transaction tx-[0-9a-f]+\\)\\.$`)
  );

  const snap = await agent.getSnapshot(done.snapshotId);
  const outputs = toolResponses(snap.state.messages, 'transferMoney');
  assert.equal(outputs.length, 1, 'the restarted transfer ran exactly once');
  assert.equal(outputs[0].toolResponse.output.success, true);
});

test('a restart with a changed input is rejected', async () => {
  const chat = bankingAgent().chat();
  const to = account();
  const res = await chat.send(`Transfer $20,000 to account ${to}`);
  const limited = await chat.resume({
    respond: [res.interrupts[0].respond({ approved: true })],
  });
  const [transfer] = limited.interrupts;
  const forged = transfer.restart();
  forged.toolRequest.input = { amount: 20000, toAccount: '666' };
  // A failed turn is not an HTTP error: the client throws an AgentError
  // carrying the status and the last good snapshot.
  await assert.rejects(chat.resume({ restart: [forged] }), (err) => {
    assert.ok(err instanceof AgentError, `want an AgentError, got ${err}`);
    assert.equal(err.status, 'INVALID_ARGUMENT');
    assert.match(err.message, /modified inputs/);
    assert.equal(err.snapshotId, limited.snapshotId);
    return true;
  });

  // The interrupt is still open: the genuine restart goes through, once.
  const request = limited.toolRequests.find((p) => p.toolRequest.name === 'transferMoney');
  const done = await chat.resume({ restart: [restartTool(request, { confirmed: true })] });
  assert.match(done.text, new RegExp(`^Done: transferred \\$20,000\\.00 to account ${to}`));
  // (The forged account, not a transaction id that happens to hold 666.)
  assert.doesNotMatch(done.text, /account 666\b/);
});

test('an interrupt is resolved exactly once, even by concurrent resumes', async () => {
  const agent = bankingAgent();
  const first = agent.chat();
  const to = account();
  const res = await first.send(`Transfer $75 to account ${to}`);
  const [approval] = res.interrupts;

  const racers = [agent.chat({ snapshotId: res.snapshotId }), agent.chat({ snapshotId: res.snapshotId })];
  const results = await Promise.allSettled(
    racers.map((chat) => chat.resume({ respond: [approval.respond({ approved: true })] }))
  );
  // One runs the turn; the other, the same resume, gets its outcome, or
  // (while that turn still runs) an error saying the decision was recorded.
  const won = results.filter((r) => r.status === 'fulfilled');
  assert.ok(won.length >= 1, `a resume wins: ${JSON.stringify(results.map((r) => r.status))}`);
  for (const w of won) assert.match(w.value.text, /^Done: transferred \$75\.00/);
  assert.equal(new Set(won.map((w) => w.value.snapshotId)).size, 1, 'one outcome');
  for (const r of results.filter((r) => r.status === 'rejected')) {
    assert.ok(r.reason instanceof AgentError);
    assert.match(r.reason.message, /409|ABORTED|503|UNAVAILABLE/);
  }

  // A later resume of the same interrupt answers the same outcome.
  const again = await agent.chat({ snapshotId: res.snapshotId }).resume({ respond: [approval.respond({ approved: true })] });
  assert.equal(again.snapshotId, won[0].value.snapshotId);
  const latest = await agent.getSnapshot({ sessionId: res.sessionId });
  assert.equal(toolResponses(latest.state.messages, 'transferMoney').length, 1);
});

test('anything else gets a helpful answer', async () => {
  const res = await bankingAgent().chat().send('Hello, what can you do?');
  assert.equal(res.finishReason, 'stop');
  assert.equal(res.interrupts.length, 0);
  assert.match(res.text, /Transfer \$50 to account 12345/);
});
