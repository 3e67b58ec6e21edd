package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// progress shows how far a scan has come on stderr: a bar that redraws
// itself on a terminal, a plain line every lineEvery otherwise, and
// nothing with -json.
type progress struct {
	w     io.Writer
	mode  progressMode
	label string
	total int64 // the table's item count as DescribeTable gives it; 0 if unknown
	now   func() time.Time
	// status says what the scan has done so far: items scanned, and the
	// rest of the line.
	status func() (scanned int64, rest string)

	mu    sync.Mutex
	drawn time.Time // when it last drew
	width int       // of the bar last drawn, to clear it
}

type progressMode int

const (
	progressNone progressMode = iota
	progressLines
	progressBar
)

const (
	barEvery  = 100 * time.Millisecond
	lineEvery = 10 * time.Second
	barWidth  = 30
)

func (e *env) newProgress(o *options, label string, total int64, status func() (int64, string)) *progress {
	p := &progress{w: e.stderr, label: label, total: total, now: e.now, status: status, drawn: e.now()}
	switch {
	case o.json:
		p.mode = progressNone
	case e.isTerminal(e.stderr):
		p.mode = progressBar
	default:
		p.mode = progressLines
	}
	return p
}

// update shows the progress, if it is time to.
func (p *progress) update() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	switch p.mode {
	case progressBar:
		if now.Sub(p.drawn) >= barEvery {
			p.drawBar(false)
			p.drawn = now
		}
	case progressLines:
		if now.Sub(p.drawn) >= lineEvery {
			p.line()
			p.drawn = now
		}
	}
}

// done shows the final state and ends the bar's line.
func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.mode {
	case progressBar:
		p.drawBar(true)
		fmt.Fprintln(p.w)
	case progressLines:
		p.line()
	}
}

func (p *progress) drawBar(finished bool) {
	scanned, rest := p.status()
	fraction := 0.0
	switch {
	case finished:
		fraction = 1
	case p.total > 0:
		// DescribeTable's count is hours old: never claim the end early.
		fraction = min(float64(scanned)/float64(p.total), 0.99)
	}
	filled := int(fraction * barWidth)
	bar := strings.Repeat("=", filled) + strings.Repeat(" ", barWidth-filled)
	of := ""
	if p.total > 0 {
		of = " of ~" + thousands(p.total)
	}
	s := fmt.Sprintf("\r%s [%s] %3.0f%%  %s%s scanned, %s", p.label, bar, fraction*100, thousands(scanned), of, rest)
	pad := ""
	if n := len(s); n < p.width {
		pad = strings.Repeat(" ", p.width-n)
	}
	p.width = len(s)
	fmt.Fprint(p.w, s+pad)
}

func (p *progress) line() {
	scanned, rest := p.status()
	of := ""
	if p.total > 0 {
		of = " of ~" + thousands(p.total)
	}
	fmt.Fprintf(p.w, "%s: %s%s items scanned, %s\n", p.label, thousands(scanned), of, rest)
}
