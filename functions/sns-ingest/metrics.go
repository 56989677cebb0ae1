package main

import (
	"cmp"
	"io"

	"github.com/mcpush/mcpush/pkg/envconfig"
	"github.com/mcpush/mcpush/pkg/metrics"
)

// setupMetrics reads the metrics variables (envconfig.ReadMetrics:
// MCPUSH_METRICS, MCPUSH_METRICS_NAMESPACE) and sets up the process's
// exporter: in Lambda, EMF lines on out (os.Stdout), which metrics.Wrap around the
// handler flushes once per invocation. Call it in Lambda beside
// readConfig, before the store is opened, so that a bad value is an init
// error that names it:
//
//	if err := setupMetrics(os.Getenv, os.Stdout); err != nil {
//		initError("sns-ingest: configuration", err)
//	}
//	...
//	lambda.StartHandlerFunc(metrics.Wrap(handler(in, wh, logger)))
//
// The CLI does not call it: its stdout is the summary.
func setupMetrics(getenv func(string) string, out io.Writer) error {
	m, err := envconfig.ReadMetrics(getenv)
	if err != nil {
		return err
	}
	metrics.Setup(metrics.Options{Exporter: m.Exporter, Namespace: m.Namespace,
		Function: cmp.Or(m.Function, "sns-ingest"), Out: out})
	return nil
}
