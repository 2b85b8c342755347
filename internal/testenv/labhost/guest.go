package labhost

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/pkg/libvirt"
)

// CloudGuest builds (or finds in its cache) the real cloud guest of hack/cloud-guest.sh and
// returns its directory, which holds cloud.raw. A cold build takes minutes; hack/test.sh runs
// the script before the tests, so here it is normally cached.
func CloudGuest(t testing.TB) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "cloud-guest.sh")).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			msg := string(ee.Stderr)
			if len(msg) > 2000 {
				msg = msg[len(msg)-2000:]
			}
			err = fmt.Errorf("%v: %s", err, msg)
		}
		testenv.MissingPrerequisite(t, "building the cloud guest (hack/cloud-guest.sh): "+err.Error())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

// AgentCommand sends one command to dom's guest agent through host, with a deadline on both
// sides, and decodes the agent's "return" into reply.
func AgentCommand(ctx context.Context, host *libvirt.Client, dom libvirt.Domain, cmd string, reply any) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := host.DomainAgentCommand(ctx, dom, cmd, 20)
	if err != nil {
		return err
	}
	var r struct {
		Return json.RawMessage `json:"return"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		return fmt.Errorf("agent reply %q: %w", out, err)
	}
	return json.Unmarshal(r.Return, reply)
}

// ReadGuestFile reads a small guest file (at most 4 KiB) through the agent.
func ReadGuestFile(ctx context.Context, host *libvirt.Client, dom libvirt.Domain, path string) (string, error) {
	var handle int64
	if err := AgentCommand(ctx, host, dom, fmt.Sprintf(`{"execute":"guest-file-open","arguments":{"path":%q,"mode":"r"}}`, path), &handle); err != nil {
		return "", err
	}
	var read struct {
		Buf string `json:"buf-b64"`
	}
	err := AgentCommand(ctx, host, dom, fmt.Sprintf(`{"execute":"guest-file-read","arguments":{"handle":%d,"count":4096}}`, handle), &read)
	closeGuestFile(host, dom, handle)
	if err != nil {
		return "", err
	}
	data, err := base64.StdEncoding.DecodeString(read.Buf)
	return string(data), err
}

// WriteGuestFile writes data to a guest file through the agent, replacing what it held.
func WriteGuestFile(ctx context.Context, host *libvirt.Client, dom libvirt.Domain, path, data string) error {
	var handle int64
	if err := AgentCommand(ctx, host, dom, fmt.Sprintf(`{"execute":"guest-file-open","arguments":{"path":%q,"mode":"w"}}`, path), &handle); err != nil {
		return err
	}
	var wrote struct {
		Count int `json:"count"`
	}
	err := AgentCommand(ctx, host, dom, fmt.Sprintf(`{"execute":"guest-file-write","arguments":{"handle":%d,"buf-b64":%q}}`,
		handle, base64.StdEncoding.EncodeToString([]byte(data))), &wrote)
	closeGuestFile(host, dom, handle)
	if err == nil && wrote.Count != len(data) {
		err = fmt.Errorf("the agent wrote %d bytes of %d to %s", wrote.Count, len(data), path)
	}
	return err
}

// closeGuestFile closes an agent's file handle, even when the caller's context has ended: an
// open handle would outlive the test in the guest.
func closeGuestFile(host *libvirt.Client, dom libvirt.Domain, handle int64) {
	var closed struct{}
	_ = AgentCommand(context.Background(), host, dom, fmt.Sprintf(`{"execute":"guest-file-close","arguments":{"handle":%d}}`, handle), &closed)
}
