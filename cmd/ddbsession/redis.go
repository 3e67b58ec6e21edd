package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// This file is a small Redis client for "import": the commands it needs
// (AUTH, SELECT, SCAN, GET, PEXPIRETIME, PTTL, DBSIZE) in RESP2 over a
// connection, pipelined. The command stays within the standard library and
// the AWS SDK, as the library does; a Redis driver would be a dependency
// of every user of the root module.

// redisTimeout bounds each round trip: a server that stops answering
// fails the import, which resumes from its state file.
const redisTimeout = 30 * time.Second

// redisConn is one connection to a Redis server.
type redisConn struct {
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
	stop func() bool // of the context.AfterFunc that closes conn
}

// redisError is an error reply of the server ("-ERR ...", "-WRONGTYPE ...").
type redisError string

func (e redisError) Error() string { return "redis: " + string(e) }

// redisTarget is where -redis points: host:port, or a URL
// redis://[user:password@]host:port[/db], rediss:// for TLS.
type redisTarget struct {
	addr           string
	tls            bool
	user, password string
	db             int
}

// parseRedis reads -redis.
func parseRedis(s string) (redisTarget, error) {
	if !strings.Contains(s, "://") {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return redisTarget{}, fmt.Errorf("-redis %q: want HOST:PORT or redis://[USER:PASSWORD@]HOST:PORT[/DB]", s)
		}
		return redisTarget{addr: s}, nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Port() == "" {
		// url's error quotes the URL, password and all: not shown.
		return redisTarget{}, errors.New("-redis: want HOST:PORT or redis://[USER:PASSWORD@]HOST:PORT[/DB] (rediss:// for TLS)")
	}
	t := redisTarget{addr: u.Host, tls: u.Scheme == "rediss"}
	if u.User != nil {
		t.user = u.User.Username()
		t.password, _ = u.User.Password()
	}
	if db := strings.Trim(u.Path, "/"); db != "" {
		if t.db, err = strconv.Atoi(db); err != nil || t.db < 0 {
			return redisTarget{}, fmt.Errorf("-redis: database %q is not a number", db)
		}
	}
	return t, nil
}

// String shows the target without its password, for output and the state
// file.
func (t redisTarget) String() string {
	scheme := "redis"
	if t.tls {
		scheme = "rediss"
	}
	return fmt.Sprintf("%s://%s/%d", scheme, t.addr, t.db)
}

// dialRedis connects to t, authenticates and selects its database. ctx
// ending closes the connection.
func dialRedis(ctx context.Context, t redisTarget) (*redisConn, error) {
	d := &net.Dialer{Timeout: redisTimeout}
	var conn net.Conn
	var err error
	if t.tls {
		host, _, _ := net.SplitHostPort(t.addr)
		conn, err = (&tls.Dialer{NetDialer: d, Config: &tls.Config{ServerName: host}}).DialContext(ctx, "tcp", t.addr)
	} else {
		conn, err = d.DialContext(ctx, "tcp", t.addr)
	}
	if err != nil {
		return nil, fmt.Errorf("connect to Redis at %s: %w", t.addr, err)
	}
	c := &redisConn{conn: conn, r: bufio.NewReader(conn), w: bufio.NewWriter(conn)}
	c.stop = context.AfterFunc(ctx, func() { conn.Close() })
	var setup [][]string
	switch {
	case t.password != "" && t.user != "":
		setup = append(setup, []string{"AUTH", t.user, t.password})
	case t.password != "":
		setup = append(setup, []string{"AUTH", t.password})
	}
	if t.db != 0 {
		setup = append(setup, []string{"SELECT", strconv.Itoa(t.db)})
	}
	for _, cmd := range setup {
		if _, err := c.do(cmd...); err != nil {
			c.Close()
			return nil, fmt.Errorf("redis %s: %w", cmd[0], err)
		}
	}
	return c, nil
}

func (c *redisConn) Close() error {
	c.stop()
	return c.conn.Close()
}

// do sends one command and reads its reply; an error reply is returned as
// a redisError.
func (c *redisConn) do(args ...string) (any, error) {
	replies, err := c.pipeline([][]string{args})
	if err != nil {
		return nil, err
	}
	if e, ok := replies[0].(redisError); ok {
		return nil, e
	}
	return replies[0], nil
}

// pipeline sends cmds at once and reads their replies, in order. An error
// reply is a redisError among the replies; err is for the connection.
func (c *redisConn) pipeline(cmds [][]string) ([]any, error) {
	c.conn.SetDeadline(time.Now().Add(redisTimeout))
	for _, args := range cmds {
		fmt.Fprintf(c.w, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(c.w, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	if err := c.w.Flush(); err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	replies := make([]any, len(cmds))
	for i := range cmds {
		v, err := c.read()
		if err != nil {
			return nil, fmt.Errorf("redis: %w", err)
		}
		replies[i] = v
	}
	return replies, nil
}

// maxBulk bounds a bulk reply: Redis's own limit for a string (512 MB)
// is far above any session.
const maxBulk = 512 << 20

// read reads one RESP2 reply: a string (simple), redisError, int64, []byte
// (bulk; nil for the null bulk), or []any (array; nil for the null array).
func (c *redisConn) read() (any, error) {
	line, err := c.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || !strings.HasSuffix(line, "\r\n") {
		return nil, errors.New("malformed reply")
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+':
		return body, nil
	case '-':
		return redisError(body), nil
	case ':':
		n, err := strconv.ParseInt(body, 10, 64)
		if err != nil {
			return nil, errors.New("malformed integer reply")
		}
		return n, nil
	case '$':
		n, err := strconv.Atoi(body)
		switch {
		case err != nil || n < -1 || n > maxBulk:
			return nil, errors.New("malformed bulk reply")
		case n == -1:
			return []byte(nil), nil
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, b); err != nil {
			return nil, err
		}
		return b[:n], nil
	case '*':
		n, err := strconv.Atoi(body)
		switch {
		case err != nil || n < -1:
			return nil, errors.New("malformed array reply")
		case n == -1:
			return []any(nil), nil
		}
		a := make([]any, n)
		for i := range a {
			if a[i], err = c.read(); err != nil {
				return nil, err
			}
		}
		return a, nil
	}
	return nil, fmt.Errorf("unknown reply type %q", kind)
}

// scan runs one SCAN from cursor over the keys that match pattern, and
// returns the next cursor ("0" at the end) and the keys.
func (c *redisConn) scan(cursor, pattern string, count int) (string, []string, error) {
	v, err := c.do("SCAN", cursor, "MATCH", pattern, "COUNT", strconv.Itoa(count))
	if err != nil {
		return "", nil, err
	}
	a, _ := v.([]any)
	if len(a) != 2 {
		return "", nil, errors.New("redis: malformed SCAN reply")
	}
	next, _ := a[0].([]byte)
	list, _ := a[1].([]any)
	keys := make([]string, 0, len(list))
	for _, k := range list {
		b, ok := k.([]byte)
		if !ok {
			return "", nil, errors.New("redis: malformed SCAN reply")
		}
		keys = append(keys, string(b))
	}
	return string(next), keys, nil
}

// globEscape escapes the characters that SCAN's MATCH pattern gives a
// meaning, so that prefix matches itself.
func globEscape(prefix string) string {
	var b strings.Builder
	for _, r := range prefix {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
