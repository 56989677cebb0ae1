package envconfig

import "strings"

// MetricsExporter is MCPUSH_METRICS: where a process's metrics go.
type MetricsExporter string

// The metrics exporters of MCPUSH_METRICS.
const (
	// MetricsEMF prints CloudWatch Embedded Metric Format lines on stdout
	// once per invocation: the default in Lambda.
	MetricsEMF MetricsExporter = "emf"
	// MetricsPrometheus serves the Prometheus text format at /metrics on
	// the local server's listener: the default locally; not accepted in
	// Lambda, which has no listener.
	MetricsPrometheus MetricsExporter = "prometheus"
	// MetricsOff exports nothing (the counts are still kept in memory).
	MetricsOff MetricsExporter = "off"
)

// DefaultMetricsNamespace is the CloudWatch namespace of the EMF metrics
// when MCPUSH_METRICS_NAMESPACE is unset.
const DefaultMetricsNamespace = "mcpush"

// Metrics is the configuration of the metrics exporter: both mains.
type Metrics struct {
	// Exporter is MCPUSH_METRICS; unset: MetricsEMF in Lambda,
	// MetricsPrometheus elsewhere.
	Exporter MetricsExporter
	// Namespace is MCPUSH_METRICS_NAMESPACE, the CloudWatch namespace of
	// the EMF lines; DefaultMetricsNamespace when unset.
	Namespace string
	// Function is AWS_LAMBDA_FUNCTION_NAME, set by Lambda: the EMF
	// lines' Function dimension. Empty outside Lambda.
	Function string
}

// ReadMetrics reads MCPUSH_METRICS, MCPUSH_METRICS_NAMESPACE and
// AWS_LAMBDA_FUNCTION_NAME. An
// unknown exporter, "prometheus" in Lambda (AWS_LAMBDA_RUNTIME_API set),
// or a namespace CloudWatch refuses (empty, over 255 characters, outside
// printable ASCII, or starting with "AWS/") is an *Error.
func ReadMetrics(getenv func(string) string) (Metrics, error) {
	lambda := RuntimeAPI(getenv) != ""
	m := Metrics{Exporter: MetricsExporter(getenv("MCPUSH_METRICS")), Namespace: getenv("MCPUSH_METRICS_NAMESPACE"),
		Function: getenv("AWS_LAMBDA_FUNCTION_NAME")}
	switch m.Exporter {
	case "":
		m.Exporter = MetricsPrometheus
		if lambda {
			m.Exporter = MetricsEMF
		}
	case MetricsEMF, MetricsOff:
	case MetricsPrometheus:
		if lambda {
			return Metrics{}, &Error{Name: "MCPUSH_METRICS", Value: string(m.Exporter), Want: quoted(MetricsEMF, MetricsOff) + " in Lambda (prometheus needs the local server's listener)"}
		}
	default:
		return Metrics{}, &Error{Name: "MCPUSH_METRICS", Value: string(m.Exporter), Want: quoted(MetricsEMF, MetricsPrometheus, MetricsOff)}
	}
	if m.Namespace == "" {
		m.Namespace = DefaultMetricsNamespace
		return m, nil
	}
	if !validNamespace(m.Namespace) {
		return Metrics{}, &Error{Name: "MCPUSH_METRICS_NAMESPACE", Value: m.Namespace, Want: `1 to 255 printable ASCII characters, not starting with "AWS/" (a CloudWatch namespace)`}
	}
	return m, nil
}

// validNamespace reports whether CloudWatch accepts ns as a namespace.
func validNamespace(ns string) bool {
	if len(ns) > 255 || strings.HasPrefix(ns, "AWS/") {
		return false
	}
	for i := 0; i < len(ns); i++ {
		if c := ns[i]; c < ' ' || c > '~' {
			return false
		}
	}
	return true
}
