// The demo agents as a new user tries them: everyday phrasings, several
// transfers in one message (one approval each), mixed resumes, custom state
// and artifacts, approval deadlines, and the client-managed twin.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { AgentError } from 'genkit/beta/client';

import { account, bankingAgent, clientStateAgent, getV1, textOf, toolResponses } from './helpers.mjs';

const details = (res) => res.interrupts.map((i) => i.input.details);

test('everyday phrasings each ask for one approval with the right details', async () => {
  const to = account();
  const cases = [
    [`Could you please transfer 1,234.56 dollars to acct ${to}?`, `Transfer $1,234.56 to account ${to}`],
    [`send €20 to account number ${to}`, `Transfer €20.00 to account ${to}`],
    ['Move 100 EUR to my savings account', 'Transfer €100.00 to your savings account'],
    ['Please move $75.5 into checking', 'Transfer $75.50 to your checking account'],
    ['Pay Bob $20', 'Transfer $20.00 to Bob'],
    ['Can you send 12.5$ to Alice, please?', 'Transfer $12.50 to Alice'],
  ];
  for (const [ask, want] of cases) {
    const res = await bankingAgent().chat().send(ask);
    assert.equal(res.finishReason, 'interrupted', ask);
    assert.deepEqual(details(res), [want], ask);
    assert.equal(res.interrupts[0].name, 'userApproval');
  }
});

test('several transfers in one message: one approval each, resumed all at once', async () => {
  const agent = bankingAgent();
  const chat = agent.chat();
  const to = account();
  const res = await chat.send(`Transfer $50 to savings, €20 to Bob and $30 to account ${to}`);
  assert.deepEqual(details(res), [
    'Transfer $50.00 to your savings account',
    'Transfer €20.00 to Bob',
    `Transfer $30.00 to account ${to}`,
  ]);
  assert.equal(new Set(res.interrupts.map((i) => i.ref)).size, 3, 'each approval has its own ref');

  const done = await chat.resume({ respond: res.interrupts.map((i) => i.respond({ approved: true })) });
  assert.equal(done.finishReason, 'stop');
  assert.equal((done.text.match(/Done: transferred/g) ?? []).length, 3, done.text);
  assert.match(done.text, /€20\.00 to Bob/);
  const snap = await agent.getSnapshot(done.snapshotId);
  assert.equal(toolResponses(snap.state.messages, 'transferMoney').length, 3);
});

test('a resume that answers only some approvals is refused and they all stay open', async () => {
  const agent = bankingAgent();
  const chat = agent.chat();
  const res = await chat.send(`Send $5 to Alice and $6 to account ${account()}`);
  const [first, second] = res.interrupts;
  await assert.rejects(chat.resume({ respond: [first.respond({ approved: true })] }), (err) => {
    assert.ok(err instanceof AgentError, `want an AgentError, got ${err}`);
    assert.equal(err.status, 'INVALID_ARGUMENT');
    assert.match(err.message, new RegExp(second.ref));
    return true;
  });
  const done = await chat.resume({
    respond: [first.respond({ approved: true }), second.respond({ approved: false, feedback: 'not now' })],
  });
  assert.match(done.text, /^Done: transferred \$5\.00 to Alice/);
  // (done.messages is the client's own tally, which after a failed turn
  // repeats the last good message, as it does against the reference.)
  const snap = await agent.getSnapshot(done.snapshotId);
  assert.match(textOf(snap.state.messages, 'model'), /Cancelled: the transfer of \$6\.00 to account \d+ was not executed\. Your feedback: "not now"\./);
});

test('respond and restart mixed in one resume: the restarted approval is asked again, the answers wait', async () => {
  const agent = bankingAgent();
  const chat = agent.chat();
  const to = account();
  const res = await chat.send(`Transfer $11 to account ${to}, $12 to Bob and $13 to savings`);
  const [a, b, c] = res.interrupts;
  const again = await chat.resume({
    respond: [a.respond({ approved: true }), b.respond({ approved: false })],
    restart: [c.restart()],
  });
  assert.equal(again.finishReason, 'interrupted');
  assert.deepEqual(details(again), ['Transfer $13.00 to your savings account']);
  const pending = again.toolRequests.filter((p) => p.metadata?.pendingOutput !== undefined);
  assert.equal(pending.length, 2, 'the two answers wait as pendingOutput');

  const done = await chat.resume({ respond: [again.interrupts[0].respond({ approved: true })] });
  assert.equal(done.finishReason, 'stop');
  assert.match(done.text, new RegExp(`Done: transferred \\$11\\.00 to account ${to}`));
  assert.match(done.text, /Done: transferred \$13\.00 to your savings account/);
  const snap = await agent.getSnapshot(done.snapshotId);
  assert.equal(toolResponses(snap.state.messages, 'transferMoney').length, 2);
  assert.match(textOf(snap.state.messages, 'model'), /Cancelled: the transfer of \$12\.00 to Bob/);
});

