package extreward

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/posttrain/posttrain/data/chat"
)

// needPython skips where no python3 is installed, except in CI (.ci/run installs it).
func needPython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is not on PATH")
		}
		t.Skip("python3 is not on PATH")
	}
}

// lockedBuffer is the worker's stderr in a test: written by exec's copying goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// waitFor returns the buffer's text once it contains s, or after 10 s.
func (l *lockedBuffer) waitFor(s string) string {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		l.mu.Lock()
		got := l.b.String()
		l.mu.Unlock()
		if strings.Contains(got, s) || time.Now().After(deadline) {
			return got
		}
	}
}

func start(t *testing.T, timeout time.Duration, specs ...string) ([]*Func, *lockedBuffer) {
	t.Helper()
	needPython(t)
	stderr := &lockedBuffer{}
	w, funcs, err := Start("", specs, stderr, timeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return funcs, stderr
}

func call(n int) Call {
	c := Call{Columns: map[string][]any{"answer": make([]any, n), "prompt": make([]any, n)}, State: State{GlobalStep: 3, Epoch: 0.25, MaxSteps: 12}}
	for i := range n {
		c.Prompts = append(c.Prompts, "Q"+strings.Repeat("x", i))
		c.Completions = append(c.Completions, strings.Repeat("y", 3*i))
		c.CompletionIDs = append(c.CompletionIDs, make([]int32, i+1))
		c.Columns["answer"][i] = float64(i)
		c.Query = append(c.Query, "")
	}
	return c
}

func TestWorker_CallsAsTRL(t *testing.T) {
	funcs, stderr := start(t, 0, "testdata/rewards.py:reward_len", "testdata/rewards.py:echo_kwargs", "testdata/rewards.py:state_fields", "testdata/rewards.py:not_scored")
	names := []string{funcs[0].Name, funcs[1].Name, funcs[2].Name, funcs[3].Name}
	if strings.Join(names, ",") != "reward_len,echo_kwargs,state_fields,not_scored" {
		t.Fatalf("names %v", names)
	}
	c := call(3)
	got, err := funcs[0].Score(c)
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{-20, -17, -14}; !equal(got, want) {
		t.Errorf("reward_len = %v, want %v", got, want)
	}
	if got := stderr.waitFor("must not break the protocol"); !strings.Contains(got, "must not break the protocol") {
		t.Errorf("the function's print did not reach stderr: %q", got)
	}
	// Two calls: the module's state lives on between them, as in TRL's process.
	for k := 1; k <= 2; k++ {
		got, err = funcs[1].Score(c)
		if err != nil {
			t.Fatal(err)
		}
		var want []float64
		for i := range 3 {
			want = append(want, float64(3*i)+100*float64(i+1)+10000*float64(i)+3e6+1e7*float64(k)+0.5)
		}
		if !equal(got, want) {
			t.Errorf("call %d: echo_kwargs = %v, want %v", k, got, want)
		}
	}
	// Conversational prompts and completions reach the function as message lists.
	cc := call(2)
	for i := range 2 {
		p, comp := ConversationalCompletion([]chat.Message{{Role: "user", Content: "Qhi"}}, strings.Repeat("z", i+1))
		cc.Prompts[i], cc.Completions[i] = p, comp
	}
	got, err = funcs[1].Score(cc)
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{1 + 100 + 3e6 + 3e7 + 0.5, 2 + 200 + 10000 + 3e6 + 3e7 + 0.5}; !equal(got, want) {
		t.Errorf("conversational echo_kwargs = %v, want %v", got, want)
	}
	if got, err = funcs[2].Score(c); err != nil || !equal(got, []float64{12.25, 12.25, 12.25}) {
		t.Errorf("state_fields = %v, %v", got, err)
	}
	got, err = funcs[3].Score(c)
	if err != nil || got[0] != 1 || !math.IsNaN(got[1]) || got[2] != 1 {
		t.Errorf("not_scored = %v, %v: want 1, NaN (None), 1", got, err)
	}
}

func equal(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestWorker_Failures(t *testing.T) {
	cases := []struct{ spec, want string }{
		{"testdata/rewards.py:boom", "raised ZeroDivisionError: division by zero (" + abs(t, "testdata/rewards.py") + ":35)"},
		{"testdata/rewards.py:wrong_count", "raised ValueError: returned 1 rewards for 3 completions"},
		{"testdata/rewards.py:nan", "raised ValueError: returned nan at index 0 (use None for a completion it does not score)"},
		{"testdata/rewards.py:text", "raised TypeError: returned a str at index 0, not a number"},
	}
	for _, tc := range cases {
		funcs, _ := start(t, 0, tc.spec)
		_, err := funcs[0].Score(call(3))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: error %v, want %q", tc.spec, err, tc.want)
		}
		// The worker survives a function's exception.
		if _, err2 := funcs[0].Score(call(3)); err2 == nil || err2.Error() != err.Error() {
			t.Errorf("%s: second call: %v", tc.spec, err2)
		}
	}
}

func abs(t *testing.T, p string) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd + "/" + p
}

