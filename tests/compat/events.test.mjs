// The live event stream (GET /api/v1/events, server-sent events) around a
// turn driven with the official client: a listener that disconnects and
// comes back with Last-Event-ID gets every event of the time it was away,
// once, in order, then live ones.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { BASE_URL, bankingAgent } from './helpers.mjs';

/**
 * Opens the event stream (after lastEventId, when given) and returns a
 * reader: next(pred, ms) resolves with the first frame pred accepts (every
 * frame read is kept in frames), close() ends the stream.
 */
async function openStream(lastEventId) {
  const ctl = new AbortController();
  const headers = { accept: 'text/event-stream' };
  if (lastEventId) headers['last-event-id'] = lastEventId;
  const res = await fetch(`${BASE_URL}/api/v1/events`, { headers, signal: ctl.signal });
  assert.equal(res.status, 200, `GET /api/v1/events: ${res.status}`);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  const frames = [];
  let subscribed = false;
  async function readFrame() {
    for (;;) {
      const end = buf.indexOf('\n\n');
      if (end >= 0) {
        const raw = buf.slice(0, end);
        buf = buf.slice(end + 2);
        if (raw.startsWith(': subscribed')) subscribed = true;
        const f = {};
        for (const line of raw.split('\n')) {
          if (line.startsWith('id: ')) f.id = line.slice(4);
          else if (line.startsWith('event: ')) f.event = line.slice(7);
          else if (line.startsWith('data: ')) f.data = JSON.parse(line.slice(6));
        }
        if (f.event) return f; // comments (heartbeats) and bare ids are skipped
        continue;
      }
      const { value, done } = await reader.read();
      if (done) throw new Error('the event stream ended');
      buf += decoder.decode(value, { stream: true });
    }
  }
  async function next(what, pred, ms) {
    const timer = setTimeout(() => ctl.abort(), ms);
    try {
      for (;;) {
        const f = await readFrame();
        frames.push(f);
        if (pred(f)) return f;
      }
    } catch (err) {
      throw new Error(
        `no ${what} within ${ms} ms (${err.message}); frames: ${JSON.stringify(frames.map((f) => [f.event, f.data?.sessionId]))}`
      );
    } finally {
      clearTimeout(timer);
    }
  }
  // The first comment says the subscription is in place.
  while (!subscribed) {
    const { value, done } = await reader.read();
    if (done) throw new Error('the event stream ended before it subscribed');
    buf += decoder.decode(value, { stream: true });
    if (buf.startsWith(': subscribed')) subscribed = true;
  }
  return { next, frames, close: () => ctl.abort() };
}

test('a listener that reconnects with Last-Event-ID gets what it missed, once', async (t) => {
  const streams = [];
  t.after(() => streams.forEach((s) => s.close()));
  const first = await openStream();
  streams.push(first);
  const chat = bankingAgent().chat();
  const res = await chat.send('Transfer $50 to account 12345');
  assert.equal(res.finishReason, 'interrupted');
  const sessionId = res.sessionId;
  const ofSession = (f) => f.data?.sessionId === sessionId;
  const created = await first.next(
    'interrupt.created of this session',
    (f) => f.event === 'interrupt.created' && ofSession(f),
    60000
  );
  assert.equal(created.id, created.data.eventId);
  first.close();

  // Away: the approval is answered and the transfer runs.
  const done = await chat.resume({ respond: [res.interrupts[0].respond({ approved: true })] });
  assert.equal(done.finishReason, 'stop');

  // Back with the last id seen: the events of the time away, in order
  // (the paused turn's own turn.completed follows its interrupt.created).
  const second = await openStream(created.id);
  streams.push(second);
  await second.next(
    'the approved turn.completed of this session',
    (f) => f.event === 'turn.completed' && ofSession(f) && f.data.snapshotId === done.snapshotId,
    60000
  );
  const mine = second.frames.filter(ofSession);
  const types = mine.map((f) => f.event);
  assert.equal(types[0], 'turn.completed', `events of the session after interrupt.created: ${types}`);
  assert.equal(mine[0].data.snapshotId, res.snapshotId, 'the first is the paused turn');
  assert.equal(types.at(-1), 'turn.completed');
  for (const type of ['interrupt.resolved', 'tool.called']) {
    assert.equal(types.filter((e) => e === type).length, 1, `${type} once among ${types}`);
  }
  assert.ok(!types.includes('interrupt.created'), `the event resumed after came again: ${types}`);
  const ids = second.frames.map((f) => f.id);
  assert.equal(new Set(ids).size, ids.length, 'an event came twice');

  // Then live: a new turn of the session arrives on the same stream.
  const more = await chat.send('What is my balance?');
  await second.next(
    'the live turn.completed of the next turn',
    (f) => f.event === 'turn.completed' && ofSession(f) && f.data.snapshotId === more.snapshotId,
    60000
  );
});
