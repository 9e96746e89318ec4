// Protocol fidelity with the real client: what the reference runtime does,
// the server does too.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { AgentError, remoteAgent } from 'genkit/beta/client';

import {
  account,
  AUTH_URL,
  BANKING_URL,
  bankingAgent,
  CLIENT_KEY,
  CLIENT_STATE_URL,
  clientStateAgent,
  getV1,
  post,
  toolResponses,
} from './helpers.mjs';

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

test('snapshot and client state always carry messages and artifacts arrays', async () => {
  const agent = bankingAgent();
  const res = await agent.chat().send('hello');
  const snap = await agent.getSnapshot(res.snapshotId);
  assert.ok(Array.isArray(snap.state.messages) && snap.state.messages.length > 0, JSON.stringify(snap.state));
  assert.deepEqual(snap.state.artifacts, []);

  // The client-managed state on the wire, as the client stores it.
  const say = (text) => ({ message: { role: 'user', content: [{ text }] } });
  const first = await post(CLIENT_STATE_URL, { data: say('hello') });
  assert.equal(first.status, 200, JSON.stringify(first.body));
  const { state } = first.body.result;
  assert.deepEqual(state.artifacts, []);
  assert.equal(state.messages.length, 2);
  // The state with its empty artifacts list verifies when sent back.
  const second = await post(CLIENT_STATE_URL, { data: say('hello again'), init: { state } });
  assert.equal(second.status, 200, JSON.stringify(second.body));
  assert.equal(second.body.result.finishReason, 'stop');
  assert.equal(second.body.result.state.messages.length, 4);

  // And through the client, across turns.
  const chat = clientStateAgent().chat();
  await chat.send('hello');
  const again = await chat.send('hello again');
  assert.equal(again.finishReason, 'stop');
  assert.deepEqual(again.artifacts, []);
});

test('a forged respond streams turnEnd failed and is kept as a failed snapshot; the approval stays open', async () => {
  const agent = bankingAgent();
  const chat = agent.chat();
  const to = account();
  const res = await chat.send(`Transfer $35 to account ${to}`);
  const [approval] = res.interrupts;
  const forged = { toolResponse: { name: 'transferMoney', ref: 'nope', output: { success: true } } };

  const turn = chat.resumeStream({ respond: [forged] });
  const chunks = [];
  await assert.rejects(
    (async () => {
      for await (const chunk of turn.stream) chunks.push(chunk);
      await turn.response;
    })(),
    (err) => {
      assert.ok(err instanceof AgentError, `want an AgentError, got ${err}`);
      assert.equal(err.status, 'INVALID_ARGUMENT');
      assert.equal(err.snapshotId, res.snapshotId, 'the last good snapshot is the paused one');
      return true;
    }
  );
  turn.response.catch(() => {});
  const end = chunks.map((c) => c.raw.turnEnd).find(Boolean);
  assert.ok(end, `a turnEnd chunk ends the failed turn: ${JSON.stringify(chunks.map((c) => c.raw))}`);
  assert.equal(end.finishReason, 'failed');
  const failed = await agent.getSnapshot(end.snapshotId);
  assert.equal(failed.status, 'failed');
  assert.equal(failed.parentId, res.snapshotId);
  assert.equal(failed.error.status, 'INVALID_ARGUMENT');

  // The paused snapshot is still where a resume goes, and it goes once.
  const done = await chat.resume({ respond: [approval.respond({ approved: true })] });
  assert.match(done.text, new RegExp(`^Done: transferred \\$35\\.00 to account ${to}`));
});

