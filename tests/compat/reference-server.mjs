// The Genkit JS 1.42 reference server for the Go client's compatibility
// test (client/reference_test.go): the seed page's bankingAgent, with a
// stub model, served by @genkit-ai/express the way Genkit serves an agent
// (the turn at /bankingAgent, its snapshot and abort actions beside it).
//
// usage: node reference-server.mjs DIR   (DIR holds the file session store)
// Prints "listening PORT" on stdout once it accepts connections on
// 127.0.0.1, and runs until killed.
import { genkit, z } from 'genkit/beta';
import { FileSessionStore } from '@genkit-ai/ai/session-stores';
import { expressHandler } from '@genkit-ai/express';
import express from 'express';

const [dir] = process.argv.slice(2);
if (!dir) {
  console.error('usage: node reference-server.mjs DIR');
  process.exit(2);
}

const ai = genkit({});
// The user's message -> ask for approval of the transfer it names; the
// approval's answer -> the outcome.
ai.defineModel({ name: 'stub', supports: { tools: true, multiturn: true } }, async (req) => {
  const last = req.messages.at(-1);
  if (last.role === 'user') {
    const text = last.content.map((p) => p.text ?? '').join('');
    return {
      finishReason: 'stop',
      message: { role: 'model', content: [{ toolRequest: {
        name: 'userApproval', ref: String(req.messages.length),
        input: { action: 'transferMoney', details: text } } }] },
    };
  }
  const answer = last.content.find((p) => p.toolResponse)?.toolResponse?.output;
  return { finishReason: 'stop', message: { role: 'model', content: [{
    text: answer?.approved ? 'Done: the transfer is made.' : `Cancelled: ${answer?.feedback ?? 'not approved'}.` }] } };
});

const userApproval = ai.defineInterrupt({
  name: 'userApproval',
  description: 'Ask the user for approval before a sensitive action.',
  inputSchema: z.object({ action: z.string(), details: z.string() }),
  outputSchema: z.object({ approved: z.boolean(), feedback: z.string().optional() }),
});

const bankingAgent = ai.defineAgent({
  name: 'bankingAgent',
  model: 'stub',
  system: 'You are a banking assistant.',
  tools: [userApproval],
  store: new FileSessionStore(dir),
});

const app = express();
app.use(express.json());
app.post('/bankingAgent', expressHandler(bankingAgent));
app.post('/bankingAgent/getSnapshot', expressHandler(bankingAgent.getSnapshotDataAction));
app.post('/bankingAgent/abort', expressHandler(bankingAgent.abortAgentAction));
const server = app.listen(0, '127.0.0.1', () => {
  console.log(`listening ${server.address().port}`);
});
