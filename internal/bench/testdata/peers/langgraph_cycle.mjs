// A stand-in for the LangGraph.js peer: its first argument is a database
// URL (DATABASE_URL SESSIONS CYCLES); it prints the peer's JSON line.
const [url, sessions, cycles] = process.argv.slice(2);
if (!url.startsWith('postgres://')) { console.error('not a database URL: ' + url); process.exit(3); }
const n = Number(sessions) * Number(cycles);
console.log(JSON.stringify({ peer: 'fake-langgraph', cycles: n, cyclesPerSec: 25, dbBytesGrowth: 200 * n }));
