// Package demo holds the built-in demo agents and the deterministic, offline
// demo model that drives them when no model provider is configured.
//
// The banking agent asks a human (the userApproval interrupt) before it moves
// money with transferMoney; the demo model plays the part of a provider that
// follows that system prompt, streaming its text answers in chunks.
package demo
