// Package envtest starts a real Kubernetes control plane (etcd and kube-apiserver built from Go
// modules, see hack/envtest-bins.sh) with actgate's CRDs installed, for integration tests.
//
// It wraps controller-runtime's envtest: the binaries come from KUBEBUILDER_ASSETS or, when that
// is unset, from running hack/envtest-bins.sh (so plain `go test` works without make), the CRDs
// come from config/crd/bases with ErrorIfCRDPathMissing, and the returned Env carries a client,
// the rest.Config, a scheme with client-go's and actgate's types, and a kubeconfig file for the
// real kubectl and helm built beside the server.
//
// One test owning a server:
//
//	func TestSomething(t *testing.T) {
//		env := envtest.Start(t) // skips under -short; stopped by t.Cleanup
//		ns := env.Namespace(t)
//		...
//	}
//
// One server shared by a package (a start costs 3–4 s on two cores):
//
//	var env *envtest.Env
//
//	func TestMain(m *testing.M) {
//		flag.Parse()
//		if testing.Short() {
//			os.Exit(m.Run()) // tests call envtest.SkipIfShort first
//		}
//		var err error
//		if env, err = envtest.New(context.Background()); err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//		code := m.Run()
//		_ = env.Stop()
//		os.Exit(code)
//	}
//
// kubectl and helm write caches and configuration under $HOME; Kubectl and Helm give them a
// private XDG_CACHE_HOME, XDG_CONFIG_HOME, KUBECACHEDIR and HELM_*_HOME in their own process
// environment only. The test process's environment is never changed: exporting XDG_CACHE_HOME
// around a Go build would move Go's build cache, and every build would start cold.
//
// Stop any manager or informer started against the Env (cancel its context) before Stop, or the
// API server's shutdown waits out its open watches; cleanups registered after Start run first.
package envtest
