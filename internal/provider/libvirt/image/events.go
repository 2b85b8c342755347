package image

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// importEvent is one transition of an image's import onto one Provider's host.
type importEvent struct {
	eventType, reason, note string
}

// importTransitions are the transitions of the image's rows between the status a pass found and
// the rows it writes, one per Provider whose row moved: ImportStarted when it starts importing,
// ImportSucceeded when an imported row becomes Ready, ImportFailed when it fails. A row as it was
// announces nothing (docs/adr/0106). imported says the rows come from import Jobs (a url
// source); a backing file is only found, never imported.
func importTransitions(before, after []banlieuev1.ProviderImageStatus, imported bool) []importEvent {
	var out []importEvent
	for _, row := range after {
		prev := findRow(before, row.ProviderNamespace, row.ProviderName)
		name := row.ProviderNamespace + "/" + row.ProviderName
		switch {
		case row.Ready && imported && (prev == nil || !prev.Ready):
			out = append(out, importEvent{corev1.EventTypeNormal, banlieuev1.ReasonImportSucceeded,
				fmt.Sprintf("imported on Provider %s as %s", name, row.ResolvedRef)})
		case row.Reason == banlieuev1.ReasonImporting && (prev == nil || prev.Reason != banlieuev1.ReasonImporting):
			out = append(out, importEvent{corev1.EventTypeNormal, banlieuev1.ReasonImportStarted,
				fmt.Sprintf("importing on Provider %s: %s", name, row.Message)})
		case (row.Reason == banlieuev1.ReasonImportFailed || row.Reason == banlieuev1.ReasonJobsNotGranted) &&
			(prev == nil || prev.Reason != row.Reason):
			out = append(out, importEvent{corev1.EventTypeWarning, row.Reason,
				fmt.Sprintf("import on Provider %s failed: %s", name, row.Message)})
		}
	}
	return out
}

func findRow(rows []banlieuev1.ProviderImageStatus, ns, name string) *banlieuev1.ProviderImageStatus {
	for i := range rows {
		if rows[i].ProviderNamespace == ns && rows[i].ProviderName == name {
			return &rows[i]
		}
	}
	return nil
}
