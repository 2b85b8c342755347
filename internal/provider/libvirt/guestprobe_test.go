package libvirt

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// scriptedAgent answers agent commands by their "execute" name and records what was sent.
type scriptedAgent struct {
	replies map[string]string
	errs    map[string]error
	sent    []string
}

func (a *scriptedAgent) command(_ context.Context, cmd string) (string, error) {
	for name, err := range a.errs {
		if strings.Contains(cmd, `"`+name+`"`) {
			a.sent = append(a.sent, name)
			return "", err
		}
	}
	for name, reply := range a.replies {
		if strings.Contains(cmd, `"`+name+`"`) {
			a.sent = append(a.sent, name)
			return reply, nil
		}
	}
	return "", errors.New("unexpected command " + cmd)
}

func readReply(content string) string {
	return `{"return":{"count":9,"buf-b64":"` + base64.StdEncoding.EncodeToString([]byte(content)) + `","eof":true}}`
}

func TestProbeGuest(t *testing.T) {
	down := errors.New("agent not connected")
	opened := `{"return":1000}`
	closed := `{"return":{}}`
	tests := []struct {
		name     string
		agent    scriptedAgent
		want     guestPhase
		wantSent string
	}{
		{"no agent", scriptedAgent{errs: map[string]error{"guest-file-open": down, "guest-ping": down}}, agentUnreachable, "guest-file-open,guest-ping"},
		{"agent without marker", scriptedAgent{errs: map[string]error{"guest-file-open": errors.New("No such file")},
			replies: map[string]string{"guest-ping": `{"return":{}}`}}, notAnnounced, "guest-file-open,guest-ping"},
		{"installed", scriptedAgent{replies: map[string]string{"guest-file-open": opened, "guest-file-read": readReply("installed\n"),
			"guest-file-close": closed}}, installed, "guest-file-open,guest-file-read,guest-file-close"},
		{"installer phase", scriptedAgent{replies: map[string]string{"guest-file-open": opened, "guest-file-read": readReply("installing"),
			"guest-file-close": closed}}, notAnnounced, "guest-file-open,guest-file-read,guest-file-close"},
		{"prefix is not enough", scriptedAgent{replies: map[string]string{"guest-file-open": opened, "guest-file-read": readReply("installed-ish"),
			"guest-file-close": closed}}, notAnnounced, "guest-file-open,guest-file-read,guest-file-close"},
		{"handle is not an integer", scriptedAgent{replies: map[string]string{"guest-file-open": `{"return":"x"}`}}, notAnnounced, "guest-file-open"},
		{"read fails, handle still closed", scriptedAgent{replies: map[string]string{"guest-file-open": opened, "guest-file-close": closed},
			errs: map[string]error{"guest-file-read": errors.New("io")}}, notAnnounced, "guest-file-open,guest-file-read,guest-file-close"},
		{"oversized marker", scriptedAgent{replies: map[string]string{"guest-file-open": opened,
			"guest-file-read": readReply(strings.Repeat("x", 300)), "guest-file-close": closed}}, notAnnounced, "guest-file-open,guest-file-read,guest-file-close"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := probeGuest(context.Background(), tt.agent.command)
			if got != tt.want {
				t.Errorf("phase = %d, want %d", got, tt.want)
			}
			if sent := strings.Join(tt.agent.sent, ","); sent != tt.wantSent {
				t.Errorf("sent %s, want %s", sent, tt.wantSent)
			}
		})
	}
}
