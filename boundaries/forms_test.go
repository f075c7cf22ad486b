package boundaries

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestNormalizeForms(t *testing.T) {
	tests := []struct {
		name string
		spec string
		want string   // the spec after normalising
		errs []string // substrings, one per error, in order
	}{
		{name: "our map is left alone",
			spec: `{"eks-fargate":{"tags":{"a":"1"}}}`, want: `{"eks-fargate":{"tags":{"a":"1"}}}`},
		{name: "list of maps merges",
			spec: `{"eks-fargate":{"tags":[{"key1":"v1","key2":"v2"},{"key3":"v3"}]}}`,
			want: `{"eks-fargate":{"tags":{"key1":"v1","key2":"v2","key3":"v3"}}}`},
		{name: "a key repeated with the same value",
			spec: `{"eks-fargate":{"tags":[{"a":"1"},{"a":"1"}]}}`, want: `{"eks-fargate":{"tags":{"a":"1"}}}`},
		{name: "an empty list",
			spec: `{"eks-fargate":{"tags":[]}}`, want: `{"eks-fargate":{"tags":{}}}`},
		{name: "conflicting keys",
			spec: `{"eks-fargate":{"tags":[{"a":"1"},{"b":"2"},{"a":"3"}]}}`,
			want: `{"eks-fargate":{"tags":{"a":"1","b":"2"}}}`,
			errs: []string{`spec.eks-fargate.tags[2][a]: Invalid value: "3": tag "a" is already set to "1" by spec.eks-fargate.tags[0][a]`}},
		{name: "an item that is not an object",
			spec: `{"eks-fargate":{"tags":["a=1"]}}`, want: `{"eks-fargate":{"tags":{}}}`,
			errs: []string{`spec.eks-fargate.tags[0]: Invalid value: "a=1": must be an object of tag keys and values`}},
		{name: "the original's hop limit name moves",
			spec: `{"eks":{"configuration":{"metadataOptions":{"httpTokens":"required","httpPutHopLimit":2}}}}`,
			want: `{"eks":{"configuration":{"metadataOptions":{"httpTokens":"required","httpPutResponseHopLimit":2}}}}`},
		{name: "both hop limit names, same value",
			spec: `{"eks":{"configuration":{"metadataOptions":{"httpPutHopLimit":2,"httpPutResponseHopLimit":2}}}}`,
			want: `{"eks":{"configuration":{"metadataOptions":{"httpPutResponseHopLimit":2}}}}`},
		{name: "both hop limit names, different values",
			spec: `{"eks":{"configuration":{"metadataOptions":{"httpPutHopLimit":2,"httpPutResponseHopLimit":3}}}}`,
			want: `{"eks":{"configuration":{"metadataOptions":{"httpPutResponseHopLimit":3}}}}`,
			errs: []string{"spec.eks.configuration.metadataOptions.httpPutHopLimit: Invalid value: 2: is keikoproj instance-manager's name of spec.eks.configuration.metadataOptions.httpPutResponseHopLimit, which is set to 3"}},
		{name: "other shapes are left for validation",
			spec: `{"eks-fargate":{"tags":"a=1"},"eks":{"configuration":"x"}}`, want: `{"eks-fargate":{"tags":"a=1"},"eks":{"configuration":"x"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var spec, want map[string]any
			if err := json.Unmarshal([]byte(tt.spec), &spec); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tt.want), &want); err != nil {
				t.Fatal(err)
			}
			errs := NormalizeForms(spec)
			if len(errs) != len(tt.errs) {
				t.Fatalf("errors %v, want %d containing %q", errs, len(tt.errs), tt.errs)
			}
			for i, e := range errs {
				if !strings.Contains(e.Error(), tt.errs[i]) {
					t.Errorf("error %d is %q, want it to contain %q", i, e.Error(), tt.errs[i])
				}
			}
			if !reflect.DeepEqual(spec, want) {
				t.Errorf("normalised to %s, want %s", CompactJSON(spec), tt.want)
			}
		})
	}
}
