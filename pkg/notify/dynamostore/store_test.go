package dynamostore_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/mcpush/mcpush/internal/moto"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
	"github.com/mcpush/mcpush/pkg/notify/storetest"
)

// envEndpoint passes the moto endpoint to the suite's child processes,
// which inherit the test process's environment.
const envEndpoint = "MCPUSH_TEST_DYNAMODB_ENDPOINT"

func TestMain(m *testing.M) {
	storetest.RunChild(open)
	code := m.Run()
	moto.Stop()
	os.Exit(code)
}

// endpoint starts moto (once per process) and publishes its endpoint for
// child processes.
func endpoint(t testing.TB) string {
	t.Helper()
	ep := moto.Start(t)
	endpointOnce.Do(func() { os.Setenv(envEndpoint, ep) })
	return ep
}

var endpointOnce sync.Once

// clients caches one client per endpoint, as a server would have.
var clients sync.Map // endpoint -> *dynamodb.Client

func client(ep string) *dynamodb.Client {
	if c, ok := clients.Load(ep); ok {
		return c.(*dynamodb.Client)
	}
	c, _ := clients.LoadOrStore(ep, moto.NewClient(context.Background(), ep))
	return c.(*dynamodb.Client)
}

// open is the suite's Opener: dsn is a table name, created if missing, on
// the endpoint in envEndpoint.
func open(dsn string) (storetest.Store, error) {
	return openWith(dsn, func(api dynamostore.API) dynamostore.API { return strictAPI{api} })
}

func openWith(table string, wrap func(dynamostore.API) dynamostore.API) (storetest.Store, error) {
	ep := os.Getenv(envEndpoint)
	if ep == "" {
		return nil, fmt.Errorf("%s is not set", envEndpoint)
	}
	c := client(ep)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := dynamostore.CreateTable(ctx, c, table); err != nil {
		return nil, err
	}
	return dynamostore.New(wrap(c), table, nil), nil
}

var tables atomic.Int64

// newTable returns the name of a table no test has used.
func newTable(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("t%d-%d", os.Getpid(), tables.Add(1))
}

func TestContract(t *testing.T) {
	endpoint(t)
	storetest.Run(t, open, func(t *testing.T) string { return newTable(t) })
}
