package webhook

import (
	"bufio"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// TestSendStaleKeepAlive: a receiver that closes a kept-alive connection
// as the next message arrives on it (what an idle timeout does when it
// races a send) costs no failed attempt: the message goes out again on a
// new connection and is accepted. Before the Sender marked its requests
// replayable, the second Send failed (connection reset or EOF).
func TestSendStaleKeepAlive(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns, served atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := conns.Add(1)
			go func(c net.Conn, n int64) {
				defer c.Close()
				r := bufio.NewReader(c)
				for i := 0; ; i++ {
					req, err := http.ReadRequest(r)
					if err != nil {
						return
					}
					req.Body.Close()
					if n == 1 && i == 1 {
						return // the first connection's second message: closed unanswered
					}
					served.Add(1)
					c.Write([]byte("HTTP/1.1 204 No Content\r\n\r\n"))
				}
			}(c, n)
		}
	}()
	origin, err := ParseAllow("http://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := NewSender(Policy{Allow: origin, Timeout: 5 * time.Second})
	url := "http://" + ln.Addr().String() + "/hook"
	if o := send(s, url); !o.OK() {
		t.Fatalf("first Send: %+v", o)
	}
	if o := send(s, url); !o.OK() {
		t.Fatalf("Send on the connection the receiver closed: %+v", o)
	}
	if c, n := conns.Load(), served.Load(); c != 2 || n != 2 {
		t.Errorf("%d connections, %d messages answered; want 2 and 2", c, n)
	}
}
