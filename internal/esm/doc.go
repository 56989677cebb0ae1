// Package esm is a fake, for tests, of AWS infrastructure that cannot run
// here: the Lambda event-source mapping of an SQS queue, the poller of the
// Lambda service that feeds a queue's messages to a function (what an
// event of Type SQS deploys in a SAM template). The queue is real (moto's
// SQS, internal/moto); the function is whatever Invoke calls (a bootstrap
// under aws-lambda-rie, internal/rie). Neither the emulator nor SAM CLI's
// local commands read a queue: they invoke a function with an event file.
//
// It mimics the real protocol, one batch at a time, as a mapping with
// ReportBatchItemFailures does (the Lambda Developer Guide's "Using Lambda
// with Amazon SQS" and its partial batch responses):
//
//  1. ReceiveMessage of up to BatchSize (at most 10) messages, with every
//     system attribute and message attribute;
//  2. the SQS event built from them, as Lambda delivers it and as `sam
//     local generate-event sqs receive-message` writes it: {"Records":[
//     {messageId, receiptHandle, body, attributes{ApproximateReceiveCount,
//     SentTimestamp, SenderId, ApproximateFirstReceiveTimestamp, and for a
//     FIFO queue SequenceNumber, MessageGroupId, MessageDeduplicationId},
//     messageAttributes, md5OfBody, eventSource "aws:sqs", eventSourceARN,
//     awsRegion}]}, keys in that order, compact (Go's HTML escaping off:
//     a body's <, > and & stay as they are); message attributes as
//     {stringValue, binaryValue, stringListValues, binaryListValues,
//     dataType};
//  3. one synchronous invocation with it;
//  4. DeleteMessageBatch of the records the response does not name in
//     batchItemFailures. A response that is empty, null, {} or whose
//     batchItemFailures is null or [] acknowledges the whole batch; a
//     failed invocation (a function error, an init error, a timeout), a
//     response that is not a JSON object, or a batchItemFailures entry
//     whose itemIdentifier is missing, empty, null or not a message of the
//     batch, fails the whole batch: nothing is deleted.
//
// What is not deleted comes back after the queue's visibility timeout, and
// a delayed message (DelaySeconds) only after its delay, as on AWS: the
// fake leaves both to the queue.
//
// Where it differs: the real poller long-polls (20 s) with several
// pollers and invokes concurrently; SQS.Poll short-polls once (or
// long-polls WaitTimeSeconds) and invokes once, and Drain polls in a loop
// on one goroutine, so that a test knows what each invocation was given.
// The real mapping also batches by a window and a payload size (6 MB) and
// scales its pollers; none of that is mimicked.
package esm
