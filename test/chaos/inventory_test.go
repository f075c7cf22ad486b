package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// inventory is what exists in moto of the cluster's groups, read directly
// (not through the fault proxy): per owner ("<namespace>/<name>") the names
// of its Auto Scaling groups, launch templates, IAM roles and instance
// profiles, and the live instances.
type inventory struct {
	// byKind maps a kind ("asg", "launch-template", "role",
	// "instance-profile") to owner to the resource names.
	byKind map[string]map[string][]string
	// instances are the pending or running instances by Auto Scaling
	// group ("" for none), with their image.
	instances map[string][]instance
}

type instance struct{ id, image string }

// owners are the groups of one test: the namespaces it uses and the IAM
// names its groups may have. The inventory holds only what belongs to
// them, so that another test's leftovers are not counted here. Roles and
// instance profiles are listed without tags, so they are recognised by
// name; a name with the prefix of one of the test's namespaces that no
// group owns counts as an owner of its own ("?<name>"), so a stray
// resource is seen as a duplicate and a leak.
type owners struct {
	names      map[string]string
	namespaces map[string]bool
}

func (o *owners) add(namespace, name string) {
	if o.names == nil {
		o.names, o.namespaces = map[string]string{}, map[string]bool{}
	}
	o.names[ownership.Name(ownership.LimitIAMRole, cloud.Cluster, namespace, name)] = namespace + "/" + name
	o.namespaces[namespace] = true
}

// prefixed reports whether a resource name starts like the names of the
// test's namespaces ("<cluster>-<namespace>-").
func (o owners) prefixed(name string) bool {
	for ns := range o.namespaces {
		if strings.HasPrefix(name, cloud.Cluster+"-"+ns+"-") {
			return true
		}
	}
	return false
}

// mine reports whether an owner tag value "<namespace>/<name>" is one of
// the test's namespaces.
func (o owners) mine(owner string) bool {
	ns, _, _ := strings.Cut(owner, "/")
	return o.namespaces[ns]
}

// of is the owner of an IAM name, and whether it is the test's.
func (o owners) of(name string) (string, bool) {
	if owner, ok := o.names[name]; ok {
		return owner, true
	}
	if o.prefixed(name) {
		return "?" + name, true
	}
	return "", false
}

// ownerByTag is the owner of a resource from its ownership tag, and
// whether it is the test's; an untagged one is the test's when its name
// has the test's prefix.
func (o owners) ownerByTag(name, tag string) (string, bool) {
	if tag != "" {
		return tag, o.mine(tag)
	}
	return "?" + name, o.prefixed(name)
}

