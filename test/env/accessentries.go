package env

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// AccessEntryAuthenticates reports whether the EKS access entry of cluster
// for principalARN still lets that principal authenticate: whether the IAM
// principal of that ARN has the unique id the entry was bound to at its
// creation (EKS User Guide, "Create access entries": an entry made for a
// principal since deleted and created again under the same ARN no longer
// works). AWS shows the bound id nowhere; motoeksaccess.py answers it at
// GET /im-emulator/eks/access-entry. An error when there is no such entry.
func (e *Environment) AccessEntryAuthenticates(ctx context.Context, cluster, principalARN string) (bool, error) {
	if e.AWSEndpoint == "" {
		return false, errors.New("AccessEntryAuthenticates: the environment runs without AWS")
	}
	q := url.Values{"cluster": {cluster}, "principalArn": {principalARN}, "region": {AWSRegion}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.AWSEndpoint+"/im-emulator/eks/access-entry?"+q.Encode(), nil)
	if err != nil {
		return false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, fmt.Errorf("AccessEntryAuthenticates: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("AccessEntryAuthenticates %s on cluster %s: %s: %s", principalARN, cluster, resp.Status, strings.TrimSpace(string(body)))
	}
	var out struct {
		Authenticates bool `json:"authenticates"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return false, fmt.Errorf("AccessEntryAuthenticates: %w (%s)", err, body)
	}
	return out.Authenticates, nil
}
