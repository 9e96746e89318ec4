// Approval policies with the real client: the demo paymentsAgent's model is
// steered to call its tools at once, without asking; the platform's gate is
// what pauses them. refund is a confirmation (the client's restart runs
// it); payVendor above $1,000 is maker-checker (two approvers holding
// approve:payments, in the inbox, never the user who asked).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { remoteAgent } from 'genkit/beta/client';

import { AUTH_URL, BASE_URL, CLIENT_KEY, account, getV1, toolResponses } from './helpers.mjs';

const PAYMENTS_URL = `${BASE_URL}/api/agents/paymentsAgent`;

/** A distinct end user per call, so parallel test files never meet. */
function person(name) {
  return `${name}-${account()}`;
}

/** The payments agent as an end user (X-End-User: dev mode acts for them). */
function paymentsAgent(endUser) {
  return remoteAgent({ url: PAYMENTS_URL, headers: { 'X-End-User': endUser } });
}

/** The gated request of a paused answer, with its metadata. */
function gatedRequest(res, name) {
  const part = res.toolRequests.find((p) => p.toolRequest.name === name);
  assert.ok(part, `the answer requests ${name}`);
  return part;
}

/** A session's tool calls (rows of executions). */
async function toolCalls(sessionId) {
  const page = await getV1(`/sessions/${encodeURIComponent(sessionId)}/tool-calls`);
  return page.items;
}

/** The one pending interrupt of a session, from the inbox. */
async function pendingInterrupt(sessionId) {
  const page = await getV1(`/interrupts?sessionId=${encodeURIComponent(sessionId)}`);
  assert.equal(page.items.length, 1, `one pending interrupt: ${JSON.stringify(page.items)}`);
  return page.items[0];
}

