package testenv

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// scraperNamespace holds the test ServiceAccounts that scrape /metrics; envtest creates it.
const scraperNamespace = "default"

// Scraper reads a role's /metrics as a scraper in a cluster does (docs/operations.md,
// "Metrics"): over HTTPS with a ServiceAccount's bearer token. The role's certificate is
// self-signed and generated at its start, so it is not verified, as a scraper of a component
// with a self-signed certificate skips verification.
type Scraper struct {
	token  string
	client *http.Client
}

// MetricsReader is a Scraper with the token of a ServiceAccount bound to ClusterRole
// banlieue-metrics-reader, created from config/rbac/metrics-reader.yaml as shipped unless an
// install made it already. On an attached cluster (Attach) the binding and the ServiceAccount
// are removed when t ends.
func (e *Env) MetricsReader(t testing.TB) *Scraper {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	data, err := os.ReadFile(filepath.Join(RepoRoot(), "config", "rbac", "metrics-reader.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(data, &role); err != nil {
		t.Fatalf("config/rbac/metrics-reader.yaml: %v", err)
	}
	if err := e.Client.Create(ctx, &role); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating ClusterRole %s: %v", role.Name, err)
	}
	const name = "banlieue-test-metrics-reader"
	scraper := e.ServiceAccountScraper(t, name)
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: scraperNamespace, Name: name}},
	}
	if err := e.Client.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("binding %s to ClusterRole %s: %v", name, role.Name, err)
	}
	if e.env == nil {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = e.Client.Delete(ctx, binding)
			_ = e.Client.Delete(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: scraperNamespace, Name: name}})
		})
	}
	return scraper
}

// ServiceAccountScraper is a Scraper with the token of ServiceAccount default/name (created if
// missing) and whatever that ServiceAccount is bound to. The token comes from the TokenRequest
// API, as a projected token in a pod does, and outlives any test.
func (e *Env) ServiceAccountScraper(t testing.TB, name string) *Scraper {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: scraperNamespace, Name: name}}
	if err := e.Client.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating ServiceAccount %s/%s: %v", scraperNamespace, name, err)
	}
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(scraperNamespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(24 * 3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token of ServiceAccount %s/%s: %v", scraperNamespace, name, err)
	}
	return NewScraper(tr.Status.Token)
}

// NewScraper is a Scraper with token, for a cluster the test reaches without an Env (the real
// node's).
func NewScraper(token string) *Scraper {
	return &Scraper{token: token, client: &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	}}
}

// Anonymous is s without its token: the request a scraper makes with no credentials.
func (s *Scraper) Anonymous() *Scraper { return &Scraper{client: s.client} }

// Get fetches https://127.0.0.1:port/metrics and returns the status code and body; code 0
// with the error text while the server does not answer.
func (s *Scraper) Get(port int) (int, string) { return s.GetFrom("127.0.0.1", port) }

// GetFrom is Get of https://host:port/metrics: a pod's, by its IP.
func (s *Scraper) GetFrom(host string, port int) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+net.JoinHostPort(host, strconv.Itoa(port))+"/metrics", nil)
	if err != nil {
		return 0, err.Error()
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err.Error()
	}
	return resp.StatusCode, string(body)
}
