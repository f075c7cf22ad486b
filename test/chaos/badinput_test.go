package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/test/harness"
)

const inputNamespace = "chaos-input"

// badCase is one malformed or hostile request. Exactly one of configMap,
// deleteConfigMap, create, update and raw is set.
type badCase struct {
	name string
	// configMap returns the ConfigMap data the admin writes, from the
	// valid data in force.
	configMap func(valid map[string]string) map[string]string
	// deleteConfigMap deletes the boundary ConfigMap.
	deleteConfigMap bool
	// create edits a tenant's valid short InstanceGroup (unstructured, so
	// that wrong types can be sent) before it is created.
	create func(u map[string]any)
	// update edits the stored victim group before it is updated.
	update func(u map[string]any)
	// raw is the JSON body of a create, sent as is (strict field
	// validation): for what a client library would refuse to encode.
	raw func() string
	// strict sends the request with fieldValidation=Strict, as kubectl
	// does.
	strict bool
	// want are texts the error must contain: the field, and what would be
	// valid.
	want []string
}

// set sets u[path...] = v, creating maps on the way.
func set(u map[string]any, v any, path ...string) {
	for _, p := range path[:len(path)-1] {
		next, ok := u[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			u[p] = next
		}
		u = next
	}
	u[path[len(path)-1]] = v
}

func cfgPath(field ...string) []string {
	return append([]string{"spec", "eks", "configuration"}, field...)
}

// withData returns valid with key set to value.
func withData(key, value string) func(map[string]string) map[string]string {
	return func(valid map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range valid {
			out[k] = v
		}
		out[key] = value
		return out
	}
}

func repeat(n int, f func(i int) string) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(f(i))
	}
	return b.String()
}

