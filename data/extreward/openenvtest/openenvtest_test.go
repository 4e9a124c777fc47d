package openenvtest

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/net/websocket"
)

// The twin answers every message of the real server's record (openenv-core 0.3.0's create_app,
// scripts/reference/openenv_transcript.py) with the real server's answer, and refuses a session
// past its capacity with the real server's words.
func TestTwin_AnswersAsTheRealServer(t *testing.T) {
	rec, err := Record()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Start(2)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ws := "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"
	n := 0
	for si, session := range rec.Sessions {
		conn, err := websocket.Dial(ws, "", srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		for mi, m := range session {
			if err := websocket.Message.Send(conn, string(m.Send)); err != nil {
				t.Fatal(err)
			}
			var got string
			if err := websocket.Message.Receive(conn, &got); err != nil {
				t.Fatal(err)
			}
			if !sameJSON(t, got, string(m.Receive)) {
				t.Errorf("session %d message %d %s: the twin answers\n%s\nthe server\n%s", si, mi, m.Send, got, m.Receive)
			}
			n++
		}
		_ = conn.Close()
	}
	if n < 9 {
		t.Fatalf("the record has %d messages", n)
	}
	var open []*websocket.Conn
	for range 2 {
		c, err := websocket.Dial(ws, "", srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		open = append(open, c)
	}
	if err := websocket.Message.Send(open[0], `{"type": "reset", "data": {}}`); err != nil { // both sessions counted
		t.Fatal(err)
	}
	var ack string
	if err := websocket.Message.Receive(open[0], &ack); err != nil {
		t.Fatal(err)
	}
	c, err := websocket.Dial(ws, "", srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got string
	if err := websocket.Message.Receive(c, &got); err != nil {
		t.Fatal(err)
	}
	if !sameJSON(t, got, string(rec.PastCapacity)) {
		t.Errorf("past capacity: the twin answers %s, the server %s", got, rec.PastCapacity)
	}
}

func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}
