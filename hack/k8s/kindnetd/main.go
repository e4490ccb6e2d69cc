// Command kindnetd stands in for kind's default CNI daemon (docker.io/kindest/kindnetd), whose
// source no module on the Go module proxy carries. It does what kind's manifest asks of it,
// with the same inputs (HOST_IP, POD_SUBNET, CONTROL_PLANE_ENDPOINT, the service account):
//   - writes /etc/cni/net.d/10-kindnet.conflist for its own node (the node whose InternalIP is
//     HOST_IP): ptp with host-local addresses from the node's spec.podCIDR, then portmap;
//   - routes every other node's pod CIDR through that node's InternalIP;
//   - masquerades traffic from the pod subnet to anything outside it and the nodes' network.
// Network policies (kindnet enforces them) are not implemented.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const (
	confDir     = "/etc/cni/net.d"
	confFile    = "10-kindnet.conflist"
	masqChain   = "KIND-MASQ-AGENT"
	resyncEvery = 10 * time.Second
)

func main() {
	hostIP := net.ParseIP(os.Getenv("HOST_IP"))
	if hostIP == nil {
		log.Fatalf("HOST_IP %q is not an address", os.Getenv("HOST_IP"))
	}
	_, podSubnet, err := net.ParseCIDR(strings.Split(os.Getenv("POD_SUBNET"), ",")[0])
	if err != nil {
		log.Fatalf("POD_SUBNET: %v", err)
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		log.Fatalf("in-cluster config: %v", err)
	}
	// kind passes the API server's address so that this daemon need not wait for kube-proxy.
	if ep := os.Getenv("CONTROL_PLANE_ENDPOINT"); ep != "" {
		cfg.Host = "https://" + ep
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Fatalf("client: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log.Printf("kindnetd stand-in: host %s, pod subnet %s", hostIP, podSubnet)
	for {
		if err := reconcile(ctx, client, hostIP, podSubnet); err != nil {
			log.Printf("reconcile: %v", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(resyncEvery):
		}
	}
}

func reconcile(ctx context.Context, client kubernetes.Interface, hostIP net.IP, podSubnet *net.IPNet) error {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	var nodeNets []string
	for i := range nodes.Items {
		node := &nodes.Items[i]
		ip := internalIP(node)
		if ip == nil {
			continue
		}
		nodeNets = append(nodeNets, ip.String()+"/32")
		if node.Spec.PodCIDR == "" {
			continue
		}
		if ip.Equal(hostIP) {
			if err := writeConfig(node.Spec.PodCIDR); err != nil {
				return err
			}
			continue
		}
		if err := routeVia(node.Spec.PodCIDR, ip); err != nil {
			return fmt.Errorf("route to node %s: %w", node.Name, err)
		}
	}
	return masquerade(podSubnet, nodeNets)
}

func internalIP(node *v1.Node) net.IP {
	for _, a := range node.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			if ip := net.ParseIP(a.Address); ip != nil && ip.To4() != nil {
				return ip
			}
		}
	}
	return nil
}

// writeConfig replaces the CNI configuration when it differs, atomically: the runtime reads
// the directory for its readiness and must never see half a file.
func writeConfig(podCIDR string) error {
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "kindnet",
		"plugins": []any{
			map[string]any{
				"type":   "ptp",
				"ipMasq": false,
				"mtu":    1500,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": "/run/cni-ipam-state",
					"routes":  []any{map[string]any{"dst": "0.0.0.0/0"}},
					"ranges":  []any{[]any{map[string]any{"subnet": podCIDR}}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]any{"portMappings": true}},
		},
	}
	data, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(confDir, confFile)
	if old, err := os.ReadFile(path); err == nil && string(old) == string(data) {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	log.Printf("writing %s for pod CIDR %s", path, podCIDR)
	return os.Rename(tmp, path)
}

func routeVia(podCIDR string, gw net.IP) error {
	_, dst, err := net.ParseCIDR(podCIDR)
	if err != nil {
		return err
	}
	return netlink.RouteReplace(&netlink.Route{Dst: dst, Gw: gw})
}

// masquerade keeps a chain that returns for the pod subnet and the nodes' addresses and
// masquerades the rest, reached from POSTROUTING for traffic that leaves a pod.
func masquerade(podSubnet *net.IPNet, nodeNets []string) error {
	rules := []string{"*nat", ":" + masqChain + " - [0:0]"}
	for _, dst := range append([]string{podSubnet.String()}, nodeNets...) {
		rules = append(rules, fmt.Sprintf("-A %s -d %s -j RETURN", masqChain, dst))
	}
	rules = append(rules, fmt.Sprintf("-A %s -j MASQUERADE", masqChain), "COMMIT", "")
	restore := exec.Command("iptables-restore", "--noflush", "--wait")
	restore.Stdin = strings.NewReader(strings.Join(rules, "\n"))
	if out, err := restore.CombinedOutput(); err != nil {
		return fmt.Errorf("iptables-restore: %v: %s", err, out)
	}
	jump := []string{"-t", "nat", "POSTROUTING", "-s", podSubnet.String(), "-m", "addrtype", "!", "--dst-type", "LOCAL", "-j", masqChain}
	if exec.Command("iptables", append([]string{"--wait", "-C"}, jump...)...).Run() == nil {
		return nil
	}
	if out, err := exec.Command("iptables", append([]string{"--wait", "-A"}, jump...)...).CombinedOutput(); err != nil {
		return fmt.Errorf("iptables -A POSTROUTING: %v: %s", err, out)
	}
	return nil
}
