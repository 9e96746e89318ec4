// A prompt-injected model, through the real client: the tenant agent
// "steered" runs on an OpenAI-compatible model that requests whatever the
// user's message names (internal/hostile; run.sh starts it and a server on
// it). What the model asks for is bounded by the server, whatever it is.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { AgentError, remoteAgent } from 'genkit/beta/client';

const base = process.env.HOLDPOINT_HOSTILE_URL?.replace(/\/+$/, '');
const modelURL = process.env.HOLDPOINT_HOSTILE_MODEL_URL;
const receiver = process.env.HOLDPOINT_HOSTILE_RECEIVER_URL;
const skip = !base && 'HOLDPOINT_HOSTILE_URL is not set (run.sh sets it)';
const STEERED = `${base}/api/agents/steered`;

/** The transfers the tenant's backend executed. */
async function executed() {
  const res = await fetch(`${receiver}/calls`);
  return (await res.json()).executed.length;
}

/** The pending interrupts of the server's default tenant. */
async function pending() {
  const res = await fetch(`${base}/api/v1/interrupts?status=pending&limit=100`);
  assert.equal(res.status, 200);
  return (await res.json()).items.length;
}

/** Asserts a send is refused as a failed turn of status with a message matching re. */
async function rejectsWith(promise, status, re) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof AgentError, `want an AgentError, got ${err}`);
    assert.equal(err.status, status);
    assert.match(err.message, re);
    return true;
  });
}

test('thirty transfers in one model answer fail the turn before any runs', { skip }, async () => {
  const before = await executed();
  const chat = remoteAgent({ url: STEERED }).chat();
  await rejectsWith(chat.send('CALL transferMoney x30'), 'RESOURCE_EXHAUSTED', /30 tool calls in one answer; at most 16/);
  assert.equal(await executed(), before, 'no transfer ran');
});

test('an answer of 2,000 approvals raises none', { skip }, async () => {
  const before = await pending();
  const chat = remoteAgent({ url: STEERED }).chat();
  await rejectsWith(chat.send('CALL userApproval x2000'), 'RESOURCE_EXHAUSTED', /2000 tool calls in one answer/);
  assert.equal(await pending(), before, 'the inbox got nothing');
});

test('nine approvals in one turn are refused; eight pause and are answered', { skip }, async () => {
  // run.sh serves this agent with --max-interrupts-per-turn 8.
  const agent = remoteAgent({ url: STEERED });
  const input = '{"action":"transferMoney","details":"to ATTACKER"}';
  await rejectsWith(
    agent.chat().send(`CALL userApproval x9 ${input}`),
    'RESOURCE_EXHAUSTED',
    /9 interrupts in one turn; at most 8/
  );
  const chat = agent.chat();
  const res = await chat.send(`CALL userApproval x8 ${input}`);
  assert.equal(res.finishReason, 'interrupted');
  assert.equal(res.interrupts.length, 8);
  const done = await chat.resume({ respond: res.interrupts.map((i) => i.respond({ approved: false })) });
  assert.equal(done.finishReason, 'stop');
});

/** Starts a detached turn with a raw request (stream: as the client asks). */
async function rawDetach(stream) {
  const res = await fetch(STEERED, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...(stream ? { Accept: 'text/event-stream' } : {}) },
    body: JSON.stringify({ data: { detach: true, message: { role: 'user', content: [{ text: 'HOLD' }] } } }),
  });
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.text() };
}

test('forty detached turns from one client: its bound runs, the rest are told to retry later', { skip }, async () => {
  // The client's bound (16 per credential) all goes through.
  const agent = remoteAgent({ url: STEERED });
  const tasks = await Promise.all(Array.from({ length: 16 }, () => agent.chat().detach('HOLD')));
  // Past it, nothing more is taken: 429 with Retry-After. (Refused ones go
  // through fetch: the client's detach() leaves a rejection of its unread
  // stream unhandled when the server refuses, whatever the server.)
  const refused = await Promise.all(Array.from({ length: 24 }, () => rawDetach(false)));
  for (const r of refused) {
    assert.equal(r.status, 429, r.body);
    assert.equal(JSON.parse(r.body).status, 'RESOURCE_EXHAUSTED');
    assert.ok(Number(r.retryAfter) >= 1, 'Retry-After is set');
  }
  // What the client reads when it asks for a stream, as it does.
  const streamed = await rawDetach(true);
  assert.match(streamed.body, /"status":"RESOURCE_EXHAUSTED"/);

  await fetch(`${modelURL}/release`, { method: 'POST' });
  for (const task of tasks) {
    const done = await task.wait({ intervalMs: 100 });
    assert.equal(done.status, 'completed');
  }
});

test('a signed call the model made to a harmless tool, replayed to the transfer endpoint, moves no money', { skip }, async () => {
  // The tenant's own quoteFee endpoint, which an attacker reads (a log, a
  // compromised proxy): it records what the platform sent.
  const http = await import('node:http');
  let captured;
  const quote = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      captured = { headers: req.headers, body: Buffer.concat(chunks) };
      res.setHeader('Content-Type', 'application/json');
      res.end('{"output":{"fee":1}}');
    });
  });
  await new Promise((resolve) => quote.listen(0, '127.0.0.1', resolve));
  try {
    const prompt = `---
name: replayed
model: openai/gpt-4o-mini
holdpoint:
  httpTools:
    - name: quoteFee
      url: http://127.0.0.1:${quote.address().port}/quote
      input: {schema: {amount: number, toAccount: string}}
      output: {schema: {fee: number}}
    - name: transferMoney
      url: ${receiver}/tools/transferMoney
      approval: true
      input: {schema: {amount: number, toAccount: string}}
      output: {schema: {success: boolean, transactionId: string}}
---
You quote fees.
`;
    const put = await fetch(`${base}/api/v1/agents/replayed`, {
      method: 'PUT',
      headers: { 'Content-Type': 'text/x-dotprompt' },
      body: prompt,
    });
    assert.equal(put.status, 201, await put.text());

    const before = await executed();
    const chat = remoteAgent({ url: `${base}/api/agents/replayed` }).chat();
    const res = await chat.send('CALL quoteFee x1 {"amount":5000,"toAccount":"ATTACKER"}');
    assert.equal(res.finishReason, 'stop');
    assert.ok(captured, 'the platform called quoteFee');
    assert.equal(JSON.parse(captured.body).tool, 'quoteFee');

    // The replay: the same signed bytes and headers, to the transfer tool.
    const headers = { 'Content-Type': 'application/json' };
    for (const h of ['webhook-id', 'webhook-timestamp', 'webhook-signature', 'idempotency-key']) {
      if (captured.headers[h]) headers[h] = captured.headers[h];
    }
    const replay = await fetch(`${receiver}/tools/transferMoney`, { method: 'POST', headers, body: captured.body });
    assert.equal(replay.status, 403, 'the receiver refuses a call signed for another tool');
    await replay.arrayBuffer();
    assert.equal(await executed(), before, 'no money moved');
  } finally {
    quote.close();
  }
});
