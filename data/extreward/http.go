package extreward

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// NewURL is a reward server at rawURL (--reward-url; OpenRLHF's remote reward convention): each
// call POSTs one JSON object holding the keyword arguments a Python reward function receives
// (prompts, completions, completion_ids, trainer_state and every dataset column) and OpenRLHF's
// "query" (Call.Query), and the server answers
// {"rewards": [number or null, ...]}, null meaning "not scored". Logged as the URL path's last
// segment (rewards/NAME/mean), else the host.
func NewURL(rawURL string, timeout time.Duration) (*Func, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("reward_url %q is not an http:// or https:// URL", rawURL)
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	client := &http.Client{Timeout: timeout}
	f := &Func{Name: urlName(u.Host, u.Path), Spec: rawURL}
	f.score = func(c Call) ([]float64, error) {
		kw, err := c.kwargs()
		if err != nil {
			return nil, err
		}
		if _, ok := kw["query"]; ok {
			return nil, fmt.Errorf("the dataset's column %q has the name of a field posttrain sends itself: rename the column", "query")
		}
		if len(c.Query) != len(c.Completions) {
			return nil, fmt.Errorf("%d queries for %d completions", len(c.Query), len(c.Completions))
		}
		kw["trainer_state"] = c.State
		kw["query"] = c.Query
		body, err := json.Marshal(kw)
		if err != nil {
			return nil, fmt.Errorf("encoding the call: %w", err)
		}
		resp, err := client.Post(rawURL, "application/json", bytes.NewReader(body))
		if err != nil {
			if strings.Contains(err.Error(), "Client.Timeout") {
				return nil, fmt.Errorf("no answer from %s in %s (--reward-timeout)", rawURL, timeout)
			}
			return nil, err
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		if err != nil {
			return nil, fmt.Errorf("reading %s's answer: %w", rawURL, err)
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s answered %s: %s", rawURL, resp.Status, firstLine(data))
		}
		var rep struct {
			Rewards *[]*float64 `json:"rewards"`
		}
		if err := json.Unmarshal(data, &rep); err != nil {
			return nil, fmt.Errorf("%s answered %s, not JSON: %w", rawURL, firstLine(data), err)
		}
		if rep.Rewards == nil {
			return nil, fmt.Errorf("%s answered %s, with no \"rewards\" list", rawURL, firstLine(data))
		}
		return rewards(*rep.Rewards)
	}
	return f, nil
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return fmt.Sprintf("%q", s)
}
