package node

import (
	"fmt"
	"path/filepath"
)

// containerdConfig keeps every folder and socket of containerd in the run's folder, runs runc
// with cgroupfs, and sets restrict_oom_score_adj: root here lacks CAP_SYS_RESOURCE, and
// without it every sandbox fails in runc create.
func containerdConfig(dir string) string {
	c := filepath.Join(dir, "containerd")
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[7]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[8]q
    max_conf_num = 1
`, filepath.Join(c, "root"), filepath.Join(c, "state"), filepath.Join(c, "containerd.sock"), filepath.Join(c, "containerd.sock.ttrpc"),
		filepath.Join(c, "opt"), PauseImage, filepath.Join(c, "runc"), filepath.Join(dir, "cni", "net.d"))
}

// cniConfig is the pod network: a bridge whose gateway is the node's address, no masquerade
// (pod traffic never leaves the machine), hairpin for a pod reaching itself through a Service,
// and host-local addresses kept in the run's folder.
func cniConfig(dir string) string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": %q,
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": %q, "gateway": %q}]],
      "routes": [{"dst": "0.0.0.0/0"}],
      "dataDir": %q
    }
  }]
}
`, cniNetwork, Bridge, PodCIDR, NodeIP, filepath.Join(dir, "cni", "ipam"))
}

// kubeletConfig: cgroupfs under the node's own cgroup root (cgroups here are v1), webhook
// authentication and authorization with the run's CA, no read-only port, the health port on
// loopback, logs and plugins in the run's folder, no cluster DNS (an empty resolv.conf), and
// thresholds low enough that a busy shared disk neither evicts pods nor collects the imported
// images (pods use them with imagePullPolicy Never).
func kubeletConfig(dir, name, socket string, serving certPair, caFile string, port, healthzPort int) string {
	k := filepath.Join(dir, "kubelet")
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /%s
cgroupsPerQOS: true
containerRuntimeEndpoint: unix://%s
address: %s
port: %d
healthzBindAddress: 127.0.0.1
healthzPort: %d
readOnlyPort: 0
tlsCertFile: %s
tlsPrivateKeyFile: %s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization:
  mode: Webhook
failSwapOn: false
podLogsDir: %s
volumePluginDir: %s
resolvConf: %s
clusterDomain: cluster.local
oomScoreAdj: 0
maxPods: 40
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
syncFrequency: 10s
nodeStatusUpdateFrequency: 5s
shutdownGracePeriod: 0s
`, name, socket, NodeIP, port, healthzPort, serving.CertFile, serving.KeyFile, caFile,
		filepath.Join(k, "pod-logs"), filepath.Join(k, "volume-plugins"), filepath.Join(k, "resolv.conf"))
}

// kubeProxyConfig: iptables mode, health and metrics on loopback, conntrack sysctls left
// alone (zeros), NodePorts only on the node's address, never on localhost.
func kubeProxyConfig(kubeconfig, name string, healthz, metrics int) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
mode: iptables
clusterCIDR: %s
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
oomScoreAdj: 0
nodePortAddresses: [%s/32]
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  localhostNodePorts: false
  masqueradeAll: false
`, kubeconfig, name, PodCIDR, healthz, metrics, NodeIP)
}
