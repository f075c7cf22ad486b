package dryrun

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Client returns c with every write sent with dryRun=All
// (client.NewDryRunClient: the API server admits and validates it, stores
// nothing) and recorded: creates, updates, patches and deletes with an
// Event about the object, status writes as log lines. Reads are c's.
func Client(c client.Client, r *Recorder) client.Client {
	return &recording{Client: client.NewDryRunClient(c), r: r}
}

type recording struct {
	client.Client
	r *Recorder
}

func (c *recording) describe(verb string, obj client.Object) string {
	kind := fmt.Sprintf("%T", obj)
	if gvk, err := apiutil.GVKForObject(obj, c.Scheme()); err == nil {
		kind = gvk.Kind
	}
	name := obj.GetName()
	if ns := obj.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return verb + " " + kind + " " + name
}

func (c *recording) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.r.Record(ctx, obj, "%s", c.describe("create", obj))
	return c.Client.Create(ctx, obj, opts...)
}

func (c *recording) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.r.Record(ctx, obj, "%s", c.describe("update", obj))
	return c.Client.Update(ctx, obj, opts...)
}

func (c *recording) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	data, _ := patch.Data(obj)
	c.r.Record(ctx, obj, "%s %s", c.describe("patch", obj), data)
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *recording) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.r.Record(ctx, obj, "%s", c.describe("delete", obj))
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *recording) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	c.r.Log(ctx, "%s", c.describe("delete all of", obj))
	return c.Client.DeleteAllOf(ctx, obj, opts...)
}

func (c *recording) Status() client.SubResourceWriter { return c.SubResource("status") }

func (c *recording) SubResource(sub string) client.SubResourceClient {
	return &recordingSub{SubResourceClient: c.Client.SubResource(sub), c: c, sub: sub}
}

type recordingSub struct {
	client.SubResourceClient
	c   *recording
	sub string
}

func (s *recordingSub) Create(ctx context.Context, obj, subResource client.Object, opts ...client.SubResourceCreateOption) error {
	s.c.r.Record(ctx, obj, "%s", s.c.describe("create "+s.sub+" of", obj))
	return s.SubResourceClient.Create(ctx, obj, subResource, opts...)
}

func (s *recordingSub) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	s.c.r.Log(ctx, "%s", s.c.describe("update "+s.sub+" of", obj))
	return s.SubResourceClient.Update(ctx, obj, opts...)
}

func (s *recordingSub) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	data, _ := patch.Data(obj)
	s.c.r.Log(ctx, "%s %s", s.c.describe("patch "+s.sub+" of", obj), data)
	return s.SubResourceClient.Patch(ctx, obj, patch, opts...)
}
