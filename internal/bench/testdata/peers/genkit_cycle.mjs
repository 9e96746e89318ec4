// A stand-in for the Genkit JS peer: checks its arguments (DIR SESSIONS
// CYCLES) and prints a line of noise, then the peer's JSON line.
import { statSync } from 'node:fs';
const [dir, sessions, cycles] = process.argv.slice(2);
if (!statSync(dir).isDirectory()) throw new Error('no scratch directory');
const n = Number(sessions) * Number(cycles);
console.log('some warning a runtime prints');
console.log(JSON.stringify({ peer: 'fake-genkit', sessions: Number(sessions), cycles: n, seconds: 1, cyclesPerSec: 50, storeBytes: 100 * n }));