func TestWorker_CrashAndTimeout(t *testing.T) {
	funcs, _ := start(t, 0, "testdata/rewards.py:crash")
	_, err := funcs[0].Score(call(2))
	if err == nil || !strings.Contains(err.Error(), "the Python worker exited (exit status 3) during the call: about to exit") {
		t.Errorf("crash: %v", err)
	}
	if _, err2 := funcs[0].Score(call(2)); err2 == nil || err2.Error() != err.Error() {
		t.Errorf("after the crash: %v", err2)
	}
	// The timeout covers the worker's start too: 3 s leaves Python's start on a loaded 2-core
	// machine (over 500 ms seen) out of the call's budget.
	funcs, _ = start(t, 3*time.Second, "testdata/rewards.py:slow")
	t0 := time.Now()
	_, err = funcs[0].Score(call(2))
	if err == nil || err.Error() != "no answer in 3s during the call (--reward-timeout): the Python worker was stopped" {
		t.Errorf("timeout: %v", err)
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Errorf("the timeout took %s", d)
	}
}

func TestWorker_LoadErrors(t *testing.T) {
	needPython(t)
	cases := []struct{ spec, want string }{
		{"testdata/rewards.py:missing", "reward worker: loading testdata/rewards.py:missing: AttributeError: " + abs(t, "testdata/rewards.py") + " has no function 'missing'"},
		{"testdata/rewards.py:not_a_function", "reward worker: loading testdata/rewards.py:not_a_function: TypeError: rewards.not_a_function is a int, not a function"},
		{"testdata/nofile.py:f", "reward worker: loading testdata/nofile.py:f: FileNotFoundError: [Errno 2] No such file or directory: '" + abs(t, "testdata/nofile.py") + "'"},
		{"no_such_module.f", "reward worker: loading no_such_module.f: ModuleNotFoundError: No module named 'no_such_module'"},
	}
	for _, tc := range cases {
		_, _, err := Start("", []string{tc.spec}, io.Discard, 0)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: error %v\nwant %q", tc.spec, err, tc.want)
		}
	}
	if _, _, err := Start("/no/such/python3", []string{"a.py:f"}, io.Discard, 0); err == nil || !strings.Contains(err.Error(), "reward worker: starting /no/such/python3") {
		t.Errorf("missing python: %v", err)
	}
}

func TestIsPythonSpec(t *testing.T) {
	for s, want := range map[string]bool{"rewards.py:reward_len": true, "dir/r.py:f": true, "trl.rewards.accuracy_reward": true,
		"my_lib.f": true, "random": false, "mult_exact": false, "r.py": false, "r.py:": false, "regex:a.b": false} {
		if IsPythonSpec(s) != want {
			t.Errorf("IsPythonSpec(%q) = %v", s, !want)
		}
	}
}