func badCases() []badCase {
	tags := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = map[string]any{"key": fmt.Sprintf("team-tag-%02d", i), "value": "v"}
		}
		return out
	}
	deep := func(levels int) map[string]any {
		v := map[string]any{"x": "y"}
		for i := 0; i < levels; i++ {
			v = map[string]any{"a": v}
		}
		return v
	}
	crd := func(template string) func(u map[string]any) {
		return func(u map[string]any) {
			set(u, map[string]any{"type": "crd", "crd": map[string]any{
				"crdName": "rollingupgrades", "statusJSONPath": "{.status.currentStatus}",
				"statusSuccessString": "completed", "statusFailureString": "error", "spec": template,
			}}, "spec", "strategy")
		}
	}
	return []badCase{
		// The boundary ConfigMap, written by the admin.
		{name: "configmap: malformed YAML", configMap: withData("boundaries", "restricted: [spec.eks.configuration.image\n"),
			want: []string{"boundaries", "yaml"}},
		{name: "configmap: unknown data key", configMap: withData("boundary", "restricted: []\n"),
			want: []string{"boundary", "defaults"}},
		{name: "configmap: unknown path, nearest named", configMap: withData("boundaries", "restricted:\n- spec.eks.configuration.imageId\n"),
			want: []string{"spec.eks.configuration.imageId", "spec.eks.configuration.image"}},
		{name: "configmap: unicode look-alike path", configMap: withData("boundaries", "restricted:\n- spec.eks.configuration.lаbels\n"),
			want: []string{"spec.eks.configuration.lаbels", "non-ASCII character 'а', U+0430", "valid: labels"}},
		{name: "configmap: path both restricted and shared", configMap: withData("boundaries",
			"restricted:\n- spec.eks.configuration.labels\nshared:\n  merge:\n  - spec.eks.configuration.labels\n"),
			want: []string{"spec.eks.configuration.labels", "restricted"}},
		{name: "configmap: huge list (10,000 paths, repeated)", configMap: withData("boundaries",
			"restricted:\n"+repeat(10000, func(int) string { return "- spec.eks.configuration.image\n" })),
			want: []string{"spec.eks.configuration.image", "twice"}},
		{name: "configmap: deep nesting (10,000 levels)", configMap: withData("defaults",
			"spec:\n  eks:\n    configuration:\n      labels: "+strings.Repeat("{a: ", 10000)+"b"+strings.Repeat("}", 10000)+"\n"),
			want: []string{"defaults"}},
		{name: "configmap: wrong type in defaults", configMap: withData("defaults", "spec:\n  eks:\n    minSize: three\n"),
			want: []string{"defaults", "minSize"}},
		{name: "configmap: unknown field in defaults", configMap: withData("defaults", "spec:\n  eks:\n    configuration:\n      instanceTyp: m5.large\n"),
			want: []string{"defaults", "instanceTyp"}},
		{name: "configmap: selector syntax error", configMap: withData("conditionals",
			"- annotationSelector: 'team in (a'\n  defaults:\n    spec:\n      eks:\n        configuration:\n          instanceType: m5.large\n"),
			want: []string{"annotationSelector", "team in (a"}},
		{name: "configmap: unknown enforcement", configMap: withData("enforcement", "block"),
			want: []string{"enforcement", "warn", "deny"}},
		{name: "configmap: negative maxConcurrentUpgrades", configMap: withData("rollout", "maxConcurrentUpgrades: -1\n"),
			want: []string{"maxConcurrentUpgrades", "-1"}},
		{name: "configmap: quota of the wrong type", configMap: withData("quotas", "perNamespace:\n  maxGroups: five\n"),
			want: []string{"data.quotas.perNamespace.maxGroups", "expected an integer"}},
		{name: "configmap: crd strategy may create Secrets", configMap: withData("crdStrategy", "allowedKinds:\n- {group: \"\", kind: Secret}\n"),
			want: []string{"data.crdStrategy.allowedKinds[0]", "Secret", "upgrademgr.keikoproj.io"}},
		{name: "configmap: defaults that break an existing group", configMap: func(valid map[string]string) map[string]string {
			return withData("defaults", strings.Replace(valid["defaults"], "image: "+cloud.AMIs[0], "image: not-an-ami", 1))(valid)
		}, want: []string{inputNamespace + "/victim", "spec.eks.configuration.image", "AMI id (ami-...)"}},
		{name: "configmap: deleted while groups exist", deleteConfigMap: true,
			want: []string{"cannot be deleted while they exist", inputNamespace + "/victim"}},

		// InstanceGroups, created by a tenant.
		{name: "group: negative size", create: func(u map[string]any) { set(u, -1, "spec", "eks", "minSize") },
			want: []string{"spec.eks.minSize", "greater than or equal to 0"}},
		{name: "group: minSize > maxSize", create: func(u map[string]any) { set(u, 5, "spec", "eks", "minSize"); set(u, 2, "spec", "eks", "maxSize") },
			want: []string{"spec.eks.minSize", "must not be greater than maxSize (2)"}},
		{name: "group: wrong type", create: func(u map[string]any) { set(u, "three", "spec", "eks", "maxSize") },
			want: []string{"spec.eks.maxSize", "integer"}},
		{name: "group: unknown field (kubectl's strict validation)", strict: true, create: func(u map[string]any) { set(u, "m5.large", cfgPath("instanceTyp")...) },
			want: []string{"instanceTyp", "unknown field"}},
		{name: "group: deep nesting (100,000 levels)", raw: func() string {
			return `{"apiVersion":"instancemgr.keikoproj.io/v1alpha1","kind":"InstanceGroup","metadata":{"name":"bad"},` +
				`"spec":{"eks":{"minSize":1,"maxSize":1,"configuration":{"instanceType":"t3.medium","labels":` +
				strings.Repeat(`{"a":`, 100000) + `"x"` + strings.Repeat("}", 100000) + `}}}}`
		}, want: []string{"max depth"}},
		{name: "group: nested object where a label value goes", create: func(u map[string]any) { set(u, deep(50), cfgPath("labels")...) },
			want: []string{"spec.eks.configuration.labels.a", "string"}},
		{name: "group: percent out of range", create: func(u map[string]any) {
			set(u, map[string]any{"type": "rollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": "150%"}}, "spec", "strategy")
		}, want: []string{"spec.strategy.rollingUpdate.maxUnavailable", "from 1% to 100%"}},
		{name: "group: percent that is not a number", create: func(u map[string]any) {
			set(u, map[string]any{"type": "rollingUpdate", "rollingUpdate": map[string]any{"maxSurge": "ten%"}}, "spec", "strategy")
		}, want: []string{"spec.strategy.rollingUpdate.maxSurge", "percentage"}},
		{name: "group: unknown strategy", create: func(u map[string]any) { set(u, map[string]any{"type": "yolo"}, "spec", "strategy") },
			want: []string{"spec.strategy.type", "rollingUpdate", "crd"}},
		{name: "group: name past the 63 characters of a label value", create: func(u map[string]any) {
			set(u, strings.Repeat("n", 64), "metadata", "name")
		}, want: []string{"metadata.name", "at most 63", v1alpha1.LabelInstanceGroup}},
		{name: "group: unicode label value", create: func(u map[string]any) { set(u, map[string]any{"team": "équipe"}, cfgPath("labels")...) },
			want: []string{"spec.eks.configuration.labels[team]", "alphanumeric"}},
		{name: "group: label key with a slash too many", create: func(u map[string]any) { set(u, map[string]any{"a/b/c": "x"}, cfgPath("labels")...) },
			want: []string{"spec.eks.configuration.labels[a/b/c]", "alphanumeric"}},
		{name: "group: 51 tags", create: func(u map[string]any) { set(u, tags(51), cfgPath("tags")...) },
			want: []string{"spec.eks.configuration.tags", "AWS allows 50"}},
		{name: "group: tag key past 128 characters", create: func(u map[string]any) {
			set(u, []any{map[string]any{"key": strings.Repeat("k", 129), "value": "v"}}, cfgPath("tags")...)
		}, want: []string{"spec.eks.configuration.tags[1].key", "at most 128"}},
		{name: "group: tag value past 256 characters", create: func(u map[string]any) {
			set(u, []any{map[string]any{"key": "k", "value": strings.Repeat("v", 257)}}, cfgPath("tags")...)
		}, want: []string{"spec.eks.configuration.tags[1].value", "at most 256"}},
		{name: "group: ownership tag spoofed", create: func(u map[string]any) {
			set(u, []any{map[string]any{"key": "instancemgr.keikoproj.io/instancegroup", "value": "other/group"}}, cfgPath("tags")...)
		}, want: []string{"spec.eks.configuration.tags[", "set by instance-manager"}},
		{name: "group: user data over 16 KB", create: func(u map[string]any) {
			set(u, []any{map[string]any{"name": "big", "stage": "PreBootstrap", "data": strings.Repeat("#", 17<<10)}}, cfgPath("userData")...)
		}, want: []string{"spec.eks.configuration.userData", "EC2 allows 16384 bytes"}},
		{name: "group: crd template with a nested range", create: crd(
			"apiVersion: upgrademgr.keikoproj.io/v1alpha1\nkind: RollingUpgrade\nspec:\n{{range .InstanceGroup.Spec.EKS.Configuration.Tags}}{{range .}}x{{end}}{{end}}\n"),
			want: []string{"spec.strategy.crd.spec", "Go templates are no longer accepted", "${.status.activeScalingGroupName}"}},
		{name: "group: crd template defining templates", create: crd(
			"{{define \"x\"}}{{template \"x\"}}{{end}}apiVersion: upgrademgr.keikoproj.io/v1alpha1\nkind: RollingUpgrade\n"),
			want: []string{"spec.strategy.crd.spec", "Go templates are no longer accepted"}},
		{name: "group: crd template that creates a Secret", create: crd(
			"apiVersion: v1\nkind: Secret\nmetadata:\n  name: stolen\nstringData:\n  x: y\n"),
			want: []string{"spec.strategy.crd.spec", "kind Secret is not allowed"}},
		{name: "group: crd template aimed at another namespace", create: crd(
			"apiVersion: upgrademgr.keikoproj.io/v1alpha1\nkind: RollingUpgrade\nmetadata:\n  namespace: kube-system\n"),
			want: []string{"spec.strategy.crd.spec", "kube-system"}},
		{name: "group: crd template printf width bomb", create: crd(
			"apiVersion: upgrademgr.keikoproj.io/v1alpha1\nkind: RollingUpgrade\nmetadata:\n  name: '{{printf \"%999999999d\" 1}}'\n"),
			want: []string{"spec.strategy.crd.spec", "Go templates are no longer accepted"}},
		{name: "group: crd template running a script in upgrade-manager", create: crd(
			"apiVersion: upgrademgr.keikoproj.io/v1alpha1\nkind: RollingUpgrade\nspec:\n  preDrain: {script: id}\n"),
			want: []string{"spec.strategy.crd.spec", "kind RollingUpgrade.upgrademgr.keikoproj.io is not allowed", "(allowed: none)"}},

		// The stored victim, updated by the tenant.
		{name: "update: maxSize below minSize", update: func(u map[string]any) { set(u, 0, "spec", "eks", "maxSize") },
			want: []string{"spec.eks.minSize", "must not be greater than maxSize (0)"}},
		{name: "update: provenance annotation forged", update: func(u map[string]any) {
			set(u, `{"eks":{"minSize":1,"maxSize":2}}`, "metadata", "annotations", v1alpha1.AnnotationSubmittedSpec)
		}, want: []string{v1alpha1.AnnotationSubmittedSpec, "written by instance-manager only"}},
		{name: "update: unknown provisioner", update: func(u map[string]any) { set(u, "ec2", "spec", "provisioner") },
			want: []string{"spec.provisioner", "eks", "eks-managed", "eks-fargate"}},
	}
}

