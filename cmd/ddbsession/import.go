package main

import (
	"bytes"
	"context"
	"encoding/gob"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession/internal/item"
)

// This file is "import": scs sessions from Redis into scsstore's items,
// paced and resumable.

var importCommand = &command{
	path:    "import",
	summary: "copy scs sessions from Redis into the table, as scsstore keeps them",
	help: `Copies the sessions that scs's redisstore keeps in a Redis server into the
table as scsstore keeps scs sessions (docs/item-format.md, "scs session
items"), so that an app switched to scsstore finds them and no one is
signed out; docs/migrate.md puts it among the other ways to move.

It walks the keys that start with -prefix with SCAN (never KEYS), reads
each with GET and its expiry with PEXPIRETIME (PTTL before Redis 7), and
writes each with a PutItem on the condition that the key is free: the item
keeps the session's token only as its SHA-256 digest, its data as scs
encoded it, and its expiry. A session already in the table (imported
before, or written by the app since, or deleted by the app: its tombstone)
is left as it is. Skipped and counted, never fatal: "expired" (expired, or
gone since SCAN listed it), "malformed" (a key that is no scs token, a
value that is no string or not scs's gob encoding, a key with no expiry),
"exists" (already in the table). Nothing a session holds, token or data,
is printed.

Resuming: after each SCAN batch is in the table, the SCAN cursor is saved
in the -state file; a run that finds it resumes from there and says so, and
a run that finds it complete does nothing (remove the file to import
again). A killed run loses no session: the batch it was writing is read
again, and what it had written counts as "exists". SCAN may return a key
twice; the condition keeps it once.

Pacing: -max-wcu write units per second, on the units DynamoDB reports for
each put (one per KB of the item); 0 lifts it.

Progress: a bar on a terminal, a line every 10 s otherwise, none with -json.
Output: a summary. With -json: {"table", "redis", "prefix", "state",
"resumed", "alreadyDone", "read", "imported", "skipped": {"expired",
"malformed", "exists"}, "writeUnits", "elapsedSeconds"}, the counts of
this run.

Example:
  ddbsession import -table app -redis 127.0.0.1:6379 -max-wcu 50
  ddbsession import -table app -redis redis://:PASSWORD@cache:6379/0 -json`,
	flags: func(fs *flag.FlagSet, o *options) {
		fs.StringVar(&o.redis, "redis", "", "the Redis server: `HOST:PORT`, or redis://[USER:PASSWORD@]HOST:PORT[/DB] (rediss:// for TLS) (required)")
		fs.StringVar(&o.redisPrefix, "prefix", "scs:session:", "the `prefix` of the Redis keys, redisstore's (NewWithPrefix)")
		fs.StringVar(&o.scsPrefix, "scs-prefix", item.DefaultSCSPrefix, "scsstore's Config.Prefix, for its `prefix` of scs items")
		fs.Float64Var(&o.maxWCU, "max-wcu", 100, "write `units` per second for the puts; 0: no limit")
		fs.StringVar(&o.state, "state", "", "the state `file` that makes a run resumable (default ddbsession-import-TABLE.state in the working directory)")
	},
	run: runImport,
}

// importBatch is how many keys each SCAN asks for, and so how many
// sessions a killed run may read again.
const importBatch = 500

// importWorkers is how many puts run at once: the pace, not their number,
// bounds the load.
const importWorkers = 8

// Reasons a session is skipped, the keys of the report's "skipped".
const (
	skipExpired   = "expired"
	skipMalformed = "malformed"
	skipExists    = "exists"
)

// importState is the state file: where the SCAN is, and of what.
type importState struct {
	Redis  string `json:"redis"`
	Prefix string `json:"prefix"`
	Table  string `json:"table"`
	Cursor string `json:"cursor"`
	Done   bool   `json:"done"`
}

