package build

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"syscall"
	"time"
)

const (
	// headerTimeout bounds waiting for a response; the body may take as long as it needs as
	// long as it keeps moving (idleTimeout, MinBytesPerSecond).
	headerTimeout = 30 * time.Second
	dialTimeout   = 30 * time.Second
	// maxRedirects is what browsers and net/http allow; a mirror network needs two or three.
	maxRedirects = 10
	// ruleRedirect names the redirect policy in a RefusedError; it has no flag.
	ruleRedirect = "the redirect policy"
)

// nonGlobal are the networks a source may not reach unless --allow-network lists them, beyond
// what netip.Addr's own predicates cover (private, loopback, link-local, multicast,
// unspecified): IANA's special-purpose ranges that are not globally reachable, and the IPv6
// translation prefixes that embed an IPv4 address (docs/guides/image-sources.md, "Transport").
var nonGlobal = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // CGNAT; also many clusters' Service and pod ranges
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and the broadcast address
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64: reaches whatever IPv4 address it embeds
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("100::/64"),        // discard-only
	netip.MustParsePrefix("2001::/23"),       // IETF protocol assignments, Teredo among them
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("2002::/16"),       // 6to4: embeds an IPv4 address
}

// addressClass says why ip is not a global address, or "" when it is one.
func addressClass(ip netip.Addr) string {
	ip = ip.Unmap() // ::ffff:127.0.0.1 is 127.0.0.1
	switch {
	case ip.IsLoopback():
		return "loopback"
	case ip.IsPrivate():
		return "private"
	case ip.IsLinkLocalUnicast():
		return "link-local" // 169.254.169.254, the instance metadata service, among them
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsMulticast():
		return "multicast"
	}
	for _, p := range nonGlobal {
		if p.Contains(ip) {
			return "non-global (" + p.String() + ")"
		}
	}
	return ""
}

// checkDestination refuses a connection to ip, which host resolved to, when ip is not a
// global address and no allowed network contains it.
func checkDestination(host string, ip netip.Addr, allow []netip.Prefix) error {
	class := addressClass(ip)
	if class == "" || slices.ContainsFunc(allow, func(p netip.Prefix) bool { return p.Contains(ip.Unmap()) }) {
		return nil
	}
	seen := fmt.Sprintf("%s is %s, a %s address", host, ip.Unmap(), class)
	if host == ip.Unmap().String() {
		seen = fmt.Sprintf("%s is a %s address", host, class)
	}
	return &RefusedError{Rule: "--" + FlagAllowNetwork, Seen: seen}
}

// newTransport is the transport of every request a build makes: downloads, their redirects and
// registry pulls. The destination is checked when the connection is made, on the address the
// name resolved to, so neither a redirect nor a DNS answer that changes between check and
// use (rebinding) reaches an address the policy refuses.
func newTransport(l Limits) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	// A proxy would make the dialled address the proxy's and hide the destination; the build
	// pod has no proxy settings anyway.
	t.Proxy = nil
	t.ResponseHeaderTimeout = headerTimeout
	// Compressed transfer encoding would make Range offsets refer to the encoded stream.
	t.DisableCompression = true
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		d := &net.Dialer{Timeout: dialTimeout, Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("dialling %s: %w", address, err)
			}
			return checkDestination(host, ap.Addr(), l.AllowNetworks)
		}}
		return d.DialContext(ctx, network, addr)
	}
	return t
}

// checkRedirect refuses a redirect from https to plain http, which would drop the
// authentication of the server the source names, and a chain longer than maxRedirects.
func checkRedirect(req *http.Request, via []*http.Request) error {
	prev := via[len(via)-1]
	if prev.URL.Scheme == "https" && req.URL.Scheme != "https" {
		return &RefusedError{Rule: ruleRedirect, Seen: fmt.Sprintf("https://%s redirected to %s://%s, a downgrade",
			prev.URL.Host, req.URL.Scheme, req.URL.Host)}
	}
	if len(via) >= maxRedirects {
		return &RefusedError{Rule: ruleRedirect, Seen: fmt.Sprintf("more than %d redirects, the last to %s", maxRedirects, req.URL.Host)}
	}
	return nil
}

// newHTTPClient is the client of URL downloads.
func newHTTPClient(l Limits) *http.Client {
	return &http.Client{Transport: newTransport(l), CheckRedirect: checkRedirect}
}

// isRefused says err, or an error it wraps, is a RefusedError.
func isRefused(err error) bool {
	var refused *RefusedError
	return errors.As(err, &refused)
}
