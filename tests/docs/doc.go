// Package docs checks the code blocks and links of README.md and docs/*.md.
// Every fenced block is checked by its language, or skipped by a visible
// marker with a reason; shell blocks that talk to a server run against one
// the test starts. It has no code of its own and is imported by nothing.
package docs
