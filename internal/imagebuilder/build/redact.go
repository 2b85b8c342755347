package build

import (
	"errors"
	"net/url"
	"strings"
)

// redacted stands where a credential was: the reader learns that one was there, not what it is.
const redacted = "REDACTED"

// RedactURL is a source URL fit for a log line, an error, a status message or an event
// (docs/guides/image-sources.md, "Credentials in source URLs"): the userinfo becomes REDACTED and
// so does every query value and the fragment. Query keys stay, so a reader can still tell a
// presigned URL (X-Amz-Signature=REDACTED) from a plain one. Every value goes, not a list of
// known signature keys: a presigned URL's whole query is the credential (the signature only
// makes sense with its X-Amz-Credential, Expires, token... beside it) and no list of key names
// covers every object store. A string without "://" is an OCI reference, which has no place for
// a credential, and is returned as it is; a URL that does not parse keeps only its scheme, since
// where its credential would be cannot be told.
func RedactURL(s string) string {
	scheme, _, isURL := strings.Cut(s, "://")
	if !isURL {
		return s
	}
	u, err := url.Parse(s)
	if err != nil {
		return scheme + "://" + redacted + " (unparsable URL)"
	}
	if u.User != nil {
		u.User = url.User(redacted)
	}
	if u.RawQuery != "" || u.ForceQuery {
		parts := strings.Split(u.RawQuery, "&")
		for i, p := range parts {
			if k, _, ok := strings.Cut(p, "="); ok {
				parts[i] = k + "=" + redacted
			} else if p != "" {
				// A bare query (`?<token>`) is all value.
				parts[i] = redacted
			}
		}
		u.RawQuery, u.ForceQuery = strings.Join(parts, "&"), false
	}
	if u.Fragment != "" || u.RawFragment != "" {
		u.Fragment, u.RawFragment = redacted, ""
	}
	return u.String()
}

// redactURLError rewrites the URL net/http and net/url put in their *url.Error (`Get
// "https://user:pass@…": …`), in place, wherever it sits in err's chain.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = RedactURL(ue.URL)
	}
	return err
}

// redactedError is an error whose text no longer holds the source URL, with the chain beneath
// kept, so FailureOf still finds a RefusedError in it.
type redactedError struct {
	err  error
	text string
}

func (e *redactedError) Error() string { return e.text }
func (e *redactedError) Unwrap() error { return e.err }

// RedactSourceIn replaces the source URL, verbatim, in text by its redacted form: the last line
// of defence for a message that quoted the URL on a path that did not redact it itself (the
// imagebuilder runs it over every status message of a build).
func RedactSourceIn(text, from string) string {
	if safe := RedactURL(from); safe != from {
		return strings.ReplaceAll(text, from, safe)
	}
	return text
}

// redactSource is RedactSourceIn over err's text.
func redactSource(err error, from string) error {
	if err == nil {
		return nil
	}
	if text := RedactSourceIn(err.Error(), from); text != err.Error() {
		return &redactedError{err: err, text: text}
	}
	return err
}
