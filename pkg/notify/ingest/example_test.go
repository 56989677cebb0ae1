package ingest_test

import (
	"errors"
	"fmt"

	"github.com/mcpush/mcpush/pkg/notify/ingest"
)

func ExampleParse() {
	const arn = "arn:aws:sns:us-east-1:123456789012:alerts"
	for _, body := range []string{
		`{"type":"event","topic":"orders","data":{"id":42}}`,
		`Disk usage on db-1 is above 90%`,
		`{"type":"registry","registry":"tools","op":"put","items":[{"enabled":false,"name":"events_wait"}]}`,
		`{"type":"registry","registry":"resources","op":"put","items":[{"uri":"notes.md","name":"notes"}]}`,
	} {
		msg, err := ingest.Parse(arn, body)
		switch {
		case errors.Is(err, ingest.ErrInvalidMessage):
			fmt.Println("rejected:", err)
		case msg.Type == ingest.TypeEvent:
			fmt.Printf("event on %s: %s\n", msg.Topic, msg.Data)
		default:
			fmt.Printf("%s %s: %s\n", msg.Registry, msg.Op, msg.Items["events_wait"])
		}
	}
	// Output:
	// event on orders: {"id":42}
	// event on alerts: "Disk usage on db-1 is above 90%"
	// tools put: {"name":"events_wait","enabled":false}
	// rejected: invalid SNS message: items[0].uri: "notes.md" is not an absolute URI (want a scheme, as in file:///a.txt or https://example.com/a)
}
