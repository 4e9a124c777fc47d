package extreward

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/websocket"
)

// OpenEnv is an environment an OpenEnv server serves (grpo --environment-url URL), played as
// TRL 1.x users play one through their environment_factory's client: one session per rollout,
// a WebSocket to the server's /ws (OpenEnv's stateful sessions; its HTTP /reset and /step make
// a fresh environment per request), made as needed and reused across generation batches.
//
//   - Before each generation, session i is reset with rollout i's dataset row (all sessions at
//     once):
//     {"type": "reset", "data": row}; the server passes the row's columns that its reset
//     accepts as keyword arguments. Its observation's text (ObservationText) is appended to the
//     prompt's last message.
//   - The rollout has one tool, step, whose parameters are the server's action schema
//     (GET /schema); a call sends {"type": "step", "data": arguments} and its observation's text
//     is the tool's result. A step the server refuses (an action that fails validation, an
//     exception in the environment) is a failed tool call with the server's message, as a
//     raising tool method is in TRL; so is a step after the episode is done, which is not sent.
//   - The rollout's reward is the last reward the server reported in its episode (reset's or a
//     step's; NaN for none), logged under the environment's name (GET /metadata).
//
// A session that cannot be opened, a reset the server refuses, and a connection lost or silent
// past the timeout stop the run (the caller's loop.Fault) at the reset or at the reward.
type OpenEnv struct {
	// Name is the environment's name (its /metadata's name); Schema the step tool's.
	Name   string
	Schema json.RawMessage

	ws      string
	origin  string
	timeout time.Duration

	mu       sync.Mutex
	sessions []*envSession
}

type envSession struct {
	conn   *websocket.Conn
	reward float64
	done   bool
	broken error
}

// StepTool is the name of an OpenEnv environment's one tool.
const StepTool = "step"

// DialOpenEnv reads the environment server at rawURL (http:// or https://): its metadata and
// its action schema. timeout bounds each request and each message's answer (DefaultTimeout
// when ≤ 0).
func DialOpenEnv(rawURL string, timeout time.Duration) (*OpenEnv, error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not an http:// or https:// URL", rawURL)
	}
	base := strings.TrimSuffix(u.String(), "/")
	client := &http.Client{Timeout: timeout}
	var meta struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	}
	if err := getJSON(client, base+"/metadata", &meta); err != nil {
		return nil, err
	}
	var schemas struct {
		Action json.RawMessage `json:"action"`
	}
	if err := getJSON(client, base+"/schema", &schemas); err != nil {
		return nil, err
	}
	if len(schemas.Action) == 0 || string(schemas.Action) == "null" {
		return nil, fmt.Errorf("GET %s/schema: no action schema", base)
	}
	name := meta.Name
	if name == "" {
		name = u.Host
	}
	schema, err := stepSchema(name, meta.Description, schemas.Action)
	if err != nil {
		return nil, fmt.Errorf("GET %s/schema: %w", base, err)
	}
	ws := *u
	ws.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
	ws.Path = strings.TrimSuffix(u.Path, "/") + "/ws"
	return &OpenEnv{Name: name, Schema: schema, ws: ws.String(), origin: base, timeout: timeout}, nil
}

func getJSON(client *http.Client, url string, v any) error {
	resp, err := client.Get(url)
	if err != nil {
		return fmt.Errorf("environment server: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, firstLine(body))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: not the JSON of an OpenEnv server: %w", url, err)
	}
	return nil
}

