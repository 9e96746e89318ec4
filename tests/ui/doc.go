// Package ui tests the approvals dashboard in a real browser: headless
// Chromium (Debian's chromium package) driven with chromedp against the
// real HTTP stack and PostgreSQL. Screenshots of the inbox, a decision
// page and the reports go to $HOLDPOINT_UI_SCREENSHOTS (default
// $TMPDIR/holdpoint-ui-screenshots). Without Chromium the tests skip,
// loudly, except under CI, where they fail.
package ui
