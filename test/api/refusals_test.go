package api

import (
	"context"
	"strings"
	"testing"

	"banlieue.io/banlieue/internal/testenv"
)

// caseObjectName is the name of a case's object: prefix and the case's name, lower-cased, spaces
// and underscores as dashes, at most 63 characters.
func caseObjectName(prefix, name string) string {
	n := prefix + strings.ToLower(strings.NewReplacer(" ", "-", "_", "-").Replace(name))
	if len(n) > 63 {
		n = n[:63]
	}
	return n
}

// expectRefusedCreates creates each case's object, its base mutated, as a subtest titled
// title+name, and checks the API server refuses it with every text the case wants.
func expectRefusedCreates(ctx context.Context, t *testing.T, env *testenv.Env, title string, cases []invalidCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(title+tc.name, func(t *testing.T) {
			obj := parse(tc.base)
			obj.SetName(caseObjectName("invalid-", tc.name))
			tc.mutate(obj)
			expectRefused(t, env.Client.Create(ctx, obj), "an object", tc.want)
		})
	}
}

// expectRefusedUpdates creates each case's valid base, then checks the API server refuses the
// case's mutation of it as an update, with every text the case wants.
func expectRefusedUpdates(ctx context.Context, t *testing.T, env *testenv.Env, title string, cases []invalidCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(title+tc.name, func(t *testing.T) {
			obj := parse(tc.base)
			obj.SetName(caseObjectName("transition-", tc.name))
			if err := env.Client.Create(ctx, obj); err != nil {
				t.Fatalf("creating the valid object: %v", err)
			}
			tc.mutate(obj)
			expectRefused(t, env.Client.Update(ctx, obj), "an update", tc.want)
		})
	}
}

func expectRefused(t *testing.T, err error, what string, want []string) {
	t.Helper()
	if err == nil {
		t.Fatalf("admitted %s that breaks the rule", what)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not contain %q:\n%v", w, err)
		}
	}
}