// stepSchema is the step tool's schema in transformers' get_json_schema shape and key order: the
// action's fields in the server's order as its parameters (less OpenEnv's base metadata field
// and pydantic's titles), the action's docstring (else the environment's description) as its
// description.
func stepSchema(name, description string, action json.RawMessage) (json.RawMessage, error) {
	fields, err := objectFields(action)
	if err != nil {
		return nil, err
	}
	var props, required, defs json.RawMessage
	var desc string
	for _, f := range fields {
		switch f.Key {
		case "properties":
			props = f.Value
		case "required":
			required = f.Value
		case "$defs":
			defs = f.Value
		case "description":
			_ = json.Unmarshal(f.Value, &desc)
		}
	}
	pf, err := objectFields(props)
	if err != nil {
		return nil, fmt.Errorf("the action's properties: %w", err)
	}
	var params []field
	for _, p := range pf {
		if p.Key == "metadata" {
			continue
		}
		q, err := objectFields(p.Value)
		if err != nil {
			return nil, fmt.Errorf("action field %q: %w", p.Key, err)
		}
		q = slices.DeleteFunc(q, func(f field) bool { return f.Key == "title" })
		params = append(params, field{p.Key, marshalFields(q)})
	}
	if len(params) == 0 {
		return nil, fmt.Errorf("the action has no fields")
	}
	if desc == "" {
		desc = description
	}
	if desc == "" {
		desc = "Takes a step in the " + name + " environment."
	}
	str := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	ps := []field{{"type", str("object")}, {"properties", marshalFields(params)}}
	if len(required) > 0 && string(required) != "[]" {
		ps = append(ps, field{"required", required})
	}
	if len(defs) > 0 {
		ps = append(ps, field{"$defs", defs})
	}
	fn := []field{{"name", str(StepTool)}, {"description", str(strings.TrimSpace(desc))}, {"parameters", marshalFields(ps)}}
	return marshalFields([]field{{"type", str("function")}, {"function", marshalFields(fn)}}), nil
}

// field is one key of a JSON object, in its order.
type field struct {
	Key   string
	Value json.RawMessage
}

// objectFields are the keys of the JSON object raw, in order.
func objectFields(raw json.RawMessage) ([]field, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object: %s", firstLine(raw))
	}
	var out []field
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, field{t.(string), v})
	}
	return out, nil
}

// marshalFields is the JSON object of fields, in their order.
func marshalFields(fields []field) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range fields {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.Key)
		b.Write(k)
		b.WriteByte(':')
		var c bytes.Buffer
		if json.Compact(&c, f.Value) != nil {
			c.Reset()
			c.Write(f.Value)
		}
		b.Write(c.Bytes())
	}
	b.WriteByte('}')
	return b.Bytes()
}

// ObservationText is an observation's text for the model: the value of its one string field,
// else its JSON (keys sorted).
func ObservationText(obs map[string]any) string {
	if len(obs) == 1 {
		for _, v := range obs {
			if s, ok := v.(string); ok {
				return s
			}
		}
	}
	b, _ := json.Marshal(obs) // encoding/json sorts map keys
	return string(b)
}

// envReply is an OpenEnv /ws answer: an observation ({observation, reward, done}) or an error.
type envReply struct {
	Type string `json:"type"`
	Data struct {
		Observation map[string]any `json:"observation"`
		Reward      *float64       `json:"reward"`
		Done        bool           `json:"done"`
		Message     string         `json:"message"`
		Code        string         `json:"code"`
		Errors      []struct {
			Loc []any  `json:"loc"`
			Msg string `json:"msg"`
		} `json:"errors"`
	} `json:"data"`
}

// refusal is an error answer's text: its message, and each validation error's field and message.
func (r *envReply) refusal() string {
	msg := r.Data.Message
	for i, e := range r.Data.Errors {
		sep := "; "
		if i == 0 {
			sep = ": "
		}
		var loc []string
		for _, l := range e.Loc {
			loc = append(loc, fmt.Sprint(l))
		}
		msg += sep + strings.Join(loc, ".") + ": " + e.Msg
	}
	return msg
}

// exchange sends msg on s and reads the answer; a connection error marks s broken.
func (e *OpenEnv) exchange(s *envSession, msg map[string]any) (*envReply, error) {
	if s.broken != nil {
		return nil, s.broken
	}
	fail := func(err error) (*envReply, error) {
		s.broken = fmt.Errorf("environment %s: %s: %w", e.Name, e.ws, err)
		return nil, s.broken
	}
	if err := s.conn.SetDeadline(time.Now().Add(e.timeout)); err != nil {
		return fail(err)
	}
	b, err := json.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("environment %s: encoding the %s message: %w", e.Name, msg["type"], err)
	}
	if err := websocket.Message.Send(s.conn, string(b)); err != nil {
		// A server that refused the session (capacity) has answered and closed before it.
		var raw string
		var r envReply
		if websocket.Message.Receive(s.conn, &raw) == nil && json.Unmarshal([]byte(raw), &r) == nil && r.Type == "error" {
			return &r, nil
		}
		return fail(err)
	}
	var raw string
	if err := websocket.Message.Receive(s.conn, &raw); err != nil {
		return fail(err)
	}
	var r envReply
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return fail(fmt.Errorf("an answer that is not JSON: %s", firstLine([]byte(raw))))
	}
	if r.Type != "observation" && r.Type != "error" {
		return fail(fmt.Errorf("an answer of type %q to %s", r.Type, msg["type"]))
	}
	return &r, nil
}

