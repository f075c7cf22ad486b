package env

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// KwokAnnotation marks a Node as simulated by this environment's kwok: kwok
// keeps it Ready (status and node Lease) and runs the Pods bound to it. The
// bridge puts it on every Node it registers; a test that creates a Node by
// hand can set it too.
const (
	KwokAnnotation      = "kwok.x-k8s.io/node"
	KwokAnnotationValue = "fake"
)

// KwokCrashLoopAnnotation, on a Pod, makes kwok run it as a kubelet runs a
// pod whose container keeps crashing (stage pod-crash-loop): once it has
// started, every container is waiting in CrashLoopBackOff, not ready,
// with the annotation's value as its restartCount (a number), and the
// pod's Ready condition is False. The count stays as written (kwok does
// not count restarts); a real kubelet would report the same shape with a
// growing count.
const KwokCrashLoopAnnotation = "kwok.e2e.instancemgr.keikoproj.io/crash-loop-restarts"

// kwokNodeLeaseSeconds is the node Lease duration kwok maintains, as a
// kubelet does (renewed every quarter of it). The node lifecycle controller
// treats lease renewals as heartbeats.
const kwokNodeLeaseSeconds = 40

// kwokStages is the kwok Stage configuration: how a simulated kubelet moves
// Nodes and Pods through their lifecycle.
//
//   - node-ready: a new Node gets Ready=True and healthy pressure conditions;
//     capacity and node info are filled in only when the creator left them
//     empty (the bridge sets them from the instance).
//   - node-status-report: every ~5 minutes the conditions' heartbeat times
//     are refreshed, like the kubelet's status report (the Lease is the
//     frequent heartbeat).
//   - pod-running: a Pod bound to a managed Node starts: every container
//     running and ready, init containers completed (sidecars running), an IP
//     from the pod CIDR, phase Running.
//   - pod-crash-loop: a running, Ready Pod annotated KwokCrashLoopAnnotation
//     crash-loops: its containers wait in CrashLoopBackOff, not ready,
//     restarted as many times as the annotation says; Ready False.
//   - job-pod-succeeded: a running Pod owned by a Job completes with exit 0.
//   - pod-terminated: a Pod marked for deletion (e.g. evicted or drained) is
//     removed, as the kubelet does once its containers have stopped.
const kwokStages = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values: ['True']
  steps:
  - patch:
      subresource: status
      root: status
      template: |
        {{ $now := Now }}
        conditions:
        - type: MemoryPressure
          status: "False"
          reason: KubeletHasSufficientMemory
          message: kubelet has sufficient memory available
          lastHeartbeatTime: {{ $now | Quote }}
          lastTransitionTime: {{ $now | Quote }}
        - type: DiskPressure
          status: "False"
          reason: KubeletHasNoDiskPressure
          message: kubelet has no disk pressure
          lastHeartbeatTime: {{ $now | Quote }}
          lastTransitionTime: {{ $now | Quote }}
        - type: PIDPressure
          status: "False"
          reason: KubeletHasSufficientPID
          message: kubelet has sufficient PID available
          lastHeartbeatTime: {{ $now | Quote }}
          lastTransitionTime: {{ $now | Quote }}
        - type: Ready
          status: "True"
          reason: KubeletReady
          message: kubelet is posting ready status (simulated by kwok)
          lastHeartbeatTime: {{ $now | Quote }}
          lastTransitionTime: {{ $now | Quote }}
        {{ if not .status.capacity }}
        capacity: {cpu: "4", memory: 16Gi, pods: "110", ephemeral-storage: 100Gi}
        {{ end }}
        {{ if not .status.allocatable }}
        allocatable: {cpu: "4", memory: 16Gi, pods: "110", ephemeral-storage: 100Gi}
        {{ end }}
        {{ if not .status.nodeInfo.kubeletVersion }}
        nodeInfo:
          architecture: amd64
          operatingSystem: linux
          kubeletVersion: {{ printf "kwok-%s" Version | Quote }}
          containerRuntimeVersion: {{ printf "kwok-%s" Version | Quote }}
        {{ end }}
        phase: Running
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-status-report
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'In'
      values: ['True']
  delay:
    durationMilliseconds: 300000
    jitterDurationMilliseconds: 330000
  steps:
  - patch:
      subresource: status
      root: status
      template: |
        {{ $now := Now }}
        conditions:
        {{ range .status.conditions }}
        - type: {{ .type | Quote }}
          lastHeartbeatTime: {{ $now | Quote }}
        {{ end }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-running
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Pending']
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values: ['True']
  steps:
  - patch:
      subresource: status
      root: status
      template: |
        {{ $now := Now }}
        conditions:
        - type: PodReadyToStartContainers
          status: "True"
          lastTransitionTime: {{ $now | Quote }}
        - type: Initialized
          status: "True"
          lastTransitionTime: {{ $now | Quote }}
        - type: ContainersReady
          status: "True"
          lastTransitionTime: {{ $now | Quote }}
        - type: Ready
          status: "True"
          lastTransitionTime: {{ $now | Quote }}
        containerStatuses:
        {{ range .spec.containers }}
        - name: {{ .name | Quote }}
          image: {{ .image | Quote }}
          imageID: ""
          ready: true
          started: true
          restartCount: 0
          state:
            running:
              startedAt: {{ $now | Quote }}
        {{ end }}
        {{ with .spec.initContainers }}
        initContainerStatuses:
        {{ range . }}
        - name: {{ .name | Quote }}
          image: {{ .image | Quote }}
          imageID: ""
          restartCount: 0
          ready: true
          {{ if eq .restartPolicy "Always" }}
          started: true
          state:
            running:
              startedAt: {{ $now | Quote }}
          {{ else }}
          started: false
          state:
            terminated:
              exitCode: 0
              reason: Completed
              startedAt: {{ $now | Quote }}
              finishedAt: {{ $now | Quote }}
          {{ end }}
        {{ end }}
        {{ end }}
        {{ with NodeIPsWith .spec.nodeName }}
        hostIP: {{ index . 0 | Quote }}
        hostIPs:
        {{ range . }}
        - ip: {{ . | Quote }}
        {{ end }}
        {{ end }}
        {{ with PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
        podIP: {{ index . 0 | Quote }}
        podIPs:
        {{ range . }}
        - ip: {{ . | Quote }}
        {{ end }}
        {{ end }}
        phase: Running
        startTime: {{ $now | Quote }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-crash-loop
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.metadata.annotations["` + KwokCrashLoopAnnotation + `"]'
      operator: 'Exists'
    - key: '.status.phase'
      operator: 'In'
      values: ['Running']
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'In'
      values: ['True']
  steps:
  - patch:
      subresource: status
      root: status
      template: |
        {{ $now := Now }}
        {{ $restarts := index .metadata.annotations "` + KwokCrashLoopAnnotation + `" }}
        conditions:
        - type: PodReadyToStartContainers
          status: "True"
          lastTransitionTime: {{ $now | Quote }}
        - type: Initialized
          status: "True"
          lastTransitionTime: {{ $now | Quote }}
        - type: ContainersReady
          status: "False"
          reason: ContainersNotReady
          lastTransitionTime: {{ $now | Quote }}
        - type: Ready
          status: "False"
          reason: ContainersNotReady
          lastTransitionTime: {{ $now | Quote }}
        containerStatuses:
        {{ range .spec.containers }}
        - name: {{ .name | Quote }}
          image: {{ .image | Quote }}
          imageID: ""
          ready: false
          started: false
          restartCount: {{ $restarts }}
          lastState:
            terminated:
              exitCode: 1
              reason: Error
              startedAt: {{ $now | Quote }}
              finishedAt: {{ $now | Quote }}
          state:
            waiting:
              reason: CrashLoopBackOff
              message: back-off restarting failed container (simulated by kwok)
        {{ end }}
        phase: Running
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: job-pod-succeeded
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Running']
    - key: '.metadata.ownerReferences.[].kind'
      operator: 'In'
      values: ['Job']
  steps:
  - patch:
      subresource: status
      root: status
      template: |
        {{ $now := Now }}
        conditions:
        - type: Ready
          status: "False"
          reason: PodCompleted
          lastTransitionTime: {{ $now | Quote }}
        - type: ContainersReady
          status: "False"
          reason: PodCompleted
          lastTransitionTime: {{ $now | Quote }}
        containerStatuses:
        {{ range .spec.containers }}
        - name: {{ .name | Quote }}
          image: {{ .image | Quote }}
          imageID: ""
          ready: false
          started: false
          restartCount: 0
          state:
            terminated:
              exitCode: 0
              reason: Completed
              startedAt: {{ $now | Quote }}
              finishedAt: {{ $now | Quote }}
        {{ end }}
        phase: Succeeded
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-terminated
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
  steps:
  - delete: true
`

// startKwok starts kwok managing only Nodes annotated KwokAnnotation and
// waits for its /healthz. kwok's home and work directories are inside dir so
// a user's ~/.kwok configuration cannot leak in.
func startKwok(ctx context.Context, bin, kubeconfig, dir, logDir string) (*process, error) {
	home := filepath.Join(dir, "kwok")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nil, err
	}
	stages := filepath.Join(home, "stages.yaml")
	if err := os.WriteFile(stages, []byte(kwokStages), 0o600); err != nil {
		return nil, fmt.Errorf("write kwok stages: %w", err)
	}
	return startWithRetry(func() (*process, error) {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		p, err := startProcess("kwok", bin, []string{
			"--kubeconfig=" + kubeconfig,
			"--config=" + stages,
			"--manage-nodes-with-annotation-selector=" + KwokAnnotation + "=" + KwokAnnotationValue,
			"--cidr=" + podCIDR,
			fmt.Sprintf("--node-lease-duration-seconds=%d", kwokNodeLeaseSeconds),
			"--server-address=" + hostPort(port),
		}, logDir, "HOME="+home, "KWOK_WORKDIR="+home)
		if err != nil {
			return nil, err
		}
		err = p.waitReady(ctx, startTimeout, httpCheck(http.DefaultClient, fmt.Sprintf("http://%s/healthz", hostPort(port)), ""))
		if err != nil {
			p.stop(time.Second)
			return nil, err
		}
		return p, nil
	})
}