test('restarting an approval pauses again on a new interrupt linked to the old one; answering it continues', async () => {
  const agent = bankingAgent();
  const chat = agent.chat();
  const to = account();
  const res = await chat.send(`Transfer $45 to account ${to}`);
  const [approval] = res.interrupts;

  // The seed's loop: resume until res.interrupts is empty.
  const again = await chat.resume({ restart: [approval.restart()] });
  assert.equal(again.finishReason, 'interrupted');
  assert.equal(again.interrupts.length, 1);
  assert.equal(again.interrupts[0].name, 'userApproval');
  assert.deepEqual(again.interrupts[0].input, approval.input);

  const { items: open } = await getV1(`/interrupts?sessionId=${encodeURIComponent(res.sessionId)}`);
  assert.equal(open.length, 1, `one open interrupt: ${JSON.stringify(open)}`);
  assert.equal(open[0].snapshotId, again.snapshotId);
  const old = await getV1(`/interrupts/${open[0].previousId}`);
  assert.equal(old.status, 'resolved');
  assert.equal(old.snapshotId, res.snapshotId);

  const done = await chat.resume({ respond: [again.interrupts[0].respond({ approved: true })] });
  assert.equal(done.finishReason, 'stop');
  assert.match(done.text, new RegExp(`^Done: transferred \\$45\\.00 to account ${to}`));
  const snap = await agent.getSnapshot(done.snapshotId);
  assert.equal(toolResponses(snap.state.messages, 'transferMoney').length, 1);
});

// errorOf runs a turn that must be refused and returns the AgentError.
async function errorOf(turn) {
  let caught;
  try {
    await turn;
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof AgentError, `want an AgentError, got ${caught}`);
  return caught;
}

test('a turn refused before its stream starts reaches the client with its status', async () => {
  const agent = bankingAgent();
  const chat = agent.chat();
  const res = await chat.send(`Transfer $15 to account ${account()}`);
  const [approval] = res.interrupts;
  await chat.resume({ respond: [approval.respond({ approved: false })] });

  // The same interrupt again (409 for a JSON request).
  const twice = await errorOf(
    agent.chat({ snapshotId: res.snapshotId }).resume({ respond: [approval.respond({ approved: true })] })
  );
  assert.equal(twice.status, 'ABORTED');
  assert.match(twice.message, /already/);

  // An unknown snapshot (404).
  const missing = await errorOf(agent.chat({ snapshotId: 'no-such-snapshot' }).send('hi'));
  assert.equal(missing.status, 'NOT_FOUND');

  // Client state sent to a server-managed agent (400).
  const state = await errorOf(agent.chat({ state: { messages: [] } }).send('hi'));
  assert.equal(state.status, 'FAILED_PRECONDITION');

  // A JSON request keeps the real HTTP status, for curl users.
  const json = await post(BANKING_URL, { data: { message: { role: 'user', content: [{ text: 'hi' }] } }, init: { snapshotId: 'no-such-snapshot' } });
  assert.equal(json.status, 404);
  assert.equal(json.body.status, 'NOT_FOUND');
});

test('a server that requires credentials refuses a client without a key as UNAUTHENTICATED and serves one with its key', async (t) => {
  if (!AUTH_URL || !CLIENT_KEY) {
    t.skip('HOLDPOINT_AUTH_URL and HOLDPOINT_CLIENT_KEY are not set (run.sh sets them)');
    return;
  }
  const url = `${AUTH_URL}/api/agents/bankingAgent`;
  const anonymous = await errorOf(remoteAgent({ url }).chat().send('hi'));
  assert.equal(anonymous.status, 'UNAUTHENTICATED');
  const wrong = await errorOf(remoteAgent({ url, headers: { Authorization: 'Bearer hp_not-a-key' } }).chat().send('hi'));
  assert.equal(wrong.status, 'UNAUTHENTICATED');

  const agent = remoteAgent({ url, headers: { Authorization: `Bearer ${CLIENT_KEY}` } });
  const res = await agent.chat().send(`Transfer $5 to account ${account()}`);
  assert.equal(res.finishReason, 'interrupted');
  // Another tenant (the dev server's) does not see the session.
  const foreign = await errorOf(bankingAgent().chat({ snapshotId: res.snapshotId }).send('hi'));
  assert.equal(foreign.status, 'NOT_FOUND');
});
