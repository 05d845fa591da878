// Package console holds the browser test of `kubectl actgate console` (internal/console,
// internal/kubectlplugin) against a real kube-apiserver (test/envtest) with actgate's real
// admission webhooks installed from config/webhook and served by webhook.SetupWithManager: the
// plugin binary is built into a temporary folder first on PATH and started through the real
// kubectl as a user with their own kubeconfig, and the page is driven in real headless
// Chromium (internal/console/consoletest). The package has no non-test code.
package console