type importReport struct {
	Table          string           `json:"table"`
	Redis          string           `json:"redis"`
	Prefix         string           `json:"prefix"`
	State          string           `json:"state"`
	Resumed        bool             `json:"resumed"`
	AlreadyDone    bool             `json:"alreadyDone"`
	Read           int64            `json:"read"`
	Imported       int64            `json:"imported"`
	Skipped        map[string]int64 `json:"skipped"`
	WriteUnits     float64          `json:"writeUnits"`
	ElapsedSeconds float64          `json:"elapsedSeconds"`
}

// importer is one import's state.
type importer struct {
	e      *env
	o      *options
	client Client
	redis  *redisConn
	scs    item.SCSLayout
	writes *pacer
	// pttl: the server has no PEXPIRETIME (before Redis 7), so the expiry
	// is PTTL from now.
	pttl bool

	read, imported atomic.Int64
	writeMilli     atomic.Int64
	mu             sync.Mutex
	skipped        map[string]int64
}

// testStopEnv names a point where a test kills the command: after the
// state file holds a batch that brings the sessions read to at least its
// value, the command says so on stderr and waits to be killed.
const testStopEnv = "DDBSESSION_IMPORT_TEST_STOP_AFTER"

func runImport(ctx context.Context, e *env, c *command, o *options, _ []string) int {
	if o.redis == "" {
		return e.usageError(c, errors.New("-redis is required"))
	}
	target, err := parseRedis(o.redis)
	if err != nil {
		return e.usageError(c, err)
	}
	if o.state == "" {
		o.state = "ddbsession-import-" + o.table + ".state"
	}
	want := importState{Redis: target.String(), Prefix: o.redisPrefix, Table: o.table, Cursor: "0"}
	st, resumed, err := loadImportState(o.state, want)
	if err != nil {
		return e.usageError(c, err)
	}
	report := importReport{
		Table: o.table, Redis: want.Redis, Prefix: o.redisPrefix, State: o.state, Resumed: resumed,
		Skipped: map[string]int64{skipExpired: 0, skipMalformed: 0, skipExists: 0},
	}
	if st.Done {
		report.AlreadyDone = true
		if !o.json {
			fmt.Fprintf(e.stdout, "import from %s into table %q: complete already, as %s records; nothing to do (remove it to import again)\n", want.Redis, o.table, o.state)
			return exitOK
		}
		return printImport(e, o, report)
	}
	client, _, code := e.open(ctx, c, o)
	if client == nil {
		return code
	}
	conn, err := dialRedis(ctx, target)
	if err != nil {
		return e.fail(c, o, err)
	}
	defer conn.Close()
	im := &importer{
		e: e, o: o, client: client, redis: conn,
		scs:     item.SCSLayout{Layout: o.items, Prefix: o.scsPrefix},
		writes:  newPacer(o.maxWCU, e),
		skipped: report.Skipped,
	}
	// PEXPIRETIME of a missing key: -2 from Redis 7 on, an error before.
	if _, err := conn.do("PEXPIRETIME", "ddbsession-import-probe"); err != nil {
		var re redisError
		if !errors.As(err, &re) {
			return e.fail(c, o, err)
		}
		im.pttl = true
	}
	total := int64(0)
	if n, err := conn.do("DBSIZE"); err == nil {
		total, _ = n.(int64)
	}
	if !o.json {
		from := "from the start"
		if resumed {
			from = "resuming where " + o.state + " says the last run stopped"
		}
		fmt.Fprintf(e.stderr, "import from %s (keys %s*) into table %q, %s, at most %s write units a second\n",
			want.Redis, o.redisPrefix, o.table, from, limit(o.maxWCU))
	}
	prog := e.newProgress(o, "import", total, func() (int64, string) {
		return im.read.Load(), fmt.Sprintf("%s imported", thousands(im.imported.Load()))
	})
	began := e.now()
	stopAfter, _ := strconv.ParseInt(os.Getenv(testStopEnv), 10, 64)
	for err == nil && !st.Done {
		var next string
		var keys []string
		next, keys, err = conn.scan(st.Cursor, globEscape(o.redisPrefix)+"*", importBatch)
		if err == nil {
			err = im.batch(ctx, keys, prog)
		}
		if err == nil {
			st.Cursor, st.Done = next, next == "0"
			err = saveImportState(o.state, st)
		}
		if err == nil && stopAfter > 0 && im.read.Load() >= stopAfter {
			fmt.Fprintf(e.stderr, "import: stopped for a test after %d sessions\n", im.read.Load())
			<-ctx.Done()
			err = ctx.Err()
		}
	}
	prog.done()
	report.Read, report.Imported = im.read.Load(), im.imported.Load()
	report.WriteUnits = float64(im.writeMilli.Load()) / 1000
	report.ElapsedSeconds = seconds(e.now().Sub(began))
	if err != nil {
		if !o.json {
			fmt.Fprintf(e.stderr, "import: stopped; %s records where, and the next run resumes there\n", o.state)
		}
		return e.fail(c, o, err)
	}
	return printImport(e, o, report)
}