// readInventory reads moto. Errors are moto's (the proxy is not in the
// way).
func readInventory(ctx context.Context, cfg aws.Config, iamOwners *owners) (inventory, error) {
	inv := inventory{byKind: map[string]map[string][]string{
		"asg": {}, "launch-template": {}, "role": {}, "instance-profile": {},
	}, instances: map[string][]instance{}}
	add := func(kind, owner, name string) { inv.byKind[kind][owner] = append(inv.byKind[kind][owner], name) }

	groups := autoscaling.NewDescribeAutoScalingGroupsPaginator(autoscaling.NewFromConfig(cfg), &autoscaling.DescribeAutoScalingGroupsInput{MaxRecords: aws.Int32(100)})
	for groups.HasMorePages() {
		page, err := groups.NextPage(ctx)
		if err != nil {
			return inv, fmt.Errorf("DescribeAutoScalingGroups: %w", err)
		}
		for _, g := range page.AutoScalingGroups {
			tag := ""
			for _, t := range g.Tags {
				if aws.ToString(t.Key) == ownership.TagInstanceGroup {
					tag = aws.ToString(t.Value)
				}
			}
			if owner, ok := iamOwners.ownerByTag(aws.ToString(g.AutoScalingGroupName), tag); ok {
				add("asg", owner, aws.ToString(g.AutoScalingGroupName))
			}
		}
	}
	ec2c := ec2.NewFromConfig(cfg)
	templates := ec2.NewDescribeLaunchTemplatesPaginator(ec2c, &ec2.DescribeLaunchTemplatesInput{MaxResults: aws.Int32(200)})
	for templates.HasMorePages() {
		page, err := templates.NextPage(ctx)
		if err != nil {
			return inv, fmt.Errorf("DescribeLaunchTemplates: %w", err)
		}
		for _, lt := range page.LaunchTemplates {
			tag := ""
			for _, t := range lt.Tags {
				if aws.ToString(t.Key) == ownership.TagInstanceGroup {
					tag = aws.ToString(t.Value)
				}
			}
			if owner, ok := iamOwners.ownerByTag(aws.ToString(lt.LaunchTemplateName), tag); ok {
				add("launch-template", owner, aws.ToString(lt.LaunchTemplateName))
			}
		}
	}
	iamc := iam.NewFromConfig(cfg)
	roles := iam.NewListRolesPaginator(iamc, &iam.ListRolesInput{})
	for roles.HasMorePages() {
		page, err := roles.NextPage(ctx)
		if err != nil {
			return inv, fmt.Errorf("ListRoles: %w", err)
		}
		for _, r := range page.Roles {
			if owner, ok := iamOwners.of(aws.ToString(r.RoleName)); ok {
				add("role", owner, aws.ToString(r.RoleName))
			}
		}
	}
	profiles := iam.NewListInstanceProfilesPaginator(iamc, &iam.ListInstanceProfilesInput{})
	for profiles.HasMorePages() {
		page, err := profiles.NextPage(ctx)
		if err != nil {
			return inv, fmt.Errorf("ListInstanceProfiles: %w", err)
		}
		for _, p := range page.InstanceProfiles {
			if owner, ok := iamOwners.of(aws.ToString(p.InstanceProfileName)); ok {
				add("instance-profile", owner, aws.ToString(p.InstanceProfileName))
			}
		}
	}
	instances := ec2.NewDescribeInstancesPaginator(ec2c, &ec2.DescribeInstancesInput{
		Filters:    []ec2types.Filter{{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}}},
		MaxResults: aws.Int32(1000),
	})
	for instances.HasMorePages() {
		page, err := instances.NextPage(ctx)
		if err != nil {
			return inv, fmt.Errorf("DescribeInstances: %w", err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				group, name := "", ""
				for _, tag := range i.Tags {
					switch aws.ToString(tag.Key) {
					case "aws:autoscaling:groupName":
						group = aws.ToString(tag.Value)
					case "Name":
						name = aws.ToString(tag.Value)
					}
				}
				if !iamOwners.prefixed(group) && !iamOwners.prefixed(name) {
					continue // another test's (groups and their instances are named after the group)
				}
				inv.instances[group] = append(inv.instances[group], instance{aws.ToString(i.InstanceId), aws.ToString(i.ImageId)})
			}
		}
	}
	return inv, nil
}

// duplicates lists "<kind> <owner>: <names>" for every owner with more
// than one resource of a kind, and every resource no group owns.
func (inv inventory) duplicates() []string {
	var out []string
	for kind, byOwner := range inv.byKind {
		for owner, names := range byOwner {
			if len(names) > 1 || strings.HasPrefix(owner, "?") {
				sort.Strings(names)
				out = append(out, fmt.Sprintf("%s %s: %s", kind, owner, strings.Join(names, ",")))
			}
		}
	}
	sort.Strings(out)
	return out
}

// leftovers lists every resource and live instance in the inventory.
func (inv inventory) leftovers() []string {
	var out []string
	for kind, byOwner := range inv.byKind {
		for owner, names := range byOwner {
			for _, n := range names {
				out = append(out, fmt.Sprintf("%s %s (%s)", kind, n, owner))
			}
		}
	}
	for group, list := range inv.instances {
		for _, i := range list {
			out = append(out, fmt.Sprintf("instance %s (group %q)", i.id, group))
		}
	}
	sort.Strings(out)
	return out
}

// watcher reads the inventory every interval and remembers every
// duplicate it ever saw.
type watcher struct {
	mu         sync.Mutex
	duplicates map[string]bool
	reads      int
	readErrors int
	stop       context.CancelFunc
	done       chan struct{}
}

func watchInventory(cfg aws.Config, iamOwners *owners, interval time.Duration) *watcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{duplicates: map[string]bool{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			inv, err := readInventory(ctx, cfg, iamOwners)
			w.mu.Lock()
			if err != nil {
				if ctx.Err() == nil {
					w.readErrors++
				}
			} else {
				w.reads++
				for _, d := range inv.duplicates() {
					w.duplicates[d] = true
				}
			}
			w.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-time.After(interval):
			}
		}
	}()
	return w
}

// finish stops the watcher and returns the duplicates seen and the number
// of inventories read.
func (w *watcher) finish() (duplicates []string, reads int) {
	w.stop()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	for d := range w.duplicates {
		duplicates = append(duplicates, d)
	}
	sort.Strings(duplicates)
	return duplicates, w.reads
}
