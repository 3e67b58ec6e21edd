package main

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ddbsession/ddbsession"
)

// This file is "history": a user's security history.

var historyCommand = &command{
	path:    "history",
	args:    []string{"USER"},
	summary: "a user's security history, newest first",
	help: `Prints the user's security history, newest first, as Manager.History
reads it, every page: sign-ins (created; reauthenticated for a step-up;
new-device from a browser new to the user, Cookie.RememberDevices; adopted
from another store), failed sign-ins (sign-in-failed, counted by the hour,
at the hour's start), sign-outs (ended), revoked, revoked-all, evicted (a
session limit) and the table's last revoked-everyone. Events expire after the apps'
Limits.HistoryRetention (90 days by default). It needs a table with a sort
key.

` + userHelp + `

Output: a table of TIME (UTC), EVENT, SESSION (its ID; - for none), FROM
(the client's IP address), DEVICE (the User-Agent), METHODS (how a sign-in
proved itself) and COUNT (failed sign-ins in the hour). With -json:
{"user": {"pk", "sk"}, "events": [{"time", "event", "sessionId",
"address", "userAgent", "methods" (a list, [] for none), "count"}]}, times
in RFC 3339; empty strings and a count of 0 where the event has none. A
user without history gets an empty list: the command does not tell an
unknown user apart.

Example:
  ddbsession history -table app USER#alice -sk PROFILE`,
	flags:     userFlags,
	indexOnly: "a hash-only table has no per-user partition to keep a history in",
	run:       runHistory,
}

// historyEventJSON is one event of the history in JSON.
type historyEventJSON struct {
	Time      time.Time `json:"time"`
	Event     string    `json:"event"`
	SessionID string    `json:"sessionId"`
	Address   string    `json:"address"`
	UserAgent string    `json:"userAgent"`
	Methods   []string  `json:"methods"`
	Count     int       `json:"count"`
}

type historyJSON struct {
	User   userJSON           `json:"user"`
	Events []historyEventJSON `json:"events"`
}

func runHistory(ctx context.Context, e *env, c *command, o *options, args []string) int {
	user := o.userKey(args[0])
	_, m, code := e.connectManager(ctx, c, o)
	if m == nil {
		return code
	}
	out := historyJSON{User: userJSON{PK: user.PK, SK: user.SK}, Events: []historyEventJSON{}}
	page := ""
	for {
		events, next, err := m.History(ctx, user, page)
		if err != nil {
			return e.fail(c, o, err)
		}
		for _, ev := range events {
			out.Events = append(out.Events, historyEventOf(ev))
		}
		if next == "" {
			break
		}
		page = next
	}
	if o.json {
		writeJSON(e.stdout, out)
		return exitOK
	}
	if len(out.Events) == 0 {
		fmt.Fprintf(e.stdout, "%s has no history\n", userString(user))
		return exitOK
	}
	terminal := e.isTerminal(e.stdout)
	var rows [][]string
	for _, ev := range out.Events {
		device := cmp.Or(ev.UserAgent, "-")
		if terminal {
			device = truncate(device, deviceWidth)
		}
		count := "-"
		if ev.Count > 0 {
			count = strconv.Itoa(ev.Count)
		}
		rows = append(rows, []string{showTime(ev.Time), ev.Event, cmp.Or(ev.SessionID, "-"), cmp.Or(ev.Address, "-"), device,
			cmp.Or(strings.Join(ev.Methods, ","), "-"), count})
	}
	writeTable(e.stdout, []string{"TIME", "EVENT", "SESSION", "FROM", "DEVICE", "METHODS", "COUNT"}, rows)
	return exitOK
}

// historyEventOf is an event of the history in JSON.
func historyEventOf(ev ddbsession.Event) historyEventJSON {
	return historyEventJSON{
		Time: ev.Time.UTC(), Event: string(ev.Kind), SessionID: ev.SessionID, Address: ev.Address, UserAgent: ev.UserAgent,
		Methods: append([]string{}, ev.Methods...), Count: ev.Count,
	}
}
