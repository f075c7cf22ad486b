package ownership

import (
	"maps"
	"slices"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// EC2TagMap returns EC2 tags as a map of key to value.
func EC2TagMap(tags []ec2types.Tag) map[string]string {
	return TagMap(tags, func(t ec2types.Tag) *string { return t.Key }, func(t ec2types.Tag) *string { return t.Value })
}

// EC2Tags returns m as EC2 tags, sorted by key.
func EC2Tags(m map[string]string) []ec2types.Tag {
	out := make([]ec2types.Tag, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, ec2types.Tag{Key: awssdk.String(k), Value: awssdk.String(m[k])})
	}
	return out
}
