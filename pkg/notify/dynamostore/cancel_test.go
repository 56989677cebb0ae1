package dynamostore_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
)

// scriptedAPI answers TransactWriteItems from a script, one step per call;
// any other call panics (through the nil embedded API).
type scriptedAPI struct {
	dynamostore.API
	steps []func(in *dynamodb.TransactWriteItemsInput) error
	calls []*dynamodb.TransactWriteItemsInput
}

func (s *scriptedAPI) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	s.calls = append(s.calls, in)
	if len(s.calls) > len(s.steps) {
		return nil, errors.New("scriptedAPI: no more steps")
	}
	if err := s.steps[len(s.calls)-1](in); err != nil {
		return nil, err
	}
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

// reason is one cancellation reason: code, with an old item when attrs
// are given.
type reason struct {
	code  string
	attrs map[string]types.AttributeValue
}

func cancelled(reasons ...reason) func(*dynamodb.TransactWriteItemsInput) error {
	return func(*dynamodb.TransactWriteItemsInput) error {
		tc := &types.TransactionCanceledException{Message: aws.String("Transaction cancelled")}
		for _, r := range reasons {
			tc.CancellationReasons = append(tc.CancellationReasons, types.CancellationReason{Code: aws.String(r.code), Item: r.attrs})
		}
		return tc
	}
}

func succeed(*dynamodb.TransactWriteItemsInput) error { return nil }

var (
	none   = reason{code: "None"}
	absent = reason{code: "ConditionalCheckFailed"} // failed, no old item
)

func failedWith(attrs ...string) reason {
	r := reason{code: "ConditionalCheckFailed", attrs: map[string]types.AttributeValue{}}
	for i := 0; i+1 < len(attrs); i += 2 {
		if _, err := strconv.ParseInt(attrs[i+1], 10, 64); err == nil {
			r.attrs[attrs[i]] = &types.AttributeValueMemberN{Value: attrs[i+1]}
		} else {
			r.attrs[attrs[i]] = &types.AttributeValueMemberS{Value: attrs[i+1]}
		}
	}
	return r
}

// headToken returns the token the head update of an Append carries.
func headToken(in *dynamodb.TransactWriteItemsInput) string {
	for _, v := range in.TransactItems[0].Update.ExpressionAttributeValues {
		if s, ok := v.(*types.AttributeValueMemberS); ok {
			return s.Value
		}
	}
	return ""
}

