package node

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
)

// HostIP is the machine's own address: the IPv4 address of the interface of its default
// route (else the first global unicast IPv4 address of an interface that is up and not the
// node's bridge). A server listening on it (e.g. the OpenID provider fixture, idp.Options.Addr)
// is reached at the same URL by the node's kube-apiserver, by pods (their packets to it are
// delivered locally, not forwarded, so the node's guard does not drop them) and by a browser on
// the machine; it exists before Up, so the URL can go into Options.AuthenticationConfig.
func HostIP() (string, error) {
	if name, err := defaultRouteInterface(); err == nil {
		if ip, err := ipv4Of(name); err == nil {
			return ip, nil
		}
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	for _, i := range ifaces {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 || i.Name == Bridge {
			continue
		}
		if ip, err := ipv4Of(i.Name); err == nil {
			return ip, nil
		}
	}
	return "", errors.New("node: the machine has no global IPv4 address")
}

// defaultRouteInterface reads /proc/net/route for the interface of the default route.
func defaultRouteInterface() (string, error) {
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 2 && fields[1] == "00000000" && fields[0] != "Iface" {
			return fields[0], nil
		}
	}
	return "", errors.New("node: no default route")
}

func ipv4Of(name string) (string, error) {
	i, err := net.InterfaceByName(name)
	if err != nil {
		return "", err
	}
	addrs, err := i.Addrs()
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String(), nil
		}
	}
	return "", fmt.Errorf("node: interface %s has no global IPv4 address", name)
}
