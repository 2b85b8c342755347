package vsphere

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/url"
	"strings"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// Keys of a vsphere Provider's credentials Secret.
const (
	KeyUsername = "username"
	KeyPassword = "password"
)

// endpointFor is the vCenter endpoint of p, from the data of its credentials Secret and its CA
// (PEM), or a refusal for the Provider's Ready condition naming the field. Messages never carry
// the endpoint when it holds user information, nor anything of the Secret but its key names.
func endpointFor(p *banlieuev1.Provider, creds map[string][]byte, caPEM []byte) (Endpoint, *Refusal) {
	refuse := func(reason, format string, args ...any) (Endpoint, *Refusal) {
		return Endpoint{}, &Refusal{Reason: reason, Message: fmt.Sprintf(format, args...)}
	}
	c := &p.Spec.Connection
	if c.InsecureSkipTLSVerify {
		return refuse(banlieuev1.ReasonConnectFailed, "invalid connection.insecureSkipTLSVerify: the vsphere provider always verifies vCenter's certificate against caBundle; remove insecureSkipTLSVerify")
	}
	raw := c.Endpoint
	if !strings.Contains(raw, "://") {
		raw = "https://" + raw
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "":
		if strings.Contains(c.Endpoint, "@") {
			return refuse(banlieuev1.ReasonConnectFailed, "invalid connection.endpoint: not a URL; write it as https://vcenter.example/sdk")
		}
		return refuse(banlieuev1.ReasonConnectFailed, "invalid connection.endpoint %q: not a URL; write it as https://vcenter.example/sdk", c.Endpoint)
	case u.User != nil:
		return refuse(banlieuev1.ReasonConnectFailed, "invalid connection.endpoint: it carries user information; the user and password belong in the credentials Secret (keys username and password)")
	case u.Scheme != "https":
		return refuse(banlieuev1.ReasonConnectFailed, "invalid connection.endpoint: scheme %q is not supported; the vsphere provider speaks HTTPS only (https://vcenter.example/sdk)", u.Scheme)
	case u.Path != "" && u.Path != "/" && u.Path != "/sdk":
		return refuse(banlieuev1.ReasonConnectFailed, "invalid connection.endpoint: path %q is not vCenter's SDK; write it as https://%s/sdk", u.Path, u.Host)
	case u.RawQuery != "" || u.Fragment != "":
		return refuse(banlieuev1.ReasonConnectFailed, "invalid connection.endpoint: a query or fragment has no meaning there; write it as https://%s/sdk", u.Host)
	}
	for _, key := range []string{KeyUsername, KeyPassword} {
		if len(creds[key]) == 0 {
			return refuse(banlieuev1.ReasonCredentialsUnavailable, "missing required field: secret.data.%s (Secret %q)", key, c.CredentialsRef.Name)
		}
	}
	if len(caPEM) == 0 {
		return refuse(banlieuev1.ReasonCredentialsUnavailable, "missing required field: Provider.spec.connection.caBundle")
	}
	if !holdsCertificate(caPEM) {
		return refuse(banlieuev1.ReasonCredentialsUnavailable, "invalid caBundle: it holds no PEM certificate")
	}
	return Endpoint{URL: "https://" + u.Host + "/sdk", Username: string(creds[KeyUsername]), Password: string(creds[KeyPassword]), CAPEM: caPEM}, nil
}

// holdsCertificate reports whether pemData has at least one parsable certificate.
func holdsCertificate(pemData []byte) bool {
	for rest := pemData; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return false
		}
		if b.Type == "CERTIFICATE" {
			if _, err := x509.ParseCertificate(b.Bytes); err == nil {
				return true
			}
		}
	}
}
