package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// EscapeByte ends an attached console, as in virsh console and telnet: Ctrl-].
const EscapeByte = 0x1d

// Dial opens vm's console through the API server as the user cfg authenticates (any kind of
// credential its kubeconfig holds: client certificate, token, exec plugin). The request is
// HTTP/1.1 because an Upgrade cannot travel over HTTP/2.
func Dial(ctx context.Context, cfg *rest.Config, vm types.NamespacedName, force bool) (io.ReadWriteCloser, error) {
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: tlsCfg, ForceAttemptHTTP2: false}
	if tlsCfg != nil {
		tlsCfg.NextProtos = []string{"http/1.1"}
	}
	rt, err := rest.HTTPWrappersForConfig(cfg, tr)
	if err != nil {
		return nil, err
	}
	base, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("API server address %q: %w", cfg.Host, err)
	}
	if base.Scheme == "" {
		base.Scheme = "https"
	}
	u := base.JoinPath(Path(vm))
	if force {
		u.RawQuery = ForceParam + "=true"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", UpgradeProtocol)
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("opening the console of %s: %w", vm, err)
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		if rwc, ok := resp.Body.(io.ReadWriteCloser); ok {
			return rwc, nil
		}
		resp.Body.Close()
		return nil, errors.New("the API server switched protocols but the connection cannot be written")
	}
	defer resp.Body.Close()
	return nil, statusError(vm, resp)
}

// StatusError is a refused console, with the API server's (or the relay's) status code.
type StatusError struct {
	Code    int
	Message string
}

func (e *StatusError) Error() string { return e.Message }

// statusError reads the refusal: a metav1.Status when the relay or the API server wrote one.
func statusError(vm types.NamespacedName, resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var st metav1.Status
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &st) == nil && st.Message != "" {
		msg = st.Message
	}
	return &StatusError{Code: resp.StatusCode, Message: fmt.Sprintf("console of %s: %s (%s)", vm, msg, resp.Status)}
}

// Attach runs an opened console on a terminal: what in gives goes to the guest, what the guest
// prints goes to out, until the guest side ends or in gives EscapeByte (which is not sent).
// in should be a terminal in raw mode, so each key travels as typed.
func Attach(ctx context.Context, con io.ReadWriteCloser, in io.Reader, out io.Writer) error {
	defer func() { _ = con.Close() }() // the session is over either way; its end was reported
	fromGuest := make(chan error, 1)
	go func() {
		_, err := io.Copy(out, con)
		fromGuest <- err
	}()
	toGuest := make(chan error, 1)
	go func() { toGuest <- copyUntilEscape(con, in) }()
	select {
	case err := <-fromGuest:
		return ignoreClosed(err)
	case err := <-toGuest:
		return ignoreClosed(err)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// copyUntilEscape copies in to w until EscapeByte, which it does not copy, or in's end.
func copyUntilEscape(w io.Writer, in io.Reader) error {
	buf := make([]byte, 1024)
	for {
		n, err := in.Read(buf)
		if n > 0 {
			chunk, escaped := buf[:n], false
			if i := bytes.IndexByte(chunk, EscapeByte); i >= 0 {
				chunk, escaped = chunk[:i], true
			}
			if _, werr := w.Write(chunk); werr != nil {
				return werr
			}
			if escaped {
				return nil
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

func ignoreClosed(err error) error {
	if err == nil || errors.Is(err, io.EOF) || strings.Contains(err.Error(), "use of closed network connection") {
		return nil
	}
	return err
}