test('executed transfers are the custom state (streamed as patches) and a statement artifact', async () => {
  const agent = bankingAgent();
  const chat = agent.chat();
  const res = await chat.send('Pay Carol $40 and send €9.99 to my checking account');
  const turn = chat.resumeStream({ respond: res.interrupts.map((i) => i.respond({ approved: true })) });
  const customs = [];
  const artifacts = [];
  for await (const chunk of turn.stream) {
    if (chunk.custom !== undefined) customs.push(chunk.custom);
    if (chunk.artifact) artifacts.push(chunk.artifact);
  }
  const done = await turn.response;
  assert.equal(done.finishReason, 'stop');
  assert.equal(customs.length, 2, 'one customPatch per executed transfer');
  assert.equal(customs[0].transfers.length, 1);
  assert.deepEqual(
    done.state.transfers.map((t) => [t.amount, t.currency, t.toAccount]),
    [
      [40, 'USD', 'Carol'],
      [9.99, 'EUR', 'checking'],
    ]
  );
  assert.equal(artifacts.length, 2);
  assert.equal(artifacts.at(-1).name, 'statement');
  const statement = done.artifacts.find((a) => a.name === 'statement');
  assert.ok(statement, `the response lists the statement: ${JSON.stringify(done.artifacts)}`);
  assert.match(statement.parts[0].text, /Total USD: \$40\.00/);
  assert.match(statement.parts[0].text, /Total EUR: €9\.99/);

  // The next turn starts from it, and a loaded chat sees it.
  const more = await chat.send('Pay Dave $1');
  const after = await chat.resume({ respond: [more.interrupts[0].respond({ approved: true })] });
  assert.equal(after.state.transfers.length, 3);
  const snap = await agent.getSnapshot({ sessionId: res.sessionId });
  assert.equal(snap.state.custom.transfers.length, 3);
  assert.match(snap.state.artifacts[0].parts[0].text, /Total USD: \$41\.00/);
});

test('an approval has a deadline, shown in the inbox', async () => {
  const res = await bankingAgent().chat().send(`Transfer $3 to account ${account()}`);
  const { items } = await getV1(`/interrupts?sessionId=${encodeURIComponent(res.sessionId)}`);
  assert.equal(items.length, 1);
  const left = Date.parse(items[0].expiresAt) - Date.now();
  assert.ok(left > 23 * 3600e3 && left <= 24 * 3600e3, `expiresAt ${items[0].expiresAt}`);
});

test('the client-managed twin round-trips its state across three turns, one paused', async () => {
  const chat = clientStateAgent().chat();
  const one = await chat.send('Pay Alice $12');
  assert.equal(one.finishReason, 'interrupted');
  assert.equal(one.snapshotId, undefined, 'nothing is stored on the server');
  const two = await chat.resume({ respond: [one.interrupts[0].respond({ approved: true })] });
  assert.match(two.text, /^Done: transferred \$12\.00 to Alice/);
  assert.equal(two.state.transfers.length, 1);
  const three = await chat.send('Now move 7 euros into checking');
  assert.equal(three.finishReason, 'interrupted');
  assert.deepEqual(details(three), ['Transfer €7.00 to your checking account']);
  assert.equal(three.state.transfers.length, 1, 'the custom state came back with the client');
  assert.equal(chat.messages.filter((m) => m.role === 'user').length, 2);
  const four = await chat.resume({ respond: [three.interrupts[0].respond({ approved: true })] });
  assert.equal(four.state.transfers.length, 2);
  assert.equal(toolResponses(four.messages, 'transferMoney').length, 2);
});
