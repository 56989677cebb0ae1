package delivery

import (
	"fmt"
	"testing"
)

// TestOrigins: at most per attempts in flight per origin, 1 once its
// last 3 failed and per again after a success; a task that finds its
// origin busy is parked once (a second park of its subscription merges
// into it, taking the later head) and handed back by a release; idle
// origins beyond maxOrigins are forgotten.
func TestOrigins(t *testing.T) {
	o := newOrigins(2)
	t1 := Task{Kind: KindSubscription, Topic: "t", ID: "a", Seq: 1}
	s1, _ := o.acquire("https://h.example/a", &t1, true)
	s2, _ := o.acquire("https://h.example/b", &t1, true)
	if s1 == nil || s2 == nil {
		t.Fatal("two places at an origin of 2 refused")
	}
	if s, parked := o.acquire("https://h.example/c", &t1, true); s != nil || !parked {
		t.Fatalf("a third: %v %v, want parked", s, parked)
	}
	later := t1
	later.Seq = 5
	if _, parked := o.acquire("https://h.example/c", &later, true); !parked || o.parked != 1 {
		t.Fatalf("a second park of one subscription: parked %v, %d parked; want one", parked, o.parked)
	}
	if s, parked := o.acquire("https://other.example/", &t1, true); s == nil || parked {
		t.Fatal("another origin is not limited by this one")
	}
	if s, parked := o.acquire("https://h.example/d", &t1, false); s != nil || parked {
		t.Fatal("without park a busy origin answers no place and no park")
	}
	wake := s1.release()
	if len(wake) != 1 || wake[0].Seq != 5 || o.parked != 0 {
		t.Fatalf("release woke %+v (%d parked), want the parked task with head 5", wake, o.parked)
	}
	// Failing: 1 in flight.
	for range 3 {
		s2.done(false)
	}
	s2.release()
	a, _ := o.acquire("https://h.example/x", &t1, false)
	if b, _ := o.acquire("https://h.example/y", &t1, false); a == nil || b != nil {
		t.Fatalf("a failing origin: %v, %v; want exactly one place", a, b)
	}
	a.done(true)
	if b, _ := o.acquire("https://h.example/y", &t1, false); b == nil {
		t.Fatal("after a success the origin has its places back")
	}
	// The bound on remembered origins.
	for i := range maxOrigins + 10 {
		s, _ := o.acquire(fmt.Sprintf("https://o%d.example/", i), &t1, false)
		s.done(false) // failing: remembered after release
		s.release()
	}
	if len(o.m) > maxOrigins+1 {
		t.Errorf("%d origins remembered, want at most %d", len(o.m), maxOrigins+1)
	}
}