// TestAppendCancellations checks how Append reads the reasons of a
// cancelled transaction: the item order is head, session, idempotency key
// (if any), events.
func TestAppendCancellations(t *testing.T) {
	future := strconv.FormatInt(time.Now().Add(time.Hour).UnixNano(), 10)
	past := strconv.FormatInt(time.Now().Add(-time.Hour).UnixNano(), 10)
	liveSession := failedWith("pk", "S#s", "exp", future)
	key := &notify.AppendOptions{IdempotencyKey: "k"}
	cas := &notify.AppendOptions{NotifiedHash: &notify.HashCAS{Registry: notify.RegistryTools, Old: "a", New: "b"}}
	tests := []struct {
		name      string
		opts      *notify.AppendOptions
		steps     []func(*dynamodb.TransactWriteItemsInput) error
		wantSeq   int64
		wantOK    bool
		wantErr   error // a sentinel, or errAny
		wantCalls int
	}{
		{"success", nil, steps(succeed), 1, true, nil, 1},
		{"head moved: retry from its value", nil,
			steps(cancelled(failedWith("seq", "5"), none, none), succeed), 6, true, nil, 2},
		{"head moved twice", nil,
			steps(cancelled(failedWith("seq", "5"), none, none), cancelled(failedWith("seq", "9"), none, none), succeed), 10, true, nil, 3},
		{"session missing", nil, steps(cancelled(none, absent, none)), 0, false, notify.ErrNotFound, 1},
		{"session expired", nil, steps(cancelled(none, failedWith("pk", "S#s", "exp", past), none)), 0, false, notify.ErrNotFound, 1},
		{"session missing and head moved", nil, steps(cancelled(failedWith("seq", "5"), absent, none)), 0, false, notify.ErrNotFound, 1},
		{"hash mismatch", cas, steps(cancelled(none, liveSession, none)), 0, false, nil, 1},
		{"hash mismatch on an expired session", cas,
			steps(cancelled(none, failedWith("pk", "S#s", "exp", past), none)), 0, false, notify.ErrNotFound, 1},
		{"key used", key, steps(cancelled(none, none, failedWith("tok", "other"), none)), 0, false, nil, 1},
		{"key used and head moved", key,
			steps(cancelled(failedWith("seq", "5"), none, failedWith("tok", "other"), none)), 0, false, nil, 1},
		{"own write, retried: head carries our token", nil,
			steps(func(in *dynamodb.TransactWriteItemsInput) error {
				return cancelled(failedWith("seq", "1", "tok", headToken(in)), none, none)(in)
			}), 1, true, nil, 1},
		{"own write, retried: key carries our token", key,
			steps(func(in *dynamodb.TransactWriteItemsInput) error {
				return cancelled(failedWith("seq", "3", "tok", "later"), none, failedWith("seq", "1", "tok", headToken(in)), none)(in)
			}), 1, true, nil, 1},
		{"transaction conflict: retried", nil,
			steps(cancelled(reason{code: "TransactionConflict"}, none, none), succeed), 1, true, nil, 2},
		{"validation error", nil, steps(cancelled(reason{code: "ValidationError"}, none, none)), 0, false, errAny, 1},
		{"throttled after the SDK's retries", nil,
			steps(func(*dynamodb.TransactWriteItemsInput) error {
				return &smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate exceeded"}
			}), 0, false, errAny, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &scriptedAPI{steps: tt.steps}
			st := dynamostore.New(api, "table", nil)
			seq, ok, err := st.Append(t.Context(), "s", "x", [][]byte{[]byte("d")}, tt.opts)
			if seq != tt.wantSeq || ok != tt.wantOK || !matchErr(err, tt.wantErr) {
				t.Errorf("Append = %d, %t, %v; want %d, %t, %v", seq, ok, err, tt.wantSeq, tt.wantOK, tt.wantErr)
			}
			if len(api.calls) != tt.wantCalls {
				t.Errorf("%d TransactWriteItems calls, want %d", len(api.calls), tt.wantCalls)
			}
		})
	}
}

func steps(s ...func(*dynamodb.TransactWriteItemsInput) error) []func(*dynamodb.TransactWriteItemsInput) error {
	return s
}

// errAny stands for "an error that is none of the notify sentinels".
var errAny = errors.New("any non-sentinel error")

func matchErr(err, want error) bool {
	switch want {
	case nil:
		return err == nil
	case errAny:
		if err == nil {
			return false
		}
		for _, s := range []error{notify.ErrNotFound, notify.ErrExists, notify.ErrConflict, notify.ErrTooLarge, notify.ErrInvalid} {
			if errors.Is(err, s) {
				return false
			}
		}
		return true
	}
	return errors.Is(err, want)
}

// TestSDKErrorsWrapped checks that an SDK error is returned wrapped,
// inspectable with errors.As, and not mistaken for a sentinel.
func TestSDKErrorsWrapped(t *testing.T) {
	apiErr := &smithy.GenericAPIError{Code: "InternalServerError", Message: "boom"}
	api := &scriptedAPI{steps: steps(func(*dynamodb.TransactWriteItemsInput) error { return apiErr })}
	st := dynamostore.New(api, "table", nil)
	_, err := st.PutMessage(t.Context(), "s", "k", []byte("m"))
	var got smithy.APIError
	if !errors.As(err, &got) || got.ErrorCode() != "InternalServerError" || !matchErr(err, errAny) {
		t.Errorf("PutMessage: got %v, want the SDK error wrapped", err)
	}
}
