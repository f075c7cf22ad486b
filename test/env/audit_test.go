package env

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAuditJudgesEachPod(t *testing.T) {
	began := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	cordoned := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{drainStartedAnnotation: began.Format(time.RFC3339)}},
		Spec: corev1.NodeSpec{Unschedulable: true}}
	serving := &corev1.Node{}
	all := []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(began.Add(d)) }
	now := metav1.Now()
	cases := []struct {
		name    string
		pod     corev1.Pod
		node    *corev1.Node
		drained bool
	}{
		{"running, never evicted", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}, serving, false},
		{"evicted, terminating", corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}, serving, true},
		{"finished", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, serving, true},
		{"failed", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}, serving, true},
		{"a DaemonSet's", corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet"}}}}, serving, true},
		{"a mirror pod", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "x"}}}, serving, true},
		{"tolerates the cordon, there before the drain", corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: at(-time.Minute)}, Spec: corev1.PodSpec{Tolerations: all}}, cordoned, false},
		{"tolerates the cordon, came after the drain began", corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: at(time.Second)}, Spec: corev1.PodSpec{Tolerations: all}}, cordoned, true},
		{"tolerates the cordon, node never cordoned", corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: at(time.Second)}, Spec: corev1.PodSpec{Tolerations: all}}, serving, false},
		{"came after the drain began, does not tolerate it", corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: at(time.Second)}}, cordoned, false},
	}
	for _, tc := range cases {
		if got := drained(&tc.pod, tc.node); got != tc.drained {
			t.Errorf("%s: drained = %v, want %v", tc.name, got, tc.drained)
		}
	}
}
