package eks

// WithTagRecord returns tags plus the record of the keys in it that are
// not the controller's own: tags under "instancemgr.keikoproj.io/managed-tags"
// (continued in "-1", "-2", ... past 256 characters) listing them, sorted,
// so an unchanged set writes nothing. Any resource whose tags the
// controller keeps in step (Auto Scaling groups, EKS managed node groups)
// carries it, so that only tags the controller set are ever removed.
func WithTagRecord(tags map[string]string) map[string]string { return withRecord(tags) }

// RemovableTags are the keys of have that the controller set and want no
// longer holds: those the record in have lists, and its own
// instancemgr.keikoproj.io/* keys, never the ownership tags; sorted. A
// tag someone else added is never among them.
func RemovableTags(have, want map[string]string) []string { return removableTags(have, want) }
