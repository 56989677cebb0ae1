// Package initerror reports a Lambda function's failed initialisation to
// the Lambda Runtime API, so that the invoker sees why instead of a bare
// Runtime.ExitError. It is a package of its own so that a main that is
// not an MCP server (functions/sns-ingest) reports its init errors
// without linking the MCP stack (pkg/serve, pkg/mcp, pkg/oauth).
package initerror

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Report tells the Runtime API at api (AWS_LAMBDA_RUNTIME_API) that
// initialisation failed with initErr: one POST to its init/error
// endpoint, bounded by 5 s. Errors are returned, not logged.
func Report(api string, initErr error) error {
	body, _ := json.Marshal(struct {
		Message string   `json:"errorMessage"`
		Type    string   `json:"errorType"`
		Stack   []string `json:"stackTrace"`
	}{initErr.Error(), "InitError", []string{}})
	req, err := http.NewRequest(http.MethodPost, "http://"+api+"/2018-06-01/runtime/init/error", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Lambda-Runtime-Function-Error-Type", "Runtime.InitError")
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("POST init/error: %s", resp.Status)
	}
	return nil
}
