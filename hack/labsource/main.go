// Command labsource serves a directory over https for the lab's VMImage of kind Url
// (hack/lab.sh up): the guide's image flow needs a source that build pods reach, and an https
// one whose CA the builder trusts only through the documented trust option
// (imagebuilder.jobs.caBundleConfigMap, docs/guides/image-sources.md, "Transport"). On the same
// address it serves an OCI registry (/v2/, in memory): with --containerdisk FILE, FILE is pushed
// there as the containerDisk containerdisks/<name>:1, an OCI source of the same trust.
//
//	go run ./hack/labsource --dir DIR --listen 10.244.0.1:18443 --pki PKI [--containerdisk FILE] [--vcenter IP:PORT]
//
// The first run writes a CA and a serving certificate for the listen address into PKI
// (ca.crt, tls.crt, tls.key; kept, so the CA ConfigMap stays valid across restarts). It prints
// the base URL first (test/node listens on port 0 and reads it), then, with --containerdisk, the
// pushed image's reference by digest on a line of its own, and serves until signalled. With
// --vcenter it also serves a vCenter simulator (govmomi's vcsim) on that address with the same
// certificate, for the lab's vSphere Provider: it prints "vcenter <SDK URL>" on a line of its own
// and keeps the administrator's password in PKI/vcenter-password (vcenter.go).
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"banlieue.io/banlieue/internal/testenv/containerdisk"
)

func main() {
	dir := flag.String("dir", "", "directory to serve (required)")
	listen := flag.String("listen", "10.244.0.1:18443", "IP:port to serve on; the certificate names the IP")
	pki := flag.String("pki", "", "directory of ca.crt, tls.crt and tls.key, written when missing (required)")
	disk := flag.String("containerdisk", "", "disk image to push to the registry as containerdisks/<file name without extension>:1")
	vcenter := flag.String("vcenter", "", "IP:port to serve a vCenter simulator on, with the same certificate (the IP must be --listen's)")
	flag.Parse()
	if *dir == "" || *pki == "" {
		fmt.Fprintln(os.Stderr, "labsource: --dir and --pki are required")
		os.Exit(2)
	}
	if err := run(*dir, *listen, *pki, *disk, *vcenter); err != nil {
		fmt.Fprintln(os.Stderr, "labsource:", err)
		os.Exit(1)
	}
}

func run(dir, listen, pki, disk, vcenter string) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", listen, err)
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return fmt.Errorf("--listen %q: not an IP address", listen)
	}
	if err := ensurePKI(pki, ip); err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(pki, "tls.crt"), filepath.Join(pki, "tls.key"))
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/", http.FileServer(http.Dir(dir)))
	mux.Handle("/v2/", registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	go func() { <-stop; _ = srv.Close() }()
	served := make(chan error, 1)
	go func() { served <- srv.ServeTLS(l, "", "") }()
	// The first line names the address served (a port 0 is resolved), for whoever started it.
	fmt.Printf("https://%s serving %s (CA %s)\n", l.Addr(), dir, filepath.Join(pki, "ca.crt"))
	if disk != "" {
		ref, err := pushContainerDisk(l.Addr().String(), filepath.Join(pki, "ca.crt"), disk)
		if err != nil {
			_ = srv.Close()
			return fmt.Errorf("--containerdisk %s: %w", disk, err)
		}
		fmt.Println(ref)
	}
	if vcenter != "" {
		caPEM, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
		if err != nil {
			return err
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(caPEM)
		sdk, stopVCenter, err := serveVCenter(vcenter, cert, roots, pki)
		if err != nil {
			_ = srv.Close()
			return fmt.Errorf("--vcenter %s: %w", vcenter, err)
		}
		defer stopVCenter()
		fmt.Println("vcenter", sdk)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// pushContainerDisk pushes the disk at path to the registry at addr as the containerDisk
// containerdisks/<name>:1, trusting the lab CA only, and returns its reference by digest.
func pushContainerDisk(addr, caFile, path string) (string, error) {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return "", err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return "", fmt.Errorf("%s holds no certificate", caFile)
	}
	img, err := containerdisk.Image(path)
	if err != nil {
		return "", err
	}
	repo := addr + "/containerdisks/" + strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	tag, err := name.NewTag(repo + ":1")
	if err != nil {
		return "", err
	}
	transport := &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}}
	if err := remote.Write(tag, img, remote.WithTransport(transport)); err != nil {
		return "", err
	}
	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	return repo + "@" + digest.String(), nil
}

// ensurePKI writes a CA and a serving certificate for ip into dir unless they are there.
func ensurePKI(dir string, ip net.IP) error {
	have := 0
	for _, name := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			have++
		}
	}
	if have == 3 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "banlieue lab source CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(10, 0, 0),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: ip.String()},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(10, 0, 0), IPAddresses: []net.IP{ip},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	for name, block := range map[string]*pem.Block{
		"ca.crt":  {Type: "CERTIFICATE", Bytes: caDER},
		"tls.crt": {Type: "CERTIFICATE", Bytes: der},
		"tls.key": {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			return err
		}
	}
	return nil
}