// snapshot is what a refused request must not change: the boundary
// ConfigMap, the InstanceGroups of the test namespace (everything but
// their status) and moto's resources.
type snapshot struct {
	configMap string
	groups    []string
	cloud     []string
}

func takeSnapshot(ctx context.Context, iamOwners *owners) (snapshot, error) {
	var s snapshot
	cm := &corev1.ConfigMap{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: harness.ConfigNamespace, Name: app.ConfigMapName}, cm); err != nil {
		return s, err
	}
	data, _ := json.Marshal(cm.Data)
	s.configMap = cm.ResourceVersion + " " + string(data)
	list := &v1alpha1.InstanceGroupList{}
	if err := admin.List(ctx, list, client.InNamespace(inputNamespace)); err != nil {
		return s, err
	}
	for _, ig := range list.Items {
		spec, _ := json.Marshal(ig.Spec)
		meta, _ := json.Marshal(map[string]any{"labels": ig.Labels, "annotations": ig.Annotations, "finalizers": ig.Finalizers, "generation": ig.Generation})
		s.groups = append(s.groups, ig.Name+" "+string(meta)+" "+string(spec))
	}
	sort.Strings(s.groups)
	inv, err := readInventory(ctx, environment.AWS, iamOwners)
	if err != nil {
		return s, err
	}
	s.cloud = inv.leftovers()
	return s, nil
}

