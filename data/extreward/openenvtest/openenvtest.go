// Package openenvtest is the Go twin of the OpenEnv server that
// scripts/reference/openenv_transcript.py runs (openenv-core's create_app serving its Multiply
// environment), for the tests of grpo --environment-url: the same /metadata and /schema
// documents, the same answers on /ws. testdata/transcript.json is the real server's record;
// TestTwin_AnswersAsTheRealServer replays it to the twin.
package openenvtest

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"

	"golang.org/x/net/websocket"
)

//go:embed testdata/transcript.json
var transcriptJSON []byte

// Transcript is the real server's record: its documents, then each session's messages sent and
// answers received, and the answer to a session past its capacity.
type Transcript struct {
	Metadata json.RawMessage `json:"metadata"`
	Schema   json.RawMessage `json:"schema"`
	Sessions [][]struct {
		Send    json.RawMessage `json:"send"`
		Receive json.RawMessage `json:"receive"`
	} `json:"sessions"`
	PastCapacity json.RawMessage `json:"past_capacity"`
}

// Record is testdata/transcript.json.
func Record() (*Transcript, error) {
	var t Transcript
	if err := json.Unmarshal(transcriptJSON, &t); err != nil {
		return nil, fmt.Errorf("openenvtest: transcript.json: %w", err)
	}
	return &t, nil
}

// Server is the twin, serving at URL.
type Server struct {
	*httptest.Server
	mu     sync.Mutex
	active int
	max    int
}

// Start serves the twin with at most maxSessions WebSocket sessions at once.
func Start(maxSessions int) (*Server, error) {
	rec, err := Record()
	if err != nil {
		return nil, err
	}
	s := &Server{max: maxSessions}
	mux := http.NewServeMux()
	doc := func(b []byte) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(b)
		}
	}
	mux.HandleFunc("GET /metadata", doc(rec.Metadata))
	mux.HandleFunc("GET /schema", doc(rec.Schema))
	mux.HandleFunc("GET /health", doc([]byte(`{"status":"healthy"}`)))
	mux.Handle("/ws", websocket.Server{Handler: s.session})
	s.Server = httptest.NewServer(mux)
	return s, nil
}

func (s *Server) session(ws *websocket.Conn) {
	defer ws.Close()
	s.mu.Lock()
	if s.active >= s.max {
		s.mu.Unlock()
		send(ws, "error", map[string]any{"message": fmt.Sprintf("Server at capacity: %d/%d sessions active. Cannot accept new connections.", s.max, s.max),
			"code": "CAPACITY_REACHED", "active_sessions": s.max, "max_sessions": s.max})
		return
	}
	s.active++
	s.mu.Unlock()
	defer func() { s.mu.Lock(); s.active--; s.mu.Unlock() }()
	var env multiply
	for {
		var raw string
		if err := websocket.Message.Receive(ws, &raw); err != nil {
			return
		}
		var msg struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal([]byte(raw), &msg); err != nil {
			send(ws, "error", map[string]any{"message": "Invalid JSON: " + err.Error(), "code": "INVALID_JSON"})
			continue
		}
		switch msg.Type {
		case "reset":
			send(ws, "observation", env.reset(msg.Data))
		case "step":
			if errs := validate(msg.Data); len(errs) > 0 {
				send(ws, "error", map[string]any{"message": "Invalid message", "code": "VALIDATION_ERROR", "errors": errs})
				continue
			}
			send(ws, "observation", env.step(msg.Data["answer"]))
		case "close":
			return
		default:
			send(ws, "error", map[string]any{"message": "Unknown message type: " + msg.Type, "code": "UNKNOWN_TYPE"})
		}
	}
}

func send(ws *websocket.Conn, typ string, data map[string]any) {
	b, _ := json.Marshal(map[string]any{"type": typ, "data": data})
	_ = websocket.Message.Send(ws, string(b))
}

// multiply is the record's environment: reset(a, b) asks for a×b; an answer is rewarded 1.0 and
// ends the episode when right, 0.0 otherwise, and the third answer ends it.
type multiply struct{ a, b, steps int64 }

func (m *multiply) reset(row map[string]any) map[string]any {
	m.a, m.b, m.steps = pyInt(row["a"]), pyInt(row["b"]), 0
	return obs(fmt.Sprintf("What is %d times %d?", m.a, m.b), nil, false)
}

func (m *multiply) step(answer any) map[string]any {
	m.steps++
	n, _ := asInt(answer)
	if n == m.a*m.b {
		return obs("Correct.", 1.0, true)
	}
	return obs(fmt.Sprintf("%d is wrong.", n), 0.0, m.steps >= 3)
}

func obs(message string, reward any, done bool) map[string]any {
	return map[string]any{"observation": map[string]any{"message": message}, "reward": reward, "done": done}
}

// pyInt is Python's int() of a JSON value (0 for none).
func pyInt(v any) int64 {
	n, _ := asInt(v)
	return n
}

// asInt is pydantic's lax int: an integral number, or a string of one.
func asInt(v any) (int64, string) {
	switch x := v.(type) {
	case float64:
		if x != math.Trunc(x) {
			return 0, "int_from_float"
		}
		return int64(x), ""
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return 0, "int_parsing"
		}
		return n, ""
	case nil:
		return 0, ""
	}
	return 0, "int_type"
}

// validate is pydantic's errors for AnswerAction (answer: int, required; no other field but
// metadata).
func validate(data map[string]any) []map[string]any {
	pe := func(input any, loc, typ, msg string) map[string]any {
		return map[string]any{"input": input, "loc": []string{loc}, "msg": msg, "type": typ, "url": "https://errors.pydantic.dev/2.14/v/" + typ}
	}
	var errs []map[string]any
	if v, ok := data["answer"]; !ok {
		if data == nil {
			data = map[string]any{}
		}
		errs = append(errs, pe(data, "answer", "missing", "Field required"))
	} else if _, typ := asInt(v); typ != "" || v == nil {
		msg := map[string]string{"int_parsing": "Input should be a valid integer, unable to parse string as an integer",
			"int_from_float": "Input should be a valid integer, got a number with a fractional part"}[typ]
		if msg == "" {
			typ, msg = "int_type", "Input should be a valid integer"
		}
		errs = append(errs, pe(v, "answer", typ, msg))
	}
	for k, v := range data {
		if k != "answer" && k != "metadata" {
			errs = append(errs, pe(v, k, "extra_forbidden", "Extra inputs are not permitted"))
		}
	}
	return errs
}
