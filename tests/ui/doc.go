// Package ui tests the approvals dashboard in a real browser: headless
// Chromium (Debian's chromium package) driven with chromedp against the
// real HTTP stack and PostgreSQL. Screenshots of the inbox, a decision
// page before and after decisions (its own, another operator's, with its
// audit trail), the history, the sessions, the reports and the webhooks
// go to $HOLDPOINT_UI_SCREENSHOTS (default
// $TMPDIR/holdpoint-ui-screenshots). axe_test.go checks every page with
// axe-core, which tests/ui/install.sh (run by make test) installs from
// package-lock.json into node_modules here. Without Chromium or axe-core
// the tests skip, loudly, except under CI, where they fail.
package ui
