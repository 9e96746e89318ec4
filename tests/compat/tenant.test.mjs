// A tenant's own agent, defined as a .prompt file with no Go code
// (examples/tenant/banking.prompt, applied by run.sh as tenantBanking), whose
// transferMoney is an HTTP tool on the tenant's backend (the example
// receiver, which checks the signature and executes each call id once).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { AgentError, remoteAgent } from 'genkit/beta/client';

import { account, AUTH_URL, BASE_URL, CLIENT_KEY, toolResponses } from './helpers.mjs';

const receiver = process.env.HOLDPOINT_RECEIVER_URL;
const skip = receiver ? false : 'HOLDPOINT_RECEIVER_URL is not set (run.sh starts the receiver and applies the agent)';
const agent = () => remoteAgent({ url: `${BASE_URL}/api/agents/tenantBanking` });

async function executed(to) {
  const res = await fetch(`${receiver}/calls`);
  const { executed } = await res.json();
  return executed.filter((e) => e.toAccount === to);
}

test('send, interrupt, approve: the tenant backend executes the transfer once', { skip }, async () => {
  const chat = agent().chat();
  const to = account();
  let res = await chat.send(`Transfer $500 to account ${to}`);
  const approval = res.interrupts.find((i) => i.name === 'userApproval');
  assert.ok(approval);
  assert.deepEqual(approval.input, { action: 'transferMoney', details: `Transfer $500.00 to account ${to}` });
  assert.equal((await executed(to)).length, 0, 'nothing runs before the approval');
  res = await chat.resume({ respond: [approval.respond({ approved: true, feedback: 'Looks good' })] });
  const calls = await executed(to);
  assert.equal(calls.length, 1);
  assert.equal(calls[0].sessionId, res.sessionId);
  assert.equal(res.text, `Done: transferred $500.00 to account ${to} (transaction ${calls[0].transactionId}).`);
  const snap = await agent().getSnapshot(res.snapshotId);
  assert.equal(toolResponses(snap.state.messages, 'transferMoney').length, 1);
});

test('deny: the backend is never called', { skip }, async () => {
  const chat = agent().chat();
  const to = account();
  const res = await chat.send(`Transfer $70 to account ${to}`);
  const final = await chat.resume({ respond: [res.interrupts[0].respond({ approved: false, feedback: 'no' })] });
  assert.match(final.text, /^Cancelled/);
  assert.equal((await executed(to)).length, 0);
});

test('resumeStream and several approvals: one backend call per approved transfer', { skip }, async () => {
  const chat = agent().chat();
  const a = account();
  const b = account();
  const res = await chat.send(`Send $5 to account ${a} and $6 to account ${b}`);
  assert.equal(res.interrupts.length, 2);
  const turn = chat.resumeStream({
    respond: [res.interrupts[0].respond({ approved: true }), res.interrupts[1].respond({ approved: true })],
  });
  let streamed = '';
  for await (const chunk of turn.stream) streamed += chunk.text ?? '';
  const final = await turn.response;
  assert.equal(final.interrupts.length, 0);
  assert.match(streamed, /Done: transferred/);
  assert.equal((await executed(a)).length, 1);
  assert.equal((await executed(b)).length, 1);
});

test("another tenant can neither call nor see the agent", { skip: skip || (!AUTH_URL && 'no authenticated server') }, async () => {
  const other = remoteAgent({ url: `${AUTH_URL}/api/agents/tenantBanking`, headers: { Authorization: `Bearer ${CLIENT_KEY}` } });
  await assert.rejects(other.chat().send('Transfer $1 to account 1'), (err) => {
    assert.ok(err instanceof AgentError);
    assert.equal(err.status, 'NOT_FOUND');
    return true;
  });
  const list = await fetch(`${AUTH_URL}/api/agents`, { headers: { Authorization: `Bearer ${CLIENT_KEY}` } });
  const { agents } = await list.json();
  assert.ok(!agents.some((a) => a.name === 'tenantBanking'), JSON.stringify(agents));
});

test('names are one namespace: TenantBanking beside tenantBanking, or a compiled agent in capitals, is refused', { skip }, async () => {
  const put = (name) =>
    fetch(`${BASE_URL}/api/v1/agents/${name}`, {
      method: 'PUT',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'demo', system: 'I am not who you think.' }),
    });
  for (const [name, taken] of [['TenantBanking', 'tenantBanking'], ['BANKINGAGENT', 'bankingAgent']]) {
    const res = await put(name);
    const body = await res.json();
    assert.equal(res.status, 409, JSON.stringify(body));
    assert.equal(body.status, 'ALREADY_EXISTS');
    assert.ok(body.message.includes(`"${taken}"`), body.message);
  }
  const list = await fetch(`${BASE_URL}/api/agents`);
  const { agents } = await list.json();
  assert.ok(!agents.some((a) => a.name === 'TenantBanking' || a.name === 'BANKINGAGENT'), JSON.stringify(agents));
});
