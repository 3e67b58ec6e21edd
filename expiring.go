package ddbsession

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ddbsession/ddbsession/internal/item"
)

// ErrNoExpiryIndex is returned by [Manager.Expiring] when
// [Config.ExpiryIndex] is not set.
var ErrNoExpiryIndex = errors.New("ddbsession: Config.ExpiryIndex is not set")

// maxParallelQueries bounds how many index partitions Expiring reads at once.
const maxParallelQueries = 16

// maxExpiringWindow bounds the hours, and so the index partitions, that one
// call to Expiring may read.
const maxExpiringWindow = 24 * time.Hour

// Expiring returns the sessions whose expiry falls in [from, to], soonest
// first, for warm-up or pre-expiry notices. It needs the opt-in
// [Config.ExpiryIndex] and queries each hour's shards in parallel, so a
// window may span at most 24 hours. It reads the index alone: a session that
// RevokeAll ended but that has not expired can still be listed.
//
//	soon, err := sessions.Expiring(ctx, time.Now(), time.Now().Add(15*time.Minute))
//	for _, s := range soon {
//		notify(s.User, s.ExpiresAt)
//	}
//
// The index costs writes: Login writes one more index entry, Logout deletes
// it, and every refresh moves the session to a new sort key (and, across an
// hour, a new partition), which DynamoDB bills as a delete and a put on the
// index: two extra write units per refresh for items under 1 KB.
func (m *Manager[U]) Expiring(ctx context.Context, from, to time.Time) ([]Session, error) {
	if m.cfg.ExpiryIndex == "" {
		return nil, ErrNoExpiryIndex
	}
	if to.Before(from) || to.Sub(from) > maxExpiringWindow {
		return nil, fmt.Errorf("ddbsession: Expiring window %v to %v: must be ordered and at most %v", from, to, maxExpiringWindow)
	}
	ctx, cancel := m.storeContext(ctx)
	defer cancel()

	// Expiries are whole seconds: the first one in the window is from
	// rounded up, or a session that expired a fraction before from, and is
	// already rejected, would be listed.
	first := from.Unix()
	if from.After(time.Unix(first, 0)) {
		first++
	}
	var buckets []string
	for hour := from.UTC().Truncate(time.Hour); !hour.After(to); hour = hour.Add(time.Hour) {
		for shard := range m.cfg.ExpiryIndexShards {
			buckets = append(buckets, item.Bucket(hour, shard))
		}
	}
	var (
		mu       sync.Mutex
		sessions []Session
		errs     []error
		wg       sync.WaitGroup
	)
	limit := make(chan struct{}, maxParallelQueries)
	for _, bucket := range buckets {
		wg.Go(func() {
			limit <- struct{}{}
			defer func() { <-limit }()
			found, err := m.store.queryExpiry(ctx, m.cfg.ExpiryIndex, bucket, first, to.Unix())
			mu.Lock()
			defer mu.Unlock()
			for _, s := range found {
				sessions = append(sessions, sessionOf(s))
			}
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("ddbsession: expiring sessions: %w", err)
	}
	slices.SortFunc(sessions, func(a, b Session) int {
		return cmp.Or(a.ExpiresAt.Compare(b.ExpiresAt), cmp.Compare(a.ID, b.ID))
	})
	return sessions, nil
}
