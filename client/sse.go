package client

import (
	"bufio"
	"errors"
	"io"
	"strconv"
	"strings"
)

// maxFrameLine bounds one line of a server-sent event stream: a frame
// carries a whole turn's result on one data line.
const maxFrameLine = 16 << 20

// sseEvent is one dispatched server-sent event.
type sseEvent struct {
	id    string
	hasID bool
	event string
	data  string
	// retry is the reconnection delay the server asked for, in ms (0: none).
	retry int
}

// sseReader splits a text/event-stream body into events (the WHATWG
// algorithm: data lines joined with newlines, comments skipped, an event
// dispatched at a blank line).
type sseReader struct {
	sc *bufio.Scanner
}

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxFrameLine)
	return &sseReader{sc: sc}
}

// next returns the next event; io.EOF when the stream ended cleanly between
// events, io.ErrUnexpectedEOF when it ended inside one.
func (r *sseReader) next() (sseEvent, error) {
	var (
		ev      sseEvent
		data    []string
		started bool
	)
	for r.sc.Scan() {
		line := r.sc.Text()
		if line == "" {
			if !started {
				continue
			}
			ev.data = strings.Join(data, "\n")
			return ev, nil
		}
		if strings.HasPrefix(line, ":") {
			continue // a comment: heartbeat or subscription notice
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		started = true
		switch field {
		case "data":
			data = append(data, value)
		case "id":
			if !strings.Contains(value, "\x00") {
				ev.id, ev.hasID = value, true
			}
		case "event":
			ev.event = value
		case "retry":
			if n, err := strconv.Atoi(value); err == nil && n >= 0 {
				ev.retry = n
			}
		}
	}
	if err := r.sc.Err(); err != nil {
		return sseEvent{}, err
	}
	if started {
		return sseEvent{}, io.ErrUnexpectedEOF
	}
	return sseEvent{}, io.EOF
}

// errStreamEnded is a turn stream that closed before its result frame.
var errStreamEnded = errors.New("holdpoint: the stream ended before the turn's result")
