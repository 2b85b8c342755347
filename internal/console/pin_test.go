package console

import (
	"bufio"
	"context"
	"crypto/tls"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// staticToken stands in for the TokenRequest API, which the lab's console test exercises.
type staticToken string

func (s staticToken) Token(context.Context, string) (string, error) { return string(s), nil }

// consoleEndpoint is a provider's endpoint over real TLS with a certificate of SelfSignedTLS: it
// answers 101 to any request and records the Authorization headers it received.
type consoleEndpoint struct {
	addr string
	hash string
	mu   sync.Mutex
	auth []string
}

func (e *consoleEndpoint) received() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.auth...)
}

func startEndpoint(t *testing.T) *consoleEndpoint {
	t.Helper()
	cfg, err := SelfSignedTLS("localhost")
	if err != nil {
		t.Fatal(err)
	}
	hash, err := ServingKeyHash(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	e := &consoleEndpoint{addr: l.Addr().String(), hash: hash}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
				req, err := http.ReadRequest(bufio.NewReader(conn))
				if err != nil {
					return // the handshake failed: nothing arrived
				}
				e.mu.Lock()
				e.auth = append(e.auth, req.Header.Get("Authorization"))
				e.mu.Unlock()
				_, _ = conn.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + UpgradeProtocol + "\r\n\r\n"))
			}()
		}
	}()
	return e
}

func TestRelayPinsTheProvidersPublishedKey(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	endpoint := startEndpoint(t)
	other := startEndpoint(t) // another replica's (or another Provider's) key
	provider := func(name string, keys ...banlieuev1.ConsoleKey) *banlieuev1.Provider {
		return &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: name},
			Status: banlieuev1.ProviderStatus{ConsoleKeys: keys}}
	}
	key := func(pod, hash string, age time.Duration) banlieuev1.ConsoleKey {
		return banlieuev1.ConsoleKey{Pod: pod, SHA256: hash, RenewedAt: metav1.NewTime(now.Add(-age))}
	}
	machine := &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "web-01"}}
	for _, tc := range []struct {
		name    string
		p       *banlieuev1.Provider
		wantErr string // "" when the dial must succeed
	}{
		{"the key published by one of the replicas", provider("kvm-a", key("p-1", other.hash, time.Minute), key("p-0", endpoint.hash, 9*time.Minute)), ""},
		{"a key renewed just within the validity", provider("kvm-a", key("p-0", endpoint.hash, banlieuev1.ConsoleKeyValidity)), ""},
		{"only another key published", provider("kvm-a", key("p-1", other.hash, time.Minute)),
			"is not among Provider tenant-a/kvm-a's published keys (status.consoleKeys)"},
		{"the key expired", provider("kvm-a", key("p-0", endpoint.hash, banlieuev1.ConsoleKeyValidity+time.Second)),
			"last renewed at 2026-12-07T11:29:59Z, more than 30m0s ago"},
		{"no key published", provider("kvm-a"), "publishes no console key (status.consoleKeys)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(endpoint.received())
			relay := &Relay{Tokens: staticToken("relay-token-" + tc.p.Name), TLS: ProviderTLS(), Now: func() time.Time { return now },
				Address: func(*banlieuev1.Provider) (string, error) { return endpoint.addr, nil }}
			up, err := relay.Dial(ctx, tc.p, machine, false)
			got := endpoint.received()[before:]
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Dial = %v, want a console", err)
				}
				up.Close()
				if len(got) != 1 || got[0] != "Bearer relay-token-kvm-a" {
					t.Fatalf("the endpoint received Authorization %q, want the relay's token once", got)
				}
				return
			}
			if err == nil {
				up.Close()
				t.Fatalf("Dial succeeded, want %q", tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Dial = %v, want it to say %q", err, tc.wantErr)
			}
			// Give a request that was sent all the time it needs to arrive: none may.
			time.Sleep(200 * time.Millisecond)
			if got := endpoint.received()[before:]; len(got) != 0 {
				t.Fatalf("the endpoint received %q although its key is not trusted: the token left the relay", got)
			}
		})
	}
}

func TestFreshKeys(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	at := func(age time.Duration) metav1.Time { return metav1.NewTime(now.Add(-age)) }
	keys := []banlieuev1.ConsoleKey{
		{Pod: "self", SHA256: "a", RenewedAt: at(time.Hour)},                     // its own, however old: about to be renewed
		{Pod: "live", SHA256: "b", RenewedAt: at(time.Minute)},                   // another replica, fresh
		{Pod: "edge", SHA256: "c", RenewedAt: at(banlieuev1.ConsoleKeyValidity)}, // at the bound: kept
		{Pod: "gone", SHA256: "d", RenewedAt: at(2 * time.Hour)},                 // a crashed replica's
	}
	got := freshKeys(keys, "self", now)
	var pods []string
	for _, k := range got {
		pods = append(pods, k.Pod)
	}
	if strings.Join(pods, ",") != "self,live,edge" {
		t.Fatalf("freshKeys kept %v, want self,live,edge", pods)
	}
	if len(keys) != 4 {
		t.Fatalf("freshKeys changed its input: %v", keys)
	}
}
