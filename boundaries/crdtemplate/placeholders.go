package crdtemplate

import (
	"fmt"
	"strings"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// Values are what the placeholders stand for: the group's name and
// namespace and the cloud names the reconciler observed (never read from
// status, which is not trusted as input).
type Values struct {
	Name, Namespace                                             string
	ScalingGroupName, LaunchTemplateName, LatestTemplateVersion string
}

// placeholder is one ${...} the template language knows.
type placeholder struct {
	name string
	get  func(Values) string
}

// placeholders are the whole language: each is replaced by a string, inside
// a YAML value, never a key.
var placeholders = []placeholder{
	{"${.metadata.name}", func(v Values) string { return v.Name }},
	{"${.metadata.namespace}", func(v Values) string { return v.Namespace }},
	{"${.status.activeScalingGroupName}", func(v Values) string { return v.ScalingGroupName }},
	{"${.status.activeLaunchTemplateName}", func(v Values) string { return v.LaunchTemplateName }},
	{"${.status.latestTemplateVersion}", func(v Values) string { return v.LatestTemplateVersion }},
}

// maxValue is the longest value a placeholder may stand for: the longest
// Auto Scaling group name (255, the AWS limit), above every Kubernetes
// name (253), launch template name (128) and version.
const maxValue = 255

// PlaceholderList names the placeholders for messages and the docs
// (docs/upgrades.md, "The crd strategy").
func PlaceholderList() string {
	names := make([]string, len(placeholders))
	for i, p := range placeholders {
		names[i] = p.name
	}
	return strings.Join(names, ", ")
}

// admissionValues stand for a group whatever its status: metadata as it is,
// the status names at their longest, so that a template admitted within
// MaxOutput renders within it in the reconciler too.
func admissionValues(ig *v1alpha1.InstanceGroup) Values {
	long := strings.Repeat("x", maxValue)
	return Values{Name: ig.Name, Namespace: ig.Namespace, ScalingGroupName: long, LaunchTemplateName: long, LatestTemplateVersion: long}
}

// scan walks s's placeholders: lit receives literal text (with "$${"
// unescaped to "${"), ph each placeholder. The error names an unknown or
// unterminated placeholder.
func scan(s string, lit func(string), ph func(placeholder)) error {
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			lit(s)
			return nil
		}
		if i > 0 && s[i-1] == '$' {
			lit(s[:i-1] + "${")
			s = s[i+2:]
			continue
		}
		lit(s[:i])
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return fmt.Errorf("%q opens a placeholder that is never closed (valid: %s; write $${ for a literal ${)", s[i:], PlaceholderList())
		}
		name := s[i : i+j+1]
		found := false
		for _, p := range placeholders {
			if p.name == name {
				ph(p)
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("unknown placeholder %s (valid: %s; write $${ for a literal ${)", name, PlaceholderList())
		}
		s = s[i+j+1:]
	}
}

// substitute replaces s's placeholders with v's values, spending the bytes
// it produces from *budget; the error names a bound or a placeholder.
func substitute(s string, v Values, budget *int) (string, error) {
	if !strings.Contains(s, "${") {
		*budget -= len(s)
		if *budget < 0 {
			return "", errTooLarge
		}
		return s, nil
	}
	var b strings.Builder
	var over bool
	var long error
	add := func(x string) {
		if over || len(x) > *budget {
			over = true
			return
		}
		*budget -= len(x)
		b.WriteString(x)
	}
	err := scan(s, add, func(p placeholder) {
		val := p.get(v)
		if len(val) > maxValue && long == nil {
			long = fmt.Errorf("%s stands for a value of %d bytes, above %d", p.name, len(val), maxValue)
			return
		}
		add(val)
	})
	if err == nil {
		err = long
	}
	if err != nil {
		return "", err
	}
	if over {
		return "", errTooLarge
	}
	return b.String(), nil
}
