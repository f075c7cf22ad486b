// Package crdtemplate renders the crd upgrade strategy's template
// (spec.strategy.crd.spec) within bounds and checks where the rendered
// object may go. Tenants write the template, so rendering must not take
// the controller down and the object must stay in the group's namespace,
// of a kind the admin allowed (issue 11, "crd strategy confined").
package crdtemplate

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// Bounds of one rendering.
const (
	// MaxOutput is the most bytes a template may render.
	MaxOutput = 64 << 10
	// MaxTime is how long a rendering may take.
	MaxTime = time.Second
	// maxWidth is the largest width or precision printf accepts.
	maxWidth = 1024
)

const field = "spec.strategy.crd.spec"

// Render executes spec.strategy.crd.spec over {InstanceGroup: ig} and
// decodes the YAML. The template sees ig as plain data with the Go field
// names (.InstanceGroup.Name, .InstanceGroup.Status.ActiveScalingGroupName)
// whose numbers are floats, so it can only range over lists and maps of the
// object; it may not define or call templates nor nest range, and printf
// widths are capped. Output is bounded by MaxOutput and time by MaxTime.
// Errors name the field and the problem (parse, a forbidden construct, a
// bound, YAML, missing apiVersion or kind).
func Render(ig *v1alpha1.InstanceGroup) (*unstructured.Unstructured, error) {
	src := ""
	if ig.Spec.Strategy.CRD != nil {
		src = ig.Spec.Strategy.CRD.Spec
	}
	tmpl, err := template.New(field).Option("missingkey=error").Funcs(template.FuncMap{
		"printf": boundedPrintf, "print": fmt.Sprint, "println": fmt.Sprintln,
	}).Parse(src)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	if len(tmpl.Templates()) > 1 {
		return nil, fmt.Errorf("%s: {{define}} and {{block}} are not allowed", field)
	}
	if tmpl.Tree != nil {
		if err := check(tmpl.Tree.Root, 0); err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
	}
	out, err := execute(tmpl, map[string]any{"InstanceGroup": plain(reflect.ValueOf(ig))})
	if err != nil {
		return nil, fmt.Errorf("%s: rendering: %w", field, err)
	}
	obj := map[string]any{}
	if err := yaml.Unmarshal(out, &obj); err != nil {
		return nil, fmt.Errorf("%s: the rendered manifest is not YAML: %w", field, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	if u.GetAPIVersion() == "" || u.GetKind() == "" {
		return nil, fmt.Errorf("%s: the rendered manifest needs apiVersion and kind", field)
	}
	if u.GetName() == "" && u.GetGenerateName() == "" {
		u.SetGenerateName(ig.Name + "-")
	}
	return u, nil
}

// errTooLarge is returned by the bounded writer past MaxOutput.
var errTooLarge = fmt.Errorf("the rendered manifest is larger than %d bytes", MaxOutput)

type boundedWriter struct{ buf []byte }

func (w *boundedWriter) Write(p []byte) (int, error) {
	if len(w.buf)+len(p) > MaxOutput {
		return 0, errTooLarge
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// execute runs tmpl with a deadline. The static checks bound the work to
// the size of the data, so a rendering past the deadline still ends soon.
func execute(tmpl *template.Template, data any) ([]byte, error) {
	w := &boundedWriter{}
	done := make(chan error, 1)
	go func() { done <- tmpl.Execute(w, data) }()
	select {
	case err := <-done:
		if errors.Is(err, errTooLarge) {
			return nil, errTooLarge
		}
		return w.buf, err
	case <-time.After(MaxTime):
		return nil, fmt.Errorf("rendering took longer than %s", MaxTime)
	}
}

// check refuses the constructs that make the work of a template larger
// than its data: nested range, ranging over anything but the data (a
// number literal, a function result or a variable), and template calls.
func check(n parse.Node, ranges int) error {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := check(c, ranges); err != nil {
				return err
			}
		}
	case *parse.RangeNode:
		if ranges > 0 {
			return errors.New("a range inside a range is not allowed")
		}
		if !rangesOverData(n.Pipe) {
			return errors.New("range may only iterate over a field of the data, e.g. {{range .InstanceGroup.Spec.EKS.Configuration.Tags}}")
		}
		if err := check(n.List, ranges+1); err != nil {
			return err
		}
		return check(n.ElseList, ranges)
	case *parse.IfNode:
		if err := check(n.List, ranges); err != nil {
			return err
		}
		return check(n.ElseList, ranges)
	case *parse.WithNode:
		if err := check(n.List, ranges); err != nil {
			return err
		}
		return check(n.ElseList, ranges)
	case *parse.TemplateNode:
		return errors.New("{{template}} is not allowed")
	}
	return nil
}

// rangesOverData: one command, one argument, a field of dot or of $.
func rangesOverData(p *parse.PipeNode) bool {
	if p == nil || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
		return false
	}
	switch a := p.Cmds[0].Args[0].(type) {
	case *parse.FieldNode, *parse.DotNode:
		return true
	case *parse.VariableNode:
		return len(a.Ident) > 1 && a.Ident[0] == "$"
	}
	return false
}

var verbWidth = regexp.MustCompile(`%[-+# 0]*(\*|[0-9]+)?(?:\.(\*|[0-9]+))?`)

// boundedPrintf is fmt.Sprintf without * widths and with widths and
// precisions of at most maxWidth, so one call cannot allocate gigabytes.
func boundedPrintf(format string, args ...any) (string, error) {
	for _, m := range verbWidth.FindAllStringSubmatch(format, -1) {
		for _, w := range m[1:] {
			if w == "*" {
				return "", errors.New("printf: * widths are not allowed")
			}
			if n, err := strconv.Atoi(w); w != "" && (err != nil || n > maxWidth) {
				return "", fmt.Errorf("printf: width or precision %s is above %d", w, maxWidth)
			}
		}
	}
	return fmt.Sprintf(format, args...), nil
}

// plain converts v into maps, lists, strings, bools and float64 numbers,
// keeping Go field names (embedded structs' fields promoted, as Go does),
// so that templates read the object as before but cannot range over an
// integer. Types with a String method and no exported fields (times,
// quantities) become their string.
func plain(v reflect.Value) any {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Struct:
		if s, ok := stringer(v); ok {
			return s
		}
		out := map[string]any{}
		addFields(out, v)
		return out
	case reflect.Map:
		out := make(map[string]any, v.Len())
		for it := v.MapRange(); it.Next(); {
			out[fmt.Sprint(it.Key().Interface())] = plain(it.Value())
		}
		return out
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return string(v.Bytes())
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = plain(v.Index(i))
		}
		return out
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return float64(v.Uint())
	case reflect.Float32, reflect.Float64:
		return v.Float()
	case reflect.String:
		return v.String()
	case reflect.Bool:
		return v.Bool()
	}
	return nil
}

