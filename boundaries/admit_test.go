package boundaries

import (
	"encoding/json"
	"strings"
	"testing"
)

// admitData is a ConfigMap for Admit's cases: a restricted image with a
// default, a conditional image for Windows, merged labels, and the
// enforcement and shared annotations each case sets.
func admitData(enforcement string, shared ...string) map[string]string {
	data := map[string]string{
		"boundaries": "restricted:\n- spec.eks.configuration.image\nshared:\n  merge:\n  - spec.eks.configuration.labels\n  replace:\n  - spec.strategy\n  - spec.eks-fargate\n",
		"defaults":   "spec:\n  provisioner: eks\n  strategy:\n    type: rollingupdate\n  eks:\n    configuration:\n      image: ami-admin\n      labels:\n        team: platform\n",
		"conditionals": "- annotationSelector: 'instancemgr.keikoproj.io/os-family = windows'\n" +
			"  defaults:\n    spec:\n      eks:\n        configuration:\n          image: ami-windows\n",
		"enforcement": enforcement,
	}
	if len(shared) > 0 {
		data["sharedAnnotations"] = "- " + strings.Join(shared, "\n- ") + "\n"
	}
	return data
}

const osFamily = "instancemgr.keikoproj.io/os-family"

func TestAdmit(t *testing.T) {
	warn := mustParse(t, admitData("warn"))
	deny := mustParse(t, admitData("deny"))
	sharesOS := mustParse(t, admitData("deny", osFamily))
	excludes := mustParse(t, with(admitData("deny"), "excludedNamespaces", "- team-a\n"))

	type want struct {
		invalid         string // substring of the forms error; "" for none
		annotationKeys  []string
		annotationDeny  bool
		overridesDenied bool
		overrides       []string // paths
		image           string   // spec.eks.configuration.image of the effective spec; "" when refused
		strategy        string   // spec.strategy.type of the effective spec
		submitted       string   // substring of the submitted-spec annotation
		effective       string   // substring of the effective spec's JSON
		err             string   // substring of the error
	}
	cases := []struct {
		name string
		in   AdmitInput
		want want
	}{
		{name: "create: spellings made canonical in the submission and the effective spec",
			in:   AdmitInput{Config: warn, Newest: warn, Submitted: specOf(t, `{strategy: {type: ROLLING-UPDATE}}`), Namespace: "team-a"},
			want: want{image: "ami-admin", strategy: "rollingUpdate", submitted: `"type":"rollingUpdate"`}},
		{name: "the submission keeps the tenant's forms, the effective spec ours",
			in: AdmitInput{Config: warn, Newest: warn, Namespace: "team-a",
				Submitted: specOf(t, `{provisioner: eks-fargate, eks-fargate: {tags: [{a: "1"}, {b: "2"}]}}`)},
			want: want{image: "ami-admin", strategy: "managed", submitted: `"tags":[{"a":"1"},{"b":"2"}]`, effective: `"tags":{"a":"1","b":"2"}`}},
		{name: "forms that do not normalise are invalid",
			in: AdmitInput{Config: warn, Newest: warn, Namespace: "team-a",
				Submitted: specOf(t, `{eks-fargate: {tags: [{a: "1"}, {a: "2"}]}}`)},
			want: want{invalid: `spec.eks-fargate.tags[1][a]`}},
		{name: "warn: a restricted value is replaced and reported",
			in:   AdmitInput{Config: warn, Newest: warn, Namespace: "team-a", Submitted: specOf(t, `{eks: {configuration: {image: ami-mine}}}`)},
			want: want{overrides: []string{"spec.eks.configuration.image"}, image: "ami-admin", strategy: "rollingUpdate", submitted: "ami-mine"}},
		{name: "deny: a restricted value is refused",
			in:   AdmitInput{Config: deny, Newest: deny, Namespace: "team-a", Submitted: specOf(t, `{eks: {configuration: {image: ami-mine}}}`)},
			want: want{overridesDenied: true, overrides: []string{"spec.eks.configuration.image"}}},
		{name: "deny, update: an override already in the kept submission was answered then",
			in: AdmitInput{Config: deny, Newest: deny, Namespace: "team-a", Update: true,
				Submitted:    specOf(t, `{eks: {configuration: {image: ami-mine, labels: {app: x}}}}`),
				OldSubmitted: specOf(t, `{eks: {configuration: {image: ami-mine}}}`)},
			want: want{image: "ami-admin", strategy: "rollingUpdate", submitted: "ami-mine"}},
		{name: "deny, update: a new restricted value is refused",
			in: AdmitInput{Config: deny, Newest: deny, Namespace: "team-a", Update: true,
				Submitted:    specOf(t, `{eks: {configuration: {image: ami-other}}}`),
				OldSubmitted: specOf(t, `{eks: {configuration: {image: ami-mine}}}`)},
			want: want{overridesDenied: true, overrides: []string{"spec.eks.configuration.image"}}},
		{name: "deny: the controller's re-admission is not judged",
			in:   AdmitInput{Config: deny, Newest: deny, Namespace: "team-a", Controller: true, Submitted: specOf(t, `{eks: {configuration: {image: ami-mine}}}`)},
			want: want{image: "ami-admin", strategy: "rollingUpdate", submitted: "ami-mine"}},
		{name: "deny: a restricted behaviour annotation added is refused",
			in: AdmitInput{Config: deny, Newest: deny, Namespace: "team-a", Submitted: map[string]any{},
				Annotations: map[string]string{osFamily: "windows"}},
			want: want{annotationKeys: []string{osFamily}, annotationDeny: true}},
		{name: "warn: a restricted behaviour annotation is dropped before the effective spec",
			in: AdmitInput{Config: warn, Newest: warn, Namespace: "team-a", Submitted: map[string]any{},
				Annotations: map[string]string{osFamily: "windows"}},
			want: want{annotationKeys: []string{osFamily}, image: "ami-admin", strategy: "rollingUpdate", submitted: "{}"}},
		{name: "warn, update: a removed restricted annotation is put back",
			in: AdmitInput{Config: warn, Newest: warn, Namespace: "team-a", Update: true, Submitted: map[string]any{}, OldSubmitted: map[string]any{},
				OldAnnotations: map[string]string{osFamily: "windows"}, Annotations: map[string]string{}},
			want: want{annotationKeys: []string{osFamily}, image: "ami-windows", strategy: "rollingUpdate", submitted: "{}"}},
		{name: "a shared annotation is the tenant's",
			in: AdmitInput{Config: sharesOS, Newest: sharesOS, Namespace: "team-a", Submitted: map[string]any{},
				Annotations: map[string]string{osFamily: "windows"}},
			want: want{image: "ami-windows", strategy: "rollingUpdate", submitted: "{}"}},
		{name: "the newest ConfigMap judges the annotations, the group's revision the spec",
			in: AdmitInput{Config: deny, Newest: sharesOS, Namespace: "team-a", Submitted: map[string]any{},
				Annotations: map[string]string{osFamily: "windows"}},
			want: want{image: "ami-windows", strategy: "rollingUpdate", submitted: "{}"}},
		{name: "the admin's namespace: annotations not judged",
			in: AdmitInput{Config: deny, Newest: deny, Namespace: "instance-manager", AdminNamespace: true, Submitted: map[string]any{},
				Annotations: map[string]string{osFamily: "windows"}},
			want: want{image: "ami-windows", strategy: "rollingUpdate", submitted: "{}"}},
		{name: "an excluded namespace: admitted as submitted",
			in: AdmitInput{Config: excludes, Newest: excludes, Namespace: "team-a", Annotations: map[string]string{osFamily: "windows"},
				Submitted: specOf(t, `{strategy: {type: crd}, eks: {configuration: {image: ami-mine}}}`)},
			want: want{image: "ami-mine", strategy: "crd", submitted: "ami-mine"}},
		{name: "no ConfigMap (open mode): admitted as submitted",
			in:   AdmitInput{Namespace: "team-a", Submitted: specOf(t, `{strategy: {type: RollingUpdate}, eks: {configuration: {image: ami-mine}}}`)},
			want: want{image: "ami-mine", strategy: "rollingUpdate", submitted: "ami-mine"}},
		{name: "a submission the ConfigMap cannot be applied to",
			in:   AdmitInput{Config: warn, Newest: warn, Namespace: "team-a", Submitted: specOf(t, `{eks: {configuration: {labels: [a]}}}`)},
			want: want{err: "spec.eks.configuration.labels"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Admit(tc.in)
			if (err != nil) != (tc.want.err != "") || err != nil && !strings.Contains(err.Error(), tc.want.err) {
				t.Fatalf("error %v, want one containing %q", err, tc.want.err)
			}
			if (len(got.Invalid) > 0) != (tc.want.invalid != "") || len(got.Invalid) > 0 && !strings.Contains(got.Invalid.ToAggregate().Error(), tc.want.invalid) {
				t.Errorf("invalid %v, want %q", got.Invalid, tc.want.invalid)
			}
			if strings.Join(got.Annotations.Keys, ",") != strings.Join(tc.want.annotationKeys, ",") || got.Annotations.Deny != tc.want.annotationDeny {
				t.Errorf("annotations %+v, want keys %v deny %v", got.Annotations, tc.want.annotationKeys, tc.want.annotationDeny)
			}
			var paths []string
			for _, o := range got.Overrides {
				paths = append(paths, o.Path)
			}
			if strings.Join(paths, ",") != strings.Join(tc.want.overrides, ",") || got.OverridesDenied != tc.want.overridesDenied {
				t.Errorf("overrides %v denied %v, want %v denied %v", paths, got.OverridesDenied, tc.want.overrides, tc.want.overridesDenied)
			}
			image, _ := getPath(got.Spec, splitPath("eks.configuration.image"))
			strategy, _ := getPath(got.Spec, splitPath("strategy.type"))
			if s, _ := image.(string); s != tc.want.image {
				t.Errorf("effective image %v, want %q", image, tc.want.image)
			}
			if s, _ := strategy.(string); s != tc.want.strategy {
				t.Errorf("effective strategy.type %v, want %q", strategy, tc.want.strategy)
			}
			if !strings.Contains(got.Submitted, tc.want.submitted) || (tc.want.submitted == "") != (got.Submitted == "") {
				t.Errorf("submitted %s, want it to contain %q", got.Submitted, tc.want.submitted)
			}
			if b, _ := json.Marshal(got.Spec); !strings.Contains(string(b), tc.want.effective) {
				t.Errorf("effective spec %s, want it to contain %s", b, tc.want.effective)
			}
			if got.Spec != nil && got.Hash != tc.in.Config.Hash(tc.in.Config.Excluded(tc.in.Namespace)) {
				t.Errorf("hash %q is not the revision's", got.Hash)
			}
		})
	}
}

