// Package approval holds the tests of the approval service (internal/approval) on real
// processes: a real kube-apiserver (test/envtest) that trusts the OpenID provider fixture
// (test/testutil/idp) through structured authentication configuration, with actgate's real
// BindingMoment admission webhook (test/testutil/webhookenv); the service served over TLS on
// loopback; and headless Chromium (internal/console/consoletest) signing in at the provider's
// login page. The package has no non-test code.
package approval
