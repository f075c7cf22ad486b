package boundaries

// Resurrected returns, in SensitivePaths order, the sensitive paths (SensitivePaths) where
// a change of the boundaries from current to next would make the tenant's
// kept submission effective again: under current the effective value
// differs from the submitted one (the boundaries replaced it, and warn
// mode kept it in the submission), under next it is the submitted one
// (review 2026-11-26 N11, attack 17: a namespace added to
// excludedNamespaces, a rule relaxed). submitted is the group's kept
// submission (.spec), annotations its annotations, namespace its
// namespace and admin whether that is the ConfigMap's. A submission that
// does not compute under either Config resurrects nothing here (the dry
// run reports it).
func Resurrected(current, next *Config, submitted map[string]any, annotations map[string]string, namespace string, admin bool) []string {
	if current == nil {
		return nil // no boundaries in force: nothing was replaced
	}
	effective := func(c *Config) (map[string]any, bool) {
		res, err := c.Effective(Input{Spec: submitted, Annotations: annotations, NamespaceExcluded: c.Excluded(namespace), AdminNamespace: admin})
		return res.Spec, err == nil
	}
	before, ok1 := effective(current)
	after, ok2 := effective(next)
	sub, err := normalizeObject(submitted, "spec")
	if !ok1 || !ok2 || err != nil {
		return nil
	}
	var out []string
	for _, p := range SensitivePaths {
		segs := splitPath(p)[1:]
		want, ok := getPath(sub, segs)
		if !ok {
			continue
		}
		now, _ := getPath(after, segs)
		was, _ := getPath(before, segs)
		if equalValues(now, want) && !equalValues(was, want) {
			out = append(out, p)
		}
	}
	return out
}
