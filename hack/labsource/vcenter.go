package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"banlieue.io/banlieue/internal/provider/vsphere/vcsimtest"
)

// serveVCenter starts an in-process vcsim on listen with the lab's serving certificate and the
// vSphere suites' inventory (vcsimtest: DC0, cluster DC0_C0 of two hosts, LocalDS_0,
// "VM Network", a template and a folder for banlieue's machines; docs/guides/vsphere-provider.md,
// "The lab"), its administrator's password in pki/vcenter-password (made once, mode 0600, never
// printed), and returns its SDK URL and what stops it.
func serveVCenter(listen string, cert tls.Certificate, roots *x509.CertPool, pki string) (string, func(), error) {
	password, err := vcenterPassword(filepath.Join(pki, "vcenter-password"))
	if err != nil {
		return "", nil, err
	}
	m, err := vcsimtest.NewModel()
	if err != nil {
		return "", nil, err
	}
	m.Service.TLS = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	m.Service.Listen = &url.URL{Host: listen, User: url.UserPassword(vcsimtest.Username, password)}
	m.Service.RegisterEndpoints = true
	srv := m.Service.NewServer()
	stop := func() { srv.Close(); m.Remove() }
	sdk := "https://" + srv.URL.Host + "/sdk"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := vcsimtest.Login(ctx, sdk, roots, vcsimtest.Username, password)
	if err == nil {
		err = vcsimtest.PrepareInventory(ctx, c)
	}
	if err != nil {
		stop()
		return "", nil, err
	}
	return sdk, stop, nil
}

// vcenterPassword reads the password at path, or makes one and writes it there (0600).
func vcenterPassword(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	raw := make([]byte, 18)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("a password for the lab vCenter: %w", err)
	}
	p := hex.EncodeToString(raw)
	return p, os.WriteFile(path, []byte(p), 0o600)
}
