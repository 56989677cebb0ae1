package costs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// Prices are AWS on-demand list prices in us-east-1, as published on
// aws.amazon.com/lambda/pricing and aws.amazon.com/dynamodb/pricing
// (Lambda arm64 duration unchanged since 2021; DynamoDB on-demand since
// its price cut of 2024-11-01), checked on 2026-11-23.
const (
	pricesChecked     = "2026-11-23"
	lambdaPerRequest  = 0.20 / 1e6   // $ per invocation
	lambdaPerGBSecond = 0.0000133334 // $ per GB-second, arm64
	dynamoPerRRU      = 0.125 / 1e6  // $ per read request unit
	dynamoPerWRU      = 0.625 / 1e6  // $ per write request unit
	lambdaMemoryGB    = 256.0 / 1024 // template.yaml MemorySize default
	month             = 30 * 24 * time.Hour
)

// cycleCost is what one invocation costs that runs for held and uses rru
// DynamoDB read request units and wru write request units.
func cycleCost(held time.Duration, rru, wru float64) float64 {
	return lambdaPerRequest + held.Seconds()*lambdaMemoryGB*lambdaPerGBSecond +
		rru*dynamoPerRRU + wru*dynamoPerWRU
}

// idleMonth is the monthly cost of an idle client whose stream reconnects
// every retry and whose every reconnection is one invocation of held that
// uses rru read and wru write request units. The reconnection cycle is
// retry plus the invocation; network round trips only lengthen it (fewer
// cycles), so leaving them out overstates the cost.
func idleMonth(retry, held time.Duration, rru, wru float64) (dollars, invocations float64) {
	invocations = float64(month) / float64(retry+held)
	return invocations * cycleCost(held, rru, wru), invocations
}

// Lambda Managed Instances, us-east-1, checked on 2026-11-24: the EC2
// on-demand price of the instance (m7g.large, Graviton3, 2 vCPU and
// 8 GiB, Linux: $0.0816 an hour, aws.amazon.com/ec2/pricing/on-demand),
// plus the compute management fee of 15 % of that on-demand price, plus
// $0.20 per million requests (aws.amazon.com/lambda/pricing). A capacity
// provider runs three instances at least, for Availability Zone
// resiliency (docs.aws.amazon.com/lambda/latest/dg/lambda-managed-instances-scaling.html).
const (
	lmiPricesChecked   = "2026-11-24"
	lmiInstanceType    = "m7g.large"
	lmiInstancePerHour = 0.0816 // $ EC2 on-demand
	lmiInstanceVCPU    = 2
	lmiManagementFee   = 0.15       // of the EC2 on-demand price
	lmiPerRequest      = 0.20 / 1e6 // $ per invocation
	lmiMinInstances    = 3          // AZ resiliency
	lmiEnvVCPU         = 1          // template ManagedMemorySize 2048 MB: 2 GiB per vCPU
	lmiEnvMemory       = 2048 << 20 // bytes
	lmiMaxConcurrency  = 1600       // the most PerExecutionEnvironmentMaxConcurrency allows
	lmiTemplateConc    = 1600       // template.yaml's default (TestTemplateConcurrency)
	lmiLowConc         = 256        // a lower setting, priced beside it
	functionTimeout    = 900 * time.Second
)

// TestTemplateConcurrency keeps lmiTemplateConc, which the scale cost
// model prices, equal to template.yaml's PerExecutionEnvironmentMaxConcurrency
// default, and within what Lambda allows.
func TestTemplateConcurrency(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^  PerExecutionEnvironmentMaxConcurrency:\n    Type: Number\n    Default: (\d+)\n`).FindSubmatch(b)
	if m == nil {
		t.Fatal("template.yaml: no PerExecutionEnvironmentMaxConcurrency parameter with a Default")
	}
	if got, _ := strconv.Atoi(string(m[1])); got != lmiTemplateConc || got > lmiMaxConcurrency {
		t.Errorf("template.yaml's PerExecutionEnvironmentMaxConcurrency default is %s; the cost model prices %d (at most %d)", m[1], lmiTemplateConc, lmiMaxConcurrency)
	}
}