func (s snapshot) diff(o snapshot) string {
	var out []string
	if s.configMap != o.configMap {
		out = append(out, "the boundary ConfigMap changed")
	}
	if strings.Join(s.groups, "\n") != strings.Join(o.groups, "\n") {
		out = append(out, fmt.Sprintf("the InstanceGroups changed:\n    before %v\n    after  %v", s.groups, o.groups))
	}
	if strings.Join(s.cloud, "\n") != strings.Join(o.cloud, "\n") {
		out = append(out, fmt.Sprintf("AWS changed:\n    before %v\n    after  %v", s.cloud, o.cloud))
	}
	return strings.Join(out, "; ")
}

// TestBadInput sends malformed and hostile ConfigMaps and InstanceGroups
// through the API server and the webhooks: each is refused with an error
// that names the field and what would be valid, and nothing changes (the
// ConfigMap, the stored groups, AWS).
func TestBadInput(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	started := time.Now()
	awsCfg := environment.AWS.Copy()
	mgr, err := harness.StartManager(environment.Config, environment.Envtest.WebhookInstallOptions, app.Options{
		AWS: &awsCfg, PollInterval: time.Second, ResyncInterval: time.Minute, CloudChecks: true,
		GCPeriod: time.Hour, GCGrace: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = mgr.Stop() }()
	// The admin shares the strategy and user data with tenants, so that
	// their values reach validation.
	valid := cloud.Boundaries(cloud.AMIs[0], 5)
	valid["boundaries"] = strings.Replace(valid["boundaries"], "  replace:\n  - spec.strategy\n",
		"  replace:\n  - spec.strategy\n  - spec.eks.configuration.userData\n", 1)
	if err := harness.SetBoundaries(ctx, admin, valid); err != nil {
		t.Fatal(err)
	}
	ensureNamespace(t, inputNamespace)
	victim := shortGroup(inputNamespace, "victim", "t3.medium")
	victim.Spec.EKS.MaxSize = 2
	if err := admin.Create(ctx, victim); err != nil {
		t.Fatal(err)
	}
	defer func() {
		// Gone, cloud resources too, before this test's manager stops.
		_ = admin.Delete(ctx, victim.DeepCopy())
		if pending := waitGroups(ctx, []string{inputNamespace}, []string{key(victim)}, 2*time.Minute, func(_ string, ig *v1alpha1.InstanceGroup) (bool, string) {
			return ig == nil, "still there"
		}); len(pending) > 0 {
			t.Errorf("the victim group was not deleted: %v", pending)
		}
	}()
	if pending := waitGroups(ctx, []string{inputNamespace}, []string{key(victim)}, 3*time.Minute, func(_ string, ig *v1alpha1.InstanceGroup) (bool, string) {
		if ig == nil {
			return false, "not found"
		}
		return ready(ig)
	}); len(pending) > 0 {
		t.Fatalf("the victim group is not Ready: %v", pending)
	}
	iamOwners := &owners{}
	iamOwners.add(inputNamespace, "victim")

	cases := badCases()
	refused, unclear, changed := 0, 0, 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before, err := takeSnapshot(ctx, iamOwners)
			if err != nil {
				t.Fatal(err)
			}
			err = apply(ctx, c)
			if err == nil {
				t.Errorf("accepted; want it refused with an error containing %q", c.want)
			} else {
				refused++
				msg := err.Error()
				t.Logf("refused: %s", shorten(msg, 600))
				var missing []string
				for _, w := range c.want {
					if !strings.Contains(strings.ToLower(msg), strings.ToLower(w)) {
						missing = append(missing, w)
					}
				}
				if len(missing) > 0 {
					unclear++
					t.Errorf("the error does not say %q:\n%s", missing, shorten(msg, 2000))
				}
			}
			after, err := takeSnapshot(ctx, iamOwners)
			if err != nil {
				t.Fatal(err)
			}
			if d := before.diff(after); d != "" {
				changed++
				t.Errorf("something changed: %s", d)
				// Put things back for the next case.
				_ = harness.WriteBoundaries(ctx, admin, valid)
				_ = admin.DeleteAllOf(ctx, &v1alpha1.InstanceGroup{}, client.InNamespace(inputNamespace), client.MatchingFields{"metadata.name": "bad"})
			}
		})
	}
	// At the limits is fine: a name of 63 characters, in a namespace of
	// 63, with as many tags as the Auto Scaling group holds (dry run:
	// admitted, nothing stored).
	t.Run("at the limits: accepted", func(t *testing.T) {
		ns := strings.Repeat("n", 63)
		ensureNamespace(t, ns)
		ig := shortGroup(ns, strings.Repeat("g", 63), "t3.medium")
		for i := 0; i < 40; i++ {
			ig.Spec.EKS.Configuration.Tags = append(ig.Spec.EKS.Configuration.Tags, map[string]string{"key": fmt.Sprintf("t%02d", i), "value": strings.Repeat("v", 256)})
		}
		if err := admin.Create(ctx, ig, client.DryRunAll); err != nil {
			t.Errorf("refused: %v", err)
		}
	})
	figure(t, "bad_inputs", len(cases))
	figure(t, "bad_inputs_refused", refused)
	figure(t, "bad_inputs_unclear", unclear)
	figure(t, "bad_inputs_changed_something", changed)
	figure(t, "bad_input_seconds", int(time.Since(started).Seconds()))
}