func TestURL_PostsTheCall(t *testing.T) {
	var got map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &got); err != nil {
			t.Error(err)
		}
		switch r.URL.Path {
		case "/get_reward":
			w.Write([]byte(`{"rewards": [1.5, null, -2]}`))
		case "/short":
			w.Write([]byte(`{"rewards": [1]}`))
		case "/none":
			w.Write([]byte(`{"scores": [1, 2, 3]}`))
		default:
			http.Error(w, "no such route", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	f, err := NewURL(srv.URL+"/get_reward", 0)
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "get_reward" {
		t.Errorf("name %q", f.Name)
	}
	c := call(3)
	c.Query = []string{"Qa", "Qb", "Qc"}
	r, err := f.Score(c)
	if err != nil || r[0] != 1.5 || !math.IsNaN(r[1]) || r[2] != -2 {
		t.Fatalf("rewards %v, %v", r, err)
	}
	for _, k := range []string{"prompts", "completions", "completion_ids", "trainer_state", "query", "answer"} {
		if _, ok := got[k]; !ok {
			t.Errorf("the request lacks %q: %v", k, got)
		}
	}
	if _, ok := got["prompt"]; ok {
		t.Errorf("the request passes the prompt column, which TRL drops")
	}
	if st := got["trainer_state"].(map[string]any); st["global_step"] != 3.0 {
		t.Errorf("trainer_state %v", st)
	}
	for path, want := range map[string]string{
		"/short": "returned 1 rewards for 3 completions",
		"/none":  `answered "{\"scores\": [1, 2, 3]}", with no "rewards" list`,
		"/gone":  "answered 404 Not Found: \"no such route\"",
	} {
		f, _ := NewURL(srv.URL+path, 0)
		if _, err := f.Score(c); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", path, err, want)
		}
	}
	if _, err := NewURL("localhost:8000", 0); err == nil {
		t.Error("a URL with no scheme was accepted")
	}
}

// A dotted module.func (TRL's grpo.py form) is imported from the current directory.
func TestWorker_DottedModule(t *testing.T) {
	funcs, _ := start(t, 0, "testdata.rewards.reward_len")
	if funcs[0].Name != "reward_len" {
		t.Errorf("name %q", funcs[0].Name)
	}
	got, err := funcs[0].Score(call(2))
	if err != nil || !equal(got, []float64{-20, -17}) {
		t.Errorf("reward_len = %v, %v", got, err)
	}
}

