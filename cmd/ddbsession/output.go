package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// This file writes what commands print: one JSON object with -json, an
// aligned table otherwise.

// writeJSON writes v as one indented JSON object.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeTable writes rows under a header, in aligned columns.
func writeTable(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// writeFields writes name-value pairs, aligned.
func writeFields(w io.Writer, pairs ...string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i := 0; i+1 < len(pairs); i += 2 {
		fmt.Fprintf(tw, "%s\t%s\n", pairs[i], pairs[i+1])
	}
	return tw.Flush()
}

// showTime is how a table shows a time: UTC, to the second.
func showTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// truncate shortens s to n runes, marking the cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// yesNo shows a boolean in a table.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// thousands writes n with thousands separators: 1234567 as 1,234,567.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// units shows capacity units, which come in halves.
func units(u float64) string {
	return strconv.FormatFloat(u, 'f', -1, 64)
}

// seconds rounds d to seconds as JSON carries it, to the millisecond.
func seconds(d time.Duration) float64 {
	return float64(d.Milliseconds()) / 1000
}
