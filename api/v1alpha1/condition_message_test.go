package v1alpha1

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestConditionMessage(t *testing.T) {
	const max = MaxConditionMessage
	a := func(n int) string { return strings.Repeat("a", n) }
	// cut is what a message of n bytes keeps of its head when it is cut: the budget left after
	// the marker sized for n, rounded down to a rune boundary of head.
	cut := func(head string, n int) string {
		keep := max - len(truncationMarker(n))
		for !utf8.RuneStart(head[keep]) {
			keep--
		}
		return head[:keep] + truncationMarker(n-keep)
	}
	euro := strings.Repeat("€", max/3+1) // 3-byte runes, 4098 bytes
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"short", "virError(Code=38): cannot open volume", "virError(Code=38): cannot open volume"},
		{"newlines and tabs kept", "line 1\n\tline 2", "line 1\n\tline 2"},
		{"exact bound", a(max), a(max)},
		{"bound+1", a(max + 1), a(max-len(truncationMarker(max+1))) + truncationMarker(len(truncationMarker(max+1))+1)},
		{"multi-byte runes at the cut", euro, cut(euro, len(euro))},
		{"4-byte runes at the cut", strings.Repeat("𝄞", max/4+1), cut(strings.Repeat("𝄞", max/4+1), max+4)},
		{"exact bound in 3-byte runes", strings.Repeat("€", max/3) + "a", strings.Repeat("€", max/3) + "a"},
		{"control characters", "a\x00b\rc\x1b[31md\x7fe\u0085f", "a\uFFFDb\uFFFDc\uFFFD[31md\uFFFDe\uFFFDf"},
		{"bidirectional overrides", "ok\u202Egnp.exe\u2066", "ok\uFFFDgnp.exe\uFFFD"},
		{"invalid UTF-8", "a\xffb\xe2\x82", "a\uFFFDb\uFFFD\uFFFD"},
		{"a literal U+FFFD is kept", "a\uFFFDb", "a\uFFFDb"},
		{"non-Latin text kept", "ドメインが見つかりません", "ドメインが見つかりません"},
	}
	for _, tc := range tests {
		got := ConditionMessage(tc.in)
		if got != tc.want {
			t.Errorf("%s: ConditionMessage = %q (%d bytes), want %q (%d bytes)", tc.name, tail(got), len(got), tail(tc.want), len(tc.want))
		}
		checkBounded(t, tc.name, got)
	}
}

// TestConditionMessageHuge is libvirt's worst case: a 1 MiB and a 4 MiB error.
func TestConditionMessageHuge(t *testing.T) {
	for _, n := range []int{1 << 20, 4 << 20} {
		in := "virError(Code=1, Domain=10, Message='internal error: " + strings.Repeat("x", n)
		got := ConditionMessage(in)
		checkBounded(t, strconv.Itoa(n), got)
		if !strings.HasPrefix(got, "virError(Code=1, Domain=10, Message='internal error: xxx") {
			t.Errorf("%d: the head of the message is lost: %q", n, got[:80])
		}
		kept := strings.Index(got, "…")
		if want := truncationMarker(len(in) - kept); !strings.HasSuffix(got, want) {
			t.Errorf("%d: ends %q, want %q", n, tail(got), want)
		}
	}
	// Control bytes grow threefold when replaced, so they are counted after replacement.
	got := ConditionMessage(strings.Repeat("\x00", 1<<20))
	checkBounded(t, "1 MiB of NUL", got)
	if !strings.HasPrefix(got, "\uFFFD\uFFFD") {
		t.Errorf("1 MiB of NUL: %q", got[:12])
	}
}

func TestConditionMessageAllocatesNothingWhenClean(t *testing.T) {
	msg := strings.Repeat("domain not found ", 200)
	if n := testing.AllocsPerRun(100, func() { _ = ConditionMessage(msg) }); n != 0 {
		t.Errorf("%v allocations for a clean message, want 0", n)
	}
}

func FuzzConditionMessage(f *testing.F) {
	for _, seed := range []string{"", "a", strings.Repeat("€", 1366), strings.Repeat("a\x00", 3000), "\xff\xfe", strings.Repeat("𝄞", 1025)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got := ConditionMessage(in)
		checkBounded(t, "fuzz", got)
		if len(in) <= MaxConditionMessage && clean(in) && got != in {
			t.Errorf("a clean message changed: %q -> %q", in, got)
		}
	})
}

// checkBounded holds for every result: within the bound, valid UTF-8, nothing to replace, and
// stable when passed through again.
func checkBounded(t *testing.T, name, got string) {
	t.Helper()
	if len(got) > MaxConditionMessage {
		t.Errorf("%s: %d bytes, more than %d", name, len(got), MaxConditionMessage)
	}
	if !utf8.ValidString(got) || !clean(got) {
		t.Errorf("%s: result not clean UTF-8: %q", name, tail(got))
	}
	if again := ConditionMessage(got); again != got {
		t.Errorf("%s: not idempotent: %q -> %q", name, tail(got), tail(again))
	}
}

func tail(s string) string {
	if len(s) > 60 {
		return "…" + s[len(s)-60:]
	}
	return s
}