// Python tools: each schema is transformers' get_json_schema of the function, keys in its order
// (testdata/tool_schemas.json, scripts/reference/tool_schemas.py); a call gives str() of the
// result, a raised exception its str() as the error (TRL's {"error": str(e)}); a call past the
// timeout fails and the next call runs in a new worker.
func TestPyTools_SchemasAndCalls(t *testing.T) {
	needPython(t)
	names, specs, err := ExpandToolSpecs([]string{"testdata/tools.py:multiply", "lookup", "convert", "fails", "slow", "calculator"},
		[]string{"calculator"})
	if err != nil || !slices.Equal(names, []string{"calculator"}) || len(specs) != 5 || specs[1] != "testdata/tools.py:lookup" {
		t.Fatalf("ExpandToolSpecs: %v %v %v", names, specs, err)
	}
	if _, _, err := ExpandToolSpecs([]string{"search"}, []string{"calculator"}); err == nil || !strings.Contains(err.Error(), `no tool "search"`) {
		t.Errorf("an unknown bare name: %v", err)
	}
	pt, err := StartTools("", specs, &lockedBuffer{}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer pt.Close()
	raw, err := os.ReadFile("testdata/tool_schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]json.RawMessage
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	for i, name := range pt.Names {
		var a, b bytes.Buffer
		if err := json.Compact(&a, want[name]); err != nil {
			t.Fatal(err)
		}
		if err := json.Compact(&b, pt.Schema[i]); err != nil {
			t.Fatal(err)
		}
		if a.String() != b.String() {
			t.Errorf("%s's schema\n%s\nwant (transformers' get_json_schema)\n%s", name, b.String(), a.String())
		}
	}
	for _, c := range []struct {
		tool       int
		args       map[string]any
		want, fail string
	}{
		{0, map[string]any{"a": 48213, "b": 9127}, "440040051", ""},
		{1, map[string]any{"key": "e"}, "0.5", ""},
		{3, map[string]any{"x": 3}, "", "no value for 3"},
		{0, map[string]any{"a": 1}, "", "multiply() missing 1 required positional argument: 'b'"},
		{4, map[string]any{"seconds": 5}, "", "no answer in 2s during the tool call"},
		{0, map[string]any{"a": 6, "b": 7}, "42", ""}, // a new worker after the timeout
	} {
		got, err := pt.Call(c.tool, c.args)
		if c.fail != "" {
			if err == nil || !strings.Contains(err.Error(), c.fail) {
				t.Errorf("%s(%v): %q, %v; want the error %q", pt.Names[c.tool], c.args, got, err, c.fail)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s(%v) = %q, %v; want %q", pt.Names[c.tool], c.args, got, err, c.want)
		}
	}
}

// An environment class (TRL 1.x's environment_factory): its public methods but reset and
// get_reward are its tools, with transformers' schemas; an instance per rollout, reset with its
// row (an observation string, or None), its methods called on that instance, get_reward per
// rollout; a class without reset, a reset that raises and a method's exception are reported.
func TestPyEnv(t *testing.T) {
	needPython(t)
	env, err := StartEnv("", "testdata/envs.py:Counter", &lockedBuffer{}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	raw, err := os.ReadFile("testdata/tool_schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]json.RawMessage
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	if len(env.Schemas) == 1 {
		_ = json.Compact(&a, want["Counter.add"])
		_ = json.Compact(&b, env.Schemas[0])
	}
	if env.Name != "Counter" || !slices.Equal(env.Methods, []string{"add"}) || !env.HasReward || a.String() != b.String() {
		t.Fatalf("Counter: %s %v reward %v, schemas %s, want %s", env.Name, env.Methods, env.HasReward, b.String(), a.String())
	}
	obs, err := env.Reset([]map[string]any{{"target": 2}, {"target": 5}, {"prompt": "x"}})
	if err != nil || len(obs) != 3 || *obs[0] != " Reach 2." || *obs[1] != " Reach 5." || *obs[2] != " Reach 3." {
		t.Fatalf("reset: %v %v", obs, err)
	}
	for _, c := range []struct {
		env  int
		n    any
		want string
	}{{0, 2, "2"}, {1, 4, "4"}, {1, 1, "5"}, {2, 1, "1"}} {
		if got, err := env.Call(c.env, "add", map[string]any{"n": c.n}); err != nil || got != c.want {
			t.Errorf("env %d add(%v) = %q, %v; want %q", c.env, c.n, got, err, c.want)
		}
	}
	if _, err := env.Call(0, "add", map[string]any{"n": 500}); err == nil || err.Error() != "at most 100 at a time" {
		t.Errorf("a method's exception: %v", err)
	}
	if r, err := env.Rewards(3); err != nil || !slices.Equal(r, []float64{1, 1, 0}) {
		t.Errorf("rewards %v, %v", r, err)
	}
	// A new batch reuses the instances, reset.
	if _, err := env.Reset([]map[string]any{{"target": 1}}); err != nil {
		t.Fatal(err)
	}
	if r, err := env.Rewards(1); err != nil || r[0] != 0 {
		t.Errorf("after reset: %v, %v", r, err)
	}
	silent, err := StartEnv("", "testdata/envs.py:Silent", &lockedBuffer{}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	if obs, err := silent.Reset([]map[string]any{{}}); err != nil || obs[0] != nil || silent.HasReward || !slices.Equal(silent.Methods, []string{"ping"}) {
		t.Errorf("Silent: %v %v %v %v", obs, err, silent.HasReward, silent.Methods)
	}
	if _, err := StartEnv("", "testdata/envs.py:NoReset", &lockedBuffer{}, 2*time.Second); err == nil || !strings.Contains(err.Error(), "has no reset method") {
		t.Errorf("NoReset: %v", err)
	}
	bad, err := StartEnv("", "testdata/envs.py:BadReset", &lockedBuffer{}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if _, err := bad.Reset([]map[string]any{{}}); err == nil || !strings.Contains(err.Error(), "reset raised RuntimeError: cannot reset (") || !strings.Contains(err.Error(), "envs.py:") {
		t.Errorf("BadReset: %v", err)
	}
}
