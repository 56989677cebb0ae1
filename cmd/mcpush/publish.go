package main

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
)

// publishFlags are the flags of mcpush publish.
type publishFlags struct {
	topicARN, message, subject string
	endpointURL                string // a local SNS API, e.g. moto_server
	region                     string
}

// cmdPublish publishes one message to an SNS topic with the AWS SDK's SNS
// client (credentials from the default chain) and prints its MessageId.
func cmdPublish(ctx context.Context, e *env, p *publishFlags) error {
	if p.topicARN == "" || p.message == "" {
		return fmt.Errorf("%w: publish needs --topic-arn and --message", errUsage)
	}
	region := p.region
	if region == "" {
		region = regionOfARN(p.topicARN)
	}
	cfg, err := e.awsConfig(ctx, region)
	if err != nil {
		return fmt.Errorf("loading AWS configuration: %w", err)
	}
	client := sns.NewFromConfig(cfg, func(o *sns.Options) {
		if p.endpointURL != "" {
			o.BaseEndpoint = aws.String(p.endpointURL)
		}
	})
	in := &sns.PublishInput{TopicArn: aws.String(p.topicARN), Message: aws.String(p.message)}
	if p.subject != "" {
		in.Subject = aws.String(p.subject)
	}
	out, err := client.Publish(ctx, in)
	if err != nil {
		return fmt.Errorf("publishing to %s: %w", p.topicARN, err)
	}
	return writeJSON(e.stdout, map[string]string{"messageId": aws.ToString(out.MessageId)}, false)
}

// regionOfARN returns the region field of an ARN
// (arn:aws:sns:REGION:ACCOUNT:NAME), or "".
func regionOfARN(arn string) string {
	var parts [6]string
	n := 0
	start := 0
	for i := 0; i < len(arn) && n < 5; i++ {
		if arn[i] == ':' {
			parts[n] = arn[start:i]
			n++
			start = i + 1
		}
	}
	if n < 5 || parts[0] != "arn" {
		return ""
	}
	return parts[3]
}
