// Package tagrecord keeps the record of which tags the controller set on
// a resource whose tags it keeps in step with the spec (Auto Scaling
// groups, EKS managed node groups), so that only tags the controller set
// are ever removed: a tag someone else added stays.
package tagrecord

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// Key starts the keys of the tags that record which other tags the
// controller set on a resource ("k1,k2,..."; values hold 256 characters,
// so a long record continues in "<Key>-1", "-2", ...). Only recorded keys
// (and the controller's own instancemgr.keikoproj.io/* keys) are ever
// removed: a tag someone else put on the resource stays.
const Key = "instancemgr.keikoproj.io/managed-tags"

// KeyHooksHash on an Auto Scaling group records the lifecycle hooks last
// applied (the eks provisioner writes it apart from the spec's tags), so
// Removable never lists it.
const KeyHooksHash = "instancemgr.keikoproj.io/lifecycle-hooks"

// valueLimit is the longest tag value Auto Scaling accepts.
const valueLimit = 256

// Bookkeeping reports whether k is one of the controller's bookkeeping
// tags (the record, the lifecycle hooks hash), which are not propagated to
// instances.
func Bookkeeping(k string) bool {
	return k == KeyHooksHash || k == Key || strings.HasPrefix(k, Key+"-")
}

// With returns tags plus the record of the keys in it that are not the
// controller's own (instancemgr.keikoproj.io/*, Name): the spec's and the
// cluster-autoscaler's, sorted under Key (continued in "-1", "-2", ...
// past 256 characters), so an unchanged set writes nothing.
func With(tags map[string]string) map[string]string {
	out := maps.Clone(tags)
	var keys []string
	for k := range tags {
		if k != "Name" && !ownedPrefix(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	part, value := 0, ""
	flush := func() {
		key := Key
		if part > 0 {
			key += "-" + strconv.Itoa(part)
		}
		out[key] = value
		part, value = part+1, ""
	}
	for _, k := range keys {
		next := k
		if value != "" {
			next = value + "," + k
		}
		if len(next) > valueLimit {
			flush()
			next = k
		}
		value = next
	}
	flush()
	return out
}

// ownedPrefix: keys under instancemgr.keikoproj.io/ are the controller's
// (admission refuses them in specs).
func ownedPrefix(k string) bool { return strings.HasPrefix(k, "instancemgr.keikoproj.io/") }

// recorded returns the keys the resource's record lists.
func recorded(have map[string]string) map[string]bool {
	out := map[string]bool{}
	for k, v := range have {
		if k != Key && !strings.HasPrefix(k, Key+"-") || v == "" {
			continue
		}
		for _, key := range strings.Split(v, ",") {
			out[key] = true
		}
	}
	return out
}

// Removable are the keys of have that the controller set and want no
// longer holds: those the record in have lists, and its own
// instancemgr.keikoproj.io/* keys (but not KeyHooksHash, kept by the eks
// provisioner's hook sync), never the ownership tags; sorted. A tag
// someone else added is never among them.
func Removable(have, want map[string]string) []string {
	rec := recorded(have)
	var out []string
	for k := range have {
		if _, ok := want[k]; ok || k == KeyHooksHash || ownershipTag(k) {
			continue // ownership tags are only ever added
		}
		if rec[k] || ownedPrefix(k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func ownershipTag(k string) bool {
	return k == ownership.TagInstanceGroup || k == ownership.TagUID || k == ownership.TagInstallation || strings.HasPrefix(k, ownership.TagClusterPrefix)
}
