package libvirt

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// DefaultPort is libvirtd's TLS port.
const DefaultPort = 16514

// Endpoint is where libvirtd listens for TLS connections.
type Endpoint struct {
	Host string // DNS name or IP literal, without brackets
	Port int
}

// Address returns host:port for dialling, with IPv6 literals bracketed.
func (e Endpoint) Address() string { return net.JoinHostPort(e.Host, strconv.Itoa(e.Port)) }

// String returns the canonical transport URI.
func (e Endpoint) String() string { return "qemu+tls://" + e.Address() + "/system" }

// ParseEndpoint accepts qemu+tls://host[:port][/anything] or a bare host[:port]; IPv6 literals
// are bracketed ([fd00::1]:16514). The path is ignored: which hypervisor driver to open is the
// driver URI's business (Dialer.URI), not the transport's. Every other scheme is refused
// because this client only speaks mutual TLS.
func ParseEndpoint(s string) (Endpoint, error) {
	authority := s
	if scheme, rest, ok := strings.Cut(s, "://"); ok {
		if !strings.EqualFold(scheme, "qemu+tls") {
			return Endpoint{}, endpointErrorf("scheme %q is not supported; this client speaks mutual TLS only (qemu+tls://host/system).", scheme)
		}
		authority = rest
		if i := strings.IndexAny(authority, "/?#"); i >= 0 {
			authority = authority[:i]
		}
		if i := strings.LastIndexByte(authority, '@'); i >= 0 {
			authority = authority[i+1:] // a libvirt URI may name a user; TLS has no use for it
		}
	} else if strings.ContainsAny(s, "/?#@") {
		return Endpoint{}, endpointErrorf("%q is neither qemu+tls://host[:port]/system nor host[:port]", s)
	}
	host, port, err := splitHostPort(authority)
	if err != nil {
		return Endpoint{}, err
	}
	if host == "" {
		return Endpoint{}, endpointErrorf("no host in %q", s)
	}
	if strings.ContainsAny(host, " \t\r\n[]") {
		return Endpoint{}, endpointErrorf("invalid host %q in %q", host, s)
	}
	return Endpoint{Host: host, Port: port}, nil
}

// splitHostPort splits host[:port], [v6][:port] or a bare IPv6 literal (which has no port).
func splitHostPort(a string) (string, int, error) {
	host, portText := a, ""
	switch {
	case strings.HasPrefix(a, "["):
		end := strings.IndexByte(a, ']')
		if end < 0 {
			return "", 0, endpointErrorf("missing ']' in IPv6 address %q", a)
		}
		host = a[1:end]
		if net.ParseIP(host) == nil || !strings.Contains(host, ":") {
			return "", 0, endpointErrorf("%q is not an IPv6 address", host)
		}
		rest := a[end+1:]
		if rest != "" {
			p, ok := strings.CutPrefix(rest, ":")
			if !ok {
				return "", 0, endpointErrorf("unexpected %q after IPv6 address", rest)
			}
			portText = p
		}
	case strings.Count(a, ":") == 1:
		host, portText, _ = strings.Cut(a, ":")
	case strings.Count(a, ":") > 1 && net.ParseIP(a) == nil:
		return "", 0, endpointErrorf("%q: IPv6 addresses must be bracketed, e.g. [fd00::1]:16514", a)
	}
	if portText == "" {
		if strings.HasSuffix(a, ":") {
			return "", 0, endpointErrorf("port %q is not a number", portText)
		}
		return host, DefaultPort, nil
	}
	port, err := strconv.Atoi(portText)
	if err != nil || strings.ContainsAny(portText, "+-") {
		return "", 0, endpointErrorf("port %q is not a number", portText)
	}
	if port < 1 || port > 65535 {
		return "", 0, endpointErrorf("port %d is out of range", port)
	}
	return host, port, nil
}

func endpointErrorf(format string, args ...any) error {
	return fmt.Errorf("invalid connection.endpoint: "+format, args...)
}
