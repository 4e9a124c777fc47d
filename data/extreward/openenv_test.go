package extreward

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/posttrain/posttrain/data/extreward/openenvtest"
)

// grpo --environment-url's client against the twin of the real OpenEnv server (openenvtest,
// whose answers are the real server's record), and against the real server itself (openenv-core
// 0.3.0 under uvicorn) where `make reference-env` made its venv: the step tool's schema from the
// action's, reset with each rollout's row, observations as text, a refused action as a failed
// call with pydantic's words, no step past the episode's end, each session's last reward, a
// second batch on the same sessions, and a batch wider than the server's capacity refused with
// what to change.
func TestOpenEnv_Client(t *testing.T) {
	srv, err := openenvtest.Start(2)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	t.Run("twin", func(t *testing.T) { openEnvChecks(t, srv.URL) })
	py := filepath.Join("..", "..", ".venv-reference", "openenv", "bin", "python")
	if _, err := os.Stat(py); err != nil {
		t.Logf("the real server's run skipped: no %s (make reference-env)", py)
		return
	}
	t.Run("openenv-core", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		cmd := exec.Command(py, filepath.Join("..", "..", "scripts", "reference", "openenv_transcript.py"), "--serve", fmt.Sprint(port), "2")
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		url := fmt.Sprintf("http://127.0.0.1:%d", port)
		for i := 0; ; i++ {
			if resp, err := http.Get(url + "/health"); err == nil {
				resp.Body.Close()
				break
			}
			if i > 300 {
				t.Fatal("the OpenEnv server did not start")
			}
			time.Sleep(50 * time.Millisecond)
		}
		openEnvChecks(t, url)
	})
}

func openEnvChecks(t *testing.T, url string) {
	env, err := DialOpenEnv(url, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	if env.Name != "multiply" {
		t.Errorf("name %q", env.Name)
	}
	want := `{"type":"function","function":{"name":"step","description":"Answers the multiplication question.","parameters":{"type":"object","properties":{"answer":{"description":"the product","type":"integer"}},"required":["answer"]}}}`
	if string(env.Schema) != want {
		t.Errorf("schema\n%s\nwant\n%s", env.Schema, want)
	}
	rows := []map[string]any{
		{"a": 12, "b": 34, "prompt": []map[string]any{{"role": "user", "content": "Use the step tool."}}, "answer": "408"},
		{"a": 7, "b": 6, "prompt": "seven times six"},
	}
	obs, err := env.Reset(rows)
	if err != nil {
		t.Fatal(err)
	}
	if len(obs) != 2 || obs[0] == nil || *obs[0] != "What is 12 times 34?" || obs[1] == nil || *obs[1] != "What is 7 times 6?" {
		t.Fatalf("observations %v", obs)
	}
	steps := []struct {
		i    int
		args map[string]any
		want string
		err  string
	}{
		{0, map[string]any{"answer": 400}, "400 is wrong.", ""},
		{0, map[string]any{"answer": "four hundred"}, "", "Invalid message: answer: Input should be a valid integer, unable to parse string as an integer"},
		{1, map[string]any{}, "", "Invalid message: answer: Field required"},
		{0, map[string]any{"answer": 408}, "Correct.", ""},
		{0, map[string]any{"answer": 408}, "", "the episode is done"},
		{1, map[string]any{"answer": "41"}, "41 is wrong.", ""},
	}
	for k, s := range steps {
		got, err := env.Call(s.i, StepTool, s.args)
		if got != s.want || (err == nil) != (s.err == "") || (err != nil && err.Error() != s.err) {
			t.Errorf("step %d %v: %q, %v; want %q, %q", k, s.args, got, err, s.want, s.err)
		}
	}
	r, err := env.Rewards(2)
	if err != nil || r[0] != 1 || r[1] != 0 {
		t.Errorf("rewards %v, %v; want [1 0]", r, err)
	}
	if _, err := env.Reset(rows[:1]); err != nil { // a new episode on the same session
		t.Fatal(err)
	}
	if r, err := env.Rewards(1); err != nil || !math.IsNaN(r[0]) {
		t.Errorf("rewards after a reset %v, %v; want [NaN]", r, err)
	}
	if got, err := env.Call(0, StepTool, map[string]any{"answer": 408}); got != "Correct." || err != nil {
		t.Errorf("the second episode: %q, %v", got, err)
	}
	_, err = env.Reset(append(rows, map[string]any{"a": 2, "b": 3}))
	if err == nil || !strings.Contains(err.Error(), "reset of session 3 refused: Server at capacity: 2/2 sessions active") ||
		!strings.Contains(err.Error(), "max_concurrent_envs ≥ 3") {
		t.Errorf("past the capacity: %v", err)
	}
	if _, err := DialOpenEnv(url+"/nothing", time.Second); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("not an OpenEnv server: %v", err)
	}
	if _, err := DialOpenEnv("localhost:8000", time.Second); err == nil || !strings.Contains(err.Error(), "is not an http:// or https:// URL") {
		t.Errorf("a URL without a scheme: %v", err)
	}
}
