package costs

import "time"

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