// Reset resets session i with rows[i], opening the sessions it lacks, and returns each one's
// observation text (nil for an empty one).
func (e *OpenEnv) Reset(rows []map[string]any) ([]*string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for len(e.sessions) < len(rows) {
		cfg, err := websocket.NewConfig(e.ws, e.origin)
		if err != nil {
			return nil, fmt.Errorf("environment %s: %w", e.Name, err)
		}
		cfg.Dialer = &net.Dialer{Timeout: e.timeout}
		conn, err := websocket.DialConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("environment %s: session %d of %d: %w", e.Name, len(e.sessions)+1, len(rows), err)
		}
		e.sessions = append(e.sessions, &envSession{conn: conn})
	}
	// The sessions reset at once (an environment's reset may take seconds); the first error by
	// session is the answer.
	out := make([]*string, len(rows))
	errs := make([]error, len(rows))
	var wg sync.WaitGroup
	for i, row := range rows {
		wg.Go(func() { out[i], errs[i] = e.reset(i, row, len(rows)) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// reset resets session i of n with row and returns its observation's text (nil for an empty one).
func (e *OpenEnv) reset(i int, row map[string]any, n int) (*string, error) {
	s := e.sessions[i]
	s.reward, s.done = math.NaN(), false
	r, err := e.exchange(s, map[string]any{"type": "reset", "data": row})
	if err != nil {
		return nil, err
	}
	if r.Type == "error" {
		msg := r.refusal()
		if r.Data.Code == "CAPACITY_REACHED" {
			msg += fmt.Sprintf(" (a generation batch needs %d sessions at once: start the server with max_concurrent_envs ≥ %d)", n, n)
		}
		return nil, fmt.Errorf("reset of session %d refused: %s", i+1, msg)
	}
	s.note(r)
	if t := ObservationText(r.Data.Observation); len(r.Data.Observation) > 0 && t != "" {
		return &t, nil
	}
	return nil, nil
}

func (s *envSession) note(r *envReply) {
	if r.Data.Reward != nil {
		s.reward = *r.Data.Reward
	}
	s.done = r.Data.Done
}

// Call takes a step in session i with args as the action; the observation's text is the result.
func (e *OpenEnv) Call(i int, method string, args map[string]any) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if method != StepTool || i < 0 || i >= len(e.sessions) {
		return "", fmt.Errorf("environment %s has no session %d tool %s", e.Name, i, method)
	}
	s := e.sessions[i]
	if s.done {
		return "", fmt.Errorf("the episode is done")
	}
	if args == nil {
		args = map[string]any{}
	}
	r, err := e.exchange(s, map[string]any{"type": "step", "data": args})
	if err != nil {
		return "", err
	}
	if r.Type == "error" {
		return "", fmt.Errorf("%s", r.refusal())
	}
	s.note(r)
	return ObservationText(r.Data.Observation), nil
}

// Rewards are sessions 0..n-1's last rewards (NaN for a session not yet reset); a session whose
// connection failed is the error.
func (e *OpenEnv) Rewards(n int) ([]float64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]float64, n)
	for i := range out {
		if i >= len(e.sessions) {
			out[i] = math.NaN()
			continue
		}
		s := e.sessions[i]
		if s.broken != nil {
			return nil, s.broken
		}
		out[i] = s.reward
	}
	return out, nil
}

// Close ends every session: a close message, then the connection.
func (e *OpenEnv) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range e.sessions {
		if s.broken == nil {
			_ = s.conn.SetDeadline(time.Now().Add(time.Second))
			_ = websocket.Message.Send(s.conn, `{"type": "close"}`)
		}
		_ = s.conn.Close()
	}
	e.sessions = nil
	return nil
}
