// Server-managed sessions with the real client: getSnapshot and loadChat.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';

import { account, bankingAgent, textOf, toolRequests } from './helpers.mjs';

test('getSnapshot by snapshotId and by sessionId', async () => {
  const agent = bankingAgent();
  const chat = agent.chat();
  const to = account();
  const res = await chat.send(`Transfer $50 to account ${to}`);

  const snap = await agent.getSnapshot(res.snapshotId);
  assert.equal(snap.snapshotId, res.snapshotId);
  assert.equal(snap.sessionId, chat.sessionId);
  assert.equal(snap.status, 'completed');
  assert.equal(snap.finishReason, 'interrupted');
  assert.ok(snap.createdAt, 'the snapshot has createdAt');
  const messages = snap.state.messages.filter((m) => m.role !== 'system');
  assert.deepEqual(
    messages.map((m) => m.role),
    ['user', 'model']
  );
  assert.equal(messages[0].content[0].text, `Transfer $50 to account ${to}`);
  const [request] = toolRequests(messages, 'userApproval');
  assert.ok(request.metadata?.interrupt, 'the pending request carries metadata.interrupt');

  const latest = await agent.getSnapshot({ sessionId: chat.sessionId });
  assert.equal(latest.snapshotId, res.snapshotId);

  const done = await chat.resume({
    respond: [res.interrupts[0].respond({ approved: true })],
  });
  const after = await agent.getSnapshot({ sessionId: chat.sessionId });
  assert.equal(after.snapshotId, done.snapshotId);
  assert.equal(after.parentId, res.snapshotId, 'a turn records the snapshot it continued from');
  assert.equal(after.finishReason, 'stop');
});

test('getSnapshot of an unknown snapshot is not found', async () => {
  await assert.rejects(bankingAgent().getSnapshot(randomUUID()), /404/);
  await assert.rejects(bankingAgent().getSnapshot({ sessionId: `no-such-session-${randomUUID()}` }), /404/);
});

test('loadChat({sessionId}) continues a finished conversation', async () => {
  const agent = bankingAgent();
  const chat = agent.chat();
  const to = account();
  const res = await chat.send(`Transfer $50 to account ${to}`);
  const done = await chat.resume({
    respond: [res.interrupts[0].respond({ approved: true })],
  });

  const loaded = await agent.loadChat({ sessionId: chat.sessionId });
  assert.equal(loaded.snapshotId, done.snapshotId);
  assert.equal(loaded.sessionId, chat.sessionId);
  const history = textOf(loaded.messages);
  assert.match(history, new RegExp(`Transfer \\$50 to account ${to}`));
  assert.ok(history.includes(done.text), 'the loaded history ends with the confirmation');

  const next = await loaded.send('What else can you do?');
  assert.equal(next.finishReason, 'stop');
  assert.match(next.text, /Transfer \$50 to account 12345/);
  assert.equal(next.sessionId, chat.sessionId);
  const snap = await agent.getSnapshot(next.snapshotId);
  assert.equal(snap.parentId, done.snapshotId);
  assert.match(textOf(snap.state.messages, 'user'), /What else can you do\?/);
  assert.ok(textOf(snap.state.messages, 'model').includes(done.text), 'the earlier turns are kept');
});

test('loadChat({sessionId}) answers a pending approval from another client', async () => {
  const agent = bankingAgent();
  const chat = agent.chat();
  const to = account();
  await chat.send(`Transfer $60 to account ${to}`);

  // A different process (say, an approvals inbox) picks the session up.
  const inbox = await bankingAgent().loadChat({ sessionId: chat.sessionId });
  const last = inbox.messages.at(-1);
  assert.equal(last.role, 'model');
  const pending = last.content.find((p) => p.toolRequest && p.metadata?.interrupt);
  assert.equal(pending.toolRequest.name, 'userApproval');

  const done = await inbox.resume({
    respond: [
      {
        toolResponse: {
          name: pending.toolRequest.name,
          ref: pending.toolRequest.ref,
          output: { approved: true },
        },
      },
    ],
  });
  assert.match(done.text, new RegExp(`^Done: transferred \\$60\\.00 to account ${to}`));
});

test('loadChat of an unknown session fails', async () => {
  await assert.rejects(bankingAgent().loadChat({ sessionId: `no-such-session-${randomUUID()}` }));
});

test('a chat started with a sessionId of its choice keeps it', async () => {
  const agent = bankingAgent();
  const sessionId = `compat-${randomUUID()}`;
  const chat = agent.chat({ sessionId });
  const res = await chat.send('Hello');
  assert.equal(res.sessionId, sessionId);
  const snap = await agent.getSnapshot({ sessionId });
  assert.equal(snap.snapshotId, res.snapshotId);
});
