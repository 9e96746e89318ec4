// Package demo holds the built-in demo agents and the deterministic, offline
// demo model that drives them when no model provider is configured.
//
// The banking agent asks a human (the userApproval interrupt) before it moves
// money with transferMoney; the demo model plays the part of a provider that
// follows that system prompt, streaming its text answers in chunks.
//
// The payments agent runs on a stub model steered to act at once: it calls
// payVendor and refund without asking anyone, and the platform's approval
// policies (approval.Policy) are what pause them: a payment above
// $1,000 waits for two approvers holding approve:payments, every refund for
// a confirmation.
//
// # Test knobs
//
// Four environment variables, all unset (off) by default, let process-level
// tests (tests/cluster) observe side effects across processes and crashes:
//
//   - HOLDPOINT_DEMO_LEDGER=/path/file: every executed transferMoney appends
//     one JSON line (ref, amount, toAccount, transactionId, pid, at) to that
//     file, opened with O_APPEND and synced before the tool returns, so a
//     test can count executions across several server processes, including
//     one killed right after the tool ran. A failed write fails the tool.
//   - HOLDPOINT_DEMO_TOOL_DELAY=2s: the demo model waits that long (or until
//     its context ends) before answering when the last message is a tool
//     message, e.g. after transferMoney ran, which opens a window in which a
//     test can kill the process between the tool and the end of the turn.
//     An invalid value makes those model calls fail with an error naming it.
//   - HOLDPOINT_DEMO_STREAM_GATES=/path/dir: a statement request that says
//     "gate <name>" ("Prepare my yearly statement gate g1") streams half of
//     its 40 chunks, writes <name>.held in that directory, then waits (or
//     until its context ends) for the file <name> to exist there: a test
//     waits for <name>.held, drops the stream or aborts the turn while it
//     is held, and opens the gate after, with no timing race.
//   - HOLDPOINT_DEMO_FRESH_REFS=1: every tool request gets a ref of its
//     own, new at each model call, as most providers give: a model asked
//     the same again (by a takeover) answers other refs.
package demo
