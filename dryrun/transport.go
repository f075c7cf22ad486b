package dryrun

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// ErrorCode is the AWS error code a dry run answers to a write whose result
// the caller needs (a created role's ARN, a launch template version): the
// reconcile stops there, having recorded it, as EC2's own DryRun parameter
// answers.
const ErrorCode = "DryRunOperation"

// continuable are the writes whose answer nobody reads: a dry run answers
// them with an empty success, so the reconcile goes on and records the
// writes after them too.
var continuable = map[string]bool{
	// Auto Scaling
	"CreateAutoScalingGroup": true, "UpdateAutoScalingGroup": true, "DeleteAutoScalingGroup": true,
	"CreateOrUpdateTags": true, "DeleteTags": true, "SetDesiredCapacity": true, "TerminateInstanceInAutoScalingGroup": true,
	"PutLifecycleHook": true, "DeleteLifecycleHook": true, "PutWarmPool": true, "DeleteWarmPool": true,
	"EnableMetricsCollection": true, "DisableMetricsCollection": true, "SuspendProcesses": true, "ResumeProcesses": true,
	// EC2
	"CreateTags": true, "DeleteLaunchTemplate": true, "DeleteLaunchTemplateVersions": true,
	// IAM
	"TagRole": true, "AttachRolePolicy": true, "DetachRolePolicy": true, "AddRoleToInstanceProfile": true,
	"RemoveRoleFromInstanceProfile": true, "DeleteRole": true, "DeleteInstanceProfile": true,
}

// Transport is an http.RoundTripper for the AWS SDK that sends reads to
// Base and answers writes itself, recording each: query APIs (Auto Scaling,
// EC2, IAM, STS) by their Action, JSON APIs (SSM) by their X-Amz-Target,
// REST APIs (EKS) by method. A read is a Describe*, List* or Get* action, or
// a GET.
type Transport struct {
	Base     http.RoundTripper
	Recorder *Recorder
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	service := signingService(req)
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	var action, detail string
	var protocol string
	switch {
	case req.Header.Get("X-Amz-Target") != "":
		target := req.Header.Get("X-Amz-Target")
		action, protocol = target[strings.LastIndex(target, ".")+1:], "json"
	case strings.HasPrefix(req.Header.Get("Content-Type"), "application/x-www-form-urlencoded"):
		params, _ := url.ParseQuery(string(body))
		action, protocol = params.Get("Action"), "query"
		params.Del("Action")
		params.Del("Version")
		detail = params.Encode()
	default:
		if req.Method == http.MethodGet || req.Method == http.MethodHead {
			return t.base().RoundTrip(req)
		}
		action, protocol, detail = req.Method+" "+req.URL.Path, "rest", string(body)
	}
	if read(action) {
		return t.base().RoundTrip(req)
	}
	if len(detail) > 400 {
		detail = detail[:400] + "…"
	}
	t.Recorder.Record(req.Context(), nil, "%s %s %s", service, action, detail)
	if protocol == "query" && continuable[action] {
		return respond(req, http.StatusOK, "text/xml", success(service, action), nil), nil
	}
	msg := fmt.Sprintf("dry run: %s %s was recorded, not made; the rest of this reconcile needs its result", service, action)
	switch protocol {
	case "query":
		if service == "ec2" {
			return respond(req, http.StatusBadRequest, "text/xml", fmt.Sprintf(`<Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>dry-run</RequestID></Response>`, ErrorCode, msg), nil), nil
		}
		return respond(req, http.StatusBadRequest, "text/xml", fmt.Sprintf(`<ErrorResponse><Error><Type>Sender</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>dry-run</RequestId></ErrorResponse>`, ErrorCode, msg), nil), nil
	case "json":
		return respond(req, http.StatusBadRequest, "application/x-amz-json-1.1", fmt.Sprintf(`{"__type":%q,"message":%q}`, ErrorCode, msg), nil), nil
	default:
		return respond(req, http.StatusBadRequest, "application/json", fmt.Sprintf(`{"message":%q}`, msg), map[string]string{"X-Amzn-Errortype": ErrorCode}), nil
	}
}

func (t *Transport) base() http.RoundTripper {
	if t.Base != nil {
		return t.Base
	}
	return http.DefaultTransport
}

func read(action string) bool {
	for _, p := range []string{"Describe", "List", "Get", "GET ", "HEAD "} {
		if strings.HasPrefix(action, p) {
			return true
		}
	}
	return false
}

// success is the empty answer of a query API action.
func success(service, action string) string {
	if service == "ec2" {
		return fmt.Sprintf(`<%sResponse><requestId>dry-run</requestId><return>true</return></%sResponse>`, action, action)
	}
	return fmt.Sprintf(`<%sResponse><%sResult></%sResult><ResponseMetadata><RequestId>dry-run</RequestId></ResponseMetadata></%sResponse>`, action, action, action, action)
}

func respond(req *http.Request, status int, contentType, body string, headers map[string]string) *http.Response {
	h := http.Header{"Content-Type": {contentType}, "X-Amzn-Requestid": {"dry-run"}}
	for k, v := range headers {
		h.Set(k, v)
	}
	return &http.Response{StatusCode: status, Status: http.StatusText(status), Header: h, Request: req,
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
}

// signingService reads the service from a SigV4 Authorization header
// (Credential=<key>/<date>/<region>/<service>/aws4_request).
func signingService(req *http.Request) string {
	_, cred, ok := strings.Cut(req.Header.Get("Authorization"), "Credential=")
	if !ok {
		return ""
	}
	cred, _, _ = strings.Cut(cred, ",")
	if parts := strings.Split(cred, "/"); len(parts) >= 5 {
		return parts[3]
	}
	return ""
}
