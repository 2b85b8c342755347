package image

import (
	"slices"
	"testing"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestImportTransitions(t *testing.T) {
	row := func(name string, ready bool, reason string) banlieuev1.ProviderImageStatus {
		return banlieuev1.ProviderImageStatus{ProviderNamespace: "ns", ProviderName: name, Ready: ready, Reason: reason}
	}
	importing := row("a", false, banlieuev1.ReasonImporting)
	failed := row("a", false, banlieuev1.ReasonImportFailed)
	ready := row("a", true, banlieuev1.ReasonReconciled)
	pending := row("a", false, banlieuev1.ReasonBuildPending)
	notGranted := row("a", false, banlieuev1.ReasonJobsNotGranted)
	for _, tc := range []struct {
		name          string
		before, after []banlieuev1.ProviderImageStatus
		imported      bool
		want          []string
	}{
		{"waiting for the build is no news", nil, []banlieuev1.ProviderImageStatus{pending}, true, nil},
		{"import starts", []banlieuev1.ProviderImageStatus{pending}, []banlieuev1.ProviderImageStatus{importing}, true, []string{"ImportStarted"}},
		{"still importing", []banlieuev1.ProviderImageStatus{importing}, []banlieuev1.ProviderImageStatus{importing}, true, nil},
		{"import succeeds", []banlieuev1.ProviderImageStatus{importing}, []banlieuev1.ProviderImageStatus{ready}, true, []string{"ImportSucceeded"}},
		{"ready again on a repeat pass", []banlieuev1.ProviderImageStatus{ready}, []banlieuev1.ProviderImageStatus{ready}, true, nil},
		{"import fails", []banlieuev1.ProviderImageStatus{importing}, []banlieuev1.ProviderImageStatus{failed}, true, []string{"ImportFailed"}},
		{"still failed", []banlieuev1.ProviderImageStatus{failed}, []banlieuev1.ProviderImageStatus{failed}, true, nil},
		{"the Jobs grant is missing", []banlieuev1.ProviderImageStatus{pending}, []banlieuev1.ProviderImageStatus{notGranted}, true, []string{"JobsNotGranted"}},
		{"still not granted", []banlieuev1.ProviderImageStatus{notGranted}, []banlieuev1.ProviderImageStatus{notGranted}, true, nil},
		{"granted, then importing", []banlieuev1.ProviderImageStatus{notGranted}, []banlieuev1.ProviderImageStatus{importing}, true, []string{"ImportStarted"}},
		{"retried after a failure", []banlieuev1.ProviderImageStatus{failed}, []banlieuev1.ProviderImageStatus{importing}, true, []string{"ImportStarted"}},
		{"a rebuilt artifact re-imports", []banlieuev1.ProviderImageStatus{ready}, []banlieuev1.ProviderImageStatus{importing}, true, []string{"ImportStarted"}},
		{"a backing file found is no import", nil, []banlieuev1.ProviderImageStatus{ready}, false, nil},
		{"each Provider on its own", []banlieuev1.ProviderImageStatus{importing, row("b", true, banlieuev1.ReasonReconciled)},
			[]banlieuev1.ProviderImageStatus{ready, row("b", true, banlieuev1.ReasonReconciled), row("c", false, banlieuev1.ReasonImporting)},
			true, []string{"ImportSucceeded", "ImportStarted"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range importTransitions(tc.before, tc.after, tc.imported) {
				got = append(got, e.reason)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("importTransitions = %v, want %v", got, tc.want)
			}
		})
	}
}
