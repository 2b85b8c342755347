package console

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// The aggregated API: group, version and the subresource a user is authorised for.
const (
	Group       = "subresources.banlieue.io"
	Version     = "v1alpha1"
	Resource    = "virtualmachines"
	Subresource = "console"
)

// UpgradeProtocol is the HTTP Upgrade token of a console: after 101 Switching Protocols the
// connection carries the raw console bytes both ways. The kube-apiserver proxies Upgrade
// requests to aggregated servers unchanged.
const UpgradeProtocol = "banlieue-console"

// ForceParam is the query parameter that takes the console from another session.
const ForceParam = "force"

// Path is the aggregated API path of vm's console, relative to the API server.
func Path(vm types.NamespacedName) string {
	return fmt.Sprintf("/apis/%s/%s/namespaces/%s/%s/%s/%s", Group, Version, vm.Namespace, Resource, vm.Name, Subresource)
}

// parsePath is Path's inverse; ok is false for any other path.
func parsePath(p string) (types.NamespacedName, bool) {
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	if len(parts) != 8 || parts[0] != "apis" || parts[1] != Group || parts[2] != Version || parts[3] != "namespaces" ||
		parts[5] != Resource || parts[7] != Subresource || parts[4] == "" || parts[6] == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: parts[4], Name: parts[6]}, true
}

// ProviderPath is the provider endpoint's path for a LibvirtMachine's console.
func ProviderPath(machine types.NamespacedName) string {
	return "/console/namespaces/" + machine.Namespace + "/libvirtmachines/" + machine.Name
}

// ParseProviderPath is ProviderPath's inverse.
func ParseProviderPath(p string) (types.NamespacedName, bool) {
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	if len(parts) != 5 || parts[0] != "console" || parts[1] != "namespaces" || parts[3] != "libvirtmachines" ||
		parts[2] == "" || parts[4] == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: parts[2], Name: parts[4]}, true
}

// Audience is the token audience a relay uses for provider's console endpoint, and the only one
// that endpoint accepts: one per Provider, so a token sent to one provider is worth nothing to
// another (docs/security.md, "Console").
func Audience(provider types.NamespacedName) string {
	return "console.banlieue.io/" + provider.Namespace + "/" + provider.Name
}

// IsUpgrade reports whether r asks for a console connection.
func IsUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), UpgradeProtocol) &&
		headerHasToken(r.Header, "Connection", "upgrade")
}

func headerHasToken(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// Hijack answers r with 101 Switching Protocols and returns the raw connection, with whatever
// the client sent after its request already buffered.
func Hijack(w http.ResponseWriter) (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the connection cannot be taken over (HTTP/2?)")
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	if _, err := rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + UpgradeProtocol + "\r\n\r\n"); err != nil {
		conn.Close()
		return nil, nil, err
	}
	if err := rw.Flush(); err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, rw, nil
}

// Splice copies a to b and b to a until either side ends or ctx is done, then closes both.
func Splice(ctx context.Context, a io.ReadWriteCloser, aIn io.Reader, b io.ReadWriteCloser, bIn io.Reader) {
	var once sync.Once
	closeBoth := func() { once.Do(func() { _, _ = a.Close(), b.Close() }) } // hanging up: nothing is left to flush
	stop := context.AfterFunc(ctx, closeBoth)
	defer stop()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(b, aIn); closeBoth(); done <- struct{}{} }()
	go func() { _, _ = io.Copy(a, bIn); closeBoth(); done <- struct{}{} }()
	<-done
	<-done
}