// scsSession is a session read from Redis, ready to write.
type scsSession struct {
	token   string
	data    []byte
	expires int64 // epoch seconds, rounded down as scsstore stores them
}

// batch imports the sessions behind keys: reads them in one pipeline, and
// writes those to import, importWorkers at a time.
func (im *importer) batch(ctx context.Context, keys []string, prog *progress) error {
	im.read.Add(int64(len(keys)))
	var tokens []string
	var cmds [][]string
	expiry := "PEXPIRETIME"
	if im.pttl {
		expiry = "PTTL"
	}
	for _, k := range keys {
		token := strings.TrimPrefix(k, im.o.redisPrefix)
		if !item.ValidSCSToken(token) {
			im.skip(skipMalformed)
			continue
		}
		tokens = append(tokens, token)
		cmds = append(cmds, []string{"GET", k}, []string{expiry, k})
	}
	if len(cmds) == 0 {
		prog.update()
		return nil
	}
	now := im.e.now()
	replies, err := im.redis.pipeline(cmds)
	if err != nil {
		return err
	}
	var sessions []scsSession
	for i, token := range tokens {
		s, reason := im.session(token, replies[2*i], replies[2*i+1], now)
		if reason != "" {
			im.skip(reason)
			continue
		}
		sessions = append(sessions, s)
	}
	// One goroutine paces, in order; importWorkers write at once. Their
	// settles correct the pace for what DynamoDB reports.
	work := make(chan scsSession)
	var failed error
	var once sync.Once
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range importWorkers {
		wg.Go(func() {
			for s := range work {
				if err := im.put(ctx, s); err != nil {
					once.Do(func() { failed = err; cancel() })
				}
				prog.update()
			}
		})
	}
	var paced error
	for _, s := range sessions {
		if paced = im.writes.take(ctx, s.estimate()); paced != nil {
			break
		}
		select {
		case work <- s:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	if failed != nil {
		return failed
	}
	prog.update()
	if paced != nil {
		return paced
	}
	return ctx.Err()
}

// session judges what Redis answered for token: the value and the expiry
// (epoch milliseconds from PEXPIRETIME, or milliseconds left from PTTL).
// reason is why it is skipped, "" if it is to be imported.
func (im *importer) session(token string, value, expiry any, now time.Time) (s scsSession, reason string) {
	data, isBytes := value.([]byte)
	ms, isInt := expiry.(int64)
	switch {
	case isBytes && data == nil, isInt && ms == -2:
		return s, skipExpired // gone since SCAN listed it
	case !isBytes || !isInt || ms < 0 || !scsEncoded(data):
		// An error reply (WRONGTYPE: a hash, a list), no expiry (scs always
		// sets one), or data that is not scs's encoding.
		return s, skipMalformed
	}
	if im.pttl {
		ms += now.UnixMilli()
	}
	// Rounded down, as scsstore stores an expiry; it finds nothing at or
	// after it.
	expires := ms / 1000
	if expires <= now.Unix() {
		return s, skipExpired
	}
	return scsSession{token: token, data: data, expires: expires}, ""
}

// scsEncoded reports whether data is scs's GobCodec encoding: a gob of a
// struct with Deadline and Values. The values are skipped unread, so
// their types, which the app registers, need not be known.
func scsEncoded(data []byte) bool {
	var aux struct{ Deadline time.Time }
	err := gob.NewDecoder(bytes.NewReader(data)).Decode(&aux)
	return err == nil && !aux.Deadline.IsZero()
}

// estimate is the write units that s's put is expected to consume: one
// per KB of the item, its data and about 150 bytes of the rest. A put
// whose condition fails is billed too but reports nothing, and keeps the
// estimate.
func (s scsSession) estimate() float64 { return math.Ceil(float64(len(s.data)+150) / 1024) }

// put writes s as a new scs session item, unless its key is taken, once
// the pace has reserved its estimate.
func (im *importer) put(ctx context.Context, s scsSession) error {
	av := im.scs.Encode(im.scs.PK(s.token), item.SCSSession{Data: s.data, ExpiresAt: time.Unix(s.expires, 0)})
	out, err := im.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                &im.o.table,
		Item:                     av,
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": im.o.items.PartitionKey},
		ReturnConsumedCapacity:   types.ReturnConsumedCapacityTotal,
	})
	consumed := s.estimate()
	if err == nil && out.ConsumedCapacity != nil && out.ConsumedCapacity.CapacityUnits != nil {
		consumed = *out.ConsumedCapacity.CapacityUnits
	}
	im.writes.settle(s.estimate(), consumed)
	im.writeMilli.Add(int64(consumed * 1000))
	var exists *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &exists):
		im.skip(skipExists)
		return nil
	case err != nil:
		return fmt.Errorf("write an scs session: %w", err)
	}
	im.imported.Add(1)
	return nil
}

