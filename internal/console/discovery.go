package console

import (
	"encoding/json"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// serveDiscovery answers the discovery documents the kube-apiserver reads to mark the
// APIService Available and to list the group: one group, one version, one subresource. They
// describe the API, not any object, so they need no authentication. It reports whether r was
// one of them.
func serveDiscovery(w http.ResponseWriter, r *http.Request) bool {
	gv := Group + "/" + Version
	var doc any
	switch r.URL.Path {
	case "/apis", "/apis/":
		doc = &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{group()}}
	case "/apis/" + Group, "/apis/" + Group + "/":
		g := group()
		g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
		doc = &g
	case "/apis/" + gv, "/apis/" + gv + "/":
		doc = &metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: gv,
			APIResources: []metav1.APIResource{{Name: Resource + "/" + Subresource, Namespaced: true, Kind: "VirtualMachineConsole", Verbs: []string{"get"}}},
		}
	default:
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(doc)
	return true
}

func group() metav1.APIGroup {
	v := metav1.GroupVersionForDiscovery{GroupVersion: Group + "/" + Version, Version: Version}
	return metav1.APIGroup{Name: Group, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v}
}