/** An inbox decision as an approver (X-End-User names the person). */
async function decide(id, decision, endUser, body = {}) {
  const res = await fetch(`${BASE_URL}/api/v1/interrupts/${id}/${decision}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-End-User': endUser },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

test('a steered model calls a gated tool: the client sees an interrupt, approval required, and nothing runs', async () => {
  const alice = person('alice');
  const vendor = account();
  const chat = paymentsAgent(alice).chat();
  const res = await chat.send(`pay 5000 to ${vendor}`);

  assert.equal(res.finishReason, 'interrupted');
  assert.equal(res.interrupts.length, 1);
  const [pay] = res.interrupts;
  assert.equal(pay.name, 'payVendor');
  assert.deepEqual(pay.input, { vendor, amount: 5000 });
  const { interrupt } = gatedRequest(res, 'payVendor').metadata;
  assert.equal(interrupt.approval, 'required');
  assert.deepEqual(interrupt.gate, { scope: 'approve:payments', approvals: 2, allowEdit: true });
  assert.equal(interrupt.explanation, `Paying $5,000.00 to ${vendor} right away, as you asked.`);
  assert.match(interrupt.message, /payVendor needs 2 approval\(s\) from holders of approve:payments/);
  assert.equal(res.text, interrupt.explanation, "the model's own words are the explanation");
  assert.deepEqual(await toolCalls(res.sessionId), [], 'no call ran, no call row');

  const it = await pendingInterrupt(res.sessionId);
  assert.equal(it.endUser, alice);
  assert.equal(it.scope, 'approve:payments');
  assert.equal(it.approvalsNeeded, 2);

  // A small payment needs no one.
  const small = await paymentsAgent(alice).chat().send(`pay 900 to ${vendor}`);
  assert.equal(small.finishReason, 'stop');
  assert.match(small.text, new RegExp(`^Paid \\$900\\.00 to ${vendor} \\(payment pay-[0-9a-f]+\\)\\.$`));
});

test('a confirmation (refund): the client restart runs the tool exactly once', async () => {
  const agent = paymentsAgent(person('alice'));
  const chat = agent.chat();
  const vendor = account();
  const res = await chat.send(`refund 40 to ${vendor}`);
  assert.equal(res.finishReason, 'interrupted');
  const [refund] = res.interrupts;
  assert.equal(refund.name, 'refund');
  const { interrupt } = gatedRequest(res, 'refund').metadata;
  assert.equal(interrupt.approval, 'required');
  assert.deepEqual(interrupt.gate, { approvals: 1 });
  assert.deepEqual(await toolCalls(res.sessionId), []);

  const done = await chat.resume({ restart: [refund.restart()] });
  assert.equal(done.finishReason, 'stop');
  assert.match(done.text, new RegExp(`^Refunded \\$40\\.00 to ${vendor} \\(refund rf-[0-9a-f]+\\)\\.$`));

  const snap = await agent.getSnapshot(done.snapshotId);
  const outputs = toolResponses(snap.state.messages, 'refund');
  assert.equal(outputs.length, 1, 'the refund ran once');
  assert.equal(outputs[0].toolResponse.output.refunded, true);
  const calls = await toolCalls(res.sessionId);
  assert.deepEqual(calls.map((c) => [c.tool, c.status]), [['refund', 'succeeded']]);
});

test('maker-checker (payVendor): the client restart is refused; two inbox approvers, not the requester, run it once', async () => {
  const alice = person('alice');
  const bob = person('bob');
  const carol = person('carol');
  const agent = paymentsAgent(alice);
  const chat = agent.chat();
  const vendor = account();
  const res = await chat.send(`pay 5000 to ${vendor}`);
  const [pay] = res.interrupts;
  assert.equal(pay.name, 'payVendor');

  // The requester's own restart, through the client, is refused.
  await assert.rejects(chat.resume({ restart: [pay.restart()] }), (err) => {
    assert.match(`${err.status ?? ''} ${err.message}`, /PERMISSION_DENIED|403/);
    assert.match(err.message, /inbox/);
    return true;
  });
  assert.deepEqual(await toolCalls(res.sessionId), [], 'nothing ran');

  const it = await pendingInterrupt(res.sessionId);
  // The requester in the inbox is refused too.
  const self = await decide(it.id, 'restart', alice);
  assert.equal(self.status, 403);
  assert.equal(self.body.status, 'PERMISSION_DENIED');

  const first = await decide(it.id, 'restart', bob, { note: 'invoice checked' });
  assert.equal(first.status, 200);
  assert.deepEqual(first.body, { status: 'voted', approvals: 1, needed: 2 });
  assert.deepEqual(await toolCalls(res.sessionId), [], 'one approval of two runs nothing');
  const twice = await decide(it.id, 'restart', bob);
  assert.equal(twice.status, 409, 'one person counts once');

  const second = await decide(it.id, 'restart', carol);
  assert.equal(second.status, 200);
  assert.equal(second.body.status, 'resumed');
  assert.match(
    second.body.output.message.content.map((p) => p.text ?? '').join(''),
    new RegExp(`^Paid \\$5,000\\.00 to ${vendor} \\(payment pay-[0-9a-f]+\\)\\.$`)
  );

  // The session, read through the client, goes on from the payment.
  const snap = await agent.getSnapshot({ sessionId: res.sessionId });
  assert.equal(snap.snapshotId, second.body.output.snapshotId);
  const outputs = toolResponses(snap.state.messages, 'payVendor');
  assert.equal(outputs.length, 1, 'the payment ran once');
  assert.equal(outputs[0].toolResponse.output.paid, true);
  assert.deepEqual(outputs[0].toolResponse.output.amount, 5000);
  const calls = await toolCalls(res.sessionId);
  assert.deepEqual(calls.map((c) => [c.tool, c.status]), [['payVendor', 'succeeded']]);

  const detail = await getV1(`/interrupts/${it.id}`);
  assert.equal(detail.status, 'resolved');
  assert.deepEqual(
    detail.votes.map((v) => [v.voter, v.vote]),
    [[`user:${bob}`, 'approve'], [`user:${carol}`, 'approve']]
  );
  assert.equal(detail.votes[0].note, 'invoice checked');
});

const retryRequest = { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' };

test('one denial ends a maker-checker vote: a third vote is refused and nothing runs', async () => {
  const alice = person('alice');
  const res = await paymentsAgent(alice).chat().send(`pay 7000 to ${account()}`);
  const it = await pendingInterrupt(res.sessionId);
  assert.equal((await decide(it.id, 'restart', person('bob'))).body.status, 'voted');
  const denied = await decide(it.id, 'respond', person('carol'), { output: { paid: false, reason: 'no invoice' }, note: 'no invoice' });
  assert.equal(denied.status, 200);
  assert.equal(denied.body.status, 'resumed');
  const third = await decide(it.id, 'restart', person('dave'));
  assert.equal(third.status, 409, 'a vote after the denial is refused');
  assert.deepEqual(await toolCalls(res.sessionId), [], 'nothing ran');
  const detail = await getV1(`/interrupts/${it.id}`);
  assert.deepEqual(detail.votes.map((v) => v.vote), ['approve', 'deny']);
});

test('a failed approved payment is retried by the same resume, then from the API, never beyond its attempts', async () => {
  const alice = person('alice');
  const agent = paymentsAgent(alice);
  const vendor = `flaky${account()}`;

  // Approved by two approvers in the inbox, the payment's first run fails:
  // the turn ends failed and the call row says so.
  const chat = agent.chat();
  const res = await chat.send(`pay 5000 to ${vendor}`);
  const it = await pendingInterrupt(res.sessionId);
  assert.equal((await decide(it.id, 'restart', person('bob'))).body.status, 'voted');
  const approved = await decide(it.id, 'restart', person('carol'));
  assert.equal(approved.status, 200);
  assert.equal(approved.body.output.finishReason, 'failed');
  let calls = await toolCalls(res.sessionId);
  assert.deepEqual(calls.map((c) => [c.tool, c.status, c.attempt]), [['payVendor', 'failed', 1]]);
  assert.match(calls[0].error.message, /did not answer/);

  // The requester resumes by session id with the same restart: the call
  // runs once more, with the first attempt's call id, and the session
  // goes on. No new approval was asked for.
  const [pay] = res.interrupts;
  const retried = await chat.resume({ restart: [pay.restart()] });
  assert.equal(retried.finishReason, 'stop');
  assert.match(retried.text, new RegExp(`^Paid \\$5,000\\.00 to ${vendor}`));
  calls = await toolCalls(res.sessionId);
  assert.deepEqual(calls.map((c) => [c.status, c.attempt]), [['failed', 1], ['succeeded', 2]]);
  assert.equal(calls[1].callId, `${calls[0].turnId}/${calls[0].callKey}`, 'the retry keeps the call id');

  // Succeeded: neither the protocol nor the API runs it again.
  const again = await fetch(`${BASE_URL}/api/v1/tool-calls/${calls[1].id}/retry`, retryRequest);
  assert.equal(again.status, 409, 'a call that succeeded is not retried');
  assert.equal((await toolCalls(res.sessionId)).length, 2);

  // Another payment, retried from the API (POST /tool-calls/{id}/retry).
  const chat2 = agent.chat();
  const res2 = await chat2.send(`pay 4000 to ${vendor}`);
  const it2 = await pendingInterrupt(res2.sessionId);
  await decide(it2.id, 'restart', person('bob'));
  assert.equal((await decide(it2.id, 'restart', person('carol'))).body.output.finishReason, 'failed');
  const [first] = await toolCalls(res2.sessionId);
  const viaAPI = await fetch(`${BASE_URL}/api/v1/tool-calls/${first.id}/retry`, retryRequest);
  assert.equal(viaAPI.status, 200);
  const record = await viaAPI.json();
  assert.equal(record.status, 'succeeded');
  assert.equal(record.attempt, 2);
  assert.equal(record.callId, `${first.turnId}/${first.callKey}`);
  // The first attempt can no longer be retried: the session went on.
  const stale = await fetch(`${BASE_URL}/api/v1/tool-calls/${first.id}/retry`, retryRequest);
  assert.ok(stale.status === 409 || stale.status === 400, `a stale retry: ${stale.status}`);
  assert.equal((await toolCalls(res2.sessionId)).length, 2);
});

test('with real keys: only holders of the scope see and decide, never for the requester, two of them run it once', async (t) => {
  const approvers = (process.env.HOLDPOINT_APPROVER_KEYS ?? '').split(',').filter(Boolean);
  const stranger = process.env.HOLDPOINT_STRANGER_KEY;
  if (!AUTH_URL || !CLIENT_KEY || approvers.length !== 2 || !stranger) {
    t.skip('the authenticated server and its keys are not set (run.sh sets them)');
    return;
  }
  const alice = person('alice');
  const vendor = account();
  const agent = remoteAgent({ url: `${AUTH_URL}/api/agents/paymentsAgent`, headers: { Authorization: `Bearer ${CLIENT_KEY}`, 'X-End-User': alice } });
  const res = await agent.chat().send(`pay 6000 to ${vendor}`);
  assert.equal(res.finishReason, 'interrupted');
  const as = (key, endUser) => ({ Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', ...(endUser ? { 'X-End-User': endUser } : {}) });
  const v1 = (path, key, init = {}) => fetch(`${AUTH_URL}/api/v1${path}`, { ...init, headers: as(key, init.endUser) });
  const list = async (key) => (await (await v1(`/interrupts?sessionId=${encodeURIComponent(res.sessionId)}`, key)).json()).items;

  // The approvers see the call; a key without the scope neither sees,
  // reads nor decides it.
  const [it] = await list(approvers[0]);
  assert.equal(it.tool, 'payVendor');
  assert.equal(it.endUser, alice);
  assert.deepEqual(await list(stranger), []);
  assert.equal((await v1(`/interrupts/${it.id}`, stranger)).status, 403);
  assert.equal((await v1(`/interrupts/${it.id}/restart`, stranger, { method: 'POST', body: '{}' })).status, 403);
  assert.equal((await v1(`/interrupts/${it.id}/respond`, stranger, { method: 'POST', body: '{"output":{"paid":false}}' })).status, 403);
  // An approver's key acting for the requester is refused.
  assert.equal((await v1(`/interrupts/${it.id}/restart`, approvers[0], { method: 'POST', body: '{}', endUser: alice })).status, 403);

  const first = await v1(`/interrupts/${it.id}/restart`, approvers[0], { method: 'POST', body: '{}' });
  assert.deepEqual(await first.json(), { status: 'voted', approvals: 1, needed: 2 });
  assert.equal((await v1(`/interrupts/${it.id}/restart`, approvers[0], { method: 'POST', body: '{}' })).status, 409, 'one key counts once');
  const second = await v1(`/interrupts/${it.id}/restart`, approvers[1], { method: 'POST', body: '{}' });
  assert.equal(second.status, 200);
  assert.equal((await second.json()).status, 'resumed');
  const detail = await (await v1(`/interrupts/${it.id}`, approvers[0])).json();
  assert.deepEqual(detail.votes.map((v) => v.keyName), ['approver-one', 'approver-two']);
  assert.ok(detail.votes.every((v) => v.keyId), 'each vote names its key id');
  assert.match(detail.resolvedBy, /^key:approver-two\//);
  const calls = (await (await v1(`/sessions/${encodeURIComponent(res.sessionId)}/tool-calls`, approvers[0])).json()).items;
  assert.deepEqual(calls.map((c) => [c.tool, c.status]), [['payVendor', 'succeeded']], 'it ran once');
});
