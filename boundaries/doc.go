// Package boundaries implements the policy layer of BOUNDARIES.md: it parses
// the admin's boundary ConfigMap, computes a tenant's effective InstanceGroup
// spec from the submitted one, hashes the boundary inputs for fan-out, and
// recovers the tenant's intent on updates.
//
// Everything here is a pure function over JSON-shaped Go values
// (map[string]any, []any, string, bool, int64, float64, nil): no Kubernetes
// client, no AWS. The admission webhooks and the fan-out controller call it;
// they hold no merge logic of their own.
//
// Values handed in may use any numeric type or typed maps and slices; they
// are normalized to the canonical forms above (integers as int64, other
// numbers as float64, object entries whose value is JSON null dropped)
// before they are compared or merged, so the same document decoded by
// encoding/json, sigs.k8s.io/yaml or the unstructured converter behaves the
// same.
package boundaries