// Admit leaves the submission it is given with canonical spellings (the
// webhook keeps it) and the kept submission with our forms (compared with
// the overrides), and shares no memory with the effective spec.
func TestAdmitRewritesItsInputsInPlace(t *testing.T) {
	cfg := mustParse(t, admitData("warn"))
	submitted := specOf(t, `{strategy: {type: rollingupdate}}`)
	old := specOf(t, `{eks-fargate: {tags: [{a: "1"}]}}`)
	got, err := Admit(AdmitInput{Config: cfg, Newest: cfg, Update: true, Submitted: submitted, OldSubmitted: old, Namespace: "team-a"})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(submitted); string(b) != `{"strategy":{"type":"rollingUpdate"}}` {
		t.Errorf("submission after Admit %s", b)
	}
	if b, _ := json.Marshal(old); string(b) != `{"eks-fargate":{"tags":{"a":"1"}}}` {
		t.Errorf("kept submission after Admit %s", b)
	}
	got.Spec["strategy"].(map[string]any)["type"] = "scribbled"
	if submitted["strategy"].(map[string]any)["type"] != "rollingUpdate" {
		t.Error("the effective spec shares memory with the submission")
	}
}

func TestJudgeAnnotations(t *testing.T) {
	cases := []struct {
		name          string
		cfg           *Config
		old, incoming map[string]string
		keys          []string
		deny          bool
	}{
		{"no ConfigMap refuses every change", nil, nil, map[string]string{osFamily: "windows"}, []string{osFamily}, true},
		{"no ConfigMap, nothing changed", nil, map[string]string{osFamily: "windows"}, map[string]string{osFamily: "windows"}, nil, false},
		{"warn drops", mustParse(t, admitData("warn")), nil, map[string]string{osFamily: "windows", "other": "x"}, []string{osFamily}, false},
		{"deny refuses a removal", mustParse(t, admitData("deny")), map[string]string{osFamily: "windows"}, nil, []string{osFamily}, true},
		{"shared", mustParse(t, admitData("deny", osFamily)), nil, map[string]string{osFamily: "windows"}, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.cfg.JudgeAnnotations(tc.old, tc.incoming)
			if strings.Join(v.Keys, ",") != strings.Join(tc.keys, ",") || v.Deny != tc.deny {
				t.Errorf("verdict %+v, want keys %v deny %v", v, tc.keys, tc.deny)
			}
		})
	}
}

func TestRevertAnnotations(t *testing.T) {
	old := map[string]string{"a": "1", "b": "2"}
	incoming := map[string]string{"a": "changed", "c": "added", "d": "kept"}
	got := RevertAnnotations(old, incoming, []string{"a", "b", "c"})
	want := map[string]string{"a": "1", "b": "2", "d": "kept"}
	if d := diff(t, want, got); d != "" {
		t.Errorf("reverted (-want +got):\n%s", d)
	}
	if incoming["a"] != "changed" {
		t.Error("RevertAnnotations changed its input")
	}
}
