// Package hardening holds the short (CI) form of issue 10's hardening suite: the real binary's
// roles run against a real API server and the lab libvirtd, and the test proves what the guide
// promises about failure and secrets — a client private key never reaches a process's argument
// list or environment, a log line, an Event or a status, and one provider's workload cannot
// read another's Secret.
//
// Every test skips without the envtest binaries or the libvirt lab, and fails instead when CI
// is set (see internal/testenv).
package hardening
