package v1alpha1

import (
	"strconv"
	"unicode"
	"unicode/utf8"
)

// MaxConditionMessage is the most bytes ConditionMessage returns. metav1.Condition allows 32 768
// characters, but a libvirt error alone may be 4 MiB: one message over the limit fails the whole
// status write and leaves the previous conditions (a stale Ready=True) in place. 4 KiB keeps the
// head of any error, where libvirt and Kubernetes put the cause, and keeps several messages per
// object far below the limit. Bytes bound characters, so the CRD's character limit holds too.
const MaxConditionMessage = 4096

// ConditionMessage is msg made safe for a status message: every byte that is not valid UTF-8,
// and every control character except \n and \t (C0, DEL, C1) and every bidirectional control
// (which reorders what a terminal shows), becomes U+FFFD; and a result longer than
// MaxConditionMessage is cut on a rune boundary and ends in "… [truncated N bytes]", N counting
// the bytes of msg left out. Its own output comes back unchanged, so a message copied from one
// condition into another is stable.
func ConditionMessage(msg string) string {
	if len(msg) <= MaxConditionMessage && clean(msg) {
		return msg
	}
	// The marker is budgeted for the largest N possible, so whatever is cut it fits.
	budget := MaxConditionMessage - len(truncationMarker(len(msg)))
	out := make([]byte, 0, min(len(msg)+utf8.UTFMax, MaxConditionMessage+utf8.UTFMax))
	cutOut, cutIn := -1, 0
	for i := 0; i < len(msg); {
		r, size := utf8.DecodeRuneInString(msg[i:])
		if !allowed(r, size) {
			r = utf8.RuneError
		}
		if cutOut < 0 && len(out)+utf8.RuneLen(r) > budget {
			cutOut, cutIn = len(out), i
		}
		out = utf8.AppendRune(out, r)
		i += size
		// Past the bound the rest cannot be kept: stop without reading it.
		if len(out) > MaxConditionMessage {
			return string(append(out[:cutOut], truncationMarker(len(msg)-cutIn)...))
		}
	}
	return string(out)
}

func truncationMarker(dropped int) string {
	return "… [truncated " + strconv.Itoa(dropped) + " bytes]"
}

// clean reports whether msg needs no replacement at all: the common case, returned as is.
func clean(msg string) bool {
	for i := 0; i < len(msg); {
		if b := msg[i]; b < utf8.RuneSelf {
			if !allowed(rune(b), 1) {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(msg[i:])
		if !allowed(r, size) {
			return false
		}
		i += size
	}
	return true
}

// allowed says whether the rune r, decoded from size bytes, is kept as it is. A RuneError of
// size 1 is an invalid byte; a literal U+FFFD (size 3) is kept.
func allowed(r rune, size int) bool {
	switch {
	case r == utf8.RuneError && size == 1:
		return false
	case r == '\n' || r == '\t':
		return true
	case unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r):
		return false
	}
	return true
}
