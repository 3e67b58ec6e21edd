package ddbsession

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession/internal/item"
	"github.com/ddbsession/ddbsession/internal/table"
)

// This file makes the table a Manager needs, or checks the one there is.

// CreateTable makes the table fit the configuration, at startup: it creates
// a missing table (on-demand, String keys, the expiry index if configured,
// TTL on TTLAttribute), logged at Info lest a typo in Config.Table make one
// silently; turns on an existing one's TTL if off, and says how else it
// does not fit; and checks Config.Layout against the table's record,
// writing one where none is. MRSC and dynalite have no TTL: a warning says
// so. The Client needs the table methods of *dynamodb.Client.
func (m *Manager[U]) CreateTable(ctx context.Context) error {
	if err := m.createTable(ctx); err != nil {
		return fmt.Errorf("ddbsession: create table: %w", err)
	}
	return nil
}

func (c *core) createTable(ctx context.Context) error {
	st := c.store
	t, err := st.describeTable(ctx)
	var missing *types.ResourceNotFoundException
	if errors.As(err, &missing) {
		var created bool
		created, err = st.createTable(ctx, table.Input(st.table, st.Layout))
		if created {
			c.logger.InfoContext(ctx, "ddbsession: created the table, which did not exist", "table", st.table)
		}
		if err == nil {
			t, err = st.waitForTable(ctx)
		}
		if created && err == nil {
			// A new table: no instance of a release before cookie keys
			// runs on it, so its record has a key from the start. A
			// table that exists gets its first key from an operator,
			// once none runs (docs/item-format.md).
			_, err = st.putNew(ctx, item.AddCookieKey(st.EncodeLayout(), item.NewCookieKey()))
		}
	}
	if err != nil {
		return err
	}
	if t.TableStatus != types.TableStatusActive {
		if t, err = st.waitForTable(ctx); err != nil {
			return err
		}
	}
	ttlAttr, ttlOn, err := st.describeTTL(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range table.Find(st.table, st.Layout, t, ttlAttr, ttlOn) {
		switch p.Kind {
		case table.MRSCNoTTL:
			c.logger.WarnContext(ctx, "ddbsession: the table is a global table in multi-Region strong consistency (MRSC), which has no TTL: expired sessions stay in the table until a sweep removes them (they are still rejected)", "table", st.table)
		case table.TTLOff:
			supported, err := st.enableTTL(ctx)
			if err != nil {
				errs = append(errs, err)
			} else if !supported {
				c.logger.WarnContext(ctx, "ddbsession: this DynamoDB engine does not implement UpdateTimeToLive; expired sessions stay in the table (they are still rejected)", "table", st.table)
			}
		default:
			errs = append(errs, fmt.Errorf("%s: %s", p.Error, fixOf(p)))
		}
	}
	// The layout record, and the global generation, which the first
	// request then need not read.
	if len(errs) == 0 {
		_, err := c.read.Refresh(ctx, true)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// fixOf says what an app does about problem p.
func fixOf(p table.Problem) string {
	switch p.Kind {
	case table.Schema:
		return fmt.Sprintf("set Config.Layout's keys to the table's %s if they are String keys, or give the sessions a table of their own", p.Got)
	case table.ExpiryIndex:
		return "add the index (ddbsession table check prints the command), or leave Layout.ExpiryIndex empty"
	case table.MREC:
		return "set Config.Layout.MREC, or a write in one Region can undo a RevokeAll or a Logout in another"
	case table.TTLAttribute:
		return fmt.Sprintf("a table has one TTL attribute: set Layout.TTLAttribute to %q, or use another table", p.TTLAttribute)
	}
	return "see ddbsession table check"
}
