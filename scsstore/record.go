package scsstore

import (
	"bytes"
	"container/list"
	"sync"
)

// records remembers, per session item, the state in which this instance
// last saw it in the table: the data and expiry that a Find read or a
// Commit wrote. Commit compares with it to skip a write without a read of
// its own. It is bounded in bytes, least recently used first out.
//
// # Why a skipped commit loses no data change
//
// A commit is skipped only when its data equals the record's. So the skip
// is safe if, whenever a request commits, the record (if known) holds a
// state that the table held at or after the moment that request's Find
// read the item. Then either the request changed nothing, or its data was
// already in the table after it read; what the table holds now is that
// state or a newer write, by another request or instance, which writing the
// request's data would have undone. Writing would never add a change that
// is not there.
//
// The record keeps that property even though calls to the table overlap
// and their answers can arrive in any order, because every Find and every
// write on an item is bracketed by [records.begin] and [records.end], and
// end keeps a state only from a call that overlapped no other call's end
// on the same item. When two overlapping calls disagree, the record becomes
// unknown (and the next commit writes). A record that was evicted while a
// call was under way counts as a disagreement too: evicted stamps only
// grow, and end compares with the highest. Everything that cannot vouch
// for the table's state (a miss, an error, a dropped commit, a delete)
// makes the record unknown. Unknown only ever costs a write.
type records struct {
	mu      sync.Mutex
	seq     uint64
	byKey   map[string]*list.Element
	lru     list.List // of *record, most recent first
	size    int
	budget  int
	evicted uint64 // highest stamp of an evicted record
}

// state is what a call saw of an item. The zero state is unknown.
type state struct {
	known   bool
	data    []byte // owned by the record: never modified
	expires int64  // epoch seconds, as stored
}

func (s state) equal(o state) bool {
	return s.known && o.known && s.expires == o.expires && bytes.Equal(s.data, o.data)
}

type record struct {
	key   string
	state state
	stamp uint64 // seq of the end that set it
}

// recordOverhead approximates a record's memory besides its key and data.
const recordOverhead = 128

func newRecords(budget int) *records {
	return &records{byKey: map[string]*list.Element{}, budget: budget}
}

// get returns the state recorded for key.
func (r *records) get(key string) state {
	r.mu.Lock()
	defer r.mu.Unlock()
	if el := r.byKey[key]; el != nil {
		return el.Value.(*record).state
	}
	return state{}
}

// begin marks the start of a call to the table about key, and returns the
// stamp to pass to end.
func (r *records) begin() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	return r.seq
}

// end records what the call that began at start saw of key.
func (r *records) end(key string, start uint64, seen state) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	el := r.byKey[key]
	var cur *record
	if el != nil {
		cur = el.Value.(*record)
	}
	overlapped := (cur != nil && cur.stamp > start) || (cur == nil && r.evicted > start)
	if overlapped && (cur == nil || !cur.state.equal(seen)) {
		seen = state{}
	}
	if cur == nil {
		cur = &record{key: key}
		el = r.lru.PushFront(cur)
		r.byKey[key] = el
		r.size += len(key) + recordOverhead
	} else {
		r.lru.MoveToFront(el)
	}
	r.size += len(seen.data) - len(cur.state.data)
	cur.state, cur.stamp = seen, r.seq
	for r.size > r.budget && r.lru.Len() > 0 {
		old := r.lru.Remove(r.lru.Back()).(*record)
		delete(r.byKey, old.key)
		r.size -= len(old.key) + recordOverhead + len(old.state.data)
		r.evicted = max(r.evicted, old.stamp)
	}
}
