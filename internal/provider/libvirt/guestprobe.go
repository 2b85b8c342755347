package libvirt

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// guestPhase is what the guest probe learned (ADR-0043).
type guestPhase int

const (
	// agentUnreachable: no agent answered; the provider cannot tell anything about the guest.
	agentUnreachable guestPhase = iota
	// notAnnounced: the agent answers but the installed system has not written its marker.
	notAnnounced
	// installed: the installed system wrote "installed" to the marker file.
	installed
)

// phaseFile is written by the installed system (not the installer) on every boot.
const phaseFile = "/run/banlieue/phase"

// agentCommand sends one qemu-guest-agent command and returns its JSON reply.
type agentCommand func(ctx context.Context, cmd string) (string, error)

// probeGuest reads the guest's phase marker through the agent. It never fails: whatever the
// guest does is a phase, never an error of the provider.
func probeGuest(ctx context.Context, agent agentCommand) guestPhase {
	open := fmt.Sprintf(`{"execute":"guest-file-open","arguments":{"path":%q,"mode":"r"}}`, phaseFile)
	reply, err := agent(ctx, open)
	if err != nil || strings.TrimSpace(reply) == "" {
		if _, err := agent(ctx, `{"execute":"guest-ping"}`); err != nil {
			return agentUnreachable
		}
		return notAnnounced
	}
	var opened struct {
		Return json.RawMessage `json:"return"`
	}
	var handle int64
	if json.Unmarshal([]byte(reply), &opened) != nil || json.Unmarshal(opened.Return, &handle) != nil {
		return notAnnounced
	}
	read, readErr := agent(ctx, fmt.Sprintf(`{"execute":"guest-file-read","arguments":{"handle":%d,"count":256}}`, handle))
	// The handle is closed whatever the read returned: leaked handles accumulate in the agent.
	_, _ = agent(ctx, fmt.Sprintf(`{"execute":"guest-file-close","arguments":{"handle":%d}}`, handle))
	if readErr != nil {
		return notAnnounced
	}
	return parsePhase(read)
}

// parsePhase accepts only an exact "installed" (surrounding whitespace aside) of bounded size.
func parsePhase(reply string) guestPhase {
	var r struct {
		Return struct {
			Buf string `json:"buf-b64"`
		} `json:"return"`
	}
	if json.Unmarshal([]byte(reply), &r) != nil || len(r.Return.Buf) > 512 {
		return notAnnounced
	}
	data, err := base64.StdEncoding.DecodeString(r.Return.Buf)
	if err != nil || len(data) > 256 || !utf8.Valid(data) {
		return notAnnounced
	}
	if strings.TrimSpace(string(data)) == "installed" {
		return installed
	}
	return notAnnounced
}
