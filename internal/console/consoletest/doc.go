// Package consoletest drives the web console of package console in a real headless Chromium
// (Debian's chromium, through chromedp) for the browser tests of cmd/actgate and
// test/integration/console: it starts the browser, reads one moment's rendering back out of
// the live DOM (with the browser's computed layout, so "visible" means visible), clicks the
// four resolutions, and saves screenshots as test artifacts.
//
// The browser is never optional: when it is missing the test fails with how to install it,
// and `make test` provides it through hack/chromium.sh (ACTGATE_CHROMIUM).
package consoletest