func addFields(out map[string]any, v reflect.Value) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		fv := v.Field(i)
		if f.Anonymous {
			inner := fv
			for inner.Kind() == reflect.Pointer && !inner.IsNil() {
				inner = inner.Elem()
			}
			if inner.Kind() == reflect.Struct {
				addFields(out, inner)
			}
		}
		if _, taken := out[f.Name]; !taken || !f.Anonymous {
			out[f.Name] = plain(fv)
		}
	}
}

func stringer(v reflect.Value) (string, bool) {
	for i := 0; i < v.NumField(); i++ {
		if v.Type().Field(i).IsExported() && !v.Type().Field(i).Anonymous {
			return "", false
		}
	}
	if v.CanAddr() {
		if s, ok := v.Addr().Interface().(fmt.Stringer); ok {
			return s.String(), true
		}
	}
	if s, ok := v.Interface().(fmt.Stringer); ok {
		return s.String(), true
	}
	return "", false
}

// Placement checks where the rendered object may go: its namespace must be
// empty or the group's (the caller sets it), and its kind one the admin
// allowed (allowed reports it; list names them for the message). The error
// names the field and what would be valid.
func Placement(u *unstructured.Unstructured, ig *v1alpha1.InstanceGroup, allowed func(group, kind string) bool, list string) error {
	if ns := u.GetNamespace(); ns != "" && ns != ig.Namespace {
		return fmt.Errorf("%s: metadata.namespace %q is not the group's namespace %q; the crd strategy creates objects in the group's own namespace only (leave it out or set %q)",
			field, ns, ig.Namespace, ig.Namespace)
	}
	gvk := u.GroupVersionKind()
	if !allowed(gvk.Group, gvk.Kind) {
		return fmt.Errorf("%s: kind %s is not allowed by the boundary ConfigMap's crdStrategy.allowedKinds (allowed: %s)",
			field, strings.TrimSuffix(gvk.Kind+"."+gvk.Group, "."), list)
	}
	return nil
}
