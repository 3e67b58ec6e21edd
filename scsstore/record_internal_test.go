package scsstore

import (
	"testing"
)

func known(data string, expires int64) state {
	return state{known: true, data: []byte(data), expires: expires}
}

// The record keeps a state only from a call that no other call's answer
// overlapped, unless they agree; and an eviction during a call counts as
// an overlap.
func TestRecords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		run  func(r *records) state
		want state
	}{
		{"one call", func(r *records) state {
			s := r.begin()
			r.end("k", s, known("a", 1))
			return r.get("k")
		}, known("a", 1)},
		{"calls in turn", func(r *records) state {
			s := r.begin()
			r.end("k", s, known("a", 1))
			s = r.begin()
			r.end("k", s, known("b", 2))
			return r.get("k")
		}, known("b", 2)},
		{"overlapping, agreeing", func(r *records) state {
			s1, s2 := r.begin(), r.begin()
			r.end("k", s2, known("a", 1))
			r.end("k", s1, known("a", 1))
			return r.get("k")
		}, known("a", 1)},
		{"overlapping, disagreeing", func(r *records) state {
			s1, s2 := r.begin(), r.begin()
			r.end("k", s2, known("new", 1))
			r.end("k", s1, known("old", 1))
			return r.get("k")
		}, state{}},
		{"overlapping, other expiry", func(r *records) state {
			s1, s2 := r.begin(), r.begin()
			r.end("k", s2, known("a", 2))
			r.end("k", s1, known("a", 1))
			return r.get("k")
		}, state{}},
		{"unknown wins", func(r *records) state {
			s1, s2 := r.begin(), r.begin()
			r.end("k", s2, known("a", 1))
			r.end("k", s1, state{})
			return r.get("k")
		}, state{}},
		{"other keys do not overlap", func(r *records) state {
			s1, s2 := r.begin(), r.begin()
			r.end("other", s2, known("x", 1))
			r.end("k", s1, known("a", 1))
			return r.get("k")
		}, known("a", 1)},
		{"evicted during the call", func(r *records) state {
			r.budget = 2*(1+recordOverhead) + 2
			s1 := r.begin()
			s2 := r.begin()
			r.end("k", s2, known("a", 1))
			r.end("l", r.begin(), known("b", 1))
			r.end("m", r.begin(), known("c", 1)) // evicts k
			r.end("k", s1, known("old", 1))
			return r.get("k")
		}, state{}},
		{"evicted before the call", func(r *records) state {
			r.budget = 2*(1+recordOverhead) + 2
			r.end("k", r.begin(), known("a", 1))
			r.end("l", r.begin(), known("b", 1))
			r.end("m", r.begin(), known("c", 1)) // evicts k
			r.end("k", r.begin(), known("d", 1))
			return r.get("k")
		}, known("d", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecords(1 << 20)
			got := tc.run(r)
			if got.known != tc.want.known || string(got.data) != string(tc.want.data) || got.expires != tc.want.expires {
				t.Errorf("record %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The records stay within their budget.
func TestRecordsBudget(t *testing.T) {
	t.Parallel()
	r := newRecords(10_000)
	data := string(make([]byte, 900))
	for i := range 1000 {
		r.end(string(rune('a'+i%26))+string(rune(i)), r.begin(), known(data, 1))
		if r.size > r.budget {
			t.Fatalf("size %d over the budget %d", r.size, r.budget)
		}
	}
	if r.lru.Len() != len(r.byKey) || r.lru.Len() == 0 {
		t.Errorf("%d in the list, %d in the map", r.lru.Len(), len(r.byKey))
	}
}
