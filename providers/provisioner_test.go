package providers

import (
	"math"
	"testing"
)

func TestCheckInt32(t *testing.T) {
	for _, tc := range []struct {
		fields map[string]int64
		want   string
	}{
		{map[string]int64{"spec.eks.minSize": 0, "spec.eks.maxSize": math.MaxInt32}, ""},
		{map[string]int64{"spec.eks.maxSize": 1<<61 + 512}, "spec.eks.maxSize: 2305843009213694464 is out of range (0 to 2147483647)"},
		{map[string]int64{"spec.eks.minSize": -1, "spec.eks.maxSize": 1 << 40}, "spec.eks.maxSize: 1099511627776 is out of range (0 to 2147483647)"},
	} {
		err := CheckInt32(tc.fields)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckInt32(%v) = %v, want nil", tc.fields, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want || !IsSpecError(err)):
			t.Errorf("CheckInt32(%v) = %v, want the SpecError %q", tc.fields, err, tc.want)
		}
	}
}
