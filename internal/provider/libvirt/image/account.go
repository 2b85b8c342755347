package image

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// fallbackAccount runs an import Job whose own account is missing from the build namespace
// (docs/adr/0145-import-account-fallback-outside-the-operators-namespace.md).
const fallbackAccount = "default"

// importAccount is the ServiceAccount a new import Job runs as: the provider's own import
// account (--import-service-account), or the build namespace's default when that account does
// not exist there. The read is uncached and by name; a provider that may not read it (the
// operator's, whose account the operator creates with the workload before its Deployment) keeps
// its own account.
func (r *Reconciler) importAccount(ctx context.Context) string {
	var sa corev1.ServiceAccount
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: r.BuildNamespace, Name: r.ImportServiceAccount}, &sa)
	return accountFor(r.ImportServiceAccount, err)
}

// accountFor decides importAccount from the lookup of own: only a NotFound falls back. A refusal
// or any other error is no proof that the account is missing, and a Job naming a missing account
// only waits (its pods are never created), while one running as another account could read what
// that account may.
func accountFor(own string, lookup error) string {
	if apierrors.IsNotFound(lookup) {
		return fallbackAccount
	}
	return own
}

// fallbackNote is what a zone adds about the account of an import Job that runs as the build
// namespace's default: that account reads the Provider only with the grant of an import account.
func fallbackNote(namespace, own, account string) string {
	if account != fallbackAccount || own == fallbackAccount {
		return ""
	}
	return fmt.Sprintf("; ServiceAccount %s/%s does not exist, so the Job runs as %s/%s, which needs the import account's grant "+
		"(get on the Provider, its credentials Secret and CA)", namespace, own, namespace, fallbackAccount)
}

// expectedJob is the Job this import expects where found is, for jobOwnership: run as the
// provider's own account or, found running as the fallback, as importAccount decides now. A Job
// running as the fallback is this import's only while the own account is missing; once the
// account exists, that Job proves nothing (any account that creates Jobs in the namespace could
// have made it) and is left alone.
func (r *Reconciler) expectedJob(ctx context.Context, img *banlieuev1.VMImage, p *banlieuev1.Provider, pool string, found *batchv1.Job) *batchv1.Job {
	account := r.ImportServiceAccount
	if found.Spec.Template.Spec.ServiceAccountName == fallbackAccount {
		account = r.importAccount(ctx)
	}
	return r.importJob(img, p, pool, account)
}
