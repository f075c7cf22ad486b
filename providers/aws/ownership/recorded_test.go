package ownership

import "testing"

func TestRecorded(t *testing.T) {
	SetInstallation("inst-1")
	defer SetInstallation("")
	ours := Owner{Cluster: "prod", Namespace: "team", Name: "web", UID: "u-1"}
	with := func(edit func(map[string]string)) map[string]string {
		tags := ours.Tags()
		edit(tags)
		return tags
	}
	cases := []struct {
		name string
		tags map[string]string
		want Owner
		ok   bool
	}{
		{"all tags", ours.Tags(), ours, true},
		{"no uid (earlier versions)", with(func(m map[string]string) { delete(m, TagUID) }), Owner{Cluster: "prod", Namespace: "team", Name: "web"}, true},
		{"another installation", with(func(m map[string]string) { m[TagInstallation] = "inst-2" }), Owner{}, false},
		{"no installation", with(func(m map[string]string) { delete(m, TagInstallation) }), Owner{}, false},
		{"two clusters", with(func(m map[string]string) { m[TagClusterPrefix+"dev"] = "owned" }), Owner{}, false},
		{"no cluster", with(func(m map[string]string) { delete(m, TagClusterPrefix+"prod") }), Owner{}, false},
		{"no group", with(func(m map[string]string) { delete(m, TagInstanceGroup) }), Owner{}, false},
		{"group without namespace", with(func(m map[string]string) { m[TagInstanceGroup] = "/web" }), Owner{}, false},
		{"hand-made", map[string]string{"Name": "x"}, Owner{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := Recorded(c.tags)
			if ok != c.ok || got != c.want {
				t.Errorf("Recorded = %+v, %v; want %+v, %v", got, ok, c.want, c.ok)
			}
		})
	}
}