func (im *importer) skip(reason string) {
	im.mu.Lock()
	im.skipped[reason]++
	im.mu.Unlock()
}

// loadImportState reads the state file at path, if there is one, and
// checks that it is of the import that want describes.
func loadImportState(path string, want importState) (st importState, resumed bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return want, false, nil
	}
	if err != nil {
		return st, false, fmt.Errorf("-state: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil || st.Cursor == "" {
		return st, false, fmt.Errorf("-state %s: not an import's state file (remove it to start over)", path)
	}
	if st.Redis != want.Redis || st.Prefix != want.Prefix || st.Table != want.Table {
		return st, false, fmt.Errorf("-state %s: records an import from %s (keys %s*) into table %q, not this one: name another -state, or remove it",
			path, st.Redis, st.Prefix, st.Table)
	}
	return st, st.Cursor != "0" || st.Done, nil
}

// saveImportState replaces the state file with st, durably: a new file,
// synced, renamed over the old one.
func saveImportState(path string, st importState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("save the state: %w", err)
	}
	defer os.Remove(tmp.Name()) // gone once renamed
	_, err = tmp.Write(append(b, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("save the state: %w", err)
	}
	return nil
}

func printImport(e *env, o *options, r importReport) int {
	if o.json {
		writeJSON(e.stdout, r)
		return exitOK
	}
	fmt.Fprintf(e.stdout, "import from %s into table %q done\n", r.Redis, r.Table)
	writeFields(e.stdout,
		"read", thousands(r.Read),
		"imported", thousands(r.Imported),
		"skipped", fmt.Sprintf("expired %s, malformed %s, already in the table %s",
			thousands(r.Skipped[skipExpired]), thousands(r.Skipped[skipMalformed]), thousands(r.Skipped[skipExists])),
		"write units", units(r.WriteUnits),
		"elapsed", (time.Duration(r.ElapsedSeconds*1000) * time.Millisecond).String(),
		"state", r.State,
	)
	return exitOK
}
