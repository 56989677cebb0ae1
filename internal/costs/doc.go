// Package costs holds no code: its tests measure what mcpush costs in
// store requests (DynamoDB API calls counted by an SDK middleware, and
// notify.Store calls on SQLite) and check the targets: a warm tools/call
// makes at most one request and no writes, creating a session at most two
// writes, a held stream at most one read per poll interval whatever its
// subscriptions, an idle client's reconnection at most one read and no
// write, within $1.00 a month at AWS list prices (TestIdleClient). Its
// benchmarks time a tools/call on both stores and print the cost model
// (BenchmarkCostModel: dollars per idle client-month, per 1,000 events to
// 1, 100 and 10,000 subscribers, per million tools/call, and Lambda
// concurrency per client) and the cost model at scale
// (BenchmarkScaleCostModel: dollars per idle client-month at 1,000,
// 100,000 and 1,000,000 clients on on-demand Lambda and on Lambda Managed
// Instances, from the measured memory, CPU and counted store requests of
// idle held streams, and the break-even point between them).
package costs
