//go:build bench

package main

import "testing"

func TestParseByteSize(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"2147483648", 2 << 30, true},
		{"4GiB", 4 << 30, true},
		{"512MiB", 512 << 20, true},
		{"1 TiB", 1 << 40, true},
		{"64KiB", 64 << 10, true},
		{"100B", 100, true},
		{"4GB", 0, false}, // decimal units are not guessed at
		{"0", 0, false},
		{"-1GiB", 0, false},
		{"GiB", 0, false},
		{"9000000TiB", 0, false},
	} {
		got, err := parseByteSize(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d (ok %v)", tt.in, got, err, tt.want, tt.ok)
		}
	}
}
