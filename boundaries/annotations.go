package boundaries

import "maps"

// AnnotationVerdict is the judgement of the behaviour annotations one
// request changes (JudgeAnnotations).
type AnnotationVerdict struct {
	// Keys are the restricted behaviour annotations the request adds,
	// changes or removes (RestrictedAnnotations), sorted.
	Keys []string
	// Deny is true when the request is refused for them; otherwise their
	// changes are dropped (RevertAnnotations) and the tenant warned.
	Deny bool
}

// JudgeAnnotations judges the behaviour annotations a tenant's request
// changes from old to incoming: those the ConfigMap does not share
// (RestrictedAnnotations) are refused in deny mode and without a
// ConfigMap (a nil Config: boundaries fail closed), and dropped in warn
// mode.
func (c *Config) JudgeAnnotations(old, incoming map[string]string) AnnotationVerdict {
	keys := c.RestrictedAnnotations(old, incoming)
	return AnnotationVerdict{Keys: keys, Deny: len(keys) > 0 && (c == nil || c.Enforcement == EnforcementDeny)}
}

// RevertAnnotations returns a copy of incoming in which each of keys has
// its value in old again, or is absent where old has none.
func RevertAnnotations(old, incoming map[string]string, keys []string) map[string]string {
	out := maps.Clone(incoming)
	if out == nil {
		out = map[string]string{}
	}
	for _, k := range keys {
		if v, ok := old[k]; ok {
			out[k] = v
		} else {
			delete(out, k)
		}
	}
	return out
}
