package envconfig

import "net/url"

// Delivery configures webhook delivery (package delivery), in both mains.
type Delivery struct {
	// QueueURL is MCPUSH_DELIVERY_QUEUE_URL: the SQS queue that takes
	// delivery tasks (on AWS, set by the template; its endpoint follows
	// the SDK's AWS_ENDPOINT_URL_SQS). Empty: no queue, and the local
	// server's in-process pool delivers what it finds in the store.
	QueueURL string
	// Workers is MCPUSH_WEBHOOK_WORKERS: the local server's delivery
	// workers (0: delivery.DefaultWorkers).
	Workers int
	// PerOrigin is MCPUSH_WEBHOOK_PER_ORIGIN: attempts in flight per
	// callback origin in one process (0: delivery.DefaultPerOrigin).
	PerOrigin int
}

// ReadDelivery reads webhook delivery's variables; a bad value is an
// *Error.
func ReadDelivery(getenv func(string) string) (Delivery, error) {
	d := Delivery{QueueURL: getenv("MCPUSH_DELIVERY_QUEUE_URL")}
	if d.QueueURL != "" {
		u, err := url.Parse(d.QueueURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return Delivery{}, &Error{Name: "MCPUSH_DELIVERY_QUEUE_URL", Value: d.QueueURL, Want: "an SQS queue URL such as https://sqs.us-east-1.amazonaws.com/123456789012/mcpush-delivery"}
		}
	}
	var err error
	if d.Workers, err = positive(getenv, "MCPUSH_WEBHOOK_WORKERS"); err != nil {
		return Delivery{}, err
	}
	if d.PerOrigin, err = positive(getenv, "MCPUSH_WEBHOOK_PER_ORIGIN"); err != nil {
		return Delivery{}, err
	}
	return d, nil
}
