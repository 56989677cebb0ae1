package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/mcpush/mcpush/pkg/mcp"
)

// Tasks on Lambda. A tools/call that becomes a task (the tasks extension
// of MCP 2026-07-28) returns at once; the work runs in an invocation of
// its own: SelfInvokeRunner invokes the function asynchronously with a
// TaskEvent, and LambdaHandler runs the task when an invocation carries
// one, with the whole function timeout for it. Its process renews the
// task's lease while it works; an invocation that fails or times out
// stops renewing, and the task is reported failed once the lease expires
// (mcp.TaskOptions.Lease), by whichever process reads it next. Work that
// reaches the invocation's deadline is failed at once, saying so.

// TaskEvent is the payload of an invocation that runs a task.
type TaskEvent struct {
	Task *TaskRef `json:"mcpushTask"`
}

// TaskRef names a task.
type TaskRef struct {
	Principal string `json:"principal"`
	ID        string `json:"id"`
}

// LambdaInvoker is the part of *lambda.Client that SelfInvokeRunner uses.
type LambdaInvoker interface {
	Invoke(ctx context.Context, in *awslambda.InvokeInput, optFns ...func(*awslambda.Options)) (*awslambda.InvokeOutput, error)
}

var _ LambdaInvoker = (*awslambda.Client)(nil)

// SelfInvokeRunner is an mcp.TaskRunner that runs each task in an
// invocation of its own: an asynchronous invoke (InvocationType Event) of
// the function with a TaskEvent. The function needs
// lambda:InvokeFunction on itself (template.yaml grants it). Safe for
// concurrent use.
type SelfInvokeRunner struct {
	API          LambdaInvoker
	FunctionName string // AWS_LAMBDA_FUNCTION_NAME
	Qualifier    string // the version to invoke; "" or $LATEST: the unqualified function
}

// StartTask implements mcp.TaskRunner: it returns once Lambda accepted the
// event.
func (r *SelfInvokeRunner) StartTask(ctx context.Context, principal, id string) error {
	payload, err := json.Marshal(TaskEvent{Task: &TaskRef{Principal: principal, ID: id}})
	if err != nil {
		return err
	}
	in := &awslambda.InvokeInput{
		FunctionName:   aws.String(r.FunctionName),
		InvocationType: types.InvocationTypeEvent,
		Payload:        payload,
	}
	if r.Qualifier != "" && r.Qualifier != "$LATEST" {
		in.Qualifier = aws.String(r.Qualifier)
	}
	if _, err := r.API.Invoke(ctx, in); err != nil {
		return fmt.Errorf("invoking %s for task %s: %w", r.FunctionName, id, err)
	}
	return nil
}

// taskMargin is what a task invocation keeps of its deadline to record
// that the work did not finish.
const taskMargin = 2 * time.Second

// taskEvent reports whether an invocation's payload is a TaskEvent.
func taskEvent(payload json.RawMessage) (*TaskRef, bool) {
	var ev TaskEvent
	if json.Unmarshal(payload, &ev) != nil || ev.Task == nil || ev.Task.ID == "" {
		return nil, false
	}
	return ev.Task, true
}

// runTask runs a task in this invocation, until the invocation's
// deadline less taskMargin.
func (h *LambdaHandler) runTask(ctx context.Context, t *TaskRef) error {
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-taskMargin))
		defer cancel()
	}
	var req string
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		req = lc.AwsRequestID
	}
	start := time.Now()
	err := h.srv.RunTask(ctx, t.Principal, t.ID)
	h.log.InfoContext(ctx, "task", "task", t.ID, "requestId", req, "durationMs", time.Since(start).Milliseconds(), "err", err)
	return err
}

var _ mcp.TaskRunner = (*SelfInvokeRunner)(nil)
