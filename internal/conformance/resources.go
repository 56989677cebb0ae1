package conformance

import (
	"context"

	"github.com/mcpush/mcpush/pkg/mcp"
)

// templateURI is the URI template of the fixture resource template.
const templateURI = "test://template/{id}/data"

// resourceURIs are the URIs of the fixture resources, in the order the
// reference server registers them.
var resourceURIs = []string{"test://static-text", "test://static-binary", "test://watched-resource"}

// contents returns a handler that always reads c.
func contents(c mcp.ResourceContents) mcp.ResourceHandler {
	return func(context.Context, *mcp.ServerRequest[*mcp.ReadResourceParams]) (*mcp.ReadResourceResult, error) {
		c := c // a copy per read: the caller may modify what it gets
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{&c}}, nil
	}
}

func registerResources(s *mcp.Server) {
	s.AddResource(&mcp.Resource{
		URI:         "test://static-text",
		Name:        "static-text",
		Title:       "Static Text Resource",
		Description: "A static text resource for testing",
		MimeType:    "text/plain",
	}, contents(mcp.ResourceContents{
		URI:      "test://static-text",
		MimeType: "text/plain",
		Text:     "This is the content of the static text resource.",
	}))

	s.AddResource(&mcp.Resource{
		URI:         "test://static-binary",
		Name:        "static-binary",
		Title:       "Static Binary Resource",
		Description: "A static binary resource (image) for testing",
		MimeType:    "image/png",
	}, contents(mcp.ResourceContents{
		URI:      "test://static-binary",
		MimeType: "image/png",
		Blob:     testImageBase64,
	}))

	s.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: templateURI,
		Name:        "template",
		Title:       "Resource Template",
		Description: "A resource template with parameter substitution",
		MimeType:    "application/json",
	}, readTemplate)

	// The reference server describes this resource as updating every 3
	// seconds but never changes it; neither do we. Subscriptions to it
	// are handled by the server library.
	s.AddResource(&mcp.Resource{
		URI:         "test://watched-resource",
		Name:        "watched-resource",
		Title:       "Watched Resource",
		Description: "A resource that auto-updates every 3 seconds",
		MimeType:    "text/plain",
	}, contents(mcp.ResourceContents{
		URI:      "test://watched-resource",
		MimeType: "text/plain",
		Text:     "Watched resource content",
	}))
}

// templateData is the JSON document of a templated resource.
type templateData struct {
	ID           string `json:"id"`
	TemplateTest bool   `json:"templateTest"`
	Data         string `json:"data"`
}

func readTemplate(ctx context.Context, req *mcp.ServerRequest[*mcp.ReadResourceParams]) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	vars := mcp.TemplateVars(templateURI, uri)
	if vars == nil {
		return nil, mcp.ResourceNotFound(uri)
	}
	id := vars["id"]
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
		URI:      uri,
		MimeType: "application/json",
		Text:     jsonText(templateData{ID: id, TemplateTest: true, Data: "Data for ID: " + id}),
	}}}, nil
}
