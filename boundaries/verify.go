package boundaries

import "fmt"

// Verify recomputes the effective spec from in (the kept submission) and
// compares it with final, the spec about to be stored, at every restricted
// path (named, implied for another provisioner, or sensitive). It returns
// one problem per path where final differs, e.g.
// `spec.eks.configuration.image is "ami-0bad" but the boundaries give "ami-1234"`,
// so that a mutating webhook running after instance-manager's cannot undo
// a boundary. Excluded namespaces and a nil Config verify nothing. The
// error is Effective's.
func (c *Config) Verify(in Input, final map[string]any) ([]string, error) {
	if c == nil || in.NamespaceExcluded {
		return nil, nil
	}
	res, err := c.Effective(in)
	if err != nil {
		return nil, err
	}
	f, err := normalizeObject(final, "spec")
	if err != nil {
		return nil, err
	}
	rules, err := c.rulesFor(in.AdminNamespace)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range rules {
		if r.kind != ruleRestricted {
			continue
		}
		want, wok := getPath(res.Spec, r.segs)
		got, gok := getPath(f, r.segs)
		if len(r.inner) > 0 {
			want, got = mask(want, r.inner), mask(got, r.inner)
		}
		if wok == gok && (!wok || equalValues(want, got)) {
			continue
		}
		switch {
		case !wok:
			out = append(out, fmt.Sprintf("%s is %s but the boundaries leave it unset", r.path, CompactJSON(got)))
		case !gok:
			out = append(out, fmt.Sprintf("%s is unset but the boundaries give %s", r.path, CompactJSON(want)))
		default:
			out = append(out, fmt.Sprintf("%s is %s but the boundaries give %s", r.path, CompactJSON(got), CompactJSON(want)))
		}
	}
	if c.NodeIsolation && !in.AdminNamespace {
		out = append(out, missingIsolation(f, in.Namespace)...)
	}
	return out, nil
}
