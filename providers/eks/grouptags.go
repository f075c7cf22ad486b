package eks

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// tagRecord starts the keys of the tags on an Auto Scaling group that
// record which other tags the controller set on it ("k1,k2,..."; values
// hold 256 characters, so a long record continues in "<tagRecord>-1",
// "-2", ...). Only recorded keys (and the controller's own
// instancemgr.keikoproj.io/* keys) are ever removed: a tag someone else
// put on the group stays.
const tagRecord = "instancemgr.keikoproj.io/managed-tags"

// tagValueLimit is the longest tag value Auto Scaling accepts.
const tagValueLimit = 256

// bookkeeping reports whether k is one of the controller's bookkeeping
// tags, which are not propagated to instances.
func bookkeeping(k string) bool {
	return k == tagHooksHash || k == tagRecord || strings.HasPrefix(k, tagRecord+"-")
}

// withRecord returns tags plus the record of the keys in it that are not
// the controller's own (instancemgr.keikoproj.io/*, Name) — the spec's and
// the cluster-autoscaler's, sorted, so an unchanged set writes nothing.
func withRecord(tags map[string]string) map[string]string {
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
		key := tagRecord
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
		if len(next) > tagValueLimit {
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

// recorded returns the keys the group's record lists.
func recorded(have map[string]string) map[string]bool {
	out := map[string]bool{}
	for k, v := range have {
		if k != tagRecord && !strings.HasPrefix(k, tagRecord+"-") || v == "" {
			continue
		}
		for _, key := range strings.Split(v, ",") {
			out[key] = true
		}
	}
	return out
}

// removableTags are the keys of have that the controller set and no
// longer wants: recorded keys and its own instancemgr.keikoproj.io/* keys
// (but not the lifecycle-hooks hash, kept by ensureGroupFeatures), sorted.
func removableTags(have, want map[string]string) []string {
	rec := recorded(have)
	var out []string
	for k := range have {
		if _, ok := want[k]; ok || k == tagHooksHash || ownershipTag(k) {
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
