// Webhooks checked by the Standard Webhooks reference library
// (npm standardwebhooks): an endpoint on a local receiver, a turn driven with
// the official client, and every delivery verified with Webhook.verify, so our
// signatures are proven against the published verifier, not our Go code.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { test } from 'node:test';

import { Webhook, WebhookVerificationError } from 'standardwebhooks';

import { BASE_URL, bankingAgent, sleep } from './helpers.mjs';

/** A local receiver that records every request and answers 204. */
async function startReceiver() {
  const received = [];
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      received.push({
        method: req.method,
        path: req.url,
        headers: { ...req.headers },
        raw: Buffer.concat(chunks),
      });
      res.writeHead(204).end();
    });
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}/hook`,
    received,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}

/**
 * Polls fn (which returns a value or undefined) until it gives a value, for
 * at most ms; on a timeout the error carries what diagnose() says.
 */
async function waitFor(what, fn, ms = 10000, diagnose = async () => '') {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined && v !== null && v !== false) return v;
    if (Date.now() >= deadline) {
      throw new Error(`timed out after ${ms} ms waiting for ${what}${await diagnose()}`);
    }
    await sleep(100);
  }
}

async function api(method, path, body) {
  const res = await fetch(`${BASE_URL}/api/v1${path}`, {
    method,
    headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(10000),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

test('webhooks are signed as the Standard Webhooks reference library verifies them', async (t) => {
  const receiver = await startReceiver();
  t.after(() => receiver.close());

  const created = await api('POST', '/webhooks', {
    url: receiver.url,
    eventTypes: ['interrupt.created', 'interrupt.resolved', 'tool.called', 'turn.completed'],
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const { id: hookID, secret } = created.body;
  assert.ok(hookID, 'the endpoint has an id');
  assert.match(secret, /^whsec_[A-Za-z0-9+/]+=*$/, 'the secret is whsec_ + base64');
  t.after(async () => {
    const del = await api('DELETE', `/webhooks/${hookID}`);
    assert.equal(del.status, 204, `DELETE /webhooks/${hookID} answered ${del.status}`);
  });

  // What the receiver got and what the server says of the deliveries, for
  // the message of a timed-out wait.
  const diagnose = async () => {
    const got = receiver.received.map((r) => {
      try {
        const p = JSON.parse(r.raw.toString('utf8'));
        const about = p.data?.interrupt ?? p.data?.turn ?? p.data?.toolCall;
        return `${p.type} ${about?.sessionId ?? ''} #${p.sequence ?? ''}`;
      } catch {
        return `unparsable ${r.raw.length} bytes`;
      }
    });
    let listed = '';
    try {
      const d = await api('GET', `/webhooks/${hookID}/deliveries?limit=50`);
      listed = JSON.stringify(
        (d.body?.items ?? []).map((x) => [x.eventType, x.status, x.attempts, x.lastStatus, x.lastError])
      );
    } catch (err) {
      listed = String(err);
    }
    return `\nreceived (${got.length}): ${JSON.stringify(got)}\ndeliveries: ${listed}`;
  };

  const wh = new Webhook(secret);
  // Verifies a delivery with the reference library and checks its envelope.
  const verified = new Map(); // webhook-id -> payload
  const verify = (r) => {
    assert.equal(r.method, 'POST');
    assert.equal(r.path, '/hook');
    const payload = wh.verify(r.raw.toString('utf8'), r.headers);
    assert.equal(r.headers['webhook-id'], payload.id, 'the webhook-id header is the payload id');
    verified.set(payload.id, payload);
    return payload;
  };
  // The first delivery of a type matching pred, verified; bounded wait.
  const delivery = (what, type, pred, ms) =>
    waitFor(
      what,
      () => {
        for (const r of receiver.received) {
          let body;
          try {
            body = JSON.parse(r.raw.toString('utf8'));
          } catch {
            continue;
          }
          if (body.type === type && pred(body)) return { r, payload: verify(r) };
        }
        return undefined;
      },
      ms,
      diagnose
    );

  // 1. The turn pauses on the approval: interrupt.created, within 5 s.
  const chat = bankingAgent().chat();
  const res = await chat.send('Transfer $50 to account 12345');
  assert.equal(res.finishReason, 'interrupted');
  const sessionId = res.sessionId;
  assert.ok(sessionId, 'the output names the session');
  const [approval] = res.interrupts;
  assert.equal(approval.name, 'userApproval');

  const createdHook = await delivery(
    'interrupt.created of this session',
    'interrupt.created',
    (p) => p.data?.interrupt?.sessionId === sessionId,
    45000 // generous (under run.sh's 60 s per test): a loaded machine delivers late
  );
  const onCreate = createdHook.payload;
  assert.equal(onCreate.type, 'interrupt.created');
  assert.equal(onCreate.tenantId, 'default');
  assert.equal(onCreate.sequence, 1);
  assert.equal(onCreate.data.interrupt.tool, 'userApproval');
  assert.equal(onCreate.data.interrupt.agent, 'bankingAgent');
  assert.equal(onCreate.data.interrupt.snapshotId, res.snapshotId);
  assert.equal(onCreate.data.interrupt.status, 'pending');
  assert.deepEqual(onCreate.data.interrupt.input, approval.input);
  const interruptId = onCreate.data.interrupt.id;
  assert.match(interruptId, /^[0-9a-f-]{36}$/);

  // 2. Tampering: one changed byte of the body, or another secret, fails.
  const tampered = Buffer.from(createdHook.r.raw);
  const at = tampered.indexOf('interrupt.created');
  assert.ok(at >= 0);
  tampered[at] ^= 0x01; // 'i' -> 'h'
  assert.notEqual(tampered.toString(), createdHook.r.raw.toString());
  assert.throws(
    () => wh.verify(tampered.toString('utf8'), createdHook.r.headers),
    WebhookVerificationError,
    'a tampered body fails verification'
  );
  const other = new Webhook(`whsec_${Buffer.alloc(32, 7).toString('base64')}`);
  assert.throws(
    () => other.verify(createdHook.r.raw.toString('utf8'), createdHook.r.headers),
    WebhookVerificationError,
    'another secret fails verification'
  );
  assert.throws(
    () =>
      wh.verify(createdHook.r.raw.toString('utf8'), {
        ...createdHook.r.headers,
        'webhook-id': `${createdHook.r.headers['webhook-id']}x`,
      }),
    WebhookVerificationError,
    'another webhook-id fails verification'
  );

  // 3. Approve with the client: resolved, the tool ran, the turn completed.
  const done = await chat.resume({ respond: [approval.respond({ approved: true })] });
  assert.equal(done.finishReason, 'stop');
  assert.match(done.text, /^Done: transferred \$50\.00 to account 12345/);
  assert.equal(done.sessionId, sessionId);

  const { payload: onResolve } = await delivery(
    'interrupt.resolved of this interrupt',
    'interrupt.resolved',
    (p) => p.data?.interrupt?.id === interruptId
  );
  assert.ok(onResolve.sequence >= 2, `resolved comes after created: sequence ${onResolve.sequence}`);
  assert.equal(onResolve.data.interrupt.sessionId, sessionId);
  assert.equal(onResolve.data.interrupt.tool, 'userApproval');
  assert.equal(onResolve.data.interrupt.status, 'resolved');
  assert.match(
    JSON.stringify(onResolve.data.interrupt.resolution),
    /"approved":true/,
    `the resolution carries the approval: ${JSON.stringify(onResolve.data.interrupt.resolution)}`
  );

  const { payload: onTool } = await delivery(
    'tool.called transferMoney of this session',
    'tool.called',
    (p) => p.data?.toolCall?.sessionId === sessionId && p.data.toolCall.tool === 'transferMoney'
  );
  assert.equal(onTool.data.toolCall.tool, 'transferMoney');
  assert.equal(onTool.data.toolCall.agent, 'bankingAgent');

  const { payload: onTurn } = await delivery(
    'turn.completed of the continued turn',
    'turn.completed',
    (p) => p.data?.turn?.sessionId === sessionId && p.data.turn.snapshotId === done.snapshotId
  );
  assert.equal(onTurn.data.turn.finishReason, 'stop');
  assert.equal(onTurn.data.turn.agent, 'bankingAgent');

  // Every delivery of this session seen so far verifies too.
  for (const r of receiver.received) {
    const body = JSON.parse(r.raw.toString('utf8'));
    const about = body.data?.interrupt ?? body.data?.turn ?? body.data?.toolCall;
    if (about?.sessionId === sessionId) verify(r);
  }
  const ours = [...verified.keys()];
  assert.equal(new Set(ours).size, ours.length);

  // 4. The endpoint's deliveries list them as delivered, by the same ids.
  const listed = await waitFor('the deliveries recorded as delivered', async () => {
    const byEvent = new Map();
    let cursor = '';
    for (let page = 0; page < 20; page++) {
      const q = new URLSearchParams({ limit: '200' });
      if (cursor) q.set('cursor', cursor);
      const got = await api('GET', `/webhooks/${hookID}/deliveries?${q}`);
      assert.equal(got.status, 200, JSON.stringify(got.body));
      for (const d of got.body.items) byEvent.set(d.eventId, d);
      cursor = got.body.nextCursor;
      if (!cursor) break;
    }
    return ours.every((id) => byEvent.get(id)?.status === 'delivered') ? byEvent : undefined;
  }, 10000, diagnose);
  for (const id of ours) {
    const d = listed.get(id);
    const payload = verified.get(id);
    assert.equal(d.webhookId, hookID);
    assert.equal(d.eventType, payload.type);
    assert.ok(d.attempts >= 1);
    assert.equal(d.lastStatus, 204);
    if (payload.data.interrupt) assert.equal(d.interruptId, payload.data.interrupt.id);
  }
});
