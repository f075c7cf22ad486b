package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/boundaries/record"
	"github.com/instancemgr/instance-manager/test/env"
	"github.com/instancemgr/instance-manager/test/install"
)

// canaryNamespace holds the admin's own canary group.
const canaryNamespace = "platform-canary"

// brokenImage tells the progressive rollout: the admin's canary group, a
// ConfigMap with a canary wave and an image whose instances never join
// (the bridge plays a broken AMI); the rollout halts after the canary with
// every tenant's group untouched, a tenant's edit meanwhile is admitted,
// and the admin rolls the canary back. It returns the tenant groups'
// watcher's keys with the canary's added.
func (d *demo) brokenImage(ctx context.Context, e *env.Environment, admin client.Client, cloud *install.Cloud,
	tenants []*install.Tenant, keys []types.NamespacedName, timeout time.Duration) error {
	good, broken := cloud.AMIs[1], cloud.AMIs[2]

	// The admin's canary group, on the current image.
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: canaryNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	canary, err := install.ExampleTenantGroup()
	if err != nil {
		return err
	}
	canary.Namespace, canary.Name = canaryNamespace, "canary"
	canary.Spec.EKS.MinSize, canary.Spec.EKS.MaxSize = 1, 2
	if err := admin.Create(ctx, canary); err != nil {
		return fmt.Errorf("creating the canary InstanceGroup: %w", err)
	}
	canaryKey := client.ObjectKeyFromObject(canary)
	d.printf("admin: kubectl apply -n %s -f canary.yaml   (the platform team's own group, 1 node, no tenant workload)", canaryNamespace)
	all := append([]types.NamespacedName{canaryKey}, keys...)
	w := newWatcher(d, admin, e.AWS, all, appName, nil)
	if _, err := w.until(ctx, timeout, "the canary group Ready", func(s *snapshot) bool { return groupReady(s.group(canaryKey)) }); err != nil {
		return err
	}

	// The broken image, in waves.
	e.Bridge.SetNeverJoinImages(broken)
	defer e.Bridge.SetNeverJoinImages()
	data, err := cloud.Boundaries(broken)
	if err != nil {
		return err
	}
	data["rollout"] = fmt.Sprintf("soak: 30s\nfailure:\n  startupTimeout: 60s\nwaves:\n- name: canary\n  namespaces: [%s]\n", canaryNamespace)
	cm := &corev1.ConfigMap{}
	if err := admin.Get(ctx, types.NamespacedName{Namespace: d.configNamespace, Name: app.ConfigMapName}, cm); err != nil {
		return err
	}
	cm.Data = data
	if err := admin.Update(ctx, cm); err != nil {
		return fmt.Errorf("updating the boundary ConfigMap: %w", err)
	}
	d.printf("admin: kubectl edit configmap %s -n %s", app.ConfigMapName, d.configNamespace)
	d.block(fmt.Sprintf("defaults: image %s -> %s (its instances never join: the bridge plays a broken AMI)\n"+
		"rollout: |\n%s", d.imageLabel(good), d.imageLabel(broken), indent(data["rollout"], "  ")))
	var rec *record.Record
	s, err := w.until(ctx, timeout, "the rollout halted after its canary wave", func(*snapshot) bool {
		rec = d.rolloutRecord(ctx, admin)
		return rec != nil && rec.Phase == record.PhaseHalted
	})
	if err != nil {
		return err
	}
	for _, k := range keys {
		if g := s.group(k); g.image != good || g.pending == "" {
			return fmt.Errorf("%s: image %s, pending %q after the halt; want the last good image, waiting for the new revision", k, d.imageLabel(g.image), g.pending)
		}
	}
	d.say("halted: %s", rec.Halt.Reason)
	d.say("every tenant's group still runs %s, its spec untouched: BOUNDARIES is the last good revision %s, PENDING the halted %s",
		d.imageLabel(good), rec.Stable, rec.Target)
	d.block(fmt.Sprintf("kubectl get configmap %s -n %s -o jsonpath='{.data.status}'   (the rollout record)\n%s",
		app.RolloutRecordName, d.configNamespace, indent(fmt.Sprintf("phase: %s\nmessage: %s\nhalt: {wave: %s, groups: [%s]}",
			rec.Phase, rec.Message, rec.Halt.Wave, strings.Join(rec.Halt.Groups, ", ")), "  ")))

	// A tenant's edit during the halted rollout.
	if len(tenants) > 0 {
		t := tenants[0]
		key := keys[0]
		ig := &v1alpha1.InstanceGroup{}
		if err := t.Client.Get(ctx, key, ig); err != nil {
			return err
		}
		from := ig.Spec.EKS.MaxSize
		ig.Spec.EKS.MaxSize++
		if err := t.Client.Update(ctx, ig); err != nil {
			return fmt.Errorf("%s editing %s during the halted rollout: %w", t.User, key, err)
		}
		d.printf("%s: kubectl edit ig %s -n %s   (maxSize %d -> %d)", t.User, key.Name, key.Namespace, from, ig.Spec.EKS.MaxSize)
		d.say("admitted during the halted rollout, merged with the revision its group runs: image %s", d.imageLabel(ig.Spec.EKS.Configuration.Image))
	}

	// Rollback.
	rc := &corev1.ConfigMap{}
	if err := admin.Get(ctx, types.NamespacedName{Namespace: d.configNamespace, Name: app.RolloutRecordName}, rc); err != nil {
		return err
	}
	patch := client.MergeFrom(rc.DeepCopy())
	metav1.SetMetaDataAnnotation(&rc.ObjectMeta, record.AnnotationAction, record.ActionRollback)
	if err := admin.Patch(ctx, rc, patch); err != nil {
		return fmt.Errorf("annotating the rollout record: %w", err)
	}
	d.printf("admin: kubectl annotate configmap %s -n %s %s=%s", app.RolloutRecordName, d.configNamespace, record.AnnotationAction, record.ActionRollback)
	if _, err := w.until(ctx, timeout, "the canary back on the last good image", func(s *snapshot) bool {
		g := s.group(canaryKey)
		if !groupReady(g) || g.image != good || g.updated != g.total {
			return false
		}
		for _, im := range g.nodeImages {
			if im != good {
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}
	d.say("rolled back: the canary runs %s again, replaced by its own rolling update; the ConfigMap's next revision starts a new rollout from the canary wave",
		d.imageLabel(good))
	if err := admin.Delete(ctx, canary); err != nil {
		return fmt.Errorf("deleting the canary InstanceGroup: %w", err)
	}
	return nil
}

// rolloutRecord reads the rollout record; nil when it cannot be read.
func (d *demo) rolloutRecord(ctx context.Context, admin client.Client) *record.Record {
	cm := &corev1.ConfigMap{}
	if err := admin.Get(ctx, types.NamespacedName{Namespace: d.configNamespace, Name: app.RolloutRecordName}, cm); err != nil {
		return nil
	}
	rec, _, err := record.Decode(cm.Data)
	if err != nil {
		return nil
	}
	return rec
}