// apply sends the case's request and returns the API server's answer.
func apply(ctx context.Context, c badCase) error {
	var opts []client.CreateOption
	var uopts []client.UpdateOption
	if c.strict {
		opts = append(opts, client.FieldValidation(metav1.FieldValidationStrict))
		uopts = append(uopts, client.FieldValidation(metav1.FieldValidationStrict))
	}
	switch {
	case c.configMap != nil:
		cm := &corev1.ConfigMap{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: harness.ConfigNamespace, Name: app.ConfigMapName}, cm); err != nil {
			return fmt.Errorf("test setup: %w", err)
		}
		cm.Data = c.configMap(cm.Data)
		return admin.Update(ctx, cm, uopts...)
	case c.deleteConfigMap:
		return admin.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: harness.ConfigNamespace, Name: app.ConfigMapName}})
	case c.create != nil:
		u := map[string]any{
			"apiVersion": v1alpha1.GroupVersion.String(), "kind": "InstanceGroup",
			"metadata": map[string]any{"namespace": inputNamespace, "name": "bad"},
			"spec": map[string]any{"eks": map[string]any{"minSize": 1, "maxSize": 1,
				"configuration": map[string]any{"instanceType": "t3.medium", "labels": map[string]any{"team": inputNamespace}}}},
		}
		c.create(u)
		err := admin.Create(ctx, &unstructured.Unstructured{Object: u}, opts...)
		if err == nil {
			// Accepted: remove it again (the case fails).
			_ = admin.Delete(ctx, &unstructured.Unstructured{Object: u})
		}
		return err
	case c.raw != nil:
		return postRaw(ctx, c.raw())
	case c.update != nil:
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("InstanceGroup"))
		if err := admin.Get(ctx, client.ObjectKey{Namespace: inputNamespace, Name: "victim"}, u); err != nil {
			return fmt.Errorf("test setup: %w", err)
		}
		c.update(u.Object)
		return admin.Update(ctx, u, uopts...)
	}
	return fmt.Errorf("test setup: case %q sends nothing", c.name)
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("… (%d bytes)", len(s))
}

// postRaw creates an InstanceGroup in the test namespace from body, as the
// admin, and returns the API server's refusal.
func postRaw(ctx context.Context, body string) error {
	hc, err := rest.HTTPClientFor(environment.Config)
	if err != nil {
		return fmt.Errorf("test setup: %w", err)
	}
	url := fmt.Sprintf("%s/apis/%s/namespaces/%s/instancegroups?fieldValidation=Strict", environment.Config.Host, v1alpha1.GroupVersion, inputNamespace)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return fmt.Errorf("test setup: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("test setup: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 300 {
		_ = admin.Delete(ctx, &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: inputNamespace, Name: "bad"}})
		return nil
	}
	st := &metav1.Status{}
	if json.Unmarshal(out, st) == nil && st.Message != "" {
		return fmt.Errorf("%s (HTTP %d)", st.Message, resp.StatusCode)
	}
	return fmt.Errorf("HTTP %d: %s", resp.StatusCode, out)
}
