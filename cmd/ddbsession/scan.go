package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// This file scans a table for sweep and count: a parallel Scan, paced by
// the read units DynamoDB reports.

// scanner scans a table in segments, each on a goroutine of its own.
type scanner struct {
	client   Client
	in       dynamodb.ScanInput // the table, filter and projection
	segments int
	reads    *pacer
	// itemBytes is the table's average item size, 0 if unknown: the first
	// page's guess, so that the segments' first pages queue too.
	itemBytes float64
	// page is called with each page of a segment, one page at a time per
	// segment; pages of different segments come concurrently.
	page func(ctx context.Context, out *dynamodb.ScanOutput) error

	scanned   atomic.Int64 // items read, before the filter
	readMilli atomic.Int64 // read units, in thousandths
}

// eventualUnitBytes is what one read unit reads eventually consistently:
// two of 4 KB.
const eventualUnitBytes = 8 << 10

// pageLimit is the Limit of each Scan page: about a second of the read
// rate's units per segment, so that pacing is smooth, and at least 64 KB,
// since DynamoDB rounds each page up to 4 KB, for items of itemBytes on
// average. 0 (no limit: pages of 1 MB) without a rate.
func pageLimit(maxRCU float64, segments int, itemBytes float64) int32 {
	if maxRCU == 0 {
		return 0
	}
	if itemBytes < 1 {
		itemBytes = 1 << 10 // a guess, for a table DescribeTable calls empty
	}
	n := max(maxRCU/float64(segments)*eventualUnitBytes, minPageBytes) / itemBytes
	return int32(min(max(n, 10), 10000))
}

// minPageBytes is the least a page reads: the rounding of its size up to
// 4 KB then costs at most 6%.
const minPageBytes = 64 << 10

// run scans every segment to its end, or until one fails.
func (s *scanner) run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for segment := range s.segments {
		wg.Go(func() {
			if err := s.segment(ctx, segment); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && ctx.Err() != nil {
		return err
	}
	return nil
}

func (s *scanner) segment(ctx context.Context, segment int) error {
	in := s.in
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	if s.segments > 1 {
		in.Segment, in.TotalSegments = aws.Int32(int32(segment)), aws.Int32(int32(s.segments))
	}
	// The last page's units are the next one's guess; the first one's is
	// what its Limit of items would read.
	var estimate float64
	if in.Limit != nil {
		estimate = float64(*in.Limit) * max(s.itemBytes, 1<<10) / eventualUnitBytes
	}
	for {
		if err := s.reads.take(ctx, estimate); err != nil {
			return err
		}
		out, err := s.client.Scan(ctx, &in)
		if err != nil {
			return fmt.Errorf("scan table %q: %w", aws.ToString(in.TableName), err)
		}
		consumed := estimate
		if out.ConsumedCapacity != nil && out.ConsumedCapacity.CapacityUnits != nil {
			consumed = *out.ConsumedCapacity.CapacityUnits
		}
		s.reads.settle(estimate, consumed)
		estimate = consumed
		s.scanned.Add(int64(out.ScannedCount))
		s.readMilli.Add(int64(consumed * 1000))
		if err := s.page(ctx, out); err != nil {
			return err
		}
		if len(out.LastEvaluatedKey) == 0 {
			return nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// readUnits are the read units consumed so far.
func (s *scanner) readUnits() float64 { return float64(s.readMilli.Load()) / 1000 }
