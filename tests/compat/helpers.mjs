// Shared helpers of the compatibility tests: they drive a running Holdpoint
// server (HOLDPOINT_URL) with the official Genkit JS agent client.
import { remoteAgent } from 'genkit/beta/client';

const base = process.env.HOLDPOINT_URL;
if (!base) {
  throw new Error(
    'HOLDPOINT_URL is not set: start a server (see run.sh) and point HOLDPOINT_URL at it, e.g. http://127.0.0.1:8080'
  );
}

/** The agent endpoint of the demo banking agent. */
export const BANKING_URL = `${base.replace(/\/+$/, '')}/api/agents/bankingAgent`;

/** The agent endpoint of the banking agent with client-managed state. */
export const CLIENT_STATE_URL = `${base.replace(/\/+$/, '')}/api/agents/bankingAgentClient`;

/**
 * A second server on the same database that requires credentials (run.sh
 * starts it), and a client key of its own tenant.
 */
export const AUTH_URL = process.env.HOLDPOINT_AUTH_URL?.replace(/\/+$/, '');
export const CLIENT_KEY = process.env.HOLDPOINT_CLIENT_KEY;

/** The base URL of the server (for the /api/v1 routes; dev mode needs no key). */
export const BASE_URL = base.replace(/\/+$/, '');

/** GETs an /api/v1 route of the dev server and returns the parsed answer. */
export async function getV1(path) {
  const res = await fetch(`${BASE_URL}/api/v1${path}`);
  assertOk(res);
  return res.json();
}

function assertOk(res) {
  if (res.status !== 200) throw new Error(`GET ${res.url} answered ${res.status}`);
}

/** A fresh client for the banking agent. */
export function bankingAgent() {
  return remoteAgent({ url: BANKING_URL });
}

/** A fresh client for the banking agent that keeps its state on the client. */
export function clientStateAgent() {
  return remoteAgent({ url: CLIENT_STATE_URL });
}

/** POSTs a protocol body as JSON and returns the status and parsed answer. */
export async function post(url, body) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

/** Resolves after ms milliseconds. */
export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Every part of the history, with its message's role. */
export function parts(messages) {
  return (messages ?? []).flatMap((m) =>
    (m.content ?? []).map((part) => ({ role: m.role, part }))
  );
}

/** Tool request parts of the history naming the tool. */
export function toolRequests(messages, name) {
  return parts(messages)
    .filter(({ part }) => part.toolRequest?.name === name)
    .map(({ part }) => part);
}

/** Tool response parts of the history naming the tool. */
export function toolResponses(messages, name) {
  return parts(messages)
    .filter(({ part }) => part.toolResponse?.name === name)
    .map(({ part }) => part);
}

/** Concatenated text of the history's messages of a role. */
export function textOf(messages, role) {
  return (messages ?? [])
    .filter((m) => !role || m.role === role)
    .flatMap((m) => m.content ?? [])
    .map((p) => p.text ?? '')
    .join('\n');
}

/** A random account number, so concurrent test files never collide. */
export function account() {
  return String(100000 + Math.floor(Math.random() * 900000));
}
