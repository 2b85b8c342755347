package libvirt

import "banlieue.io/banlieue/internal/provider/providerkit"

// announced keeps a machine pass reading a stale cache from announcing a transition twice
// (providerkit.Announced).
type announced struct{ a providerkit.Announced }

func (a *announced) first(key, value string) bool { return a.a.First(key, value) }
func (a *announced) forget(keys ...string)        { a.a.Forget(keys...) }
