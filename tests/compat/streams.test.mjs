// Durable streams through the official Genkit client's reconnect path:
// streamFlow reads the x-genkit-stream-id of a streaming turn, and a call
// with streamId joins that stream again from its start (Genkit's
// semantics), here on the other instance; an unknown or foreign stream id
// is "NOT_FOUND: Stream not found." (a 204).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { streamFlow } from 'genkit/beta/client';

import { AUTH_URL, BANKING_URL, CLIENT_KEY } from './helpers.mjs';

const GATES = process.env.HOLDPOINT_STREAM_GATES;
const URL2 = process.env.HOLDPOINT_URL2 && `${process.env.HOLDPOINT_URL2.replace(/\/+$/, '')}/api/agents/bankingAgent`;
const skip = (!GATES || !URL2) && 'needs run.sh (HOLDPOINT_STREAM_GATES, HOLDPOINT_URL2)';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The text a stream chunk carries. */
function text(chunk) {
  return (chunk.modelChunk?.content ?? []).map((p) => p.text ?? '').join('');
}

/** A statement request held half way (20 of 40 chunks) until gate opens. */
function gatedInput(gate) {
  return { message: { role: 'user', content: [{ text: `Prepare my yearly statement gate ${gate}` }] } };
}

test('a stream dropped mid-way is rejoined with streamId on the other instance', { skip }, async () => {
  const gate = `js-${randomUUID().slice(0, 8)}`;
  const input = gatedInput(gate);
  const ac = new AbortController();
  const first = streamFlow({ url: BANKING_URL, input, abortSignal: ac.signal });
  first.output.catch(() => {}); // rejected by the abort, checked below
  const streamId = await first.streamId;
  assert.match(streamId ?? '', UUID);
  const seen = [];
  for await (const chunk of first.stream) {
    seen.push(text(chunk));
    if (seen.length === 20) break; // the gate holds the rest
  }
  ac.abort();
  // The aborted stream's channel fails too: read it so that is handled.
  first.stream[Symbol.asyncIterator]().next().catch(() => {});
  await assert.rejects(first.output, /abort/i);

  writeFileSync(join(GATES, gate), '');
  const again = streamFlow({ url: URL2, input, streamId });
  const replayed = [];
  for await (const chunk of again.stream) replayed.push(text(chunk));
  const out = await again.output;
  assert.equal(await again.streamId, streamId);
  assert.equal(out.finishReason, 'stop');
  // The rejoin replays the stream from its start, then the live rest.
  assert.deepEqual(replayed.slice(0, 20), seen);
  assert.equal(replayed.filter((t) => t !== '').length, 40); // and the turn's end
  const final = out.message.content.map((p) => p.text ?? '').join('');
  assert.equal(replayed.join(''), final);
  assert.match(final, /no discrepancies found\.$/);

  // Ended, it can still be joined (until its retention is over).
  const late = streamFlow({ url: BANKING_URL, input, streamId });
  const lateChunks = [];
  for await (const chunk of late.stream) lateChunks.push(text(chunk));
  assert.deepEqual(lateChunks, replayed);
  assert.deepEqual(await late.output, out);

  // Another tenant's client cannot join it.
  if (AUTH_URL) {
    const foreign = streamFlow({
      url: `${AUTH_URL}/api/agents/bankingAgent`,
      input,
      streamId,
      headers: { Authorization: `Bearer ${CLIENT_KEY}` },
    });
    foreign.stream[Symbol.asyncIterator]().next().catch(() => {});
    await assert.rejects(foreign.output, /NOT_FOUND: Stream not found/);
  }
});

test('an unknown stream id is NOT_FOUND', { skip }, async () => {
  const s = streamFlow({ url: BANKING_URL, input: gatedInput('unused'), streamId: randomUUID() });
  s.stream[Symbol.asyncIterator]().next().catch(() => {});
  await assert.rejects(s.output, /NOT_FOUND: Stream not found/);
});
